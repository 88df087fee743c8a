//! Helpers shared by the integration tests: finding the real MNIST files.

use std::path::PathBuf;

/// The data folder that holds `mnist/`: `$DPML_DATA_DIR`, a relative one taken from the
/// workspace root. Only for tests marked `#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set
/// DPML_DATA_DIR")]`: the build script sets `dpml_mnist` when that folder holds `mnist/`.
pub fn mnist_data_dir() -> PathBuf {
    let dir = std::env::var_os("DPML_DATA_DIR").expect("dpml_mnist is set only with DPML_DATA_DIR");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    assert!(dir.join("mnist").is_dir(), "no mnist/ in {}", dir.display());
    dir
}
