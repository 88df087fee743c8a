//! Input files named by the user, opened and read within limits: a FIFO would block its open
//! until a writer comes, perhaps for ever, a device could read without end, and a file of any
//! size read whole would exhaust memory before anything refused it.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

use crate::DataError;

/// Opens `path` for reading, refusing anything but a regular file (checked before the open,
/// which would block on a FIFO, and again on the file opened). `read_as` says what the file
/// was to be read as (`"a schema"`).
///
/// # Errors
/// [`DataError::Io`] naming the path when it is not a regular file or cannot be opened.
pub fn open_regular(path: &Path, read_as: &str) -> Result<File, DataError> {
    DataError::unless_regular(path, read_as)?;
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    // The path may have been swapped for a device between the check and the open.
    let meta = file.metadata().map_err(|e| DataError::io(path, e))?;
    if !meta.is_file() {
        return Err(DataError::not_regular(path, read_as));
    }
    Ok(file)
}

/// Reads the text file `path` (what it holds is to be read as `read_as`), a regular file of at
/// most `limit` bytes: a larger one is refused before it is read, and one that grows past the
/// limit while read is refused too.
///
/// # Errors
/// As [`open_regular`]; [`DataError::TooLarge`] naming the file and the limit;
/// [`DataError::Io`] for a read that fails or text that is not UTF-8.
pub fn read_text(path: &Path, read_as: &str, limit: u64) -> Result<String, DataError> {
    let file = open_regular(path, read_as)?;
    let too_large = |size: &dyn std::fmt::Display| DataError::TooLarge {
        path: path.to_path_buf(),
        reason: format!("{size} bytes, over the limit of {limit} for {read_as}"),
    };
    let size = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    if size > limit {
        return Err(too_large(&size));
    }
    let mut text = String::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit + 1)
        .read_to_string(&mut text)
        .map_err(|e| DataError::io(path, e))?;
    if text.len() as u64 > limit {
        return Err(too_large(&"grew past the limit while read: over"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.toml");
        std::fs::write(&small, "a = 1\n").unwrap();
        assert_eq!(read_text(&small, "a schema", 6).unwrap(), "a = 1\n");
        let err = read_text(&small, "a schema", 5).unwrap_err().to_string();
        assert!(
            err.contains("small.toml") && err.contains("over the limit of 5"),
            "{err}"
        );
        // A sparse file is refused by its size, before a byte is read.
        let sparse = dir.path().join("sparse.toml");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let err = read_text(&sparse, "a schema", 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("over the limit of 1048576"), "{err}");
        let err = read_text(dir.path(), "a schema", 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");
        #[cfg(unix)]
        {
            let err = read_text(Path::new("/dev/zero"), "a schema", 1 << 20)
                .unwrap_err()
                .to_string();
            assert!(err.contains("not a regular file"), "{err}");
            let fifo = dir.path().join("fifo");
            assert!(
                std::process::Command::new("mkfifo")
                    .arg(&fifo)
                    .status()
                    .unwrap()
                    .success()
            );
            let err = open_regular(&fifo, "a schema").unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{err}");
        }
    }
}
