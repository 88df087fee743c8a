//! Output files checked before any private work: a model trained and charged to the ledger,
//! then lost because its file cannot be written, is budget spent for nothing.

use std::path::Path;

use crate::error::{Error, Result};

/// Checks that a file can be written at `path` (given by `flag`): not a folder, in a folder
/// that exists and takes new files (written to by a probe file, removed at once). An
/// existing file is left untouched (it is replaced when the output is written).
///
/// # Errors
/// A usage error naming the flag and the path.
pub fn check_writable(flag: &str, path: &Path) -> Result<()> {
    let bad = |why: String| Err(Error::usage(format!("{flag} {}: {why}", path.display())));
    if path.is_dir() {
        return bad("is a folder; give a file name".into());
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
    }
}
