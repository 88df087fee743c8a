//! `dpml audit --attack worst-case-init`: the black-box audit of the final model with
//! worst-case initial parameters ([`dpml_audit::worst_case_init`]): `--runs` DP-SGD trainings
//! from the same pretrained parameters, half with a mislabelled target record, scored by the
//! target's loss; the Clopper–Pearson ε lower bound over the runs beside the accountant's ε.
//! Exits 1 (after printing) when the bound exceeds it.

use std::path::Path;

use dpml_audit::worst_case_init::{WorstCaseInitConfig, run_worst_case_init_audit};
use dpml_data::load;
use serde_json::json;

use super::audit::{AuditArgs, DEFAULT_BATCH_SIZE, driver_err, recipe};
use super::train::public_normalization;
use crate::error::{CliError, CliResult};
use crate::output::Output;

/// The `--attack` name that selects this audit.
pub const ATTACK: &str = "worst-case-init";
/// Default D size when `--train-size` is not given: small sets are where the published audits
/// come closest to the accountant.
const DEFAULT_RECORDS: usize = 1000;

/// Run the worst-case-initialisation audit.
pub fn run(a: &AuditArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let mut rec = recipe(a)?;
    let opts = a
        .schema
        .load_options(data_dir, a.data.label_column.as_deref())?;
    let source = &a.data.dataset;
    let splits = load(source, &opts)?;
    let n = a.train_size.unwrap_or(DEFAULT_RECORDS.min(splits.train.n));
    if n < 2 || n > splits.train.n {
        return Err(CliError::usage(format!(
            "train-size must be between 2 and the training records ({}), got {n}",
            splits.train.n
        )));
    }
    let data = splits.train.subset(&(0..n).collect::<Vec<_>>());
    rec.normalize = public_normalization(source, &splits.schema, &data)?;
    if a.training.batch_size.is_none() {
        rec.batch_size = DEFAULT_BATCH_SIZE.min(data.n - 1);
    }
    rec.validate().map_err(CliError::usage)?;
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cfg = WorstCaseInitConfig {
        recipe: rec.clone(),
        runs: a.runs,
        pretrain_epochs: a.pretrain_epochs,
        confidence: a.confidence,
        threads,
    };
    let mut rng = a.seed.rng()?;
    let report = run_worst_case_init_audit(&cfg, &data, &mut rng).map_err(driver_err)?;
    let mut result = serde_json::to_value(&report).map_err(CliError::internal)?;
    result["attack"] = json!(ATTACK);
    result["dataset"] = json!(data.name);
    result["recipe"] = serde_json::to_value(&rec).map_err(CliError::internal)?;
    super::audit::finish(
        a.out.as_deref(),
        out,
        &result,
        ATTACK,
        report.epsilon_lower_bound,
        report.epsilon_theoretical,
    )
}
