//! Helpers shared by the integration tests: finding the real data in `shared/data`.

use std::path::{Path, PathBuf};

/// The shared data directory (`DPML_DATA_DIR`, else `../../../shared/data` from this crate),
/// or `None` after printing a clear skip notice. A relative `DPML_DATA_DIR` is tried against
/// the current directory and against the workspace root (CI sets `../shared/data` there).
pub fn shared_data(test: &str) -> Option<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut candidates = Vec::new();
    if let Some(env) = std::env::var_os("DPML_DATA_DIR").filter(|v| !v.is_empty()) {
        let env = PathBuf::from(env);
        candidates.push(manifest.join("../..").join(&env));
        candidates.push(env);
    }
    candidates.push(manifest.join("../../../shared/data"));
    let found = candidates
        .iter()
        .find(|d| d.join("mnist").is_dir())
        .cloned();
    if found.is_none() {
        eprintln!(
            "{test}: skipped: shared data not found (looked in {candidates:?}; set DPML_DATA_DIR)"
        );
    }
    found
}
