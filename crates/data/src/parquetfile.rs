//! Reader for Parquet tables (`parquet:PATH`), read as a csv table is: one column is the label
//! (the schema's `label_column`, default the last), every other a numeric or declared
//! categorical feature, under the same schema rules (declared classes, categories, fill
//! values, bounds). Rows are numbered from 1 in messages ("line N" is row N).
//!
//! Only flat tables of booleans (read as 0 and 1), integers, floats and strings are read;
//! nested, binary, decimal and date columns are refused, naming the column. Row-level
//! reading needs no arrow; the files pandas and pyarrow write (snappy, gzip or uncompressed)
//! are read. Built with the default-on `parquet` feature.

use std::fs::File;
use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use crate::rows::Rows;
use crate::tabular::Columns;
use crate::{DataError, Schema};

/// Reads `path` under `schema`.
///
/// # Errors
/// [`DataError::Io`] for an unreadable file; [`DataError::BadInput`] for a file that is not
/// Parquet or a column of an unsupported type; the cell errors of a csv table.
pub(crate) fn read_parquet(path: &Path, schema: &Schema) -> Result<Columns, DataError> {
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    let bad = |e: &dyn std::fmt::Display| DataError::bad_input(path, format!("{e}"));
    let reader = SerializedFileReader::new(file)
        .map_err(|e| bad(&format!("not a valid Parquet file: {e}")))?;
    let descr = reader.metadata().file_metadata().schema_descr_ptr();
    if let Some(nested) = descr
        .root_schema()
        .get_fields()
        .iter()
        .find(|f| f.is_group())
    {
        return Err(bad(&format!(
            "column {:?} is nested: only flat tables are read",
            nested.name()
        )));
    }
    let names = descr
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let mut rows = Rows::new(path, schema, names)?;
    let iter = reader
        .get_row_iter(None)
        .map_err(|e| bad(&format!("cannot read rows: {e}")))?;
    for (i, row) in iter.enumerate() {
        let row = row.map_err(|e| bad(&format!("row {}: {e}", i + 1)))?;
        let cells = row
            .get_column_iter()
            .map(|(name, field)| {
                cell_text(field).ok_or_else(|| {
                    bad(&format!(
                        "column {name:?} holds {field}, which is not a number, string or boolean"
                    ))
                })
            })
            .collect::<Result<Vec<String>, _>>()?;
        rows.push(i as u64 + 1, cells.iter().map(|c| c.trim()))?;
    }
    rows.finish(format!("parquet:{}", path.display()))
}

/// A field as the text a csv cell would hold (empty for null); `None` for unsupported types.
fn cell_text(field: &Field) -> Option<String> {
    Some(match field {
        Field::Null => String::new(),
        Field::Bool(b) => u8::from(*b).to_string(),
        Field::Byte(v) => v.to_string(),
        Field::Short(v) => v.to_string(),
        Field::Int(v) => v.to_string(),
        Field::Long(v) => v.to_string(),
        Field::UByte(v) => v.to_string(),
        Field::UShort(v) => v.to_string(),
        Field::UInt(v) => v.to_string(),
        Field::ULong(v) => v.to_string(),
        Field::Float16(v) => v.to_string(),
        Field::Float(v) => v.to_string(),
        Field::Double(v) => v.to_string(),
        Field::Str(s) => s.clone(),
        _ => return None,
    })
}
