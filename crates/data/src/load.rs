//! The two entry points that turn a [`Source`] into data: [`load`] and [`load_table`].

use std::path::PathBuf;

use crate::arrays;
use crate::csvfile::read_csv;
use crate::embedded::Embedded;
use crate::idxset::IdxSet;
use crate::images::{self, ImageOptions};
use crate::records::Records;
use crate::source::resolve_data_dir;
use crate::tabular::{Columns, Labels};
use crate::{
    DataError, Dataset, FeatureBounds, LoadOptions, Provenance, Schema, Source, Splits, Table,
};

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
    let mut schema = effective_schema(source, opts)?;
    let records = read_records(source, &schema)?;
    let clamp_here = IdxSet::from_source(source).is_some() || records.is_some();
    let mut splits = match (IdxSet::from_source(source), records) {
        (Some(set), _) => {
            check_no_label_column(source, opts)?;
            set.load(resolve_data_dir(opts.data_dir.as_deref()).as_deref())?
        }
        (None, Some(records)) => {
            check_no_label_column(source, opts)?;
            if schema.shape.is_none() && matches!(source, Source::Images(_)) {
                // The first image's size and channels: fine for a look at the data, refused
                // by every private computation (`Schema::require_shape`).
                schema.shape = Some(records.record_shape.clone());
                schema.shape_provenance = Some(Provenance::Inferred);
            }
            if records.pixels && schema.bounds.is_none() {
                // 8-bit pixels were scaled into [0, 1], as MNIST's: a public range.
                schema.bounds = Some(FeatureBounds::Uniform((0.0, 1.0)));
                schema.bounds_provenance = Some(Provenance::Public);
            }
            Splits {
                train: records.into_dataset(schema.classes.as_deref(), schema.label_range)?,
                test: None,
                schema: Schema::default(),
                clamped: Vec::new(),
            }
        }
        (None, None) => {
            let (columns, path, clamped) = columns(source, &schema)?;
            Splits {
                train: columns.into_dataset(&path)?,
                test: None,
                schema: Schema::default(),
                clamped,
            }
        }
    };
    if schema.classes.is_none() {
        // Named sets' classes are compiled-in constants; the user's data's were read off its
        // records.
        schema.classes = Some(splits.train.class_names.clone());
        schema.classes_provenance = Some(if source.is_user_data() {
            Provenance::Inferred
        } else {
            Provenance::Public
        });
    }
    if let (Some(shape), true) = (&schema.shape, source.is_user_data()) {
        reshape(&mut splits.train, shape)?;
    }
    if clamp_here {
        // Tables were clamped column by column when parsed; arrays and images are clamped here.
        let mut clamped = schema.clamp(&mut splits.train)?;
        if let Some(test) = &mut splits.test {
            for (all, c) in clamped.iter_mut().zip(schema.clamp(test)?) {
                *all += c;
            }
        }
        splits.clamped = clamped;
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
    if !source.is_user_data() && (declared.classes.is_some() || declared.features.is_some()) {
        return Err(DataError::Schema(format!(
            "{source} has fixed features and classes; declare classes, label ranges and \
             feature columns for csv: tables only (and your other files: npy, npz, idx, images, parquet)"
        )));
    }
    if !matches!(source, Source::Csv(_) | Source::Parquet(_)) && declared.features.is_some() {
        return Err(DataError::Schema(format!(
            "feature columns are declared for csv: and parquet: tables only; {source} has no column names \
             (declare bounds for its features instead)"
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
    schema.with_categories_expanded()
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
    if read_records(source, &Schema::default())?.is_some() {
        let splits = load(source, opts)?;
        let declared = splits
            .schema
            .classes_provenance
            .is_some_and(|p| p.is_declared());
        return Ok(records_table(splits.train, declared));
    }
    let schema = effective_schema(source, opts)?;
    let columns = columns(source, &schema)?.0;
    // Named sets' classes are compiled-in constants; the user's data's, read off the records.
    let coded =
        (source.is_user_data() && schema.classes.is_none() && !numbers(&columns.class_names))
            .then(|| columns.names[columns.label].clone());
    Ok(Table {
        coded_from_records: coded,
        ..columns.into_table()
    })
}

/// Whether every class name is a number as the label encoder reads them
/// ([`crate::tabular::label_number`]): a label column of numbers shows them, not codes; `NaN`
/// or `inf` among them makes every label a text, coded.
fn numbers(class_names: &[String]) -> bool {
    class_names
        .iter()
        .all(|c| crate::tabular::label_number(c).is_some())
}

/// Reads an array or image source (`None` for the others).
fn read_records(source: &Source, schema: &Schema) -> Result<Option<Records>, DataError> {
    Ok(Some(match source {
        Source::Npy { features, labels } => arrays::read_npy_pair(features, labels)?,
        Source::Npz(path) => arrays::read_npz(path)?,
        Source::Idx { images, labels } => crate::idx::read_pair(images, labels)?,
        Source::Images(dir) => images::read_image_folder(
            dir,
            &ImageOptions {
                shape: schema.shape.clone(),
                resize: schema.resize,
            },
        )?,
        _ => return Ok(None),
    }))
}

/// The table view of an array or image source: one column per feature, then `label` (the
/// class's number when every class is a number, else its index: refused by
/// [`Table::column`] unless the classes were `declared`).
fn records_table(data: Dataset, declared: bool) -> Table {
    let d = data.n_features();
    let coded = !declared && !numbers(&data.class_names);
    let label = Labels::declared(data.y, &data.class_names);
    let mut values: Vec<Vec<f64>> = (0..d)
        .map(|j| (0..data.n).map(|i| f64::from(data.x[i * d + j])).collect())
        .collect();
    values.push(label.values);
    let mut columns = data.feature_names;
    columns.push(crate::IDX_LABEL_COLUMN.to_string());
    Table {
        name: data.name,
        coded_from_records: coded.then(|| crate::IDX_LABEL_COLUMN.to_string()),
        columns,
        values,
    }
}

/// Parses an embedded or CSV source under `schema` (features selected and clamped, labels
/// mapped to the declared classes); returns the columns, the path for messages and how many
/// values of each feature were clamped.
fn columns(source: &Source, schema: &Schema) -> Result<(Columns, PathBuf, Vec<usize>), DataError> {
    let (mut columns, path) = match source {
        Source::Csv(path) => {
            let columns = read_csv(path, schema)?;
            (table_columns(columns, schema)?, path.clone())
        }
        Source::Parquet(path) => (
            table_columns(read_parquet(path, schema)?, schema)?,
            path.clone(),
        ),
        _ => {
            if let Some(col) = &schema.label_column {
                return Err(label_column_err(source, col));
            }
            let e = Embedded::from_source(source).ok_or_else(|| unreachable_source(source))?;
            (e.parse()?, e.pseudo_path())
        }
    };
    let clamped = match &schema.bounds {
        Some(bounds) => columns.clamp_features(bounds)?,
        None => Vec::new(),
    };
    Ok((columns, path, clamped))
}

/// Gives the records the declared shape (e.g. `[1, 28, 28]` for 784 pixel columns, so a CNN
/// can take a table's rows).
///
/// # Errors
/// [`DataError::Schema`] when the shape does not hold exactly the records' features.
fn reshape(data: &mut Dataset, shape: &[usize]) -> Result<(), DataError> {
    // Checked: a wrapped product could equal the feature count by accident.
    let size = crate::schema::shape_size(shape)?;
    if shape.is_empty() || size != data.n_features() {
        return Err(DataError::Schema(format!(
            "shape {shape:?} holds {size} values, but the records of {} have {} features",
            data.name,
            data.n_features()
        )));
    }
    data.record_shape = shape.to_vec();
    Ok(())
}

/// A user's table with the schema's features kept (in its order) and categories one-hot
/// encoded.
fn table_columns(columns: Columns, schema: &Schema) -> Result<Columns, DataError> {
    let columns = match &schema.features {
        Some(features) => columns.select_features(features)?,
        None => columns,
    };
    Ok(columns.one_hot(&schema.categories))
}

/// Parquet support is a cargo feature (default on): without it, a clear refusal.
#[cfg(feature = "parquet")]
use crate::parquetfile::read_parquet;
#[cfg(not(feature = "parquet"))]
fn read_parquet(path: &std::path::Path, _: &Schema) -> Result<Columns, DataError> {
    Err(DataError::bad_input(
        path,
        "this dpml was built without Parquet support (cargo feature `parquet`)",
    ))
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
        format!("unset for {source} (it applies to csv: tables only)"),
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
