//! The black-box audit of the final model with worst-case initial parameters (Annamalai & De
//! Cristofaro 2024): every run starts DP-SGD from the SAME adversarially chosen parameters,
//! half the runs train on D and half on D ∪ {target}, and the auditor sees only each final
//! model's loss on the target.
//!
//! The method, as the paper sets it: the initial parameters are those of a model pretrained
//! without privacy (the paper pretrains on the half of the data set it does not audit; here on
//! D itself, the target excluded, which the threat model allows because D is fixed in both
//! worlds), so that the other records' gradients are small from the start; the target is one
//! of the data set's records relabelled to the class that model finds least likely (a
//! mislabelled record, whose clipped gradient stays large and points the same way at every
//! step); training is full-batch (every record in every step, q = 1: the paper's setting,
//! [`WorstCaseInitConfig::full_batch`]), so the released model is a post-processing of T
//! Gaussian mechanisms and DP-SGD is exactly μ-GDP with μ = √T/σ (runs without the target
//! divide their noisy sums by the same N + 1 as runs with it); the score is the target's
//! loss on the final model; the threshold is chosen on one half of the runs and the
//! Clopper–Pearson rates are measured on the other. The paper reads those rates as a
//! μ lower bound (Nasr et al. 2023) and reports its ε at δ; both that reading
//! ([`crate::white_box::gdp_threshold_bound`]) and the plain (ε, δ) Clopper–Pearson bound
//! ([`crate::bounds::split_epsilon_lower_bound`]) are reported. The runs are many and small
//! (logistic regression or a tiny MLP, a 1,000-record subset by default in the CLI, as the
//! paper's 1,000-record experiments) and are spread over threads and, through a
//! [`Spread`], over MPI ranks.
//!
//! # Privacy
//! Each run is an independent execution of the mechanism on D or D ∪ {target} from a fixed
//! initialisation (DP-SGD's guarantee holds for every initialisation chosen without the
//! private randomness). The Clopper–Pearson (ε, δ) bound holds with the stated confidence for
//! every (ε, δ)-DP training run. The GDP bound holds for every μ-GDP run; its ε reading bounds
//! the accountant's ε when training is full-batch (then DP-SGD is exactly μ-GDP and the
//! accountant's ε is that curve's), which is why the headline
//! [`WorstCaseInitReport::epsilon_lower_bound`] is the GDP reading for full batches and the
//! Clopper–Pearson bound otherwise (chosen before any run, so the confidence stays as stated).
//! All runs use one noise multiplier, calibrated for the larger set; the accountant's ε of
//! each set is reported.
//!
//! # Citations
//! M. S. M. S. Annamalai, E. De Cristofaro, "Nearly Tight Black-Box Auditing of
//! Differentially Private Machine Learning", NeurIPS 2024 (arXiv:2405.14106); M. Nasr et al.,
//! "Tight Auditing of Differentially Private Machine Learning", USENIX Security 2023.

use std::time::Instant;

use dpml_accounting::gdp::mu_for;
use dpml_data::Dataset;
use dpml_learn::dpsgd::{
    AccountantKind, Privacy, StepContext, StepHook, TrainConfig, predict_logits, train,
    train_hooked,
};
use dpml_mechanisms::DpRng;
use dpml_nn::Sequential;
use rayon::prelude::*;
use serde::Serialize;

use crate::bounds::{EpsilonBound, EpsilonBoundParams, split_epsilon_lower_bound};
use crate::driver::config::MAX_MODELS;
use crate::driver::theory::{Theory, resolve_recipe};
use crate::driver::{Alone, DriverError, Scored, Spread};
use crate::logits::cross_entropy;
use crate::roc::RocCurve;
use crate::white_box::{GdpEstimate, GdpThresholdBound, estimate, gdp_threshold_bound};

type Result<T> = std::result::Result<T, DriverError>;

/// Expected batch of the non-private pretraining (minibatches, so that it converges).
const PRETRAIN_BATCH: usize = 64;

/// The settings of the audit.
#[derive(Debug, Clone, PartialEq)]
pub struct WorstCaseInitConfig {
    /// The DP-SGD recipe of every audited run (must be private).
    pub recipe: TrainConfig,
    /// Runs in all (half with the target, half without); at least 8.
    pub runs: usize,
    /// Epochs of the non-private pretraining that gives the initial parameters.
    pub pretrain_epochs: f64,
    /// Confidence of the bound.
    pub confidence: f64,
    /// Threads running trainings side by side.
    pub threads: usize,
    /// Train every run on its whole set each step (B = the run's records, q = 1), as the
    /// paper does; the recipe's batch size is then ignored and T = its epochs.
    pub full_batch: bool,
}

/// What the audit found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorstCaseInitReport {
    /// Runs with the target.
    pub runs_with_target: usize,
    /// Runs without it.
    pub runs_without_target: usize,
    /// Records of D (without the target).
    pub records: usize,
    /// Index of the record the target was made from.
    pub target_record: usize,
    /// The target's label (the pretrained model's least likely class for it).
    pub target_label: u32,
    /// The headline ε lower bound: the GDP bound's ε for full batches (exactly GDP), the
    /// Clopper–Pearson bound otherwise (see the module docs).
    pub epsilon_lower_bound: f64,
    /// The Clopper–Pearson (ε, δ) bound over the runs (threshold on the target's loss).
    pub epsilon_lower_bound_clopper_pearson: f64,
    /// The Clopper–Pearson bound's details (threshold, counts, rate bounds).
    pub bound: EpsilonBound,
    /// The μ lower bound from the same runs (Nasr et al. 2023) and its ε at δ.
    pub gdp_bound: GdpThresholdBound,
    /// AUC of the loss threshold over all runs (diagnostic).
    pub auc: f64,
    /// A GDP ESTIMATE from the two loss distributions (not a bound).
    pub gdp_estimate: GdpEstimate,
    /// The accountant's ε for the runs with the target (N + 1 records).
    pub epsilon_theoretical: f64,
    /// The accountant's ε for the runs without it.
    pub epsilon_theoretical_without_target: f64,
    /// The μ whose GDP curve has the accountant's ε at δ.
    pub mu_theoretical: f64,
    /// σ of every run.
    pub noise_multiplier: f64,
    /// q of the runs with the target.
    pub sampling_rate: f64,
    /// T.
    pub steps: u64,
    /// Whether the runs were full-batch.
    pub full_batch: bool,
    /// δ.
    pub delta: f64,
    /// Whether the headline bound stays at or below the accountant's ε.
    pub consistent: bool,
    /// Seconds for the pretraining and all runs.
    pub seconds: f64,
    /// Threads used (in this process).
    pub threads: usize,
}

/// Sets the initial parameters of every run, and makes every run divide its noisy gradient sum
/// by one public number.
///
/// DP-SGD divides each step's noisy sum by the expected batch q·N. With full batches that is
/// each world's own N: N + 1 with the target, N without, so the two worlds would differ by a
/// rescale of the whole update as well as by the target's gradient, a difference the
/// accountant does not model (it shows on a handful of records, where it is not lost in the
/// noise). Runs without the target scale the noisy sum by N/(N + 1) after the noise, so that
/// both divide by N + 1 as dpml's training divides by its public batch size. Scaling the
/// released noisy sum is post-processing: the mechanism audited is unchanged.
struct InitFrom<'a> {
    init: &'a [Vec<f32>],
    /// What the noisy sum is multiplied by (1 but in runs without the target on full batches).
    rescale: f32,
}

impl StepHook for InitFrom<'_> {
    fn initialise(&mut self, model: &mut Sequential) {
        for (p, v) in model.params_mut().into_iter().zip(self.init) {
            p.value.copy_from_slice(v);
        }
    }
    fn before_noise(&mut self, _: &StepContext, _: &mut Sequential, _: &mut DpRng) {}
    fn after_noise(&mut self, _: &StepContext, model: &mut Sequential) {
        if self.rescale != 1.0 {
            for p in model.params_mut() {
                p.grad.iter_mut().for_each(|g| *g *= self.rescale);
            }
        }
    }
}

/// `data` without record `skip`.
fn without(data: &Dataset, skip: usize) -> Dataset {
    let idx: Vec<usize> = (0..data.n).filter(|&i| i != skip).collect();
    data.subset(&idx)
}

/// `data` with one more record: `features` labelled `label`.
fn with_record(data: &Dataset, features: &[f32], label: u32) -> Dataset {
    let mut d = data.clone();
    d.x.extend_from_slice(features);
    d.y.push(label);
    d.n += 1;
    d
}

/// Checks the settings.
///
/// # Errors
/// [`DriverError::Invalid`] naming the value.
pub fn validate(cfg: &WorstCaseInitConfig, data: &Dataset) -> Result<()> {
    let bad = |m: String| Err(DriverError::Invalid(m));
    if cfg.runs < 8 {
        return bad(format!(
            "runs must be at least 8 (2 per half with and without the target), got {}",
            cfg.runs
        ));
    }
    if cfg.runs > MAX_MODELS {
        return bad(format!(
            "runs must be at most {MAX_MODELS}, got {}",
            cfg.runs
        ));
    }
    if data.n < 2 {
        return bad(format!(
            "the audit needs at least 2 records, got {}",
            data.n
        ));
    }
    if !(cfg.pretrain_epochs.is_finite() && cfg.pretrain_epochs > 0.0) {
        return bad(format!(
            "pretrain-epochs must be finite and > 0, got {}",
            cfg.pretrain_epochs
        ));
    }
    if cfg.threads == 0 {
        return bad("threads must be at least 1, got 0".into());
    }
    if matches!(cfg.recipe.privacy, Privacy::NonPrivate) {
        return bad(
            "attack \"worst-case-init\" audits DP-SGD: give --epsilon or --noise-multiplier".into(),
        );
    }
    cfg.recipe.validate()?;
    cfg.recipe.validate_data(data, None)?;
    Ok(())
}

/// The worst-case start: the pretrained parameters and the mislabelled target.
struct Start {
    init: Vec<Vec<f32>>,
    target_record: usize,
    target_label: u32,
    base: Dataset,
    with_target: Dataset,
    probe: Dataset,
}

/// Pretrains on D (the target excluded) and relabels the target to the pretrained model's
/// least likely class.
fn craft(cfg: &WorstCaseInitConfig, data: &Dataset, rng: &mut DpRng) -> Result<Start> {
    let target_record = rng.below(data.n as u64) as usize;
    let base = without(data, target_record);
    let pre_cfg = TrainConfig {
        privacy: Privacy::NonPrivate,
        epochs: cfg.pretrain_epochs,
        batch_size: PRETRAIN_BATCH.min(base.n),
        ..cfg.recipe.clone()
    };
    let mut pre = train(&pre_cfg, &base, None, rng, &mut |_| {})?;
    let init = pre.model.params().iter().map(|p| p.value.clone()).collect();
    let d = data.x.len() / data.n;
    let features = &data.x[target_record * d..(target_record + 1) * d];
    let probe = with_record(&base.subset(&[]), features, data.y[target_record]);
    let logits = predict_logits(&mut pre.model, &pre.input, &probe)?;
    let row = logits.data();
    let target_label = (0..row.len())
        .min_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap_or(0) as u32;
    Ok(Start {
        init,
        target_record,
        target_label,
        probe: with_record(&base.subset(&[]), features, target_label),
        with_target: with_record(&base, features, target_label),
        base,
    })
}

/// The recipe on `set`: full batch if asked.
fn sized(cfg: &WorstCaseInitConfig, set: &Dataset) -> TrainConfig {
    TrainConfig {
        batch_size: if cfg.full_batch {
            set.n
        } else {
            cfg.recipe.batch_size
        },
        ..cfg.recipe.clone()
    }
}

/// The recipe of a run on `set` with σ fixed to `privacy`. Each run's own ε report is never
/// read ([`Theory`] gives the accountant's once), so the runs report with the cheap RDP
/// accountant: PLD per run cost more than the training itself.
fn run_recipe(cfg: &WorstCaseInitConfig, set: &Dataset, privacy: Privacy) -> TrainConfig {
    TrainConfig {
        accountant: AccountantKind::Rdp,
        privacy,
        ..sized(cfg, set)
    }
}

/// Runs the audit on `data` in this process alone (see the module docs).
///
/// # Errors
/// As [`run_worst_case_init_audit_spread`].
pub fn run_worst_case_init_audit(
    cfg: &WorstCaseInitConfig,
    data: &Dataset,
    rng: &mut DpRng,
) -> Result<WorstCaseInitReport> {
    run_worst_case_init_audit_spread(cfg, data, rng, &Alone)?
        .ok_or_else(|| DriverError::Invalid("the audit runs were not gathered".into()))
}

/// Runs the audit with the runs divided by `spread` (every process passes the same `rng`
/// state, so all draw the same target, initialisation and run keys); the reporting process
/// gets the report, the others `None`.
///
/// # Errors
/// As [`validate`]; trainer, gathering and scoring failures.
pub fn run_worst_case_init_audit_spread(
    cfg: &WorstCaseInitConfig,
    data: &Dataset,
    rng: &mut DpRng,
    spread: &dyn Spread,
) -> Result<Option<WorstCaseInitReport>> {
    validate(cfg, data)?;
    let started = Instant::now();
    let start = craft(cfg, data, rng)?;
    // One σ for every run, calibrated once on the larger set.
    let larger = resolve_recipe(&sized(cfg, &start.with_target), start.with_target.n)?;
    let recipe_in = run_recipe(cfg, &start.with_target, larger.privacy);
    let recipe_out = run_recipe(cfg, &start.base, larger.privacy);
    // The accountant's claims, with the recipe's own accountant.
    let claim = |set: &Dataset| {
        let r = TrainConfig {
            privacy: larger.privacy,
            ..sized(cfg, set)
        };
        Theory::of(&r, set.n)
    };
    let theory_in = claim(&start.with_target)?;
    let theory_out = claim(&start.base)?;

    // Full batches: runs without the target divide by N + 1 too (see [`InitFrom`]).
    let out_rescale = if cfg.full_batch {
        (start.base.n as f64 / start.with_target.n as f64) as f32
    } else {
        1.0
    };
    let half = cfg.runs / 2;
    let n = 2 * half;
    // Members first: the GDP bound splits by index parity, so both halves hold both kinds.
    let jobs: Vec<(usize, bool, DpRng)> = (0..n).map(|i| (i, i < half, rng.fork())).collect();
    let mine: Vec<_> = jobs.into_iter().filter(|j| spread.takes(j.0, n)).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cfg.threads)
        .build()
        .map_err(|e| DriverError::Threads {
            threads: cfg.threads,
            message: e.to_string(),
        })?;
    let scored: Vec<(usize, Scored)> = pool.install(|| {
        mine.into_par_iter()
            .map(|(i, member, mut run_rng)| {
                let (set, recipe, rescale) = if member {
                    (&start.with_target, &recipe_in, 1.0)
                } else {
                    (&start.base, &recipe_out, out_rescale)
                };
                let mut out = train_hooked(
                    recipe,
                    set,
                    None,
                    &mut run_rng,
                    &mut |_| {},
                    &mut InitFrom {
                        init: &start.init,
                        rescale,
                    },
                )?;
                let z = predict_logits(&mut out.model, &out.input, &start.probe)?;
                let role = format!("{} {i}", if member { "with target" } else { "without" });
                Ok((
                    i,
                    Scored {
                        role,
                        logits: z.data().to_vec(),
                        classes: data.n_classes,
                        from_cache: false,
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let Some(all) = spread.gather(n, scored)? else {
        return Ok(None);
    };
    let included: Vec<bool> = (0..n).map(|i| i < half).collect();
    let scores = all
        .iter()
        .map(|s| {
            let z: Vec<f64> = s.logits.iter().map(|&v| f64::from(v)).collect();
            Ok(-cross_entropy(&z, start.target_label as usize)?)
        })
        .collect::<Result<Vec<f64>>>()?;
    let (members, non_members) = (&scores[..half], &scores[half..]);
    let delta = cfg.recipe.delta;
    let params = EpsilonBoundParams::new(delta, cfg.confidence)?;
    let bound = split_epsilon_lower_bound(members, non_members, params, rng)?;
    let gdp_bound = gdp_threshold_bound(&scores, &included, delta, cfg.confidence)?;
    let auc = RocCurve::from_scores(members, non_members)?.auc();
    let epsilon_theoretical = theory_in.epsilon.unwrap_or(f64::INFINITY);
    let epsilon_lower_bound = if cfg.full_batch {
        gdp_bound.epsilon_if_gaussian
    } else {
        bound.epsilon
    };
    let noise_multiplier = match larger.privacy {
        Privacy::NoiseMultiplier(s) => s,
        _ => f64::NAN,
    };
    Ok(Some(WorstCaseInitReport {
        runs_with_target: members.len(),
        runs_without_target: non_members.len(),
        records: start.base.n,
        target_record: start.target_record,
        target_label: start.target_label,
        epsilon_lower_bound,
        epsilon_lower_bound_clopper_pearson: bound.epsilon,
        bound,
        gdp_bound,
        auc,
        gdp_estimate: estimate(members, non_members, delta, 0.95)?,
        epsilon_theoretical,
        epsilon_theoretical_without_target: theory_out.epsilon.unwrap_or(f64::INFINITY),
        mu_theoretical: mu_for(epsilon_theoretical, delta)?,
        noise_multiplier,
        sampling_rate: theory_in.sampling_rate,
        steps: theory_in.steps,
        full_batch: cfg.full_batch,
        delta,
        consistent: epsilon_lower_bound <= epsilon_theoretical,
        seconds: started.elapsed().as_secs_f64(),
        threads: cfg.threads,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blobs(n: usize) -> Dataset {
        let mut rng = DpRng::seeded(2);
        let y: Vec<u32> = (0..n).map(|i| (i % 2) as u32).collect();
        Dataset {
            name: "blobs".into(),
            x: y.iter()
                .flat_map(|&c| {
                    let shift = if c == 1 { 1.0 } else { -1.0 };
                    (0..3)
                        .map(|_| (shift + rng.uniform_f64() - 0.5) as f32)
                        .collect::<Vec<_>>()
                })
                .collect(),
            n,
            record_shape: vec![3],
            y,
            n_classes: 2,
            feature_names: (0..3).map(|i| format!("f{i}")).collect(),
            class_names: vec!["a".into(), "b".into()],
            feature_range: None,
        }
    }

    fn config(runs: usize) -> WorstCaseInitConfig {
        WorstCaseInitConfig {
            recipe: TrainConfig {
                model: "logreg".into(),
                epochs: 2.0,
                batch_size: 10,
                lr: 0.5,
                privacy: Privacy::NoiseMultiplier(1.0),
                ..TrainConfig::default()
            },
            runs,
            pretrain_epochs: 2.0,
            confidence: 0.95,
            threads: 2,
            full_batch: false,
        }
    }

    #[test]
    fn runs_from_a_shared_start_and_stays_below_the_accountant() {
        let data = blobs(60);
        let r = run_worst_case_init_audit(&config(40), &data, &mut DpRng::seeded(4)).unwrap();
        assert_eq!((r.runs_with_target, r.runs_without_target), (20, 20));
        assert_eq!(r.records, 59);
        assert!(r.epsilon_theoretical.is_finite() && r.epsilon_theoretical > 0.0);
        assert!(r.consistent, "{r:?}");
        // The mislabelled target is fitted when present: members have the lower losses.
        assert!(r.auc > 0.5, "{r:?}");
    }

    #[test]
    fn full_batch_runs_are_exactly_gaussian_and_stay_below_the_accountant() {
        let data = blobs(60);
        let cfg = WorstCaseInitConfig {
            full_batch: true,
            ..config(40)
        };
        let r = run_worst_case_init_audit(&cfg, &data, &mut DpRng::seeded(5)).unwrap();
        assert!(r.full_batch && r.sampling_rate == 1.0, "{r:?}");
        // Full batches: T = epochs and μ = √T/σ is the accountant's GDP claim.
        assert_eq!(r.steps, 2);
        let mu = (r.steps as f64).sqrt() / r.noise_multiplier;
        assert!((mu - r.mu_theoretical).abs() < 0.02 * mu, "{mu} vs {r:?}");
        assert_eq!(r.epsilon_lower_bound, r.gdp_bound.epsilon_if_gaussian);
        assert!(r.gdp_bound.mu_lower_bound <= r.mu_theoretical, "{r:?}");
        assert!(r.consistent && r.auc > 0.5, "{r:?}");
    }

    #[test]
    fn bad_settings_are_named() {
        let data = blobs(60);
        let e = validate(&config(4), &data).unwrap_err().to_string();
        assert!(
            e.contains("runs must be at least 8") && e.contains("got 4"),
            "{e}"
        );
        let e = validate(&config(usize::MAX), &data)
            .unwrap_err()
            .to_string();
        assert!(e.contains("runs must be at most 10000"), "{e}");
        let mut open = config(10);
        open.recipe.privacy = Privacy::NonPrivate;
        assert!(
            validate(&open, &data)
                .unwrap_err()
                .to_string()
                .contains("--epsilon")
        );
    }
}
