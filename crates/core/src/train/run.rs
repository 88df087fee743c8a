//! One training run: recipe, split, normalisation, optional local perturbation of the inputs,
//! DP-SGD (checkpointed, on the caller's processes), the saved model and log, and the release.

use std::io::Write;
use std::path::{Path, PathBuf};

use dpml_data::{Source, SplitBasis};
use dpml_learn::dpsgd::{self, Collective, EpochLog, Privacy, Task, TrainConfig, TrainOutcome};
use dpml_learn::model_facts::{Guarantee, SplitFacts};
use dpml_learn::perturbation::{InputBudget, InputMechanism, perturb_dataset_in};
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

use super::charging;
use super::checkpoint::{self, CheckpointOptions};
use super::fit::{RunContext, finish};
use super::recipe::{RecipeOptions, fit_batch_to_data, private_needs, recipe};
use super::split::{Loaded, SplitOptions, load_split, public_normalization};
use crate::budget::{self, Ledger};
use crate::error::{Error, Result};
use crate::ledger_json;
use crate::observe::{Event, Observer};
use crate::output_path::check_writable;
use crate::privacy_model;
use crate::schema::{Declarations, clamp_diagnostics};

/// Local DP on the features: every feature of every training record perturbed once.
#[derive(Debug, Clone)]
pub struct InputPerturbationOptions {
    /// `laplace` or `gaussian`.
    pub mechanism: String,
    /// ε of each feature's perturbation.
    pub epsilon: f64,
    /// δ of each feature's Gaussian perturbation.
    pub delta: f64,
}

/// What to train, on what, and what to write.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// The data source (else the preset's).
    pub dataset: Option<Source>,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// A named recipe.
    pub preset: Option<String>,
    /// Overrides of the recipe.
    pub recipe: RecipeOptions,
    /// Classification or regression of the label's value.
    pub task: Task,
    /// How the test set is cut.
    pub split: SplitOptions,
    /// What is declared about the data.
    pub declarations: Declarations,
    /// K-fold cross-validation over all records instead of one run.
    pub folds: Option<usize>,
    /// Save the trained model here.
    pub save_model: Option<PathBuf>,
    /// Write one CSV row per epoch here.
    pub log: Option<PathBuf>,
    /// Local DP on the inputs before training.
    pub input_perturbation: Option<InputPerturbationOptions>,
    /// Checkpointing.
    pub checkpoint: CheckpointOptions,
}

impl TrainOptions {
    /// Options for `dataset` with `recipe`'s overrides and nothing else (the source's default
    /// recipe, a keyed split of 20 % when the source has no test split).
    pub fn new(dataset: Source, recipe: RecipeOptions) -> Self {
        Self {
            dataset: Some(dataset),
            label_column: None,
            data_dir: None,
            preset: None,
            recipe,
            task: Task::Classification,
            split: SplitOptions {
                test_fraction: 0.2,
                key: None,
            },
            declarations: Declarations::default(),
            folds: None,
            save_model: None,
            log: None,
            input_perturbation: None,
            checkpoint: CheckpointOptions::default(),
        }
    }
}

/// How a training workflow ended.
#[derive(Debug, Clone)]
pub enum TrainEnd {
    /// The release: the model's (or the folds') guarantee at top level, un-noised figures
    /// under [`privacy_model::DIAGNOSTICS_KEY`].
    Released(Value),
    /// Stopped early with a checkpoint saved; nothing is released.
    Stopped {
        /// Steps done.
        step: u64,
        /// Steps of the whole run.
        steps: u64,
        /// Where the checkpoint is.
        checkpoint: Option<PathBuf>,
    },
}

/// Trains as `o` says on the processes of `comm` (the root, rank 0, alone writes files),
/// drawing the split, initialisation and noise from `rng` (every process's the same). With a
/// `ledger`, the run's cost is checked before it trains and recorded (by the root) before the
/// model, the log or the release is written; a checkpointed run is charged once, when its first
/// checkpoint is written (see the `charging` module).
///
/// # Errors
/// Usage errors for a bad recipe, missing declarations, data that do not load or do not fit
/// the model; runtime errors for checkpoints and files that cannot be written.
pub fn train(
    o: &TrainOptions,
    rng: &mut DpRng,
    comm: &dyn Collective,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<TrainEnd> {
    let (source, cfg) = recipe(o.dataset.as_ref(), o.preset.as_deref(), &o.recipe, o.task)?;
    cfg.validate()?;
    let mut outputs: Vec<(&str, std::path::PathBuf)> = Vec::new();
    if let Some(path) = &o.save_model {
        check_writable("--save-model", path)?;
        outputs.push(("--save-model", path.clone()));
    }
    if let Some(path) = &o.log {
        check_writable("--log", path)?;
        outputs.push(("--log", path.clone()));
    }
    // The run saves its state where --checkpoint says, or back where it resumes from.
    let saves_to = o
        .checkpoint
        .checkpoint
        .as_ref()
        .or(o.checkpoint.resume.as_ref());
    if let Some(dir) = saves_to {
        use dpml_learn::dpsgd::checkpoint::FILE;
        let files = [FILE.to_string(), format!("{FILE}.tmp")];
        let flag = match &o.checkpoint.checkpoint {
            Some(_) => "--checkpoint",
            None => "--resume",
        };
        crate::output_path::check_folder(flag, dir, &[&files[0], &files[1]])?;
        outputs.extend(files.iter().map(|f| ("--checkpoint", dir.join(f))));
    }
    let outputs: Vec<(&str, &std::path::Path)> =
        outputs.iter().map(|(f, p)| (*f, p.as_path())).collect();
    crate::output_path::check_distinct(&outputs)?;
    if let Some(k) = o.folds {
        if o.checkpoint.any() {
            return Err(Error::usage(format!(
                "--folds {k} cannot be checkpointed: drop --checkpoint/--resume"
            )));
        }
        return super::crossval::cross_validate(o, &source, &cfg, k, rng, observer, ledger)
            .map(TrainEnd::Released);
    }
    let resumed = o.checkpoint.resumed()?;
    let checkpoint_plan = o.checkpoint.plan()?;
    // The key is drawn either way, so a seeded resumed run consumes its generator as the
    // original did; a resumed run holds out the records its checkpoint's run held out.
    let drawn = o.split.key(rng);
    let key = match resumed.as_ref().map(checkpoint::split_key).transpose()? {
        Some(Some(k)) => k,
        _ => drawn,
    };
    let opts = o
        .declarations
        .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
    let Loaded {
        mut train,
        test,
        schema,
        split_key,
        clamped,
    } = load_split(
        &source,
        &opts,
        private_needs(&cfg, o.task, o.input_perturbation.is_some()),
        o.split.test_fraction,
        Some(key),
        split_basis(o, &cfg),
    )?;
    let mut cfg = normalized(o, &source, &schema, &train, &cfg)?;
    let notes: Vec<String> = fit_batch_to_data(&mut cfg, &o.recipe, train.n)
        .into_iter()
        .collect();
    let perturbation = match &o.input_perturbation {
        Some(p) => {
            let mechanism = match p.mechanism.as_str() {
                "laplace" => InputMechanism::Laplace,
                "gaussian" => InputMechanism::Gaussian { delta: p.delta },
                other => {
                    return Err(Error::usage(format!(
                        "unknown --input-perturbation {other:?}; known: laplace, gaussian"
                    )));
                }
            };
            // Required when loading: input perturbation takes its sensitivities from the bounds.
            let ranges = schema.require_bounds(&train.name, train.n_features())?;
            Some(perturb_dataset_in(
                &mut train,
                &ranges,
                mechanism,
                InputBudget::PerFeature(p.epsilon),
                rng,
            )?)
        }
        None => None,
    };
    let charges = match ledger {
        Some(_) => Some(charging::run_charges(
            "train",
            &source.name(),
            &cfg,
            train.n,
            resumed.as_ref(),
            perturbation.as_ref(),
        )?),
        None => None,
    };
    let checkpointed = checkpoint_plan.is_some() || resumed.is_some();
    let run_charge = if checkpointed {
        Some(charging::RunCharge::start(
            ledger,
            resumed.as_ref(),
            charges.clone(),
        )?)
    } else {
        if let Some((first, _)) = &charges {
            budget::check(ledger, first)?;
        }
        None
    };
    let before_save =
        |ck: &mut dpml_learn::dpsgd::Checkpoint| -> dpml_learn::dpsgd::error::Result<()> {
            let Some(rc) = &run_charge else { return Ok(()) };
            rc.before_save(ck).map_err(|e| {
                let message = e.to_string();
                *rc.failure.borrow_mut() = Some(e);
                dpml_learn::dpsgd::DpSgdError::Runtime(message)
            })
        };
    let run = dpsgd::Run {
        task: o.task,
        comm,
        checkpoint: checkpoint_plan.clone(),
        resume: resumed,
        stop_after: o.checkpoint.stop_after_steps,
        context: checkpoint::context(split_key, o.checkpoint.seed),
        before_save: Some(&before_save),
    };
    let trained = train_observed(&run, &cfg, &train, Some(&test), rng, observer);
    // A ledger's refusal while saving comes back as itself, not as the training error.
    if let Some(e) = run_charge
        .as_ref()
        .and_then(|rc| rc.failure.borrow_mut().take())
    {
        return Err(e);
    }
    let outcome = match trained? {
        dpsgd::RunEnd::Finished(o) => *o,
        dpsgd::RunEnd::Stopped { step, steps } => {
            return Ok(TrainEnd::Stopped {
                step,
                steps,
                checkpoint: checkpoint_plan.map(|p| p.dir),
            });
        }
    };
    let ctx = RunContext {
        dataset: source.name(),
        dataset_label: privacy_model::dataset_label(&source),
        preset: o.preset.as_deref(),
        schema: &schema,
        split: split_key.map(|k| SplitFacts {
            key: k.to_string(),
            test_fraction: o.split.test_fraction,
        }),
        test_size: Some(test.n),
        notes,
    };
    let mut fitted = finish(outcome, &cfg, o.task, &train, perturbation.as_ref(), &ctx)?;
    privacy_model::add_diagnostics(
        &mut fitted.release,
        clamp_diagnostics(&clamped, &train.feature_names, train.n + test.n),
    );
    // Only the root of a job of several processes charges and writes files; the charge is
    // recorded before anything is written.
    if comm.rank() == 0 {
        let balance = match (&run_charge, &charges) {
            (Some(rc), _) => rc.before_release()?,
            (None, Some((first, _))) => budget::charge(ledger, first)?,
            (None, None) => None,
        };
        if let Some(b) = balance {
            fitted.release["ledger"] = ledger_json::balance(&b);
        }
        if let Some(path) = &o.save_model {
            fitted.save(path)?;
            fitted.release["model_file"] = json!(path);
        }
        if let Some(path) = &o.log {
            write_log(path, &fitted.epoch_log)?;
        }
    }
    Ok(TrainEnd::Released(fitted.release))
}

/// What the run's split hashes: the guarantee's own basis. Local DP on the features alone
/// (no DP-SGD) protects a change of one record's features, so it hashes positions; DP-SGD,
/// with or without input perturbation, states its ε for add/remove of whole records.
fn split_basis(o: &TrainOptions, cfg: &TrainConfig) -> SplitBasis {
    let guarantee = match (&o.input_perturbation, &cfg.privacy) {
        (Some(_), Privacy::NonPrivate) => Guarantee::InputPerturbation,
        _ => Guarantee::DpSgd,
    };
    guarantee.split_basis()
}

/// `cfg` with the run's public normalisation ([`public_normalization`]), unless a preset
/// fixed one and no bounds are declared.
pub(super) fn normalized(
    o: &TrainOptions,
    source: &Source,
    schema: &dpml_data::Schema,
    data: &dpml_data::Dataset,
    cfg: &TrainConfig,
) -> Result<TrainConfig> {
    with_public_normalization(o.preset.as_deref(), source, schema, data, cfg)
}

/// `cfg` with the public normalisation of `source` ([`public_normalization`]), unless `preset`
/// fixed one and no bounds are declared.
///
/// # Errors
/// As [`public_normalization`].
pub(crate) fn with_public_normalization(
    preset: Option<&str>,
    source: &Source,
    schema: &dpml_data::Schema,
    data: &dpml_data::Dataset,
    cfg: &TrainConfig,
) -> Result<TrainConfig> {
    let mut cfg = cfg.clone();
    if preset.is_none() || schema.bounds_provenance == Some(dpml_data::Provenance::Declared) {
        cfg.normalize = public_normalization(source, schema, data)?;
    }
    Ok(cfg)
}

/// Trains `cfg` for `task` on this process alone, reporting to `observer`.
///
/// # Errors
/// As [`dpsgd::train_run`].
pub fn train_task_observed(
    task: Task,
    cfg: &TrainConfig,
    train: &dpml_data::Dataset,
    test: Option<&dpml_data::Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
) -> Result<TrainOutcome> {
    let run = dpsgd::Run {
        task,
        ..dpsgd::Run::default()
    };
    match train_observed(&run, cfg, train, test, rng, observer)? {
        dpsgd::RunEnd::Finished(o) => Ok(*o),
        dpsgd::RunEnd::Stopped { .. } => Err(Error::internal(
            "a run without --stop-after-steps stopped early",
        )),
    }
}

/// [`dpsgd::train_run`], its progress (and that of a model's fixed leading layers, which map
/// every record once before the first step) reported to `observer` between
/// [`Event::RunStarted`] and [`Event::RunFinished`].
///
/// # Errors
/// As [`dpsgd::train_run`].
pub fn train_observed(
    run: &dpsgd::Run<'_>,
    cfg: &TrainConfig,
    train: &dpml_data::Dataset,
    test: Option<&dpml_data::Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
) -> Result<dpsgd::RunEnd> {
    observer.observe(Event::RunStarted);
    // Both closures report to the one observer; they never run at the same time.
    let observer = std::cell::RefCell::new(observer);
    let end = dpsgd::train_run(
        run,
        cfg,
        train,
        test,
        rng,
        &mut |p| observer.borrow_mut().observe(Event::Training(p)),
        &mut |p| observer.borrow_mut().observe(Event::Prefix(p)),
    )?;
    observer.into_inner().observe(Event::RunFinished);
    Ok(end)
}

/// Writes one CSV row per epoch to `path`. The columns computed from private data without
/// noise (losses, accuracies) are named `diagnostic_…`, so that the file says what they are
/// and still reads as a plain table (no comment line for a reader to skip).
///
/// # Errors
/// A usage error naming the file when it cannot be written.
pub fn write_log(path: &Path, log: &[EpochLog]) -> Result<()> {
    let err = |e: std::io::Error| Error::usage(format!("writing {}: {e}", path.display()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    writeln!(f, "{}", privacy_model::CSV_LOG_HEADER).map_err(err)?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
    for e in log {
        writeln!(
            f,
            "{},{},{},{},{},{},{}",
            e.epoch,
            e.steps,
            e.train_loss,
            e.train_accuracy,
            opt(e.test_accuracy),
            opt(e.test_loss),
            opt(e.epsilon)
        )
        .map_err(err)?;
    }
    f.flush().map_err(err)
}
