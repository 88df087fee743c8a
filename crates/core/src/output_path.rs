//! Output files checked before any private work: a model trained and charged to the ledger,
//! then lost because its file cannot be written, is budget spent for nothing.

use std::path::Path;

use crate::error::{Error, Result};

pub use dpml_accounting::ledger::same_file;

/// The input files of this run (see [`note_input`]), which no output may name.
static INPUTS: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Notes `path` as an input file of this run (a data set's file, a schema, a model read, a
/// ledger): [`check_writable`] then refuses it as an output, which would overwrite the input
/// (a model saved over the training CSV). The command line notes every input path it parses.
pub fn note_input(path: &Path) {
    INPUTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(path.to_path_buf());
}

/// Refuses `path` (given by `flag`) when it is one of the inputs noted by [`note_input`].
fn check_not_input(flag: &str, path: &Path) -> Result<()> {
    let inputs = INPUTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match inputs.iter().find(|input| same_file(path, input)) {
        Some(input) => Err(Error::usage(format!(
            "{flag} {}: names {}, an input of this run, which the output would overwrite; \
             name another file",
            path.display(),
            input.display()
        ))),
        None => Ok(()),
    }
}

/// Checks that a file can be written at `path` (given by `flag`): not a folder, a link to
/// nothing, a pipe, a budget ledger (or a key file) or an input of this run (see
/// [`note_input`]), in a folder that exists and takes new
/// files (written to by a probe file, removed at once). An existing file is left untouched
/// (it is replaced when the output is written).
///
/// # Errors
/// A usage error naming the flag and the path.
pub fn check_writable(flag: &str, path: &Path) -> Result<()> {
    let bad = |why: String| Err(Error::usage(format!("{flag} {}: {why}", path.display())));
    // `new.st/` and `new.st/.` read as the folder's name once parsed (`new.st`), but the
    // write then fails on them, after the training and its charge.
    if names_a_folder(path) {
        return bad("ends as a folder does; give a file name".into());
    }
    check_name(flag, path)?;
    check_existing(flag, path)?;
    check_not_input(flag, path)?;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return bad(format!("folder {} does not exist", folder.display()));
    }
    if path.file_name().is_none() {
        return bad("names no file".into());
    }
    takes_new_files(folder).or_else(|e| bad(format!("cannot be written ({e})")))
}

/// The longest name of one file or folder that file systems take (NAME_MAX on Linux and macOS).
const MAX_NAME_BYTES: usize = 255;

/// Refuses a path that is not UTF-8 (the results report the paths they write, in JSON, which
/// holds only text) or has a name longer than [`MAX_NAME_BYTES`] (no file system takes it, and
/// a folder not yet made would not tell before the write).
fn check_name(flag: &str, path: &Path) -> Result<()> {
    if path.to_str().is_none() {
        return Err(Error::usage(format!(
            "{flag} {}: is not valid UTF-8; dpml reports the paths it writes as text",
            path.display()
        )));
    }
    let longest = path.iter().map(|n| n.len()).max().unwrap_or(0);
    if longest > MAX_NAME_BYTES {
        return Err(Error::usage(format!(
            "{flag} {}: has a name of {longest} bytes; file systems take at most {MAX_NAME_BYTES}",
            path.display()
        )));
    }
    Ok(())
}

/// Whether `path` is written as a folder is (`x/`, `x/.`, `.`): parsed, `x/` reads as the
/// file `x`, but nothing can be written or read at it as a file.
pub fn names_a_folder(path: &Path) -> bool {
    let text = path.as_os_str().as_encoded_bytes();
    text.ends_with(b"/") || text.ends_with(b"/.") || text == b"."
}

/// Checks that the folder `dir` (given by `flag`) can hold the output files `files`: a
/// folder in which each can be written as [`check_writable`] says, or nothing yet below a
/// folder that takes new files (it is made when they are written).
///
/// # Errors
/// A usage error naming the flag and the path.
pub fn check_folder(flag: &str, dir: &Path, files: &[&str]) -> Result<()> {
    let bad = |why: String| Err(Error::usage(format!("{flag} {}: {why}", dir.display())));
    check_name(flag, dir)?;
    match std::fs::symlink_metadata(dir) {
        Ok(_) if !dir.is_dir() => return bad("is a file, not a folder".into()),
        Ok(_) => {
            return files
                .iter()
                .try_for_each(|f| check_writable(flag, &dir.join(f)));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        // `file.txt/` (not a folder), a loop of links, no permission: nothing can be made.
        Err(e) => return bad(format!("cannot be used ({e})")),
    }
    // Made when the outputs are written: below the nearest folder that exists. Through `..`
    // the folder made would not be the one checked (`new/..` is its parent).
    if dir
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return bad("does not exist yet and goes through `..`: name it without `..`".into());
    }
    // `new/.` is not made by making its parent (`new/.`'s parent reads as nothing).
    let segments = dir.as_os_str().as_encoded_bytes().split(|b| *b == b'/');
    if segments.skip(1).any(|s| s == b".") {
        return bad("does not exist yet and is written with `/.`: name it without `.`".into());
    }
    let mut above = dir;
    let existing = loop {
        match above.parent() {
            Some(p) if p.as_os_str().is_empty() => break Path::new("."),
            Some(p) if std::fs::symlink_metadata(p).is_ok() => break p,
            Some(p) => above = p,
            None => return bad("cannot be made".into()),
        }
    };
    if !existing.is_dir() {
        return bad(format!("{} is not a folder", existing.display()));
    }
    takes_new_files(existing)
        .or_else(|e| bad(format!("cannot be made in {} ({e})", existing.display())))
}

/// Refuses two outputs that name one file (`outputs`: flag and path; a file that is not there
/// yet is compared by its folder and name): one would overwrite the other.
///
/// # Errors
/// A usage error naming both flags.
pub fn check_distinct(outputs: &[(&str, &Path)]) -> Result<()> {
    for (i, (flag_a, a)) in outputs.iter().enumerate() {
        for (flag_b, b) in &outputs[i + 1..] {
            if same_file(a, b) {
                return Err(Error::usage(format!(
                    "{flag_a} {} and {flag_b} {} name one file: one would overwrite the other",
                    a.display(),
                    b.display()
                )));
            }
        }
    }
    Ok(())
}

/// Refuses an existing `path` that is not a regular file to replace: a folder, a link to
/// nothing, a pipe, a budget ledger or a key file.
fn check_existing(flag: &str, path: &Path) -> Result<()> {
    let bad = |why: &str| Err(Error::usage(format!("{flag} {}: {why}", path.display())));
    if path.is_dir() {
        return bad("is a folder; give a file name");
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        // Below a file, through a loop of links, no permission: it cannot be written either.
        Err(e) => return bad(&format!("cannot be used ({e})")),
        Ok(_) => {}
    }
    match std::fs::metadata(path) {
        Err(_) => bad("is a link to nothing"),
        Ok(m) if !m.is_file() => bad("is not a regular file"),
        Ok(_) if holds_a_ledger(path) => {
            bad("holds a budget ledger or a key, which is never overwritten")
        }
        Ok(_) => Ok(()),
    }
}

/// Whether a new file can be made in `folder`: a probe file is made there and removed at
/// once. (Its name is short: one made from the output's name could be too long where the
/// output's is not.)
fn takes_new_files(folder: &Path) -> std::io::Result<()> {
    let probe = folder.join(format!(".dpml-write-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Whether `path` holds a budget ledger (a SQLite database) or what a ledger would read as
/// its key: read from the file, so that a key named anything, or reached through a link, is
/// known.
fn holds_a_ledger(path: &Path) -> bool {
    let mut head = [0u8; 16];
    let database = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0");
    database || dpml_accounting::ledger::is_key_file(path)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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
        check_folder("--out", &ok, &["a.csv"]).unwrap();
        check_folder("--out", &ok.join("deeper"), &["a.csv"]).unwrap();
        std::fs::write(&ok, b"model").unwrap();
        let err = check_folder("--out", &ok, &["a.csv"]).unwrap_err();
        assert!(err.to_string().contains("is a file, not a folder"), "{err}");
        // Through `..` the folder made is not the one checked.
        let err = check_folder("--out", &dir.path().join("new/.."), &["a.csv"]).unwrap_err();
        assert!(err.to_string().contains("without `..`"), "{err}");
        // Below a file, nothing can be made, however it is spelled.
        let slashed = PathBuf::from(format!("{}/", ok.display()));
        for below in [ok.join("sub"), slashed] {
            let err = check_folder("--out", &below, &["a.csv"]).unwrap_err();
            assert!(err.to_string().contains("cannot be used"), "{err}");
        }
        // A file output that ends as a folder does is written nowhere.
        for spelling in ["new.st/", "new.st/.", "."] {
            let path = dir.path().join(spelling);
            let err = check_writable("--save-model", &path).unwrap_err();
            assert!(
                err.to_string().contains("give a file name"),
                "{spelling}: {err}"
            );
        }
        check_folder("--out", dir.path(), &["a.csv"]).unwrap();
        // A long name the folder takes is not refused for its probe's name.
        check_writable("--log", &dir.path().join("m".repeat(250))).unwrap();
    }

    #[test]
    fn names_no_write_could_take_are_refused_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        // Longer than a file system takes, in a folder that exists or one not made yet.
        let long = "m".repeat(256);
        for path in [dir.path().join(&long), dir.path().join("new").join(&long)] {
            let err = check_writable("--save-model", &path).unwrap_err();
            assert!(err.to_string().contains("256 bytes"), "{err}");
        }
        let err = check_folder("--out", &dir.path().join(&long), &["a.csv"]).unwrap_err();
        assert!(err.to_string().contains("256 bytes"), "{err}");
        // A folder not made yet, written with `/.`: making it would fail after the run.
        for spelling in ["ck/.", "ck/./sub"] {
            let err = check_folder("--checkpoint", &dir.path().join(spelling), &[]).unwrap_err();
            assert!(err.to_string().contains("without `.`"), "{spelling}: {err}");
        }
        std::fs::create_dir(dir.path().join("ck")).unwrap();
        check_folder("--checkpoint", &dir.path().join("ck/."), &["a.json"]).unwrap();
        // Below a file: not a file that could be written.
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let err = check_writable("--log", &dir.path().join("f/log.csv")).unwrap_err();
        assert!(err.to_string().contains("cannot be used"), "{err}");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let name = std::ffi::OsStr::from_bytes(b"bad\xff.st");
            let err = check_writable("--save-model", &dir.path().join(name)).unwrap_err();
            assert!(err.to_string().contains("not valid UTF-8"), "{err}");
            let err = check_folder("--out", &dir.path().join(name), &["a.csv"]).unwrap_err();
            assert!(err.to_string().contains("not valid UTF-8"), "{err}");
        }
    }

    #[test]
    fn two_outputs_naming_one_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("same.out");
        let dotted = dir.path().join(".").join("same.out");
        let err = check_distinct(&[("--save-model", &a), ("--log", &dotted)]).unwrap_err();
        assert!(err.to_string().contains("name one file"), "{err}");
        std::fs::write(&a, b"x").unwrap();
        #[cfg(unix)]
        {
            let hard = dir.path().join("hard.out");
            std::fs::hard_link(&a, &hard).unwrap();
            assert!(check_distinct(&[("--save-model", &a), ("--log", &hard)]).is_err());
        }
        check_distinct(&[("--save-model", &a), ("--log", &dir.path().join("other"))]).unwrap();
    }

    #[test]
    fn an_input_of_the_run_is_never_an_output() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data.csv");
        std::fs::write(&data, b"a,label\n1,0\n").unwrap();
        let other = dir.path().join("model.st");
        check_writable("--save-model", &data).unwrap();
        note_input(&data);
        // However it is spelled: through `.`, or a link.
        let dotted = dir.path().join(".").join("data.csv");
        for path in [&data, &dotted] {
            let err = check_writable("--save-model", path).unwrap_err();
            assert!(err.to_string().contains("an input of this run"), "{err}");
        }
        #[cfg(unix)]
        {
            let link = dir.path().join("link.csv");
            std::os::unix::fs::symlink(&data, &link).unwrap();
            assert!(check_writable("--log", &link).is_err());
        }
        let err = check_folder("--out", dir.path(), &["data.csv"]).unwrap_err();
        assert!(err.to_string().contains("an input of this run"), "{err}");
        check_writable("--save-model", &other).unwrap();
    }

    #[test]
    fn a_ledger_its_key_and_links_to_nothing_are_never_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("budget.db");
        let mut head = b"SQLite format 3\0".to_vec();
        head.extend_from_slice(&[0; 84]);
        std::fs::write(&ledger, &head).unwrap();
        let key = dir.path().join("budget.db.key");
        std::fs::write(&key, format!("{}\n", "0123456789abcdef".repeat(4))).unwrap();
        // A key named anything is known by what it holds.
        let custom = dir.path().join("key.svg");
        std::fs::copy(&key, &custom).unwrap();
        for path in [&ledger, &key, &custom] {
            let err = check_writable("--plot", path).unwrap_err();
            assert!(err.to_string().contains("budget ledger"), "{err}");
        }
        #[cfg(unix)]
        {
            let link = dir.path().join("model.safetensors");
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
            let err = check_writable("--save-model", &link).unwrap_err();
            assert!(err.to_string().contains("link to nothing"), "{err}");
            let to_key = dir.path().join("log.csv");
            std::os::unix::fs::symlink(&key, &to_key).unwrap();
            let err = check_writable("--log", &to_key).unwrap_err();
            assert!(err.to_string().contains("budget ledger"), "{err}");
            // Within a folder output, the files it writes are checked too.
            let err = check_folder("--out", dir.path(), &["budget.db"]).unwrap_err();
            assert!(err.to_string().contains("budget ledger"), "{err}");
        }
    }
}
