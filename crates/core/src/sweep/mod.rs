//! Sweeps: one experiment over a grid of ε (with repeats and a non-private baseline), run in
//! parallel on the available cores; the utility of every run, its summary per ε, and the
//! CSV files that hold them.
//!
//! A sweep is an evaluation experiment, not a release: its utility figures are computed from
//! the data without noise (diagnostics). The ε of the grid is each model's; with folds,
//! [`Setup::epsilon_all_folds`] gives the ε of releasing all K models of one run.

pub mod mia;
mod results;
mod setup;

use std::path::PathBuf;

use dpml_data::Source;
use dpml_mechanisms::DpRng;
use rayon::prelude::*;

use crate::error::Result;
use crate::schema::Declarations;
use crate::train::{RecipeOptions, SplitOptions};

pub use results::{Row, Summary, rows, summarise, write_results, write_summary};
pub use setup::Setup;

/// The experiments a sweep can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// DP-SGD test accuracy against the target ε.
    DpSgd,
    /// Regression of the label's value: DP-SGD test MSE and label-DP Laplace regression test
    /// MSE at the same ε, with the non-private DP-SGD regression as baseline.
    DpSgdRegression,
    /// DPLloyd clustering accuracy against ε.
    Kmeans,
    /// Laplace on the digit value (MSE) and on the one-hot label with clamp-round (accuracy).
    LabelDp,
    /// Laplace label noise, regression on the label value: test MSE against ε.
    LabelDpRegression,
    /// Laplace label noise, one-hot with clamp-round: test accuracy against ε.
    LabelDpClassification,
    /// One non-private model; Laplace noise on each predicted probability vector, argmax after
    /// noise: test accuracy against ε per query.
    OutputPerturbation,
    /// Local DP: Laplace noise on every feature of every training record, then non-private
    /// training: test accuracy.
    InputPerturbation,
    /// Local against central DP under attack: at each ε a DP-SGD model and a model on locally
    /// perturbed inputs, each audited with the loss attack and LiRA ([`mia`]).
    Mia,
}

impl Experiment {
    /// What the ε of the grid is, as an axis names it.
    pub fn epsilon_axis(self) -> &'static str {
        match self {
            Experiment::DpSgd | Experiment::Kmeans | Experiment::DpSgdRegression => {
                "privacy budget ε"
            }
            Experiment::OutputPerturbation => "ε per query",
            Experiment::InputPerturbation => "ε per record (local DP)",
            Experiment::Mia => "ε (DP-SGD: accountant's ε; local DP: ε per record)",
            Experiment::LabelDp
            | Experiment::LabelDpRegression
            | Experiment::LabelDpClassification => "label ε",
        }
    }

    /// The experiment's name (as `dpml sweep --experiment` takes it and results.csv writes it).
    pub fn name(self) -> &'static str {
        match self {
            Experiment::DpSgd => "dp-sgd",
            Experiment::DpSgdRegression => "dp-sgd-regression",
            Experiment::Kmeans => "kmeans",
            Experiment::LabelDp => "label-dp",
            Experiment::LabelDpRegression => "label-dp-regression",
            Experiment::LabelDpClassification => "label-dp-classification",
            Experiment::OutputPerturbation => "output-perturbation",
            Experiment::InputPerturbation => "input-perturbation",
            Experiment::Mia => "mia",
        }
    }

    /// Whether its baseline uses the labels without noise (rather than training without
    /// privacy).
    pub fn is_label_dp(self) -> bool {
        matches!(
            self,
            Experiment::LabelDp | Experiment::LabelDpRegression | Experiment::LabelDpClassification
        )
    }
}

/// What a sweep runs, on what.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The experiment.
    pub experiment: Experiment,
    /// The data source.
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// The ε grid.
    pub epsilons: Vec<f64>,
    /// Runs per ε (and for the baseline).
    pub repeats: u64,
    /// Clusters (kmeans; default: the number of classes).
    pub k: Option<usize>,
    /// What is declared about the data.
    pub declarations: Declarations,
    /// dp-sgd only: K-fold cross-validation in every run.
    pub folds: Option<usize>,
    /// Overrides of the training recipe.
    pub recipe: RecipeOptions,
    /// How the test set is cut.
    pub split: SplitOptions,
    /// The seed of the generator that trains output perturbation's one model.
    pub seed: Option<u64>,
}

/// One measured value of a run: metric name, cross-validation fold (if any) and value.
pub type Metrics = Vec<(&'static str, Option<usize>, f64)>;

/// Metric names of the dp-sgd-regression experiment: one per mechanism.
pub const DP_SGD_MSE: &str = "dp_sgd_test_mse";
/// See [`DP_SGD_MSE`].
pub const LABEL_DP_MSE: &str = "label_dp_test_mse";

/// One run of the grid: ε (None = non-private baseline) and its repeat index.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// The target ε, or `None` for the baseline.
    pub epsilon: Option<f64>,
    /// The repeat index.
    pub repeat: u64,
}

/// The grid's runs (the baseline first, then each ε; `repeats` of each), each with its own
/// generator forked from `rng` in grid order, so that the results do not depend on which
/// thread or process ran which job.
pub fn jobs(o: &SweepOptions, rng: &mut DpRng) -> Vec<(Job, DpRng)> {
    let grid = std::iter::once(None).chain(o.epsilons.iter().copied().map(Some));
    grid.flat_map(|epsilon| (0..o.repeats).map(move |repeat| Job { epsilon, repeat }))
        .map(|job| (job, rng.fork()))
        .collect()
}

/// Runs `jobs` of `setup` in parallel, those whose index `i` has `i % ranks == rank` (a
/// process's share of a job of several processes; `0, 1` for all), calling `done` after each.
/// Returns each run's metrics by job index, in grid order.
///
/// # Errors
/// The first failing run's error.
pub fn run_jobs(
    setup: &Setup,
    jobs: Vec<(Job, DpRng)>,
    rank: usize,
    ranks: usize,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<(usize, Metrics)>> {
    // Rayon's indexed collect keeps grid order.
    let mine: Vec<(usize, Result<Metrics>)> = jobs
        .into_par_iter()
        .enumerate()
        .filter(|(i, _)| i % ranks == rank)
        .map(|(i, (job, mut job_rng))| {
            let r = setup.run(job, &mut job_rng);
            done();
            (i, r)
        })
        .collect();
    mine.into_iter().map(|(i, r)| r.map(|m| (i, m))).collect()
}
