//! Output files checked before any private work: a model trained and charged to the ledger,
//! then lost because its file cannot be written, is budget spent for nothing.

use std::path::Path;

use crate::error::{Error, Result};

/// Checks that a file can be written at `path` (given by `flag`): not a folder, a link to
/// nothing, a pipe or a budget ledger (or its key), in a folder that exists and takes new
/// files (written to by a probe file, removed at once). An existing file is left untouched
/// (it is replaced when the output is written).
///
/// # Errors
/// A usage error naming the flag and the path.
pub fn check_writable(flag: &str, path: &Path) -> Result<()> {
    let bad = |why: String| Err(Error::usage(format!("{flag} {}: {why}", path.display())));
    if path.is_dir() {
        return bad("is a folder; give a file name".into());
    }
    if std::fs::symlink_metadata(path).is_ok() {
        match std::fs::metadata(path) {
            Err(_) => return bad("is a link to nothing".into()),
            Ok(m) if !m.is_file() => return bad("is not a regular file".into()),
            Ok(_) if holds_a_ledger(path) => {
                return bad("holds a budget ledger or its key, which is never overwritten".into());
            }
            Ok(_) => {}
        }
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return bad(format!("folder {} does not exist", folder.display()));
    }
    let Some(name) = path.file_name() else {
        return bad("names no file".into());
    };
    let probe = folder.join(format!(
        ".{}.dpml-write-check-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => bad(format!("cannot be written ({e})")),
    }
}

/// Checks that `path` (given by `flag`) can hold output files: a folder, or nothing yet (it is
/// made when they are written).
///
/// # Errors
/// A usage error naming the flag and the path.
pub fn check_folder(flag: &str, path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(_) if !path.is_dir() => Err(Error::usage(format!(
            "{flag} {}: is a file, not a folder",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Whether `path` is a budget ledger (a SQLite database) or the key file beside one
/// (`LEDGER.key`).
fn holds_a_ledger(path: &Path) -> bool {
    let database = |p: &Path| {
        let mut head = [0u8; 16];
        std::fs::File::open(p)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok_and(|()| &head == b"SQLite format 3\0")
    };
    let ledger_of_key = path
        .to_str()
        .and_then(|p| p.strip_suffix(".key"))
        .is_some_and(|ledger| database(Path::new(ledger)));
    database(path) || ledger_of_key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_and_missing_folders_are_refused_and_nothing_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("model.safetensors");
        check_writable("--save-model", &ok).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let err = check_writable("--save-model", dir.path()).unwrap_err();
        assert!(err.to_string().contains("is a folder"), "{err}");
        let err = check_writable("--log", &dir.path().join("no/such/log.csv")).unwrap_err();
        assert!(
            err.to_string().starts_with("--log ") && err.to_string().contains("does not exist"),
            "{err}"
        );
        // Nothing there yet: made when the outputs are written.
        check_folder("--out", &ok).unwrap();
        std::fs::write(&ok, b"model").unwrap();
        let err = check_folder("--out", &ok).unwrap_err();
        assert!(err.to_string().contains("is a file, not a folder"), "{err}");
        check_folder("--out", dir.path()).unwrap();
    }

    #[test]
    fn a_ledger_its_key_and_links_to_nothing_are_never_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("budget.db");
        let mut head = b"SQLite format 3\0".to_vec();
        head.extend_from_slice(&[0; 84]);
        std::fs::write(&ledger, &head).unwrap();
        let key = dir.path().join("budget.db.key");
        std::fs::write(&key, b"0123456789abcdef").unwrap();
        for path in [&ledger, &key] {
            let err = check_writable("--plot", path).unwrap_err();
            assert!(err.to_string().contains("budget ledger"), "{err}");
        }
        #[cfg(unix)]
        {
            let link = dir.path().join("model.safetensors");
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
            let err = check_writable("--save-model", &link).unwrap_err();
            assert!(err.to_string().contains("link to nothing"), "{err}");
        }
    }
}
