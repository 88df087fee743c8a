//! TPC-H as a private database, generated locally (the `tpchgen` crates; no download): the
//! eight tables as Parquet files and the DP schema in which the customer is the privacy unit,
//! reached from orders through `o_custkey` and from lineitem through `l_orderkey`. Suppliers,
//! parts, nations and regions are public.

use std::fs::File;
use std::path::{Path, PathBuf};

use datafusion::arrow::record_batch::RecordBatchReader;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow,
    SupplierArrow,
};

use crate::error::{Result, SqlError};

/// The eight TPC-H tables.
pub const TABLES: [&str; 8] = [
    "customer", "orders", "lineitem", "supplier", "part", "partsupp", "nation", "region",
];

/// The DP schema of TPC-H (also `benchmarks/sql/tpch.toml`). The bounds are TPC-H's own
/// value ranges (specification §4.2.3), public facts of the benchmark; the contribution
/// bounds are choices: a customer's line items fall in at most 4 (return flag, line status)
/// groups of Q1, its orders in at most 5 priorities.
pub const SCHEMA: &str = include_str!("../../../benchmarks/sql/tpch.toml");

/// The DP queries of `benchmarks/sql/` (name, SQL), embedded so that an installed binary
/// needs no checkout. They release under ε = 1 with δ > 0 (some group by private keys).
pub const QUERIES: [(&str, &str); 8] = [
    (
        "orderpriority_histogram",
        include_str!("../../../benchmarks/sql/orderpriority_histogram.sql"),
    ),
    ("q1", include_str!("../../../benchmarks/sql/q1.sql")),
    (
        "q1_private_keys",
        include_str!("../../../benchmarks/sql/q1_private_keys.sql"),
    ),
    ("q3", include_str!("../../../benchmarks/sql/q3.sql")),
    ("q5", include_str!("../../../benchmarks/sql/q5.sql")),
    ("q10", include_str!("../../../benchmarks/sql/q10.sql")),
    ("q13", include_str!("../../../benchmarks/sql/q13.sql")),
    ("q18", include_str!("../../../benchmarks/sql/q18.sql")),
];

/// Writes the eight tables at `scale_factor` into `dir` as `NAME.parquet`, and the DP schema
/// as `dir/schema.toml`; returns the tables' (name, path).
///
/// # Errors
/// [`SqlError::Input`] for a scale factor outside (0, 1000] or a folder that cannot be
/// written.
pub fn generate(dir: &Path, scale_factor: f64) -> Result<Vec<(String, PathBuf)>> {
    if !(scale_factor > 0.0 && scale_factor <= 1000.0) {
        return Err(SqlError::input(format!(
            "scale factor must be in (0, 1000], got {scale_factor}"
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| SqlError::input(format!("cannot create {}: {e}", dir.display())))?;
    let sf = scale_factor;
    for name in TABLES {
        let path = dir.join(format!("{name}.parquet"));
        match name {
            "customer" => write(&path, CustomerArrow::new(CustomerGenerator::new(sf, 1, 1)))?,
            "orders" => write(&path, OrderArrow::new(OrderGenerator::new(sf, 1, 1)))?,
            "lineitem" => write(&path, LineItemArrow::new(LineItemGenerator::new(sf, 1, 1)))?,
            "supplier" => write(&path, SupplierArrow::new(SupplierGenerator::new(sf, 1, 1)))?,
            "part" => write(&path, PartArrow::new(PartGenerator::new(sf, 1, 1)))?,
            "partsupp" => write(&path, PartSuppArrow::new(PartSuppGenerator::new(sf, 1, 1)))?,
            "nation" => write(&path, NationArrow::new(NationGenerator::new(sf, 1, 1)))?,
            _ => write(&path, RegionArrow::new(RegionGenerator::new(sf, 1, 1)))?,
        }
    }
    std::fs::write(dir.join("schema.toml"), SCHEMA)
        .map_err(|e| SqlError::input(format!("cannot write the schema: {e}")))?;
    Ok(tables(dir))
}

/// The tables of a generated folder.
pub fn tables(dir: &Path) -> Vec<(String, PathBuf)> {
    TABLES
        .iter()
        .map(|t| (t.to_string(), dir.join(format!("{t}.parquet"))))
        .collect()
}

fn write(path: &Path, reader: impl RecordBatchReader) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| {
        SqlError::input(format!("cannot write {}: {e}", path.display()))
    };
    let file = File::create(path).map_err(|e| err(&e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut writer =
        ArrowWriter::try_new(file, reader.schema(), Some(props)).map_err(|e| err(&e))?;
    for batch in reader {
        writer
            .write(&batch.map_err(|e| err(&e))?)
            .map_err(|e| err(&e))?;
    }
    writer.close().map_err(|e| err(&e))?;
    Ok(())
}
