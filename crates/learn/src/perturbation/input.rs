//! Input perturbation (local DP): every training record is perturbed once, feature by feature,
//! before any learner sees it; training on the perturbed records is post-processing.

use dpml_data::Dataset;
use dpml_mechanisms::{
    Calibration, DpRng, GaussianMechanism, LaplaceMechanism, PrivacyEvent, analytic_gaussian_delta,
};
use rayon::prelude::*;
use serde::Serialize;

use super::error::{PerturbationError, check_epsilon, invalid};

/// The noise added to every feature.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputMechanism {
    /// Laplace noise: pure ε-DP per feature, ε composes additively over the record.
    Laplace,
    /// Gaussian noise (analytic calibration) at this δ per feature.
    Gaussian {
        /// δ of each feature's release, in (0, 1).
        delta: f64,
    },
}

impl std::str::FromStr for InputMechanism {
    type Err = PerturbationError;

    /// "laplace" (δ for "gaussian" must be set on the value afterwards; it parses as 1e-5).
    fn from_str(s: &str) -> Result<Self, PerturbationError> {
        match s {
            "laplace" => Ok(InputMechanism::Laplace),
            "gaussian" => Ok(InputMechanism::Gaussian { delta: 1e-5 }),
            other => Err(invalid(format!(
                "unknown input perturbation {other:?}; known: laplace, gaussian"
            ))),
        }
    }
}

/// How the per-record budget is stated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", content = "epsilon", rename_all = "snake_case")]
pub enum InputBudget {
    /// ε of each feature; a record of d features then costs d·ε (Laplace) — e.g. 784× for
    /// an MNIST image.
    PerFeature(f64),
    /// ε of the whole record, with the noise calibrated to the record's L1 range d·(hi − lo)
    /// (Laplace only). This is the same noise as `PerFeature(ε/d)`: Laplace of scale
    /// d(hi − lo)/ε on every feature.
    PerRecord(f64),
}

/// What input perturbation did and what it cost each record. Field names are the
/// `dpml train --input-perturbation` JSON contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerturbationReport {
    /// "laplace" or "gaussian".
    pub mechanism: String,
    /// ε of one feature's release.
    pub epsilon_per_feature: f64,
    /// ε of one whole record's release (what the local-DP guarantee of a record is).
    pub epsilon_per_record: f64,
    /// δ of one feature's release (0 for Laplace).
    pub delta_per_feature: f64,
    /// δ at which `epsilon_per_record` holds (0 for Laplace).
    pub delta_per_record: f64,
    /// How the per-record ε was obtained.
    pub composition: String,
    /// Features per record d.
    pub features: usize,
    /// Records perturbed.
    pub records: usize,
    /// The declared public feature range [lo, hi] (features are clamped to it first).
    pub feature_range: (f32, f32),
    /// Laplace scale b or Gaussian σ on each feature.
    pub noise_scale: f64,
    /// The privacy cost of one record's release, for an accountant.
    pub event_per_record: PrivacyEvent,
    /// Whether the generator was user-seeded.
    pub seeded: bool,
}

/// One feature's noise, built once.
enum FeatureNoise {
    Laplace(LaplaceMechanism),
    Gaussian(GaussianMechanism),
}

impl FeatureNoise {
    fn release(&self, rng: &mut DpRng, v: f64) -> Result<f64, PerturbationError> {
        Ok(match self {
            FeatureNoise::Laplace(m) => m.release(rng, v)?,
            FeatureNoise::Gaussian(m) => m.release(rng, v)?,
        })
    }
}

/// Records per parallel work item (each gets its own generator forked in order, so a seeded
/// run is reproducible whatever the thread count).
const CHUNK_RECORDS: usize = 256;

/// Perturbs every record of `data` in place with `mechanism` at `epsilon_per_feature`:
/// shorthand for [`perturb_dataset_with`] and [`InputBudget::PerFeature`].
///
/// # Privacy
/// As [`perturb_dataset_with`].
///
/// # Errors
/// As [`perturb_dataset_with`].
pub fn perturb_dataset(
    data: &mut Dataset,
    mechanism: InputMechanism,
    epsilon_per_feature: f64,
    rng: &mut DpRng,
) -> Result<PerturbationReport, PerturbationError> {
    perturb_dataset_with(
        data,
        mechanism,
        InputBudget::PerFeature(epsilon_per_feature),
        rng,
    )
}

/// Perturbs every record of `data` in place, once: each feature is clamped to the data set's
/// declared public range [lo, hi] and gets independent noise with sensitivity hi − lo. Labels
/// are left untouched (they are not protected by this mechanism).
///
/// # Privacy
/// Local DP per record (replace-one-record: any two records differ by at most hi − lo per
/// feature).
/// - Laplace: scale b = (hi − lo)/ε_f on each feature, so each feature is ε_f-DP and the record
///   of d features is d·ε_f-DP by basic composition, which is exact here: the L1 distance of
///   two records is at most d·(hi − lo) = d·ε_f·b. [`InputBudget::PerRecord`] ε_r sets
///   ε_f = ε_r/d (the record's L1 range as the sensitivity; the same noise).
/// - Gaussian: σ calibrated analytically for (ε_f, δ) per feature with L2 sensitivity hi − lo.
///   The record is reported through its L2 range √d·(hi − lo): the same noise is a Gaussian
///   mechanism with noise multiplier σ/(√d·(hi − lo)) on the whole record, whose exact ε at δ
///   (Balle & Wang 2018) is `epsilon_per_record` (much smaller than d·ε_f). On the sampler's
///   grid each coordinate moves by at most the grid sensitivity Δ_g, so the record moves by at
///   most √d·Δ_g in L2 grid units; the event uses that bound.
///
/// Training on the perturbed data is post-processing: the model, its accuracy and any number
/// computed from the perturbed records carry the same per-record guarantee. The labels are
/// NOT perturbed; pair with label DP if they are private too.
///
/// # Citations
/// S. Kasiviswanathan, H. Lee, K. Nissim, S. Raskhodnikova, A. Smith, *What Can We Learn
/// Privately?*, FOCS 2008 (local DP); B. Balle, Y.-X. Wang, ICML 2018 (analytic Gaussian).
///
/// # Errors
/// [`PerturbationError::Invalid`] for ε not finite and > 0, a data set without a declared public
/// feature range (a range read off the data would not be public), an empty range, a NaN
/// feature, or [`InputBudget::PerRecord`] with Gaussian noise; [`PerturbationError::Mechanism`]
/// for a bad δ or a scale out of range. On error `data` is unchanged.
pub fn perturb_dataset_with(
    data: &mut Dataset,
    mechanism: InputMechanism,
    budget: InputBudget,
    rng: &mut DpRng,
) -> Result<PerturbationReport, PerturbationError> {
    let d = data.n_features();
    if d == 0 || data.x.len() != data.n * d {
        return Err(invalid(format!(
            "data set {:?} has {} values for {} records of {d} features",
            data.name,
            data.x.len(),
            data.n
        )));
    }
    let (lo, hi) = data.feature_range.ok_or_else(|| {
        invalid(format!(
            "input perturbation needs a declared public feature range, and data set {:?} has none \
             (a range computed from the data would not be public)",
            data.name
        ))
    })?;
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        return Err(invalid(format!(
            "data set {:?} declares an empty or invalid feature range [{lo}, {hi}]",
            data.name
        )));
    }
    if let Some(i) = data.x.iter().position(|v| v.is_nan()) {
        return Err(invalid(format!(
            "data set {:?}: record {}, feature {} is NaN",
            data.name,
            i / d,
            i % d
        )));
    }
    let range = f64::from(hi) - f64::from(lo);
    let (eps_f, eps_r) = match budget {
        InputBudget::PerFeature(e) => {
            check_epsilon("epsilon per feature", e)?;
            (e, None)
        }
        InputBudget::PerRecord(e) => {
            check_epsilon("epsilon per record", e)?;
            if matches!(mechanism, InputMechanism::Gaussian { .. }) {
                return Err(invalid(
                    "a per-record budget is offered for Laplace noise only; give gaussian an epsilon per feature",
                ));
            }
            (e / d as f64, Some(e))
        }
    };
    let (noise, report_part) = match mechanism {
        InputMechanism::Laplace => {
            let m = LaplaceMechanism::new(range, eps_f)?;
            let per_record = eps_r.unwrap_or_else(|| {
                let e = eps_f * d as f64;
                e + e * 4.0 * f64::EPSILON
            });
            let event = m.event().repeated(d as u64);
            let part = (
                "laplace",
                per_record,
                0.0,
                0.0,
                m.scale(),
                event,
                format!("basic: {d} features x epsilon per feature (exact for the L1 range)"),
            );
            (FeatureNoise::Laplace(m), part)
        }
        InputMechanism::Gaussian { delta } => {
            let m = GaussianMechanism::new(range, eps_f, delta, Calibration::Analytic)?;
            let PrivacyEvent::Gaussian { noise_multiplier } = m.event() else {
                return Err(invalid(
                    "internal: the Gaussian mechanism reported a non-Gaussian event",
                ));
            };
            let record_multiplier = noise_multiplier / (d as f64).sqrt();
            let per_record = gaussian_epsilon(record_multiplier, delta);
            let event = PrivacyEvent::Gaussian {
                noise_multiplier: record_multiplier,
            };
            let part = (
                "gaussian",
                per_record,
                delta,
                delta,
                m.sigma(),
                event,
                format!(
                    "gaussian on the record's L2 range sqrt({d}) x (hi - lo), exact epsilon at delta"
                ),
            );
            (FeatureNoise::Gaussian(m), part)
        }
    };
    let (
        name,
        epsilon_per_record,
        delta_per_feature,
        delta_per_record,
        noise_scale,
        event_per_record,
        composition,
    ) = report_part;

    let mut rngs: Vec<DpRng> = (0..data.n.div_ceil(CHUNK_RECORDS))
        .map(|_| rng.fork())
        .collect();
    let mut out = data.x.clone();
    out.par_chunks_mut(CHUNK_RECORDS * d)
        .zip(rngs.par_iter_mut())
        .try_for_each(|(chunk, r)| {
            for v in chunk.iter_mut() {
                let clamped = f64::from(v.clamp(lo, hi));
                *v = noise.release(r, clamped)? as f32;
            }
            Ok::<(), PerturbationError>(())
        })?;
    data.x = out;
    Ok(PerturbationReport {
        mechanism: name.into(),
        epsilon_per_feature: eps_f,
        epsilon_per_record,
        delta_per_feature,
        delta_per_record,
        composition,
        features: d,
        records: data.n,
        feature_range: (lo, hi),
        noise_scale,
        event_per_record,
        seeded: rng.is_seeded(),
    })
}

/// The smallest ε (to a relative 1e-9, rounded up) at which a Gaussian mechanism with noise
/// multiplier `multiplier` is (ε, δ)-DP, by bisection on the exact analytic δ(ε).
fn gaussian_epsilon(multiplier: f64, delta: f64) -> f64 {
    let delta_at = |e: f64| analytic_gaussian_delta(multiplier, 1.0, e);
    let mut hi = 1.0;
    while delta_at(hi) > delta && hi < 1e12 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if delta_at(mid) > delta {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo <= 1e-9 * hi {
            break;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(n: usize, d: usize) -> Dataset {
        Dataset {
            name: "synthetic".into(),
            x: (0..n * d).map(|i| (i % 17) as f32 / 16.0).collect(),
            n,
            record_shape: vec![d],
            y: (0..n).map(|i| (i % 2) as u32).collect(),
            n_classes: 2,
            feature_names: (0..d).map(|j| format!("f{j}")).collect(),
            class_names: vec!["a".into(), "b".into()],
            feature_range: Some((0.0, 1.0)),
        }
    }

    #[test]
    fn laplace_epsilon_composes_over_features() {
        let mut data = synthetic(10, 784);
        let r = perturb_dataset(
            &mut data,
            InputMechanism::Laplace,
            0.01,
            &mut DpRng::seeded(1),
        )
        .unwrap();
        // d × ε_f: 784 × 0.01 = 7.84 (rounded up by a few ulps).
        assert!(
            r.epsilon_per_record >= 7.84 && r.epsilon_per_record < 7.84 + 1e-12,
            "{}",
            r.epsilon_per_record
        );
        assert_eq!(r.epsilon_per_feature, 0.01);
        // b = (hi − lo)/ε_f = 100, times the grid inflation 1 + g/(hi − lo) with g ≤ b/2^20.
        assert!(
            r.noise_scale >= 100.0 && r.noise_scale < 100.0 * (1.0 + 2.0 * 100.0 / 2f64.powi(20)),
            "{}",
            r.noise_scale
        );
        assert!(r.seeded && r.features == 784 && r.records == 10);
        let mut again = synthetic(10, 784);
        let p = perturb_dataset_with(
            &mut again,
            InputMechanism::Laplace,
            InputBudget::PerRecord(7.84),
            &mut DpRng::seeded(1),
        )
        .unwrap();
        assert!((p.epsilon_per_feature - 0.01).abs() < 1e-15 && p.epsilon_per_record == 7.84);
        assert_eq!(
            again.x, data.x,
            "a per-record budget is the same noise as ε/d per feature"
        );
    }

    #[test]
    fn laplace_noise_has_the_declared_scale() {
        // Range [0, 1], ε_f = 2 → b = 0.5, Var = 2b² = 0.5. Features are at most 1 so clamping
        // does nothing; n = 20 000 × 8 draws: sd of the sample variance ≈ sqrt(20 b⁴/N)
        // (fourth moment 24b⁴) ≈ 0.0028; tolerance 5 sd.
        let (n, d) = (20_000, 8);
        let clean = synthetic(n, d);
        let mut data = clean.clone();
        let r = perturb_dataset(
            &mut data,
            InputMechanism::Laplace,
            2.0,
            &mut DpRng::seeded(5),
        )
        .unwrap();
        let diffs: Vec<f64> = data
            .x
            .iter()
            .zip(&clean.x)
            .map(|(a, b)| f64::from(a - b))
            .collect();
        let m = diffs.len() as f64;
        let var = diffs.iter().map(|x| x * x).sum::<f64>() / m;
        let b = r.noise_scale;
        assert!(
            (var - 2.0 * b * b).abs() < 5.0 * (20.0 * b.powi(4) / m).sqrt(),
            "{var}"
        );
        assert_eq!(data.y, clean.y, "labels are untouched");
    }

    #[test]
    fn gaussian_reports_the_l2_composition() {
        let mut data = synthetic(4, 100);
        let r = perturb_dataset(
            &mut data,
            InputMechanism::Gaussian { delta: 1e-5 },
            1.0,
            &mut DpRng::seeded(2),
        )
        .unwrap();
        // The record's multiplier is the feature's over √100 = 10: its ε is far above 1 but far
        // below basic composition's 100.
        assert!(
            r.epsilon_per_record > 5.0 && r.epsilon_per_record < 100.0,
            "{}",
            r.epsilon_per_record
        );
        assert!(analytic_gaussian_delta(r.noise_scale, 1.0, 1.0) <= 1e-5 * (1.0 + 1e-6));
        assert_eq!(r.delta_per_record, 1e-5);
    }

    #[test]
    fn bad_inputs_are_named_and_leave_data_unchanged() {
        let mut data = synthetic(3, 4);
        let before = data.x.clone();
        let mut rng = DpRng::seeded(1);
        let msg = |r: Result<PerturbationReport, PerturbationError>| r.unwrap_err().to_string();
        assert!(
            msg(perturb_dataset(
                &mut data,
                InputMechanism::Laplace,
                f64::NAN,
                &mut rng
            ))
            .contains("epsilon per feature must be finite and > 0, got NaN")
        );
        assert!(
            msg(perturb_dataset(
                &mut data,
                InputMechanism::Laplace,
                -1.0,
                &mut rng
            ))
            .contains("got -1")
        );
        assert!(
            msg(perturb_dataset_with(
                &mut data,
                InputMechanism::Gaussian { delta: 1e-5 },
                InputBudget::PerRecord(1.0),
                &mut rng
            ))
            .contains("Laplace")
        );
        assert!(
            msg(perturb_dataset(
                &mut data,
                InputMechanism::Gaussian { delta: 2.0 },
                1.0,
                &mut rng
            ))
            .contains('2')
        );
        assert!(
            "cauchy"
                .parse::<InputMechanism>()
                .unwrap_err()
                .to_string()
                .contains("cauchy")
        );
        data.feature_range = None;
        assert!(
            msg(perturb_dataset(
                &mut data,
                InputMechanism::Laplace,
                1.0,
                &mut rng
            ))
            .contains("public feature range")
        );
        assert_eq!(data.x, before);
    }
}
