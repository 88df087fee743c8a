//! The privacy plan of a search, made before any training: one noise multiplier per cell of
//! batch size × epochs ([`super::space::Cell`]), the trial's event, the search's event (that
//! trial repeated a random number of times, the best kept with the number secret, or every
//! trial released: [`TrialRelease`]) and the search's ε.
//!
//! A trial is the worst of (a) its DP-SGD run, one of the cells' as its random hyperparameters
//! pick (a data-independent choice: the worst cell bounds it), and (b) its noisy score. (a) and
//! (b) see disjoint records, each record's side decided by that record alone
//! ([`dpml_data::validation_split`]), so a neighbouring pair of data sets differs on one side
//! only: the trial's RDP is the larger of the two curves, not their sum.
//!
//! With a target ε, every cell's σ is calibrated so that its DP-SGD run alone reaches one
//! common per-trial ε (the RDP accountant's); that common value is then raised by bisection
//! as far as the search's ε (Papernot & Steinke's bound, or the composition over the random
//! number of trials when every trial is released, on the worst cell's curve plus the score's,
//! converted to (ε, δ)) stays within the target. A target that even noise-free-cost
//! trials (σ → ∞) miss is refused here, before anything trains.

use dpml_accounting::calibrate::{noise_multiplier, steps_for_epochs};
use dpml_accounting::rdp::RdpAccountant;
use dpml_accounting::{Accountant, PrivacyEvent};
use dpml_mechanisms::{Repetitions, TrialRelease};
use serde::Serialize;

use super::space::Cell;
use crate::error::{Error, Result};

/// How the trials' noise is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    /// Calibrate every cell so that the whole search meets this ε.
    TotalEpsilon(f64),
    /// Every trial uses this noise multiplier; the search's ε is reported.
    Multiplier(f64),
}

impl Noise {
    /// How a recipe's privacy sets a search's noise: its target ε is the search's total, its
    /// noise multiplier every trial's σ.
    ///
    /// # Errors
    /// A usage error for a non-private recipe.
    pub fn of(privacy: &dpml_learn::dpsgd::Privacy) -> Result<Self> {
        use dpml_learn::dpsgd::Privacy;
        match *privacy {
            Privacy::TargetEpsilon(e) => Ok(Noise::TotalEpsilon(e)),
            Privacy::NoiseMultiplier(s) => Ok(Noise::Multiplier(s)),
            Privacy::NonPrivate => Err(Error::usage(
                "a private search needs --epsilon (the total) or --noise-multiplier, not \
                 --non-private",
            )),
        }
    }
}

/// The noise of one cell of trials and its DP-SGD run's worst case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CellNoise {
    /// Batch sizes [lo, hi] of the cell.
    pub batch_size: (f64, f64),
    /// Epochs [lo, hi] of the cell.
    pub epochs: (f64, f64),
    /// σ of every trial in the cell.
    pub noise_multiplier: f64,
    /// The cell's largest q = B/N.
    pub sampling_rate: f64,
    /// The cell's most steps ⌈E·N/B⌉.
    pub steps: u64,
}

impl CellNoise {
    /// The worst DP-SGD run of the cell: the largest q with the most steps.
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::dp_sgd(self.noise_multiplier, self.sampling_rate, self.steps)
    }
}

/// A search's privacy, decided before it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The noise of each cell.
    pub cells: Vec<CellNoise>,
    /// One trial: one of the cells' DP-SGD runs (which one, its random hyperparameters
    /// decide) on the training records, the noisy score on the disjoint validation records.
    pub trial: PrivacyEvent,
    /// The search: the trial repeated K times, K from the law, the best released (or every
    /// trial, as `release` says).
    pub search: PrivacyEvent,
    /// What the search releases, and so which bound `search` is accounted with.
    pub release: TrialRelease,
    /// ε of the search at `delta` (RDP): the guarantee of the release.
    pub epsilon: f64,
    /// ε of one trial by itself at `delta` (RDP).
    pub epsilon_per_trial: f64,
    /// δ.
    pub delta: f64,
}

impl Plan {
    /// The cell whose noise a trial with batch size `batch` and `epochs` epochs uses.
    pub fn cell_of(&self, batch: usize, epochs: f64) -> Option<&CellNoise> {
        let b = batch as f64;
        self.cells.iter().find(|c| {
            (c.batch_size.0..=c.batch_size.1).contains(&b)
                && (c.epochs.0..=c.epochs.1).contains(&epochs)
        })
    }
}

/// Relative tolerance of the search's ε below its target.
const TOLERANCE: f64 = 1e-3;
/// Bisection steps on the per-trial ε (each halves the bracket on a log scale).
const BISECTION_STEPS: usize = 40;
/// The smallest per-trial DP-SGD ε tried, relative to the target: below it σ passes the
/// calibration's ceiling and the trials would learn nothing anyway.
const SMALLEST_SHARE: f64 = 1e-3;

/// The plan of a search over `cells` of trials on `n` records, each trial scored with the
/// `score` event (`None` for a public validation set), repeated as `repetitions` says and
/// releasing what `release` says, at δ.
///
/// # Errors
/// A usage error when the target cannot be met (the message says what costs the budget), or
/// for sizes the accountant refuses (a batch above `n`).
pub fn plan(
    cells: &[Cell],
    n: usize,
    score: Option<&PrivacyEvent>,
    repetitions: Repetitions,
    release: TrialRelease,
    delta: f64,
    noise: Noise,
) -> Result<Plan> {
    let rdp = RdpAccountant::default();
    let corners: Vec<(Cell, f64, u64)> = cells
        .iter()
        .map(|c| {
            // The cell's costliest corner: the largest batch's q, the smallest batch's steps
            // at the most epochs (ε grows with both at a fixed σ).
            let (q, _) = steps_for_epochs(c.epochs.1, c.batch.1 as u64, n as u64)?;
            let (_, steps) = steps_for_epochs(c.epochs.1, c.batch.0 as u64, n as u64)?;
            Ok((*c, q, steps))
        })
        .collect::<Result<_>>()?;
    let build = |sigmas: &[f64]| -> Result<Plan> {
        let cells: Vec<CellNoise> = corners
            .iter()
            .zip(sigmas)
            .map(|(&(c, q, steps), &s)| CellNoise {
                batch_size: c.batch,
                epochs: c.epochs,
                noise_multiplier: s,
                sampling_rate: q,
                steps,
            })
            .collect();
        let training = PrivacyEvent::WorstOf {
            events: cells.iter().map(CellNoise::event).collect(),
        };
        // A record trains the trial or counts in its score, never both (the validation cut
        // is per record): a neighbouring pair differs in one of the two.
        let trial = match score {
            Some(s) => PrivacyEvent::WorstOf {
                events: vec![training, s.clone()],
            },
            None => training,
        };
        let search = release.event(repetitions, trial.clone());
        Ok(Plan {
            epsilon: rdp.epsilon(&search, delta)?,
            epsilon_per_trial: rdp.epsilon(&trial, delta)?,
            cells,
            trial,
            search,
            release,
            delta,
        })
    };
    let target = match noise {
        Noise::Multiplier(sigma) => return build(&vec![sigma; corners.len()]),
        Noise::TotalEpsilon(e) => e,
    };
    // σ for every cell so that each cell's DP-SGD run alone has ε = `per_trial`.
    let at = |per_trial: f64| -> Result<Plan> {
        let sigmas = corners
            .iter()
            .map(|&(_, q, steps)| {
                Ok(noise_multiplier(&rdp, per_trial, delta, q, steps)?.noise_multiplier)
            })
            .collect::<Result<Vec<f64>>>()?;
        build(&sigmas)
    };
    let refuse = || -> Error {
        let floor = match floor_epsilon(score, repetitions, release, delta, &rdp) {
            Ok(f) => f,
            Err(e) => return e,
        };
        let every = match release {
            TrialRelease::Best => "",
            TrialRelease::Every => ", releasing every trial,",
        };
        Error::usage(format!(
            "a search of {}{every} cannot meet epsilon = {target} (delta = {delta}): the \
             noisy score and the search alone cost epsilon = {floor:.4}, and training as well \
             leaves no room; raise --epsilon, or lower --trials-mean or --score-epsilon \
             (nothing was trained)",
            repetitions.describe()
        ))
    };
    // Down from the target by quarters to a per-trial ε whose search fits: (lo, hi) then
    // bracket the largest that does. Below SMALLEST_SHARE of the target (or where σ would
    // pass the calibration's ceiling) the search is refused.
    let mut lo = target;
    let mut hi;
    let mut best = loop {
        hi = lo;
        lo /= 4.0;
        if lo < target * SMALLEST_SHARE {
            return Err(refuse());
        }
        match at(lo) {
            Ok(p) if p.epsilon <= target => break p,
            Ok(_) => {}
            Err(_) => return Err(refuse()),
        }
    };
    for _ in 0..BISECTION_STEPS {
        if best.epsilon >= target * (1.0 - TOLERANCE) {
            break;
        }
        let mid = (lo * hi).sqrt();
        match at(mid) {
            Ok(p) if p.epsilon <= target => {
                lo = mid;
                best = p;
            }
            _ => hi = mid,
        }
    }
    Ok(best)
}

/// The search's ε if training cost nothing: the noisy score alone, repeated (for messages:
/// what the budget goes to before any training).
fn floor_epsilon(
    score: Option<&PrivacyEvent>,
    repetitions: Repetitions,
    release: TrialRelease,
    delta: f64,
    rdp: &RdpAccountant,
) -> Result<f64> {
    let run = score.cloned().unwrap_or(PrivacyEvent::Gaussian {
        noise_multiplier: 1e6,
    });
    Ok(rdp.epsilon(&release.event(repetitions, run), delta)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells() -> Vec<Cell> {
        vec![
            Cell {
                batch: (64.0, 64.0),
                epochs: (5.0, 8.0),
            },
            Cell {
                batch: (128.0, 256.0),
                epochs: (5.0, 5.0),
            },
        ]
    }

    fn score() -> PrivacyEvent {
        PrivacyEvent::DiscreteLaplace {
            scale: 10.0,
            sensitivity: 1,
        }
    }

    #[test]
    fn calibration_meets_the_total_within_tolerance() {
        let law = Repetitions::Poisson { mean: 5.0 };
        let p = plan(
            &cells(),
            2000,
            Some(&score()),
            law,
            TrialRelease::Best,
            1e-5,
            Noise::TotalEpsilon(4.0),
        )
        .unwrap();
        assert!(
            p.epsilon <= 4.0 && p.epsilon > 4.0 * (1.0 - TOLERANCE),
            "{}",
            p.epsilon
        );
        // The search's ε, recomputed from its event alone.
        let again = RdpAccountant::default().epsilon(&p.search, 1e-5).unwrap();
        assert_eq!(again, p.epsilon);
        assert!(p.epsilon_per_trial < p.epsilon);
        // Each cell's σ gives its corner the same DP-SGD ε.
        let rdp = RdpAccountant::default();
        let eps: Vec<f64> = p
            .cells
            .iter()
            .map(|c| rdp.epsilon(&c.event(), 1e-5).unwrap())
            .collect();
        assert!((eps[0] - eps[1]).abs() < 0.01 * eps[0], "{eps:?}");
        // The corners: 64 with 8 epochs; q of 256 with the steps of 128.
        assert_eq!(p.cells[0].steps, 8 * 2000 / 64);
        assert_eq!(p.cells[1].sampling_rate, 256.0 / 2000.0);
        assert_eq!(p.cells[1].steps, (5u64 * 2000).div_ceil(128));
        assert_eq!(p.cell_of(200, 5.0), Some(&p.cells[1]));
        assert_eq!(p.cell_of(64, 9.0), None);
        // A fixed σ reports what the search costs.
        let fixed = plan(
            &cells(),
            2000,
            Some(&score()),
            law,
            TrialRelease::Best,
            1e-5,
            Noise::Multiplier(2.0),
        )
        .unwrap();
        assert!(fixed.cells.iter().all(|c| c.noise_multiplier == 2.0));
    }

    #[test]
    fn a_target_the_score_and_search_alone_exceed_is_refused() {
        let loud = PrivacyEvent::DiscreteLaplace {
            scale: 0.5,
            sensitivity: 1,
        };
        let law = Repetitions::Poisson { mean: 20.0 };
        let e = plan(
            &cells(),
            2000,
            Some(&loud),
            law,
            TrialRelease::Best,
            1e-5,
            Noise::TotalEpsilon(1.0),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cannot meet epsilon = 1") && e.contains("nothing was trained"),
            "{e}"
        );
    }

    /// The plan over [`cells`] on 2000 records, scored with [`score`], at δ = 1e-5.
    fn planned(law: Repetitions, release: TrialRelease, noise: Noise) -> Result<Plan> {
        plan(&cells(), 2000, Some(&score()), law, release, 1e-5, noise)
    }

    /// Releasing every trial is accounted by composition over the random number of trials:
    /// at the same total the calibration meets it with less per trial, and its event is the
    /// all-release one; at the same noise it costs more.
    #[test]
    fn releasing_every_trial_calibrates_each_trial_below_the_best_only_search() {
        let law = Repetitions::Poisson { mean: 5.0 };
        let at = |release| planned(law, release, Noise::TotalEpsilon(4.0)).unwrap();
        let (best, every) = (at(TrialRelease::Best), at(TrialRelease::Every));
        assert!(matches!(
            every.search,
            PrivacyEvent::RepeatAndReleaseAll { .. }
        ));
        assert_eq!(every.release, TrialRelease::Every);
        assert!(every.epsilon <= 4.0 && every.epsilon > 4.0 * (1.0 - TOLERANCE));
        let again = RdpAccountant::default()
            .epsilon(&every.search, 1e-5)
            .unwrap();
        assert_eq!(again, every.epsilon);
        assert!(
            every.epsilon_per_trial < best.epsilon_per_trial,
            "{} vs {}",
            every.epsilon_per_trial,
            best.epsilon_per_trial
        );
        assert!(every.cells[0].noise_multiplier > best.cells[0].noise_multiplier);
        let fixed = |release| {
            planned(law, release, Noise::Multiplier(1.5))
                .unwrap()
                .epsilon
        };
        assert!(fixed(TrialRelease::Every) > fixed(TrialRelease::Best));
    }

    #[test]
    fn a_target_only_the_best_only_search_meets_is_refused_when_every_trial_is_released() {
        let at = |release| {
            planned(
                Repetitions::Poisson { mean: 30.0 },
                release,
                Noise::TotalEpsilon(1.5),
            )
        };
        assert!(at(TrialRelease::Best).is_ok());
        let e = at(TrialRelease::Every).unwrap_err().to_string();
        assert!(
            e.contains("releasing every trial") && e.contains("nothing was trained"),
            "{e}"
        );
    }
}
