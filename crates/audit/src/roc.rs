//! ROC curves and the summary metrics of a membership-inference attack: AUC, TPR at a low FPR,
//! and attacker advantage.
//!
//! Convention: a score is "higher = more likely a member", and the attack with threshold `t`
//! says "member" exactly when `score >= t`. The curve has one point per distinct score (plus
//! the point `t = +∞`, where nobody is called a member), so tied scores move together and the
//! curve only contains operating points a deterministic threshold can reach. Between two points
//! the curve is the straight segment (the ROC of randomising between the two thresholds), which
//! makes the trapezoidal AUC equal the Mann–Whitney statistic with ties counted one half.

use crate::error::{AuditError, Result};
use crate::validate;

/// One operating point of a threshold attack.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RocPoint {
    /// "Member" iff `score >= threshold`; `+∞` for the point where nobody is called a member.
    pub threshold: f64,
    /// Members called members (true positives).
    pub true_positives: usize,
    /// Non-members called members (false positives).
    pub false_positives: usize,
    /// True-positive rate `true_positives / members`.
    pub tpr: f64,
    /// False-positive rate `false_positives / non_members`.
    pub fpr: f64,
}

/// TPR at a target FPR, with what was actually achieved.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LowFprPoint {
    /// The requested FPR bound.
    pub target_fpr: f64,
    /// The largest TPR among thresholds whose FPR is ≤ the target.
    pub tpr: f64,
    /// The FPR of the threshold achieving that TPR (≤ target).
    pub fpr: f64,
    /// That threshold (`+∞` when only the empty attack meets the target).
    pub threshold: f64,
    /// Whether the sample can resolve the target: `target = 0`, or at least one false
    /// positive is allowed (`target · non_members ≥ 1`). When false the value is the TPR at
    /// FPR 0 and says little about the target.
    pub resolvable: bool,
}

/// The ROC curve of one attack on one set of member and non-member scores.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RocCurve {
    points: Vec<RocPoint>,
    members: usize,
    non_members: usize,
}

/// Counts of a threshold attack evaluated on a (possibly different) set of scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Confusion {
    /// Members called members.
    pub true_positives: usize,
    /// Non-members called members.
    pub false_positives: usize,
    /// Number of member scores.
    pub members: usize,
    /// Number of non-member scores.
    pub non_members: usize,
}

impl Confusion {
    /// Evaluates the attack "member iff `score >= threshold`" on the given scores.
    ///
    /// # Errors
    /// [`AuditError::Empty`] for an empty score set, [`AuditError::NonFinite`] for a NaN or
    /// infinite score, [`AuditError::Invalid`] for a NaN threshold.
    pub fn at_threshold(members: &[f64], non_members: &[f64], threshold: f64) -> Result<Self> {
        validate::finite_nonempty("member scores", members)?;
        validate::finite_nonempty("non-member scores", non_members)?;
        if threshold.is_nan() {
            return Err(AuditError::Invalid("threshold must not be NaN".into()));
        }
        let count = |s: &[f64]| s.iter().filter(|&&x| x >= threshold).count();
        Ok(Self {
            true_positives: count(members),
            false_positives: count(non_members),
            members: members.len(),
            non_members: non_members.len(),
        })
    }

    /// Members called non-members.
    pub fn false_negatives(&self) -> usize {
        self.members - self.true_positives
    }

    /// False-positive rate.
    pub fn fpr(&self) -> f64 {
        self.false_positives as f64 / self.non_members as f64
    }

    /// False-negative rate.
    pub fn fnr(&self) -> f64 {
        self.false_negatives() as f64 / self.members as f64
    }
}

impl RocCurve {
    /// Builds the exact ROC curve from member and non-member scores (higher = member).
    ///
    /// # Errors
    /// [`AuditError::Empty`] when either set is empty; [`AuditError::NonFinite`] naming the
    /// first NaN or infinite score.
    pub fn from_scores(members: &[f64], non_members: &[f64]) -> Result<Self> {
        validate::finite_nonempty("member scores", members)?;
        validate::finite_nonempty("non-member scores", non_members)?;
        let mut all: Vec<(f64, bool)> = members
            .iter()
            .map(|&s| (s, true))
            .chain(non_members.iter().map(|&s| (s, false)))
            .collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0));
        let (np, nn) = (members.len(), non_members.len());
        let point = |threshold, tp: usize, fp: usize| RocPoint {
            threshold,
            true_positives: tp,
            false_positives: fp,
            tpr: tp as f64 / np as f64,
            fpr: fp as f64 / nn as f64,
        };
        let mut points = vec![point(f64::INFINITY, 0, 0)];
        let (mut tp, mut fp) = (0, 0);
        let mut i = 0;
        while i < all.len() {
            let threshold = all[i].0;
            // Take every score equal to this threshold at once: ties move together.
            while i < all.len() && all[i].0 == threshold {
                if all[i].1 {
                    tp += 1;
                } else {
                    fp += 1;
                }
                i += 1;
            }
            points.push(point(threshold, tp, fp));
        }
        Ok(Self {
            points,
            members: np,
            non_members: nn,
        })
    }

    /// The operating points, from threshold `+∞` (0, 0) down to the smallest score (1, 1).
    pub fn points(&self) -> &[RocPoint] {
        &self.points
    }

    /// Number of member scores.
    pub fn members(&self) -> usize {
        self.members
    }

    /// Number of non-member scores.
    pub fn non_members(&self) -> usize {
        self.non_members
    }

    /// Area under the curve (trapezoidal over the exact points). Equals the probability that a
    /// random member outscores a random non-member, ties counting one half (Mann–Whitney U
    /// divided by `members · non_members`).
    pub fn auc(&self) -> f64 {
        // Sum in integer units of (1/members)(1/non_members)/2 to avoid rounding drift.
        let twice: u128 = self
            .points
            .windows(2)
            .map(|w| {
                let dfp = (w[1].false_positives - w[0].false_positives) as u128;
                dfp * (w[0].true_positives + w[1].true_positives) as u128
            })
            .sum();
        twice as f64 / (2.0 * self.members as f64 * self.non_members as f64)
    }

    /// The largest TPR among thresholds whose FPR is ≤ `target_fpr` (no interpolation).
    ///
    /// # Errors
    /// [`AuditError::OutOfRange`] unless `0 ≤ target_fpr ≤ 1`.
    pub fn tpr_at_fpr(&self, target_fpr: f64) -> Result<LowFprPoint> {
        if !(0.0..=1.0).contains(&target_fpr) {
            return Err(AuditError::OutOfRange {
                name: "target FPR",
                range: "[0, 1]",
                value: target_fpr,
            });
        }
        // FPR and TPR are non-decreasing along the curve: the last point within the target wins.
        let best = self
            .points
            .iter()
            .take_while(|p| p.fpr <= target_fpr)
            .last()
            .unwrap_or(&self.points[0]);
        Ok(LowFprPoint {
            target_fpr,
            tpr: best.tpr,
            fpr: best.fpr,
            threshold: best.threshold,
            resolvable: target_fpr == 0.0 || target_fpr * self.non_members as f64 >= 1.0,
        })
    }

    /// Attacker advantage `max over thresholds of (TPR − FPR)` and the point achieving it
    /// (≥ 0 because the empty attack is a point).
    pub fn advantage(&self) -> (f64, RocPoint) {
        let mut best = self.points[0];
        for p in &self.points[1..] {
            if p.tpr - p.fpr > best.tpr - best.fpr {
                best = *p;
            }
        }
        (best.tpr - best.fpr, best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpml_mechanisms::DpRng;

    /// Mann–Whitney statistic by brute force over all pairs, ties counting 1/2.
    fn mann_whitney(members: &[f64], non_members: &[f64]) -> f64 {
        let mut u = 0.0;
        for &a in members {
            for &b in non_members {
                u += if a > b {
                    1.0
                } else if a == b {
                    0.5
                } else {
                    0.0
                };
            }
        }
        u / (members.len() * non_members.len()) as f64
    }

    #[test]
    fn hand_computed_curve_without_ties() {
        // Members 0.9, 0.7, 0.4; non-members 0.8, 0.3. Descending: .9m .8n .7m .4m .3n
        let roc = RocCurve::from_scores(&[0.9, 0.7, 0.4], &[0.8, 0.3]).unwrap();
        let pts: Vec<(usize, usize)> = roc
            .points()
            .iter()
            .map(|p| (p.true_positives, p.false_positives))
            .collect();
        assert_eq!(pts, vec![(0, 0), (1, 0), (1, 1), (2, 1), (3, 1), (3, 2)]);
        // Pairs member > non-member: 0.9 beats both, 0.7 beats 0.3, 0.4 beats 0.3 → 4 of 6.
        assert!((roc.auc() - 4.0 / 6.0).abs() < 1e-15);
        // Advantage: (3/3 − 1/2) at threshold 0.4.
        let (adv, at) = roc.advantage();
        assert!((adv - 0.5).abs() < 1e-15 && at.threshold == 0.4);
        // TPR at FPR 0 is 1/3 (threshold 0.9); at FPR 0.5 it is 1.
        let p0 = roc.tpr_at_fpr(0.0).unwrap();
        assert_eq!(
            (p0.tpr, p0.threshold, p0.resolvable),
            (1.0 / 3.0, 0.9, true)
        );
        assert_eq!(roc.tpr_at_fpr(0.5).unwrap().tpr, 1.0);
        // 0.01 · 2 non-members < 1: the sample cannot resolve a 1% FPR.
        assert!(!roc.tpr_at_fpr(0.01).unwrap().resolvable);
    }

    #[test]
    fn hand_computed_curve_with_ties() {
        // Members 1, 1, 0; non-members 1, 0, 0. Thresholds: +∞, 1, 0.
        let roc = RocCurve::from_scores(&[1.0, 1.0, 0.0], &[1.0, 0.0, 0.0]).unwrap();
        let pts: Vec<(usize, usize)> = roc
            .points()
            .iter()
            .map(|p| (p.true_positives, p.false_positives))
            .collect();
        assert_eq!(pts, vec![(0, 0), (2, 1), (3, 3)]);
        // Pairs: member 1 vs {1,0,0} = 0.5+1+1 each (two of them) = 5; member 0 vs {1,0,0} =
        // 0+0.5+0.5 = 1; total 6 of 9.
        assert!((roc.auc() - 6.0 / 9.0).abs() < 1e-15);
        // No threshold separates the tied block: TPR at FPR 0 is 0, not 2/3.
        assert_eq!(roc.tpr_at_fpr(0.0).unwrap().tpr, 0.0);
        assert_eq!(roc.tpr_at_fpr(1.0 / 3.0).unwrap().tpr, 2.0 / 3.0);
        // All scores tied: the diagonal, AUC 1/2, advantage 0.
        let flat = RocCurve::from_scores(&[2.0; 4], &[2.0; 7]).unwrap();
        assert_eq!(flat.auc(), 0.5);
        assert_eq!(flat.advantage().0, 0.0);
    }

    #[test]
    fn auc_equals_mann_whitney_on_random_tied_scores() {
        let mut rng = DpRng::seeded(11);
        for round in 0..20 {
            // Few distinct values force many ties.
            let np = 1 + rng.below(40) as usize;
            let nn = 1 + rng.below(40) as usize;
            let levels = 1 + rng.below(6);
            let members: Vec<f64> = (0..np).map(|_| (rng.below(levels) + 1) as f64).collect();
            let non_members: Vec<f64> = (0..nn).map(|_| rng.below(levels) as f64).collect();
            let roc = RocCurve::from_scores(&members, &non_members).unwrap();
            let mw = mann_whitney(&members, &non_members);
            assert!(
                (roc.auc() - mw).abs() < 1e-12,
                "round {round}: {} vs {mw}",
                roc.auc()
            );
            let last = roc.points().last().unwrap();
            assert_eq!((last.tpr, last.fpr), (1.0, 1.0));
        }
    }

    #[test]
    fn confusion_matches_the_curve_point() {
        let m = [0.9, 0.7, 0.4];
        let n = [0.8, 0.3];
        let roc = RocCurve::from_scores(&m, &n).unwrap();
        for p in roc.points() {
            let c = Confusion::at_threshold(&m, &n, p.threshold).unwrap();
            assert_eq!(
                (c.true_positives, c.false_positives),
                (p.true_positives, p.false_positives)
            );
            assert!((c.fnr() - (1.0 - p.tpr)).abs() < 1e-15 && c.fpr() == p.fpr);
        }
    }

    #[test]
    fn bad_input_is_named() {
        let e = RocCurve::from_scores(&[], &[1.0]).unwrap_err();
        assert!(e.to_string().contains("member scores is empty"), "{e}");
        let e = RocCurve::from_scores(&[1.0], &[0.0, f64::NAN]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "non-member scores[1] must be finite, got NaN"
        );
        let roc = RocCurve::from_scores(&[1.0], &[0.0]).unwrap();
        let e = roc.tpr_at_fpr(1.5).unwrap_err();
        assert!(e.to_string().contains("got 1.5"), "{e}");
        assert!(Confusion::at_threshold(&[1.0], &[0.0], f64::NAN).is_err());
    }
}
