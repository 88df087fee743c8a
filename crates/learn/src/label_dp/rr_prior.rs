//! RR-with-prior (Ghazi et al. 2021): randomized response restricted to the k classes a prior
//! p(y|x) finds most likely, with k chosen to maximise the probability that the output is the
//! true label.

use dpml_mechanisms::{DpRng, PrivacyEvent, RandomizedResponse};

use super::error::{LabelDpError, config_err};
use super::targets::check_label;

/// The k in 1..=K that maximises w_k = e^ε/(e^ε + k − 1) · Σ_{j<k} p_(j), where p_(0) ≥ p_(1)
/// ≥ … is the prior sorted in decreasing order (the expected probability that RR restricted to
/// the top k classes outputs the true label, if the label follows the prior). Ties go to the
/// smaller k.
///
/// `sorted_prior` must be sorted in decreasing order (it need not sum to 1).
pub fn best_k(sorted_prior: &[f64], epsilon: f64) -> usize {
    let e = epsilon.exp();
    let mut mass = 0.0;
    let (mut best, mut best_w) = (1, f64::NEG_INFINITY);
    for (i, p) in sorted_prior.iter().enumerate() {
        mass += p;
        let w = e / (e + i as f64) * mass;
        if w > best_w {
            (best, best_w) = (i + 1, w);
        }
    }
    best
}

/// RR-with-prior for labels over K classes at ε.
///
/// # Privacy
/// Given a prior that does not depend on this record's label, let Y_k be the top-k classes
/// ([`best_k`]). If k = 1 the output is the top class whatever the label (0-DP). Otherwise, if
/// the label y is in Y_k the output is y with probability p = e^ε/(e^ε + k − 1) and each other
/// class of Y_k with q = 1/(e^ε + k − 1) (k-ary RR on Y_k, [`RandomizedResponse::k_ary`], whose
/// realised p'/q' ≤ e^ε); if y ∉ Y_k the output is uniform on Y_k (probability 1/k). Every
/// output probability lies in [q', p'] and q' ≤ 1/k ≤ p', so any two labels give output
/// probabilities within a factor e^ε: ε-label-DP. In the multi-stage algorithm the prior for a
/// stage comes from a model trained on EARLIER stages' already-private labels, i.e. on other
/// records, so each label is still used once and the run is ε-label-DP.
///
/// # Citations
/// B. Ghazi, N. Golowich, R. Kumar, P. Manurangsi, C. Zhang, *Deep Learning with Label
/// Differential Privacy*, NeurIPS 2021, Algorithms 2 (RRWithPrior) and 3 (LP-MST).
///
/// # Errors
/// [`LabelDpError::Mechanism`] for ε not finite and > 0 or too small to represent;
/// [`LabelDpError::InvalidConfig`] for fewer than 2 classes, or (at [`RrWithPrior::respond`])
/// a label ≥ K or a prior of the wrong length or with a NaN or negative entry.
#[derive(Debug, Clone)]
pub struct RrWithPrior {
    epsilon: f64,
    /// `by_k[k - 2]` is k-ary RR, for k = 2..=K.
    by_k: Vec<RandomizedResponse>,
}

impl RrWithPrior {
    /// The randomizer for `classes` classes at `epsilon`.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(epsilon: f64, classes: usize) -> Result<Self, LabelDpError> {
        if classes < 2 {
            return Err(config_err(format!(
                "rr-prior needs at least 2 classes, got {classes}"
            )));
        }
        let k_max = u32::try_from(classes)
            .map_err(|_| config_err(format!("too many classes: {classes}")))?;
        let by_k = (2..=k_max)
            .map(|k| RandomizedResponse::k_ary(epsilon, k))
            .collect::<Result<_, _>>()?;
        Ok(Self { epsilon, by_k })
    }

    /// Classes K.
    pub fn classes(&self) -> usize {
        self.by_k.len() + 1
    }

    /// The privacy cost of one label: k-ary RR at ε over K classes (the worst case of any k).
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::RandomizedResponse {
            epsilon: self.epsilon,
            categories: self.classes() as u32,
        }
    }

    /// The top classes the prior keeps (in decreasing prior order, ties by class index).
    ///
    /// # Errors
    /// As the type-level `# Errors` for a bad prior.
    pub fn top_classes(&self, prior: &[f64]) -> Result<Vec<usize>, LabelDpError> {
        let k = self.classes();
        if prior.len() != k {
            return Err(config_err(format!(
                "prior has {} entries, expected {k} classes",
                prior.len()
            )));
        }
        if let Some(p) = prior.iter().find(|p| !(p.is_finite() && **p >= 0.0)) {
            return Err(config_err(format!(
                "prior entries must be finite and >= 0, got {p}"
            )));
        }
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by(|&a, &b| prior[b].total_cmp(&prior[a]).then(a.cmp(&b)));
        let sorted: Vec<f64> = order.iter().map(|&i| prior[i]).collect();
        order.truncate(best_k(&sorted, self.epsilon));
        Ok(order)
    }

    /// The privatised label of a record with label `label` under `prior`; also returns the k
    /// used.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn respond(
        &self,
        rng: &mut DpRng,
        label: u32,
        prior: &[f64],
    ) -> Result<(u32, usize), LabelDpError> {
        let top = self.top_classes(prior)?;
        Ok((self.respond_in(rng, label, &top)?, top.len()))
    }

    /// The privatised label when the top set is already known ([`RrWithPrior::top_classes`]).
    ///
    /// # Errors
    /// A label ≥ K, or an empty or out-of-range top set.
    pub fn respond_in(
        &self,
        rng: &mut DpRng,
        label: u32,
        top: &[usize],
    ) -> Result<u32, LabelDpError> {
        let y = check_label(label, self.classes())?;
        let k = top.len();
        if k == 0 || k > self.classes() || top.iter().any(|&c| c >= self.classes()) {
            return Err(config_err(format!(
                "top set {top:?} does not fit {} classes",
                self.classes()
            )));
        }
        let out = match (k, top.iter().position(|&c| c == y)) {
            (1, _) => top[0],
            (_, Some(pos)) => top[self.by_k[k - 2].respond(rng, pos)?],
            (_, None) => top[rng.below(k as u64) as usize],
        };
        Ok(out as u32)
    }

    /// The likelihood of the released label `noisy` under each possible true label, for the
    /// top set `top` (a public function of the prior): c_y = p_k if y = `noisy`, q_k if y is in
    /// the top set, 1/k otherwise (all 1 when k = 1: such a label says nothing). Training with
    /// the loss −log Σ_y c_y·softmax(z)_y ("forward correction", [`super::Targets::Likelihood`])
    /// makes the model estimate the TRUE label's posterior, which is the prior the next stage
    /// needs. Post-processing of released values: no privacy cost.
    pub fn channel(&self, top: &[usize], noisy: u32, out: &mut Vec<f32>) {
        let k = top.len();
        out.clear();
        if k <= 1 {
            out.resize(self.classes(), 1.0);
            return;
        }
        let rr = &self.by_k[k - 2];
        out.resize(self.classes(), 1.0 / k as f32);
        for &c in top {
            out[c] = rr.p_other() as f32;
        }
        if let Some(v) = out.get_mut(noisy as usize) {
            *v = rr.p_truth() as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_rule_on_hand_cases() {
        let e1 = 1f64.exp();
        // A certain prior: k = 1.
        assert_eq!(best_k(&[1.0, 0.0, 0.0], 1.0), 1);
        // Two equally likely classes at ε = 1: w1 = 0.5, w2 = e/(e+1) ≈ 0.731 → k = 2.
        assert_eq!(best_k(&[0.5, 0.5, 0.0, 0.0], 1.0), 2);
        // (0.6, 0.3, 0.1) at ε = 0.1: w1 = 0.6, w2 ≈ 0.472, w3 ≈ 0.356 → k = 1.
        assert_eq!(best_k(&[0.6, 0.3, 0.1], 0.1), 1);
        // The same prior at ε = 3: w1 = 0.6, w2 = 0.9·e³/(e³+1) ≈ 0.857, w3 = e³/(e³+2) ≈ 0.909.
        assert_eq!(best_k(&[0.6, 0.3, 0.1], 3.0), 3);
        // A uniform prior: k/(e^ε + k − 1) grows with k → plain RR over all K.
        assert_eq!(best_k(&[0.1; 10], 1.0), 10);
        // (0.5, 0.3, 0.2) at ε = 1: w1 = 0.5, w2 = 0.8e/(e+1) ≈ 0.585, w3 = e/(e+2) ≈ 0.576.
        assert!(0.8 * e1 / (e1 + 1.0) > e1 / (e1 + 2.0));
        assert_eq!(best_k(&[0.5, 0.3, 0.2], 1.0), 2);
        let rr = RrWithPrior::new(1.0, 4).unwrap();
        assert_eq!(rr.top_classes(&[0.1, 0.4, 0.1, 0.4]).unwrap(), vec![1, 3]);
        // Likelihood rows: k = 2 over {1, 3}, released 3 → (1/2, q, 1/2, p); k = 1 → all ones.
        let mut c = Vec::new();
        rr.channel(&[1, 3], 3, &mut c);
        let p = e1 / (e1 + 1.0);
        assert!((f64::from(c[3]) - p).abs() < 1e-6 && (f64::from(c[1]) - (1.0 - p)).abs() < 1e-6);
        assert_eq!((c[0], c[2]), (0.5, 0.5));
        rr.channel(&[2], 2, &mut c);
        assert_eq!(c, vec![1.0; 4]);
    }

    #[test]
    fn responses_follow_the_top_k_law() {
        let rr = RrWithPrior::new(1.0, 4).unwrap();
        let mut rng = DpRng::seeded(8);
        let prior = [0.45, 0.45, 0.05, 0.05]; // top-2 = {0, 1}
        let n = 20_000;
        // Label in the top set: kept with p = e/(e + 1) ≈ 0.731; n = 20 000 → sd ≈ 0.0031,
        // tolerance 4.5 sd. Label outside: uniform on {0, 1}, never itself.
        let kept = (0..n)
            .filter(|_| rr.respond(&mut rng, 1, &prior).unwrap() == (1, 2))
            .count() as f64
            / n as f64;
        let p = 1f64.exp() / (1f64.exp() + 1.0);
        assert!(
            (kept - p).abs() < 4.5 * (p * (1.0 - p) / n as f64).sqrt(),
            "{kept}"
        );
        let outs: Vec<u32> = (0..n)
            .map(|_| rr.respond(&mut rng, 3, &prior).unwrap().0)
            .collect();
        assert!(outs.iter().all(|&o| o < 2));
        let zeros = outs.iter().filter(|&&o| o == 0).count() as f64 / n as f64;
        assert!(
            (zeros - 0.5).abs() < 4.5 * (0.25 / n as f64).sqrt(),
            "{zeros}"
        );
        // A certain prior: the top class, whatever the label.
        assert_eq!(
            rr.respond(&mut rng, 2, &[0.0, 1.0, 0.0, 0.0]).unwrap(),
            (1, 1)
        );
    }

    #[test]
    fn bad_priors_and_labels_are_named() {
        let rr = RrWithPrior::new(1.0, 3).unwrap();
        let mut rng = DpRng::seeded(1);
        assert!(
            rr.respond(&mut rng, 0, &[0.5, 0.5])
                .unwrap_err()
                .to_string()
                .contains("2 entries")
        );
        assert!(
            rr.respond(&mut rng, 0, &[0.5, f64::NAN, 0.5])
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
        assert!(
            rr.respond(&mut rng, 3, &[0.2, 0.3, 0.5])
                .unwrap_err()
                .to_string()
                .contains("label 3")
        );
        assert!(
            RrWithPrior::new(f64::NAN, 3)
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
        assert!(
            RrWithPrior::new(1.0, 1)
                .unwrap_err()
                .to_string()
                .contains("got 1")
        );
    }
}
