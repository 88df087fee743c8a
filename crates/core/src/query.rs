//! A DP count, sum, mean or histogram of one column of a table. Sensitivity comes from the
//! declared bounds, never from the data; with a ledger the spend is recorded durably before
//! the result is returned, and a request over budget releases nothing.

use std::path::PathBuf;

use crate::budget::{self, Balance, Charge, Ledger};
use dpml_data::{FeatureBounds, LoadOptions, Schema, Source, load_table};
use dpml_mechanisms::stats::{self, Noise, StatValue};
use dpml_mechanisms::{DpRng, PrivacyEvent};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};

/// The statistic to release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// Number of rows (sensitivity 1).
    Count,
    /// Sum of the column clamped to the bounds (sensitivity max(|LO|, |HI|)).
    Sum,
    /// Mean of the column clamped to the bounds (half the budget on the sum, half on the
    /// count).
    Mean,
    /// Counts in equal bins over the bounds (sensitivity 1).
    Histogram,
}

/// The noise distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseKind {
    /// ε-DP.
    Laplace,
    /// (ε, δ)-DP, analytic calibration.
    Gaussian,
}

/// The query.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// The table.
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// Column to aggregate.
    pub column: String,
    /// The statistic.
    pub aggregate: Aggregate,
    /// Declared clamping bounds (required for sum, mean and histogram, unless the schema
    /// declares the column's).
    pub bounds: Option<(f64, f64)>,
    /// A schema file (as `dpml train --schema`): its delimiter, fills and categories read the
    /// table, and its bounds for the column are the clamping bounds when none are given.
    pub schema: Option<PathBuf>,
    /// Histogram bins.
    pub bins: u64,
    /// ε of this release.
    pub epsilon: f64,
    /// Noise distribution.
    pub noise: NoiseKind,
    /// δ (Gaussian noise only).
    pub delta: Option<f64>,
}

/// Upper limit on histogram bins.
const MAX_BINS: u64 = 1_000_000;

impl QueryOptions {
    /// The noise of this query, once its parameters are checked (before any data or ledger
    /// is touched).
    ///
    /// # Errors
    /// A usage error for δ missing from Gaussian noise or given to Laplace noise, or too many
    /// bins.
    pub fn check(&self) -> Result<Noise> {
        let noise = match (self.noise, self.delta) {
            (NoiseKind::Laplace, None) => Noise::Laplace,
            (NoiseKind::Gaussian, Some(delta)) => Noise::Gaussian { delta },
            (NoiseKind::Gaussian, None) => {
                return Err(Error::usage(
                    "--delta is required with --mechanism gaussian",
                ));
            }
            (NoiseKind::Laplace, Some(d)) => {
                return Err(Error::usage(format!(
                    "--delta {d} given, but Laplace noise is pure epsilon-DP"
                )));
            }
        };
        if self.bins > MAX_BINS {
            return Err(Error::usage(format!(
                "--bins {} exceeds the limit {MAX_BINS}",
                self.bins
            )));
        }
        Ok(noise)
    }
}

/// The bounds `schema` declares for `column`: one range for every feature, or the range of
/// the column among its named features.
fn column_bounds(schema: &Schema, column: &str) -> Option<(f64, f64)> {
    match schema.bounds.as_ref()? {
        FeatureBounds::Uniform(r) => Some(*r),
        FeatureBounds::PerFeature(ranges) => {
            let at = schema.features.as_ref()?.iter().position(|f| f == column)?;
            ranges.get(at).copied()
        }
    }
}

/// Releases the statistic `a` asks for, with noise drawn from `rng`; with a `ledger`, the
/// spend is recorded durably before the release is returned (over budget: an error, and
/// nothing released), and the ledger's balance after it comes back beside the release.
///
/// # Errors
/// Usage errors naming the bad value (δ missing from or given to a mechanism, too many bins,
/// bounds missing, a column that does not load); the ledger's refusals and failures.
pub fn query(
    a: &QueryOptions,
    rng: &mut DpRng,
    ledger: Option<&Ledger>,
) -> Result<(Value, Option<Balance>)> {
    let noise = a.check()?;
    if let Some(l) = ledger {
        // A request that can never fit is refused before the data is read.
        let planned = PrivacyEvent::EpsilonDelta {
            epsilon: a.epsilon,
            delta: a.delta.unwrap_or(0.0),
        };
        let c = Charge::of(
            "query",
            a.dataset.name(),
            planned,
            a.epsilon,
            a.delta.unwrap_or(0.0),
        );
        budget::check(Some(l), &c)?;
    }
    let schema = a.schema.as_deref().map(Schema::from_file).transpose()?;
    let declared = a
        .bounds
        .or_else(|| schema.as_ref().and_then(|s| column_bounds(s, &a.column)));
    let opts = LoadOptions {
        data_dir: a.data_dir.clone(),
        label_column: a.label_column.clone(),
        schema,
    };
    let table = load_table(&a.dataset, &opts)?;
    let column = table.column(&a.column)?;
    let bounds = || {
        declared.ok_or_else(|| {
            Error::usage(format!(
                "--bounds LO,HI (or a --schema declaring the column's bounds) is required for {:?}: sensitivity comes from declared bounds, never from the data",
                a.aggregate
            ))
        })
    };
    let release = match a.aggregate {
        Aggregate::Count => stats::count(rng, column, a.epsilon, noise)?,
        Aggregate::Sum => stats::sum(rng, column, bounds()?, a.epsilon, noise)?,
        Aggregate::Mean => stats::mean(rng, column, bounds()?, a.epsilon, noise)?,
        Aggregate::Histogram => {
            stats::histogram(rng, column, bounds()?, a.bins as usize, a.epsilon, noise)?
        }
    };

    let mut obj = Map::new();
    obj.insert(
        "value".into(),
        match &release.value {
            StatValue::Scalar(v) => json!(v),
            StatValue::Vector(v) => json!(v),
        },
    );
    obj.insert(
        "mechanism".into(),
        json!(format!("{:?}", a.noise).to_lowercase()),
    );
    obj.insert(
        "aggregate".into(),
        json!(format!("{:?}", a.aggregate).to_lowercase()),
    );
    obj.insert("column".into(), json!(a.column));
    obj.insert("epsilon".into(), json!(release.epsilon));
    obj.insert("delta".into(), json!(release.delta));
    obj.insert("sensitivity".into(), json!(release.sensitivity));
    match (release.scale, release.sigma) {
        (Some(b), _) => obj.insert("scale".into(), json!(b)),
        (_, Some(s)) => obj.insert("sigma".into(), json!(s)),
        _ => None,
    };
    // Durably recorded before anything is returned; over budget → error, nothing released.
    let charge = Charge::of(
        "query",
        a.dataset.name(),
        release.event.clone(),
        release.epsilon,
        release.delta,
    )
    .labelled(format!("{:?} of {}", a.aggregate, a.column).to_lowercase());
    let balance = budget::charge(ledger, &charge)?;
    obj.insert("seeded".into(), json!(rng.is_seeded()));
    // Every figure is noisy: nothing to diagnose. N is not assumed public (a count releases it).
    let model = PrivacyModel::new(neighbouring::ADD_REMOVE, &[public::QUERY]);
    Ok((Release::from_map(obj, &model).into_value(), balance))
}
