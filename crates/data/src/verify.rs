//! `dpml data verify`: SHA-256 of the data files against the compiled-in known sums.

use std::path::Path;

use crate::DataError;
use crate::embedded::Embedded;
use crate::known::{IDX_FILES, KnownIdxFile, embedded_sha256, sha256_reader};

/// The outcome of checking one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// The SHA-256 matches.
    Ok,
    /// The file exists but its SHA-256 differs.
    Mismatch,
    /// Neither the `.gz` nor the unpacked file exists.
    Missing,
    /// The file exists but could not be read (see [`FileCheck::error`]).
    Unreadable,
}

/// One checked file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCheck {
    /// The file checked (`embedded:FILE` for the compiled-in tables).
    pub path: String,
    /// The known SHA-256, hex.
    pub expected_sha256: String,
    /// The SHA-256 found, hex; `None` when missing or unreadable.
    pub actual_sha256: Option<String>,
    /// The verdict.
    pub status: CheckStatus,
    /// The read error for [`CheckStatus::Unreadable`].
    pub error: Option<String>,
}

/// Checks the MNIST and Fashion-MNIST files under `data_dir` (the `.gz` file, or else the
/// unpacked one against the unpacked sum), only those of the set named `set` when one is
/// (`mnist`, `fashion-mnist`), and the embedded tables compiled into this binary.
///
/// # Errors
/// [`DataError::InvalidParameter`] for a set name that is not an IDX set.
pub fn verify(data_dir: &Path, set: Option<&str>) -> Result<Vec<FileCheck>, DataError> {
    if let Some(name) = set
        && !IDX_FILES.iter().any(|f| f.dir == name)
    {
        return Err(DataError::param("set", "mnist or fashion-mnist", name));
    }
    let idx = IDX_FILES
        .iter()
        .filter(|f| set.is_none_or(|s| s == f.dir))
        .map(|f| check_idx(data_dir, f));
    let embedded = Embedded::ALL.into_iter().map(|e| {
        let actual = sha256_reader(e.bytes()).ok();
        let expected = embedded_sha256(e);
        let status = if actual.as_deref() == Some(expected) {
            CheckStatus::Ok
        } else {
            CheckStatus::Mismatch
        };
        FileCheck {
            path: e.pseudo_path().display().to_string(),
            expected_sha256: expected.to_string(),
            actual_sha256: actual,
            status,
            error: None,
        }
    });
    Ok(idx.chain(embedded).collect())
}

fn check_idx(data_dir: &Path, known: &KnownIdxFile) -> FileCheck {
    let dir = data_dir.join(known.dir);
    let gz = dir.join(known.gz_name());
    let raw = dir.join(known.stem);
    let (path, expected) = if !gz.exists() && raw.exists() {
        (raw, known.raw_sha256)
    } else {
        (gz, known.gz_sha256)
    };
    let mut check = FileCheck {
        path: path.display().to_string(),
        expected_sha256: expected.to_string(),
        actual_sha256: None,
        status: CheckStatus::Missing,
        error: None,
    };
    if !path.exists() {
        return check;
    }
    match crate::open_regular(&path, "a data file")
        .map_err(|e| match e {
            DataError::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        })
        .and_then(sha256_reader)
    {
        Ok(actual) => {
            check.status = if actual == expected {
                CheckStatus::Ok
            } else {
                CheckStatus::Mismatch
            };
            check.actual_sha256 = Some(actual);
        }
        Err(e) => {
            check.status = CheckStatus::Unreadable;
            check.error = Some(e.to_string());
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_missing_mismatch_and_embedded_ok() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("mnist")).unwrap();
        std::fs::write(
            dir.path().join("mnist/t10k-labels-idx1-ubyte.gz"),
            b"not mnist",
        )
        .unwrap();
        std::fs::write(dir.path().join("mnist/t10k-images-idx3-ubyte"), b"unpacked").unwrap();
        std::fs::create_dir(dir.path().join("mnist/train-labels-idx1-ubyte.gz")).unwrap();
        let checks = verify(dir.path(), None).unwrap();
        assert_eq!(checks.len(), 12);
        let only = verify(dir.path(), Some("fashion-mnist")).unwrap();
        assert_eq!(only.len(), 8);
        assert!(only[..4].iter().all(|c| c.path.contains("fashion-mnist")));
        assert!(verify(dir.path(), Some("cifar")).is_err());
        let by_name = |s: &str| checks.iter().find(|c| c.path.ends_with(s)).unwrap();
        assert_eq!(
            by_name("mnist/train-images-idx3-ubyte.gz").status,
            CheckStatus::Missing
        );
        let bad = by_name("mnist/t10k-labels-idx1-ubyte.gz");
        assert_eq!(bad.status, CheckStatus::Mismatch);
        assert_eq!(bad.actual_sha256.as_ref().unwrap().len(), 64);
        let raw = by_name("mnist/t10k-images-idx3-ubyte");
        assert_eq!(raw.status, CheckStatus::Mismatch);
        assert_eq!(raw.expected_sha256, IDX_FILES[2].raw_sha256);
        let unreadable = by_name("mnist/train-labels-idx1-ubyte.gz");
        assert_eq!(unreadable.status, CheckStatus::Unreadable, "{unreadable:?}");
        assert!(unreadable.error.is_some());
        for name in [
            "iris.csv",
            "breast_cancer.csv",
            "wine_data.csv",
            "digits.csv.gz",
        ] {
            let c = by_name(&format!("embedded:{name}"));
            assert_eq!(c.status, CheckStatus::Ok, "{c:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_device_is_unreadable_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let mnist = dir.path().join("mnist");
        std::fs::create_dir_all(&mnist).unwrap();
        let fifo = mnist.join("train-labels-idx1-ubyte.gz");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        std::os::unix::fs::symlink("/dev/zero", mnist.join("t10k-labels-idx1-ubyte.gz")).unwrap();
        // Both would block or read for ever if opened.
        let checks = verify(dir.path(), Some("mnist")).unwrap();
        for name in ["train-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz"] {
            let c = checks.iter().find(|c| c.path.ends_with(name)).unwrap();
            assert_eq!(c.status, CheckStatus::Unreadable, "{c:?}");
            let error = c.error.as_deref().unwrap();
            assert!(error.contains("not a regular file"), "{error}");
        }
    }
}
