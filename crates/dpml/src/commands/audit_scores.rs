//! `dpml audit --scores FILE`: audit a model dpml did not train from its membership-inference
//! scores (a CSV with a header and the columns `score`, higher = member, and `member`, 1 or 0).
//! Writes the same `audit.json`, `roc.png`/`roc.svg` and `report.html` as an audit of a
//! dpml-trained model, with one threshold attack named `scores`. With `--epsilon` (and
//! `--delta`), the ε the model claims is checked against the attack's lower bound; without,
//! there is no claim to check, and the audit says so.

use std::path::Path;

use dpml_audit::driver::external::{ExternalModel, audit_scores, parse_scores_csv};
use dpml_core::audit_workflow::{Claim, inconsistency_error};
use dpml_learn::dpsgd::TrainConfig;

use super::audit::{AuditArgs, driver_err, write_json, write_outputs};
use crate::error::{CliError, CliResult};
use crate::output::Output;

/// The model name on the ROC plot's title.
const MODEL: &str = "scores";

/// Run `dpml audit --scores FILE`.
pub fn run(a: &AuditArgs, path: &Path, out: Output) -> CliResult<()> {
    // The limits of every CSV input: the scores are read whole, then line by line.
    let text = dpml_data::read_text(path, "a scores CSV", dpml_data::MAX_CSV_BYTES)
        .map_err(|e| CliError::usage(format!("cannot read --scores {e}")))?;
    let (members, non_members) = parse_scores_csv(&text)
        .map_err(|e| CliError::usage(format!("--scores {}: {e}", path.display())))?;
    // The ε the model claims, if the caller states one: the attack's lower bound is checked
    // against it.
    let model = ExternalModel {
        name: path.display().to_string(),
        delta: a.training.delta.unwrap_or(TrainConfig::default().delta),
        confidence: a.confidence,
        epsilon_theoretical: a.training.epsilon,
    };
    let mut rng = a.seed.rng()?;
    let report = audit_scores(&model, &members, &non_members, &mut rng).map_err(driver_err)?;
    let mut result = serde_json::to_value(&report).map_err(CliError::internal)?;
    if let serde_json::Value::Object(map) = &mut result {
        // Neither the model's accuracies nor a training run are known for a model dpml did
        // not train.
        for key in [
            "target_train_accuracy",
            "target_holdout_accuracy",
            "models_trained",
            "models_from_cache",
            "cache_dir",
            "training_seconds",
        ] {
            map.remove(key);
        }
    }
    dpml_core::audit_workflow::state_verdict(&mut result, &report);
    if let Some(dir) = &a.out {
        result["files"] = write_outputs(dir, &report, &result, MODEL)?;
        write_json(&dir.join("audit.json"), &result)?;
    }
    if report.consistent || !out.json {
        out.emit(&result);
    }
    if !report.consistent {
        crate::output::diag!(
            "{}",
            super::audit::inconsistency_banner(&report, Claim::Owner)
        );
        // The model is the user's, not dpml's: its claim failed, no bug of dpml's.
        return Err(inconsistency_error(&report, Claim::Owner).into());
    }
    Ok(())
}
