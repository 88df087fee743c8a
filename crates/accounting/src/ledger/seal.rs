//! Sealing a ledger: every stored row carries an HMAC-SHA256 of its contents, chained to the row
//! before it, under a key kept outside the ledger file (a key file with 0600 permissions, or a
//! key derived from a passphrase). Editing a stored ε, an event, the budget, or removing or
//! reordering rows in the middle breaks a seal, and the ledger is refused on open.
//!
//! # What a seal does not protect
//! Whoever can read the key can forge any row. Removing the newest rows (or putting back an
//! older copy of the whole file) leaves a valid chain: the ledger has no anchor outside itself.
//! The file's confidentiality is not protected either (it holds labels and events, not data).
//!
//! # Citations
//! - RFC 2104 (HMAC), FIPS 180-4 (SHA-256), RFC 8018 §5.2 (PBKDF2).

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::LedgerError;

/// Bytes of a ledger key (and of every seal).
pub(super) const KEY_BYTES: usize = 32;
/// PBKDF2-HMAC-SHA256 iterations for a passphrase (OWASP's 2023 recommendation).
pub(super) const PBKDF2_ITERATIONS: u32 = 600_000;
/// Largest key file read (a key is 64 hex digits and a newline).
const MAX_KEY_FILE_BYTES: u64 = 1024;

/// Where a ledger's key comes from.
///
/// A ledger created with a key file (the default: `FILE.key` beside the ledger `FILE`, made
/// with 0600 permissions when missing) needs the same file to be opened; one created with a
/// passphrase needs the same passphrase. Which kind a ledger uses is stored in it.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum LedgerKey {
    /// The key file beside the ledger: the ledger's path with `.key` appended.
    #[default]
    Beside,
    /// This key file (created with 0600 permissions when a ledger is created and it is missing).
    File(PathBuf),
    /// A key derived from this passphrase (PBKDF2-HMAC-SHA256, a random salt kept in the
    /// ledger).
    Passphrase(String),
}

impl std::fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LedgerKey::Beside => f.write_str("Beside"),
            LedgerKey::File(p) => write!(f, "File({})", p.display()),
            LedgerKey::Passphrase(_) => f.write_str("Passphrase(..)"),
        }
    }
}

impl LedgerKey {
    /// The key file this names for the ledger at `ledger` (`None` for a passphrase).
    pub fn file_for(&self, ledger: &Path) -> Option<PathBuf> {
        match self {
            LedgerKey::Beside => {
                let mut name = ledger.as_os_str().to_owned();
                name.push(".key");
                Some(PathBuf::from(name))
            }
            LedgerKey::File(p) => Some(p.clone()),
            LedgerKey::Passphrase(_) => None,
        }
    }

    /// How the ledger's `key_kind` column names this kind of key.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            LedgerKey::Passphrase(_) => "passphrase",
            _ => "file",
        }
    }
}

/// A ledger's secret key.
#[derive(Clone)]
pub(super) struct Key([u8; KEY_BYTES]);

impl Key {
    /// The key `source` gives for the ledger at `ledger`, whose stored key kind is `kind` and
    /// salt `salt`. With `create`, a missing key file is made (32 bytes from the operating
    /// system, hex, mode 0600).
    ///
    /// # Errors
    /// [`LedgerError::Key`] naming the key file or the mismatch of kinds.
    pub fn resolve(
        source: &LedgerKey,
        ledger: &Path,
        kind: &str,
        salt: &[u8],
        create: bool,
    ) -> Result<Key, LedgerError> {
        if matches!(source, LedgerKey::Passphrase(p) if p.is_empty()) {
            return Err(key_error(
                ledger,
                "an empty passphrase seals nothing (anyone could forge the ledger's rows): give \
                 a passphrase, or none for a key file"
                    .into(),
            ));
        }
        if source.kind() != kind {
            return Err(key_error(
                ledger,
                format!(
                    "the ledger is sealed with a {kind}, but a {} was given{}",
                    source.kind(),
                    if kind == "passphrase" {
                        " (set DPML_LEDGER_PASSPHRASE)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        match source {
            LedgerKey::Passphrase(p) => {
                Ok(Key(pbkdf2_sha256(p.as_bytes(), salt, PBKDF2_ITERATIONS)))
            }
            _ => {
                let path = source.file_for(ledger).unwrap_or_default();
                if create {
                    create_key_file(&path, ledger)?;
                }
                read_key_file(&path, ledger)
            }
        }
    }

    /// HMAC-SHA256 of `parts` (each length-prefixed, so no two lists give the same bytes).
    pub fn seal(&self, parts: &[&[u8]]) -> String {
        let mut message = Vec::new();
        for p in parts {
            message.extend_from_slice(&(p.len() as u64).to_le_bytes());
            message.extend_from_slice(p);
        }
        hex(&hmac_sha256(&self.0, &message))
    }
}

fn key_error(ledger: &Path, reason: String) -> LedgerError {
    LedgerError::Key {
        path: ledger.to_path_buf(),
        reason,
    }
}

/// Makes a new key file at `path` (mode 0600, complete before it appears under its name, never
/// replacing one: an existing file is used as it is, whoever made it).
fn create_key_file(path: &Path, ledger: &Path) -> Result<(), LedgerError> {
    // A missing folder is the caller's mistake, as it is for the ledger's own path.
    if let Some(folder) = path.parent()
        && !folder.as_os_str().is_empty()
        && !folder.is_dir()
    {
        return Err(key_error(
            ledger,
            format!(
                "cannot create the key file {}: folder {} does not exist",
                path.display(),
                folder.display()
            ),
        ));
    }
    let mut bytes = [0u8; KEY_BYTES];
    random_bytes(&mut bytes).map_err(|e| key_error(ledger, e))?;
    // A file-system failure, classified as any other on the ledger's path (a missing folder is
    // the caller's mistake, a folder that takes no files the environment's).
    super::store::publish(format!("{}\n", hex(&bytes)).as_bytes(), path, 0o600)
        .map(|_| ())
        .map_err(|e| LedgerError::Io {
            path: ledger.to_path_buf(),
            source: std::io::Error::new(
                e.kind(),
                format!("cannot create the key file {}: {e}", path.display()),
            ),
        })
}

/// Reads a key file: a regular file, readable by its owner alone (on Unix), holding 64 hex
/// digits.
fn read_key_file(path: &Path, ledger: &Path) -> Result<Key, LedgerError> {
    let fail = |why: String| key_error(ledger, format!("key file {}: {why}", path.display()));
    let meta = fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => fail(
            "does not exist (a ledger's key file is made with it; pass the one it was made \
             with, --ledger-key FILE)"
                .into(),
        ),
        _ => fail(e.to_string()),
    })?;
    if !meta.is_file() {
        return Err(fail("is not a regular file".into()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(fail(format!(
                "has permissions {mode:o}: others could read the key; make it private \
                 (chmod 600)"
            )));
        }
    }
    let text = read_key_text(path).map_err(|e| fail(e.to_string()))?;
    let Some(bytes) = key_bytes(&text) else {
        return Err(fail(format!(
            "does not hold a key ({} hex digits)",
            2 * KEY_BYTES
        )));
    };
    let mut key = [0u8; KEY_BYTES];
    key.copy_from_slice(&bytes);
    Ok(Key(key))
}

/// Fills `out` from the operating system's generator.
pub(super) fn random_bytes(out: &mut [u8]) -> Result<(), String> {
    let mut rng = dpml_mechanisms::DpRng::from_os().map_err(|e| e.to_string())?;
    for chunk in out.chunks_mut(8) {
        let word = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    Ok(())
}

/// `bytes` as lower-case hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of hex text, or `None` if it is not hex.
/// The start of a file, as much as a key file is read.
fn read_key_text(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    File::open(path)?
        .take(MAX_KEY_FILE_BYTES)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// A key's bytes from a key file's text: 64 hex digits, with white space around them.
fn key_bytes(text: &str) -> Option<Vec<u8>> {
    unhex(text.trim()).filter(|b| b.len() == KEY_BYTES)
}

/// Whether the file at `path` holds what a ledger would read as its key (so that no output
/// overwrites one, whatever its name).
pub fn is_key_file(path: &Path) -> bool {
    read_key_text(path).is_ok_and(|text| key_bytes(&text).is_some())
}

/// Hex digits (pairs of them: no sign, as `from_str_radix` would take) as bytes.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// Compares two seals in time independent of where they first differ.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

const BLOCK: usize = 64;

/// HMAC-SHA256 (RFC 2104) keyed once, for many messages.
#[derive(Clone)]
struct Hmac {
    inner: Sha256,
    outer: Sha256,
}

impl Hmac {
    fn new(key: &[u8]) -> Self {
        let mut k = [0u8; BLOCK];
        if key.len() > BLOCK {
            k[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            k[..key.len()].copy_from_slice(key);
        }
        let pad = |byte: u8| k.map(|b| b ^ byte);
        Hmac {
            inner: Sha256::new().chain_update(pad(0x36)),
            outer: Sha256::new().chain_update(pad(0x5c)),
        }
    }

    fn mac(&self, message: &[u8]) -> [u8; 32] {
        let inner = self.inner.clone().chain_update(message).finalize();
        self.outer.clone().chain_update(inner).finalize().into()
    }
}

/// HMAC-SHA256 (RFC 2104).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    Hmac::new(key).mac(message)
}

/// PBKDF2-HMAC-SHA256 with one block of output (RFC 8018 §5.2).
fn pbkdf2_sha256(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let prf = Hmac::new(password);
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut u = prf.mac(&first);
    let mut out = u;
    for _ in 1..iterations {
        u = prf.mac(&u);
        for (o, x) in out.iter_mut().zip(u) {
            *o ^= x;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1 and 2 of RFC 4231.
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block is hashed first.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_key_is_64_hex_digits_and_white_space_only() {
        let digits = "0123456789abcdef".repeat(4);
        assert!(key_bytes(&digits).is_some());
        assert!(
            key_bytes(&format!(
                "{}\r\n{}\n",
                " ".repeat(40),
                digits.to_uppercase()
            ))
            .is_some()
        );
        // from_str_radix takes a sign: "+f" is not two hex digits.
        let signed = format!("+f{}", &digits[2..]);
        assert!(key_bytes(&signed).is_none());
        assert!(key_bytes(&digits[2..]).is_none());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key.svg");
        std::fs::write(&file, format!("{}{digits}\n", "\r\n".repeat(10))).unwrap();
        assert!(is_key_file(&file));
        std::fs::write(&file, "<svg/>").unwrap();
        assert!(!is_key_file(&file));
    }

    #[test]
    fn pbkdf2_matches_the_published_vectors() {
        // PBKDF2-HMAC-SHA256 vectors (RFC 7914 §11, and the widely used c = 4096 vector).
        assert_eq!(
            hex(&pbkdf2_sha256(b"passwd", b"salt", 1)),
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
        );
        assert_eq!(
            hex(&pbkdf2_sha256(b"password", b"salt", 4096)),
            "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a"
        );
    }

    #[test]
    fn seals_separate_their_parts() {
        let key = Key([7; KEY_BYTES]);
        assert_ne!(key.seal(&[b"ab", b"c"]), key.seal(&[b"a", b"bc"]));
        assert!(same(&key.seal(&[b"x"]), &key.seal(&[b"x"])));
        assert!(!same(&key.seal(&[b"x"]), &key.seal(&[b"y"])));
        assert_eq!(unhex("0aff"), Some(vec![10, 255]));
        assert_eq!(unhex("0g"), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_is_private_and_refused_when_others_can_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("l.db");
        let source = LedgerKey::Beside;
        let a = Key::resolve(&source, &ledger, "file", &[], true).unwrap();
        let path = source.file_for(&ledger).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A second creation uses the existing key.
        let b = Key::resolve(&source, &ledger, "file", &[], true).unwrap();
        assert_eq!(a.0, b.0);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = Key::resolve(&source, &ledger, "file", &[], false)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("644") && err.contains("chmod 600"), "{err}");
        let err = Key::resolve(
            &LedgerKey::Passphrase("x".into()),
            &ledger,
            "file",
            &[],
            false,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("sealed with a file"), "{err}");
        for kind in ["file", "passphrase"] {
            let err = Key::resolve(
                &LedgerKey::Passphrase(String::new()),
                &ledger,
                kind,
                &[],
                true,
            )
            .err()
            .unwrap()
            .to_string();
            assert!(err.contains("empty passphrase"), "{err}");
        }
    }
}
