//! Step 1 of the bounding (see [`crate::contribute`]), the per-(unit, group) pre-aggregation,
//! done by DataFusion's own vectorised aggregation: the contribution rows become one row per
//! (unit, group) with each part's exact state. Only exact state is computed here, with
//! built-in aggregates (so that any DataFusion engine, Ballista's executors included, can run
//! it); the clamping, the L0 limit and the noise stay with dpml.
//!
//! Each part's state:
//! - a count: the rows (where its flag is true, or its value is neither NULL nor NaN), Int64;
//! - a sum: the values seen (Int64) and their exact total on the fine grid, `Decimal128(38, 0)`:
//!   each row's value is clamped, centred (squared), scaled by a power of two and truncated
//!   toward zero — the same IEEE operations as [`FixedGrid::fine`] — then added as an integer.
//!
//! Parts that count the same rows share one state column (AVG(x) and SUM(x) both count the
//! values of x): this state is computed over every private row, so its cost is the query's.
//!
//! DataFusion adds decimals with wrapping arithmetic, so a sum is pre-aggregated only when a
//! row's integer is below 2^63 in magnitude: fewer than 2^64 rows then cannot reach 2^127.
//! Aggregates with a quantile (whose rows are chosen one by one) or a wider grid are bounded
//! from their rows, in Rust, with checked 128-bit sums.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Column;
use datafusion::functions::math::expr_fn::isnan;
use datafusion::functions_aggregate::expr_fn::{count, sum};
use datafusion::logical_expr::{
    Expr, ExprFunctionExt, LogicalPlan, LogicalPlanBuilder, cast, lit, not, when,
};

use crate::calibrate::{CountSource, FixedGrid, Part, pow2};
use crate::error::{Result, plan_err};

/// The type of a sum's exact total.
pub(crate) const TOTAL_TYPE: DataType = DataType::Decimal128(38, 0);

/// A row's integer on the fine grid stays below this in magnitude (see the module docs).
const MAX_ROW_INTEGER: f64 = 9_223_372_036_854_775_808.0; // 2^63

/// Where one part's state is among the state columns (after the unit and the groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateColumns {
    /// The rows counted (a count part), or the values seen (a sum part).
    pub count: usize,
    /// A sum part's exact total.
    pub total: Option<usize>,
}

/// The rows a count state counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    Rows,
    Flagged(usize),
    Values(usize),
}

/// The state columns of `parts`, in order, and each part's columns among them.
fn layout(parts: &[Part]) -> (Vec<State>, Vec<StateColumns>) {
    let mut states: Vec<State> = Vec::new();
    let mut column = |state: State| match states.iter().position(|s| *s == state) {
        Some(i) => i,
        None => {
            states.push(state);
            states.len() - 1
        }
    };
    let columns = parts
        .iter()
        .enumerate()
        .map(|(k, p)| match p {
            Part::Count { source, .. } => StateColumns {
                count: column(State::Count(match *source {
                    CountSource::Rows(None) | CountSource::Units(None) => Counted::Rows,
                    CountSource::Rows(Some(f)) | CountSource::Units(Some(f)) => Counted::Flagged(f),
                    CountSource::NonNull(v) => Counted::Values(v),
                })),
                total: None,
            },
            Part::Sum { grid, .. } => StateColumns {
                count: column(State::Count(Counted::Values(grid.input))),
                total: Some(column(State::Total(k))),
            },
            // Not pre-aggregated (see `possible`).
            Part::Quantile { .. } => StateColumns {
                count: usize::MAX,
                total: None,
            },
        })
        .collect();
    (states, columns)
}

/// One state column: a count, or the exact total of sum part `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Count(Counted),
    Total(usize),
}

/// Each part's state columns (see [`plan`]).
pub(crate) fn state_columns(parts: &[Part]) -> Vec<StateColumns> {
    layout(parts).1
}

/// Whether every part's state can be computed exactly by built-in aggregates.
pub(crate) fn possible(parts: &[Part]) -> bool {
    parts.iter().all(|p| match p {
        Part::Count { .. } => true,
        Part::Sum { grid, .. } => largest_row_integer(grid) < MAX_ROW_INTEGER,
        Part::Quantile { .. } => false,
    })
}

/// The largest magnitude of a row's integer on `grid`'s fine grid.
fn largest_row_integer(grid: &FixedGrid) -> f64 {
    let (lo, hi) = grid.range;
    let m = (lo - grid.centre).abs().max((hi - grid.centre).abs());
    let m = if grid.square { m * m } else { m };
    m * pow2(-grid.fine_exp)
}

/// The contribution rows `rows` (`[unit, groups…, inputs…]`) aggregated per (unit, group):
/// `[unit, groups…, states…]` (see [`state_columns`]). The caller checks [`possible`].
///
/// The row-wise expressions are computed once each, in two projections under the
/// aggregation: the values (each input with NaN made NULL: NaN has no place in a bounded
/// range, it is skipped like NULL), then each sum's integers from them. The aggregates read
/// columns only.
pub(crate) fn plan(rows: LogicalPlan, n_groups: usize, parts: &[Part]) -> Result<LogicalPlan> {
    let schema = rows.schema().clone();
    let column = |i: usize| Expr::Column(Column::from(schema.qualified_field(i)));
    let keys: Vec<Expr> = (0..=n_groups).map(column).collect();
    let input = |i: usize| column(1 + n_groups + i);
    let named = |name: &str| Expr::Column(Column::from_name(name));
    let (states, _) = layout(parts);
    // Projection 1: the keys, the flags and the values used.
    let mut values = keys.clone();
    let add = |exprs: &mut Vec<Expr>, name: String, expr: Expr| {
        if !exprs.iter().any(|e| e.schema_name().to_string() == name) {
            exprs.push(expr.alias(name));
        }
    };
    for state in &states {
        match *state {
            State::Count(Counted::Flagged(f)) => add(&mut values, format!("__flag{f}"), input(f)),
            State::Count(Counted::Values(v)) => {
                // `CASE WHEN c THEN column END` is DataFusion's fast path (a null mask).
                let value = when(not(isnan(input(v))), input(v))
                    .end()
                    .map_err(plan_err)?;
                add(&mut values, format!("__value{v}"), value);
            }
            _ => {}
        }
    }
    // Projection 2: the same columns and each sum's integers.
    let mut integers: Vec<Expr> = values
        .iter()
        .map(|e| match e {
            Expr::Alias(a) => named(&a.name),
            other => other.clone(),
        })
        .collect();
    for state in &states {
        if let State::Total(k) = *state
            && let Part::Sum { grid, .. } = &parts[k]
        {
            let value = named(&format!("__value{}", grid.input));
            add(&mut integers, format!("__fine{k}"), fine(value, grid)?);
        }
    }
    let aggregates: Vec<Expr> = states
        .iter()
        .enumerate()
        .map(|(j, state)| {
            let aggregate = match *state {
                State::Count(Counted::Rows) => count(lit(1i64)),
                State::Count(Counted::Flagged(f)) => count(lit(1i64))
                    .filter(named(&format!("__flag{f}")))
                    .build()
                    .map_err(plan_err)?,
                State::Count(Counted::Values(v)) => count(named(&format!("__value{v}"))),
                State::Total(k) => sum(named(&format!("__fine{k}"))),
            };
            Ok(aggregate.alias(format!("__s{j}")))
        })
        .collect::<Result<_>>()?;
    LogicalPlanBuilder::from(rows)
        .project(values)
        .and_then(|b| b.project(integers))
        .and_then(|b| b.aggregate(keys, aggregates))
        .and_then(LogicalPlanBuilder::build)
        .map_err(plan_err)
}

/// A value's integer on the fine grid, as [`FixedGrid::fine`] computes it: clamped (±∞ to the
/// bounds), centred, squared for a sum of squares, scaled by a power of two (exact), and
/// truncated toward zero by the cast to Int64 (exact below 2^63, see [`possible`]). NULL stays
/// NULL.
fn fine(x: Expr, grid: &FixedGrid) -> Result<Expr> {
    let (lo, hi) = grid.range;
    let clamped = when(x.clone().lt(lit(lo)), lit(lo))
        .when(x.clone().gt(lit(hi)), lit(hi))
        .otherwise(x)
        .map_err(plan_err)?;
    let v = clamped - lit(grid.centre);
    let v = if grid.square { v.clone() * v } else { v };
    let scaled = v * lit(pow2(-grid.fine_exp));
    Ok(cast(cast(scaled, DataType::Int64), TOTAL_TYPE))
}
