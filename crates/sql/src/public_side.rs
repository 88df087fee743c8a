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
//!
//! And each public side is computed in full, once, before any private row is read, and stored:
//! the private rows are joined to the stored rows. Left to the engine, a hash join would read
//! its public side only when some private row reaches it, so whether a public expression fails,
//! and how long it takes, would tell whether any private row passed the query's filter. A side
//! that reads no released cells is computed before the charge (a failure then costs nothing
//! and is the same for every table); one that reads another aggregate's released cells is
//! computed once those are released, before this aggregate's private rows are read.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::kernels::length::length;
use datafusion::arrow::compute::{cast, max as max_of};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{MemTable, TableProvider};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::functions_aggregate::expr_fn::count;
use datafusion::logical_expr::{Expr, GroupingSet, LogicalPlan, LogicalPlanBuilder, lit};

use crate::error::{Result, SqlError, plan_err};

/// The most times all joins with public rows together may repeat one private row.
pub(crate) const MAX_REPEATS: u64 = 1000;

/// The most bytes a computed text value of a public side may hold (the constants' cap).
pub(crate) const MAX_COMPUTED_TEXT_BYTES: usize = 64 * 1024;

/// The most bytes that all joins with public rows together may add to one private row: its
/// repeats times the longest public row each carries. A thousand repeats of a row with 64 KiB
/// of public text would make one unit's row 64 MiB, and the query's time would tell whether
/// the unit has rows.
pub(crate) const MAX_JOINED_BYTES: u64 = 1024 * 1024;

/// The most bytes of constants and public text that the expressions on one private row may
/// work through, on all its repeats together (see [`crate::total::composed_text`]): some
/// 20 ms of hashing. Forty `md5` of 12 KB constants on each of a thousand repeats would take
/// seconds on the rows of one unit, and the query's time would tell whether it has any.
pub(crate) const MAX_WORK_BYTES: u64 = 16 * 1024 * 1024;

/// A public relation joined to private rows.
#[derive(Debug, Clone)]
pub(crate) struct PublicSide {
    /// Its plan (public rows only, and maybe released cells).
    pub plan: LogicalPlan,
    /// The table its rows are stored in, and the plan that reads them under the plan's
    /// column names: what the join reads (None on a cluster: the join reads `plan`).
    pub stored: Option<(Arc<MemTable>, LogicalPlan)>,
    /// The join's equality keys on this side, when the join can repeat private rows or
    /// evaluates a condition on each pair of matching rows (None: a semi- or anti-join on
    /// keys alone, which only keeps or drops them). Empty: every public row matches every
    /// private row (a cross join, or a join on other conditions only).
    pub keys: Option<Vec<Expr>>,
    /// Its output columns that are computed (not a public table's own column).
    pub computed: Vec<usize>,
}

/// A public side that reads released cells, computed once they are released: the most times
/// it may repeat a private row (checked before the charge), and the repeats and bytes of
/// the query's other public sides (its own row's bytes are known only then).
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub side: PublicSide,
    pub most: u64,
    pub repeats: u64,
    pub other_bytes: u64,
}

/// What the public sides were found to hold, before the charge.
#[derive(Debug, Default)]
pub(crate) struct Measured {
    /// The sides that read released cells, to be computed once those are released.
    pub pending: Vec<Pending>,
    /// Per stored table: the most bytes a value of each of its columns holds (a side that
    /// reads released cells: [`MAX_COMPUTED_TEXT_BYTES`] for its text columns).
    pub longest: Vec<(Arc<MemTable>, Vec<usize>)>,
    /// The most times all joins together repeat one private row (or pair it with public
    /// rows a condition is evaluated on).
    pub repeats: u64,
}

impl Measured {
    /// The longest value of column `i` of the stored table `table`, if it is one.
    pub(crate) fn longest(&self, table: &Arc<dyn TableProvider>, i: usize) -> Option<usize> {
        self.longest
            .iter()
            .find(|(t, _)| std::ptr::addr_eq(Arc::as_ptr(t), Arc::as_ptr(table)))
            .and_then(|(_, columns)| columns.get(i).copied())
    }
}

/// One computed public side: the plan that reads its rows, the bytes of its longest row and
/// of its longest value per column, and the bytes it holds.
struct Computed {
    reads: LogicalPlan,
    row_bytes: u64,
    longest: Vec<usize>,
    bytes: u64,
}

/// Before the charge: computes and stores every public side that reads no released cells,
/// and refuses, by what they bring, public sides that repeat private rows more than
/// [`MAX_REPEATS`] times together, or compute text longer than [`MAX_COMPUTED_TEXT_BYTES`] or
/// nested values; `collect` runs a plan over public rows.
///
/// A side may read the released cells of another aggregate (a subquery's DP aggregate), which
/// are empty until that aggregate is released: `released` gives each such placeholder table
/// with the most rows it can hold (None: its keys are private, and how many pass is not known
/// before the release). Such a side is bounded by the rows its plan can make from its sources,
/// and returned, to be computed by [`fill`] once the cells are released.
pub(crate) fn check(
    sides: &[PublicSide],
    released: &[(Arc<dyn TableProvider>, Option<usize>)],
    memory_limit: Option<u64>,
    collect: impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<Measured> {
    let mut repeats: u64 = 1;
    let mut row_bytes: u64 = 0;
    let mut held: u64 = 0;
    let mut measured = Measured::default();
    let mut pending = Vec::new();
    for side in sides {
        if reads_cells(&side.plan, released) {
            let most = row_bound(&side.plan, released, &collect)?.ok_or_else(|| {
                SqlError::refused(
                    "a join of private rows with released cells of unknown number",
                    "an aggregate grouped by private keys releases the keys that pass its \
                     threshold (and an UNNEST makes as many rows as its lists hold), so how \
                     often the join can repeat a private row is known only after the \
                     release; group by a public key set",
                )
            })?;
            if side.keys.is_some() {
                repeats = repeats.saturating_mul(most.max(1));
            }
            if let Some((table, _)) = &side.stored {
                let schema = side.plan.schema();
                let longest = (0..schema.fields().len())
                    .map(|i| match longest_type_bytes(schema.field(i).data_type()) {
                        Some(bytes) => bytes,
                        None => MAX_COMPUTED_TEXT_BYTES,
                    })
                    .collect();
                measured.longest.push((Arc::clone(table), longest));
            }
            pending.push((side.clone(), most));
            continue;
        }
        let computed = compute(side, &collect)?;
        held = held.saturating_add(computed.bytes);
        if let Some(limit) = memory_limit
            && held > limit
        {
            // Stored before any private row is read: the same failure for every table.
            return Err(SqlError::OutOfMemory {
                limit,
                charged: false,
            });
        }
        if side.keys.is_some() {
            // A semi- or anti-join on keys alone reads no public columns per private row.
            row_bytes = row_bytes.saturating_add(computed.row_bytes);
        }
        if let Some((table, _)) = &side.stored {
            measured
                .longest
                .push((Arc::clone(table), computed.longest.clone()));
        }
        let reads = computed.reads;
        if let Some(keys) = &side.keys {
            let most = most_matches(&reads, keys, &collect)?;
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
    check_joined_bytes(repeats, row_bytes)?;
    measured.repeats = repeats;
    measured.pending = pending
        .into_iter()
        .map(|(side, most)| Pending {
            side,
            most,
            repeats,
            other_bytes: row_bytes,
        })
        .collect();
    Ok(measured)
}

/// Refuses joins that together make one private row carry more than [`MAX_JOINED_BYTES`] of
/// public rows: `repeats` copies of `row_bytes`.
fn check_joined_bytes(repeats: u64, row_bytes: u64) -> Result<()> {
    let bytes = repeats.saturating_mul(row_bytes);
    if bytes > MAX_JOINED_BYTES {
        return Err(SqlError::refused(
            "joins of private rows with public rows",
            format!(
                "together they can add {bytes} bytes of public rows to one private row ({repeats} \
                 repeats of up to {row_bytes} bytes), before any bound applies; at most \
                 {MAX_JOINED_BYTES} are allowed: join fewer or shorter public columns, or \
                 aggregate the public side first"
            ),
        ));
    }
    Ok(())
}

/// Refuses expressions that work through more than [`MAX_WORK_BYTES`] of constants, public
/// text and compiled patterns on one private row: `work` bytes (all the query's aggregates
/// together) on each of `repeats` rows.
pub(crate) fn check_work(repeats: u64, work: usize) -> Result<()> {
    let bytes = repeats.saturating_mul(work as u64);
    if bytes > MAX_WORK_BYTES {
        return Err(SqlError::refused(
            "expressions on private rows",
            format!(
                "together they work through {bytes} bytes of constants, public text and compiled \
                 patterns for one private row ({work} bytes, over all the query's aggregates, on \
                 each of its {repeats} rows after the joins), so \
                 the query's time would tell whether a unit has rows; at most {MAX_WORK_BYTES} \
                 are allowed: use shorter constants, fewer functions on public text, or join \
                 on a key the public side holds once"
            ),
        ));
    }
    Ok(())
}

/// After the cells it reads are released, before the private rows joined to it are read:
/// computes and stores a pending side, and checks what it brings as [`check`] does (its rows
/// per join key now counted, not bounded). `filled_bytes` holds the row bytes of the pending
/// sides filled before it, and gains its own.
pub(crate) fn fill(
    pending: &Pending,
    filled_bytes: &mut u64,
    collect: impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<()> {
    let computed = compute(&pending.side, &collect)?;
    if pending.side.keys.is_some() {
        *filled_bytes = filled_bytes.saturating_add(computed.row_bytes);
        check_joined_bytes(
            pending.repeats,
            pending.other_bytes.saturating_add(*filled_bytes),
        )?;
    }
    if let Some(keys) = &pending.side.keys {
        let most = most_matches(&computed.reads, keys, &collect)?;
        if most > pending.most {
            return Err(SqlError::refused(
                "a join of private rows with released cells",
                format!(
                    "its public side holds {most} rows per join key, more than the {} it was \
                     bounded by before the charge",
                    pending.most
                ),
            ));
        }
    }
    Ok(())
}

/// Computes every column of `side` (all of it, whatever the private rows), checks its computed
/// values, measures its rows, and stores them.
fn compute(
    side: &PublicSide,
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<Computed> {
    let batches = collect(side.plan.clone())?;
    let n = side.plan.schema().fields().len();
    // Per column: its longest value's bytes (None: nested values, at most all of a column).
    let mut longest: Vec<Option<usize>> = vec![Some(0); n];
    let mut nested_bytes = vec![0usize; n];
    let mut bytes: u64 = 0;
    for batch in &batches {
        bytes = bytes.saturating_add(batch.get_array_memory_size() as u64);
        for (i, column) in batch.columns().iter().enumerate() {
            let most = longest_value(column).map_err(SqlError::internal)?;
            longest[i] = longest[i].zip(most).map(|(a, b)| a.max(b));
            nested_bytes[i] = nested_bytes[i].max(column.get_array_memory_size());
        }
    }
    check_computed(side, &longest)?;
    let longest: Vec<usize> = longest
        .iter()
        .zip(nested_bytes)
        .map(|(l, nested)| l.unwrap_or(nested))
        .collect();
    let row_bytes = longest.iter().map(|&b| b as u64).sum();
    let Some((table, reads)) = &side.stored else {
        return Ok(Computed {
            reads: side.plan.clone(),
            row_bytes,
            longest,
            bytes,
        });
    };
    let schema = table.schema();
    let stored = batches
        .into_iter()
        .map(|b| {
            // The stored table's types are the plan's; the engine's columns match them.
            let columns = b
                .columns()
                .iter()
                .zip(schema.fields())
                .map(|(c, f)| match c.data_type() == f.data_type() {
                    true => Ok(Arc::clone(c)),
                    false => cast(c, f.data_type()),
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            RecordBatch::try_new(Arc::clone(&schema), columns)
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(SqlError::internal)?;
    *table.batches[0]
        .try_write()
        .map_err(|_| SqlError::internal("a public side's table is busy"))? = stored;
    Ok(Computed {
        reads: reads.clone(),
        row_bytes,
        longest,
        bytes,
    })
}

/// Whether `plan` scans one of `tables`.
pub(crate) fn scans_any(plan: &LogicalPlan, tables: &[&Arc<dyn TableProvider>]) -> bool {
    let mut found = false;
    let _ = plan.apply(|node| {
        found |= tables.iter().any(|t| is_scan_of(node, t));
        Ok(match found {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    });
    found
}

/// Whether `node` is a scan of `table` (the same provider).
fn is_scan_of(node: &LogicalPlan, table: &Arc<dyn TableProvider>) -> bool {
    let LogicalPlan::TableScan(scan) = node else {
        return false;
    };
    source_as_provider(&scan.source)
        .is_ok_and(|p| std::ptr::addr_eq(Arc::as_ptr(&p), Arc::as_ptr(table)))
}

/// Whether `plan` scans one of the `released` placeholders.
fn reads_cells(plan: &LogicalPlan, released: &[(Arc<dyn TableProvider>, Option<usize>)]) -> bool {
    scans_any(plan, &released.iter().map(|(t, _)| t).collect::<Vec<_>>())
}

/// The bound of the released placeholder `node` scans, if it scans one.
fn cells_of(
    node: &LogicalPlan,
    released: &[(Arc<dyn TableProvider>, Option<usize>)],
) -> Option<Option<usize>> {
    released
        .iter()
        .find(|(table, _)| is_scan_of(node, table))
        .map(|(_, rows)| *rows)
}

/// The most rows `plan` can make (None: no bound before the release): a placeholder holds
/// its bound, a public table its rows (counted), `VALUES` its rows; a union adds its inputs',
/// a join multiplies them, grouping sets make a row per set; `UNNEST` and recursion are not
/// bounded; any other node makes at most as many rows as its inputs' product.
fn row_bound(
    plan: &LogicalPlan,
    released: &[(Arc<dyn TableProvider>, Option<usize>)],
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<Option<u64>> {
    if let Some(cells) = cells_of(plan, released) {
        return Ok(cells.map(|n| n as u64));
    }
    let inputs = || -> Result<Vec<Option<u64>>> {
        plan.inputs()
            .into_iter()
            .map(|p| row_bound(p, released, collect))
            .collect()
    };
    let product = |bounds: Vec<Option<u64>>| {
        bounds
            .into_iter()
            .try_fold(1u64, |a, b| b.map(|b| a.saturating_mul(b.max(1))))
    };
    Ok(match plan {
        LogicalPlan::TableScan(_) => Some(count_rows(plan.clone(), collect)?),
        LogicalPlan::Values(v) => Some(v.values.len() as u64),
        LogicalPlan::Unnest(_) | LogicalPlan::RecursiveQuery(_) | LogicalPlan::Extension(_) => None,
        LogicalPlan::Union(_) => inputs()?
            .into_iter()
            .try_fold(0u64, |a, b| b.map(|b| a.saturating_add(b))),
        LogicalPlan::Aggregate(a) => {
            let sets = a.group_expr.iter().fold(1u64, |n, e| match e {
                Expr::GroupingSet(GroupingSet::Rollup(v)) => n.saturating_mul(v.len() as u64 + 1),
                Expr::GroupingSet(GroupingSet::Cube(v)) => {
                    n.saturating_mul(1u64.checked_shl(v.len() as u32).unwrap_or(u64::MAX))
                }
                Expr::GroupingSet(GroupingSet::GroupingSets(v)) => n.saturating_mul(v.len() as u64),
                _ => n,
            });
            product(inputs()?).map(|n| n.saturating_mul(sets))
        }
        _ => product(inputs()?),
    })
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
        let ints = cast(column, &DataType::Int64).map_err(SqlError::internal)?;
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

/// The most rows of the public `plan` that share one value of `keys` (all rows without keys).
fn most_matches(
    plan: &LogicalPlan,
    keys: &[Expr],
    collect: &impl Fn(LogicalPlan) -> Result<Vec<RecordBatch>>,
) -> Result<u64> {
    let most = aggregate_ints(plan, keys, count(lit(1)), collect)?
        .into_iter()
        .max()
        .unwrap_or(0);
    Ok(u64::try_from(most).unwrap_or(0))
}

/// Refuses a computed column of `side` (its longest values: `longest`, None for nested ones)
/// that holds nested values, or text longer than [`MAX_COMPUTED_TEXT_BYTES`].
fn check_computed(side: &PublicSide, longest: &[Option<usize>]) -> Result<()> {
    let schema = side.plan.schema();
    for &i in &side.computed {
        let name = schema.field(i).name();
        let refused = |why: String| {
            SqlError::refused(format!("the computed column {name} of public rows"), why)
        };
        let Some(bytes) = longest[i] else {
            return Err(refused(
                "nested values computed on public rows may be of any size, and they meet \
                 private rows here; compute them after the aggregate"
                    .into(),
            ));
        };
        if bytes > MAX_COMPUTED_TEXT_BYTES {
            return Err(refused(format!(
                "a value of it holds {bytes} bytes, and it meets private rows here, where \
                 text is bounded to {MAX_COMPUTED_TEXT_BYTES} bytes per value; compute it \
                 after the aggregate"
            )));
        }
    }
    Ok(())
}

/// The bytes of every value of type `t` when they are all the same (None: text, binary or
/// nested values, which are measured).
fn longest_type_bytes(t: &DataType) -> Option<usize> {
    match t {
        DataType::FixedSizeBinary(n) => usize::try_from(*n).ok(),
        t if t.is_primitive() => t.primitive_width(),
        DataType::Boolean | DataType::Null => Some(1),
        _ => None,
    }
}

/// The most bytes one value of `array` holds: text and binary values measured, others their
/// width; None for nested values. Dictionary- and run-encoded values are measured as their
/// values.
fn longest_value(
    array: &ArrayRef,
) -> std::result::Result<Option<usize>, datafusion::arrow::error::ArrowError> {
    let plain = match array.data_type() {
        DataType::Dictionary(_, v) => cast(array, v)?,
        DataType::RunEndEncoded(_, v) => cast(array, v.data_type())?,
        _ => Arc::clone(array),
    };
    Ok(match plain.data_type() {
        t if t.is_nested() => None,
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => {
            let lengths = cast(&length(&plain)?, &DataType::Int64)?;
            let longest = max_of(lengths.as_primitive::<Int64Type>()).unwrap_or(0);
            Some(usize::try_from(longest).unwrap_or(0))
        }
        t => Some(longest_type_bytes(t).unwrap_or(16)),
    })
}
