//! `dpml audit --attack gradient-canary`: the white-box audit of DP-SGD with Dirac gradient
//! canaries ([`dpml_audit::white_box`]). Trains once on the training split with `--canaries`
//! synthetic canaries, prints (and with `--out` writes `audit.json`) the one-run lower bounds
//! with their ceiling, the GDP bounds and the GDP ESTIMATE beside the accountant's ε and μ;
//! exits 1 (after printing) when the one-run (ε, δ) bound exceeds the accountant's ε.

use std::path::Path;

use dpml_audit::white_box::{CanaryScore, GradientCanaryConfig, run_gradient_canary_audit};
use dpml_data::load;
use serde_json::json;

use super::audit::{AuditArgs, DEFAULT_BATCH_SIZE, driver_err, recipe};
use super::train::public_normalization;
use crate::error::{CliError, CliResult};
use crate::output::Output;

/// The `--attack` name that selects this audit.
pub const ATTACK: &str = "gradient-canary";
/// Default m when `--canaries` is not given (at most the training records).
const DEFAULT_CANARIES: usize = 1000;

/// `--canary-score`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CanaryScoreArg {
    /// The per-step likelihood ratio of the subsampled Gaussian.
    Lr,
    /// The plain sum of the canary's coordinate.
    Sum,
}

impl From<CanaryScoreArg> for CanaryScore {
    fn from(a: CanaryScoreArg) -> Self {
        match a {
            CanaryScoreArg::Lr => CanaryScore::LikelihoodRatio,
            CanaryScoreArg::Sum => CanaryScore::Sum,
        }
    }
}

/// What the JSON says about the estimate, so that nobody reads it as a bound.
const ESTIMATE_NOTE: &str = "gdp_estimate is an ESTIMATE (mean difference of member and \
non-member canary scores over their pooled sd, Nasr et al. 2023; with score likelihood-ratio it \
approaches the CLT mu) with a normal-theory interval, \
not a bound; one_run (Steinke et al. 2023) is a lower bound on epsilon for any run; \
one_run_gdp and gdp_threshold_bound are lower bounds on mu, read as epsilon only for \
Gaussian-shaped trade-off curves (exact for full batches)";

/// Run the gradient-canary audit.
pub fn run(a: &AuditArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let mut rec = recipe(a)?;
    let opts = a
        .schema
        .load_options(data_dir, a.data.label_column.as_deref())?;
    let source = &a.data.dataset;
    let splits = load(source, &opts)?;
    let data = match a.train_size {
        Some(0) => return Err(CliError::usage("train-size must be at least 1, got 0")),
        Some(n) if n > splits.train.n => {
            return Err(CliError::usage(format!(
                "train-size must be at most the training records ({}), got {n}",
                splits.train.n
            )));
        }
        Some(n) => splits.train.subset(&(0..n).collect::<Vec<_>>()),
        None => splits.train.clone(),
    };
    rec.normalize = public_normalization(source, &splits.schema, &data)?;
    if a.training.batch_size.is_none() {
        rec.batch_size = DEFAULT_BATCH_SIZE.min(data.n);
    }
    rec.validate().map_err(CliError::usage)?;
    let cfg = GradientCanaryConfig {
        recipe: rec.clone(),
        canaries: a.canaries.unwrap_or(DEFAULT_CANARIES.min(data.n)),
        confidence: a.confidence,
        score: a.canary_score.into(),
    };
    let mut rng = a.seed.rng()?;
    let started = std::time::Instant::now();
    let report =
        run_gradient_canary_audit(&cfg, &data, splits.test.as_ref(), &mut rng, &mut |_| {})
            .map_err(driver_err)?;
    let mut result = serde_json::to_value(&report).map_err(CliError::internal)?;
    result["attack"] = json!(ATTACK);
    result["dataset"] = json!(data.name);
    result["recipe"] = serde_json::to_value(&rec).map_err(CliError::internal)?;
    result["note"] = json!(ESTIMATE_NOTE);
    result["seconds"] = json!(started.elapsed().as_secs_f64());
    super::audit::finish(
        a.out.as_deref(),
        out,
        &result,
        "gradient-canary one-run",
        report.audit.one_run.epsilon,
        report.accountant.epsilon,
    )
}
