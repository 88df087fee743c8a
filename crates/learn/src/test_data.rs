//! Small synthetic data sets shared by the unit tests, of this crate and (with the `test-data`
//! feature) of others.

use dpml_data::Dataset;

/// `n` records of `d` features in [0, 1] (a fixed saw-tooth pattern) with alternating labels
/// over two classes.
pub fn synthetic(n: usize, d: usize) -> Dataset {
    Dataset {
        name: "synthetic".into(),
        x: (0..n * d).map(|i| (i % 17) as f32 / 16.0).collect(),
        n,
        record_shape: vec![d],
        y: (0..n).map(|i| (i % 2) as u32).collect(),
        n_classes: 2,
        feature_names: (0..d).map(|j| format!("f{j}")).collect(),
        class_names: vec!["a".into(), "b".into()],
        feature_range: Some((0.0, 1.0)),
    }
}
