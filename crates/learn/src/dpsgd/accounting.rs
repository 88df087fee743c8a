//! The privacy plan of a run: sampling rate q = B/N, steps T = ⌈E·N/B⌉, the noise multiplier
//! (given, or calibrated BEFORE training so the final ε never exceeds the target), and ε at
//! any number of steps with the chosen accountant.

use dpml_accounting::calibrate::{noise_multiplier, steps_for_epochs};
use dpml_accounting::gdp::GdpAccountant;
use dpml_accounting::pld::PldAccountant;
use dpml_accounting::rdp::RdpAccountant;
use dpml_accounting::{Accountant, BoundKind};
use dpml_mechanisms::PrivacyEvent;

use super::config::{AccountantKind, Privacy, TrainConfig};
use super::error::{Result, config_err};

/// The accountant of `kind` with its default settings (PLD: pessimistic, automatic grid).
pub fn accountant(kind: AccountantKind) -> Box<dyn Accountant + Send + Sync> {
    match kind {
        AccountantKind::Pld => Box::new(PldAccountant::pessimistic()),
        AccountantKind::Rdp => Box::new(RdpAccountant::default()),
        AccountantKind::Gdp => Box::new(GdpAccountant),
    }
}

/// What a run will do, in privacy terms, decided before it starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivacyPlan {
    /// q = B/N.
    pub sampling_rate: f64,
    /// T = ⌈E·N/B⌉.
    pub steps: u64,
    /// ⌈N/B⌉: steps per epoch for logs and schedules.
    pub steps_per_epoch: u64,
    /// σ (`None` when non-private).
    pub noise_multiplier: Option<f64>,
    /// Training records N and batch size B: epoch e ends at step ⌈e·N/B⌉ (see
    /// [`PrivacyPlan::ends_epoch`]).
    records_and_batch: (u64, u64),
}

impl PrivacyPlan {
    /// The plan for `cfg` on `n` training records; calibrates σ for a target ε.
    ///
    /// # Errors
    /// [`super::DpSgdError::Accounting`] for bad sizes or an unreachable target;
    /// [`super::DpSgdError::InvalidConfig`] when GDP is asked to calibrate.
    pub fn new(cfg: &TrainConfig, n: usize) -> Result<Self> {
        let (q, steps) = steps_for_epochs(cfg.epochs, cfg.batch_size as u64, n as u64)?;
        let steps_per_epoch = (n as u64).div_ceil(cfg.batch_size as u64).max(1);
        let noise_multiplier = match cfg.privacy {
            Privacy::NonPrivate => None,
            Privacy::NoiseMultiplier(s) => Some(s),
            Privacy::TargetEpsilon(target) => {
                let acc = accountant(cfg.accountant);
                if acc.bound() != BoundKind::UpperBound {
                    return Err(config_err(format!(
                        "accountant {:?} gives no upper bound on epsilon and cannot calibrate a target",
                        acc.name()
                    )));
                }
                Some(noise_multiplier(acc.as_ref(), target, cfg.delta, q, steps)?.noise_multiplier)
            }
        };
        Ok(Self {
            sampling_rate: q,
            steps,
            steps_per_epoch,
            noise_multiplier,
            records_and_batch: (n as u64, cfg.batch_size as u64),
        })
    }

    /// Whole epochs done after `done` steps: ⌊done·B/N⌋ (the e-th epoch ends at step
    /// ⌈e·N/B⌉, when e·N records have been sampled in expectation).
    fn epochs_done(&self, done: u64) -> u64 {
        let (n, b) = self.records_and_batch;
        u64::try_from(u128::from(done) * u128::from(b) / u128::from(n.max(1))).unwrap_or(u64::MAX)
    }

    /// Whether step `done` (from 1) ends an epoch: one more whole epoch is done, or the run
    /// ends (a fractional last epoch). A run of E epochs logs ⌈E⌉ of them, as it was asked.
    pub fn ends_epoch(&self, done: u64) -> bool {
        done == self.steps || self.epochs_done(done) > self.epochs_done(done.saturating_sub(1))
    }

    /// The epochs logged once `done` steps are done: one for each step that ends an epoch
    /// ([`PrivacyPlan::ends_epoch`]), all of them ([`PrivacyPlan::epochs`]) once the run is over.
    /// Before the last step, a step ends at most one epoch: ⌊done·B/N⌋ (at most `done`).
    pub fn epochs_logged(&self, done: u64) -> u64 {
        if done >= self.steps {
            self.epochs()
        } else {
            self.epochs_done(done).min(done)
        }
    }

    /// The epochs the run logs: ⌈E⌉ for E epochs.
    pub fn epochs(&self) -> u64 {
        let whole = self.epochs_done(self.steps);
        // The last step ends an epoch of its own unless it completes a whole one.
        let partial = self.steps > 0 && whole == self.epochs_done(self.steps - 1);
        whole + u64::from(partial)
    }

    /// The privacy event of the first `steps` steps (`None` when non-private).
    pub fn event(&self, steps: u64) -> Option<PrivacyEvent> {
        self.noise_multiplier
            .map(|s| PrivacyEvent::dp_sgd(s, self.sampling_rate, steps))
    }

    /// ε after the first `steps` steps at `delta` with `kind` (`None` when non-private or
    /// before the first step).
    ///
    /// # Errors
    /// [`super::DpSgdError::Accounting`] from the accountant.
    pub fn epsilon(&self, kind: AccountantKind, steps: u64, delta: f64) -> Result<Option<f64>> {
        Ok(self.epsilon_with_note(kind, steps, delta)?.map(|(e, _)| e))
    }

    /// As [`PrivacyPlan::epsilon`], with the accountant's note when the number is not its own:
    /// below δ = [`dpml_accounting::pld::MIN_DELTA`] (or where its tails exceed δ) the PLD
    /// accountant reports the RDP bound, and the report must say so.
    ///
    /// # Errors
    /// As [`PrivacyPlan::epsilon`].
    pub fn epsilon_with_note(
        &self,
        kind: AccountantKind,
        steps: u64,
        delta: f64,
    ) -> Result<Option<(f64, Option<String>)>> {
        match self.event(steps) {
            Some(e) if steps > 0 => Ok(Some(match kind {
                AccountantKind::Pld => PldAccountant::pessimistic().upper_epsilon(&e, delta)?,
                _ => (accountant(kind).epsilon(&e, delta)?, None),
            })),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of E epochs logs E of them (⌈E⌉ for a fractional E), at steps ⌈e·N/B⌉: with
    /// N/B not whole, a pass of ⌈N/B⌉ steps per logged epoch logged 36 of 40 epochs.
    #[test]
    fn epochs_end_where_e_times_n_records_are_sampled() {
        let plan = |epochs: f64, batch_size: usize, n: usize| {
            let cfg = TrainConfig {
                epochs,
                batch_size,
                privacy: Privacy::NonPrivate,
                ..TrainConfig::default()
            };
            PrivacyPlan::new(&cfg, n).unwrap()
        };
        for (epochs, batch, n, logged) in [
            (40.0, 256, 1150, 40),
            (10.0, 64, 640, 10),
            (2.5, 64, 640, 3),
            (3.0, 100, 250, 3),
        ] {
            let p = plan(epochs, batch, n);
            let ends: Vec<u64> = (1..=p.steps).filter(|&d| p.ends_epoch(d)).collect();
            assert_eq!(ends.len() as u64, logged, "{epochs} {batch} {n}: {ends:?}");
            assert_eq!(p.epochs(), logged);
            for done in 0..=p.steps {
                let so_far = ends.iter().filter(|&&d| d <= done).count() as u64;
                assert_eq!(
                    p.epochs_logged(done),
                    so_far,
                    "{epochs} {batch} {n}: {done}"
                );
            }
            assert_eq!(*ends.last().unwrap(), p.steps);
            // Epoch e ends at the first step by which e·N records are sampled in expectation.
            for (e, &step) in ends.iter().enumerate().take(epochs.floor() as usize) {
                let e = e as u64 + 1;
                assert!(step * batch as u64 >= e * n as u64, "{e}: {step}");
                assert!((step - 1) * (batch as u64) < e * n as u64, "{e}: {step}");
            }
        }
    }

    #[test]
    fn calibrated_epsilon_never_exceeds_the_target() {
        for (kind, target) in [
            (AccountantKind::Pld, 1.0),
            (AccountantKind::Rdp, 3.0),
            (AccountantKind::Pld, 8.0),
        ] {
            let cfg = TrainConfig {
                privacy: Privacy::TargetEpsilon(target),
                accountant: kind,
                epochs: 5.0,
                batch_size: 64,
                ..TrainConfig::default()
            };
            let plan = PrivacyPlan::new(&cfg, 1797).unwrap();
            assert_eq!(plan.steps, (5 * 1797u64).div_ceil(64));
            let eps = plan.epsilon(kind, plan.steps, cfg.delta).unwrap().unwrap();
            assert!(
                eps <= target && eps > 0.99 * target,
                "{kind:?}: {eps} vs {target}"
            );
            // Fewer steps spend less.
            let half = plan
                .epsilon(kind, plan.steps / 2, cfg.delta)
                .unwrap()
                .unwrap();
            assert!(half < eps);
        }
    }

    #[test]
    fn non_private_has_no_event() {
        let cfg = TrainConfig {
            privacy: Privacy::NonPrivate,
            ..TrainConfig::default()
        };
        let plan = PrivacyPlan::new(&cfg, 1000).unwrap();
        assert_eq!(plan.event(10), None);
        assert_eq!(plan.epsilon(AccountantKind::Pld, 10, 1e-5).unwrap(), None);
    }
}
