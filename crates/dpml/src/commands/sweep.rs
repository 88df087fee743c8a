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

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use clap::{Args, ValueEnum};
use dpml_data::{Dataset, Provenance, Schema, Source, SplitKey};
use dpml_learn::dpsgd::{self, Privacy, TrainConfig};
use dpml_learn::kmeans::{self, Algorithm, KMeansParams};
use dpml_learn::label_dp::{self, LabelDpConfig, LabelMechanism, Task};
use dpml_learn::perturbation::{
    InputBudget, InputMechanism, OutputPerturbation, perturb_dataset_in, softmax_rows,
};
use dpml_mechanisms::{DpRng, PrivacyEvent};
use rayon::prelude::*;
use serde_json::json;

use dpml_learn::crossval::{epsilon_all_folds, k_fold, mean_std};

use super::kmeans::declared_bounds;
use super::train::{
    SplitArgs, TrainingArgs, load_all, load_split, public_normalization, task_recipe,
};
use crate::args::{self, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::plot::{self, Chart, Series, Style};
use crate::privacy_model;
use crate::report;
use crate::schema_args::{Needs, SchemaArgs, require_declared};

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
    /// Local against central DP under attack: at each ε a DP-SGD model and a model on
    /// locally perturbed inputs, each audited with the loss attack and LiRA (`sweep_mia`).
    Mia,
}

impl Experiment {
    /// What the ε of the grid is, as the x axis names it.
    pub(super) fn epsilon_axis(self) -> &'static str {
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

    /// The name as typed after `--experiment`.
    fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

/// ε standing in for "no label noise" in the label-DP baseline (Laplace scale 2e-9 on a
/// one-hot label): the labels are used as they are, up to rounding.
const NOISE_FREE_LABEL_EPSILON: f64 = 1e9;

/// Flags of `dpml sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The experiment.
    #[arg(long, value_enum)]
    pub experiment: Experiment,
    /// Data set.
    #[arg(long, value_parser = args::dataset)]
    pub dataset: Source,
    /// Label column of a csv: data set.
    #[arg(long)]
    pub label_column: Option<String>,
    /// The ε grid, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = args::positive, default_value = "0.1,0.3,1,3,10,30,100")]
    pub epsilons: Vec<f64>,
    /// Runs per ε (and for the baseline).
    #[arg(long, value_parser = args::at_least_one, default_value = "3")]
    pub repeats: u64,
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
    #[command(flatten)]
    pub mia: super::sweep_mia::MiaArgs,
}

/// One measured value of a run: metric name, cross-validation fold (if any) and value.
use super::sweep_gather::Metrics;

/// One row of results.csv: the run, the metric, the fold and the value.
struct Row {
    job: Job,
    metric: &'static str,
    fold: Option<usize>,
    value: f64,
}

/// One run of the grid: ε (None = non-private baseline) and its repeat index.
#[derive(Clone, Copy)]
struct Job {
    epsilon: Option<f64>,
    repeat: u64,
}

/// What each experiment needs, loaded once.
enum Setup {
    DpSgd {
        base: TrainConfig,
        train: Dataset,
        test: Dataset,
    },
    CrossValidated {
        base: TrainConfig,
        all: Dataset,
        folds: usize,
        key: SplitKey,
        /// Each run's fold events by target ε, for the ε of releasing all K models.
        fold_events: Mutex<Vec<(f64, Vec<Option<PrivacyEvent>>)>>,
    },
    Kmeans {
        params: KMeansParams,
        data: Dataset,
    },
    Output {
        probs: Vec<f64>,
        classes: usize,
        clean_accuracy: f64,
        test: Dataset,
    },
    Input {
        base: TrainConfig,
        ranges: Vec<(f64, f64)>,
        train: Dataset,
        test: Dataset,
    },
    /// DP-SGD regression and label-DP Laplace regression of the label value, side by side.
    Regression {
        base: TrainConfig,
        label_training: Box<TrainConfig>,
        train: Dataset,
        test: Dataset,
    },
    LabelDp {
        tasks: Vec<Task>,
        training: TrainConfig,
        train: Dataset,
        test: Dataset,
    },
}

impl Setup {
    /// What the sweep's runs share, and the split key when records were held out (`key`, one
    /// for every run, so that all runs see the same split or folds).
    fn new(
        a: &SweepArgs,
        data_dir: Option<&Path>,
        key: SplitKey,
    ) -> CliResult<(Self, Option<SplitKey>)> {
        let opts = a.schema.load_options(data_dir, a.label_column.as_deref())?;
        let split = |needs: Needs| {
            let l = load_split(&a.dataset, &opts, needs, a.split.test_fraction, Some(key))?;
            CliResult::Ok((l.train, l.test, l.schema, l.split_key))
        };
        if let (Some(k), false) = (a.folds, a.experiment == Experiment::DpSgd) {
            return Err(CliError::usage(format!(
                "--folds {k} applies to --experiment dp-sgd, not {}",
                a.experiment.name()
            )));
        }
        let private_training = Needs {
            classes: true,
            bounds: true,
            label_range: false,
        };
        match a.experiment {
            Experiment::Mia => Err(CliError::internal("the mia sweep runs in sweep_mia")),
            Experiment::DpSgd if a.folds.is_some() => {
                let (all, schema) = load_all(&a.dataset, &opts)?;
                require_declared(&schema, &all, private_training)?;
                let base = recipe_for(a, &schema, &all)?;
                Ok((
                    Setup::CrossValidated {
                        base,
                        all,
                        folds: a.folds.map_or(0, |k| k as usize),
                        key,
                        fold_events: Mutex::new(Vec::new()),
                    },
                    Some(key),
                ))
            }
            Experiment::DpSgd => {
                let (train, test, schema, used) = split(private_training)?;
                let base = recipe_for(a, &schema, &train)?;
                Ok((Setup::DpSgd { base, train, test }, used))
            }
            Experiment::DpSgdRegression => {
                // The label range fixes the label's values, both mechanisms' scale and (for
                // label DP) the Laplace sensitivity; DP-SGD also scales features by bounds.
                let needs = Needs {
                    label_range: true,
                    bounds: true,
                    classes: false,
                };
                let (train, test, schema, used) = split(needs)?;
                let base = task_recipe(
                    Task::Regression,
                    &a.training,
                    recipe_for(a, &schema, &train)?,
                );
                let normalize = public_normalization(&a.dataset, &schema, &train)?;
                let mut label_training = a
                    .training
                    .apply(label_dp::default_training(normalize, train.n))?;
                label_training.privacy = Privacy::NonPrivate;
                let setup = Setup::Regression {
                    base,
                    // Boxed: a second TrainConfig inline would make every Setup this large.
                    label_training: Box::new(label_training),
                    train,
                    test,
                };
                Ok((setup, used))
            }
            Experiment::OutputPerturbation => {
                let needs = Needs {
                    classes: true,
                    ..Needs::default()
                };
                let (train, test, schema, used) = split(needs)?;
                let mut cfg = recipe_for(a, &schema, &train)?;
                cfg.privacy = Privacy::NonPrivate;
                let mut trained =
                    dpsgd::train(&cfg, &train, Some(&test), &mut a.seed.rng()?, &mut |_| {})?;
                let logits = dpsgd::predict_logits(&mut trained.model, &trained.input, &test)?;
                let setup = Setup::Output {
                    probs: softmax_rows(&logits),
                    classes: test.n_classes,
                    clean_accuracy: trained.report.test_accuracy.unwrap_or(f64::NAN),
                    test,
                };
                Ok((setup, used))
            }
            Experiment::InputPerturbation => {
                let needs = Needs {
                    bounds: true,
                    ..Needs::default()
                };
                let (train, test, schema, used) = split(needs)?;
                let mut base = recipe_for(a, &schema, &train)?;
                base.privacy = Privacy::NonPrivate;
                let ranges = schema.require_bounds(&train.name, train.n_features())?;
                let setup = Setup::Input {
                    base,
                    ranges,
                    train,
                    test,
                };
                Ok((setup, used))
            }
            Experiment::Kmeans => {
                let (data, schema) = load_all(&a.dataset, &opts)?;
                let bounds = declared_bounds(&schema, &data)?;
                let k = a.k.map_or(data.n_classes, |k| k as usize);
                let params = KMeansParams::new(k, Algorithm::DpLloyd, bounds);
                Ok((Setup::Kmeans { params, data }, None))
            }
            Experiment::LabelDp
            | Experiment::LabelDpRegression
            | Experiment::LabelDpClassification => {
                let tasks = match a.experiment {
                    Experiment::LabelDpRegression => vec![Task::Regression],
                    Experiment::LabelDpClassification => vec![Task::Classification],
                    _ => vec![Task::Regression, Task::Classification],
                };
                let needs = Needs {
                    classes: tasks.contains(&Task::Classification),
                    label_range: tasks.contains(&Task::Regression),
                    bounds: false,
                };
                let (train, test, schema, used) = split(needs)?;
                let normalize = public_normalization(&a.dataset, &schema, &train)?;
                let base = label_dp::default_training(normalize, train.n);
                let mut training = a.training.apply(base)?;
                training.privacy = Privacy::NonPrivate;
                let setup = Setup::LabelDp {
                    tasks,
                    training,
                    train,
                    test,
                };
                Ok((setup, used))
            }
        }
    }

    fn run(&self, job: Job, rng: &mut DpRng) -> CliResult<Metrics> {
        match self {
            Setup::DpSgd { base, train, test } => {
                let cfg = recipe_at(base, job.epsilon);
                let out = dpsgd::train(&cfg, train, Some(test), rng, &mut |_| {})?;
                Ok(vec![(
                    "test_accuracy",
                    None,
                    out.report.test_accuracy.unwrap_or(f64::NAN),
                )])
            }
            Setup::CrossValidated {
                base,
                all,
                folds,
                key,
                fold_events,
            } => {
                let cfg = recipe_at(base, job.epsilon);
                let mut events = Vec::with_capacity(*folds);
                let cv = k_fold::<CliError>(
                    &cfg,
                    all,
                    *folds,
                    key,
                    rng,
                    &mut |_, cfg, train, test, rng| {
                        let outcome = dpsgd::train(cfg, train, Some(test), rng, &mut |_| {})?;
                        events.push(outcome.event.clone());
                        Ok(outcome)
                    },
                )?;
                if let (Some(e), Ok(mut all_events)) = (job.epsilon, fold_events.lock()) {
                    all_events.push((e, events));
                }
                Ok(cv
                    .accuracies
                    .iter()
                    .enumerate()
                    .map(|(i, &acc)| ("test_accuracy", Some(i), acc))
                    .collect())
            }
            Setup::Kmeans { params, data } => {
                let p = match job.epsilon {
                    Some(e) => params.clone().with_epsilon(e),
                    None => KMeansParams::new(params.k, Algorithm::Lloyd, params.bounds.clone()),
                };
                let fit = kmeans::fit(&p, &data.x, data.n, data.n_features(), rng)?;
                let acc =
                    kmeans::clustering_accuracy(&fit.assignments, &data.y, fit.k, data.n_classes)?;
                let nicv =
                    kmeans::nicv(&data.x, data.n_features(), &fit.centroids, &params.bounds)?;
                Ok(vec![("accuracy", None, acc), ("nicv", None, nicv)])
            }
            Setup::Output {
                probs,
                classes,
                clean_accuracy,
                test,
            } => {
                // The baseline is the model's own accuracy; only noisy answers are drawn per run.
                let Some(e) = job.epsilon else {
                    return Ok(vec![("test_accuracy", None, *clean_accuracy)]);
                };
                let labels = OutputPerturbation::new(e, *classes)?.release_labels(rng, probs)?;
                let correct = labels
                    .iter()
                    .zip(&test.y)
                    .filter(|&(&p, &y)| p == y as usize)
                    .count();
                Ok(vec![(
                    "test_accuracy",
                    None,
                    correct as f64 / test.n.max(1) as f64,
                )])
            }
            Setup::Input {
                base,
                ranges,
                train,
                test,
            } => {
                let mut noisy = train.clone();
                if let Some(e) = job.epsilon {
                    perturb_dataset_in(
                        &mut noisy,
                        ranges,
                        InputMechanism::Laplace,
                        InputBudget::PerRecord(e),
                        rng,
                    )?;
                }
                let out = dpsgd::train(base, &noisy, Some(test), rng, &mut |_| {})?;
                Ok(vec![(
                    "test_accuracy",
                    None,
                    out.report.test_accuracy.unwrap_or(f64::NAN),
                )])
            }
            Setup::Regression {
                base,
                label_training,
                train,
                test,
            } => {
                let cfg = recipe_at(base, job.epsilon);
                let out = dpsgd::train_task(
                    Task::Regression,
                    &cfg,
                    train,
                    Some(test),
                    rng,
                    &mut |_| {},
                    &mut |_| {},
                )?;
                let mut metrics = vec![(DP_SGD_MSE, None, out.report.test_mse.unwrap_or(f64::NAN))];
                // The baseline is the non-private DP-SGD regression alone.
                if let Some(epsilon) = job.epsilon {
                    let r = label_dp::run(
                        &laplace_label_dp(Task::Regression, epsilon, label_training),
                        train,
                        test,
                        rng,
                        &mut |_| {},
                    )
                    .map_err(CliError::usage)?
                    .report;
                    metrics.push((LABEL_DP_MSE, None, r.test_mse.unwrap_or(f64::NAN)));
                }
                Ok(metrics)
            }
            Setup::LabelDp {
                tasks,
                training,
                train,
                test,
            } => {
                let mut metrics = Vec::new();
                for &task in tasks {
                    let cfg = laplace_label_dp(
                        task,
                        job.epsilon.unwrap_or(NOISE_FREE_LABEL_EPSILON),
                        training,
                    );
                    let r = label_dp::run(&cfg, train, test, rng, &mut |_| {})
                        .map_err(CliError::usage)?
                        .report;
                    match task {
                        Task::Regression => {
                            metrics.push(("test_mse", None, r.test_mse.unwrap_or(f64::NAN)))
                        }
                        Task::Classification => metrics.push((
                            "test_accuracy",
                            None,
                            r.test_accuracy.unwrap_or(f64::NAN),
                        )),
                    }
                }
                Ok(metrics)
            }
        }
    }
}

/// Metric names of the dp-sgd-regression experiment: one per mechanism.
pub(super) const DP_SGD_MSE: &str = "dp_sgd_test_mse";
pub(super) const LABEL_DP_MSE: &str = "label_dp_test_mse";

/// Laplace label DP for `task` at `epsilon`, trained with `training`.
fn laplace_label_dp(task: Task, epsilon: f64, training: &TrainConfig) -> LabelDpConfig {
    LabelDpConfig {
        task,
        mechanism: LabelMechanism::Laplace,
        postprocess: None,
        epsilon,
        stages: None,
        prior_temperature: None,
        top_k_rule: None,
        training: training.clone(),
    }
}

impl Setup {
    /// What the sweep trains or releases, for plot titles: "mlp on digits, δ = 1e-5".
    fn trained(&self, a: &SweepArgs) -> String {
        let data = a.dataset.name();
        match self {
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

    /// With `--folds`: for each target ε of the grid (the ε of each fold's model), the ε of
    /// releasing all K models of one run ([`epsilon_all_folds`]); `None` without folds. Every
    /// run at one ε has the same folds and recipe, hence the same events: one run's serve.
    fn epsilon_all_folds(&self, epsilons: &[f64]) -> CliResult<Option<Vec<serde_json::Value>>> {
        let Setup::CrossValidated {
            base, fold_events, ..
        } = self
        else {
            return Ok(None);
        };
        let runs = fold_events
            .lock()
            .map_err(|_| CliError::internal("a sweep worker panicked"))?;
        let accountant = dpsgd::accountant(base.accountant);
        epsilons
            .iter()
            .map(|&e| {
                let composed = match runs.iter().find(|(t, _)| *t == e) {
                    Some((_, events)) => {
                        epsilon_all_folds(events, accountant.as_ref(), base.delta)?
                    }
                    None => None,
                };
                Ok(json!({"epsilon_per_model": e, "epsilon_all_folds": composed}))
            })
            .collect::<CliResult<Vec<_>>>()
            .map(Some)
    }
}

/// The DP-SGD recipe of a sweep: the data set's preset where one exists, else the small-table
/// MLP ([`dpsgd::tabular_recipe`]), normalised by [`public_normalization`] (declared bounds
/// replace a preset's normalisation); command-line training flags override it.
pub(super) fn recipe_for(a: &SweepArgs, schema: &Schema, data: &Dataset) -> CliResult<TrainConfig> {
    let base = match dpsgd::presets()
        .into_iter()
        .find(|p| p.dataset == a.dataset.name())
    {
        Some(p) if schema.bounds_provenance != Some(Provenance::Declared) => p.config,
        Some(p) => TrainConfig {
            normalize: public_normalization(&a.dataset, schema, data)?,
            ..p.config
        },
        None => TrainConfig {
            normalize: public_normalization(&a.dataset, schema, data)?,
            ..dpsgd::tabular_recipe()
        },
    };
    a.training.apply(base)
}

/// Run `dpml sweep`.
pub fn run(a: &SweepArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    if a.experiment == Experiment::Mia {
        return super::sweep_mia::run(a, data_dir, out);
    }
    // Under mpirun every rank must draw the same split and the same per-job generators.
    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    let (setup, split_key) = Setup::new(a, data_dir, a.split.key(&mut rng))?;
    let grid = std::iter::once(None).chain(a.epsilons.iter().copied().map(Some));
    let jobs: Vec<(Job, DpRng)> = grid
        .flat_map(|epsilon| (0..a.repeats).map(move |repeat| Job { epsilon, repeat }))
        .map(|job| (job, rng.fork()))
        .collect();
    let grid: Vec<Job> = jobs.iter().map(|(job, _)| *job).collect();
    // Under mpirun each rank takes every K-th job (with the generator forked for it above).
    let (rank, ranks) = crate::cluster::rank_size();
    let bar = out.progress(grid.len().div_ceil(ranks) as u64, "sweep", "run");
    // Each job carries its own rng, forked in grid order above, and rayon's indexed collect
    // keeps grid order: the results do not depend on which thread ran which job.
    let mine: Vec<(usize, CliResult<Metrics>)> = jobs
        .into_par_iter()
        .enumerate()
        .filter(|(i, _)| i % ranks == rank)
        .map(|(i, (job, mut job_rng))| {
            let r = setup.run(job, &mut job_rng);
            bar.inc(1);
            (i, r)
        })
        .collect();
    bar.finish_and_clear();
    let mine = mine
        .into_iter()
        .map(|(i, r)| r.map(|m| (i, m)))
        .collect::<CliResult<Vec<_>>>()?;
    let Some(runs) = super::sweep_gather::gather(grid.len(), mine)? else {
        return Ok(());
    };
    let mut rows = Vec::new();
    for (job, r) in grid.into_iter().zip(runs) {
        for (metric, fold, value) in r {
            rows.push(Row {
                job,
                metric,
                fold,
                value,
            });
        }
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", a.out.display())))?;
    write_results(&a.out.join("results.csv"), a.experiment, &rows)?;
    let summary = summarise(&rows);
    write_summary(&a.out.join("summary.csv"), &summary)?;
    let charts = charts(a, &setup.trained(a), &summary);
    let (png, svg) = plot::write(&charts, &a.out, "plot")?;
    let all_folds = setup.epsilon_all_folds(&a.epsilons)?;
    out.emit(&json!({
        "experiment": a.experiment.name(),
        "dataset": a.dataset.name(),
        "epsilons": a.epsilons,
        "repeats": a.repeats,
        "folds": a.folds,
        "epsilon_all_folds": all_folds,
        "runs": rows.len(),
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

/// Mean and standard deviation of one metric at one ε (None: the baseline).
struct Summary {
    epsilon: Option<f64>,
    metric: &'static str,
    mean: f64,
    std: f64,
    n: usize,
}

/// Mean and standard deviation per (ε, metric) over every row: repeats, and folds when the
/// runs cross-validate.
fn summarise(rows: &[Row]) -> Vec<Summary> {
    let mut keys: Vec<(Option<f64>, &'static str)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.job.epsilon, r.metric)) {
            keys.push((r.job.epsilon, r.metric));
        }
    }
    keys.into_iter()
        .map(|(epsilon, metric)| {
            let v: Vec<f64> = rows
                .iter()
                .filter(|r| r.job.epsilon == epsilon && r.metric == metric)
                .map(|r| r.value)
                .collect();
            let (mean, std) = mean_std(&v);
            Summary {
                epsilon,
                metric,
                mean,
                std,
                n: v.len(),
            }
        })
        .collect()
}

fn epsilon_label(e: Option<f64>) -> String {
    e.map_or("non-private".into(), |e| e.to_string())
}

/// One line per row; `fold` is empty for runs without cross-validation.
fn write_results(path: &Path, experiment: Experiment, rows: &[Row]) -> CliResult<()> {
    write_lines(
        path,
        "experiment,epsilon,repeat,fold,metric,value",
        rows.iter().map(|r| {
            format!(
                "{},{},{},{},{},{}",
                experiment.name(),
                epsilon_label(r.job.epsilon),
                r.job.repeat,
                r.fold.map_or(String::new(), |f| f.to_string()),
                r.metric,
                r.value
            )
        }),
    )
}

fn write_summary(path: &Path, summary: &[Summary]) -> CliResult<()> {
    write_lines(
        path,
        "epsilon,metric,mean,std,n",
        summary.iter().map(|s| {
            format!(
                "{},{},{},{},{}",
                epsilon_label(s.epsilon),
                s.metric,
                s.mean,
                s.std,
                s.n
            )
        }),
    )
}

fn write_lines(path: &Path, header: &str, lines: impl Iterator<Item = String>) -> CliResult<()> {
    let err = |e: std::io::Error| CliError::usage(format!("writing {}: {e}", path.display()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    writeln!(f, "{header}").map_err(err)?;
    for line in lines {
        writeln!(f, "{line}").map_err(err)?;
    }
    f.flush().map_err(err)
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
    let baseline_name = match a.experiment {
        Experiment::LabelDp | Experiment::LabelDpRegression | Experiment::LabelDpClassification => {
            "noise-free labels"
        }
        _ => "non-private baseline",
    };
    let (lo, hi) = epsilon_span(&a.epsilons);
    let runs = match a.folds {
        Some(k) => format!("{} runs × {k} folds", a.repeats),
        None => format!("{} runs", a.repeats),
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
                x_label: format!("{} (log scale)", a.experiment.epsilon_axis()),
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
    let runs = format!("{} runs", a.repeats);
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
        x_label: format!("{} (log scale)", a.experiment.epsilon_axis()),
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

/// The sweep's recipe at one grid point: DP-SGD calibrated to ε, or non-private (the baseline).
fn recipe_at(base: &TrainConfig, epsilon: Option<f64>) -> TrainConfig {
    let mut cfg = base.clone();
    cfg.privacy = epsilon.map_or(Privacy::NonPrivate, Privacy::TargetEpsilon);
    cfg
}
