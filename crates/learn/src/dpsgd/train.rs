//! The training loop: [`train`] validates, plans the privacy (calibrating σ first for a target
//! ε), builds the model, maps the records once through the model's fixed leading layers when
//! it has some worth precomputing (e.g. a scattering transform), runs T DP-SGD steps on the
//! rest with per-epoch logs and an observer for progress display, evaluates, and returns the
//! whole model with its report and its privacy cost as a [`PrivacyEvent`].

use std::time::Instant;

use dpml_accounting::BoundKind;
use dpml_data::Dataset;
use dpml_mechanisms::{DpRng, PrivacyEvent};
use dpml_nn::{ClipConfig, Sequential};
use serde::{Deserialize, Deserializer, Serialize};

use super::accounting::{PrivacyPlan, accountant};
use super::batch::{map_through_prefix, prefix_to_precompute};
use super::checkpoint::{Checkpoint, CheckpointPlan, RunIdentity, from_bits, to_bits};
use super::collective::{
    Collective, Fact, Shown, Solo, broadcast_params, check_facts_agree, check_models_agree, digest,
};
use super::config::TrainConfig;
use super::ema::Ema;
use super::error::{DpSgdError, Result};
use super::eval::{Eval, evaluate_for};
use super::noise::Noise;
use super::normalize::InputTransform;
use super::objective::{Objective, Task};
use super::sampler::{PoissonSampler, SamplingKey};
use super::step::Stepper;
use super::step_hook::{StepContext, StepHook};

/// One epoch's summary. Training loss and accuracy are measured on the Poisson batches before
/// each update: they are computed from private data WITHOUT noise, so they are diagnostics for
/// the operator, not private releases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochLog {
    /// Epoch number, from 1.
    pub epoch: usize,
    /// Steps done so far.
    pub steps: u64,
    /// Mean per-sample loss over the epoch's batches.
    #[serde(deserialize_with = "nan_if_null")]
    pub train_loss: f64,
    /// Accuracy over the epoch's batches.
    #[serde(deserialize_with = "nan_if_null")]
    pub train_accuracy: f64,
    /// Test accuracy after the epoch (with averaged parameters if EMA is on), if a test set
    /// was given.
    pub test_accuracy: Option<f64>,
    /// Test loss after the epoch, if a test set was given.
    pub test_loss: Option<f64>,
    /// Regression: test MSE in the label's units after the epoch (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_mse: Option<f64>,
    /// ε spent so far (`None` when non-private).
    pub epsilon: Option<f64>,
}

/// JSON writes NaN (an epoch without records) as null; read it back as NaN.
fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// What the observer of [`train`] is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Training is about to start (σ is known: calibrated if a target ε was given).
    Started {
        /// Total steps T.
        steps: u64,
        /// Steps per epoch ⌈N/B⌉.
        steps_per_epoch: u64,
        /// The epochs the run logs (⌈E⌉ for E epochs: [`Progress::Epoch`] comes that often).
        epochs: u64,
        /// σ (`None` when non-private).
        noise_multiplier: Option<f64>,
        /// q = B/N.
        sampling_rate: f64,
    },
    /// A step finished.
    Step {
        /// Steps done, from 1.
        step: u64,
        /// Total steps T.
        steps: u64,
        /// Realised batch size.
        batch_size: usize,
        /// Mean loss on the batch before the update (NaN for an empty batch).
        loss: f64,
    },
    /// An epoch finished.
    Epoch(EpochLog),
}

/// Progress of mapping records through the model's fixed prefix before training (see
/// [`train_with_prefix_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixProgress {
    /// `"train"` or `"test"`.
    pub set: &'static str,
    /// Records done.
    pub done: usize,
    /// Records in the set.
    pub total: usize,
}

/// The report of a run. Field names are the `dpml train --json` contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainReport {
    /// "classification" or "regression".
    pub task: String,
    /// Regression: test mean squared error of the returned model in the label's units
    /// (absent for classification or without a test set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_mse: Option<f64>,
    /// Regression: test mean absolute error in the label's units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_mae: Option<f64>,
    /// Test accuracy of the returned model (`None` without a test set; regression: the share
    /// of test predictions within 0.5 of the label value).
    pub test_accuracy: Option<f64>,
    /// Accuracy of the returned model on the whole training set (not a private release).
    pub train_accuracy: f64,
    /// Test loss of the returned model (`None` without a test set).
    pub test_loss: Option<f64>,
    /// ε at `delta` from `accountant` (`None` when non-private).
    pub epsilon: Option<f64>,
    /// δ.
    pub delta: f64,
    /// "pld", "rdp" or "gdp".
    pub accountant: String,
    /// What kind of number `epsilon` is, in `dpml account`'s words: "upper_bound" (PLD, RDP)
    /// or "approximation" (GDP, whose CLT can underestimate ε); `None` when non-private.
    pub bounds: Option<BoundKind>,
    /// Why `epsilon` is not the named accountant's own number, when it is not (PLD below
    /// δ = 1e-12 reports the RDP bound); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accountant_note: Option<String>,
    /// σ relative to `sensitivity` (`None` when non-private).
    pub noise_multiplier: Option<f64>,
    /// q = B/N.
    pub sampling_rate: f64,
    /// Steps T.
    pub steps: u64,
    /// Epochs as configured.
    pub epochs: f64,
    /// Clipping norm C.
    pub max_grad_norm: f64,
    /// The L2 sensitivity σ refers to: C, or C + g√d with exact noise (`None` when
    /// non-private).
    pub sensitivity: Option<f64>,
    /// Whether the noise was exact discrete Gaussian.
    pub exact_noise: bool,
    /// Records processed per second in the training loop (evaluation and accounting excluded).
    pub samples_per_sec: f64,
    /// Wall-clock seconds of the whole call.
    pub wall_seconds: f64,
    /// Whether the random generator was user-seeded (outputs are then not secure releases).
    pub seeded: bool,
    /// Per-epoch logs.
    pub epoch_log: Vec<EpochLog>,
}

/// A trained model with everything needed to use and justify it.
#[derive(Debug)]
pub struct TrainOutcome {
    /// The model (averaged parameters if EMA was on).
    pub model: Sequential,
    /// The input transform the model expects (save it with [`super::save`]).
    pub input: InputTransform,
    /// The report.
    pub report: TrainReport,
    /// The privacy cost `dp_sgd(σ, q, T)`; `None` for a non-private run, which has no
    /// guarantee at all (ε = ∞), not a zero cost.
    pub event: Option<PrivacyEvent>,
}

/// Per-epoch accumulators.
#[derive(Default)]
struct EpochAcc {
    n: usize,
    loss: f64,
    correct: usize,
}

/// Trains `cfg.model` on `train` with DP-SGD (or without privacy), evaluating on `test` after
/// every epoch, calling `observer` after every step and epoch.
///
/// # Privacy
/// T = ⌈E·N/B⌉ steps of the Poisson-subsampled Gaussian mechanism with rate q = B/N and noise
/// multiplier σ on the clipped gradient sum: the event `PrivacyEvent::dp_sgd(σ, q, T)` (see
/// [`super::noise`] for the mechanism and the exact-noise sensitivity adjustment). With a
/// target ε, σ is calibrated before training so that the reported ε ≤ target. Initialisation,
/// evaluation on `test`, EMA and the optimizer are post-processing or use no private data;
/// the training-set accuracy and losses in the report and logs are NOT private releases.
///
/// # Citations
/// Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016; Opacus (Yousefpour et
/// al. 2021) for the conventions (expected batch size, noise σ·C on the sum).
///
/// # Errors
/// [`DpSgdError::InvalidConfig`] / [`DpSgdError::Nn`] for a bad configuration (see
/// [`TrainConfig::validate`]), [`DpSgdError::Data`] for data that do not fit it,
/// [`DpSgdError::Accounting`] for an unreachable target ε, all before training starts.
pub fn train(
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(&Progress),
) -> Result<TrainOutcome> {
    train_with_prefix_progress(cfg, train, test, rng, observer, &mut |_| {})
}

/// As [`train`], also reporting progress to `prefix_observer` while the records are mapped
/// once through the model's fixed leading layers (models such as `scatter-cnn` whose first
/// layers have no parameters and do real work). Training then runs only the remaining layers;
/// the returned model is the whole architecture (it takes raw records).
///
/// # Privacy
/// As [`train`]. The precomputed layers are fixed before seeing any data (no parameters, no
/// data-dependent state) and map each record alone, so every mapped record depends only on
/// its own raw record: the DP-SGD analysis applies to the mapped data set unchanged (one
/// record added or removed there is one record added or removed in the raw data), and the
/// precomputation costs no privacy.
///
/// # Citations
/// Tramèr & Boneh, *Differentially Private Learning Needs Better Features (or Much More
/// Data)*, ICLR 2021 (DP-SGD on precomputed scattering features); as [`train`].
///
/// # Errors
/// As [`train`].
pub fn train_with_prefix_progress(
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(&Progress),
    prefix_observer: &mut dyn FnMut(&PrefixProgress),
) -> Result<TrainOutcome> {
    train_task(
        Task::Classification,
        cfg,
        train,
        test,
        rng,
        observer,
        prefix_observer,
    )
}

/// As [`train_with_prefix_progress`] for `task`: classification, or regression of the
/// label's value (its class index in the declared label range, see [`super::objective`]):
/// MSE on one output, test MSE and MAE in the label's units in the report.
///
/// # Privacy
/// As [`train`]: per-sample clipping bounds each record's influence on every step whatever
/// the loss, so the event `dp_sgd(σ, q, T)` and its ε are the same for both tasks.
///
/// # Errors
/// As [`train`]; [`DpSgdError::InvalidConfig`] for regression on a model without a final
/// Linear layer.
pub fn train_task(
    task: Task,
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(&Progress),
    prefix_observer: &mut dyn FnMut(&PrefixProgress),
) -> Result<TrainOutcome> {
    let run = Run {
        task,
        ..Run::default()
    };
    finished(train_run(
        &run,
        cfg,
        train,
        test,
        rng,
        observer,
        prefix_observer,
    )?)
}

/// As [`train`] (classification), calling `hook` around the noise of every private step: the
/// white-box view of an auditor ([`super::step_hook`]). One process, no checkpoints.
///
/// # Privacy
/// As [`train`] for the real records; see [`super::step_hook`] for what a hook may add.
///
/// # Errors
/// As [`train`].
pub fn train_hooked(
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(&Progress),
    hook: &mut dyn StepHook,
) -> Result<TrainOutcome> {
    finished(run_training(
        &Run::default(),
        cfg,
        train,
        test,
        rng,
        observer,
        &mut |_| {},
        Some(hook),
    )?)
}

/// The outcome of a run that was not asked to stop early.
fn finished(end: RunEnd) -> Result<TrainOutcome> {
    match end {
        RunEnd::Finished(out) => Ok(*out),
        RunEnd::Stopped { .. } => Err(DpSgdError::InvalidConfig(
            "internal check failed: a run without a stop step stopped".into(),
        )),
    }
}

/// How [`train_run`] runs: the task, the processes it runs on, checkpoints.
pub struct Run<'a> {
    /// Classification or regression.
    pub task: Task,
    /// The processes sharing the work ([`Solo`]: this one alone).
    pub comm: &'a dyn Collective,
    /// Save a checkpoint every so many steps (the root process writes it).
    pub checkpoint: Option<CheckpointPlan>,
    /// Continue the run this checkpoint saved.
    pub resume: Option<Checkpoint>,
    /// Save a checkpoint and stop once this many steps are done (if fewer than the run's).
    pub stop_after: Option<u64>,
    /// The caller's facts to keep in the checkpoints ([`Checkpoint::context`]).
    pub context: serde_json::Value,
    /// Called on the root process before each checkpoint is written (which it may amend: the
    /// caller's ledger records the checkpoint there); an error stops the run, nothing written.
    pub before_save: Option<&'a BeforeSave<'a>>,
}

/// What [`Run::before_save`] is.
pub type BeforeSave<'a> = dyn Fn(&mut Checkpoint) -> Result<()> + 'a;

impl Default for Run<'_> {
    fn default() -> Self {
        Self {
            task: Task::Classification,
            comm: &Solo,
            checkpoint: None,
            resume: None,
            stop_after: None,
            context: serde_json::Value::Null,
            before_save: None,
        }
    }
}

/// How a [`train_run`] ended.
#[derive(Debug)]
pub enum RunEnd {
    /// All steps done.
    Finished(Box<TrainOutcome>),
    /// Stopped at [`Run::stop_after`] with a checkpoint saved.
    Stopped {
        /// Steps done.
        step: u64,
        /// Steps of the whole run.
        steps: u64,
    },
}

/// As [`train_task`], on the processes of `run.comm` (data-parallel: each process computes
/// the clipped sum over its share of every Poisson batch; see [`super::collective`]), saving
/// checkpoints and resuming from one as `run` says.
///
/// # Privacy
/// As [`train`], and the same event `dp_sgd(σ, q, T)` whatever the number of processes and
/// however often the run was interrupted and resumed (see [`super::checkpoint`]). Every
/// process draws the same batch membership from the root's sampling key; only the root adds
/// noise.
///
/// # Errors
/// As [`train`]; [`DpSgdError::CheckpointMismatch`] for a checkpoint of another run;
/// [`DpSgdError::Runtime`] when a checkpoint cannot be written or the processes' models
/// differ.
pub fn train_run(
    run: &Run<'_>,
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(&Progress),
    prefix_observer: &mut dyn FnMut(&PrefixProgress),
) -> Result<RunEnd> {
    run_training(run, cfg, train, test, rng, observer, prefix_observer, None)
}

/// What every process of a data-parallel run must agree on before the first step: N, q, T,
/// σ, the recipe, and the data's schema (record shape, classes, feature names and range; not
/// the records, which each process may hold under its own path).
fn run_facts(cfg: &TrainConfig, plan: &PrivacyPlan, train: &Dataset) -> Vec<Fact<'static>> {
    let recipe = serde_json::to_vec(cfg).unwrap_or_default();
    let schema = format!(
        "{:?} {} {:?} {:?} {:?}",
        train.record_shape,
        train.n_classes,
        train.class_names,
        train.feature_names,
        train.feature_range
    );
    vec![
        ("training-set size N", train.n as u64, Shown::Count),
        ("sampling rate q", plan.sampling_rate.to_bits(), Shown::Real),
        ("step count T", plan.steps, Shown::Count),
        (
            "noise multiplier σ",
            plan.noise_multiplier.unwrap_or(0.0).to_bits(),
            Shown::Real,
        ),
        ("recipe", digest(&recipe), Shown::Digest),
        ("data schema", digest(schema.as_bytes()), Shown::Digest),
    ]
}

/// The body of [`train_run`] and [`train_hooked`].
#[allow(clippy::too_many_arguments)]
fn run_training(
    run: &Run<'_>,
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn FnMut(&Progress),
    prefix_observer: &mut dyn FnMut(&PrefixProgress),
    mut hook: Option<&mut dyn StepHook>,
) -> Result<RunEnd> {
    let started = Instant::now();
    let comm = run.comm;
    cfg.validate()?;
    let objective = Objective::new(run.task, train.n_classes);
    let spec = objective.shape_model(cfg.validate_data(train, test)?)?;
    let input = cfg.normalize.resolve(train)?;
    let plan = PrivacyPlan::new(cfg, train.n)?;
    let print = (run.checkpoint.is_some() || run.resume.is_some()).then(|| {
        RunIdentity::new(
            cfg,
            run.task,
            train,
            plan.noise_multiplier,
            plan.sampling_rate,
        )
    });
    if let (Some(ck), Some(id)) = (&run.resume, &print) {
        ck.check(id, &plan)?;
    }
    check_facts_agree(comm, &run_facts(cfg, &plan, train))?;
    let mut model = Sequential::new(spec, rng)?;
    if let Some(h) = hook.as_deref_mut() {
        h.initialise(&mut model);
    }
    // Processes seeded from the operating system start from the root's initialisation and
    // sample with the root's key.
    broadcast_params(&mut model, comm);
    let mut key = SamplingKey::from_rng(rng).to_words();
    comm.broadcast_u64(&mut key);
    let mut key = SamplingKey::from_words(key);
    let start = prefix_to_precompute(&model);
    let mut map = |set: &'static str, data: &Dataset| {
        map_through_prefix(&mut model, start, &input, data, &mut |done, total| {
            prefix_observer(&PrefixProgress { set, done, total })
        })
    };
    // With a precomputed prefix, training and evaluation read the mapped records (already
    // normalised) and enter the model at layer `start`.
    let (mapped_train, mapped_test) = if start > 0 {
        (
            Some(map("train", train)?),
            test.map(|t| map("test", t)).transpose()?,
        )
    } else {
        (None, None)
    };
    let train = mapped_train.as_ref().unwrap_or(train);
    let test = mapped_test.as_ref().or(test);
    let feed = if start > 0 {
        InputTransform::IDENTITY
    } else {
        input.clone()
    };
    let c = f64::from(cfg.max_grad_norm);
    let noise = Noise::new(
        plan.noise_multiplier,
        c,
        model.num_params(),
        cfg.exact_noise,
    )?;
    // The sensitivity the noise is calibrated to (exact noise adjusts it for its grid).
    let sensitivity = plan.noise_multiplier.map(|_| match &noise {
        Noise::Exact(g) => g.sensitivity(),
        _ => crate::f32_json::decimal(cfg.max_grad_norm),
    });
    let exact_noise = matches!(noise, Noise::Exact(_));
    let clip = match plan.noise_multiplier {
        None => None,
        Some(_) if cfg.per_layer_clipping => Some(ClipConfig::per_layer(cfg.max_grad_norm)?),
        Some(_) => Some(ClipConfig::flat(cfg.max_grad_norm)?),
    };
    let optimizer = cfg.optimizer.build(cfg.weight_decay)?;
    let mut ema = cfg.ema.map(|d| Ema::new(d, &model));
    let mut state = LoopState::default();
    if let Some(ck) = &run.resume {
        state = restore(ck, &mut model, ema.as_mut(), rng, &mut key)?;
    }
    let sampler = PoissonSampler::new(train.n, plan.sampling_rate, key)?;
    let mut stepper = Stepper::new(
        model,
        optimizer,
        sampler,
        noise,
        clip,
        cfg.physical_batch,
        feed.clone(),
    )
    .starting_at(start)
    .with_objective(objective);
    if let Some(ck) = &run.resume {
        stepper.optimizer_mut().set_state(dpml_nn::OptimizerState {
            updates: ck.optimizer_updates,
            buffers: ck
                .optimizer
                .iter()
                .map(|b| b.iter().map(|v| from_bits(v)).collect())
                .collect(),
        })?;
    }
    let schedule = cfg.lr_schedule.to_nn(plan.steps, plan.steps_per_epoch);
    let save = |stepper: &mut Stepper, ema: Option<&Ema>, state: &LoopState, rng: &DpRng| {
        let (Some(dir), Some(fp)) = (run.checkpoint.as_ref().map(|p| &p.dir), &print) else {
            return Ok(());
        };
        if !comm.is_root() {
            return Ok(());
        }
        let mut ck = Checkpoint::new(fp, plan.steps, run.context.clone());
        fill(&mut ck, stepper, ema, state, rng, key);
        if let Some(before) = run.before_save {
            before(&mut ck)?;
        }
        ck.save(dir)
    };

    observer(&Progress::Started {
        steps: plan.steps,
        steps_per_epoch: plan.steps_per_epoch,
        epochs: plan.epochs(),
        noise_multiplier: plan.noise_multiplier,
        sampling_rate: plan.sampling_rate,
    });
    for t in state.step..plan.steps {
        if run.stop_after == Some(t) {
            save(&mut stepper, ema.as_ref(), &state, rng)?;
            return Ok(RunEnd::Stopped {
                step: t,
                steps: plan.steps,
            });
        }
        let lr = schedule.lr(cfg.lr, usize::try_from(t).unwrap_or(usize::MAX));
        let tick = Instant::now();
        let stats = match hook.as_deref_mut() {
            Some(h) => {
                let ctx = StepContext {
                    step: t,
                    sampling_rate: plan.sampling_rate,
                    max_grad_norm: c,
                    // Hooks run on private steps only, where σ is set.
                    noise_multiplier: plan.noise_multiplier.unwrap_or(0.0),
                };
                stepper.step_hooked(train, lr, rng, t, ctx, h)?
            }
            None => stepper.step(train, lr, rng, t, comm)?,
        };
        if let Some(e) = ema.as_mut() {
            e.update(&mut stepper.model);
        }
        state.loop_seconds += tick.elapsed().as_secs_f64();
        state.samples += stats.batch;
        state.acc.n += stats.batch;
        state.acc.loss += stats.loss_sum;
        state.acc.correct += stats.correct;
        let done = t + 1;
        state.step = done;
        observer(&Progress::Step {
            step: done,
            steps: plan.steps,
            batch_size: stats.batch,
            loss: if stats.batch == 0 {
                f64::NAN
            } else {
                stats.loss_sum / stats.batch as f64
            },
        });
        if plan.ends_epoch(done) {
            check_models_agree(&stepper.model, comm)?;
            let test_eval = with_averaged(&mut stepper.model, ema.as_mut(), |m| {
                test.map(|d| evaluate_for(objective, m, start, &feed, d))
                    .transpose()
            })?;
            let log = EpochLog {
                epoch: state.epoch_log.len() + 1,
                steps: done,
                train_loss: ratio(state.acc.loss, state.acc.n),
                train_accuracy: ratio(state.acc.correct as f64, state.acc.n),
                test_accuracy: test_eval.as_ref().map(|e| e.accuracy),
                test_loss: test_eval.as_ref().map(|e| e.loss),
                test_mse: test_eval.as_ref().and_then(|e| e.mse),
                epsilon: plan.epsilon(cfg.accountant, done, cfg.delta)?,
            };
            observer(&Progress::Epoch(log.clone()));
            state.epoch_log.push(log);
            state.acc = EpochAcc::default();
        }
        // 0: every epoch.
        let every = run.checkpoint.as_ref().map_or(0, |p| match p.every {
            0 => plan.steps_per_epoch,
            n => n,
        });
        if every > 0 && done % every == 0 && done < plan.steps {
            save(&mut stepper, ema.as_ref(), &state, rng)?;
        }
    }

    let mut model = stepper.model;
    if let Some(e) = ema.as_mut() {
        e.swap(&mut model);
    }
    let test_eval: Option<Eval> = test
        .map(|d| evaluate_for(objective, &mut model, start, &feed, d))
        .transpose()?;
    let train_eval = evaluate_for(objective, &mut model, start, &feed, train)?;
    let accounted = plan.epsilon_with_note(cfg.accountant, plan.steps, cfg.delta)?;
    let (epsilon, accountant_note) = match accounted {
        Some((e, note)) => (Some(e), note),
        None => (None, None),
    };
    if let (Some(eps), super::config::Privacy::TargetEpsilon(target)) = (epsilon, cfg.privacy) {
        // Calibration guarantees this; fail closed rather than report an overspent budget.
        if eps > target {
            return Err(DpSgdError::InvalidConfig(format!(
                "internal check failed: epsilon {eps} exceeds the target {target}"
            )));
        }
    }
    let event = plan.event(plan.steps);
    let report = TrainReport {
        task: objective.task().name().into(),
        test_mse: test_eval.as_ref().and_then(|e| e.mse),
        test_mae: test_eval.as_ref().and_then(|e| e.mae),
        test_accuracy: test_eval.as_ref().map(|e| e.accuracy),
        train_accuracy: train_eval.accuracy,
        test_loss: test_eval.as_ref().map(|e| e.loss),
        epsilon,
        delta: cfg.delta,
        accountant: cfg.accountant.name().into(),
        bounds: epsilon.map(|_| accountant(cfg.accountant).bound()),
        accountant_note,
        noise_multiplier: plan.noise_multiplier,
        sampling_rate: plan.sampling_rate,
        steps: plan.steps,
        epochs: cfg.epochs,
        max_grad_norm: crate::f32_json::decimal(cfg.max_grad_norm),
        sensitivity,
        exact_noise,
        samples_per_sec: if state.loop_seconds > 0.0 {
            state.samples as f64 / state.loop_seconds
        } else {
            0.0
        },
        wall_seconds: started.elapsed().as_secs_f64(),
        seeded: rng.is_seeded(),
        epoch_log: state.epoch_log,
    };
    Ok(RunEnd::Finished(Box::new(TrainOutcome {
        model,
        input,
        report,
        event,
    })))
}

/// What the training loop carries from step to step besides the model and optimizer.
#[derive(Default)]
struct LoopState {
    /// Steps done.
    step: u64,
    loop_seconds: f64,
    samples: usize,
    acc: EpochAcc,
    epoch_log: Vec<EpochLog>,
}

/// The state `ck` saved, put back into `model`, `ema`, `rng` and `key`: a seeded run
/// continues its generator and sampling key; a run seeded from the operating system keeps the
/// fresh ones it drew (see [`super::checkpoint`]).
fn restore(
    ck: &Checkpoint,
    model: &mut Sequential,
    ema: Option<&mut Ema>,
    rng: &mut DpRng,
    key: &mut SamplingKey,
) -> Result<LoopState> {
    let mismatch = |what: &str| {
        DpSgdError::CheckpointMismatch(format!(
            "checkpoint_mismatch: the checkpoint's {what} do not fit this model"
        ))
    };
    let fits = ck.params.len() == model.params().len()
        && ck
            .params
            .iter()
            .zip(model.params())
            .all(|(a, p)| a.len() == p.value.len());
    if !fits {
        return Err(mismatch("parameters"));
    }
    model.for_each_param_mut(|k, p| p.value = from_bits(&ck.params[k]));
    match (ema, &ck.ema) {
        (Some(e), Some((updates, values))) => {
            if !e.restore(*updates, values.iter().map(|v| from_bits(v)).collect()) {
                return Err(mismatch("averaged parameters"));
            }
        }
        (None, None) => {}
        _ => return Err(mismatch("averaged parameters")),
    }
    if let Some(snap) = &ck.rng {
        *rng = DpRng::restore(snap);
    }
    if let Some(words) = ck.sampling_key {
        *key = SamplingKey::from_words(words);
    }
    let (n, loss, correct) = ck.acc;
    Ok(LoopState {
        step: ck.step,
        loop_seconds: ck.loop_seconds,
        samples: ck.samples,
        acc: EpochAcc {
            n,
            loss: f64::from_bits(loss),
            correct,
        },
        epoch_log: ck.epoch_log.clone(),
    })
}

/// Writes the loop's state into `ck`. The generator's position and the sampling key go in
/// only for a seeded run ([`DpRng::snapshot`] gives nothing otherwise).
fn fill(
    ck: &mut Checkpoint,
    stepper: &mut Stepper,
    ema: Option<&Ema>,
    state: &LoopState,
    rng: &DpRng,
    key: SamplingKey,
) {
    ck.step = state.step;
    ck.params = stepper
        .model
        .params()
        .iter()
        .map(|p| to_bits(&p.value))
        .collect();
    let opt = stepper.optimizer_mut().state();
    ck.optimizer_updates = opt.updates;
    ck.optimizer = opt
        .buffers
        .iter()
        .map(|b| b.iter().map(|v| to_bits(v)).collect())
        .collect();
    ck.ema = ema.map(|e| {
        let (updates, values) = e.parts();
        (updates, values.iter().map(|v| to_bits(v)).collect())
    });
    ck.epoch_log = state.epoch_log.clone();
    ck.acc = (state.acc.n, state.acc.loss.to_bits(), state.acc.correct);
    ck.samples = state.samples;
    ck.loop_seconds = state.loop_seconds;
    ck.rng = rng.snapshot();
    ck.sampling_key = ck.rng.is_some().then(|| key.to_words());
}

/// `num / den`, NaN when `den` is 0.
fn ratio(num: f64, den: usize) -> f64 {
    if den == 0 { f64::NAN } else { num / den as f64 }
}

/// Runs `f` on the model with the averaged parameters swapped in (if any), then swaps back.
fn with_averaged<T>(
    model: &mut Sequential,
    ema: Option<&mut Ema>,
    f: impl FnOnce(&mut Sequential) -> T,
) -> T {
    match ema {
        Some(e) => {
            e.swap(model);
            let out = f(model);
            e.swap(model);
            out
        }
        None => f(model),
    }
}

#[cfg(test)]
mod prefix_tests {
    use dpml_data::{LoadOptions, Source, SplitBasis, SplitKey, train_test_split};
    use dpml_nn::ModelSpec;

    use super::*;
    use crate::dpsgd::config::{OptimizerKind, Privacy};
    use crate::dpsgd::eval::evaluate;
    use crate::dpsgd::normalize::Normalization;

    /// The scattering front end is computed once per record (progress for every training and
    /// test record), training runs on the rest, and the returned model is the whole
    /// architecture: evaluated on the raw test records it gives exactly the reported accuracy.
    /// About 450 test digits: chance is 0.1 (sd 0.014), so > 0.5 shows learning.
    #[test]
    fn scatter_model_trains_on_precomputed_features_and_evaluates_on_raw_records() {
        let all = dpml_data::load(
            &"digits".parse::<Source>().unwrap(),
            &LoadOptions::default(),
        )
        .unwrap()
        .train;
        let (tr, te) =
            train_test_split(&all, 0.25, &SplitKey::from_seed(7), SplitBasis::Record).unwrap();
        let cfg = TrainConfig {
            model: "scatter-cnn".into(),
            epochs: 4.0,
            batch_size: 64,
            max_grad_norm: 1.0,
            lr: 1.0,
            optimizer: OptimizerKind::Sgd {
                momentum: 0.9,
                nesterov: false,
            },
            privacy: Privacy::TargetEpsilon(8.0),
            normalize: Normalization::PublicRange,
            ..TrainConfig::default()
        };
        let mut seen = Vec::new();
        let out = train_with_prefix_progress(
            &cfg,
            &tr,
            Some(&te),
            &mut DpRng::seeded(3),
            &mut |_| {},
            &mut |p| seen.push(*p),
        )
        .unwrap();
        let last = |set| seen.iter().rev().find(|p| p.set == set).copied();
        assert_eq!(last("train").map(|p| (p.done, p.total)), Some((tr.n, tr.n)));
        assert_eq!(last("test").map(|p| (p.done, p.total)), Some((te.n, te.n)));
        let mut model = out.model;
        assert_eq!(model.input_shape(), &[1, 8, 8]);
        let raw = evaluate(&mut model, &out.input, &te).unwrap();
        let acc = out.report.test_accuracy.unwrap();
        assert_eq!(raw.accuracy, acc);
        assert!((raw.loss - out.report.test_loss.unwrap()).abs() < 1e-9);
        eprintln!("scatter-cnn on digits at epsilon 8: {acc}");
        assert!(acc > 0.5, "test accuracy {acc}");

        // A model without a fixed prefix worth precomputing reports no progress.
        let spec = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).unwrap();
        let cnn = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
        assert_eq!(super::prefix_to_precompute(&cnn), 0);
        let spec = ModelSpec::named("mlp", &[1, 8, 8], 10, &[8]).unwrap();
        let mlp = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
        assert_eq!(
            (mlp.fixed_prefix_len(), super::prefix_to_precompute(&mlp)),
            (1, 0)
        );
    }
}
