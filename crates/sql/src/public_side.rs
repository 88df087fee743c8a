//! What public rows bring to the private rows they are joined to, checked on the public rows
//! themselves (they are public: reading them costs no privacy) before the query is charged.
//!
//! A join repeats each private row once per public row that matches it, before any bound
//! applies: k joins with a public table of 4 rows per key make one unit's r rows r·4^k, and the
//! query's time and memory then tell whether that unit has rows at all. And a public subquery's
//! computed text (`repeat(name, 6000000)`) is as long as the analyst likes, so expressions on
//! private rows that use it could build text of any size on the chosen unit's rows alone.
//! So the public sides are measured: every private row may be repeated at most
//! [`MAX_REPEATS`] times by all such joins together, and a computed text column of a public
//! side may hold at most [`MAX_COMPUTED_TEXT_BYTES`] per value.

use std::sync::Arc;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::functions::string::expr_fn::octet_length;
use datafusion::functions_aggregate::expr_fn::{count, max};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, lit};

use crate::error::{Result, SqlError, plan_err};

/// The most times all joins with public rows together may repeat one private row.
pub(crate) const MAX_REPEATS: u64 = 1000;

/// The most bytes a computed text value of a public side may hold (the constants' cap).
pub(crate) const MAX_COMPUTED_TEXT_BYTES: i64 = 64 * 1024;

/// A public relation joined to private rows.
#[derive(Debug, Clone)]
pub(crate) struct PublicSide {
    /// Its plan (public rows only).
    pub plan: LogicalPlan,
    /// The join's equality keys on this side, when the join can repeat private rows (None:
    /// a semi- or anti-join, which only keeps or drops them). Empty: every public row matches
    /// every private row (a cross join, or a join on other conditions only).
    pub keys: Option<Vec<Expr>>,
    /// Its output columns that are computed (not a public table's own column).
    pub computed: Vec<usize>,
}

/// Refuses, by what they bring, public sides that repeat private rows more than
/// [`MAX_REPEATS`] times together, or compute text longer than [`MAX_COMPUTED_TEXT_BYTES`] or
/// nested values; `collect` runs a plan over public rows.
///
/// A side may read the released cells of another aggregate (a subquery's DP aggregate), which
/// are empty until that aggregate is released: `released` gives each such placeholder table
/// with the most rows it can hold (None: its keys are private, and how many pass is not known
/// before the release). Such a side repeats a private row at most that many times; what it
/// computes is computed from released cells only.
pub(crate) fn check(
    sides: &[PublicSide],
    released: &[(Arc<dyn TableProvider>, Option<usize>)],
    collect: impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<()> {
    let mut repeats: u64 = 1;
    for side in sides {
        let cells = released_rows(&side.plan, released, &collect)?;
        if let Some(bound) = &cells {
            if side.keys.is_some() {
                let most = bound.ok_or_else(|| {
                    SqlError::refused(
                        "a join of private rows with released cells of unknown number",
                        "an aggregate grouped by private keys releases the keys that pass its \
                         threshold (and an UNNEST makes as many rows as its lists hold), so how \
                         often the join can repeat a private row is known only after the \
                         release; group by a public key set",
                    )
                })?;
                repeats = repeats.saturating_mul(most.max(1));
            }
        } else if let Some(keys) = &side.keys {
            let most = most_matches(side, keys, &collect)?;
            repeats = repeats.saturating_mul(most.max(1));
            if repeats > MAX_REPEATS {
                return Err(SqlError::refused(
                    "joins of private rows with public rows",
                    format!(
                        "together they repeat a private row up to {repeats} times (this join's \
                         public side has up to {most} rows per join key), before any bound \
                         applies, so one unit's rows would grow with each join; at most \
                         {MAX_REPEATS} are allowed: join on a key the public side holds once, \
                         or aggregate the public side first"
                    ),
                ));
            }
        }
        if cells.is_none() {
            check_computed(side, &collect)?;
        }
    }
    if repeats > MAX_REPEATS {
        return Err(SqlError::refused(
            "joins of private rows with released cells",
            format!(
                "together they can repeat a private row up to {repeats} times, before any bound \
                 applies; at most {MAX_REPEATS} are allowed"
            ),
        ));
    }
    Ok(())
}

/// When `plan` reads released cells: the most rows it can make, the product of what each of
/// its row sources can hold (a placeholder: its bound; a public table: its rows, counted; a
/// `VALUES`: its rows); None inside when one of them is unbounded (private keys, `UNNEST`).
/// None when it reads no released cells.
fn released_rows(
    plan: &LogicalPlan,
    released: &[(Arc<dyn TableProvider>, Option<usize>)],
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<Option<Option<u64>>> {
    enum Source {
        Cells(Option<usize>),
        Table(LogicalPlan),
        Rows(usize),
        Unbounded,
    }
    let mut sources = Vec::new();
    let _ = plan.apply(|node| {
        sources.push(match node {
            LogicalPlan::TableScan(scan) => {
                let cells = source_as_provider(&scan.source).ok().and_then(|provider| {
                    released.iter().find(|(table, _)| {
                        std::ptr::addr_eq(Arc::as_ptr(table), Arc::as_ptr(&provider))
                    })
                });
                match cells {
                    Some((_, rows)) => Source::Cells(*rows),
                    None => Source::Table(node.clone()),
                }
            }
            LogicalPlan::Values(v) => Source::Rows(v.values.len()),
            LogicalPlan::Unnest(_) => Source::Unbounded,
            _ => return Ok(TreeNodeRecursion::Continue),
        });
        Ok(TreeNodeRecursion::Continue)
    });
    if !sources.iter().any(|s| matches!(s, Source::Cells(_))) {
        return Ok(None);
    }
    let mut most = Some(1u64);
    for source in sources {
        let rows = match source {
            Source::Cells(rows) => rows.map(|r| r as u64),
            Source::Table(scan) => Some(count_rows(scan, collect)?),
            Source::Rows(n) => Some(n as u64),
            Source::Unbounded => None,
        };
        most = most.zip(rows).map(|(a, b)| a.saturating_mul(b.max(1)));
    }
    Ok(Some(most))
}

/// The values of the integer aggregate `aggregate` over the public `plan`, one per value of
/// `keys` (NULLs left out).
fn aggregate_ints(
    plan: &LogicalPlan,
    keys: &[Expr],
    aggregate: Expr,
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<Vec<i64>> {
    let plan = LogicalPlanBuilder::from(plan.clone())
        .aggregate(keys.to_vec(), vec![aggregate.alias("__dpml_value")])
        .and_then(|b| b.build())
        .map_err(plan_err)?;
    let mut values = Vec::new();
    for batch in collect(plan)? {
        let column = batch.column(batch.num_columns() - 1);
        let ints = datafusion::arrow::compute::cast(column, &DataType::Int64)
            .map_err(SqlError::internal)?;
        values.extend(ints.as_primitive::<Int64Type>().iter().flatten());
    }
    Ok(values)
}

/// The rows of a public plan.
fn count_rows(
    plan: LogicalPlan,
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<u64> {
    let n: i64 = aggregate_ints(&plan, &[], count(lit(1)), collect)?
        .into_iter()
        .sum();
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The most public rows of `side` that share one value of `keys` (all rows without keys).
fn most_matches(
    side: &PublicSide,
    keys: &[Expr],
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<u64> {
    let most = aggregate_ints(&side.plan, keys, count(lit(1)), collect)?
        .into_iter()
        .max()
        .unwrap_or(0);
    Ok(u64::try_from(most).unwrap_or(0))
}

/// Refuses a computed column of `side` that holds nested values, or text longer than
/// [`MAX_COMPUTED_TEXT_BYTES`].
fn check_computed(
    side: &PublicSide,
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<()> {
    let schema = side.plan.schema();
    let mut lengths = Vec::new();
    for &i in &side.computed {
        let (qualifier, field) = schema.qualified_field(i);
        let column = Expr::Column(datafusion::common::Column::new(
            qualifier.cloned(),
            field.name(),
        ));
        match field.data_type() {
            t if t.is_nested() => {
                return Err(SqlError::refused(
                    format!("the computed column {} of public rows", field.name()),
                    "nested values computed on public rows may be of any size, and they meet \
                     private rows here; compute them after the aggregate",
                ));
            }
            DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView => {
                lengths.push((field.name().clone(), max(octet_length(column))))
            }
            _ => {}
        }
    }
    for (name, longest) in lengths {
        let bytes = aggregate_ints(&side.plan, &[], longest, collect)?
            .into_iter()
            .max()
            .unwrap_or(0);
        if bytes > MAX_COMPUTED_TEXT_BYTES {
            return Err(SqlError::refused(
                format!("the computed column {name} of public rows"),
                format!(
                    "a value of it holds {bytes} bytes, and it meets private rows here, where \
                     text is bounded to {MAX_COMPUTED_TEXT_BYTES} bytes per value; compute it \
                     after the aggregate"
                ),
            ));
        }
    }
    Ok(())
}
