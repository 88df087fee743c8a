//! `dpml predict`: answer classification queries with output perturbation. Laplace noise of
//! scale 2/ε goes on each predicted probability vector (its L1 sensitivity is 2) and the noisy
//! argmax is released; every answered query costs ε, and with `--ledger` the total is recorded
//! durably BEFORE any answer is computed or printed (over budget: nothing is released).

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_core::predict::{PredictOptions, predict};

use crate::args::{self, DataArgs, SeedArg};
use crate::error::CliResult;
use crate::ledger_args::{LedgerArgs, balance_json};
use crate::output::Output;
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
    let options = PredictOptions {
        model_file: a.model_file.clone(),
        dataset: a.data.dataset.clone(),
        label_column: a.data.label_column.clone(),
        data_dir: data_dir.map(Path::to_path_buf),
        declarations: a.schema.declarations(),
        epsilon: a.epsilon,
        queries: a.queries,
    };
    // Open the ledger first: a bad or corrupt ledger stops us before anything is computed.
    let ledger = a.ledger.open(&a.seed)?;
    let (mut release, balance) = predict(&options, &mut a.seed.rng()?, ledger.as_ref())?;
    if let (Some(bal), Some(obj)) = (balance, release.as_object_mut()) {
        obj.insert("ledger".into(), balance_json(&bal));
    }
    out.emit(&release);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CliError;
    use crate::ledger_args::open_ledger;
    use dpml_accounting::ledger::{Budget, Ledger};
    use dpml_data::{Dataset, LoadOptions, load};
    use dpml_mechanisms::DpRng;
    use serde_json::Value;

    /// The library's answers as the command line reports them (its ledger balance included).
    fn answer(
        probs: &[f64],
        data: &Dataset,
        epsilon: f64,
        ledger: Option<&Ledger>,
        rng: &mut DpRng,
    ) -> CliResult<Value> {
        let (mut obj, balance) = dpml_core::predict::answer(probs, data, epsilon, ledger, rng)
            .map_err(CliError::from)?;
        if let Some(b) = balance {
            obj.insert("ledger".into(), balance_json(&b));
        }
        Ok(Value::Object(obj))
    }

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
