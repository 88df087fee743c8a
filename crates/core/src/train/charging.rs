//! How a training run charges the budget ledger: checked before it trains, charged before its
//! model or release is written, and, when checkpointed, once per run: the ledger records each
//! checkpoint as a segment of the run ([`Ledger::record_segment`]), so `--resume` of the same
//! run charges nothing more and a second continuation of one checkpoint (a fork) is charged
//! again for the steps it adds.
//!
//! A checkpoint keeps, in its context, the run's random identity, its own identity and the
//! identity of the ledger the run is charged to; a run charged to a ledger is continued only
//! against that ledger (and, as [`super::checkpoint`] checks, with the seed it started with).

use std::cell::RefCell;

use dpml_learn::dpsgd::{Checkpoint, PrivacyPlan, TrainConfig};
use dpml_learn::perturbation::PerturbationReport;
use dpml_mechanisms::PrivacyEvent;
use serde_json::{Value, json};

use crate::budget::{self, Balance, Charge, Ledger, Neighbouring, Segment, SegmentCost};
use crate::error::{Error, Result};

/// The DP-SGD event `cfg` plans on `n` records, refusing a non-private recipe by name (a
/// workflow asks this before training, to check a ledger).
///
/// # Errors
/// A usage error for a non-private recipe (`what` says which run), the plan's errors.
pub fn planned_event(cfg: &TrainConfig, n: usize, what: &str) -> Result<PrivacyEvent> {
    let plan = PrivacyPlan::new(cfg, n)?;
    plan.event(plan.steps).ok_or_else(|| {
        Error::usage(format!(
            "a non-private training run ({what}) cannot be charged to a ledger: its ε is \
             unbounded; drop the ledger or train privately"
        ))
    })
}

/// What a training run costs the ledger: its whole cost when first charged, and the steps a
/// fork of `resumed` adds, recorded as made by `command` on `dataset`. DP-SGD's event (over
/// whole records, with or without perturbed inputs); without DP-SGD, the local perturbation's
/// ε per record; a non-private run is refused.
///
/// # Errors
/// A usage error for a non-private run; the accountant's errors.
pub(crate) fn run_charges(
    command: &str,
    dataset: &str,
    cfg: &TrainConfig,
    n: usize,
    resumed: Option<&Checkpoint>,
    perturbation: Option<&PerturbationReport>,
) -> Result<(Charge, Charge)> {
    let plan = PrivacyPlan::new(cfg, n)?;
    let done = resumed.map_or(0, |ck| ck.step);
    match (
        plan.event(plan.steps),
        plan.event(plan.steps - done.min(plan.steps)),
        perturbation,
    ) {
        (Some(whole), Some(rest), _) => Ok((
            budget::accounted(command, dataset, whole, cfg.delta)?
                .labelled(format!("DP-SGD, {} steps", plan.steps)),
            budget::accounted(command, dataset, rest, cfg.delta)?
                .labelled(format!("DP-SGD fork from step {done}")),
        )),
        (None, _, Some(p)) => {
            let event = PrivacyEvent::EpsilonDelta {
                epsilon: p.epsilon_per_record,
                delta: p.delta_per_record,
            };
            let c = Charge::of(
                command,
                dataset,
                event,
                p.epsilon_per_record,
                p.delta_per_record,
            )
            .labelled("input perturbation (local DP on the features)")
            .under(Neighbouring::Features);
            Ok((c.clone(), c))
        }
        _ => Err(Error::usage(
            "a non-private training run cannot be charged to a ledger: its ε is unbounded; \
             drop the ledger or train privately",
        )),
    }
}

/// The charging state of one checkpointed run in this process.
pub(crate) struct RunCharge<'l> {
    ledger: Option<&'l Ledger>,
    run: String,
    /// The checkpoint this process continues (or last wrote): a segment's parent.
    parent: RefCell<Option<String>>,
    /// The run's first charge and a fork's (with a ledger).
    charges: Option<(Charge, Charge)>,
    /// The ledger's refusal during a save, returned in place of the training error it causes.
    pub(crate) failure: RefCell<Option<Error>>,
}

impl<'l> RunCharge<'l> {
    /// The run `resumed` continues (or a fresh one), costing the first of `charges` when
    /// first charged and the second for a fork; checked against `ledger` before any step.
    ///
    /// # Errors
    /// A usage error for a run charged to another ledger (or to one, resumed without it); the
    /// ledger's refusal when the run (or its fork) would not fit.
    pub(crate) fn start(
        ledger: Option<&'l Ledger>,
        resumed: Option<&Checkpoint>,
        charges: Option<(Charge, Charge)>,
    ) -> Result<Self> {
        let field = |k: &str| {
            resumed
                .and_then(|ck| ck.context.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let charged_to = field("ledger");
        match (&charged_to, ledger) {
            (Some(_), None) => {
                return Err(Error::usage(
                    "this checkpoint's run is charged to a budget ledger: resume it with the \
                     same --ledger",
                ));
            }
            (Some(id), Some(l)) if id != l.id() => {
                return Err(Error::usage(format!(
                    "this checkpoint's run is charged to another budget ledger than {}",
                    l.path().display()
                )));
            }
            _ => {}
        }
        let run = match field("run") {
            Some(r) => r,
            None => budget::random_id()?,
        };
        let parent = field("checkpoint");
        if let (Some(l), Some((first, fork))) = (ledger, &charges) {
            match l.segment_cost(&run, parent.as_deref())? {
                SegmentCost::FirstCharge => budget::check(Some(l), first)?,
                SegmentCost::Fork => budget::check(Some(l), fork)?,
                SegmentCost::Continues => {}
            }
        }
        Ok(Self {
            ledger,
            run,
            parent: RefCell::new(parent),
            charges,
            failure: RefCell::new(None),
        })
    }

    /// Records the next segment (to a checkpoint, or to the release) before it is written.
    fn record(&self, child: &str) -> Result<Option<Balance>> {
        let mut balance = None;
        if let (Some(l), Some((first, fork))) = (self.ledger, &self.charges) {
            let segment = Segment {
                run: self.run.clone(),
                parent: self.parent.borrow().clone(),
                child: child.to_string(),
            };
            balance = Some(l.record_segment(&segment, first, fork)?.balance);
        }
        *self.parent.borrow_mut() = Some(child.to_string());
        Ok(balance)
    }

    /// Called before each checkpoint is written: records it and keeps the identities in it.
    pub(crate) fn before_save(&self, ck: &mut Checkpoint) -> Result<()> {
        let child = budget::random_id()?;
        self.record(&child)?;
        if let Value::Object(map) = &mut ck.context {
            map.insert("run".into(), json!(self.run));
            map.insert("checkpoint".into(), json!(child));
            map.insert("ledger".into(), json!(self.ledger.map(Ledger::id)));
        }
        Ok(())
    }

    /// Called before the run's release is written: the run's last segment.
    pub(crate) fn before_release(&self) -> Result<Option<Balance>> {
        self.record(&format!("release-{}", budget::random_id()?))
    }
}
