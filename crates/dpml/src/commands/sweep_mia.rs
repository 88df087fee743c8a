//! `dpml sweep --experiment mia`: local against central DP under attack. Parses the flags,
//! runs [`dpml_audit::mia_sweep`] (which trains and attacks), and writes `results.csv` (one
//! row per mechanism, ε and attack, the accountant's ε beside each empirical lower bound),
//! `results.json` and one figure, `plot.png` / `plot.svg`, with two panels: test accuracy
//! against ε, and attack AUC / advantage / ε lower bound against ε.
//!
//! One audit per point: `--repeats` does not apply (LiRA's reference models are the repetition
//! the attack needs); `--folds` is refused.

use std::path::Path;

use clap::Args;
use dpml_audit::driver::{AuditConfig, ModelReady};
use dpml_audit::mia_sweep::{
    AttackSummary, CSV_HEADER, Mechanism, MiaPoint, MiaSweepConfig, run_mia_sweep,
};
use dpml_data::load;
use serde_json::json;

use super::audit::{driver_err, write_json};
use super::sweep::{SweepArgs, recipe_for};
use crate::args;
use crate::error::{CliError, CliResult};
use crate::output::{Output, diag};
use crate::plot::{self, Chart, Series, Style};
use crate::privacy_model;
use crate::report;
use crate::schema_args::{Needs, require_declared};

/// Flags of `dpml sweep` that only the mia experiment reads.
#[derive(Args, Debug)]
pub struct MiaArgs {
    /// mia only: records each target trains on (N); N held-out records are the non-members
    /// and the test set [default: min(1000, half the data set)].
    #[arg(long, value_parser = args::at_least_one)]
    pub train_size: Option<u64>,
    /// mia only: LiRA's reference models K per point, trained with the point's mechanism.
    #[arg(long, default_value = "8")]
    pub reference_models: usize,
    /// mia only: confidence of the empirical ε lower bounds.
    #[arg(long, value_parser = args::open_unit, default_value = "0.95")]
    pub confidence: f64,
    /// mia only: threads training models side by side [default: the CPU count].
    #[arg(long, value_parser = args::at_least_one)]
    pub threads: Option<u64>,
}

/// Default N when `--train-size` is not given.
const DEFAULT_TRAIN_SIZE: usize = 1000;

/// Run `dpml sweep --experiment mia`.
pub fn run(a: &SweepArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    if let Some(k) = a.folds {
        return Err(CliError::usage(format!(
            "--folds {k} applies to --experiment dp-sgd, not mia"
        )));
    }
    let opts = a.schema.load_options(data_dir, a.label_column.as_deref())?;
    // The audits draw members and held-out non-members from one population, as `dpml audit`.
    let sets = load(&a.dataset, &opts)?;
    let data = sets.train;
    let needs = Needs {
        classes: true,
        bounds: true,
        label_range: false,
    };
    let ranges = require_declared(&sets.schema, &data, needs)?.unwrap_or_default();
    let mut recipe = recipe_for(a, &sets.schema, &data)?;
    recipe.validate().map_err(CliError::usage)?;
    let m = &a.mia;
    let train_size = m
        .train_size
        .map_or(DEFAULT_TRAIN_SIZE.min(data.n / 2), |n| n as usize);
    if a.training.batch_size.is_none() {
        // The default batch follows a small N; a given batch size is kept (and checked).
        recipe.batch_size = recipe.batch_size.min(train_size).max(1);
    }
    let threads = m.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |t| t as usize,
    );
    let cfg = MiaSweepConfig {
        audit: AuditConfig {
            target_size: train_size,
            reference_models: m.reference_models,
            confidence: m.confidence,
            threads,
            seed: a.seed.seed,
            ..AuditConfig::new(recipe.clone())
        },
        epsilons: a.epsilons.clone(),
        feature_ranges: ranges,
    };
    cfg.validate_for(&data).map_err(driver_err)?;

    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    let bar = out.progress(cfg.models_needed() as u64, "mia sweep", "model");
    let ready = |r: &ModelReady| {
        bar.set_message(r.role.clone());
        bar.inc(1);
    };
    let points =
        run_mia_sweep(&cfg, &data, &mut rng, &ready, &crate::cluster::Ranks).map_err(driver_err)?;
    bar.finish_and_clear();
    let Some(points) = points else {
        return Ok(());
    };

    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", a.out.display())))?;
    let csv = a.out.join("results.csv");
    let lines = std::iter::once(CSV_HEADER.to_string())
        .chain(points.iter().flat_map(MiaPoint::csv_lines))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&csv, format!("{lines}\n"))
        .map_err(|e| CliError::usage(format!("writing {}: {e}", csv.display())))?;
    let trained = format!(
        "{} on {}, N = {train_size}, K = {}",
        recipe.model,
        a.dataset.name(),
        m.reference_models
    );
    let (png, svg) = plot::write(&charts(a, &trained, &points), &a.out, "plot")?;
    let violations: Vec<String> = points
        .iter()
        .filter(|p| !p.consistent)
        .map(|p| format!("{} at ε = {}", p.mechanism.name(), p.epsilon.unwrap_or(0.0)))
        .collect();
    let result = json!({
        "experiment": "mia",
        "dataset": a.dataset.name(),
        "epsilons": a.epsilons,
        "runs": points.len(),
        "train_size": train_size,
        "reference_models": m.reference_models,
        "confidence": m.confidence,
        "threads": threads,
        "recipe": serde_json::to_value(&recipe).map_err(CliError::internal)?,
        "local_dp": "Laplace noise on every feature, ε per record (the record's L1 range as sensitivity), then non-private training",
        "points": points,
        "consistent": violations.is_empty(),
        "violations": violations,
        privacy_model::DIAGNOSTICS_NOTE_KEY: privacy_model::experiment_note(
            "the accuracies (test_accuracy: the N held-out records of each audit) and the attacks' metrics and epsilon lower bounds",
        ),
        "results_csv": csv,
        "results_json": a.out.join("results.json"),
        "png": png,
        "svg": svg,
        "seeded": rng.is_seeded(),
    });
    write_json(&a.out.join("results.json"), &result)?;
    // As `dpml audit`: a lower bound above the guaranteed ε fails the run (exit 1) after the
    // evidence is written; with --json only the error object is printed.
    if violations.is_empty() || !out.json {
        out.emit(&result);
    }
    if violations.is_empty() {
        return Ok(());
    }
    diag!("PRIVACY AUDIT FAILED: an empirical ε lower bound exceeds the guaranteed ε");
    Err(CliError::internal(format!(
        "empirical epsilon lower bound above the guaranteed epsilon ({}): a bug in dpml's \
         training or accounting; see {}",
        violations.join(", "),
        a.out.join("results.json").display()
    )))
}

/// Panel 1: test accuracy against ε; panel 2: AUC, advantage and ε lower bound (the strongest
/// of the loss attack and LiRA) against ε. Each mechanism is a line; the non-private baseline
/// a horizontal line on both panels. The guaranteed ε is not drawn (its y = ε line would
/// flatten the lower bounds); results.csv and the JSON put it beside each lower bound.
fn charts(a: &SweepArgs, trained: &str, points: &[MiaPoint]) -> Vec<Chart> {
    let (lo, hi) = a
        .epsilons
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &e| (l.min(e), h.max(e)));
    let baseline = points.iter().find(|p| p.mechanism == Mechanism::NonPrivate);
    let line = |mechanism: Mechanism, value: &dyn Fn(&MiaPoint) -> f64| -> Vec<(f64, f64)> {
        points
            .iter()
            .filter(|p| p.mechanism == mechanism)
            .filter_map(|p| p.epsilon.map(|e| (e, value(p))))
            .collect()
    };
    let flat =
        |name: String, value: f64| Series::new(name, vec![(lo, value), (hi, value)], Style::Dashed);
    let mechanisms = [
        (Mechanism::DpSgd, "DP-SGD"),
        (Mechanism::LocalDp, "local DP"),
    ];
    let x_label = format!("{} (log scale)", a.experiment.epsilon_axis());

    let mut accuracy: Vec<Series> = mechanisms
        .iter()
        .map(|&(m, name)| Series::new(name, line(m, &|p| p.test_accuracy), Style::LineWithPoints))
        .collect();
    if let Some(b) = baseline {
        accuracy.push(flat("non-private baseline".into(), b.test_accuracy));
    }

    type Metric = (&'static str, fn(&AttackSummary) -> f64);
    let metrics: [Metric; 3] = [
        ("AUC", |s| s.auc),
        ("advantage", |s| s.advantage),
        ("ε lower bound", |s| s.epsilon_lower_bound),
    ];
    let mut attack = Vec::new();
    for &(m, name) in &mechanisms {
        for (metric, f) in metrics {
            attack.push(Series::new(
                format!("{name}: {metric}"),
                line(m, &|p| p.best(f)),
                Style::LineWithPoints,
            ));
        }
    }
    if let Some(b) = baseline {
        for (metric, f) in metrics {
            attack.push(flat(format!("non-private: {metric}"), b.best(f)));
        }
    }
    vec![
        Chart {
            title: format!("Test accuracy against ε ({trained})"),
            x_label: x_label.clone(),
            y_label: "test accuracy (held-out records)".into(),
            log_x: true,
            log_y: false,
            series: accuracy,
        },
        Chart {
            title: format!(
                "Membership inference, best of loss and LiRA (δ = {})",
                report::short(points.first().map_or(0.0, |p| p.delta))
            ),
            x_label,
            y_label: "AUC, advantage, empirical ε lower bound".into(),
            log_x: true,
            log_y: false,
            series: attack,
        },
    ]
}
