//! The audit itself: draw the population, train the target (and reference and canary models)
//! with the same recipe, score every attack, and set the empirical lower bounds beside the
//! accountant's ε ([`run_audit`] → [`AuditReport`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;
use serde::Serialize;

use super::attribute::{run_on_target, target_eval_set};
use super::cache::ModelCache;
use super::canary::CanaryRun;
use super::config::{AttackKind, AuditConfig};
use super::error::{DriverError, Result};
use super::metrics::AttackMetrics;
use super::models::{Alone, Job, ModelReady, Scored, Spread, train_and_score_spread};
use super::population::{Population, split_scores};
use super::scores::{RecordScores, accuracy};
use super::theory::{Theory, resolve_recipe};
use crate::attribute::AttributeReport;
use crate::bounds::EpsilonBoundParams;
use crate::lira::{self, OfflineStatistic, ReferenceScores};
use crate::one_run;
use crate::rmia;

/// The one-run audit's outcome, in the JSON shape of the other attacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OneRunOutcome {
    /// ε lower bound holding with the stated confidence.
    pub epsilon_lower_bound: f64,
    /// The accountant's ε for the canary run (its training set size differs slightly from the
    /// target's; `None` when non-private).
    pub epsilon_theoretical: Option<f64>,
    /// Canaries m.
    pub canaries: u64,
    /// Guesses made.
    pub guesses: u64,
    /// Correct guesses.
    pub correct: u64,
    /// "In" guesses.
    pub k_plus: u64,
    /// "Out" guesses.
    pub k_minus: u64,
}

/// One attack's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AttackOutcome {
    /// A threshold attack on the target's members and non-members.
    Threshold(AttackMetrics),
    /// The one-run canary audit.
    OneRun(OneRunOutcome),
    /// Attribute inference on the sensitive column.
    Attribute(AttributeReport),
}

impl AttackOutcome {
    /// The attack's ε lower bound.
    pub fn epsilon_lower_bound(&self) -> f64 {
        match self {
            AttackOutcome::Threshold(m) => m.epsilon_lower_bound,
            AttackOutcome::OneRun(o) => o.epsilon_lower_bound,
            AttackOutcome::Attribute(a) => a.metrics.epsilon_lower_bound,
        }
    }
}

/// Everything an audit found. Field names are the `dpml audit --json` contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditReport {
    /// The data set's name.
    pub dataset: String,
    /// N, the records the target trains on (JSON `train_size`, as every command names the
    /// size of a training set).
    #[serde(rename = "train_size")]
    pub target_size: usize,
    /// Reference models trained for LiRA (`None` when no LiRA attack ran).
    pub reference_models: Option<usize>,
    /// Canaries of the one-run audit (`None` when it did not run).
    pub canaries: Option<usize>,
    /// Confidence of every lower bound.
    pub confidence: f64,
    /// Whether the run was seeded (reproducible, not a secure release).
    pub seeded: bool,
    /// The accountant's ε for the target (`None` = non-private, no guarantee).
    pub epsilon_theoretical: Option<f64>,
    /// δ of both ε's.
    pub delta: f64,
    /// The accountant's full statement about the target.
    pub theory: Theory,
    /// The target's accuracy on its training set.
    pub target_train_accuracy: f64,
    /// The target's accuracy on the held-out non-members.
    pub target_holdout_accuracy: f64,
    /// Each attack's metrics, by name ("loss", "confidence", "entropy", "lira",
    /// "lira_offline", "rmia", "one_run", "attribute").
    pub attacks: BTreeMap<String, AttackOutcome>,
    /// The best lower bound across attacks.
    pub epsilon_lower_bound: f64,
    /// The attack that gave it.
    pub best_attack: String,
    /// False when some attack's lower bound exceeds its model's theoretical ε (a bug in
    /// dpml's training or accounting).
    pub consistent: bool,
    /// Attacks whose lower bound exceeds the theoretical ε.
    pub violations: Vec<String>,
    /// Models trained in this run.
    pub models_trained: usize,
    /// Models loaded from the cache.
    pub models_from_cache: usize,
    /// The cache folder, if caching was on.
    pub cache_dir: Option<String>,
    /// Seconds spent training or loading models.
    pub training_seconds: f64,
    /// Seconds for the whole audit.
    pub wall_seconds: f64,
    /// The f-DP bound `(FPR, max TPR)` for plots (`None` when non-private).
    #[serde(skip)]
    pub roc_bound: Option<Vec<(f64, f64)>>,
}

impl AuditConfig {
    /// Models the audit will train or load: the target, K reference models if LiRA runs, and
    /// one canary model if the one-run audit runs.
    pub fn models_needed(&self) -> usize {
        1 + if self.needs_reference_models() {
            self.reference_models
        } else {
            0
        } + usize::from(self.attacks.contains(&AttackKind::OneRun))
    }
}

/// Runs the audit of `cfg` on `data` (the population the target's records are drawn from),
/// calling `ready` after each model is trained or loaded.
///
/// # Privacy
/// The lower bounds are statistical statements about the trained models (see
/// [`crate::bounds`] and [`crate::one_run`]); the audit itself releases nothing private.
///
/// # Errors
/// Bad settings ([`AuditConfig::validate_for`]), a recipe the trainer refuses, cache I/O
/// failures, and scoring failures, each naming the value; all settings are checked before
/// any model trains.
pub fn run_audit(
    cfg: &AuditConfig,
    data: &Dataset,
    rng: &mut DpRng,
    ready: &(dyn Fn(&ModelReady) + Sync),
) -> Result<AuditReport> {
    run_audit_spread(cfg, data, rng, ready, &Alone)?
        .ok_or_else(|| DriverError::Invalid("a lone process reported nothing".into()))
}

/// As [`run_audit`] with the models divided among processes by `spread`: every process draws
/// the same population and jobs (the same generator, seeded or broadcast by the caller),
/// trains its share, and the reporting process gets the report (`None` on the others).
///
/// # Errors
/// As [`run_audit`] and [`Spread::gather`].
pub fn run_audit_spread(
    cfg: &AuditConfig,
    data: &Dataset,
    rng: &mut DpRng,
    ready: &(dyn Fn(&ModelReady) + Sync),
    spread: &dyn Spread,
) -> Result<Option<AuditReport>> {
    run_audit_with(cfg, data, rng, ready, spread, &AsDrawn)
}

/// What a model's training records go through before it trains: the mechanism under audit
/// when it acts on the data rather than in the trainer (local DP: noise on every record).
/// The attacks still query the records as drawn, since membership is about the true record.
pub trait TrainingInputs: Sync {
    /// The records a model trains on, made from `train` (its share of the audit records),
    /// with randomness from `rng`.
    ///
    /// # Errors
    /// [`DriverError::Invalid`] naming what the mechanism refused.
    fn prepare(&self, train: Dataset, rng: &mut DpRng) -> Result<Dataset>;
}

/// Models train on the records as drawn (the mechanism is in the trainer, as for DP-SGD).
#[derive(Debug, Clone, Copy, Default)]
pub struct AsDrawn;

impl TrainingInputs for AsDrawn {
    fn prepare(&self, train: Dataset, _: &mut DpRng) -> Result<Dataset> {
        Ok(train)
    }
}

/// As [`run_audit_spread`] with every model's training set (target, reference and canary
/// models alike, so that the reference models simulate the same mechanism) made by `inputs`.
///
/// # Errors
/// As [`run_audit_spread`] and [`TrainingInputs::prepare`].
pub fn run_audit_with(
    cfg: &AuditConfig,
    data: &Dataset,
    rng: &mut DpRng,
    ready: &(dyn Fn(&ModelReady) + Sync),
    spread: &dyn Spread,
    inputs: &dyn TrainingInputs,
) -> Result<Option<AuditReport>> {
    let started = Instant::now();
    cfg.validate(data.n)?;
    let attribute = match &cfg.attribute {
        Some(a) if cfg.attacks.contains(&AttackKind::Attribute) => Some(a.attack(data)?),
        _ => None,
    };
    let pop = Population::draw(data, cfg.target_size, rng)?;
    let recipe = resolve_recipe(&cfg.recipe, cfg.target_size)?;
    let theory = Theory::of(&recipe, cfg.target_size)?;
    let audit_set = Arc::new(data.subset(&pop.indices));
    let members = data.subset(pop.members());

    // LiRA scores every model on the audit records and their augmented copies; the target is
    // also scored on the attribute attack's queries (after those).
    let lira_eval = if cfg.needs_reference_models() {
        Arc::new(cfg.lira_queries.eval_set(&audit_set)?)
    } else {
        audit_set.clone()
    };
    let target_eval = match &attribute {
        Some(a) => Arc::new(target_eval_set(a, &lira_eval, &audit_set)?),
        None => lira_eval.clone(),
    };
    let target_train = inputs.prepare(members.clone(), rng)?;
    let mut jobs = vec![Job::new("target", target_train, target_eval, cfg.seed, rng)];
    let membership = if cfg.needs_reference_models() {
        let m = lira::balanced_membership(cfg.reference_models, pop.len(), rng)?;
        for (k, row) in m.iter().enumerate() {
            let idx: Vec<usize> = (0..pop.len()).filter(|&i| row[i]).collect();
            let role = format!("reference {k}");
            let train = inputs.prepare(audit_set.subset(&idx), rng)?;
            jobs.push(Job::new(role, train, lira_eval.clone(), cfg.seed, rng));
        }
        Some(m)
    } else {
        None
    };
    let canary_run = if cfg.attacks.contains(&AttackKind::OneRun) {
        let run = CanaryRun::draw(&members, cfg.canaries, rng)?;
        let eval = Arc::new(run.canaries.clone());
        let train = inputs.prepare(run.train.clone(), rng)?;
        jobs.push(Job::new("canaries", train, eval, cfg.seed, rng));
        Some(run)
    } else {
        None
    };

    let cache = cfg.cache_dir.as_ref().map(ModelCache::new);
    let train_start = Instant::now();
    let Some(mut scored) =
        train_and_score_spread(jobs, &recipe, cache.as_ref(), cfg.threads, ready, spread)?
    else {
        return Ok(None);
    };
    let training_seconds = train_start.elapsed().as_secs_f64();
    let from_cache = scored.iter().filter(|s| s.from_cache).count();
    let models_total = scored.len();

    let params = EpsilonBoundParams::new(recipe.delta, cfg.confidence)?;
    let mut split_rng = rng.fork();
    let mut attacks = BTreeMap::new();
    let canary_scored = canary_run.as_ref().and_then(|_| scored.pop());
    // What is left after the target are the reference models, in order.
    let mut target = scored.remove(0);
    let attribute_report = attribute
        .as_ref()
        .map(|a| {
            run_on_target(
                a,
                &mut target,
                lira_eval.n,
                &audit_set,
                pop.target_size,
                params,
            )
        })
        .transpose()?;
    // Scores on every LiRA query; the first 2N are the audit records as they are.
    let target_all = RecordScores::from_logits(&target.logits, target.classes, &lira_eval.y)?;
    let n2 = audit_set.n;
    let mut threshold = |name: &str, scores: &[f64], rng: &mut DpRng| -> Result<()> {
        let (m, n) = split_scores(&pop, scores);
        let metrics = AttackMetrics::from_scores(&m, &n, params, rng)?;
        attacks.insert(name.to_string(), AttackOutcome::Threshold(metrics));
        Ok(())
    };
    if cfg.attacks.contains(&AttackKind::Loss) {
        threshold("loss", &target_all.loss[..n2], &mut split_rng)?;
        threshold("confidence", &target_all.confidence[..n2], &mut split_rng)?;
        threshold("entropy", &target_all.entropy[..n2], &mut split_rng)?;
    }
    if let Some(membership) = &membership {
        let refs = reference_scores(&scored, membership, &lira_eval, n2)?;
        let variance = cfg.lira_variance;
        if cfg.attacks.contains(&AttackKind::Lira) {
            let s = summed_over_queries(&target_all.phi, n2, &refs, |phi, r| {
                lira::lira_online(phi, r, variance)
            })?;
            threshold("lira", &s, &mut split_rng)?;
        }
        if cfg.attacks.contains(&AttackKind::LiraOffline) {
            let s = summed_over_queries(&target_all.phi, n2, &refs, |phi, r| {
                lira::lira_offline(phi, r, variance, OfflineStatistic::NegLogSurvival)
            })?;
            threshold("lira_offline", &s, &mut split_rng)?;
        }
        if cfg.attacks.contains(&AttackKind::Rmia) {
            let reference_confidences = scored
                .iter()
                .map(|s| {
                    let c = RecordScores::from_logits(&s.logits, s.classes, &lira_eval.y)?;
                    Ok(c.confidence[..n2].to_vec())
                })
                .collect::<Result<Vec<_>>>()?;
            let s = rmia::rmia_scores(
                &target_all.confidence[..n2],
                &reference_confidences,
                membership,
                rmia::DEFAULT_OFFLINE_A,
                rmia::DEFAULT_GAMMA,
            )?;
            threshold("rmia", &s, &mut split_rng)?;
        }
    }
    if let (Some(run), Some(s)) = (&canary_run, &canary_scored) {
        let outcome = one_run_outcome(run, s, &recipe, params)?;
        attacks.insert("one_run".into(), AttackOutcome::OneRun(outcome));
    }
    if let Some(r) = attribute_report {
        attacks.insert("attribute".into(), AttackOutcome::Attribute(r));
    }

    let (best_attack, best) = attacks
        .iter()
        .map(|(k, v)| (k.clone(), v.epsilon_lower_bound()))
        .fold(
            (String::new(), 0.0),
            |acc, x| if x.1 > acc.1 { x } else { acc },
        );
    let violations: Vec<String> = attacks
        .iter()
        .filter(|(_, v)| {
            let theoretical = match v {
                AttackOutcome::OneRun(o) => o.epsilon_theoretical,
                AttackOutcome::Threshold(_) | AttackOutcome::Attribute(_) => theory.epsilon,
            };
            theoretical.is_some_and(|t| v.epsilon_lower_bound() > t)
        })
        .map(|(k, _)| k.clone())
        .collect();
    let members_n = pop.target_size;
    let (train_logits, holdout_logits) =
        target.logits[..n2 * target.classes].split_at(members_n * target.classes);
    Ok(Some(AuditReport {
        dataset: data.name.clone(),
        target_size: cfg.target_size,
        reference_models: membership.as_ref().map(Vec::len),
        canaries: canary_run.as_ref().map(|r| r.plan.len()),
        confidence: cfg.confidence,
        seeded: rng.is_seeded(),
        epsilon_theoretical: theory.epsilon,
        delta: recipe.delta,
        roc_bound: theory.roc_bound()?,
        theory,
        target_train_accuracy: accuracy(train_logits, target.classes, &audit_set.y[..members_n]),
        target_holdout_accuracy: accuracy(
            holdout_logits,
            target.classes,
            &audit_set.y[members_n..],
        ),
        attacks,
        epsilon_lower_bound: best,
        best_attack,
        consistent: violations.is_empty(),
        violations,
        models_trained: models_total - from_cache,
        models_from_cache: from_cache,
        cache_dir: cache.map(|c| c.dir().display().to_string()),
        training_seconds,
        wall_seconds: started.elapsed().as_secs_f64(),
    }))
}

/// φ of every reference model (in job order) with their membership, one set per LiRA query:
/// the models scored `eval`, whose rows are the `n2` audit records then each augmented copy.
fn reference_scores(
    refs: &[Scored],
    membership: &[Vec<bool>],
    eval: &Dataset,
    n2: usize,
) -> Result<Vec<ReferenceScores>> {
    if refs.len() != membership.len() {
        return Err(DriverError::Invalid(format!(
            "expected {} reference models, got {}",
            membership.len(),
            refs.len()
        )));
    }
    let phis = refs
        .iter()
        .map(|s| Ok(RecordScores::from_logits(&s.logits, s.classes, &eval.y)?.phi))
        .collect::<Result<Vec<_>>>()?;
    (0..eval.n / n2.max(1))
        .map(|a| {
            let per_model: Vec<Vec<f64>> = phis
                .iter()
                .map(|p| p[a * n2..(a + 1) * n2].to_vec())
                .collect();
            Ok(ReferenceScores::from_models(&per_model, membership)?)
        })
        .collect()
}

/// The sum over LiRA queries of `score(target φ on query a, reference scores on query a)`:
/// per-query Gaussians with a diagonal covariance, so log-likelihood ratios add.
/// `target_phi` holds the target's φ on the `n2` audit records, then on each copy.
fn summed_over_queries(
    target_phi: &[f64],
    n2: usize,
    refs: &[ReferenceScores],
    score: impl Fn(&[f64], &ReferenceScores) -> crate::Result<Vec<f64>>,
) -> Result<Vec<f64>> {
    let mut total = vec![0.0; n2];
    for (phi, r) in target_phi.chunks(n2.max(1)).zip(refs) {
        total
            .iter_mut()
            .zip(score(phi, r)?)
            .for_each(|(t, v)| *t += v);
    }
    Ok(total)
}

fn one_run_outcome(
    run: &CanaryRun,
    scored: &Scored,
    recipe: &dpml_learn::dpsgd::TrainConfig,
    params: EpsilonBoundParams,
) -> Result<OneRunOutcome> {
    let scores = RecordScores::from_logits(&scored.logits, scored.classes, &run.canaries.y)?;
    let r = one_run::audit_sweep(
        &scores.loss,
        &run.plan.included,
        &run.guess_choices(),
        params.delta(),
        params.confidence(),
    )?;
    Ok(OneRunOutcome {
        epsilon_lower_bound: r.epsilon,
        epsilon_theoretical: Theory::of(recipe, run.train.n)?.epsilon,
        canaries: r.canaries,
        guesses: r.guesses,
        correct: r.correct,
        k_plus: r.k_plus,
        k_minus: r.k_minus,
    })
}
