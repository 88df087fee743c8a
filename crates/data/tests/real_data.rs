//! Tests against the real MNIST and Fashion-MNIST files in `$DPML_DATA_DIR` (listed as ignored,
//! with the reason, without it).

mod common;

use dpml_data::idx::{read_images, read_labels};
use dpml_data::{
    CheckStatus, IDX_LABEL_COLUMN, LoadOptions, Source, catalog, load, load_table, verify,
};

fn counts(labels: &[u8]) -> Vec<usize> {
    let mut c = vec![0; 10];
    for &l in labels {
        c[usize::from(l)] += 1;
    }
    c
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn label_counts_match_the_readme() {
    let dir = common::mnist_data_dir();
    let train = read_labels(&dir.join("mnist/train-labels-idx1-ubyte.gz")).unwrap();
    let test = read_labels(&dir.join("mnist/t10k-labels-idx1-ubyte.gz")).unwrap();
    assert_eq!(
        counts(&train),
        [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    );
    assert_eq!(
        counts(&test),
        [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    );
    let train = read_labels(&dir.join("fashion-mnist/train-labels-idx1-ubyte.gz")).unwrap();
    let test = read_labels(&dir.join("fashion-mnist/t10k-labels-idx1-ubyte.gz")).unwrap();
    assert_eq!(counts(&train), [6000; 10]);
    assert_eq!(counts(&test), [1000; 10]);
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn mnist_loads_with_both_splits() {
    let dir = common::mnist_data_dir();
    let opts = LoadOptions {
        data_dir: Some(dir),
        label_column: None,
        ..LoadOptions::default()
    };
    let s = load(&Source::Mnist, &opts).unwrap();
    let test = s.test.unwrap();
    assert_eq!((s.train.n, test.n), (60_000, 10_000));
    assert_eq!(s.train.record_shape, vec![1, 28, 28]);
    assert_eq!(s.train.x.len(), 60_000 * 784);
    assert_eq!(s.train.feature_range, Some((0.0, 1.0)));
    assert!(s.train.x.iter().all(|&v| (0.0..=1.0).contains(&v)));
    // Ink is rare: about 19% of MNIST pixels are non-zero; a decoding error would not be.
    let ink = test.x.iter().filter(|&&v| v > 0.0).count() as f64 / test.x.len() as f64;
    assert!((0.15..0.25).contains(&ink), "{ink}");
    assert_eq!(s.train.y[..5], [5, 0, 4, 1, 9]); // the well-known first MNIST labels
    let table = load_table(&Source::Mnist, &opts).unwrap();
    assert_eq!(table.columns, vec![IDX_LABEL_COLUMN]);
    assert_eq!(table.column(IDX_LABEL_COLUMN).unwrap().len(), 60_000);
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn catalog_and_verify_see_the_real_files() {
    let dir = common::mnist_data_dir();
    let start = std::time::Instant::now();
    let list = catalog(Some(&dir));
    let took = start.elapsed();
    let start = std::time::Instant::now();
    let one_file = read_images(&dir.join("mnist/t10k-images-idx3-ubyte.gz")).unwrap();
    let decode = start.elapsed();
    assert_eq!(one_file.n, 10_000);
    for info in &list[..2] {
        assert!(info.available, "{info:?}");
        assert_eq!(
            (info.rows, info.test_rows, info.features, info.classes),
            (Some(60_000), Some(10_000), Some(784), Some(10))
        );
    }
    // Headers only: listing all eight files must cost less than decoding the smallest image
    // file once (a ratio within one run, not an absolute time).
    assert!(
        took < decode,
        "catalog took {took:?}, decoding one file {decode:?}"
    );
    let checks = verify(&dir, None).unwrap();
    assert_eq!(checks.len(), 12);
    assert!(
        checks.iter().all(|c| c.status == CheckStatus::Ok),
        "{checks:#?}"
    );
}
