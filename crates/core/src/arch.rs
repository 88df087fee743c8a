//! Networks described as JSON (the form dpml saves beside the weights), read from a file.

use std::io::Read as _;
use std::path::Path;

use dpml_learn::dpsgd::ModelSpec;

use crate::error::{Error, Result};

/// The largest architecture file read (a description, not weights: 1 MiB is thousands of
/// layers).
pub const MAX_ARCH_BYTES: u64 = 1 << 20;

/// Reads the architecture in `path`.
///
/// # Errors
/// A usage error naming the file: unreadable, larger than [`MAX_ARCH_BYTES`], or not a valid
/// architecture.
pub fn load_arch(path: &Path) -> Result<ModelSpec> {
    let at = |e: &dyn std::fmt::Display| Error::usage(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| at(&e))?;
    let mut text = String::new();
    file.take(MAX_ARCH_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| at(&e))?;
    if text.len() as u64 > MAX_ARCH_BYTES {
        return Err(at(&format!(
            "architecture files are at most {MAX_ARCH_BYTES} bytes"
        )));
    }
    ModelSpec::from_json(&text).map_err(|e| at(&e))
}
