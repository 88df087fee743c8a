//! An empirical check of a whole private search: the white-box gradient-canary audit
//! (`dpml_audit::white_box`, Nasr et al. 2023 with Steinke, Nasr, Jagielski's one-run bound)
//! run on the trial the search keeps.
//!
//! m Dirac canaries (synthetic records whose clipped gradient is +C on one coordinate each),
//! each included with probability 1/2, join the training records of EVERY trial; the search
//! then runs as usual (selection included) and releases its best trial. The auditor sees what
//! the search's guarantee covers, the kept trial's run (its noisy gradient sums, a transcript
//! of which the kept model is a post-processing) and nothing of the other trials, scores the
//! canaries from it, and computes a lower bound on ε. A bound above the search's ε would
//! be evidence of a bug in the search's accounting or its implementation.

use dpml_audit::white_box::{
    self, CanaryScore, DiracCanaries, GradientCanaryConfig, ScoreAudit, audit_scores,
};
use dpml_data::Dataset;
use dpml_learn::dpsgd::train_hooked;
use dpml_mechanisms::DpRng;
use serde::Serialize;

use super::search::{self, Search, Validation};
use crate::error::{Error, Result};
use crate::observe::Observer;

/// The audit of one search.
#[derive(Debug, Clone, Serialize)]
pub struct SearchAudit {
    /// The search's ε (its guarantee).
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// ε of one trial by itself.
    pub epsilon_per_trial: f64,
    /// Trials run (`0` when the law drew none: then nothing is audited).
    pub trials: usize,
    /// The bounds and estimate from the kept trial's canaries (`None` without a trial).
    pub audit: Option<ScoreAudit>,
}

impl SearchAudit {
    /// The one-run lower bound on ε (0 without a trial).
    pub fn lower_bound(&self) -> f64 {
        self.audit.as_ref().map_or(0.0, |a| a.one_run.epsilon)
    }
}

/// Runs `search` on `fit` with `canaries` Dirac canaries in every trial's training records
/// (coordinates and inclusion drawn with `rng` first) and audits the kept trial's canaries at
/// the search's δ with `confidence`.
///
/// # Errors
/// As [`search::run`]; the white-box auditor's refusals (fewer than 4 canaries, more than the
/// model's parameters or the records).
pub fn audit_search(
    search: &Search,
    fit: &Dataset,
    validation: Validation<'_>,
    canaries: usize,
    confidence: f64,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
) -> Result<SearchAudit> {
    // The canaries' coordinates and inclusion bits, drawn once and checked against the model
    // and the records by the white-box auditor; every trial gets a fresh copy.
    let planned = white_box::plan(
        &GradientCanaryConfig {
            recipe: search.base.clone(),
            canaries,
            confidence,
            score: CanaryScore::LikelihoodRatio,
        },
        fit,
        rng,
    )
    .map_err(Error::usage)?;
    // Every trial's canaries, by trial; only the kept trial's are read.
    let mut per_trial: Vec<DiracCanaries> = Vec::new();
    let outcome = search::run_with(
        search,
        fit,
        validation,
        rng,
        observer,
        &mut |_| Ok(()),
        &mut |_, cfg, fit, rng, _| {
            let mut hook = planned.clone();
            let out = train_hooked(cfg, fit, None, rng, &mut |_| {}, &mut hook)?;
            per_trial.push(hook);
            Ok(out)
        },
    )?;
    let audit = match &outcome.kept {
        Some(kept) => Some(
            audit_scores(
                per_trial[kept.index].scores(),
                planned.included(),
                outcome.plan.delta,
                confidence,
            )
            .map_err(Error::usage)?,
        ),
        None => None,
    };
    Ok(SearchAudit {
        epsilon: outcome.plan.epsilon,
        delta: outcome.plan.delta,
        epsilon_per_trial: outcome.plan.epsilon_per_trial,
        trials: outcome.trials.len(),
        audit,
    })
}
