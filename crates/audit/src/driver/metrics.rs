//! The metrics of one threshold attack on member and non-member scores: ROC, AUC, TPR at low
//! FPR, attacker advantage, and the empirical ε lower bound (Clopper–Pearson, threshold chosen
//! on a random half and measured on the other).

use std::collections::BTreeMap;

use dpml_mechanisms::DpRng;
use serde::Serialize;

use crate::bounds::{EpsilonBoundParams, split_epsilon_lower_bound};
use crate::error::Result;
use crate::roc::RocCurve;

/// The FPR targets reported, with their JSON keys.
pub const FPR_TARGETS: [(&str, f64); 3] = [("0.01", 0.01), ("0.001", 0.001), ("0", 0.0)];

/// What one threshold attack achieved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttackMetrics {
    /// Area under the ROC curve.
    pub auc: f64,
    /// TPR at FPR 1%, 0.1% and 0 (keys "0.01", "0.001", "0").
    pub tpr_at_fpr: BTreeMap<String, f64>,
    /// Whether each FPR target can be resolved with this many non-members (at least one false
    /// positive allowed).
    pub fpr_resolvable: BTreeMap<String, bool>,
    /// Attacker advantage max(TPR − FPR).
    pub advantage: f64,
    /// ε lower bound holding with the stated confidence.
    pub epsilon_lower_bound: f64,
    /// The plug-in ε of the chosen threshold on the evaluation half (an estimate, not a bound).
    pub epsilon_estimate: f64,
    /// Member scores.
    pub members: usize,
    /// Non-member scores.
    pub non_members: usize,
    /// The ROC's upper envelope as (FPR, TPR) points, for plots.
    #[serde(skip)]
    pub roc: Vec<(f64, f64)>,
}

impl AttackMetrics {
    /// Metrics of scores where higher means "member".
    ///
    /// # Errors
    /// Empty or non-finite score sets, fewer than 2 scores on a side (the split bound needs
    /// one per half).
    pub fn from_scores(
        members: &[f64],
        non_members: &[f64],
        params: EpsilonBoundParams,
        rng: &mut DpRng,
    ) -> Result<Self> {
        let roc = RocCurve::from_scores(members, non_members)?;
        let mut tpr_at_fpr = BTreeMap::new();
        let mut fpr_resolvable = BTreeMap::new();
        for (key, target) in FPR_TARGETS {
            let p = roc.tpr_at_fpr(target)?;
            tpr_at_fpr.insert(key.to_string(), p.tpr);
            fpr_resolvable.insert(key.to_string(), p.resolvable);
        }
        let bound = split_epsilon_lower_bound(members, non_members, params, rng)?;
        Ok(Self {
            auc: roc.auc(),
            tpr_at_fpr,
            fpr_resolvable,
            advantage: roc.advantage().0,
            epsilon_lower_bound: bound.epsilon,
            epsilon_estimate: bound.epsilon_point,
            members: roc.members(),
            non_members: roc.non_members(),
            roc: envelope(&roc),
        })
    }

    /// TPR at the given key of [`FPR_TARGETS`] (NaN if absent).
    pub fn tpr(&self, key: &str) -> f64 {
        self.tpr_at_fpr.get(key).copied().unwrap_or(f64::NAN)
    }
}

/// For each distinct FPR the largest TPR (the points are in increasing FPR and TPR order, so
/// the last point of each FPR run).
fn envelope(roc: &RocCurve) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for p in roc.points() {
        match out.last_mut() {
            Some(last) if last.0 == p.fpr => last.1 = last.1.max(p.tpr),
            _ => out.push((p.fpr, p.tpr)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separable_scores_give_perfect_metrics() {
        // 400 members above 400 non-members: AUC 1, TPR 1 at FPR 0. The threshold is chosen on
        // 200 + 200 (the smallest member score of that half) and measured on the other
        // 200 + 200, where FPR = 0 and the few members below the threshold are missed (their
        // number is about geometric with mean 1). Clopper–Pearson uppers at 1 − 0.05/2 for 0 of
        // 200 are 1 − 0.025^(1/200) ≈ 0.0183, so ε ≤ ln(0.98/0.0183) ≈ 3.98 (δ = 0), and with at
        // most 5 misses (probability ≈ 1 − 2^−6) ε ≥ ln((1 − u₅)/u₀).
        let members: Vec<f64> = (0..400).map(|i| 1000.0 + i as f64).collect();
        let non: Vec<f64> = (0..400).map(|i| i as f64).collect();
        let p = EpsilonBoundParams::new(0.0, 0.95).unwrap();
        let m = AttackMetrics::from_scores(&members, &non, p, &mut DpRng::seeded(1)).unwrap();
        assert_eq!(m.auc, 1.0);
        assert_eq!(m.tpr("0"), 1.0);
        assert_eq!(m.advantage, 1.0);
        let u0 = crate::bounds::clopper_pearson_upper(0, 200, 0.975).unwrap();
        let u5 = crate::bounds::clopper_pearson_upper(5, 200, 0.975).unwrap();
        let eps = m.epsilon_lower_bound;
        assert!(eps <= ((1.0 - u0) / u0).ln() + 1e-9, "{eps}");
        assert!(eps >= ((1.0 - u0) / u5).ln(), "{eps}");
        assert!(m.fpr_resolvable["0.01"] && !m.fpr_resolvable["0.001"]);
        assert_eq!(m.roc.first(), Some(&(0.0, 1.0)));
        assert_eq!(m.roc.last(), Some(&(1.0, 1.0)));
    }
}
