//! `dpml predict`: answer classification queries with output perturbation. Laplace noise of
//! scale 2/ε goes on each predicted probability vector (its L1 sensitivity is 2) and the noisy
//! argmax is released; every answered query costs ε, and with `--ledger` the total is recorded
//! durably BEFORE any answer is computed or printed (over budget: nothing is released).

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_accounting::ledger::{Ledger, Spend};
use dpml_data::{Dataset, load};
use dpml_learn::dpsgd::{self, predict_logits};
use dpml_learn::perturbation::{OutputPerturbation, softmax_rows};
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

use crate::args::{self, DataArgs, SeedArg};
use crate::error::{CliError, CliResult};
use crate::ledger_args::{LedgerArgs, balance_json};
use crate::output::Output;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};
use crate::schema_args::SchemaArgs;

/// Flags of `dpml predict`.
#[derive(Args, Debug)]
pub struct PredictArgs {
    /// Model file written by `dpml train --save-model` or `dpml label-dp --save-model`.
    #[arg(long, value_name = "FILE", alias = "model", value_parser = args::input_path)]
    pub model_file: PathBuf,
    #[command(flatten)]
    pub data: DataArgs,
    /// ε of each answered query (Laplace 2/ε on each probability, then argmax).
    #[arg(long, alias = "output-epsilon", value_parser = args::positive, allow_hyphen_values = true)]
    pub epsilon: f64,
    /// Answer only the first N records of the query set (default: all).
    #[arg(long, value_parser = args::at_least_one)]
    pub queries: Option<u64>,
    /// What is declared about the data (classes of a csv: table, as the model was trained).
    #[command(flatten)]
    pub schema: SchemaArgs,
    #[command(flatten)]
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Run `dpml predict`.
pub fn run(a: &PredictArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    // Open the ledger first: a bad or corrupt ledger stops us before anything is computed.
    let ledger = a.ledger.open()?;
    let dpsgd::SavedModel {
        mut model,
        input,
        facts,
    } = dpsgd::load_saved(&a.model_file).map_err(CliError::usage)?;
    if let Some(f) = facts.as_ref().filter(|f| f.regression.is_some()) {
        return Err(CliError::usage(format!(
            "{}: predict answers classification queries, this is a {} model",
            a.model_file.display(),
            f.task.name()
        )));
    }
    let opts = a
        .schema
        .load_options(data_dir, a.data.label_column.as_deref())?;
    let splits = load(&a.data.dataset, &opts)?;
    let (data, split) = match splits.test {
        Some(t) => (t, "test"),
        None => (splits.train, "all"),
    };
    let data = match a.queries {
        Some(q) if (q as usize) < data.n => data.subset(&(0..q as usize).collect::<Vec<_>>()),
        _ => data,
    };
    dpsgd::check_saved_model_fits(&model, facts.as_ref(), &data)?;
    let probs = softmax_rows(&predict_logits(&mut model, &input, &data).map_err(CliError::usage)?);
    let mut rng = a.seed.rng()?;
    let fields = match answer(&probs, &data, a.epsilon, ledger.as_ref(), &mut rng)? {
        Value::Object(m) => m,
        _ => return Err(CliError::internal("predict result is not an object")),
    };
    let model = PrivacyModel::new(neighbouring::MODEL_TRAINING, &[public::QUERIES]);
    let mut release = Release::from_map(fields, &model);
    release
        // The noisy answers scored against the query records' true labels, without noise.
        .diagnose(&["test_accuracy"])
        .insert("dataset", json!(a.data.dataset.name()))
        .insert("split", json!(split))
        .insert("model_file", json!(a.model_file.display().to_string()));
    out.emit(&release.into_value());
    Ok(())
}

/// Checks the model's outputs against the data, THEN charges `ledger` (if any) for every
/// query, THEN draws the noisy labels and scores them. A model that does not fit the data
/// (another class count, non-probability outputs) or a spend over budget returns an error
/// before anything is charged or drawn: nothing is spent on answers that cannot be given.
fn answer(
    probs: &[f64],
    data: &Dataset,
    epsilon: f64,
    ledger: Option<&Ledger>,
    rng: &mut DpRng,
) -> CliResult<Value> {
    let k = probs.len().checked_div(data.n).unwrap_or(data.n_classes);
    if k != data.n_classes {
        return Err(CliError::usage(format!(
            "the model outputs {k} classes but {} has {} classes; nothing was charged",
            data.name, data.n_classes
        )));
    }
    let op = OutputPerturbation::new(epsilon, k).map_err(CliError::usage)?;
    op.check_rows(probs).map_err(|e| {
        CliError::usage(format!(
            "the model's outputs on {} are not probabilities ({e}); nothing was charged",
            data.name
        ))
    })?;
    let queries = data.n as u64;
    let epsilon_total = op.epsilon_for(queries);
    let balance = match ledger {
        Some(l) => Some(l.spend(&Spend {
            label: format!(
                "predict: {queries} queries with output perturbation, epsilon {epsilon} each on {}",
                data.name
            ),
            event: op.event_for(queries),
            epsilon: epsilon_total,
            delta: 0.0,
        })?),
        None => None,
    };
    let labels = op.release_labels(rng, probs).map_err(CliError::usage)?;
    let correct = labels
        .iter()
        .zip(&data.y)
        .filter(|&(&p, &y)| p == y as usize)
        .count();
    let mut obj = serde_json::Map::new();
    obj.insert(
        "test_accuracy".into(),
        json!(if queries == 0 {
            f64::NAN
        } else {
            correct as f64 / queries as f64
        }),
    );
    obj.insert("epsilon".into(), json!(epsilon));
    obj.insert("queries".into(), json!(queries));
    obj.insert("epsilon_total".into(), json!(epsilon_total));
    obj.insert("sensitivity".into(), json!(2.0));
    obj.insert(
        "sensitivity_note".into(),
        json!("L1 sensitivity of a probability vector is 2 (the simplex's L1 diameter); each answer is the argmax of the noisy vector"),
    );
    obj.insert("noise_scale".into(), json!(op.scale()));
    obj.insert("predictions".into(), json!(labels));
    if let Some(b) = balance {
        obj.insert("ledger".into(), balance_json(&b));
    }
    obj.insert("seeded".into(), json!(rng.is_seeded()));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger_args::open_ledger;
    use dpml_accounting::ledger::Budget;
    use dpml_data::LoadOptions;

    fn iris() -> Dataset {
        load(&"iris".parse().unwrap(), &LoadOptions::default())
            .unwrap()
            .train
    }

    #[test]
    fn ledger_is_charged_before_release_and_over_budget_releases_nothing() {
        let data = iris();
        let probs: Vec<f64> = data
            .y
            .iter()
            .flat_map(|&y| (0..3).map(move |j| if j == y as usize { 1.0 } else { 0.0 }))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.ledger");
        // The ledger composes with RDP where that is tighter than adding up (both are upper
        // bounds). 150 queries × 0.1: basic 15, RDP ≈ 5.8 at δ = 1e-5; both exceed 1: refused,
        // nothing recorded, nothing released.
        let ledger = open_ledger(&path, 1.0, 1e-5).unwrap();
        let err = answer(&probs, &data, 0.1, Some(&ledger), &mut DpRng::seeded(1)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("budget"), "{err}");
        assert_eq!(ledger.balance().unwrap().entries, 0);
        // Within budget: one entry of 150 × 0.002 = 0.3 (basic) recorded.
        let v = answer(&probs, &data, 0.002, Some(&ledger), &mut DpRng::seeded(1)).unwrap();
        let bal = ledger.balance().unwrap();
        assert_eq!(bal.entries, 1);
        assert!(
            bal.spent_epsilon > 0.0 && bal.spent_epsilon <= 0.3 + 1e-9,
            "{bal:?}"
        );
        assert_eq!(v["queries"], 150);
        assert!((v["epsilon_total"].as_f64().unwrap() - 0.3).abs() < 1e-9);
        // 150 × 0.05 more (basic 7.5, RDP ≈ 2.9) exceeds what is left: refused.
        assert!(answer(&probs, &data, 0.05, Some(&ledger), &mut DpRng::seeded(1)).is_err());
        assert_eq!(ledger.balance().unwrap().entries, 1);
        // The file keeps its budget: reopening with another one is refused.
        assert!(Ledger::open(&path, Budget::new(2.0, 1e-5).unwrap()).is_err());
    }

    #[test]
    fn a_model_that_does_not_fit_the_data_is_refused_before_the_ledger_is_charged() {
        let data = iris();
        let dir = tempfile::tempdir().unwrap();
        let ledger = open_ledger(&dir.path().join("b.ledger"), 10.0, 1e-5).unwrap();
        let nan = vec![f64::NAN; data.n * 3];
        let err = answer(&nan, &data, 0.01, Some(&ledger), &mut DpRng::seeded(1)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("NaN"), "{err}");
        let four = vec![0.25; data.n * 4];
        let err = answer(&four, &data, 0.01, Some(&ledger), &mut DpRng::seeded(1)).unwrap_err();
        assert!(err.to_string().contains("4 classes"), "{err}");
        assert_eq!(ledger.balance().unwrap().entries, 0);
    }

    #[test]
    fn accuracy_follows_epsilon() {
        // Perfect probabilities: at ε = 100 per query the noise (b = 0.02) never flips the
        // argmax (margin 1 = 50 scales); at ε = 0.001 (b = 2000) the answer is a fair draw
        // among 3 classes: accuracy 1/3 ± 0.04 (sd over 150 queries), asserted < 0.55.
        let data = iris();
        let probs: Vec<f64> = data
            .y
            .iter()
            .flat_map(|&y| (0..3).map(move |j| if j == y as usize { 1.0 } else { 0.0 }))
            .collect();
        let hi = answer(&probs, &data, 100.0, None, &mut DpRng::seeded(2)).unwrap();
        assert_eq!(hi["test_accuracy"], 1.0);
        let lo = answer(&probs, &data, 0.001, None, &mut DpRng::seeded(2)).unwrap();
        assert!(lo["test_accuracy"].as_f64().unwrap() < 0.55, "{lo}");
        assert!(
            answer(&probs, &data, f64::NAN, None, &mut DpRng::seeded(2))
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
    }
}
