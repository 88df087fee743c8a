//! Sets `cfg(dpml_mnist)` when `$DPML_DATA_DIR/mnist` exists at build time, so that the tests
//! reading MNIST run, and otherwise are listed as `ignored` with the reason (`cfg_attr(not(
//! dpml_mnist), ignore = …)`) instead of passing without checking anything. `dpml-data` and
//! `dpml` share this script. A relative `DPML_DATA_DIR` is taken from the workspace root, where
//! `cargo test` is typed. Set it before building the tests: the script reruns when the variable
//! changes, not when files appear in the folder.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dpml_mnist)");
    println!("cargo::rerun-if-env-changed=DPML_DATA_DIR");
    let Some(dir) = std::env::var_os("DPML_DATA_DIR").filter(|d| !d.is_empty()) else {
        return;
    };
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("../..").join(dir);
    if dir.join("mnist").is_dir() {
        println!("cargo::rustc-cfg=dpml_mnist");
    }
}
