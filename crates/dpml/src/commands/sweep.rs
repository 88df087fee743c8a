//! `dpml sweep`: run one experiment over a grid of ε (with repeats and a non-private
//! baseline), in parallel on the available cores, and draw utility against ε on a log axis.
//! Writes `results.csv` (one row per run and metric; with `--folds K`, one row per fold of
//! each run), `summary.csv` (mean and standard deviation per ε, over repeats and folds) and
//! `plot.png` / `plot.svg`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use clap::{Args, ValueEnum};
use dpml_data::{Dataset, Source, SplitKey};
use dpml_learn::dpsgd::{self, Privacy, TrainConfig};
use dpml_learn::kmeans::{self, Algorithm, KMeansParams};
use dpml_learn::label_dp::{self, LabelDpConfig, LabelMechanism, Task};
use dpml_learn::perturbation::{
    InputBudget, InputMechanism, OutputPerturbation, perturb_dataset_in, softmax_rows,
};
use dpml_mechanisms::DpRng;
use serde_json::json;

use super::kmeans::public_bounds;
use super::train::{
    SplitArgs, TrainingArgs, k_fold, load_all, load_split, mean_std, public_normalization,
    public_ranges,
};
use crate::args::{self, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::plot::{self, Chart, Series, Style};

/// The experiments a sweep can run.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// DP-SGD test accuracy against the target ε.
    DpSgd,
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
}

impl Experiment {
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
    #[arg(long)]
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
    /// Public feature bounds for kmeans and input-perturbation (as for `dpml kmeans
    /// --bounds`; default: the data set's published ranges).
    #[arg(long, allow_hyphen_values = true)]
    pub bounds: Option<String>,
    /// dp-sgd only: K-fold cross-validation over all records in every run; each fold's test
    /// accuracy is one row of results.csv, and summary.csv and the error bars are over
    /// repeats × folds.
    #[arg(long, value_parser = args::at_least_one)]
    pub folds: Option<u64>,
    /// Training recipe for dp-sgd (defaults: the data set's preset where one exists).
    #[command(flatten)]
    pub training: TrainingArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// One measured value of a run: metric name, cross-validation fold (if any) and value.
type Metrics = Vec<(&'static str, Option<usize>, f64)>;

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
        let split = || {
            load_split(
                &a.dataset,
                a.label_column.as_deref(),
                data_dir,
                a.split.test_fraction,
                Some(key),
            )
        };
        if let (Some(k), false) = (a.folds, a.experiment == Experiment::DpSgd) {
            return Err(CliError::usage(format!(
                "--folds {k} applies to --experiment dp-sgd, not {}",
                a.experiment.name()
            )));
        }
        match a.experiment {
            Experiment::DpSgd if a.folds.is_some() => {
                let all = load_all(&a.dataset, a.label_column.as_deref(), data_dir)?;
                let base = recipe_for(a, &all)?;
                Ok((
                    Setup::CrossValidated {
                        base,
                        all,
                        folds: a.folds.map_or(0, |k| k as usize),
                        key,
                    },
                    Some(key),
                ))
            }
            Experiment::DpSgd => {
                let (train, test, used) = split()?;
                let base = recipe_for(a, &train)?;
                Ok((Setup::DpSgd { base, train, test }, used))
            }
            Experiment::OutputPerturbation => {
                let (train, test, used) = split()?;
                let mut cfg = recipe_for(a, &train)?;
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
                let (train, test, used) = split()?;
                let mut base = recipe_for(a, &train)?;
                base.privacy = Privacy::NonPrivate;
                let ranges =
                    public_ranges(&a.dataset, &train, a.bounds.as_deref())?.ok_or_else(|| {
                        CliError::usage(format!(
                            "input perturbation needs public feature ranges, and {} publishes \
                             none: declare them with --bounds",
                            a.dataset.name()
                        ))
                    })?;
                let setup = Setup::Input {
                    base,
                    ranges,
                    train,
                    test,
                };
                Ok((setup, used))
            }
            Experiment::Kmeans => {
                let data = load_all(&a.dataset, a.label_column.as_deref(), data_dir)?;
                let bounds = match &a.bounds {
                    Some(spec) => super::kmeans::parse_bounds(spec, data.n_features())?,
                    None => public_bounds(&a.dataset, &data)?,
                };
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
                let (train, test, used) = split()?;
                let base =
                    label_dp::default_training(public_normalization(&a.dataset, &train), train.n);
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
                let mut cfg = base.clone();
                cfg.privacy = job
                    .epsilon
                    .map_or(Privacy::NonPrivate, Privacy::TargetEpsilon);
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
            } => {
                let mut cfg = base.clone();
                cfg.privacy = job
                    .epsilon
                    .map_or(Privacy::NonPrivate, Privacy::TargetEpsilon);
                let cv = k_fold(
                    &cfg,
                    all,
                    *folds,
                    key,
                    rng,
                    &mut |_, cfg, train, test, rng| {
                        Ok(dpsgd::train(cfg, train, Some(test), rng, &mut |_| {})?)
                    },
                )?;
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
            Setup::LabelDp {
                tasks,
                training,
                train,
                test,
            } => {
                let mut metrics = Vec::new();
                for &task in tasks {
                    let cfg = LabelDpConfig {
                        task,
                        mechanism: LabelMechanism::Laplace,
                        postprocess: None,
                        epsilon: job.epsilon.unwrap_or(NOISE_FREE_LABEL_EPSILON),
                        stages: None,
                        prior_temperature: None,
                        top_k_rule: None,
                        training: training.clone(),
                    };
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

/// The DP-SGD recipe of a sweep: the data set's preset where one exists, else the small-table
/// MLP ([`dpsgd::tabular_recipe`]) on features scaled from their public ranges (`--bounds`,
/// else [`public_normalization`]); command-line training flags override it.
fn recipe_for(a: &SweepArgs, data: &Dataset) -> CliResult<TrainConfig> {
    let base = match dpsgd::presets()
        .into_iter()
        .find(|p| p.dataset == a.dataset.name())
    {
        Some(p) => p.config,
        None => {
            let normalize = match public_ranges(&a.dataset, data, a.bounds.as_deref())? {
                Some(r) if a.bounds.is_some() => dpsgd::Normalization::feature_ranges(&r),
                _ => public_normalization(&a.dataset, data),
            };
            TrainConfig {
                normalize,
                ..dpsgd::tabular_recipe()
            }
        }
    };
    a.training.apply(base)
}

/// Run `dpml sweep`.
pub fn run(a: &SweepArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let mut rng = a.seed.rng()?;
    let (setup, split_key) = Setup::new(a, data_dir, a.split.key(&mut rng))?;
    let grid = std::iter::once(None).chain(a.epsilons.iter().copied().map(Some));
    let jobs: Vec<(Job, DpRng)> = grid
        .flat_map(|epsilon| (0..a.repeats).map(move |repeat| Job { epsilon, repeat }))
        .map(|job| (job, rng.fork()))
        .collect();
    let bar = out.progress(jobs.len() as u64, "sweep");
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<Vec<_>>());
    let results = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while let Some((i, (job, mut job_rng))) =
                    queue.lock().ok().and_then(|mut q| q.pop())
                {
                    let r = setup.run(job, &mut job_rng);
                    if let Ok(mut all) = results.lock() {
                        all.push((i, job, r));
                    }
                    bar.inc(1);
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut runs = results
        .into_inner()
        .map_err(|_| CliError::internal("a sweep worker panicked"))?;
    runs.sort_by_key(|r| r.0);
    let mut rows = Vec::new();
    for (_, job, r) in runs {
        for (metric, fold, value) in r? {
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
    let charts = charts(a, &summary);
    let (png, svg) = plot::write(&charts, &a.out, "plot")?;
    out.emit(&json!({
        "experiment": a.experiment.name(),
        "dataset": a.dataset.name(),
        "epsilons": a.epsilons,
        "repeats": a.repeats,
        "folds": a.folds,
        "runs": rows.len(),
        "split_key": split_key.map(|k| k.to_string()),
        "summary": summary.iter().map(|s| json!({"epsilon": s.epsilon, "metric": s.metric, "mean": s.mean, "std": s.std, "n": s.n})).collect::<Vec<_>>(),
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

/// One panel per metric: ε on a log axis, mean ± std, the baseline as a dashed line.
fn charts(a: &SweepArgs, summary: &[Summary]) -> Vec<Chart> {
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
    let (lo, hi) = a
        .epsilons
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &e| (l.min(e), h.max(e)));
    metrics
        .into_iter()
        .map(|metric| {
            let private: Vec<&Summary> = summary
                .iter()
                .filter(|s| s.metric == metric && s.epsilon.is_some())
                .collect();
            let runs = match a.folds {
                Some(k) => format!("{} runs x {k} folds per epsilon", a.repeats),
                None => format!("{} runs per epsilon", a.repeats),
            };
            let mut series = vec![Series {
                name: format!("{} ({runs})", a.dataset.name()),
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
                    baseline_name,
                    vec![(lo, b.mean), (hi, b.mean)],
                    Style::Dashed,
                ));
            }
            Chart {
                title: format!(
                    "{} on {}: {metric} against epsilon",
                    a.experiment.name(),
                    a.dataset.name()
                ),
                x_label: "epsilon (log scale)".into(),
                y_label: metric.replace('_', " "),
                log_x: true,
                log_y: metric.contains("mse"),
                series,
            }
        })
        .collect()
}
