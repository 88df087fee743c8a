//! `dpml data fetch`: download the four IDX files of MNIST or Fashion-MNIST, verified and
//! written atomically.
//!
//! Each file is streamed into a temporary file in the target directory while its SHA-256 is
//! computed; only if the hash matches the compiled-in sum is the file fsynced and renamed over
//! its final name (then the directory is fsynced). On any error or mismatch the temporary file
//! is removed, so no half file is ever left and a good file is never replaced by a bad one.
//! Files already present with the right hash are not downloaded again.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use crate::DataError;
use crate::idxset::IdxSet;
use crate::known::{KnownIdxFile, hex, idx_files, sha256_reader};

/// Where one file of a fetch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchStage {
    /// Bytes are arriving.
    Downloading,
    /// The file arrived, matched its SHA-256 and is in place.
    Verified,
    /// A file with the right SHA-256 was already there; nothing was downloaded.
    AlreadyPresent,
}

/// A progress report, sent for every chunk received and once when a file is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchProgress {
    /// The file name, e.g. `train-images-idx3-ubyte.gz`.
    pub file: String,
    /// Position of this file, 1-based.
    pub index: usize,
    /// Number of files in this fetch.
    pub count: usize,
    /// Bytes received so far for this file.
    pub bytes_done: u64,
    /// Bytes expected for this file (the server's Content-Length, else the known size).
    pub bytes_total: u64,
    /// Where this file stands.
    pub stage: FetchStage,
}

const READ_CHUNK: usize = 1 << 16;

/// How long a fetch waits for a server to accept its connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a fetch waits for each read from the server (the answer's head, then every chunk
/// of the file): a server that never answers fails in seconds, not minutes.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Downloads `name` (`mnist` or `fashion-mnist`) into `to/NAME/` from `base_url` (default:
/// the set's usual public mirror), reporting progress, and returns the paths of the four
/// verified `.gz` files.
///
/// Defaults: `https://ossci-datasets.s3.amazonaws.com/mnist/` for MNIST,
/// `http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/` for Fashion-MNIST. File URLs
/// are `BASE/FILE.gz`.
///
/// # Errors
/// [`DataError::UnknownFetchName`] for other names; [`DataError::InvalidParameter`] for a
/// base URL that is not http(s); [`DataError::Download`] for connection or HTTP errors, an
/// early end or an oversized body; [`DataError::ChecksumMismatch`] when the bytes are not the
/// known file; [`DataError::Io`] for local file errors. Files verified before an error stay.
pub fn fetch(
    name: &str,
    to: &Path,
    base_url: Option<&str>,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<Vec<PathBuf>, DataError> {
    let set = IdxSet::from_name(name).ok_or_else(|| DataError::UnknownFetchName {
        name: name.to_string(),
        hint: match name.parse::<crate::Source>() {
            Ok(s) if s.is_embedded() => format!("; {name} is embedded and needs no download"),
            _ => String::new(),
        },
    })?;
    let base = base_url.unwrap_or(set.default_base_url());
    // Checked whole before any folder is made: `http://[::1` has the scheme but no authority.
    let http = base.starts_with("http://") || base.starts_with("https://");
    if !http || base.parse::<ureq::http::Uri>().is_err() {
        return Err(DataError::param(
            "base_url",
            "an http:// or https:// URL",
            format!("{base:?}"),
        ));
    }
    let dir = to.join(set.name());
    fs::create_dir_all(&dir).map_err(|e| DataError::io(&dir, e))?;
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_resolve(Some(CONNECT_TIMEOUT))
            .timeout_per_read(Some(READ_TIMEOUT))
            .timeout_recv_response(Some(READ_TIMEOUT))
            .user_agent(concat!("dpml-data/", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let files: Vec<&KnownIdxFile> = idx_files(set.name()).collect();
    let mut written = Vec::with_capacity(files.len());
    for (i, known) in files.iter().enumerate() {
        let job = Job {
            known,
            index: i + 1,
            count: files.len(),
            dir: &dir,
        };
        written.push(
            job.run(&agent, base, progress)
                .map_err(|e| by_hand(e, set.name(), to))?,
        );
    }
    Ok(written)
}

/// A failed download with the way round it: where to put the files by hand (from any copy of
/// the set) and the command that checks them.
fn by_hand(e: DataError, set: &str, to: &Path) -> DataError {
    match e {
        DataError::Download { url, reason } => {
            let names: Vec<String> = idx_files(set).map(KnownIdxFile::gz_name).collect();
            DataError::Download {
                url,
                reason: format!(
                    "{reason}; without a connection, copy {} into {} by hand and check them \
                     with `dpml data verify {set} --data-dir {}`",
                    names.join(", "),
                    to.join(set).display(),
                    to.display()
                ),
            }
        }
        other => other,
    }
}

/// Why a request failed, saying which limit ran out when the server did not answer in time.
fn call_failure(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(which) => {
            let limit = match which {
                ureq::Timeout::Connect | ureq::Timeout::Resolve => CONNECT_TIMEOUT,
                _ => READ_TIMEOUT,
            };
            format!(
                "no answer within {} s ({e}; the connect and read timeouts are {} s and {} s)",
                limit.as_secs(),
                CONNECT_TIMEOUT.as_secs(),
                READ_TIMEOUT.as_secs()
            )
        }
        other => other.to_string(),
    }
}

/// One file to fetch.
struct Job<'a> {
    known: &'a KnownIdxFile,
    index: usize,
    count: usize,
    dir: &'a Path,
}

impl Job<'_> {
    fn report(&self, done: u64, total: u64, stage: FetchStage) -> FetchProgress {
        FetchProgress {
            file: self.known.gz_name(),
            index: self.index,
            count: self.count,
            bytes_done: done,
            bytes_total: total,
            stage,
        }
    }

    fn run(
        &self,
        agent: &ureq::Agent,
        base: &str,
        progress: &mut dyn FnMut(FetchProgress),
    ) -> Result<PathBuf, DataError> {
        let target = self.dir.join(self.known.gz_name());
        if self.already_present(&target) {
            let size = self.known.gz_size;
            progress(self.report(size, size, FetchStage::AlreadyPresent));
            return Ok(target);
        }
        let url = format!("{}/{}", base.trim_end_matches('/'), self.known.gz_name());
        let failed = |reason: String| DataError::Download {
            url: url.clone(),
            reason,
        };

        let response = agent
            .get(&url)
            .call()
            .map_err(|e| failed(call_failure(&e)))?;
        let (_, body) = response.into_parts();
        let total = body.content_length().unwrap_or(self.known.gz_size);
        if total > self.known.gz_size {
            return Err(failed(format!(
                "server announces {total} bytes, the known file has {}",
                self.known.gz_size
            )));
        }
        let mut reader = body.into_reader();

        // Dropping `tmp` on any early return deletes it.
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", self.known.gz_name()))
            .suffix(".part")
            .tempfile_in(self.dir)
            .map_err(|e| DataError::io(self.dir, e))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; READ_CHUNK];
        let mut done = 0u64;
        loop {
            let k = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    return Err(failed(format!(
                        "after {done} bytes, no data within the {} s read timeout ({e})",
                        READ_TIMEOUT.as_secs()
                    )));
                }
                Err(e) => return Err(failed(format!("after {done} bytes: {e}"))),
            };
            done += k as u64;
            if done > self.known.gz_size {
                return Err(failed(format!(
                    "more than the {} bytes of the known file",
                    self.known.gz_size
                )));
            }
            hasher.update(&buf[..k]);
            tmp.write_all(&buf[..k])
                .map_err(|e| DataError::io(tmp.path(), e))?;
            progress(self.report(done, total, FetchStage::Downloading));
        }
        let actual = hex(&hasher.finalize());
        if actual != self.known.gz_sha256 {
            return Err(DataError::ChecksumMismatch {
                url,
                expected: self.known.gz_sha256.to_string(),
                actual,
                bytes: done,
            });
        }
        commit(tmp, &target)?;
        progress(self.report(done, total, FetchStage::Verified));
        Ok(target)
    }

    /// Whether `target` exists with the known hash (unreadable counts as absent).
    fn already_present(&self, target: &Path) -> bool {
        File::open(target)
            .and_then(sha256_reader)
            .is_ok_and(|h| h == self.known.gz_sha256)
    }
}

/// Makes a verified temporary file durable under its final name.
fn commit(tmp: NamedTempFile, target: &Path) -> Result<(), DataError> {
    tmp.as_file()
        .sync_all()
        .map_err(|e| DataError::io(tmp.path(), e))?;
    tmp.persist(target)
        .map_err(|e| DataError::io(target, e.error))?;
    #[cfg(unix)]
    if let Some(dir) = target.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| DataError::io(dir, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_unknown_names_and_bad_urls_before_any_network() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = |_: FetchProgress| {};
        let msg = fetch("iris", dir.path(), None, &mut sink)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("\"iris\"") && msg.contains("embedded"),
            "{msg}"
        );
        let msg = fetch("cifar", dir.path(), None, &mut sink)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("\"cifar\"") && msg.contains("mnist and fashion-mnist"),
            "{msg}"
        );
        for url in ["ftp://x/", "http://[::1"] {
            let err = fetch("mnist", dir.path(), Some(url), &mut sink).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, DataError::InvalidParameter { .. }), "{msg}");
            assert!(msg.contains("base_url") && msg.contains(url), "{msg}");
        }
        // Nothing is made for a refused URL.
        assert!(!dir.path().join("mnist").exists());
    }
}
