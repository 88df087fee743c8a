//! Networks described as JSON (the form dpml saves beside the weights), read from a file or
//! given as text (the Python estimators' `arch=` dict).

use std::path::Path;

use dpml_learn::dpsgd::ModelSpec;
use serde_json::Value;

use crate::error::{Error, Result};

/// The largest architecture file read (a description, not weights: 1 MiB is thousands of
/// layers).
pub const MAX_ARCH_BYTES: u64 = 1 << 20;

/// Reads the architecture in `path`; one without a `"name"` is named after the file's stem.
///
/// # Errors
/// A usage error naming the file: unreadable, larger than [`MAX_ARCH_BYTES`], or not a valid
/// architecture.
pub fn load_arch(path: &Path) -> Result<ModelSpec> {
    let at = |e: &dyn std::fmt::Display| Error::usage(format!("{}: {e}", path.display()));
    let text = dpml_data::read_text(path, "an architecture file", MAX_ARCH_BYTES)?;
    let stem = path
        .file_stem()
        .map_or_else(|| "arch".into(), |s| s.to_string_lossy().into_owned());
    arch_from_json(&text, &stem).map_err(|e| at(&e))
}

/// The architecture described by `text` (JSON); one without a `"name"` is called
/// `default_name`.
///
/// # Errors
/// A usage error for text that is not a valid architecture.
pub fn arch_from_json(text: &str, default_name: &str) -> Result<ModelSpec> {
    let mut value: Value =
        serde_json::from_str(text).map_err(|e| Error::usage(format!("architecture: {e}")))?;
    if let Value::Object(map) = &mut value {
        map.entry("name")
            .or_insert_with(|| Value::String(default_name.into()));
    }
    ModelSpec::from_json(&value.to_string()).map_err(Error::usage)
}
