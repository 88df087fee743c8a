//! `--arch FILE` and `dpml arch show`, run as a user would: the shipped `cnn` JSON trains
//! bit-identically to `--model cnn`, bad architectures exit 2 with a named error, and `arch
//! show` counts parameters and FLOPs.

mod common;
use common::{dpml, mnist_data_dir};

/// The repository's shipped architecture `name` (crates/nn/archs).
fn shipped(name: &str) -> String {
    format!("{}/../nn/archs/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Writes `json` into a fresh temporary file, removed when the returned path is dropped.
fn arch_file(tag: &str, json: &str) -> tempfile::TempPath {
    let file = tempfile::Builder::new()
        .prefix(&format!("dpml-cli-arch-{tag}-"))
        .suffix(".json")
        .tempfile()
        .unwrap();
    std::fs::write(file.path(), json).unwrap();
    file.into_temp_path()
}

fn train_digits(arch: &std::path::Path) -> common::Run {
    dpml(&[
        "train",
        "--dataset",
        "digits",
        "--arch",
        arch.to_str().unwrap(),
        "--non-private",
        "--epochs",
        "0.1",
    ])
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn shipped_cnn_json_trains_bit_identically_to_the_named_model() {
    let data = mnist_data_dir();
    let run = |model: &[&str]| {
        let mut a = vec![
            "train",
            "--dataset",
            "mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--epochs",
            "0.005",
            "--batch-size",
            "64",
            "--noise-multiplier",
            "1.0",
            "--seed",
            "7",
            "--json",
        ];
        a.extend_from_slice(model);
        dpml(&a).json()
    };
    let cnn_json = shipped("cnn.json");
    let named = run(&["--model", "cnn"]);
    let file = run(&["--arch", &cnn_json]);
    let d = |v: &serde_json::Value, k: &str| v["diagnostics"][k].clone();
    for k in ["test_loss", "test_accuracy", "train_accuracy"] {
        assert!(d(&named, k).is_number(), "{k}: {named}");
        assert_eq!(d(&named, k), d(&file, k), "{k}");
    }
    assert_eq!(named["epsilon"], file["epsilon"]);
    assert_eq!(file["model"], "cnn");
}

#[test]
fn shapes_that_do_not_chain_name_the_layer_and_both_shapes() {
    let path = arch_file(
        "chain",
        r#"{"name": "t", "input_shape": [1, 8, 8], "layers": [
            {"type": "conv2d", "in_channels": 1, "out_channels": 2, "kernel": 3, "stride": 1, "padding": 0},
            {"type": "flatten"},
            {"type": "linear", "in_features": 64, "out_features": 10}]}"#,
    );
    // conv 3x3 on 8x8 gives 2@6x6 = 72 features, not 64.
    let r = train_digits(&path);
    r.assert_usage_error("layer 2 (linear)");
    assert!(
        r.stderr.contains("[64]") && r.stderr.contains("[72]"),
        "{}",
        r.stderr
    );
}

#[test]
fn residual_blocks_must_keep_the_shape() {
    let path = arch_file(
        "residual",
        r#"{"name": "t", "input_shape": [1, 8, 8], "layers": [
            {"type": "residual", "layers": [
                {"type": "conv2d", "in_channels": 1, "out_channels": 2, "kernel": 3, "stride": 1, "padding": 1}]},
            {"type": "flatten"},
            {"type": "linear", "in_features": 64, "out_features": 10}]}"#,
    );
    let r = train_digits(&path);
    r.assert_usage_error("layer 0 (residual)");
    assert!(
        r.stderr.contains("[1, 8, 8]") && r.stderr.contains("[2, 8, 8]"),
        "{}",
        r.stderr
    );
}

#[test]
fn unknown_layer_types_are_refused_by_name() {
    let path = arch_file(
        "unknown",
        r#"{"name": "t", "input_shape": [64], "layers": [{"type": "attention"}]}"#,
    );
    train_digits(&path).assert_usage_error("unknown layer type `attention`");
}

#[test]
fn the_input_shape_must_be_the_records_shape() {
    let path = arch_file(
        "input",
        r#"{"name": "t", "input_shape": [64], "layers": [
            {"type": "linear", "in_features": 64, "out_features": 10}]}"#,
    );
    let r = train_digits(&path);
    r.assert_usage_error("input_shape [64]");
    assert!(r.stderr.contains("[1, 8, 8]"), "{}", r.stderr);
}

#[test]
fn new_layers_train_privately_end_to_end() {
    let path = arch_file(
        "layers",
        r#"{"name": "small", "input_shape": [1, 8, 8], "layers": [
            {"type": "conv2d", "in_channels": 1, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 1},
            {"type": "residual", "layers": [
                {"type": "conv2d", "in_channels": 4, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 1},
                {"type": "group_norm", "groups": 2, "channels": 4},
                {"type": "relu"}]},
            {"type": "layer_norm", "shape": [4, 8, 8]},
            {"type": "gelu"},
            {"type": "avg_pool2d", "kernel": 2, "stride": 2},
            {"type": "flatten"},
            {"type": "dropout", "p": 0.1},
            {"type": "linear", "in_features": 64, "out_features": 10}]}"#,
    );
    let v = dpml(&[
        "train",
        "--dataset",
        "digits",
        "--arch",
        path.to_str().unwrap(),
        "--epsilon",
        "3",
        "--epochs",
        "3",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(v["model"], "small");
    let acc = v["diagnostics"]["test_accuracy"].as_f64().unwrap();
    // Ten classes: chance is 0.1; a few private epochs learn well above it.
    assert!(acc > 0.3, "test accuracy {acc}");
}

#[test]
fn arch_show_counts_parameters_and_flops() {
    // Linear 6 -> 4 after a flatten of 1x2x3: 6*4 + 4 parameters, 2*6*4 FLOPs.
    let path = arch_file(
        "tiny",
        r#"{"name": "tiny", "input_shape": [1, 2, 3], "layers": [
            {"type": "flatten"}, {"type": "linear", "in_features": 6, "out_features": 4}]}"#,
    );
    let v = dpml(&["arch", "show", path.to_str().unwrap(), "--json"]).json();
    assert_eq!(v["parameters"], 28);
    assert_eq!(v["flops_per_sample"], 48);
    assert_eq!(v["input_shape"], serde_json::json!([1, 2, 3]));
    assert_eq!(v["layers"][1]["output_shape"], serde_json::json!([4]));
    // A built-in name: the parameter count is the model's (Opacus SampleConvNet, 26010),
    // and the per-layer counts add up to it.
    let v = dpml(&["arch", "show", "cnn", "--json"]).json();
    assert_eq!(v["parameters"], 26_010);
    let sum: u64 = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["parameters"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, 26_010);
    let human = dpml(&["arch", "show", &shipped("examples/resnet-gn-3x32x32.json")]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("residual") && human.stdout.contains("FLOPs per sample"));
}

#[test]
fn arch_show_refuses_what_is_neither_a_name_nor_a_file() {
    dpml(&["arch", "show", "resnet-50"]).assert_usage_error("resnet-50");
}
