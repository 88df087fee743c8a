//! Splits of neighbouring data sets: removing one record must move that record only, so a
//! guarantee for the training set is a guarantee for the data set the user handed in.

use std::fmt::Write as _;
use std::path::Path;

use dpml_data::{
    Dataset, LoadOptions, Source, SplitBasis, SplitKey, fold_assignments, load, split_indices,
    validation_indices,
};

const TEST_FRACTION: f64 = 0.2;
const K: usize = 5;

fn key(b: u8) -> SplitKey {
    SplitKey::from_bytes(std::array::from_fn(|i| {
        b.wrapping_mul(31).wrapping_add(i as u8)
    }))
}

/// Each record's side (true: test) under [`split_indices`].
fn sides(d: &Dataset, key: &SplitKey) -> Vec<bool> {
    marked(
        d.n,
        split_indices(d, TEST_FRACTION, key, SplitBasis::Record)
            .unwrap()
            .1,
    )
}

/// Each record's side (true: validation) under [`validation_indices`] (`dpml tune`'s cut).
fn validation_sides(d: &Dataset, key: &SplitKey) -> Vec<bool> {
    marked(
        d.n,
        validation_indices(d, TEST_FRACTION, key, SplitBasis::Record)
            .unwrap()
            .1,
    )
}

/// `n` flags, true at `held`.
fn marked(n: usize, held: Vec<usize>) -> Vec<bool> {
    let mut side = vec![false; n];
    for i in held {
        side[i] = true;
    }
    side
}

/// `d` with record `r` removed, metadata kept.
fn without(d: &Dataset, r: usize) -> Dataset {
    d.subset(&(0..d.n).filter(|&i| i != r).collect::<Vec<_>>())
}

/// Asserts that every record other than `r` keeps its side and its fold when `r` is removed:
/// `smaller` is `full` without record `r`, in the same order.
fn assert_only_r_moves(full: &Dataset, smaller: &Dataset, r: usize, key: &SplitKey) {
    assert_eq!(smaller.n, full.n - 1);
    let (a, b) = (sides(full, key), sides(smaller, key));
    let (va, vb) = (validation_sides(full, key), validation_sides(smaller, key));
    let (fa, fb) = (
        fold_assignments(full, K, key, SplitBasis::Record).unwrap(),
        fold_assignments(smaller, K, key, SplitBasis::Record).unwrap(),
    );
    for j in 0..smaller.n {
        let i = if j < r { j } else { j + 1 };
        assert_eq!(
            a[i], b[j],
            "removing record {r} moved record {i} across the split"
        );
        assert_eq!(
            fa[i], fb[j],
            "removing record {r} moved record {i} to another fold"
        );
        assert_eq!(
            va[i], vb[j],
            "removing record {r} moved record {i} across the validation cut"
        );
    }
}

#[test]
fn iris_removing_any_record_moves_only_that_record() {
    let iris = load(&Source::Iris, &LoadOptions::default()).unwrap().train;
    assert_eq!(iris.n, 150);
    let key = key(1);
    for r in 0..iris.n {
        assert_only_r_moves(&iris, &without(&iris, r), r, &key);
    }
}

/// 500 rows of three features and a label. Row 0's label "aardvark" is the only one that is
/// not a number: removing it makes the file's labels numeric, which renumbers and renames the
/// other classes ("1.0" becomes "1"). Rows 1 and 2 are identical.
fn synthetic_csv(skip: Option<usize>) -> String {
    let mut text = String::from("f1,f2,f3,kind\n");
    for i in 0..500usize {
        if Some(i) == skip {
            continue;
        }
        let j = if i == 2 { 1 } else { i };
        let label = match j {
            0 => "aardvark",
            _ if j % 3 == 0 => "1.0",
            _ if j % 3 == 1 => "2",
            _ => "-3.50",
        };
        let (a, b, c) = (
            j as f64 * 0.37 - 40.0,
            (j * j % 97) as f64,
            (j % 7) as f64 / 3.0,
        );
        writeln!(text, "{a},{b},{c},{label}").unwrap();
    }
    text
}

fn load_csv(dir: &Path, name: &str, text: &str) -> Dataset {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    load(&Source::Csv(path), &LoadOptions::default())
        .unwrap()
        .train
}

#[test]
fn csv_removing_any_record_moves_only_that_record() {
    let dir = tempfile::tempdir().unwrap();
    let full = load_csv(dir.path(), "full.csv", &synthetic_csv(None));
    assert_eq!((full.n, full.n_classes), (500, 4));
    let key = key(2);
    for r in 0..full.n {
        let smaller = load_csv(dir.path(), "minus.csv", &synthetic_csv(Some(r)));
        assert_only_r_moves(&full, &smaller, r, &key);
    }
    // The identical rows 1 and 2 share their side and fold.
    assert_eq!(sides(&full, &key)[1], sides(&full, &key)[2]);
    let folds = fold_assignments(&full, K, &key, SplitBasis::Record).unwrap();
    assert_eq!(folds[1], folds[2]);
}

/// `n` distinct records (two features, three classes).
fn distinct(n: usize) -> Dataset {
    Dataset {
        name: "distinct".into(),
        x: (0..n).flat_map(|i| [i as f32, (i % 17) as f32]).collect(),
        n,
        record_shape: vec![2],
        y: (0..n).map(|i| (i % 3) as u32).collect(),
        n_classes: 3,
        feature_names: vec!["a".into(), "b".into()],
        class_names: vec!["x".into(), "y".into(), "z".into()],
        feature_range: None,
    }
}

/// Asserts that `count` is within 6 standard deviations of a Binomial(n, p) mean: each record
/// is an independent Bernoulli(p) draw, so a correct split fails this with probability below
/// 2·10⁻⁹ per check.
fn assert_binomial(count: usize, n: usize, p: f64, what: &str) {
    let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
    let z = (count as f64 - mean) / sd;
    assert!(
        z.abs() < 6.0,
        "{what}: {count} of {n}, expected {mean:.1} ± {sd:.1} (z = {z:.2})"
    );
}

#[test]
fn test_share_and_fold_sizes_are_binomial() {
    let n = 20_000;
    let d = distinct(n);
    for b in 0..4 {
        let key = key(b);
        for f in [0.1, 0.2, 0.5, 0.9] {
            let (train, test) = split_indices(&d, f, &key, SplitBasis::Record).unwrap();
            assert_eq!(train.len() + test.len(), n);
            assert_binomial(test.len(), n, f, &format!("test share {f}"));
        }
        for k in [2, 5, 10] {
            let folds = fold_assignments(&d, k, &key, SplitBasis::Record).unwrap();
            for f in 0..k {
                let size = folds.iter().filter(|&&g| g == f).count();
                assert_binomial(size, n, 1.0 / k as f64, &format!("fold {f} of {k}"));
            }
        }
    }
}

/// The test set, the folds and the validation set (of a search, `dpml tune`) of `d` under
/// `key`, hashing the `basis` part of each record.
fn layout(d: &Dataset, key: &SplitKey, basis: SplitBasis) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    (
        split_indices(d, TEST_FRACTION, key, basis).unwrap().1,
        fold_assignments(d, K, key, basis).unwrap(),
        validation_indices(d, TEST_FRACTION, key, basis).unwrap().1,
    )
}

/// Asserts that, for 16 keys, changing `protected` (one record's protected attribute, every
/// way `changes` yields) leaves the split and the folds of `d` under `basis` identical; and
/// returns how many of those changes would have moved a record under the whole-record basis
/// (so that the caller can show the check able to fail).
fn assert_split_ignores(
    d: &Dataset,
    basis: SplitBasis,
    changes: &dyn Fn(&Dataset) -> Vec<Dataset>,
) -> usize {
    let mut moved_by_record_basis = 0;
    for b in 0..16 {
        let key = key(b);
        let before = layout(d, &key, basis);
        let whole_before = layout(d, &key, SplitBasis::Record);
        for changed in changes(d) {
            assert_eq!(
                layout(&changed, &key, basis),
                before,
                "{basis:?}: changing the protected attribute moved a record (key {key})"
            );
            moved_by_record_basis +=
                usize::from(layout(&changed, &key, SplitBasis::Record) != whole_before);
        }
    }
    moved_by_record_basis
}

/// `d` with record `r`'s label set to every other class in turn.
fn relabelled(d: &Dataset, r: usize) -> Vec<Dataset> {
    (0..d.n_classes as u32)
        .filter(|&c| c != d.y[r])
        .map(|c| {
            let mut e = d.clone();
            e.y[r] = c;
            e
        })
        .collect()
}

/// `d` with record `r`'s features replaced a few ways (another record's, scaled, negated).
fn refeatured(d: &Dataset, r: usize) -> Vec<Dataset> {
    let width = d.n_features();
    let other = d.row((r + 1) % d.n).to_vec();
    let edits: [&dyn Fn(f32) -> f32; 2] = [&|v| v * 3.0 + 1.0, &|v| -v];
    let mut out = Vec::new();
    let mut e = d.clone();
    e.x[r * width..(r + 1) * width].copy_from_slice(&other);
    out.push(e);
    for edit in edits {
        let mut e = d.clone();
        e.x[r * width..(r + 1) * width]
            .iter_mut()
            .for_each(|v| *v = edit(*v));
        out.push(e);
    }
    out
}

#[test]
fn label_dp_split_is_identical_when_one_label_changes() {
    let d = distinct(60);
    let moved = assert_split_ignores(&d, SplitBasis::Features, &|d| {
        (0..d.n).flat_map(|r| relabelled(d, r)).collect()
    });
    // The check can fail: hashing whole records, as every run did before, moves records.
    assert!(
        moved > 0,
        "no relabelling moved a record under the record basis"
    );
}

#[test]
fn local_dp_split_is_identical_when_one_records_features_change() {
    let d = distinct(60);
    let moved = assert_split_ignores(&d, SplitBasis::Position, &|d| {
        (0..d.n).flat_map(|r| refeatured(d, r)).collect()
    });
    assert!(
        moved > 0,
        "no change of features moved a record under the record basis"
    );
}

#[test]
fn the_features_basis_also_moves_only_a_removed_record() {
    // The regression sweep runs DP-SGD (add/remove) and label DP on one split hashed by
    // features: removing a record must move that record only there too.
    let d = distinct(200);
    for b in 0..4 {
        let key = key(b);
        let (test, folds, validation) = layout(&d, &key, SplitBasis::Features);
        for r in (0..d.n).step_by(7) {
            let (t, f, v) = layout(&without(&d, r), &key, SplitBasis::Features);
            let index = |j: usize| if j < r { j } else { j + 1 };
            for (smaller, full) in [(&t, &test), (&v, &validation)] {
                assert_eq!(
                    smaller.iter().map(|&j| index(j)).collect::<Vec<_>>(),
                    full.iter().copied().filter(|&i| i != r).collect::<Vec<_>>()
                );
            }
            assert!((0..d.n - 1).all(|j| f[j] == folds[index(j)]));
        }
    }
}
