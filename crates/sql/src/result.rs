//! A released query result: the rows (materialised once; reading them again reads the same
//! values and charges nothing), and what the release is: each released aggregate's mechanism,
//! noise scale, sensitivity and 95% half-width, ε, δ, the accountant, the neighbouring
//! relation and what was public.

use std::collections::HashMap;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::json::WriterBuilder;
use datafusion::arrow::json::writer::JsonArray;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::logical_expr::{Expr, LogicalPlan};
use dpml_accounting::ledger::Balance;
use serde::Serialize;
use serde_json::{Value, json};

use crate::aggregate::{Kind, Measure};
use crate::calibrate::{Part, centred_sum_noise, release_probability};
use crate::catalog::{Catalog, UnitSource};
use crate::engine::Prepared;
use crate::error::{Result, SqlError};
use crate::interval::centre;

/// The neighbouring relation every DP SQL release is stated for.
pub const NEIGHBOURING: &str = "add or remove all rows of one privacy unit";

/// The accountant of a query: basic composition (the ε of its aggregates and key selections
/// add up, as do their δ); the ledger composes queries with RDP where that is tighter.
pub const ACCOUNTANT: &str = "basic";

/// One released aggregate: how it was made noisy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColumnReport {
    /// Its column in the result (the aggregate's own name when no output column is exactly it).
    pub name: String,
    /// The aggregate as written.
    pub aggregate: String,
    /// The mechanism.
    pub mechanism: String,
    /// Its share of ε.
    pub epsilon: f64,
    /// The L1 sensitivity of its noisy part (of the sum, for AVG, VARIANCE and a centred SUM),
    /// over all groups: L0 times one unit's bound per group.
    pub sensitivity: f64,
    /// The Laplace scale of its noisy part's noise, in the column's units (a centred SUM: the
    /// Laplace scale of its value's noise variance).
    pub noise_scale: f64,
    /// 95% of the noise is within ± this (for AVG and VARIANCE: of the sum part; for a centred
    /// SUM: of its value, centred sum and centre × count together).
    pub half_width_95: f64,
    /// The centre c its sums are taken around, where they are (absent otherwise): a centred
    /// SUM is its sum of x − c plus c times the noisy count, an AVG c plus its sum of x − c
    /// over the noisy count, a VARIANCE from sums of x − c and (x − c)².
    #[serde(skip_serializing_if = "Option::is_none")]
    pub centre: Option<f64>,
    /// Every noisy part (AVG: sum and count; VARIANCE: sum, sum of squares and count).
    pub parts: Vec<PartReport>,
}

/// One noisy part of an aggregate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartReport {
    /// What it is ("count", "sum", "sum of squares", "quantile").
    pub part: String,
    /// Its ε.
    pub epsilon: f64,
    /// Its L1 sensitivity over all groups.
    pub sensitivity: f64,
    /// Its noise's Laplace scale.
    pub noise_scale: f64,
    /// 95% of its noise is within ± this.
    pub half_width_95: f64,
}

/// What a query releases and under which guarantee: shared by the release's report and the
/// explanation, which states it before anything is read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Guarantee {
    /// One entry per released aggregate.
    pub columns: Vec<ColumnReport>,
    /// ε spent.
    pub epsilon: f64,
    /// δ spent.
    pub delta: f64,
    /// How the parts compose.
    pub accountant: String,
    /// The neighbouring relation.
    pub neighbouring: String,
    /// What is not protected.
    pub public: Vec<String>,
}

impl Guarantee {
    /// The guarantee of `prepared` over `catalog`'s tables.
    pub(crate) fn of(prepared: &Prepared, catalog: &Catalog) -> Self {
        Guarantee {
            columns: column_reports(prepared),
            epsilon: prepared.calibration.epsilon,
            delta: prepared.calibration.delta,
            accountant: ACCOUNTANT.into(),
            neighbouring: NEIGHBOURING.into(),
            public: public_facts(prepared, catalog),
        }
    }
}

/// What a release is (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The released aggregates and the guarantee.
    #[serde(flatten)]
    pub guarantee: Guarantee,
    /// Key-selection bias warnings.
    pub warnings: Vec<String>,
    /// The ledger's balance after the spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<Balance>,
}

impl Report {
    pub(crate) fn new(
        prepared: &Prepared,
        catalog: &Catalog,
        warnings: Vec<String>,
        ledger: Option<Balance>,
    ) -> Self {
        Report {
            guarantee: Guarantee::of(prepared, catalog),
            warnings,
            ledger,
        }
    }
}

/// A released result.
#[derive(Debug, Clone)]
pub struct DpResult {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    /// What the release is.
    pub report: Report,
    /// Sampler calls made (tests check one per released part; not released: with private
    /// keys it counts the groups present in the data).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) draws: u64,
}

impl DpResult {
    pub(crate) fn new(
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
        report: Report,
        draws: u64,
    ) -> Self {
        Self {
            schema,
            batches,
            report,
            draws,
        }
    }

    /// The result's schema.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The released rows (the same every time: the release was drawn once).
    pub fn batches(&self) -> &[RecordBatch] {
        &self.batches
    }

    /// The rows as JSON objects, column name → value.
    ///
    /// # Errors
    /// [`SqlError::Internal`] if a value cannot be written as JSON.
    pub fn rows_json(&self) -> Result<Value> {
        rows_json(&self.batches)
    }

    /// The JSON object of `dpml sql --json`: `rows`, `columns`, `epsilon`, `delta`,
    /// `accountant`, `neighbouring`, `public`, `warnings` (and `ledger`).
    ///
    /// # Errors
    /// As [`DpResult::rows_json`].
    pub fn to_json(&self) -> Result<Value> {
        let mut v = serde_json::to_value(&self.report).map_err(SqlError::internal)?;
        v["rows"] = self.rows_json()?;
        v["column_names"] = json!(
            self.schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
        );
        Ok(v)
    }
}

/// The rows of `batches` as JSON objects, column name → value (nulls written as `null`).
///
/// # Errors
/// [`SqlError::Internal`] if a value cannot be written as JSON.
pub fn rows_json(batches: &[RecordBatch]) -> Result<Value> {
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, JsonArray>(Vec::new());
    let batches: Vec<&RecordBatch> = batches.iter().collect();
    writer
        .write_batches(&batches)
        .and_then(|()| writer.finish())
        .map_err(SqlError::internal)?;
    let bytes = writer.into_inner();
    if bytes.is_empty() {
        return Ok(json!([]));
    }
    serde_json::from_slice(&bytes).map_err(SqlError::internal)
}

/// Per released aggregate, how it was made noisy.
fn column_reports(prepared: &Prepared) -> Vec<ColumnReport> {
    let names = final_names(&prepared.outer);
    let mut out = Vec::new();
    for (agg, cal) in prepared
        .aggregates
        .iter()
        .zip(&prepared.calibration.aggregates)
    {
        // Every part of the aggregate, in order, and the measure each belongs to.
        let name_of = |m: &Measure| names.get(&m.column).unwrap_or(&m.column).clone();
        let all: Vec<(&Part, String)> = cal
            .measures
            .iter()
            .zip(&agg.measures)
            .flat_map(|(mc, m)| mc.parts.iter().map(move |p| (p, name_of(m))))
            .collect();
        for (m, mc) in agg.measures.iter().zip(&cal.measures) {
            let parts: Vec<PartReport> = mc
                .parts
                .iter()
                .zip(part_names(&m.kind, mc.parts.len()))
                .enumerate()
                .map(|(i, (p, name))| {
                    // A shared count is reported as drawn: by its owner, with the owner's noise.
                    let (p, name) = match mc.shared {
                        Some((j, k)) if j == i => match all.get(k) {
                            Some((owner, column)) => (*owner, format!("{name} (that of {column})")),
                            None => (p, name.to_string()),
                        },
                        _ => (p, name.to_string()),
                    };
                    let (scale, sensitivity, half) = p.scale_sensitivity_halfwidth(cal.max_groups);
                    PartReport {
                        part: name,
                        epsilon: mc.part_epsilon(i),
                        sensitivity,
                        noise_scale: scale,
                        half_width_95: half,
                    }
                })
                .collect();
            let first = parts.first().cloned();
            let mut noise_scale = first.as_ref().map_or(f64::NAN, |p| p.noise_scale);
            let mut half_width_95 = first.as_ref().map_or(f64::NAN, |p| p.half_width_95);
            let centre = match (&m.kind, parts.as_slice()) {
                // A centred SUM's value adds its centre times the count's noise to its sum's.
                (Kind::Sum { range, .. }, [sum, count]) => {
                    let centre = centre(*range);
                    (noise_scale, half_width_95) =
                        centred_sum_noise(sum.noise_scale, centre, count.noise_scale);
                    Some(centre)
                }
                (Kind::Avg { range, .. } | Kind::Var { range, .. }, _) => Some(centre(*range)),
                _ => None,
            };
            out.push(ColumnReport {
                name: name_of(m),
                aggregate: m.display.clone(),
                mechanism: mechanism(&m.kind, centre.is_some()).into(),
                epsilon: mc.epsilon,
                sensitivity: first.as_ref().map_or(f64::NAN, |p| p.sensitivity),
                noise_scale,
                half_width_95,
                centre,
                parts,
            });
        }
    }
    out
}

fn mechanism(kind: &Kind, centred: bool) -> &'static str {
    match kind {
        Kind::Count { .. } | Kind::CountUnits { .. } => "discrete Laplace",
        Kind::Sum { .. } if centred => {
            "centred sum + centre × noisy count (discrete Laplace, the sum on a grid)"
        }
        Kind::Sum { .. } => "discrete Laplace on a grid (exact fixed-point sum)",
        Kind::Avg { .. } => "noisy sum / noisy count (discrete Laplace)",
        Kind::Var { sqrt: false, .. } => "noisy moments (discrete Laplace)",
        Kind::Var { sqrt: true, .. } => "square root of noisy moments (discrete Laplace)",
        Kind::Quantile { .. } => "exponential mechanism (permute-and-flip) over 1000 points",
    }
}

/// The names of a measure's `n` parts.
fn part_names(kind: &Kind, n: usize) -> Vec<&'static str> {
    match kind {
        Kind::Count { .. } | Kind::CountUnits { .. } => vec!["count"],
        Kind::Sum { .. } if n == 2 => vec!["centred sum", "count"],
        Kind::Sum { .. } => vec!["sum"],
        Kind::Avg { .. } => vec!["centred sum", "count"],
        Kind::Var { .. } => vec!["centred sum", "centred sum of squares", "count"],
        Kind::Quantile { .. } => vec!["quantile"],
    }
}

/// The result column that is exactly each aggregate's output column (through the top
/// projection's aliases).
pub(crate) fn final_names(plan: &LogicalPlan) -> HashMap<String, String> {
    let mut plan = plan;
    loop {
        match plan {
            LogicalPlan::Projection(p) => {
                let mut out = HashMap::new();
                for (e, field) in p.expr.iter().zip(p.schema.fields()) {
                    // Through every alias (COUNT(*) AS n is `count(Int64(1)) AS count(*) AS n`).
                    let mut inner = e;
                    while let Expr::Alias(a) = inner {
                        inner = a.expr.as_ref();
                    }
                    if let Expr::Column(c) = inner {
                        out.entry(c.name.clone())
                            .or_insert_with(|| field.name().clone());
                    }
                }
                return out;
            }
            LogicalPlan::Sort(_) | LogicalPlan::Limit(_) | LogicalPlan::Filter(_) => {
                plan = plan.inputs()[0];
            }
            _ => return HashMap::new(),
        }
    }
}

/// What the release takes as public.
fn public_facts(prepared: &Prepared, catalog: &Catalog) -> Vec<String> {
    let mut out = vec![
        "the schema: the tables' column names and types, the declared bounds, contribution \
         bounds (L0, L∞), privacy units and foreign keys"
            .to_string(),
        "the query text and ε, δ".to_string(),
    ];
    let public: Vec<String> = catalog
        .tables()
        .filter(|t| t.unit == UnitSource::Public && t.arrow_schema.is_some())
        .map(|t| t.name.clone())
        .collect();
    if !public.is_empty() {
        out.push(format!("the public tables: {}", public.join(", ")));
    }
    for agg in &prepared.aggregates {
        for g in &agg.groups {
            if let Some(d) = g.keys.describe() {
                out.push(format!("the groups of {}: {d}", g.display));
            }
        }
    }
    out
}

/// The chance a key with `n` units is released, for a few `n` around the threshold.
pub(crate) fn release_table(threshold: i64, t: f64) -> Vec<(i64, f64)> {
    let mut ns: Vec<i64> = [
        threshold / 2,
        threshold - (t * 2.0) as i64,
        threshold,
        threshold + (t * 2.0) as i64,
        threshold + (t * 5.0) as i64,
    ]
    .into_iter()
    .filter(|&n| n >= 1)
    .collect();
    ns.sort_unstable();
    ns.dedup();
    ns.into_iter()
        .map(|n| (n, release_probability(n, threshold, t)))
        .collect()
}
