//! End-to-end tests of `fetch` against a small HTTP server on 127.0.0.1 that serves the real
//! MNIST files from `$DPML_DATA_DIR` (those tests are listed as ignored without it). Nothing
//! here talks to any other host.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dpml_data::{CheckStatus, DataError, FetchProgress, FetchStage, fetch, verify};

const FILES: [&str; 4] = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
];

/// How the server answers for one path.
#[derive(Clone)]
enum Reply {
    /// 200 with these bytes.
    Full(Vec<u8>),
    /// 200 announcing the full length of these bytes, but closing after `usize` of them.
    CutAfter(Vec<u8>, usize),
}

/// A one-thread HTTP/1.1 server on 127.0.0.1; unknown paths get 404.
struct Server {
    base: String,
    requests: Arc<AtomicUsize>,
}

impl Server {
    fn start(routes: HashMap<String, Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/mnist/", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counter.fetch_add(1, Ordering::SeqCst);
                // A client that hangs up early is its business, not the server's.
                let _ = serve(stream, &routes);
            }
        });
        Server { base, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn serve(stream: TcpStream, routes: &HashMap<String, Reply>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let mut out = stream;
    match routes.get(path) {
        None => out
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        Some(Reply::Full(body)) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            out.write_all(body)
        }
        Some(Reply::CutAfter(body, cut)) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            out.write_all(&body[..*cut])
        }
    }
}

/// Routes serving the real MNIST files under `/mnist/`.
fn real_routes(data: &Path) -> HashMap<String, Reply> {
    FILES
        .iter()
        .map(|f| {
            (
                format!("/mnist/{f}"),
                Reply::Full(std::fs::read(data.join("mnist").join(f)).unwrap()),
            )
        })
        .collect()
}

fn body(routes: &HashMap<String, Reply>, file: &str) -> Vec<u8> {
    match &routes[&format!("/mnist/{file}")] {
        Reply::Full(b) | Reply::CutAfter(b, _) => b.clone(),
    }
}

/// Every entry of `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn fetch_collecting(
    base: &str,
    to: &Path,
) -> (Result<Vec<PathBuf>, DataError>, Vec<FetchProgress>) {
    let mut events = Vec::new();
    let result = fetch("mnist", to, Some(base), &mut |p| events.push(p));
    (result, events)
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn fetches_verifies_and_skips_what_is_there() {
    let data = common::mnist_data_dir();
    let server = Server::start(real_routes(&data));
    let to = tempfile::tempdir().unwrap();

    let (result, events) = fetch_collecting(&server.base, to.path());
    let paths = result.unwrap();
    assert_eq!(paths.len(), 4);
    assert_eq!(listing(&to.path().join("mnist")), {
        let mut f: Vec<String> = FILES.iter().map(|s| s.to_string()).collect();
        f.sort();
        f
    });
    for (path, name) in paths.iter().zip(FILES) {
        assert_eq!(
            std::fs::read(path).unwrap(),
            std::fs::read(data.join("mnist").join(name)).unwrap()
        );
    }
    // Progress: per file, bytes grow to the total and the last event says Verified.
    for (i, name) in FILES.iter().enumerate() {
        let mine: Vec<&FetchProgress> = events.iter().filter(|e| e.file == *name).collect();
        assert!(
            mine.windows(2).all(|w| w[0].bytes_done <= w[1].bytes_done),
            "{name}"
        );
        let last = mine.last().unwrap();
        assert_eq!(
            (last.stage, last.index, last.count),
            (FetchStage::Verified, i + 1, 4)
        );
        assert_eq!(last.bytes_done, last.bytes_total);
        assert!(
            mine[..mine.len() - 1]
                .iter()
                .all(|e| e.stage == FetchStage::Downloading)
        );
    }
    let mnist_checks: Vec<_> = verify(to.path(), Some("mnist"))
        .unwrap()
        .into_iter()
        .take(4)
        .collect();
    assert!(
        mnist_checks.iter().all(|c| c.status == CheckStatus::Ok),
        "{mnist_checks:#?}"
    );

    // A second fetch finds everything in place and makes no request.
    let before = server.requests();
    let (result, events) = fetch_collecting(&server.base, to.path());
    assert_eq!(result.unwrap(), paths);
    assert!(events.iter().all(|e| e.stage == FetchStage::AlreadyPresent));
    assert_eq!(server.requests(), before);
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn corrupted_download_is_rejected_and_leaves_the_target_clean() {
    let data = common::mnist_data_dir();
    let mut routes = real_routes(&data);
    let mut bad = body(&routes, FILES[3]);
    let mid = bad.len() / 2;
    bad[mid] ^= 0x01; // one flipped bit, same length
    routes.insert(format!("/mnist/{}", FILES[3]), Reply::Full(bad));
    let server = Server::start(routes);
    let to = tempfile::tempdir().unwrap();
    let sub = to.path().join("mnist");
    std::fs::create_dir_all(&sub).unwrap();
    // A stale copy of the file to be rejected: it must survive untouched.
    std::fs::write(sub.join(FILES[3]), b"stale").unwrap();

    let (result, _) = fetch_collecting(&server.base, to.path());
    let err = result.unwrap_err();
    assert!(matches!(err, DataError::ChecksumMismatch { .. }), "{err}");
    assert!(err.to_string().contains(FILES[3]), "{err}");
    assert_eq!(std::fs::read(sub.join(FILES[3])).unwrap(), b"stale");
    // The three good files are in place; no temporary file is left.
    let mut want: Vec<String> = FILES.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(listing(&sub), want);
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn early_end_and_missing_files_fail_cleanly() {
    let data = common::mnist_data_dir();
    let mut routes = real_routes(&data);
    let full = body(&routes, FILES[0]);
    routes.insert(
        format!("/mnist/{}", FILES[0]),
        Reply::CutAfter(full, 1_000_000),
    );
    let server = Server::start(routes);
    let to = tempfile::tempdir().unwrap();

    let (result, events) = fetch_collecting(&server.base, to.path());
    let err = result.unwrap_err();
    assert!(matches!(err, DataError::Download { .. }), "{err}");
    assert!(err.to_string().contains(FILES[0]), "{err}");
    assert!(events.iter().all(|e| e.bytes_done <= 1_000_000));
    assert!(listing(&to.path().join("mnist")).is_empty());

    let missing = format!("{}nothing-here/", server.base);
    let (result, _) = fetch_collecting(&missing, to.path());
    let msg = result.unwrap_err().to_string();
    assert!(msg.contains("404") && msg.contains("nothing-here"), "{msg}");
    assert!(listing(&to.path().join("mnist")).is_empty());
}
