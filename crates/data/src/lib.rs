//! Data sets for dpml: the bottom layer, which knows nothing of privacy mechanisms.
//!
//! - **Named sets** ([`Source`]): `mnist` and `fashion-mnist` as IDX files (gzip or unpacked)
//!   in `DIR/mnist/` and `DIR/fashion-mnist/`; `iris`, `breast-cancer`, `wine` and `digits`
//!   embedded in the binary (license lines in `crates/data/data/NOTICE`); `csv:PATH` for the
//!   user's own table.
//! - **Data directory**: [`LoadOptions::data_dir`], or else the environment variable
//!   `DPML_DATA_DIR` ([`DATA_DIR_ENV`]); see [`resolve_data_dir`].
//! - **Two views**: [`load`] gives a [`Dataset`] (f32 features row-major, class indices) with the
//!   source's test split when it has one; [`load_table`] gives a [`Table`] of named f64 columns
//!   for DP statistics.
//! - **Schemas** ([`Schema`]): what is declared about a data set, never read from its records
//!   (feature bounds, classes, label range), each with its [`Provenance`]; the built-in sets
//!   carry theirs, `csv:` tables take the user's (a file or flags). Loading clamps features to
//!   the bounds and refuses labels outside the declared classes.
//! - **Published ranges**: [`Source::published_ranges`], the per-feature min/max printed in
//!   each embedded set's documentation (equal to the data's own minima and maxima for iris,
//!   wine and breast-cancer: data-derived, for demos only).
//! - **Splits and scaling**: [`train_test_split`] and [`kfold`], decided per record by a keyed
//!   hash ([`SplitKey`]) of the part of each record that the run's neighbouring relation
//!   leaves fixed ([`SplitBasis`]), so that removing one record moves only that record;
//!   [`MinMaxScaler`], [`StandardScaler`].
//! - **Files**: [`catalog`] (what is available, from headers only), [`verify`] (SHA-256 against
//!   compiled-in sums), [`fetch`] (download, verify, write atomically).
//!
//! ```
//! use dpml_data::{load, LoadOptions, Source, SplitBasis, SplitKey, train_test_split};
//!
//! let source: Source = "iris".parse()?;
//! let iris = load(&source, &LoadOptions::default())?.train;
//! assert_eq!((iris.n, iris.n_features(), iris.n_classes), (150, 4, 3));
//! // A real run draws the key from its generator (`SplitKey::from_rng`) and reports it.
//! let key: SplitKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff".parse()?;
//! let (train, test) = train_test_split(&iris, 0.2, &key, SplitBasis::Record)?;
//! assert_eq!(train.n + test.n, 150); // about 30 in test: each record is held out with p = 0.2
//! # Ok::<(), dpml_data::DataError>(())
//! ```
#![deny(missing_docs)]

mod arrays;
mod catalog;
mod csvfile;
mod dataset;
mod embedded;
mod error;
mod fetch;
pub mod idx;
mod idxset;
mod images;
mod input;
mod known;
mod load;
#[cfg(feature = "parquet")]
mod parquetfile;
mod ranges;
mod records;
mod rows;
mod scale;
mod schema;
mod source;
mod split;
pub mod table_decl;
mod tabular;
mod verify;

pub use arrays::{NPZ_FEATURES, NPZ_LABELS};
pub use catalog::{DatasetInfo, catalog};
pub use csvfile::{MAX_CSV_BYTES, MAX_CSV_LINE_BYTES};
pub use dataset::{Dataset, Splits, Table};
pub use embedded::LABEL_COLUMN as EMBEDDED_LABEL_COLUMN;
pub use error::DataError;
pub use fetch::{FetchProgress, FetchStage, fetch};
pub use idxset::LABEL_COLUMN as IDX_LABEL_COLUMN;
pub use input::{open_regular, read_text};
pub use load::{load, load_table};
pub use ranges::PublishedRanges;
pub use scale::{MinMaxScaler, StandardScaler};
pub use schema::{FeatureBounds, MAX_SCHEMA_BYTES, Provenance, Schema};
pub use source::{DATA_DIR_ENV, KNOWN_NAMES, LoadOptions, Source, resolve_data_dir};
pub use split::{
    Fold, SplitBasis, SplitKey, fold_assignments, kfold, split_indices, train_test_split,
    validation_indices, validation_split,
};
pub use verify::{CheckStatus, FileCheck, verify};
