//! The black-box audit of the final model with worst-case initial parameters (Annamalai & De
//! Cristofaro 2024): every run starts DP-SGD from the SAME adversarially chosen parameters,
//! half the runs train on D and half on D ∪ {target}, and the auditor sees only each final
//! model's loss on the target. The Clopper–Pearson bound over those runs
//! ([`crate::bounds::split_epsilon_lower_bound`]) is an ε lower bound for the whole training
//! run as released (final model only).
//!
//! The initial parameters are those of a model pretrained without privacy on D (the target
//! excluded), so the other records' gradients are small from the start; the target is one of
//! the data set's records relabelled to the class that model finds least likely (a
//! mislabelled record, whose clipped gradient stays large and points the same way at every
//! step). Both are chosen without the randomness of the audited runs, as the threat model
//! allows: DP-SGD's guarantee holds for every fixed initialisation and every pair D, D ∪ {x}.
//!
//! # Privacy
//! Each run is an independent execution of the mechanism on D or D ∪ {target}; the threshold
//! is chosen on one half of the runs and measured on the other, so the bound holds with the
//! stated confidence whenever the training run is (ε, δ)-DP. The accountant's ε is that of the
//! larger data set's runs (q = B/(N + 1)); the smaller one's is reported too.
//!
//! # Citations
//! M. S. M. S. Annamalai, E. De Cristofaro, "Nearly Tight Black-Box Auditing of
//! Differentially Private Machine Learning", NeurIPS 2024 (arXiv:2405.14106).

use std::time::Instant;

use dpml_data::Dataset;
use dpml_learn::dpsgd::{
    Privacy, StepContext, StepHook, TrainConfig, predict_logits, train, train_hooked,
};
use dpml_mechanisms::DpRng;
use dpml_nn::Sequential;
use rayon::prelude::*;
use serde::Serialize;

use crate::bounds::{EpsilonBound, EpsilonBoundParams, split_epsilon_lower_bound};
use crate::driver::DriverError;
use crate::logits::cross_entropy;
use crate::roc::RocCurve;
use crate::white_box::{GdpEstimate, estimate};

type Result<T> = std::result::Result<T, DriverError>;

/// The settings of the audit.
#[derive(Debug, Clone, PartialEq)]
pub struct WorstCaseInitConfig {
    /// The DP-SGD recipe of every audited run (must be private).
    pub recipe: TrainConfig,
    /// Runs in all (half with the target, half without); at least 4.
    pub runs: usize,
    /// Epochs of the non-private pretraining that gives the initial parameters.
    pub pretrain_epochs: f64,
    /// Confidence of the bound.
    pub confidence: f64,
    /// Threads running trainings side by side.
    pub threads: usize,
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
    /// Index of the record the target was made from, and its new (wrong) label.
    pub target_record: usize,
    /// The target's label (the pretrained model's least likely class for it).
    pub target_label: u32,
    /// The Clopper–Pearson ε lower bound over the runs (threshold on the target's loss).
    pub epsilon_lower_bound: f64,
    /// The bound's details (threshold, counts, rate bounds).
    pub bound: EpsilonBound,
    /// AUC of the loss threshold over all runs (diagnostic).
    pub auc: f64,
    /// A GDP ESTIMATE from the two loss distributions (not a bound).
    pub gdp_estimate: GdpEstimate,
    /// The accountant's ε for the runs with the target (N + 1 records).
    pub epsilon_theoretical: f64,
    /// The accountant's ε for the runs without it.
    pub epsilon_theoretical_without_target: f64,
    /// δ.
    pub delta: f64,
    /// Whether the bound stays at or below the accountant's ε.
    pub consistent: bool,
    /// Seconds for the pretraining and all runs.
    pub seconds: f64,
    /// Threads used.
    pub threads: usize,
}

/// Sets the initial parameters of every run.
struct InitFrom<'a>(&'a [Vec<f32>]);

impl StepHook for InitFrom<'_> {
    fn initialise(&mut self, model: &mut Sequential) {
        for (p, v) in model.params_mut().into_iter().zip(self.0) {
            p.value.copy_from_slice(v);
        }
    }
    fn before_noise(&mut self, _: &StepContext, _: &mut Sequential, _: &mut DpRng) {}
    fn after_noise(&mut self, _: &StepContext, _: &mut Sequential) {}
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

/// Runs the audit on `data` (see the module docs).
///
/// # Errors
/// As [`validate`]; trainer and scoring failures.
pub fn run_worst_case_init_audit(
    cfg: &WorstCaseInitConfig,
    data: &Dataset,
    rng: &mut DpRng,
) -> Result<WorstCaseInitReport> {
    validate(cfg, data)?;
    let started = Instant::now();
    let target_record = rng.below(data.n as u64) as usize;
    let base = without(data, target_record);
    // Pretraining: the same recipe without privacy, on D only.
    let pre_cfg = TrainConfig {
        privacy: Privacy::NonPrivate,
        epochs: cfg.pretrain_epochs,
        ..cfg.recipe.clone()
    };
    let mut pre = train(&pre_cfg, &base, None, rng, &mut |_| {})?;
    let init: Vec<Vec<f32>> = pre.model.params().iter().map(|p| p.value.clone()).collect();
    let d = data.x.len() / data.n;
    let features = &data.x[target_record * d..(target_record + 1) * d];
    let probe = with_record(&base.subset(&[]), features, data.y[target_record]);
    let logits = predict_logits(&mut pre.model, &pre.input, &probe)?;
    let row = logits.data();
    let target_label = (0..row.len())
        .min_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap_or(0) as u32;
    let probe = with_record(&base.subset(&[]), features, target_label);
    let with_target = with_record(&base, features, target_label);

    let half = cfg.runs / 2;
    let seeds: Vec<(bool, DpRng)> = (0..2 * half).map(|i| (i < half, rng.fork())).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cfg.threads)
        .build()
        .map_err(|e| DriverError::Threads {
            threads: cfg.threads,
            message: e.to_string(),
        })?;
    let results: Vec<(bool, f64, f64)> = pool.install(|| {
        seeds
            .into_par_iter()
            .map(|(member, mut run_rng)| {
                let set = if member { &with_target } else { &base };
                let mut out = train_hooked(
                    &cfg.recipe,
                    set,
                    None,
                    &mut run_rng,
                    &mut |_| {},
                    &mut InitFrom(&init),
                )?;
                let z = predict_logits(&mut out.model, &out.input, &probe)?;
                let z: Vec<f64> = z.data().iter().map(|&v| f64::from(v)).collect();
                let loss = cross_entropy(&z, target_label as usize)?;
                Ok((member, -loss, out.report.epsilon.unwrap_or(f64::INFINITY)))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let pick = |m: bool| -> Vec<f64> { results.iter().filter(|r| r.0 == m).map(|r| r.1).collect() };
    let eps_of = |m: bool| {
        results
            .iter()
            .find(|r| r.0 == m)
            .map_or(f64::INFINITY, |r| r.2)
    };
    let (members, non_members) = (pick(true), pick(false));
    let params = EpsilonBoundParams::new(cfg.recipe.delta, cfg.confidence)?;
    let bound = split_epsilon_lower_bound(&members, &non_members, params, rng)?;
    let auc = RocCurve::from_scores(&members, &non_members)?.auc();
    let epsilon_theoretical = eps_of(true);
    Ok(WorstCaseInitReport {
        runs_with_target: members.len(),
        runs_without_target: non_members.len(),
        records: base.n,
        target_record,
        target_label,
        epsilon_lower_bound: bound.epsilon,
        bound,
        auc,
        gdp_estimate: estimate(&members, &non_members, cfg.recipe.delta, 0.95)?,
        epsilon_theoretical,
        epsilon_theoretical_without_target: eps_of(false),
        delta: cfg.recipe.delta,
        consistent: bound.epsilon <= epsilon_theoretical,
        seconds: started.elapsed().as_secs_f64(),
        threads: cfg.threads,
    })
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
    fn bad_settings_are_named() {
        let data = blobs(60);
        let e = validate(&config(4), &data).unwrap_err().to_string();
        assert!(
            e.contains("runs must be at least 8") && e.contains("got 4"),
            "{e}"
        );
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
