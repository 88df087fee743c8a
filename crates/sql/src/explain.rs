//! `EXPLAIN DP` (`dpml sql --explain`): what a query would release and what it would cost,
//! from the schema and the query alone — the rewritten plan, each released aggregate's
//! mechanism, noise scale and 95% half-width, the key threshold τ and the chance a key with n
//! units passes it, and ε and δ. No private row is read and nothing is charged.

use serde::Serialize;
use serde_json::Value;

use crate::catalog::{Catalog, UnitSource};
use crate::engine::Prepared;
use crate::result::{Guarantee, release_table};

/// One group column of an aggregate.
#[derive(Debug, Clone, Serialize)]
pub struct GroupReport {
    /// The GROUP BY expression.
    pub expression: String,
    /// Where its keys come from.
    pub keys: String,
}

/// The key threshold of an aggregate with private keys.
#[derive(Debug, Clone, Serialize)]
pub struct ThresholdReport {
    /// τ: a key is released when its noisy unit count reaches it.
    pub tau: i64,
    /// The Laplace scale of the unit count's noise.
    pub noise_scale: f64,
    /// ε of the selection.
    pub epsilon: f64,
    /// δ of the selection.
    pub delta: f64,
    /// (units n, probability that a key with n units is released).
    pub release_probability: Vec<(i64, f64)>,
}

/// One DP aggregate.
#[derive(Debug, Clone, Serialize)]
pub struct AggregateReport {
    /// The private tables it reads.
    pub tables: Vec<String>,
    /// How each table reaches the privacy unit.
    pub privacy_units: Vec<String>,
    /// L0 in force.
    pub max_groups_per_unit: u64,
    /// L∞ in force.
    pub max_rows_per_unit_per_group: Option<u64>,
    /// The group columns.
    pub groups: Vec<GroupReport>,
    /// Number of groups released when the keys are public.
    pub public_groups: Option<usize>,
    /// The threshold of private keys.
    pub threshold: Option<ThresholdReport>,
    /// The rows each unit's contributions are bounded over (DataFusion's plan).
    pub contribution_rows: String,
}

/// The explanation of a query (see the module docs).
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The plan that runs on the released cells (placeholders `__dpml_released…`).
    pub plan: String,
    /// The DP aggregates.
    pub aggregates: Vec<AggregateReport>,
    /// The released aggregates and the guarantee (the ε and δ the query would spend).
    #[serde(flatten)]
    pub guarantee: Guarantee,
}

impl Explanation {
    pub(crate) fn new(prepared: &Prepared, catalog: &Catalog) -> Self {
        let aggregates = prepared
            .aggregates
            .iter()
            .zip(&prepared.calibration.aggregates)
            .zip(&prepared.keys)
            .map(|((agg, cal), keys)| AggregateReport {
                tables: agg.tables.iter().cloned().collect(),
                privacy_units: agg
                    .tables
                    .iter()
                    .filter_map(|t| catalog.table(t).ok())
                    .map(|t| match &t.unit {
                        UnitSource::Column(c) => format!("{}: column {c}", t.name),
                        UnitSource::Row => format!("{}: each row", t.name),
                        UnitSource::Via { column, table, key } => format!(
                            "{}: the unit of {table} through {column} → {table}.{key}",
                            t.name
                        ),
                        UnitSource::Public => format!("{}: public", t.name),
                    })
                    .collect(),
                max_groups_per_unit: cal.max_groups,
                max_rows_per_unit_per_group: agg.max_rows,
                groups: agg
                    .groups
                    .iter()
                    .map(|g| GroupReport {
                        expression: g.display.clone(),
                        keys: g.keys.describe().unwrap_or_else(|| {
                            "private: released when the noisy unit count reaches τ".into()
                        }),
                    })
                    .collect(),
                public_groups: keys.as_ref().map(|k| k.first().map_or(1, |c| c.len())),
                threshold: cal.selection.as_ref().map(|s| {
                    let t = s.mech.scale();
                    ThresholdReport {
                        tau: s.threshold,
                        noise_scale: t,
                        epsilon: s.epsilon,
                        delta: s.delta,
                        release_probability: release_table(s.threshold, t),
                    }
                }),
                contribution_rows: agg.rows.display_indent().to_string(),
            })
            .collect();
        Explanation {
            plan: prepared.outer.display_indent().to_string(),
            aggregates,
            guarantee: Guarantee::of(prepared, catalog),
        }
    }

    /// As JSON.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        v["explain"] = Value::Bool(true);
        v
    }
}
