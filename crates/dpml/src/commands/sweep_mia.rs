//! `dpml sweep --experiment mia`: local against central DP under attack. Parses the flags,
//! runs [`dpml_core::sweep::mia`] (which plans, trains and attacks), and writes `results.csv` (one
//! row per mechanism, ε and attack, the accountant's ε beside each empirical lower bound),
//! `results.json` and one figure, `plot.png` / `plot.svg`, with two panels: test accuracy
//! against ε, and attack AUC / advantage / ε lower bound against ε.
//!
//! One audit per point: `--repeats` other than 1 is refused (LiRA's reference models are the
//! repetition the attack needs), and so is `--folds`.

use std::path::Path;

use clap::Args;
use dpml_audit::driver::ModelReady;
use dpml_audit::mia_sweep::{AttackSummary, Mechanism, MiaPoint};
use dpml_core::sweep::mia::{self, MiaOptions};
use serde_json::json;

use super::audit::write_json;
use super::sweep::SweepArgs;
use crate::args;
use crate::error::{CliError, CliResult};
use crate::output::{Output, diag};
use crate::plot::{self, Chart, Series, Style};
use crate::report;

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
    #[arg(long, value_parser = args::at_least_one_at_most(args::MAX_THREADS))]
    pub threads: Option<u64>,
}

/// Run `dpml sweep --experiment mia`.
pub fn run(a: &SweepArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let m = &a.mia;
    if let Some(r) = a.repeats.filter(|&r| r != 1) {
        return Err(CliError::usage(format!(
            "--repeats {r} applies to --experiment dp-sgd, not mia (one audit per point; \
             --reference-models sets LiRA's repetitions)"
        )));
    }
    let o = MiaOptions {
        sweep: a.options(data_dir),
        train_size: m.train_size.map(|n| n as usize),
        reference_models: m.reference_models,
        confidence: m.confidence,
        threads: m.threads.map(|t| t as usize),
    };
    let plan = mia::plan(&o)?;
    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    let bar = out.progress(plan.config.models_needed() as u64, "mia sweep", "model");
    let ready = |r: &ModelReady| {
        bar.set_message(r.role.clone());
        bar.inc(1);
    };
    let points = plan.run(&mut rng, &ready, &crate::cluster::Ranks)?;
    bar.finish_and_clear();
    let Some(points) = points else {
        return Ok(());
    };

    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", a.out.display())))?;
    let csv = a.out.join("results.csv");
    mia::write_results_csv(&points, &csv)?;
    let trained = format!(
        "{} on {}, N = {}, K = {}",
        plan.recipe.model,
        a.dataset.name(),
        plan.train_size,
        m.reference_models
    );
    let (png, svg) = plot::write(&charts(a, &trained, &points), &a.out, "plot")?;
    let results_json = a.out.join("results.json");
    let files = json!({"results_csv": csv, "results_json": results_json, "png": png, "svg": svg});
    let result = mia::result(&o, &plan, &points, files, rng.is_seeded())?;
    write_json(&results_json, &result)?;
    let violations = mia::violations(&points);
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
        results_json.display()
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
    let x_label = format!("{} (log scale)", a.experiment.core().epsilon_axis());

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
