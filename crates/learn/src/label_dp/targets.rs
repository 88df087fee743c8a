//! The label mechanisms (Laplace on one-hot labels or label values, k-ary randomized response)
//! with their post-processing, and the training [`Targets`] they produce.

use dpml_mechanisms::{DpRng, PrivacyEvent, RandomizedResponse};

use super::config::PostProcess;
use super::error::LabelDpError;
use crate::perturbation::VectorLaplace;

/// L1 sensitivity of a one-hot label: changing the class moves two coordinates by 1.
pub const ONE_HOT_L1_SENSITIVITY: f64 = 2.0;

/// Privatised training targets, one per record.
#[derive(Debug, Clone, PartialEq)]
pub enum Targets {
    /// One class per record (argmax post-processing, randomized response).
    Classes(Vec<u32>),
    /// A 0/1 vector of `k` per record (clamp-round), trained with per-class binary
    /// cross-entropy.
    MultiHot {
        /// Classes.
        k: usize,
        /// `n × k` values in {0, 1}.
        values: Vec<f32>,
    },
    /// A probability vector of `k` per record (soft), trained with soft cross-entropy.
    Soft {
        /// Classes.
        k: usize,
        /// `n × k` values, each row summing to 1.
        values: Vec<f32>,
    },
    /// A real value per record (regression), trained with MSE.
    Values(Vec<f32>),
    /// For each record, the likelihood c_y of its released label under each true label y
    /// (RR-with-prior, [`super::RrWithPrior::channel`]); trained with the forward-corrected
    /// loss −log Σ_y c_y·softmax(z)_y, so the model estimates the true label's posterior.
    Likelihood {
        /// Classes.
        k: usize,
        /// `n × k` likelihoods.
        values: Vec<f32>,
    },
}

impl Targets {
    /// Share of records whose target still says the true label `y`:
    /// - classes: the noisy class is `y`;
    /// - multi-hot: the vector is exactly one-hot(`y`) (a zero or multi-hot vector counts as
    ///   wrong);
    /// - soft, likelihood: `y` has the largest weight, strictly (a tie counts as wrong);
    /// - values: the noisy value rounds to `y`.
    pub fn accuracy(&self, y: &[u32]) -> f64 {
        if y.is_empty() {
            return f64::NAN;
        }
        let correct = match self {
            Targets::Classes(c) => c.iter().zip(y).filter(|(a, b)| a == b).count(),
            Targets::MultiHot { k, values } => values
                .chunks_exact(*k)
                .zip(y)
                .filter(|&(row, &t)| {
                    row.iter()
                        .enumerate()
                        .all(|(j, &v)| v == if j == t as usize { 1.0 } else { 0.0 })
                })
                .count(),
            Targets::Soft { k, values } | Targets::Likelihood { k, values } => values
                .chunks_exact(*k)
                .zip(y)
                .filter(|&(row, &t)| {
                    let t = t as usize;
                    row.iter().enumerate().all(|(j, &v)| j == t || v < row[t])
                })
                .count(),
            Targets::Values(v) => v
                .iter()
                .zip(y)
                .filter(|&(a, &b)| a.round() == b as f32)
                .count(),
        };
        correct as f64 / y.len() as f64
    }
}

/// What a label mechanism did: the targets, the per-record privacy cost and the noise.
#[derive(Debug, Clone)]
pub struct Noised {
    /// The targets.
    pub targets: Targets,
    /// The cost of one record's label (ε-label-DP; records are disjoint, so this is the run's
    /// per-record guarantee).
    pub event: PrivacyEvent,
    /// Laplace scale per coordinate (Laplace mechanisms) — `None` for randomized response.
    pub scale: Option<f64>,
}

/// Laplace noise on the one-hot label of every record, then `post`.
///
/// # Privacy
/// The one-hot vector of a label has L1 sensitivity 2 (a change of class moves two coordinates
/// by 1), so Laplace(2/ε) on each of the K coordinates ([`VectorLaplace`]) is ε-DP for that
/// label; the post-processing rules ([`PostProcess`]) do not look at the true label.
///
/// # Citations
/// C. Dwork, F. McSherry, K. Nissim, A. Smith, TCC 2006; the clamp-round/BCE recipe is the
/// classic label-DP MNIST experiment (e.g. the "label DP" exercises built on PyTorch).
///
/// # Errors
/// [`LabelDpError`] for ε not finite and > 0 or fewer than 2 classes, or a label ≥ K.
pub fn laplace_one_hot(
    y: &[u32],
    k: usize,
    epsilon: f64,
    post: PostProcess,
    rng: &mut DpRng,
) -> Result<Noised, LabelDpError> {
    if k < 2 {
        return Err(super::error::config_err(format!(
            "classification needs at least 2 classes, got {k}"
        )));
    }
    let mech = VectorLaplace::new(ONE_HOT_L1_SENSITIVITY, k, epsilon)?;
    let (mut one_hot, mut noisy) = (vec![0.0; k], Vec::with_capacity(k));
    let mut classes = Vec::new();
    let mut values = Vec::new();
    for &label in y {
        let t = check_label(label, k)?;
        one_hot
            .iter_mut()
            .enumerate()
            .for_each(|(j, v)| *v = if j == t { 1.0 } else { 0.0 });
        mech.release_into(rng, &one_hot, &mut noisy)?;
        let argmax = (0..k).fold(0, |b, j| if noisy[j] > noisy[b] { j } else { b });
        match post {
            PostProcess::Argmax => classes.push(argmax as u32),
            PostProcess::ClampRound => {
                values.extend(noisy.iter().map(|v| v.clamp(0.0, 1.0).round() as f32))
            }
            PostProcess::Soft => {
                let sum: f64 = noisy.iter().map(|v| v.clamp(0.0, 1.0)).sum();
                if sum > 0.0 {
                    values.extend(noisy.iter().map(|v| (v.clamp(0.0, 1.0) / sum) as f32));
                } else {
                    values.extend((0..k).map(|j| if j == argmax { 1.0 } else { 0.0 }));
                }
            }
        }
    }
    let targets = match post {
        PostProcess::Argmax => Targets::Classes(classes),
        PostProcess::ClampRound => Targets::MultiHot { k, values },
        PostProcess::Soft => Targets::Soft { k, values },
    };
    Ok(Noised {
        targets,
        event: mech.event(),
        scale: Some(mech.scale()),
    })
}

/// Laplace noise on the label VALUE (the class index 0…K−1 as a number), clamped to [0, K−1].
///
/// # Privacy
/// The value lies in [0, K − 1], so its sensitivity is K − 1 (9 for digits) and Laplace of
/// scale (K − 1)/ε is ε-DP for that label; clamping is post-processing.
///
/// # Citations
/// C. Dwork, F. McSherry, K. Nissim, A. Smith, TCC 2006.
///
/// # Errors
/// As [`laplace_one_hot`].
pub fn laplace_value(
    y: &[u32],
    k: usize,
    epsilon: f64,
    rng: &mut DpRng,
) -> Result<Noised, LabelDpError> {
    if k < 2 {
        return Err(super::error::config_err(format!(
            "regression needs at least 2 label values, got {k}"
        )));
    }
    let top = (k - 1) as f64;
    let mech = VectorLaplace::new(top, 1, epsilon)?;
    let mut noisy = Vec::with_capacity(1);
    let mut values = Vec::with_capacity(y.len());
    for &label in y {
        let t = check_label(label, k)?;
        mech.release_into(rng, &[t as f64], &mut noisy)?;
        values.push(noisy[0].clamp(0.0, top) as f32);
    }
    Ok(Noised {
        targets: Targets::Values(values),
        event: mech.event(),
        scale: Some(mech.scale()),
    })
}

/// k-ary randomized response on every label: the true class with probability
/// p = e^ε/(e^ε + K − 1), else one of the other K − 1 uniformly.
///
/// # Privacy
/// As [`RandomizedResponse::k_ary`]: ε-DP per label (the realised ε is at most ε).
///
/// # Citations
/// S. L. Warner, JASA 1965; P. Kairouz, S. Oh, P. Viswanath, NeurIPS 2014.
///
/// # Errors
/// As [`laplace_one_hot`].
pub fn randomized_response(
    y: &[u32],
    k: usize,
    epsilon: f64,
    rng: &mut DpRng,
) -> Result<Noised, LabelDpError> {
    let categories =
        u32::try_from(k).map_err(|_| super::error::config_err(format!("too many classes: {k}")))?;
    let rr = RandomizedResponse::k_ary(epsilon, categories)?;
    let classes = y
        .iter()
        .map(|&label| Ok(rr.respond(rng, check_label(label, k)?)? as u32))
        .collect::<Result<Vec<_>, LabelDpError>>()?;
    Ok(Noised {
        targets: Targets::Classes(classes),
        event: rr.event(),
        scale: None,
    })
}

/// The label as an index, refused when ≥ K.
pub(crate) fn check_label(label: u32, k: usize) -> Result<usize, LabelDpError> {
    let t = label as usize;
    if t < k {
        Ok(t)
    } else {
        Err(super::error::config_err(format!(
            "label {label} is out of range for {k} classes"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KS statistic of `xs` against the Laplace(b) CDF.
    fn ks_laplace(xs: &mut [f64], b: f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        xs.iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = if x < 0.0 {
                    0.5 * (x / b).exp()
                } else {
                    1.0 - 0.5 * (-x / b).exp()
                };
                (f - i as f64 / n).abs().max((f - (i + 1) as f64 / n).abs())
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn one_hot_noise_has_scale_two_over_epsilon() {
        // Every post-processing rule clamps or rounds, so the raw noise is checked on the
        // mechanism the label functions build (same Δ₁ = 2, K, ε), and the label function is
        // checked to report that mechanism's scale. The scale must be 2/ε and the noise
        // (coordinate − one-hot) Laplace(2/ε): KS at 1%, critical value 1.63/√n with
        // n = 4000 × 10 coordinates (≈ 0.0082).
        let eps = 0.5;
        let mech = VectorLaplace::new(ONE_HOT_L1_SENSITIVITY, 10, eps).unwrap();
        assert!((mech.scale() - 2.0 / eps).abs() < 1e-4 * 2.0 / eps);
        let mut rng = DpRng::seeded(11);
        let mut xs = Vec::new();
        let mut out = Vec::new();
        for i in 0..4000 {
            let hot: Vec<f64> = (0..10)
                .map(|j| if j == i % 10 { 1.0 } else { 0.0 })
                .collect();
            mech.release_into(&mut rng, &hot, &mut out).unwrap();
            xs.extend(out.iter().zip(&hot).map(|(a, b)| a - b));
        }
        let n = xs.len();
        let d = ks_laplace(&mut xs, 2.0 / eps);
        assert!(d < 1.63 / (n as f64).sqrt(), "D = {d}");
        // And the reported scale of the label mechanism is the same.
        let y: Vec<u32> = (0..50).map(|i| i % 10).collect();
        let noised = laplace_one_hot(&y, 10, eps, PostProcess::Argmax, &mut rng).unwrap();
        assert_eq!(noised.scale, Some(mech.scale()));
    }

    /// A change of label moves two coordinates of the one-hot vector by 1 each, so the true
    /// privacy loss is the sum of two unit-shift Laplace(2/ε) losses; the reported event is one
    /// Laplace of shift 2 at that scale. The reported event must compose at least as badly as
    /// the true pair (it must not under-describe the release).
    #[test]
    fn one_hot_event_dominates_the_two_coordinate_release() {
        use dpml_accounting::{Accountant, PldAccountant, RdpAccountant};
        let y = [0u32, 1, 2];
        for eps in [0.5, 1.0, 4.0] {
            let reported = laplace_one_hot(&y, 10, eps, PostProcess::Argmax, &mut DpRng::seeded(1))
                .unwrap()
                .event;
            let coordinate = PrivacyEvent::Laplace {
                noise_multiplier: 2.0 / eps,
            };
            let accountants: [&dyn Accountant; 2] =
                [&PldAccountant::pessimistic(), &RdpAccountant::default()];
            for count in [1, 50] {
                let truth = coordinate.clone().repeated(2 * count);
                let got = reported.clone().repeated(count);
                for acc in accountants {
                    for delta in [1e-3, 1e-5, 1e-9] {
                        let (r, t) = (
                            acc.epsilon(&got, delta).unwrap(),
                            acc.epsilon(&truth, delta).unwrap(),
                        );
                        assert!(
                            r >= t * (1.0 - 1e-6),
                            "{} ε={eps} ×{count} δ={delta}: {r} < {t}",
                            acc.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn value_noise_has_scale_nine_over_epsilon() {
        // Label 4.5 is impossible, so use the middle labels 4 and 5 with ε = 20 (b = 0.45): the
        // clamp at [0, 9] is 9 scales away and changes the law by < e^-9 per side. The noise
        // value − label must be Laplace(9/ε): KS at 1%, 1.63/√n with n = 20 000 (≈ 0.0115).
        let eps = 20.0;
        let y: Vec<u32> = (0..20_000).map(|i| 4 + (i % 2)).collect();
        let noised = laplace_value(&y, 10, eps, &mut DpRng::seeded(4)).unwrap();
        let b = noised.scale.unwrap();
        assert!((b - 9.0 / eps).abs() < 1e-4 * 9.0 / eps);
        let Targets::Values(v) = &noised.targets else {
            panic!("regression gives values")
        };
        let mut xs: Vec<f64> = v
            .iter()
            .zip(&y)
            .map(|(a, &t)| f64::from(*a) - f64::from(t))
            .collect();
        let d = ks_laplace(&mut xs, b);
        assert!(d < 1.63 / (xs.len() as f64).sqrt(), "D = {d}");
        assert!(v.iter().all(|&x| (0.0..=9.0).contains(&x)));
    }

    #[test]
    fn post_processing_rules_and_noisy_label_accuracy() {
        let y: Vec<u32> = (0..3000).map(|i| i % 10).collect();
        let mut rng = DpRng::seeded(9);
        // Huge ε: the noise is ~1e-3, every rule gives back the label exactly.
        for post in [
            PostProcess::ClampRound,
            PostProcess::Argmax,
            PostProcess::Soft,
        ] {
            let n = laplace_one_hot(&y, 10, 2000.0, post, &mut rng).unwrap();
            assert_eq!(n.targets.accuracy(&y), 1.0, "{post:?}");
        }
        // Hand-made targets: accuracy counts exactly the rows that still say the label.
        let t = Targets::MultiHot {
            k: 3,
            values: vec![0., 1., 0., 1., 1., 0., 0., 0., 0.],
        };
        assert_eq!(t.accuracy(&[1, 0, 2]), 1.0 / 3.0);
        let s = Targets::Soft {
            k: 2,
            values: vec![0.7, 0.3, 0.5, 0.5, 0.2, 0.8],
        };
        assert_eq!(s.accuracy(&[0, 0, 1]), 2.0 / 3.0);
        assert_eq!(
            Targets::Classes(vec![1, 2, 3, 4]).accuracy(&[1, 2, 0, 0]),
            0.5
        );
        assert_eq!(
            Targets::Values(vec![0.4, 8.6, 3.0]).accuracy(&[0, 8, 3]),
            2.0 / 3.0
        );
        // Soft rows sum to 1; clamp-round rows are 0/1.
        let n = laplace_one_hot(&y, 10, 1.0, PostProcess::Soft, &mut rng).unwrap();
        let Targets::Soft { values, .. } = &n.targets else {
            panic!()
        };
        assert!(
            values
                .chunks_exact(10)
                .all(|r| (r.iter().sum::<f32>() - 1.0).abs() < 1e-4)
        );
        let n = laplace_one_hot(&y, 10, 1.0, PostProcess::ClampRound, &mut rng).unwrap();
        let Targets::MultiHot { values, .. } = &n.targets else {
            panic!()
        };
        assert!(values.iter().all(|&v| v == 0.0 || v == 1.0));
    }

    #[test]
    fn randomized_response_keeps_the_label_with_probability_p() {
        // p = e/(e + 9) ≈ 0.2320 at ε = 1, K = 10; n = 20 000: sd ≈ 0.003, tolerance 4.5 sd.
        let n = 20_000;
        let y: Vec<u32> = (0..n).map(|i| (i % 10) as u32).collect();
        let noised = randomized_response(&y, 10, 1.0, &mut DpRng::seeded(2)).unwrap();
        let p = 1f64.exp() / (1f64.exp() + 9.0);
        let acc = noised.targets.accuracy(&y);
        assert!(
            (acc - p).abs() < 4.5 * (p * (1.0 - p) / n as f64).sqrt(),
            "{acc} vs {p}"
        );
        assert!(
            randomized_response(&[10], 10, 1.0, &mut DpRng::seeded(2))
                .unwrap_err()
                .to_string()
                .contains("label 10")
        );
    }
}
