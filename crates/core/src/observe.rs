//! Progress of long work, reported to the caller: the command line draws bars and lines from
//! it, Python passes nothing ([`Silent`]). Observers only watch: nothing they do changes a
//! result.

use dpml_learn::dpsgd::Progress;
use dpml_learn::dpsgd::train::PrefixProgress;
use dpml_learn::label_dp::LabelDpProgress;

/// What a workflow reports as it goes.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A stage of the workflow begins (`"fold 2/5"`).
    Stage(&'a str),
    /// A training run is about to start (before its fixed layers' features are computed).
    RunStarted,
    /// Progress of the current training run.
    Training(&'a Progress),
    /// Progress of mapping records through a model's fixed leading layers.
    Prefix(&'a PrefixProgress),
    /// Progress of label-DP training (its stages and steps).
    LabelDp(&'a LabelDpProgress),
    /// The current training run finished.
    RunFinished,
    /// Progress of a private hyperparameter search (its trials).
    Trial(&'a crate::tune::TrialProgress<'a>),
}

/// Receives a workflow's [`Event`]s.
pub trait Observer {
    /// One event; the default ignores it.
    fn observe(&mut self, _event: Event<'_>) {}
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Observer for Silent {}

impl<F: FnMut(Event<'_>)> Observer for F {
    fn observe(&mut self, event: Event<'_>) {
        self(event)
    }
}
