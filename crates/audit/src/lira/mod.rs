//! The likelihood-ratio attack (LiRA) of Carlini et al. (2022) on logit-scaled confidences
//! `φ` (see [`crate::logits::logit_scaled_confidence`]).
//!
//! For every target example, reference models trained with it (IN) and without it (OUT) give
//! samples of `φ`; LiRA fits a Gaussian to each and scores the target model's `φ`:
//!
//! - online: `log N(φ; μ_in, σ²_in) − log N(φ; μ_out, σ²_out)`;
//! - offline (OUT models only, one-sided): `−log P[Z > φ]` with `Z ~ N(μ_out, σ²_out)`
//!   ([`OfflineStatistic::NegLogSurvival`], the default), or the CDF `P[Z ≤ φ]`
//!   ([`OfflineStatistic::Cdf`]) as in the paper. Both rank examples identically; the log form
//!   keeps distinct values far in the tail, where the CDF rounds to 1.
//!
//! With few reference models per-example variances are noisy; [`Variance::Global`] uses one
//! pooled within-example variance for all examples (the paper's "fixed variance" option):
//! `σ² = Σ_i Σ_k (φ_ik − μ_i)² / Σ_i (n_i − 1)`, separately for IN and OUT. Variances are
//! floored at [`VARIANCE_FLOOR`] so identical reference scores do not divide by zero.
//! Higher scores mean "more likely a member", ready for [`crate::roc`].
//!
//! # Citations
//! N. Carlini, S. Chien, M. Nasr, S. Song, A. Terzis, F. Tramèr, "Membership Inference Attacks
//! From First Principles", IEEE S&P 2022 (Algorithm 1; online and offline variants).
//!
//! # Errors
//! K = 0 reference models, ragged shapes, non-finite scores, examples without IN (online) or
//! OUT reference scores, and a pooled variance with no example holding 2 scores are rejected
//! with messages naming the count, example or value.

mod gaussian;
mod membership;

use gaussian::Gaussian;
pub use membership::balanced_membership;

use crate::error::{AuditError, Result};
use crate::validate;

/// Smallest variance used for a fitted Gaussian (standard deviation 1e-6 in φ units).
pub const VARIANCE_FLOOR: f64 = 1e-12;

/// How the Gaussians' variances are estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variance {
    /// Each example's own sample variance (the pooled one for an example with a single score).
    /// Noisy below ~64 reference models: at K = 16 [`Variance::Global`] measured about 4× the
    /// TPR at 0.1% FPR on synthetic data (see the tests).
    #[default]
    PerExample,
    /// One pooled within-example variance per kind (IN, OUT), for few reference models.
    Global,
}

/// The offline test statistic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OfflineStatistic {
    /// `−log P[Z > φ]`, `Z ~ N(μ_out, σ²_out)`.
    #[default]
    NegLogSurvival,
    /// `P[Z ≤ φ]`.
    Cdf,
}

/// Reference-model scores `φ` per target example: those from models that trained on it (IN)
/// and those from models that did not (OUT).
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceScores {
    in_scores: Vec<Vec<f64>>,
    out_scores: Vec<Vec<f64>>,
}

impl ReferenceScores {
    /// From K reference models: `phi[k][i]` is model k's φ on example i and
    /// `trained_on[k][i]` whether model k trained on example i.
    ///
    /// # Errors
    /// K = 0, rows of different lengths, or a non-finite score (named by model and example).
    pub fn from_models(phi: &[Vec<f64>], trained_on: &[Vec<bool>]) -> Result<Self> {
        if phi.is_empty() {
            return Err(AuditError::Invalid(
                "reference models K must be at least 1, got 0".into(),
            ));
        }
        if trained_on.len() != phi.len() {
            return Err(AuditError::Invalid(format!(
                "membership rows must match the reference models ({}), got {}",
                phi.len(),
                trained_on.len()
            )));
        }
        let n = phi[0].len();
        let mut in_scores = vec![Vec::new(); n];
        let mut out_scores = vec![Vec::new(); n];
        for (k, (scores, members)) in phi.iter().zip(trained_on).enumerate() {
            if scores.len() != n || members.len() != n {
                return Err(AuditError::Invalid(format!(
                    "reference model {k} must score all {n} examples, got {} scores and {} \
                     membership bits",
                    scores.len(),
                    members.len()
                )));
            }
            validate::finite("reference scores", scores)?;
            for (i, (&s, &m)) in scores.iter().zip(members).enumerate() {
                if m {
                    &mut in_scores[i]
                } else {
                    &mut out_scores[i]
                }
                .push(s);
            }
        }
        Self::from_per_example(in_scores, out_scores)
    }

    /// From per-example lists: `in_scores[i]` and `out_scores[i]` are example i's IN and OUT
    /// reference scores.
    ///
    /// # Errors
    /// Lists of different lengths, no examples, or a non-finite score.
    pub fn from_per_example(in_scores: Vec<Vec<f64>>, out_scores: Vec<Vec<f64>>) -> Result<Self> {
        if in_scores.len() != out_scores.len() {
            return Err(AuditError::Invalid(format!(
                "IN and OUT lists must cover the same examples, got {} and {}",
                in_scores.len(),
                out_scores.len()
            )));
        }
        if in_scores.is_empty() {
            return Err(AuditError::Empty {
                what: "reference scores",
            });
        }
        for s in in_scores.iter().chain(&out_scores) {
            validate::finite("reference scores", s)?;
        }
        Ok(Self {
            in_scores,
            out_scores,
        })
    }

    /// Number of target examples covered.
    pub fn num_examples(&self) -> usize {
        self.in_scores.len()
    }
}

/// Online LiRA scores of the target model's `φ` on each example.
///
/// # Errors
/// See the module docs; also a target list whose length differs from the references'.
pub fn lira_online(
    target_phi: &[f64],
    refs: &ReferenceScores,
    variance: Variance,
) -> Result<Vec<f64>> {
    check_target(target_phi, refs)?;
    let fit_in = fit(&refs.in_scores, variance, "IN")?;
    let fit_out = fit(&refs.out_scores, variance, "OUT")?;
    Ok(target_phi
        .iter()
        .zip(fit_in.iter().zip(&fit_out))
        .map(|(&phi, (g_in, g_out))| g_in.log_pdf(phi) - g_out.log_pdf(phi))
        .collect())
}

/// Offline LiRA scores (OUT reference scores only; IN scores, if any, are ignored).
///
/// # Errors
/// See the module docs; also a target list whose length differs from the references'.
pub fn lira_offline(
    target_phi: &[f64],
    refs: &ReferenceScores,
    variance: Variance,
    statistic: OfflineStatistic,
) -> Result<Vec<f64>> {
    check_target(target_phi, refs)?;
    let fit_out = fit(&refs.out_scores, variance, "OUT")?;
    Ok(target_phi
        .iter()
        .zip(&fit_out)
        .map(|(&phi, g)| match statistic {
            OfflineStatistic::NegLogSurvival => -gaussian::log_sf(g.z(phi)),
            OfflineStatistic::Cdf => gaussian::cdf(g.z(phi)),
        })
        .collect())
}

fn check_target(target_phi: &[f64], refs: &ReferenceScores) -> Result<()> {
    validate::finite_nonempty("target scores", target_phi)?;
    if target_phi.len() != refs.num_examples() {
        return Err(AuditError::Invalid(format!(
            "target scores must cover the reference examples ({}), got {}",
            refs.num_examples(),
            target_phi.len()
        )));
    }
    Ok(())
}

/// One Gaussian per example from its reference scores of one kind. With per-example variances,
/// an example with a single score of this kind falls back to the pooled variance.
fn fit(per_example: &[Vec<f64>], variance: Variance, kind: &str) -> Result<Vec<Gaussian>> {
    if let Some(i) = per_example.iter().position(Vec::is_empty) {
        return Err(AuditError::Invalid(format!(
            "example {i} needs at least 1 {kind} reference score, got 0 (train reference \
             models on a balanced design: see balanced_membership)"
        )));
    }
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let squares = |s: &[f64], m: f64| s.iter().map(|x| (x - m).powi(2)).sum::<f64>();
    let means: Vec<f64> = per_example.iter().map(|s| mean(s)).collect();
    let own = |s: &[f64]| variance == Variance::PerExample && s.len() >= 2;
    let pooled = if per_example.iter().all(|s| own(s)) {
        None
    } else {
        let dof: usize = per_example.iter().map(|s| s.len() - 1).sum();
        if dof == 0 {
            return Err(AuditError::Invalid(format!(
                "a pooled {kind} variance needs an example with 2 {kind} reference scores, \
                 got at most 1 per example"
            )));
        }
        let ss: f64 = per_example
            .iter()
            .zip(&means)
            .map(|(s, &m)| squares(s, m))
            .sum();
        Some(ss / dof as f64)
    };
    Ok(per_example
        .iter()
        .zip(means)
        .map(|(s, m)| {
            let v = match pooled {
                Some(p) if !own(s) => p,
                _ => squares(s, m) / (s.len() - 1).max(1) as f64,
            };
            Gaussian {
                mean: m,
                variance: v.max(VARIANCE_FLOOR),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roc::RocCurve;
    use dpml_mechanisms::DpRng;

    fn normal(rng: &mut DpRng) -> f64 {
        // Box–Muller; 1 − u is in (0, 1] so the log is finite.
        let (u, v) = (1.0 - rng.uniform_f64(), rng.uniform_f64());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// A population where each example has its own difficulty μ_i ~ N(0, 3²) and training on
    /// it raises its φ by 1.5; every model's φ has noise sd 0.5 around that. Returns the
    /// target's φ and membership, and K reference models' φ and membership.
    #[allow(clippy::type_complexity)]
    fn synthetic(
        n: usize,
        k: usize,
        rng: &mut DpRng,
    ) -> (Vec<f64>, Vec<bool>, Vec<Vec<f64>>, Vec<Vec<bool>>) {
        let difficulty: Vec<f64> = (0..n).map(|_| 3.0 * normal(rng)).collect();
        let phi_of = |members: &[bool], rng: &mut DpRng| -> Vec<f64> {
            (0..n)
                .map(|i| difficulty[i] + if members[i] { 1.5 } else { 0.0 } + 0.5 * normal(rng))
                .collect()
        };
        let target_in: Vec<bool> = (0..n).map(|_| rng.below(2) == 1).collect();
        let target = phi_of(&target_in, rng);
        let ins = balanced_membership(k, n, rng).unwrap();
        let phis = ins.iter().map(|m| phi_of(m, rng)).collect();
        (target, target_in, phis, ins)
    }

    fn roc_of(scores: &[f64], members: &[bool]) -> RocCurve {
        let pick = |want: bool| -> Vec<f64> {
            scores
                .iter()
                .zip(members)
                .filter(|&(_, &m)| m == want)
                .map(|(&s, _)| s)
                .collect()
        };
        RocCurve::from_scores(&pick(true), &pick(false)).unwrap()
    }

    #[test]
    fn lira_finds_members_a_global_threshold_misses() {
        // Per example the IN and OUT φ are 1.5/0.5 = 3 sd apart: an exact test has AUC
        // Φ(3/√2) = 0.983 and at FPR 0.1% (z = 3.09) TPR P[N(3,1) > 3.09] = 0.46. Means and
        // variances fitted from 8 reference scores each cost some of that, per-example
        // variances most (their ratio is F(7,7)-noisy, so the extreme likelihood ratios are
        // dominated by variance noise: measured TPR ≈ 0.07 per-example vs ≈ 0.32 pooled, which
        // is why the paper fixes the variance for few reference models). A global threshold
        // on φ sees the 1.5 shift against sd sqrt(9 + 0.25) ≈ 3.04: AUC Φ(1.5/(√2·3.04)) ≈ 0.64
        // and almost nothing at 0.1% FPR. With ~2,000 non-members, 0.1% FPR allows 2 false
        // positives, so the low-FPR point is resolvable.
        let mut rng = DpRng::seeded(17);
        let (target, target_in, phis, ins) = synthetic(4_000, 16, &mut rng);
        let refs = ReferenceScores::from_models(&phis, &ins).unwrap();
        let baseline = roc_of(&target, &target_in);
        let base_tpr = baseline.tpr_at_fpr(0.001).unwrap();
        assert!(
            base_tpr.resolvable && baseline.auc() < 0.7,
            "{}",
            baseline.auc()
        );
        let cases = [
            (
                "online",
                lira_online(&target, &refs, Variance::PerExample).unwrap(),
            ),
            (
                "online global",
                lira_online(&target, &refs, Variance::Global).unwrap(),
            ),
            (
                "offline",
                lira_offline(
                    &target,
                    &refs,
                    Variance::PerExample,
                    OfflineStatistic::default(),
                )
                .unwrap(),
            ),
            (
                "offline global",
                lira_offline(
                    &target,
                    &refs,
                    Variance::Global,
                    OfflineStatistic::default(),
                )
                .unwrap(),
            ),
        ];
        for (name, scores) in cases {
            let roc = roc_of(&scores, &target_in);
            let tpr = roc.tpr_at_fpr(0.001).unwrap().tpr;
            assert!(roc.auc() > 0.95, "{name}: AUC {}", roc.auc());
            assert!(
                tpr > 5.0 * base_tpr.tpr,
                "{name}: {tpr} vs {}",
                base_tpr.tpr
            );
            if name.ends_with("global") {
                assert!(tpr > 0.2, "{name}: {tpr}");
            }
        }
    }

    #[test]
    fn offline_statistics_rank_alike() {
        let refs = ReferenceScores::from_per_example(
            vec![vec![]; 3],
            vec![
                vec![0.0, 1.0, 2.0],
                vec![5.0, 5.5, 6.0],
                vec![-3.0, -2.0, -1.0],
            ],
        )
        .unwrap();
        let phi = [30.0, 5.5, 2.0];
        let neg_log = lira_offline(
            &phi,
            &refs,
            Variance::PerExample,
            OfflineStatistic::NegLogSurvival,
        )
        .unwrap();
        let cdf = lira_offline(&phi, &refs, Variance::PerExample, OfflineStatistic::Cdf).unwrap();
        // Example 1 sits at its OUT mean: CDF 1/2, −log SF = ln 2.
        assert!((cdf[1] - 0.5).abs() < 1e-15 && (neg_log[1] - 2f64.ln()).abs() < 1e-15);
        // φ = 30 is 29 sd out: the CDF rounds to 1 but −log SF still orders it first.
        assert_eq!(cdf[0], 1.0);
        assert!(neg_log[0] > neg_log[2] && neg_log[2] > neg_log[1] && cdf[2] > cdf[1]);
        // Online with IN at the same place as OUT scores 0.
        let same =
            ReferenceScores::from_per_example(vec![vec![1.0, 2.0]], vec![vec![1.0, 2.0]]).unwrap();
        assert_eq!(
            lira_online(&[7.0], &same, Variance::PerExample).unwrap(),
            vec![0.0]
        );
    }

    #[test]
    fn a_single_reference_score_borrows_the_pooled_variance() {
        // Example 0 has one IN score (1.0): its IN variance is the pooled one, from example 1's
        // IN scores 4, 6 (sum of squares 2 over 1 dof) = 2. Its OUT scores 0, 1, 2 have mean 1
        // and variance 1. At φ = 1 the online score is log N(1; 1, 2) − log N(1; 1, 1)
        // = −½ ln 2.
        let refs = ReferenceScores::from_per_example(
            vec![vec![1.0], vec![4.0, 6.0]],
            vec![vec![0.0, 1.0, 2.0], vec![0.0, 2.0]],
        )
        .unwrap();
        let s = lira_online(&[1.0, 5.0], &refs, Variance::PerExample).unwrap();
        assert!((s[0] + 0.5 * 2f64.ln()).abs() < 1e-14, "{s:?}");
    }

    #[test]
    fn bad_input_is_named() {
        let e = ReferenceScores::from_models(&[], &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "reference models K must be at least 1, got 0"
        );
        let e = ReferenceScores::from_models(&[vec![1.0, 2.0]], &[vec![true]]).unwrap_err();
        assert!(e.to_string().contains("1 membership bits"), "{e}");
        let e =
            ReferenceScores::from_models(&[vec![1.0, f64::NAN]], &[vec![true, false]]).unwrap_err();
        assert!(e.to_string().contains("NaN"), "{e}");
        // One model: every example has one score of one kind only.
        let refs = ReferenceScores::from_models(&[vec![1.0, 2.0]], &[vec![true, false]]).unwrap();
        let one_out = ReferenceScores::from_per_example(vec![vec![]], vec![vec![1.0]]).unwrap();
        let e = lira_online(&[0.0, 0.0], &refs, Variance::Global).unwrap_err();
        assert!(
            e.to_string()
                .contains("example 1 needs at least 1 IN reference score, got 0")
        );
        let e = lira_offline(
            &[0.0],
            &one_out,
            Variance::PerExample,
            OfflineStatistic::Cdf,
        )
        .unwrap_err();
        assert!(e.to_string().contains("pooled OUT variance"), "{e}");
        let e = lira_online(&[0.0], &refs, Variance::Global).unwrap_err();
        assert!(e.to_string().contains("got 1"), "{e}");
        let e = lira_online(&[f64::NAN, 0.0], &refs, Variance::Global).unwrap_err();
        assert!(e.to_string().contains("target scores[0]"), "{e}");
    }
}
