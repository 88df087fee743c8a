//! The two entry points that turn a [`Source`] into data: [`load`] and [`load_table`].

use std::path::PathBuf;

use crate::csvfile::read_csv;
use crate::embedded::Embedded;
use crate::idxset::IdxSet;
use crate::source::resolve_data_dir;
use crate::tabular::Columns;
use crate::{DataError, LoadOptions, Provenance, Schema, Source, Splits, Table};

/// Loads a data set for learning: features and class labels, with the source's own test split
/// when it has one (MNIST, Fashion-MNIST), under its schema: the built-in one of a named set,
/// overridden by `opts.schema` (the user's declarations).
///
/// IDX sets are read from `opts.data_dir` or else `DPML_DATA_DIR`; embedded sets need no
/// directory; `csv:PATH` uses the label column of `opts.label_column` or the schema (default:
/// the last column), keeps the schema's features in its order, and maps labels to the declared
/// classes. Every feature is then clamped into the declared bounds. Without declared classes a
/// csv table's classes are read from its records ([`Provenance::Inferred`]), which only a
/// non-private computation may use ([`Schema::require_classes`]).
///
/// # Errors
/// [`DataError::NoDataDir`] / [`DataError::NotFound`] for IDX sets without files (the message
/// says where we looked and suggests `dpml data fetch`); IDX format errors; CSV errors naming
/// line and column; [`DataError::UndeclaredLabel`] for a label outside the declared classes;
/// [`DataError::Schema`] for declarations that do not fit the data (feature columns, bounds
/// count, classes of a named set); [`DataError::InvalidParameter`] when a label column is given
/// for a source other than CSV.
pub fn load(source: &Source, opts: &LoadOptions) -> Result<Splits, DataError> {
    let schema = effective_schema(source, opts)?;
    let mut splits = match IdxSet::from_source(source) {
        Some(set) => {
            check_no_label_column(source, opts)?;
            set.load(resolve_data_dir(opts.data_dir.as_deref()).as_deref())?
        }
        None => {
            let (columns, path) = columns(source, &schema)?;
            Splits {
                train: columns.into_dataset(&path)?,
                test: None,
                schema: Schema::default(),
            }
        }
    };
    let mut schema = schema;
    if schema.classes.is_none() {
        // Named sets' classes are compiled-in constants; a csv table's were read off its records.
        schema.classes = Some(splits.train.class_names.clone());
        schema.classes_provenance = Some(match source {
            Source::Csv(_) => Provenance::Inferred,
            _ => Provenance::Public,
        });
    }
    if IdxSet::from_source(source).is_some() {
        // Tables were clamped column by column when parsed; images are clamped here.
        schema.clamp(&mut splits.train)?;
        if let Some(test) = &mut splits.test {
            schema.clamp(test)?;
        }
    }
    splits.schema = schema;
    Ok(splits)
}

/// The built-in schema of `source` overridden by the user's declarations.
///
/// # Errors
/// [`DataError::Schema`] for classes or a label range declared for a named set (its labels
/// are fixed), or a label column given twice with different names.
fn effective_schema(source: &Source, opts: &LoadOptions) -> Result<Schema, DataError> {
    let declared = opts.schema.clone().unwrap_or_default();
    if !matches!(source, Source::Csv(_))
        && (declared.classes.is_some() || declared.features.is_some())
    {
        return Err(DataError::Schema(format!(
            "{source} has fixed features and classes; declare classes, label ranges and \
             feature columns for csv: tables only"
        )));
    }
    let mut schema = Schema::builtin(source).overridden_by(declared);
    match (&opts.label_column, &schema.label_column) {
        (Some(flag), Some(file)) if flag != file => {
            return Err(DataError::Schema(format!(
                "label column {flag:?} given, but the schema declares {file:?}"
            )));
        }
        (Some(flag), _) => schema.label_column = Some(flag.clone()),
        _ => {}
    }
    Ok(schema)
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
    Ok(columns(source, &effective_schema(source, opts)?)?
        .0
        .into_table())
}

/// Parses an embedded or CSV source under `schema` (features selected and clamped, labels
/// mapped to the declared classes); returns the columns and the path for messages.
fn columns(source: &Source, schema: &Schema) -> Result<(Columns, PathBuf), DataError> {
    let (mut columns, path) = match source {
        Source::Csv(path) => {
            let columns = read_csv(
                path,
                schema.label_column.as_deref(),
                schema.classes.as_deref(),
                schema.label_range,
            )?;
            let columns = match &schema.features {
                Some(features) => columns.select_features(features)?,
                None => columns,
            };
            (columns, path.clone())
        }
        _ => {
            if let Some(col) = &schema.label_column {
                return Err(label_column_err(source, col));
            }
            let e = Embedded::from_source(source).ok_or_else(|| unreachable_source(source))?;
            (e.parse()?, e.pseudo_path())
        }
    };
    if let Some(bounds) = &schema.bounds {
        columns.clamp_features(bounds)?;
    }
    Ok((columns, path))
}

/// Named sets have a fixed label; a label column given for one is a user mistake.
fn check_no_label_column(source: &Source, opts: &LoadOptions) -> Result<(), DataError> {
    match &opts.label_column {
        Some(col) => Err(label_column_err(source, col)),
        None => Ok(()),
    }
}

fn label_column_err(source: &Source, col: &str) -> DataError {
    DataError::param(
        "label_column",
        format!("unset for {source} (it applies to csv:PATH only)"),
        format!("{col:?}"),
    )
}

/// Every [`Source`] variant is IDX, embedded or CSV; this keeps the match total without panic.
fn unreachable_source(source: &Source) -> DataError {
    DataError::UnknownSource {
        name: source.name(),
        known: crate::source::KNOWN_NAMES.into(),
    }
}
