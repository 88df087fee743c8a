//! The tables of a query (`--table NAME=PATH`): a Parquet file, a folder of Parquet files, a
//! CSV file, or a gzip-compressed CSV file (`.csv.gz`, decoded as it streams, without a
//! temporary copy). Registering reads only what describes a table — Parquet footers, a CSV's
//! header and the types of its first rows — never a value that is released.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::csv::ReaderBuilder;
use datafusion::arrow::csv::reader::Format;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};
use flate2::read::MultiGzDecoder;

use crate::error::{Result, SqlError};

/// Rows read to infer a CSV file's column types.
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

/// Registers table `name` from `path` in `ctx`; returns its schema.
pub async fn register(ctx: &SessionContext, name: &str, path: &Path) -> Result<SchemaRef> {
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
            if file_kind == Kind::ParquetFolder && !has_parquet(path)? {
                return Err(SqlError::input(format!(
                    "table {name}: the folder {} holds no .parquet file",
                    path.display()
                )));
            }
            ctx.register_parquet(name, text, ParquetReadOptions::default())
                .await
                .map_err(fail)?;
        }
        Kind::Csv => {
            ctx.register_csv(
                name,
                text,
                CsvReadOptions::new()
                    .has_header(true)
                    .schema_infer_max_records(CSV_SCHEMA_ROWS),
            )
            .await
            .map_err(fail)?;
        }
        Kind::CsvGz => {
            let stream = GzCsv::open(name, path)?;
            let table = StreamingTable::try_new(Arc::clone(&stream.schema), vec![Arc::new(stream)])
                .map_err(fail)?;
            ctx.register_table(name, Arc::new(table)).map_err(fail)?;
        }
    }
    let table = ctx.table_provider(name).await.map_err(fail)?;
    let schema = table.schema();
    let csv = matches!(file_kind, Kind::Csv | Kind::CsvGz);
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

fn has_parquet(dir: &Path) -> Result<bool> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| SqlError::input(format!("cannot list {}: {e}", dir.display())))?;
    Ok(entries.flatten().any(|e| {
        e.file_name()
            .to_string_lossy()
            .to_ascii_lowercase()
            .ends_with(".parquet")
    }))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// A gzip-compressed CSV file, decoded as DataFusion reads it.
#[derive(Debug)]
struct GzCsv {
    path: PathBuf,
    schema: SchemaRef,
}

impl GzCsv {
    fn open(name: &str, path: &Path) -> Result<Self> {
        let err = |e: &dyn std::fmt::Display| {
            SqlError::input(format!(
                "table {name}: cannot read {} as gzip-compressed CSV: {e}",
                path.display()
            ))
        };
        let mut file = File::open(path).map_err(|e| err(&e))?;
        let (schema, _) = Format::default()
            .with_header(true)
            .infer_schema(
                BufReader::new(MultiGzDecoder::new(&mut file)),
                Some(CSV_SCHEMA_ROWS),
            )
            .map_err(|e| err(&e))?;
        file.rewind().map_err(|e| err(&e))?;
        Ok(Self {
            path: path.to_path_buf(),
            schema: Arc::new(schema),
        })
    }
}

impl PartitionStream for GzCsv {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = Arc::clone(&self.schema);
        let batch_size = ctx.session_config().batch_size();
        let reader = File::open(&self.path)
            .map_err(datafusion::error::DataFusionError::from)
            .and_then(|f| {
                ReaderBuilder::new(Arc::clone(&schema))
                    .with_header(true)
                    .with_batch_size(batch_size)
                    .build(BufReader::new(MultiGzDecoder::new(f)))
                    .map_err(datafusion::error::DataFusionError::from)
            });
        let stream: std::pin::Pin<
            Box<dyn futures::Stream<Item = datafusion::error::Result<_>> + Send>,
        > = match reader {
            Ok(r) => Box::pin(futures::stream::iter(
                r.map(|b| b.map_err(datafusion::error::DataFusionError::from)),
            )),
            Err(e) => Box::pin(futures::stream::once(async move { Err(e) })),
        };
        Box::pin(RecordBatchStreamAdapter::new(schema, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_lowercase_sql() {
        assert!(check_name("visits_2").is_ok());
        for bad in ["Visits", "2x", "a-b", "", "__dpml_x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
