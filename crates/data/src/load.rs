//! The two entry points that turn a [`Source`] into data: [`load`] and [`load_table`].

use std::path::PathBuf;

use crate::csvfile::read_csv;
use crate::embedded::Embedded;
use crate::idxset::IdxSet;
use crate::source::resolve_data_dir;
use crate::tabular::Columns;
use crate::{DataError, LoadOptions, Source, Splits, Table};

/// Loads a data set for learning: features and class labels, with the source's own test split
/// when it has one (MNIST, Fashion-MNIST).
///
/// IDX sets are read from `opts.data_dir` or else `DPML_DATA_DIR`; embedded sets need no
/// directory; `csv:PATH` uses `opts.label_column` (default: the last column).
///
/// # Errors
/// [`DataError::NoDataDir`] / [`DataError::NotFound`] for IDX sets without files (the message
/// says where we looked and suggests `dpml data fetch`); IDX format errors; CSV errors naming
/// line and column; [`DataError::InvalidParameter`] when a label column is given for a source
/// other than CSV.
pub fn load(source: &Source, opts: &LoadOptions) -> Result<Splits, DataError> {
    if let Some(set) = IdxSet::from_source(source) {
        check_no_label_column(source, opts)?;
        return set.load(resolve_data_dir(opts.data_dir.as_deref()).as_deref());
    }
    let (columns, path) = columns(source, opts)?;
    Ok(Splits {
        train: columns.into_dataset(&path)?,
        test: None,
    })
}

/// Loads a data set as a table of named f64 columns, for DP statistics.
///
/// Embedded sets give their features and `target`; CSV files every column; IDX sets only the
/// training labels as column `label` (pixels are not materialised).
///
/// # Errors
/// As [`load`].
pub fn load_table(source: &Source, opts: &LoadOptions) -> Result<Table, DataError> {
    if let Some(set) = IdxSet::from_source(source) {
        check_no_label_column(source, opts)?;
        return set.load_table(resolve_data_dir(opts.data_dir.as_deref()).as_deref());
    }
    Ok(columns(source, opts)?.0.into_table())
}

/// Parses an embedded or CSV source; returns the columns and the path for messages.
fn columns(source: &Source, opts: &LoadOptions) -> Result<(Columns, PathBuf), DataError> {
    match source {
        Source::Csv(path) => Ok((read_csv(path, opts.label_column.as_deref())?, path.clone())),
        _ => {
            check_no_label_column(source, opts)?;
            let e = Embedded::from_source(source).ok_or_else(|| unreachable_source(source))?;
            Ok((e.parse()?, e.pseudo_path()))
        }
    }
}

/// Named sets have a fixed label; a label column given for one is a user mistake.
fn check_no_label_column(source: &Source, opts: &LoadOptions) -> Result<(), DataError> {
    match &opts.label_column {
        Some(col) => Err(DataError::param(
            "label_column",
            format!("unset for {source} (it applies to csv:PATH only)"),
            format!("{col:?}"),
        )),
        None => Ok(()),
    }
}

/// Every [`Source`] variant is IDX, embedded or CSV; this keeps the match total without panic.
fn unreachable_source(source: &Source) -> DataError {
    DataError::UnknownSource {
        name: source.name(),
        known: crate::source::KNOWN_NAMES.into(),
    }
}
