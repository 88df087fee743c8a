//! `dpml audit --attack worst-case-init`: the black-box audit of the final model with
//! worst-case initial parameters ([`dpml_audit::worst_case_init`]): `--runs` DP-SGD trainings
//! from the same pretrained parameters, half with a mislabelled target record, scored by the
//! target's loss; the ε lower bounds over the runs beside the accountant's ε. Without
//! `--batch-size` every run is full-batch (the paper's setting, exactly GDP). Under mpirun the
//! runs are divided among the ranks and the root reports. Exits 1 (after printing) when the
//! headline bound exceeds the accountant's ε.

use std::path::Path;

use dpml_audit::worst_case_init::{WorstCaseInitConfig, run_worst_case_init_audit_spread};
use dpml_data::load;
use serde_json::json;

use super::audit::{AuditArgs, driver_err, recipe};
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
    // Full batches unless a batch size is given: the library sets each run's B to its set.
    let full_batch = a.training.batch_size.is_none();
    if full_batch {
        rec.batch_size = data.n - 1;
    }
    rec.validate().map_err(CliError::usage)?;
    let threads = dpml_core::audit_workflow::threads_or_cores(a.threads.map(|t| t as usize));
    let cfg = WorstCaseInitConfig {
        recipe: rec.clone(),
        runs: a.runs,
        pretrain_epochs: a.pretrain_epochs,
        confidence: a.confidence,
        threads,
        full_batch,
    };
    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    let Some(report) =
        run_worst_case_init_audit_spread(&cfg, &data, &mut rng, &crate::cluster::Ranks)
            .map_err(driver_err)?
    else {
        return Ok(());
    };
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
