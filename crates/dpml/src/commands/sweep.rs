//! `dpml sweep`: run one experiment over a grid of ε (with repeats and a non-private
//! baseline), in parallel on the available cores, and draw utility against ε on a log axis.
//! Writes `results.csv` (one row per run and metric; with `--folds K`, one row per fold of
//! each run), `summary.csv` (mean and standard deviation per ε, over repeats and folds) and
//! `plot.png` / `plot.svg`.
//!
//! A sweep is an evaluation experiment, not a release: its utility figures are computed from
//! the data without noise (diagnostics; the JSON says so in "diagnostics_note"). The ε of the
//! grid is each model's; with `--folds`, "epsilon_all_folds" gives the ε of releasing all K
//! models of one run.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use dpml_core::sweep::{
    self as core_sweep, DP_SGD_MSE, Experiment as CoreExperiment, LABEL_DP_MSE, Setup, Summary,
    SweepOptions,
};
use dpml_data::Source;
use serde_json::json;

use super::train::{SplitArgs, TrainingArgs};
use crate::args::{self, SeedArg};
use crate::error::{CliError, CliResult};
use crate::ledger_args::LedgerArgs;
use crate::output::Output;
use crate::plot::{self, Chart, Series, Style};
use crate::privacy_model;
use crate::report;
use crate::schema_args::SchemaArgs;
use dpml_core::budget;

/// The experiments a sweep can run.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// DP-SGD test accuracy against the target ε.
    DpSgd,
    /// Regression of the label's value (the digit): DP-SGD test MSE and label-DP Laplace
    /// regression test MSE at the same ε, with the non-private DP-SGD regression as baseline.
    DpSgdRegression,
    /// DPLloyd clustering accuracy against ε.
    Kmeans,
    /// The classic label-DP figure: Laplace on the digit value (MSE, log-log) and on the
    /// one-hot label with clamp-round (accuracy), side by side.
    LabelDp,
    /// Laplace label noise, regression on the label value: test MSE against ε.
    LabelDpRegression,
    /// Laplace label noise, one-hot with clamp-round: test accuracy against ε.
    LabelDpClassification,
    /// One non-private model; Laplace noise (L1 sensitivity 2) on each predicted probability
    /// vector, argmax after noise: test accuracy against ε per query.
    OutputPerturbation,
    /// Local DP: Laplace noise on every feature of every training record (ε per record, the
    /// record's L1 range as sensitivity), then non-private training: test accuracy.
    InputPerturbation,
    /// Local against central DP under attack: at each ε a DP-SGD model and a model on locally
    /// perturbed inputs, each audited with the loss attack and LiRA (`sweep_mia`).
    Mia,
}

impl Experiment {
    /// The library's experiment.
    pub(super) fn core(self) -> CoreExperiment {
        match self {
            Experiment::DpSgd => CoreExperiment::DpSgd,
            Experiment::DpSgdRegression => CoreExperiment::DpSgdRegression,
            Experiment::Kmeans => CoreExperiment::Kmeans,
            Experiment::LabelDp => CoreExperiment::LabelDp,
            Experiment::LabelDpRegression => CoreExperiment::LabelDpRegression,
            Experiment::LabelDpClassification => CoreExperiment::LabelDpClassification,
            Experiment::OutputPerturbation => CoreExperiment::OutputPerturbation,
            Experiment::InputPerturbation => CoreExperiment::InputPerturbation,
            Experiment::Mia => CoreExperiment::Mia,
        }
    }
}

/// Flags of `dpml sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The experiment.
    #[arg(long, value_enum)]
    pub experiment: Experiment,
    #[arg(long, value_parser = args::dataset, help = concat!("Data set: ", args::dataset_help!()))]
    pub dataset: Source,
    /// Label column of a csv: data set.
    #[arg(long)]
    pub label_column: Option<String>,
    /// The ε grid, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = args::positive, default_value = "0.1,0.3,1,3,10,30,100")]
    pub epsilons: Vec<f64>,
    /// Runs per ε (and for the baseline) [default: 3]; dp-sgd and the like only: mia refuses
    /// any value but 1.
    #[arg(long, value_parser = args::at_least_one_at_most(args::MAX_REPEATS))]
    pub repeats: Option<u64>,
    /// Output folder.
    #[arg(long)]
    pub out: PathBuf,
    /// Clusters (kmeans).
    #[arg(long, value_parser = args::at_least_one)]
    pub k: Option<u64>,
    /// What is declared about the data (bounds for dp-sgd scaling, kmeans and input
    /// perturbation; classes or label range for the label-dp experiments).
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// dp-sgd only: K-fold cross-validation over all records in every run; each fold's test
    /// accuracy is one row of results.csv, and summary.csv and the error bars are over
    /// repeats × folds. The grid's ε is each model's; the JSON adds the ε of all K models.
    #[arg(long, value_parser = args::at_least_one)]
    pub folds: Option<u64>,
    /// Training recipe for dp-sgd (defaults: the data set's preset where one exists).
    #[command(flatten)]
    pub training: TrainingArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub seed: SeedArg,
    /// The sum of the sweep's private runs is charged (refused before the first run when it
    /// would not fit; the mia experiment cannot be charged).
    #[command(flatten)]
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub mia: super::sweep_mia::MiaArgs,
}

/// Runs per ε when `--repeats` is not given.
const DEFAULT_REPEATS: u64 = 3;

impl SweepArgs {
    /// Runs per ε: `--repeats`, or [`DEFAULT_REPEATS`]. Kept optional so that experiments
    /// without repeats can tell a given value from the default.
    pub(super) fn repeats(&self) -> u64 {
        self.repeats.unwrap_or(DEFAULT_REPEATS)
    }

    /// What these flags ask of the library's sweep.
    pub(super) fn options(&self, data_dir: Option<&Path>) -> SweepOptions {
        SweepOptions {
            experiment: self.experiment.core(),
            dataset: self.dataset.clone(),
            label_column: self.label_column.clone(),
            data_dir: data_dir.map(Path::to_path_buf),
            epsilons: self.epsilons.clone(),
            repeats: self.repeats(),
            k: self.k.map(|k| k as usize),
            declarations: self.schema.declarations(),
            folds: self.folds.map(|k| k as usize),
            recipe: self.training.options(),
            split: self.split.options(),
            seed: self.seed.seed,
        }
    }
}

/// Run `dpml sweep`.
pub fn run(a: &SweepArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    // Before anything trains or is charged: the results are written there at the end.
    let check_out = || {
        dpml_core::output_path::check_folder(
            "--out",
            &a.out,
            &[
                "results.csv",
                "summary.csv",
                "results.json",
                "plot.png",
                "plot.svg",
            ],
        )
    };
    check_out()?;
    if a.experiment == Experiment::Mia {
        if a.ledger.ledger.is_some() {
            return Err(CliError::usage(
                "--ledger is not supported with --experiment mia: its shadow and reference \
                 models are not charged; run the mia sweep without a ledger",
            ));
        }
        return super::sweep_mia::run(a, data_dir, out);
    }
    let ledger = a.ledger.open(&a.seed)?;
    // Again once the ledger is open (`--budget` makes it): no result may be written over it.
    check_out()?;
    let o = a.options(data_dir);
    // Under mpirun every rank must draw the same split and the same per-job generators.
    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    let (setup, split_key) = Setup::new(&o, a.split.key(&mut rng))?;
    if ledger.is_some() && setup.neighbouring().is_none() {
        return Err(CliError::usage(format!(
            "--ledger is not supported with --experiment {}: it releases DP-SGD models, \
             private for whole records, and label-DP models, private for labels only, whose \
             epsilons no one ledger can add up; sweep dp-sgd and label-dp-regression on \
             ledgers of their own",
            o.experiment.name()
        )));
    }
    let cost = setup.cost(&o);
    budget::check(ledger.as_ref(), &cost)?;
    let jobs = core_sweep::jobs(&o, &mut rng);
    let grid: Vec<core_sweep::Job> = jobs.iter().map(|(job, _)| *job).collect();
    // Under mpirun each rank takes every K-th job (with the generator forked for it above).
    let (rank, ranks) = crate::cluster::rank_size();
    let bar = out.progress(grid.len().div_ceil(ranks) as u64, "sweep", "run");
    let mine = core_sweep::run_jobs(&setup, jobs, rank, ranks, &|| bar.inc(1));
    bar.finish_and_clear();
    let Some(runs) = super::sweep_gather::gather(grid.len(), mine?)? else {
        return Ok(());
    };
    // Recorded before any result is written.
    let balance = budget::charge(ledger.as_ref(), &cost)?;
    let rows = core_sweep::rows(&grid, runs);
    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", a.out.display())))?;
    core_sweep::write_results(&a.out.join("results.csv"), o.experiment, &rows)?;
    let summary = core_sweep::summarise(&rows);
    core_sweep::write_summary(&a.out.join("summary.csv"), &summary)?;
    let charts = charts(a, &trained(&setup, a), &summary);
    let (png, svg) = plot::write(&charts, &a.out, "plot")?;
    let all_folds = setup.epsilon_all_folds(&a.epsilons)?;
    out.emit(&json!({
        "ledger": balance.as_ref().map(dpml_core::ledger_json::balance),
        "experiment": o.experiment.name(),
        "dataset": a.dataset.name(),
        "epsilons": a.epsilons,
        "repeats": a.repeats(),
        "folds": a.folds,
        "epsilon_all_folds": all_folds,
        // Runs trained (the baseline's included; each cross-validates over its folds), not
        // the rows of results.csv (one per metric and fold).
        "runs": grid.len(),
        "split_key": split_key.map(|k| k.to_string()),
        privacy_model::DIAGNOSTICS_NOTE_KEY: privacy_model::experiment_note(
            "the utility figures (summary, results.csv, summary.csv and the plots)"
        ),
        privacy_model::DIAGNOSTICS_KEY: {
            "summary": summary.iter().map(|s| json!({"epsilon": s.epsilon, "metric": s.metric, "mean": s.mean, "std": s.std, "runs": s.n})).collect::<Vec<_>>(),
        },
        "results_csv": a.out.join("results.csv"),
        "summary_csv": a.out.join("summary.csv"),
        "png": png,
        "svg": svg,
        "seeded": rng.is_seeded(),
    }));
    Ok(())
}

/// What the sweep trains or releases, for plot titles: "mlp on digits, δ = 1e-5".
fn trained(setup: &Setup, a: &SweepArgs) -> String {
    let data = a.dataset.name();
    match setup {
        Setup::DpSgd { base, .. } | Setup::CrossValidated { base, .. } => format!(
            "DP-SGD {} on {data}, δ = {}",
            base.model,
            report::short(base.delta)
        ),
        Setup::Kmeans { params, .. } => format!("DPLloyd k-means, k = {} on {data}", params.k),
        Setup::Output { .. } => format!("noisy predictions of a non-private model on {data}"),
        Setup::Input { base, .. } => {
            format!(
                "Laplace-noised inputs, non-private {} on {data}",
                base.model
            )
        }
        Setup::LabelDp { training, .. } => {
            format!("Laplace label noise, {} on {data}", training.model)
        }
        Setup::Regression {
            base,
            label_training,
            ..
        } => format!(
            "regression of the label value on {data}: DP-SGD {} (δ = {}) and Laplace label \
             noise, {}",
            base.model,
            report::short(base.delta),
            label_training.model
        ),
    }
}

/// One panel per metric: ε on a log axis, mean ± 1 std as error bars, the baseline as a
/// dashed line. `trained` says what was trained or released (for the titles).
fn charts(a: &SweepArgs, trained: &str, summary: &[Summary]) -> Vec<Chart> {
    if a.experiment == Experiment::DpSgdRegression {
        return vec![regression_chart(a, trained, summary)];
    }
    let mut metrics: Vec<&'static str> = Vec::new();
    for s in summary {
        if !metrics.contains(&s.metric) {
            metrics.push(s.metric);
        }
    }
    let baseline_name = if a.experiment.core().is_label_dp() {
        "noise-free labels"
    } else {
        "non-private baseline"
    };
    let (lo, hi) = epsilon_span(&a.epsilons);
    let runs = match a.folds {
        Some(k) => format!("{} runs × {k} folds", a.repeats()),
        None => format!("{} runs", a.repeats()),
    };
    metrics
        .into_iter()
        .map(|metric| {
            let private: Vec<&Summary> = summary
                .iter()
                .filter(|s| s.metric == metric && s.epsilon.is_some())
                .collect();
            let mut series = vec![Series {
                name: format!("mean ± 1 std over {runs}"),
                points: private
                    .iter()
                    .map(|s| (s.epsilon.unwrap_or(f64::NAN), s.mean))
                    .collect(),
                style: Style::LineWithPoints,
                error_bars: Some(private.iter().map(|s| s.std).collect()),
            }];
            if let Some(b) = summary
                .iter()
                .find(|s| s.metric == metric && s.epsilon.is_none())
            {
                series.push(Series::new(
                    format!("{baseline_name} (mean of {runs})"),
                    vec![(lo, b.mean), (hi, b.mean)],
                    Style::Dashed,
                ));
            }
            let log_y = metric.contains("mse");
            let axis = metric_label(metric);
            Chart {
                title: format!("{} against ε ({trained})", capitalised(&axis)),
                x_label: format!("{} (log scale)", a.experiment.core().epsilon_axis()),
                y_label: if log_y {
                    format!("{axis} (log scale)")
                } else {
                    axis
                },
                log_x: true,
                log_y,
                series,
            }
        })
        .collect()
}

/// The ε range of the grid, for baseline lines.
fn epsilon_span(epsilons: &[f64]) -> (f64, f64) {
    epsilons
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &e| (l.min(e), h.max(e)))
}

/// dp-sgd-regression: one panel, test MSE of both mechanisms against ε (log-log, mean ± 1
/// std), the non-private DP-SGD regression as a dashed line.
fn regression_chart(a: &SweepArgs, trained: &str, summary: &[Summary]) -> Chart {
    let (lo, hi) = epsilon_span(&a.epsilons);
    let runs = format!("{} runs", a.repeats());
    let mechanism = |metric: &str, name: &str| {
        let private: Vec<&Summary> = summary
            .iter()
            .filter(|s| s.metric == metric && s.epsilon.is_some())
            .collect();
        Series {
            name: format!("{name} (mean ± 1 std over {runs})"),
            points: private
                .iter()
                .map(|s| (s.epsilon.unwrap_or(f64::NAN), s.mean))
                .collect(),
            style: Style::LineWithPoints,
            error_bars: Some(private.iter().map(|s| s.std).collect()),
        }
    };
    let mut series = vec![
        mechanism(DP_SGD_MSE, "DP-SGD"),
        mechanism(LABEL_DP_MSE, "label DP (Laplace on the value)"),
    ];
    if let Some(b) = summary
        .iter()
        .find(|s| s.metric == DP_SGD_MSE && s.epsilon.is_none())
    {
        series.push(Series::new(
            format!("non-private DP-SGD regression (mean of {runs})"),
            vec![(lo, b.mean), (hi, b.mean)],
            Style::Dashed,
        ));
    }
    Chart {
        title: format!("Test MSE against ε ({trained})"),
        x_label: format!("{} (log scale)", a.experiment.core().epsilon_axis()),
        y_label: "test MSE (log scale)".into(),
        log_x: true,
        log_y: true,
        series,
    }
}

/// A metric's name as an axis label.
fn metric_label(metric: &str) -> String {
    match metric {
        "accuracy" => "clustering accuracy".into(),
        "nicv" => "NICV (normalised intra-cluster variance)".into(),
        "test_mse" => "test MSE".into(),
        other => other.replace('_', " "),
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}
