//! Train and test sets: the source's own test split, or a per-record keyed split
//! ([`dpml_data::train_test_split`]: removing one record moves only that record, so the
//! training run's guarantee holds for the data set given); and the public normalisation of
//! the records.

use dpml_data::{
    Dataset, LoadOptions, Provenance, Schema, Source, SplitBasis, SplitKey, load, train_test_split,
};
use dpml_learn::dpsgd::{FASHION_MNIST_MEAN_STD, MNIST_MEAN_STD, Normalization};
use dpml_mechanisms::DpRng;

use crate::error::{Error, Result};
use crate::schema::{Needs, require_declared};

/// How to cut a test set from a source without one.
#[derive(Debug, Clone, Copy)]
pub struct SplitOptions {
    /// Share held out for testing (each record independently).
    pub test_fraction: f64,
    /// The key of the split and folds, if the caller gives one.
    pub key: Option<SplitKey>,
}

impl SplitOptions {
    /// The run's key: the given one, else a fresh one from `rng`. A key is drawn either way,
    /// so that a seeded run given the key a run with the same seed reported repeats that run
    /// exactly. The key is published; that reveals nothing of the generator's other output
    /// (ChaCha20 is a cryptographic generator), and the split's guarantee holds for any key.
    pub fn key(&self, rng: &mut DpRng) -> SplitKey {
        let drawn = SplitKey::from_rng(rng.as_rng());
        self.key.unwrap_or(drawn)
    }
}

/// A data set loaded for training: train and test sets, the schema they were read under, and
/// the split key that cut them (`None` when the source brings its own test split).
pub struct Loaded {
    /// The training records.
    pub train: Dataset,
    /// The test records.
    pub test: Dataset,
    /// What is declared about the data, with provenance.
    pub schema: Schema,
    /// The key of the per-record split, when there was one.
    pub split_key: Option<SplitKey>,
    /// How many values of each feature were clamped into the declared bounds (a diagnostic).
    pub clamped: Vec<usize>,
}

/// Load `source` under `opts` (its schema), check that what the computation `needs` is
/// declared (before any record is split or used), then split: the source's own test split,
/// else the keyed per-record split of its records under `key`, hashing the `basis` part of
/// each record (what the run's neighbouring relation leaves fixed).
///
/// # Errors
/// A usage error naming what declares a missing declaration; a usage error when the source
/// needs a split and `key` is `None`; data errors, among them
/// [`dpml_data::DataError::EmptySplit`].
pub fn load_split(
    source: &Source,
    opts: &LoadOptions,
    needs: Needs,
    test_fraction: f64,
    key: Option<SplitKey>,
    basis: SplitBasis,
) -> Result<Loaded> {
    let sets = load(source, opts)?;
    require_declared(&sets.schema, &sets.train, needs)?;
    let (train, test, split_key) = match (sets.test, key) {
        (Some(test), _) => (sets.train, test, None),
        (None, Some(key)) => {
            let (train, test) = train_test_split(&sets.train, test_fraction, &key, basis)?;
            (train, test, Some(key))
        }
        (None, None) => {
            return Err(Error::usage(format!(
                "{} has no test split of its own: give --split-key HEX, the \"split_key\" of the \
                 run that held records out",
                source.name()
            )));
        }
    };
    Ok(Loaded {
        train,
        test,
        schema: sets.schema,
        split_key,
        clamped: sets.clamped,
    })
}

/// Every record of `source`, its own test split included (for cross-validation and
/// clustering), with its schema.
///
/// # Errors
/// As [`dpml_data::load`].
pub fn load_all(source: &Source, opts: &LoadOptions) -> Result<(Dataset, Schema)> {
    let sets = load(source, opts)?;
    let mut all = sets.train;
    if let Some(test) = sets.test {
        all.x.extend_from_slice(&test.x);
        all.y.extend_from_slice(&test.y);
        all.n += test.n;
    }
    Ok((all, sets.schema))
}

/// Input normalisation from public constants only: MNIST-family mean/std; else the data set's
/// one public feature range (digits' [0, 16]); else min-max scaling from the schema's feature
/// bounds, clamped to [0, 1] (the built-in ranges of iris, wine and breast-cancer, or the
/// user's declared ones, which also replace the first two); else none (a `csv:` table without
/// declared bounds, in a non-private run).
///
/// # Errors
/// A usage error when declared per-feature bounds do not number the data's features.
pub fn public_normalization(
    source: &Source,
    schema: &Schema,
    data: &Dataset,
) -> Result<Normalization> {
    let declared = schema.bounds_provenance == Some(Provenance::Declared);
    Ok(match source {
        Source::Mnist if !declared => Normalization::mean_std(MNIST_MEAN_STD),
        Source::FashionMnist if !declared => Normalization::mean_std(FASHION_MNIST_MEAN_STD),
        _ if !declared && data.feature_range.is_some() => Normalization::PublicRange,
        _ => match schema.feature_bounds(data.n_features())? {
            Some(r) => Normalization::feature_ranges(&r),
            None => Normalization::None,
        },
    })
}
