//! Running a private search: plan its privacy (and have it checked against a budget), draw the secret number of trials,
//! train each trial with hyperparameters drawn from the space, score it (a noisy count of the
//! validation records it classifies correctly, or its exact accuracy on a public set), and keep
//! the best. By default only the best trial's model, hyperparameters and noisy score are
//! covered by the search's guarantee, and the number of trials and the other trials' scores
//! are not; a search that releases every trial ([`TrialRelease::Every`]) covers them all, at a
//! larger ε.

use dpml_data::Dataset;
use dpml_learn::dpsgd::{self, Privacy, Task, TrainConfig, TrainOutcome};
use dpml_mechanisms::{DiscreteLaplaceMechanism, DpRng, PrivacyEvent, Repetitions, TrialRelease};
use serde::Serialize;

use super::plan::{self, Noise, Plan};
use super::space::{Hyperparameter, Point, SearchSpace};
use crate::error::{Error, Result};
use crate::observe::{Event, Observer};
use crate::train::train_task_observed;

/// Where trials are scored.
#[derive(Debug, Clone, Copy)]
pub enum Validation<'a> {
    /// Records cut from the private training data: each trial's score is its count of
    /// correctly classified records plus discrete Laplace noise of this ε (sensitivity 1),
    /// part of the trial's event.
    Private {
        /// The validation records (none of them trains a trial).
        set: &'a Dataset,
        /// ε of each trial's noisy count.
        score_epsilon: f64,
    },
    /// Records declared public: each trial's score is its exact accuracy on them, at no cost.
    Public {
        /// The public records.
        set: &'a Dataset,
    },
}

impl Validation<'_> {
    /// The validation records.
    pub fn set(&self) -> &Dataset {
        match self {
            Validation::Private { set, .. } | Validation::Public { set } => set,
        }
    }
}

/// What a search is asked to do (besides the data).
#[derive(Debug, Clone)]
pub struct Search {
    /// The space of hyperparameters.
    pub space: SearchSpace,
    /// The law of the number of trials.
    pub repetitions: Repetitions,
    /// What the search releases: the best trial (K secret), or every trial's hyperparameters
    /// and noisy score (and so K), which its guarantee then covers.
    pub release: TrialRelease,
    /// How the trials' noise is set.
    pub noise: Noise,
    /// δ of the search's guarantee.
    pub delta: f64,
    /// The recipe every trial starts from (normalisation resolved); the space's values
    /// replace its fields, the plan its privacy.
    pub base: TrainConfig,
}

/// One trial of a search.
#[derive(Debug, Clone, Serialize)]
pub struct TrialRecord {
    /// Its hyperparameters.
    pub hyperparameters: serde_json::Value,
    /// σ of its DP-SGD run (its cell's).
    pub noise_multiplier: f64,
    /// Its score: the noisy count over the validation size (a private validation set), or the
    /// exact accuracy (a public one).
    pub noisy_score: f64,
    /// Its exact accuracy on the validation records (a diagnostic when they are private).
    pub validation_accuracy: f64,
    /// ε its DP-SGD run alone would report (the recipe's accountant).
    pub epsilon_alone: Option<f64>,
    /// Seconds it took.
    pub wall_seconds: f64,
    #[serde(skip)]
    point: Point,
    #[serde(skip)]
    rank: (i64, u64),
}

impl TrialRecord {
    /// Its hyperparameters as drawn.
    pub fn point(&self) -> &Point {
        &self.point
    }
}

/// The trial a search keeps.
#[derive(Debug)]
pub struct Kept {
    /// Its place in [`SearchOutcome::trials`].
    pub index: usize,
    /// Its recipe.
    pub cfg: TrainConfig,
    /// Its trained model and report.
    pub outcome: TrainOutcome,
}

/// What a search did.
#[derive(Debug)]
pub struct SearchOutcome {
    /// Its privacy plan (the guarantee of the release).
    pub plan: Plan,
    /// Every trial, in order (covered by the guarantee, hyperparameters and noisy scores, only
    /// when the search releases every trial; their exact accuracies never are).
    pub trials: Vec<TrialRecord>,
    /// The best trial; `None` when the law drew no trial (Poisson's K = 0).
    pub kept: Option<Kept>,
}

/// A search's progress, for observers.
#[derive(Debug, Clone, Copy)]
pub enum TrialProgress<'a> {
    /// The privacy plan is made and accepted (by the budget ledger, if any); no trial has run.
    Planned {
        /// The plan: the search's ε, each trial's, δ.
        plan: &'a Plan,
    },
    /// The number of trials has been drawn (secret: not part of the release).
    Drawn {
        /// K.
        trials: u64,
    },
    /// A trial starts.
    Started {
        /// Its number, from 1.
        index: usize,
        /// K.
        trials: u64,
        /// Its hyperparameters.
        point: &'a Point,
        /// Its σ.
        noise_multiplier: f64,
    },
    /// A trial was scored.
    Scored {
        /// Its number, from 1.
        index: usize,
        /// K.
        trials: u64,
        /// Its record.
        record: &'a TrialRecord,
        /// Whether it is the best so far.
        best: bool,
    },
}

/// Runs `search` on `fit` (the records trials train on), scoring on `validation`: plans the
/// privacy and hands the plan to `check` (a budget ledger's check) before anything trains,
/// then runs the trials with randomness from `rng`.
///
/// # Privacy
/// Papernot & Steinke 2022: each trial is a DP-SGD run with σ of its cell (see
/// [`plan::plan`]) followed by its noisy score, with hyperparameters drawn from the space
/// independently of the data; the number of trials K is drawn exactly from the law and kept
/// secret; the best trial by (noisy score, a uniform 64-bit tie-break drawn with it) is kept.
/// The release of the kept model, its hyperparameters and noisy score is the plan's `search`
/// event, (ε, δ) = (`plan.epsilon`, `plan.delta`). K, the other trials and every exact
/// accuracy are not covered (diagnostics), unless the search releases every trial: then the
/// event is the composition over the random K, which covers every trial's output (its
/// model, hyperparameters and noisy score) and K; the exact accuracies remain diagnostics.
///
/// # Errors
/// Usage errors for a recipe or space that does not fit the data or a target that cannot be
/// met (before any training); what `check` returns; training errors.
pub fn run(
    search: &Search,
    fit: &Dataset,
    validation: Validation<'_>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    check: &mut dyn FnMut(&Plan) -> Result<()>,
) -> Result<SearchOutcome> {
    run_with(
        search,
        fit,
        validation,
        rng,
        observer,
        check,
        &mut |_, cfg, fit, rng, observer| {
            train_task_observed(Task::Classification, cfg, fit, None, rng, observer)
        },
    )
}

/// How one trial trains: given its number (from 0), recipe, records, generator and observer.
pub type TrainTrial<'a> = dyn FnMut(usize, &TrainConfig, &Dataset, &mut DpRng, &mut dyn Observer) -> Result<TrainOutcome>
    + 'a;

/// [`run`] with each trial trained by `train_trial` (an audit installs its canaries there);
/// [`run`] trains them plainly.
///
/// # Errors
/// As [`run`].
pub fn run_with(
    search: &Search,
    fit: &Dataset,
    validation: Validation<'_>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    check: &mut dyn FnMut(&Plan) -> Result<()>,
    train_trial: &mut TrainTrial<'_>,
) -> Result<SearchOutcome> {
    check_fits(search, fit, validation.set())?;
    let score = match validation {
        Validation::Private { score_epsilon, .. } => {
            Some(DiscreteLaplaceMechanism::new(1, score_epsilon)?)
        }
        Validation::Public { .. } => None,
    };
    let plan = plan::plan(
        &search.space.cells(&search.base),
        fit.n,
        score.as_ref().map(DiscreteLaplaceMechanism::event).as_ref(),
        search.repetitions,
        search.release,
        search.delta,
        search.noise,
    )?;
    check(&plan)?;
    observer.observe(Event::Trial(&TrialProgress::Planned { plan: &plan }));
    let trials = search.repetitions.sample(rng)?;
    observer.observe(Event::Trial(&TrialProgress::Drawn { trials }));
    let mut records: Vec<TrialRecord> = Vec::new();
    let mut kept: Option<Kept> = None;
    for index in 0..trials as usize {
        let start = std::time::Instant::now();
        let point = search.space.draw(rng);
        let mut cfg = point.apply(&search.base)?;
        let cell = *plan.cell_of(cfg.batch_size, cfg.epochs).ok_or_else(|| {
            Error::internal(format!(
                "trial {} drew batch size {} and {} epochs, outside every planned cell",
                index + 1,
                cfg.batch_size,
                cfg.epochs
            ))
        })?;
        cfg.privacy = Privacy::NoiseMultiplier(cell.noise_multiplier);
        observer.observe(Event::Trial(&TrialProgress::Started {
            index: index + 1,
            trials,
            point: &point,
            noise_multiplier: cell.noise_multiplier,
        }));
        let mut outcome = train_trial(index, &cfg, fit, rng, observer)?;
        check_within_cell(outcome.event.as_ref(), &cell.event())?;
        let set = validation.set();
        let accuracy = dpsgd::evaluate(&mut outcome.model, &outcome.input, set)?.accuracy;
        // accuracy = correct/n in f64; n < 2^53, so rounding recovers the count exactly.
        let correct = (accuracy * set.n as f64).round() as i64;
        let (count, noisy_score) = match &score {
            Some(mech) => {
                let noisy = mech.release(rng, correct);
                (noisy, noisy as f64 / set.n as f64)
            }
            None => (correct, accuracy),
        };
        let rank = (count, rng.next_u64());
        let record = TrialRecord {
            hyperparameters: point.to_json(),
            noise_multiplier: cell.noise_multiplier,
            noisy_score,
            validation_accuracy: accuracy,
            epsilon_alone: outcome.report.epsilon,
            wall_seconds: start.elapsed().as_secs_f64(),
            point,
            rank,
        };
        let best = kept.as_ref().is_none_or(|k| rank > records[k.index].rank);
        observer.observe(Event::Trial(&TrialProgress::Scored {
            index: index + 1,
            trials,
            record: &record,
            best,
        }));
        records.push(record);
        if best {
            kept = Some(Kept {
                index,
                cfg,
                outcome,
            });
        }
    }
    Ok(SearchOutcome {
        plan,
        trials: records,
        kept,
    })
}

/// Refuses, before any privacy is planned, a recipe or space that does not fit the data: the
/// base recipe, and every batch size the space may draw against the records.
fn check_fits(search: &Search, fit: &Dataset, validation: &Dataset) -> Result<()> {
    if fit.n_classes != validation.n_classes || fit.record_shape != validation.record_shape {
        return Err(Error::usage(format!(
            "the validation set has records {:?} with {} classes, the training set {:?} with {}",
            validation.record_shape, validation.n_classes, fit.record_shape, fit.n_classes
        )));
    }
    search.base.validate()?;
    // The smallest batch and epochs any trial may draw stand for the base's own, which the
    // space may replace.
    let cells = search.space.cells(&search.base);
    let probe = TrainConfig {
        batch_size: cells
            .iter()
            .map(|c| c.batch.0)
            .fold(f64::INFINITY, f64::min) as usize,
        epochs: cells
            .iter()
            .map(|c| c.epochs.0)
            .fold(f64::INFINITY, f64::min),
        ..search.base.clone()
    };
    probe.validate_data(fit, Some(validation))?;
    let largest = search.space.largest_batch(&search.base);
    if largest > fit.n as f64 {
        return Err(Error::usage(format!(
            "the search may draw batch size {largest}, more than the {} records the trials \
             train on",
            fit.n
        )));
    }
    if search.space.varies(Hyperparameter::Momentum)
        && matches!(
            search.base.optimizer,
            dpml_learn::dpsgd::OptimizerKind::Adam
        )
    {
        return Err(Error::usage(
            "momentum in the search space applies to sgd, not adam",
        ));
    }
    Ok(())
}

/// A trial's run must cost no more than its cell's worst case, order by order (it does by
/// construction: same σ, no larger q, no more steps; this catches a mismatch of recipe and
/// plan before its model could be released).
fn check_within_cell(run: Option<&PrivacyEvent>, cell: &PrivacyEvent) -> Result<()> {
    let rdp = dpml_accounting::RdpAccountant::default();
    let run = run.ok_or_else(|| Error::internal("a trial ran without privacy"))?;
    let (a, b) = (rdp.rdp(run)?, rdp.rdp(cell)?);
    if a.iter().zip(&b).all(|(x, y)| x <= &(y * (1.0 + 1e-12))) {
        Ok(())
    } else {
        Err(Error::internal(format!(
            "a trial's privacy event {run:?} exceeds its cell's {cell:?}"
        )))
    }
}
