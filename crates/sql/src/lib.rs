//! Differentially private SQL for dpml: a statistical database you can ask in SQL.
//!
//! Apache DataFusion parses, plans and executes the query; dpml decides what is allowed,
//! bounds each privacy unit's contributions, adds exact noise once per released cell, and
//! charges the budget ledger before any private row is read.
//!
//! # The plan of a query
//! 1. **Plan** ([`engine`]): DataFusion turns the SQL into a logical plan (types coerced,
//!    `IN`/`EXISTS` subqueries made joins, filters pushed into joins).
//! 2. **Rewrite** (module `rewrite`): an allow-list walk carries every row's privacy unit up from
//!    the scans — a table's unit column, a foreign key that reaches it (resolved by the
//!    query's own join along it, or joined in just before the aggregate), or a keyed hash of
//!    the row for tables whose rows are their own units. It refuses, before any row is read,
//!    every construct it cannot bound (named, with the reason). Each aggregate of private
//!    rows becomes a DP aggregate (module `aggregate`): the rows it reads are cut out as
//!    *contribution rows* (unit, group values, inputs) and a placeholder table takes its
//!    place in the plan.
//! 3. **Calibrate** (module `calibrate`): ε is split across the aggregates (and key selections),
//!    each part's sensitivity comes from the declared bounds and the contribution bounds.
//! 4. **Charge**: the query's events are recorded in the ledger; over budget, no private row
//!    is read. From here on a failure is charged too: whether a query fails while it reads
//!    private rows (a memory limit, a lost executor, a damaged file) can depend on them.
//! 5. **Bound** (modules `preaggregate`, `contribute`): the contribution rows are
//!    pre-aggregated per (unit, group), partitioned by unit, clamped, limited to L0 groups per unit by a keyed
//!    hash, and added up exactly (fixed point, 128-bit, checked).
//! 6. **Release** (module `release`): groups (public keys, or private keys past a noisy threshold)
//!    get discrete Laplace noise from dpml's exact sampler — once per part of each cell —
//!    and the values fill the placeholders once.
//! 7. **Post-process**: the rest of the query (HAVING, ORDER BY, LIMIT, arithmetic, joins with
//!    public tables) runs on the released cells.
//!
//! Under a memory limit ([`Limits`], module [`memory`]) every query runs in a fair spilling
//! memory pool: DataFusion's sorts, aggregations and sort-merge joins spill to a temporary
//! folder, and the bounding of step 5 holds one unit at a time. [`progress`] counts what a
//! running query has read and spilled, for a front to show.
//!
//! Noise is never drawn inside DataFusion: no DP aggregate is a DataFusion aggregate, so it
//! cannot run in a window frame, per partial aggregate or from Parquet statistics, and a
//! result read twice is the same materialised result. DataFusion computes exact state only:
//! the per-(unit, group) pre-aggregation of step 5 (module `preaggregate`), which is also all
//! that an Apache Ballista cluster runs (module `cluster`, [`Engine::on_cluster`]).
//!
//! ```no_run
//! use dpml_sql::{Engine, Request};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let schema = dpml_data::Schema::from_file("visits.toml".as_ref())?;
//! let engine = Engine::new(&schema.tables, &[("visits".into(), "visits.parquet".into())])?;
//! let request = Request { epsilon: 1.0, ..Request::default() };
//! let mut rng = dpml_mechanisms::DpRng::from_os()?;
//! let result = engine.run("SELECT day, COUNT(*) FROM visits GROUP BY day", &request, &mut rng, None)?;
//! println!("{}", result.to_json()?);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub(crate) mod aggregate;
pub mod bench;
pub(crate) mod calibrate;
pub(crate) mod catalog;
pub mod cluster;
pub(crate) mod contribute;
pub mod engine;
pub mod error;
pub mod explain;
pub(crate) mod folding;
pub(crate) mod held_joins;
pub(crate) mod in_subquery;
pub(crate) mod interval;
pub(crate) mod keys;
pub mod memory;
pub(crate) mod percentile;
pub(crate) mod preaggregate;
pub mod progress;
pub(crate) mod public_side;
pub(crate) mod release;
pub mod result;
pub(crate) mod rewrite;
pub(crate) mod rowid;
pub mod size;
pub mod tables;
pub(crate) mod total;
pub mod tpch;

#[cfg(test)]
mod tests;

pub use calibrate::Split;
pub use engine::{Engine, Request, strip_explain};
pub use error::{Result, SqlError};
pub use explain::Explanation;
pub use memory::Limits;
pub use result::{DpResult, Guarantee, Report};

/// DataFusion, as dpml-sql uses it (one arrow, one parquet for the whole build).
pub use datafusion;
