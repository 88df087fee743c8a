//! The tables of a query (`--table NAME=PATH`): a Parquet file, a folder of Parquet files, a
//! CSV file, or a gzip-compressed CSV file (`.csv.gz`, decoded as it streams, without a
//! temporary copy). Registering reads only what describes a table — Parquet footers, a CSV's
//! header — never a row of a private table. A private CSV table's column types are declared
//! in the schema (`declared_type`); only a public one's are told from its first rows.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use csv::ByteRecord;
use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::csv::reader::Format;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use dpml_data::table_decl::{ColumnDecl, ColumnType, KeyValue, TableDecl};
use flate2::read::MultiGzDecoder;

use crate::error::{Result, SqlError};

/// Rows read to infer the column types of a public CSV file.
const CSV_SCHEMA_ROWS: usize = 1000;

/// What kind of file a table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Parquet,
    ParquetFolder,
    Csv,
    CsvGz,
}

fn kind(name: &str, path: &Path) -> Result<Kind> {
    let meta = std::fs::metadata(path).map_err(|e| {
        SqlError::input(format!("table {name}: cannot read {}: {e}", path.display()))
    })?;
    if meta.is_dir() {
        return Ok(Kind::ParquetFolder);
    }
    if !meta.is_file() {
        // A FIFO or a device would be read until it ends: perhaps never.
        return Err(SqlError::input(format!(
            "table {name}: {} is not a regular file nor a folder",
            path.display()
        )));
    }
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if file.ends_with(".parquet") {
        Ok(Kind::Parquet)
    } else if file.ends_with(".csv") {
        Ok(Kind::Csv)
    } else if file.ends_with(".csv.gz") {
        Ok(Kind::CsvGz)
    } else {
        Err(SqlError::input(format!(
            "table {name}: {} is not a .parquet, .csv or .csv.gz file nor a folder of Parquet \
             files",
            path.display()
        )))
    }
}

/// Checks a table name: a plain lowercase SQL identifier (SQL folds unquoted names to lower
/// case, so a table named otherwise could not be written in a query).
pub fn check_name(name: &str) -> Result<()> {
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok && !name.starts_with("__dpml") {
        Ok(())
    } else {
        Err(SqlError::input(format!(
            "table name {name:?} must be a lowercase SQL name (letters, digits, _; not starting \
             with a digit or __dpml)"
        )))
    }
}

/// Registers table `name` from `path` in `ctx`, declared as `decl`; returns its schema. The
/// column types of a CSV file come from `decl` alone when `private` (see the module docs).
pub async fn register(
    ctx: &SessionContext,
    name: &str,
    path: &Path,
    decl: Option<&TableDecl>,
    private: bool,
) -> Result<SchemaRef> {
    check_name(name)?;
    let text = path.to_str().ok_or_else(|| {
        SqlError::input(format!(
            "table {name}: the path {} is not valid UTF-8",
            path.display()
        ))
    })?;
    let fail = |e: datafusion::error::DataFusionError| {
        SqlError::input(format!(
            "table {name}: cannot use {} as a table: {}",
            path.display(),
            first_line(&e.strip_backtrace())
        ))
    };
    let file_kind = kind(name, path)?;
    match file_kind {
        Kind::Parquet | Kind::ParquetFolder => {
            let files = parquet_files(name, path, file_kind == Kind::ParquetFolder)?;
            if files.is_empty() {
                return Err(SqlError::input(format!(
                    "table {name}: the folder {} holds no .parquet file",
                    path.display()
                )));
            }
            check_footers(name, files).await?;
            // Every footer decoded above; should DataFusion's reading of one still panic, the
            // panic ends this task (on a runtime thread, whose panics the front keeps quiet)
            // rather than the process.
            let (task_ctx, task_name, task_text) =
                (ctx.clone(), name.to_string(), text.to_string());
            let registered = tokio::spawn(async move {
                task_ctx
                    .register_parquet(&task_name, &task_text, ParquetReadOptions::default())
                    .await
            })
            .await;
            match registered {
                Ok(r) => r.map_err(fail)?,
                Err(e) => {
                    return Err(SqlError::input(format!(
                        "table {name}: cannot use {} as a table: a Parquet footer cannot be \
                         decoded ({})",
                        path.display(),
                        panic_message(e.try_into_panic().ok())
                    )));
                }
            }
        }
        Kind::Csv | Kind::CsvGz => {
            let stream = CsvFile::open(name, path, file_kind == Kind::CsvGz, decl, private)?;
            let table = StreamingTable::try_new(Arc::clone(&stream.schema), vec![Arc::new(stream)])
                .map_err(fail)?;
            ctx.register_table(name, Arc::new(table)).map_err(fail)?;
        }
    }
    let table = ctx.table_provider(name).await.map_err(fail)?;
    let schema = table.schema();
    if let Some(column) = duplicate_name(&schema) {
        return Err(SqlError::input(format!(
            "table {name}: {} has two columns named {column:?}: name each column once",
            path.display()
        )));
    }
    let csv = matches!(file_kind, Kind::Csv | Kind::CsvGz);
    // Only a type told from the first rows can be null: a declared one never is.
    if let Some(f) = schema
        .fields()
        .iter()
        .find(|f| csv && f.data_type().is_null())
    {
        return Err(SqlError::input(format!(
            "table {name}: column {} of {} has no value in its first {CSV_SCHEMA_ROWS} rows to \
             tell its type from",
            f.name(),
            path.display()
        )));
    }
    Ok(schema)
}

/// The Parquet files of a table: the file at `path`, or the files a folder's listing reads (as
/// DataFusion lists them: named `*.parquet`, in the folder or in partition folders `key=value`
/// below it).
fn parquet_files(name: &str, path: &Path, folder: bool) -> Result<Vec<PathBuf>> {
    if !folder {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut folders = vec![path.to_path_buf()];
    while let Some(dir) = folders.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            SqlError::input(format!("table {name}: cannot list {}: {e}", dir.display()))
        })?;
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let file_name = file_name.to_string_lossy();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && file_name.contains('=') {
                folders.push(entry.path());
            } else if !is_dir && file_name.ends_with(".parquet") {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Checks that each Parquet file's footer decodes (its length within the file, its metadata,
/// the Arrow schema it may carry), before DataFusion reads it: a damaged footer is the user's
/// file, told as such and naming it, and decoders that panic on some damage (arrow's IPC
/// schema reader, the metadata decoder's arithmetic) are run where a panic is caught, on a
/// runtime thread (whose panics the front keeps quiet). Reads the footers only (and the page
/// indexes, which a query reads before any row).
async fn check_footers(name: &str, files: Vec<PathBuf>) -> Result<()> {
    let checked = tokio::task::spawn_blocking(move || {
        for file in &files {
            let outcome = std::panic::catch_unwind(|| check_footer(file)).unwrap_or_else(|p| {
                Err(format!(
                    "its footer cannot be decoded ({})",
                    panic_message(Some(p))
                ))
            });
            if let Err(why) = outcome {
                return Err((file.clone(), why));
            }
        }
        Ok(())
    })
    .await
    .map_err(SqlError::internal)?;
    checked.map_err(|(file, why)| {
        SqlError::input(format!(
            "table {name}: the Parquet file {} cannot be used: {why}",
            file.display()
        ))
    })
}

/// Why the footer of the Parquet file `path` cannot be used, if it cannot.
fn check_footer(path: &Path) -> std::result::Result<(), String> {
    use datafusion::parquet::arrow::parquet_to_arrow_schema;
    use datafusion::parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
    use std::io::{Seek, SeekFrom};
    let mut file = File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let size = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?
        .len();
    // PAR1, the footer, its length (4 bytes) and PAR1 again.
    if size < 12 {
        return Err(format!(
            "it is not Parquet: {size} bytes, too short for a Parquet file"
        ));
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::End(-8))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|e| format!("cannot read it: {e}"))?;
    match &tail[4..] {
        b"PAR1" => {}
        b"PARE" => return Err("it is an encrypted Parquet file, which dpml cannot read".into()),
        _ => return Err("it is not Parquet (it does not end with PAR1)".into()),
    }
    let footer = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if footer + 12 > size {
        return Err(format!(
            "its footer is damaged: it gives the footer's length as {footer} bytes, more than \
             the file holds ({size} bytes)"
        ));
    }
    let damaged = |e: &dyn std::fmt::Display| {
        format!("its footer is damaged: {}", first_line(&e.to_string()))
    };
    let metadata = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .parse_and_finish(&file)
        .map_err(|e| damaged(&e))?;
    // Each column chunk within the data, before the footer (a chunk past it fails a query
    // only once the rows are read).
    let data_end = size - footer - 8;
    for row_group in metadata.row_groups() {
        for column in row_group.columns() {
            let (start, len) = column.byte_range();
            if start.checked_add(len).is_none_or(|end| end > data_end) {
                return Err(format!(
                    "its footer is damaged: it places column {} at bytes {start}..+{len}, past \
                     the data ({data_end} bytes)",
                    column.column_path()
                ));
            }
        }
    }
    let meta = metadata.file_metadata();
    let schema = parquet_to_arrow_schema(meta.schema_descr(), meta.key_value_metadata())
        .map_err(|e| damaged(&e))?;
    match duplicate_name(&schema) {
        Some(column) => Err(format!(
            "it has two columns named {column:?}: name each column once"
        )),
        None => Ok(()),
    }
}

/// A column name that `schema` holds twice, if any.
fn duplicate_name(schema: &Schema) -> Option<String> {
    let mut names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
    names.sort();
    names
        .windows(2)
        .find(|w| w[0] == w[1])
        .map(|w| w[0].clone())
}

/// The text of a panic's payload, on one line.
fn panic_message(payload: Option<Box<dyn std::any::Any + Send>>) -> String {
    let text = payload.and_then(|p| {
        p.downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
    });
    first_line(text.as_deref().unwrap_or("a decoder failed"))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// The type of a private CSV column: its declared `type`; else real for a column with bounds
/// (a value to sum), the keys' own type for inline keys (integer, real, boolean; text
/// otherwise); else text. Never read from the rows.
pub(crate) fn declared_type(column: Option<&ColumnDecl>) -> DataType {
    let Some(c) = column else {
        return DataType::Utf8;
    };
    if let Some(t) = c.column_type {
        return match t {
            ColumnType::Integer => DataType::Int64,
            ColumnType::Real => DataType::Float64,
            ColumnType::Text => DataType::Utf8,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Date => DataType::Date32,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        };
    }
    if c.bounds.is_some() || c.sum_bounds.is_some() {
        return DataType::Float64;
    }
    let keys = c.keys.as_deref().unwrap_or_default();
    let all = |f: fn(&KeyValue) -> bool| !keys.is_empty() && keys.iter().all(f);
    if all(|k| matches!(k, KeyValue::Int(_))) {
        DataType::Int64
    } else if all(|k| matches!(k, KeyValue::Int(_) | KeyValue::Float(_))) {
        DataType::Float64
    } else if all(|k| matches!(k, KeyValue::Bool(_))) {
        DataType::Boolean
    } else {
        DataType::Utf8
    }
}

/// A CSV file (gzip-compressed or not), read as a stream of batches that no row can fail.
///
/// Whether a query fails must not depend on one unit's rows: it is an exact answer that no
/// noise covers. So a value that does not parse as its column's type is read as NULL (as
/// Spark's permissive mode does), a row with fewer fields than the header has NULLs for the
/// rest and one with more has its extra fields dropped, and bytes that are not UTF-8 are
/// replaced. Only a damaged file (an I/O or gzip error) still fails a query.
#[derive(Debug)]
struct CsvFile {
    path: PathBuf,
    gz: bool,
    schema: SchemaRef,
}

/// The records of a CSV file after its header: any number of fields each, never a UTF-8 error.
type Records = csv::ByteRecordsIntoIter<Box<dyn Read + Send>>;

impl CsvFile {
    /// Reads the header of the CSV file at `path`. Its column types are those `decl` declares
    /// ([`declared_type`]); when not `private`, an undeclared `type` is told from the first
    /// [`CSV_SCHEMA_ROWS`] rows.
    fn open(
        name: &str,
        path: &Path,
        gz: bool,
        decl: Option<&TableDecl>,
        private: bool,
    ) -> Result<Self> {
        let err = |e: &dyn std::fmt::Display| {
            SqlError::input(format!(
                "table {name}: cannot read {} as {}CSV: {e}",
                path.display(),
                if gz { "gzip-compressed " } else { "" }
            ))
        };
        let mut reader = Self::reader(path, gz).map_err(|e| err(&e))?;
        let header = reader.byte_headers().map_err(|e| err(&e))?.clone();
        if header.iter().all(<[u8]>::is_empty) {
            return Err(err(
                &"its first line, the header naming the columns, is empty",
            ));
        }
        let column = |n: &str| decl.and_then(|d| d.column(n));
        if private {
            let fields: Vec<Field> = (header.iter().map(String::from_utf8_lossy))
                .map(|n| Field::new(n.as_ref(), declared_type(column(&n)), true))
                .collect();
            return Ok(Self {
                path: path.to_path_buf(),
                gz,
                schema: Arc::new(Schema::new(fields)),
            });
        }
        // The first rows, each made as wide as the header, in the shape arrow infers types from.
        let mut first = csv::Writer::from_writer(Vec::new());
        first.write_byte_record(&header).map_err(|e| err(&e))?;
        for record in reader.byte_records().take(CSV_SCHEMA_ROWS) {
            let record = record.map_err(|e| err(&e))?;
            let row = (0..header.len()).map(|i| record.get(i).unwrap_or_default());
            first.write_record(row).map_err(|e| err(&e))?;
        }
        let first = first.into_inner().map_err(|e| err(&e))?;
        let (schema, _) = Format::default()
            .with_header(true)
            .infer_schema(first.as_slice(), None)
            .map_err(|e| err(&e))?;
        // A declared type wins over the one told from the rows.
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| match column(f.name()) {
                Some(c) if c.column_type.is_some() => {
                    f.as_ref().clone().with_data_type(declared_type(Some(c)))
                }
                _ => f.as_ref().clone(),
            })
            .collect();
        Ok(Self {
            path: path.to_path_buf(),
            gz,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    fn reader(path: &Path, gz: bool) -> std::io::Result<csv::Reader<Box<dyn Read + Send>>> {
        let file = BufReader::new(File::open(path)?);
        let bytes: Box<dyn Read + Send> = if gz {
            Box::new(BufReader::new(MultiGzDecoder::new(file)))
        } else {
            Box::new(file)
        };
        Ok(csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .from_reader(bytes))
    }

    /// The next batch of at most `size` rows, typed as `schema` says; None at the end.
    fn batch(
        schema: &SchemaRef,
        records: &mut Records,
        size: usize,
    ) -> Option<std::io::Result<RecordBatch>> {
        let rows: Vec<ByteRecord> = match records.take(size).collect() {
            Ok(rows) => rows,
            Err(e) => return Some(Err(std::io::Error::other(e))),
        };
        if rows.is_empty() {
            return None;
        }
        let safe = CastOptions {
            safe: true,
            ..CastOptions::default()
        };
        let columns = schema.fields().iter().enumerate().map(|(i, field)| {
            // An empty field is NULL, as arrow's own CSV reader reads it.
            let text: StringArray = rows
                .iter()
                .map(|r| {
                    r.get(i)
                        .filter(|v| !v.is_empty())
                        .map(String::from_utf8_lossy)
                })
                .collect();
            cast_with_options(&text, field.data_type(), &safe)
        });
        let columns = match columns.collect::<std::result::Result<Vec<ArrayRef>, _>>() {
            Ok(c) => c,
            Err(e) => return Some(Err(std::io::Error::other(e))),
        };
        Some(RecordBatch::try_new(Arc::clone(schema), columns).map_err(std::io::Error::other))
    }
}

impl PartitionStream for CsvFile {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = Arc::clone(&self.schema);
        let typed = Arc::clone(&self.schema);
        let size = ctx.session_config().batch_size();
        let batches = Self::reader(&self.path, self.gz).map(|r| r.into_byte_records());
        let stream: std::pin::Pin<
            Box<dyn futures::Stream<Item = datafusion::error::Result<_>> + Send>,
        > = match batches {
            Ok(mut records) => Box::pin(futures::stream::iter(std::iter::from_fn(move || {
                Self::batch(&typed, &mut records, size)
                    .map(|b| b.map_err(datafusion::error::DataFusionError::from))
            }))),
            Err(e) => Box::pin(futures::stream::once(async move { Err(e.into()) })),
        };
        Box::pin(RecordBatchStreamAdapter::new(schema, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_value_that_does_not_parse_is_null() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        // The types come from the first rows; a later row breaks them in every way it can.
        let mut text = b"n,x,s\n".to_vec();
        for i in 0..CSV_SCHEMA_ROWS {
            text.extend(format!("{i},{i}.5,a\n").bytes());
        }
        text.extend(b"1,abc,b\n2,3.5,c,extra\n3\n4,\"5\",\xffd\n");
        std::fs::write(&path, text).unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let rows = runtime.block_on(async {
            let ctx = SessionContext::new();
            let schema = register(&ctx, "t", &path, None, false).await.unwrap();
            let types: Vec<_> = schema
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect();
            use datafusion::arrow::datatypes::DataType::{Float64, Int64, Utf8};
            assert_eq!(types, [Int64, Float64, Utf8]);
            let sql = "SELECT CAST(n AS VARCHAR) || '|' || COALESCE(CAST(x AS VARCHAR), 'null') \
                       || '|' || COALESCE(s, 'null') FROM t WHERE n BETWEEN 1 AND 4 ORDER BY n, s";
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            let column = batches[0].column(0).clone();
            let cast = cast_with_options(&column, &Utf8, &CastOptions::default()).unwrap();
            let strings = cast.as_any().downcast_ref::<StringArray>().unwrap();
            strings
                .iter()
                .map(|v| v.unwrap().to_string())
                .collect::<Vec<_>>()
        });
        // Rows 1–4 of the first rows, then the four broken ones.
        assert_eq!(
            rows,
            [
                "1|1.5|a",
                "1|null|b",
                "2|2.5|a",
                "2|3.5|c",
                "3|3.5|a",
                "3|null|null",
                "4|4.5|a",
                "4|5.0|\u{fffd}d"
            ]
        );
    }

    #[test]
    fn a_private_csv_column_has_its_declared_type() {
        use DataType::{Boolean, Date32, Float64, Int64, Utf8};
        let decl: TableDecl = toml::from_str(
            r#"
columns = [
  { name = "b", bounds = [0, 1] },
  { name = "k", keys = [1, 2] },
  { name = "r", keys = [1, 2.5] },
  { name = "f", keys = [true, false] },
  { name = "s", keys = ["a", 1] },
  { name = "d", type = "date", keys = ["1995-01-01"] },
  { name = "i", type = "BIGINT" },
]"#,
        )
        .unwrap();
        let ty = |name: &str| declared_type(decl.column(name));
        let got: Vec<_> = ["b", "k", "r", "f", "s", "d", "i", "undeclared"]
            .map(ty)
            .into();
        assert_eq!(
            got,
            [Float64, Int64, Float64, Boolean, Utf8, Date32, Int64, Utf8]
        );
        // The same file read as private (declared) and as public (from its rows).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(
            &path,
            "b,k,r,f,s,d,i,undeclared\n1,1,1,true,a,1995-01-01,3,4\n",
        )
        .unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let types = |private| {
            runtime.block_on(async {
                let ctx = SessionContext::new();
                let schema = register(&ctx, "t", &path, Some(&decl), private)
                    .await
                    .unwrap();
                schema
                    .fields()
                    .iter()
                    .map(|f| f.data_type().clone())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(types(true), got);
        // Told from the rows where no type is declared.
        assert_eq!(
            types(false),
            [Int64, Int64, Int64, Boolean, Utf8, Date32, Int64, Int64]
        );
    }

    #[test]
    fn names_are_plain_lowercase_sql() {
        assert!(check_name("visits_2").is_ok());
        for bad in ["Visits", "2x", "a-b", "", "__dpml_x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
