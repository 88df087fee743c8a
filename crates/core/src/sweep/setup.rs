//! What each experiment needs, loaded once, and one run of it.

use std::sync::Mutex;

use dpml_data::{Dataset, Provenance, Schema, SplitBasis, SplitKey};
use dpml_learn::crossval::{epsilon_all_folds, k_fold};
use dpml_learn::dpsgd::{self, Privacy, TrainConfig};
use dpml_learn::kmeans::{self, Algorithm, KMeansParams};
use dpml_learn::label_dp::{self, LabelDpConfig, LabelMechanism, Task};
use dpml_learn::model_facts::Guarantee;
use dpml_learn::perturbation::{
    InputBudget, InputMechanism, OutputPerturbation, perturb_dataset_in, softmax_rows,
};
use dpml_mechanisms::{DpRng, PrivacyEvent};
use serde_json::json;

use super::{DP_SGD_MSE, Experiment, Job, LABEL_DP_MSE, Metrics, SweepOptions};
use crate::budget::{Charge, Neighbouring};
use crate::error::{Error, Result};
use crate::kmeans::declared_bounds;
use crate::schema::{Needs, require_declared};
use crate::train::{load_all, load_split, public_normalization, task_recipe};

/// ε standing in for "no label noise" in the label-DP baseline (Laplace scale 2e-9 on a
/// one-hot label): the labels are used as they are, up to rounding.
const NOISE_FREE_LABEL_EPSILON: f64 = 1e9;

/// What each experiment needs, loaded once. The fields are what the runs share: the recipe
/// (`base`, before each run's privacy is set), the records, and each experiment's own.
#[allow(missing_docs)]
pub enum Setup {
    /// DP-SGD on a train/test split.
    DpSgd {
        base: TrainConfig,
        train: Dataset,
        test: Dataset,
    },
    /// DP-SGD cross-validated over every record.
    CrossValidated {
        base: TrainConfig,
        all: Dataset,
        folds: usize,
        key: SplitKey,
        /// Each run's fold events by target ε, for the ε of releasing all K models.
        fold_events: Mutex<Vec<(f64, Vec<Option<PrivacyEvent>>)>>,
    },
    /// DPLloyd on every record.
    Kmeans { params: KMeansParams, data: Dataset },
    /// One non-private model's test probabilities, noised per run.
    Output {
        probs: Vec<f64>,
        classes: usize,
        clean_accuracy: f64,
        test: Dataset,
    },
    /// Locally perturbed inputs, non-private training.
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
    /// Laplace label DP for each task.
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
    ///
    /// # Errors
    /// Usage errors for folds given to another experiment than dp-sgd, data that do not load,
    /// missing declarations, or a recipe that does not fit the data.
    pub fn new(a: &SweepOptions, key: SplitKey) -> Result<(Self, Option<SplitKey>)> {
        let opts = a
            .declarations
            .load_options(a.data_dir.as_deref(), a.label_column.as_deref())?;
        // Each experiment's split hashes what its relation leaves fixed (`Guarantee::split_basis`).
        let split = |needs: Needs, guarantee: Guarantee| {
            let basis = guarantee.split_basis();
            let l = load_split(
                &a.dataset,
                &opts,
                needs,
                a.split.test_fraction,
                Some(key),
                basis,
            )?;
            Result::Ok((l.train, l.test, l.schema, l.split_key))
        };
        if let (Some(k), false) = (a.folds, a.experiment == Experiment::DpSgd) {
            return Err(Error::usage(format!(
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
            Experiment::Mia => Err(Error::internal(
                "the mia sweep is planned by sweep::mia::plan, not Setup::new",
            )),
            Experiment::DpSgd if a.folds.is_some() => {
                let (all, schema) = load_all(&a.dataset, &opts)?;
                require_declared(&schema, &all, private_training)?;
                let base = recipe_for(a, &schema, &all)?;
                let folds = a.folds.unwrap_or(0);
                // The folds' count checked before any run starts (2 ≤ K ≤ N, no fold empty):
                // the runs would each refuse it after the progress lines of the others.
                dpml_data::fold_assignments(&all, folds, &key, SplitBasis::Record)?;
                Ok((
                    Setup::CrossValidated {
                        base,
                        all,
                        folds,
                        key,
                        fold_events: Mutex::new(Vec::new()),
                    },
                    Some(key),
                ))
            }
            Experiment::DpSgd => {
                let (train, test, schema, used) = split(private_training, Guarantee::DpSgd)?;
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
                // DP-SGD (add/remove) and label DP (one label changes) on one split: the
                // features are fixed under both relations.
                let (train, test, schema, used) = split(needs, Guarantee::LabelDp)?;
                let base =
                    task_recipe(Task::Regression, &a.recipe, recipe_for(a, &schema, &train)?);
                let normalize = public_normalization(&a.dataset, &schema, &train)?;
                let mut label_training = a
                    .recipe
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
                let (train, test, schema, used) = split(needs, Guarantee::DpSgd)?;
                let mut cfg = recipe_for(a, &schema, &train)?;
                cfg.privacy = Privacy::NonPrivate;
                let mut trained = dpsgd::train(
                    &cfg,
                    &train,
                    Some(&test),
                    &mut DpRng::new(a.seed).map_err(Error::internal)?,
                    &mut |_| {},
                )?;
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
                let (train, test, schema, used) = split(needs, Guarantee::InputPerturbation)?;
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
                let k = match a.k {
                    Some(k) => k,
                    // k from the classes only where they are declared, never from the labels
                    // found in the private records.
                    None => {
                        schema
                            .require_classes(&data.name)
                            .map_err(|e| Error::usage(format!("--k not given: {e}")))?;
                        data.n_classes
                    }
                };
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
                let (train, test, schema, used) = split(needs, Guarantee::LabelDp)?;
                let normalize = public_normalization(&a.dataset, &schema, &train)?;
                let base = label_dp::default_training(normalize, train.n);
                let mut training = a.recipe.apply(base)?;
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

    /// One run of the grid.
    ///
    /// # Errors
    /// The training's or release's errors.
    pub fn run(&self, job: Job, rng: &mut DpRng) -> Result<Metrics> {
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
                let mut events = Vec::new();
                let cv = k_fold::<Error>(
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
                    .map_err(Error::usage)?
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
                        .map_err(Error::usage)?
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

impl Setup {
    /// The neighbouring relation the sweep's runs are private under; None when they differ
    /// (DP-SGD over whole records beside label DP), so that no one ledger can add them up.
    pub fn neighbouring(&self) -> Option<Neighbouring> {
        match self {
            Setup::DpSgd { .. }
            | Setup::CrossValidated { .. }
            | Setup::Kmeans { .. }
            | Setup::Output { .. } => Some(Neighbouring::Record),
            Setup::Input { .. } => Some(Neighbouring::Features),
            Setup::LabelDp { .. } => Some(Neighbouring::Label),
            Setup::Regression { .. } => None,
        }
    }

    /// What the sweep's private runs cost together, for a ledger: each run is (ε, δ)-DP at its
    /// grid point by construction (DP-SGD calibrated to ε at the recipe's δ; label DP, DPLloyd
    /// and input perturbation ε-DP; output perturbation ε per query, for every test record),
    /// and the sweep releases all of them. The non-private baseline trains without noise: its
    /// figure is a diagnostic like every sweep figure, and it has no finite ε to charge.
    pub fn cost(&self, o: &SweepOptions) -> Charge {
        let mut events = Vec::new();
        for &e in &o.epsilons {
            let pure = PrivacyEvent::EpsilonDelta {
                epsilon: e,
                delta: 0.0,
            };
            let run: Vec<PrivacyEvent> = match self {
                Setup::DpSgd { base, .. } => vec![PrivacyEvent::EpsilonDelta {
                    epsilon: e,
                    delta: base.delta,
                }],
                Setup::CrossValidated { base, folds, .. } => vec![
                    PrivacyEvent::EpsilonDelta {
                        epsilon: e,
                        delta: base.delta,
                    }
                    .repeated(*folds as u64),
                ],
                Setup::Regression { base, .. } => vec![
                    PrivacyEvent::EpsilonDelta {
                        epsilon: e,
                        delta: base.delta,
                    },
                    pure,
                ],
                Setup::Output { test, .. } => vec![pure.repeated(test.n as u64)],
                Setup::LabelDp { tasks, .. } => vec![pure; tasks.len()],
                Setup::Kmeans { .. } | Setup::Input { .. } => vec![pure],
            };
            for _ in 0..o.repeats {
                events.extend(run.iter().cloned());
            }
        }
        let (epsilon, delta) = events.iter().fold((0.0, 0.0), |(e, d), ev| {
            let (ei, di) = stated(ev);
            (e + ei, d + di)
        });
        Charge::of(
            "sweep",
            o.dataset.name(),
            PrivacyEvent::Composed { events },
            epsilon,
            delta,
        )
        .labelled(format!(
            "sweep {} of {} private runs",
            o.experiment.name(),
            o.epsilons.len() as u64 * o.repeats
        ))
        // A sweep of mixed relations is not charged (see `neighbouring`).
        .under(self.neighbouring().unwrap_or_default())
    }
}

/// The (ε, δ) an event of (ε, δ) steps states by itself (basic composition).
fn stated(event: &PrivacyEvent) -> (f64, f64) {
    match event {
        PrivacyEvent::EpsilonDelta { epsilon, delta } => (*epsilon, *delta),
        PrivacyEvent::SelfComposed { event, count } => {
            let (e, d) = stated(event);
            (e * *count as f64, d * *count as f64)
        }
        _ => (0.0, 0.0),
    }
}

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
    /// With `--folds`: for each target ε of the grid (the ε of each fold's model), the ε of
    /// releasing all K models of one run ([`epsilon_all_folds`]); `None` without folds. Every
    /// run at one ε has the same folds and recipe, hence the same events: one run's serve.
    ///
    /// # Errors
    /// An internal error if a worker panicked; the accountant's errors.
    pub fn epsilon_all_folds(&self, epsilons: &[f64]) -> Result<Option<Vec<serde_json::Value>>> {
        let Setup::CrossValidated {
            base, fold_events, ..
        } = self
        else {
            return Ok(None);
        };
        let runs = fold_events
            .lock()
            .map_err(|_| Error::internal("a sweep worker panicked"))?;
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
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}

/// The DP-SGD recipe of a sweep: the data set's preset where one exists, else the small-table
/// MLP ([`dpsgd::tabular_recipe`]), normalised by [`public_normalization`] (declared bounds
/// replace a preset's normalisation); the recipe overrides apply over it.
pub(super) fn recipe_for(a: &SweepOptions, schema: &Schema, data: &Dataset) -> Result<TrainConfig> {
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
    a.recipe.apply(base)
}

/// The sweep's recipe at one grid point: DP-SGD calibrated to ε, or non-private (the baseline).
fn recipe_at(base: &TrainConfig, epsilon: Option<f64>) -> TrainConfig {
    let mut cfg = base.clone();
    cfg.privacy = epsilon.map_or(Privacy::NonPrivate, Privacy::TargetEpsilon);
    cfg
}
