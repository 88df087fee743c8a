//! Reader for Parquet tables (`parquet:PATH`), read as a csv table is: one column is the label
//! (the schema's `label_column`, default the last), every other a numeric or declared
//! categorical feature, under the same schema rules (declared classes, categories, fill
//! values, bounds). Rows are numbered from 1 in messages ("line N" is row N).
//!
//! Only flat tables of booleans (read as 0 and 1), integers, floats and strings are read;
//! nested, binary, decimal and date columns are refused, naming the column. Row-level
//! reading needs no arrow; the files pandas and pyarrow write (snappy, gzip or uncompressed)
//! are read. Built with the default-on `parquet` feature.

use std::path::Path;

use parquet::basic::{ConvertedType, LogicalType, Type};
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
    let file = crate::open_regular(path, "a Parquet file")?;
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
    if let Some((column, kind)) = descr.columns().iter().find_map(|c| {
        not_a_number(c.physical_type(), c.logical_type_ref(), c.converted_type())
            .map(|kind| (c.name().to_string(), kind))
    }) {
        return Err(bad(&format!(
            "column {column:?} holds {kind} values, which are not numbers (a feature of the \
             same storage would read as its raw count of time units or digits): convert it, \
             or drop it"
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

/// What a column annotated as a date, a time, a timestamp, a decimal or another non-numeric
/// type holds (`None` for a plain number, a boolean or a string). The row reader hands some of
/// them over as plain integers (a nanosecond timestamp as its count of nanoseconds), so they
/// are refused by their annotation, before any row is read.
fn not_a_number(
    physical: Type,
    logical: Option<&LogicalType>,
    converted: ConvertedType,
) -> Option<&'static str> {
    let by_logical = logical.and_then(|l| match l {
        LogicalType::Timestamp { .. } => Some("timestamp"),
        LogicalType::Date => Some("date"),
        LogicalType::Time { .. } => Some("time"),
        LogicalType::Decimal { .. } => Some("decimal"),
        LogicalType::Json | LogicalType::Bson => Some("JSON"),
        LogicalType::Uuid => Some("UUID"),
        _ => None,
    });
    let by_converted = match converted {
        ConvertedType::TIMESTAMP_MILLIS | ConvertedType::TIMESTAMP_MICROS => Some("timestamp"),
        ConvertedType::DATE => Some("date"),
        ConvertedType::TIME_MILLIS | ConvertedType::TIME_MICROS => Some("time"),
        ConvertedType::DECIMAL => Some("decimal"),
        ConvertedType::INTERVAL => Some("interval"),
        ConvertedType::JSON | ConvertedType::BSON => Some("JSON"),
        _ => None,
    };
    // INT96 is only ever a legacy (Impala, Spark) timestamp.
    let legacy = (physical == Type::INT96).then_some("timestamp");
    by_logical.or(by_converted).or(legacy)
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

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::sync::Arc;

    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;

    use super::*;

    /// A one-row-group file of `message`'s columns: doubles (with `None` as null in an
    /// OPTIONAL column), raw bytes, and int32 labels, each column given as its own values.
    enum Col {
        Double(Vec<Option<f64>>),
        Bytes(Vec<&'static str>),
        Int(Vec<i32>),
        Long(Vec<i64>),
    }

    fn write(path: &Path, message: &str, cols: Vec<Col>) {
        let schema = Arc::new(parquet::schema::parser::parse_message_type(message).unwrap());
        let file = File::create(path).unwrap();
        let props = Arc::new(WriterProperties::builder().build());
        let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
        let mut group = writer.next_row_group().unwrap();
        for col in cols {
            let mut w = group.next_column().unwrap().unwrap();
            match col {
                Col::Double(v) => {
                    let levels: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                    let present: Vec<f64> = v.iter().flatten().copied().collect();
                    w.typed::<DoubleType>()
                        .write_batch(&present, Some(&levels), None)
                        .unwrap();
                }
                Col::Bytes(v) => {
                    let v: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(*s)).collect();
                    w.typed::<ByteArrayType>()
                        .write_batch(&v, None, None)
                        .unwrap();
                }
                Col::Int(v) => {
                    w.typed::<Int32Type>().write_batch(&v, None, None).unwrap();
                }
                Col::Long(v) => {
                    w.typed::<Int64Type>().write_batch(&v, None, None).unwrap();
                }
            }
            w.close().unwrap();
        }
        group.close().unwrap();
        writer.close().unwrap();
    }

    fn error(path: &Path, schema: &Schema) -> String {
        read_parquet(path, schema).unwrap_err().to_string()
    }

    #[test]
    fn a_file_that_is_not_parquet_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        std::fs::write(&p, "a,b,y\n1,2,0\n").unwrap();
        let msg = error(&p, &Schema::default());
        assert!(
            msg.contains("t.parquet") && msg.contains("not a valid Parquet"),
            "{msg}"
        );
    }

    #[test]
    fn binary_columns_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        write(
            &p,
            "message t { REQUIRED BINARY blob; REQUIRED INT32 y; }",
            vec![Col::Bytes(vec!["\u{1}", "\u{2}"]), Col::Int(vec![0, 1])],
        );
        let msg = error(&p, &Schema::default());
        assert!(
            msg.contains("\"blob\"") && msg.contains("not a number"),
            "{msg}"
        );
    }

    #[test]
    fn timestamp_date_and_decimal_columns_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for (i, column) in [
            "REQUIRED INT64 t (TIMESTAMP(NANOS,true));",
            "REQUIRED INT64 t (TIMESTAMP(MICROS,false));",
            "REQUIRED INT64 t (TIMESTAMP_MILLIS);",
            "REQUIRED INT32 t (DATE);",
            "REQUIRED INT32 t (TIME(MILLIS,true));",
            "REQUIRED INT32 t (DECIMAL(9,2));",
        ]
        .iter()
        .enumerate()
        {
            let p = dir.path().join(format!("t{i}.parquet"));
            let message = format!("message t {{ {column} REQUIRED INT32 y; }}");
            let values = if column.contains("INT64") {
                Col::Long(vec![1_700_000_000_000, 1_700_000_000_001])
            } else {
                Col::Int(vec![19_000, 19_001])
            };
            write(&p, &message, vec![values, Col::Int(vec![0, 1])]);
            let msg = error(&p, &Schema::default());
            assert!(
                msg.contains("column \"t\"") && msg.contains("not numbers"),
                "{column}: {msg}"
            );
        }
    }

    #[test]
    fn nulls_are_refused_by_row_or_filled_as_declared() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        write(
            &p,
            "message t { OPTIONAL DOUBLE a; REQUIRED INT32 y; }",
            vec![
                Col::Double(vec![Some(1.5), None, Some(3.0)]),
                Col::Int(vec![0, 1, 0]),
            ],
        );
        let msg = error(&p, &Schema::default());
        assert!(msg.contains("line 2") && msg.contains("\"a\""), "{msg}");
        let filled = Schema {
            fills: vec![("a".to_string(), 0.0)],
            ..Schema::default()
        };
        let c = read_parquet(&p, &filled).unwrap();
        let d = c.into_dataset(&p).unwrap();
        assert_eq!(d.x, vec![1.5, 0.0, 3.0]);
    }
}
