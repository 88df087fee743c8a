//! Input perturbation (local DP): every training record is perturbed once, feature by feature,
//! before any learner sees it; training (or clustering) on the perturbed records is
//! post-processing.
//!
//! One code path for every caller: [`perturb_records`] takes one public range per feature
//! (a data set with one declared range for all features, such as MNIST's [0, 1], is the
//! uniform special case, [`perturb_dataset_with`]); DP-SGD's `--input-perturbation` and the
//! input-perturbation k-means both call it.

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

/// A value given once for all features (`Same`, serialised as the value) or once per feature
/// (`Each`, serialised as a list).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PerFeature<T> {
    /// The same value for every feature.
    Same(T),
    /// One value per feature, in column order.
    Each(Vec<T>),
}

impl<T: Clone + PartialEq> PerFeature<T> {
    /// `Same` when every entry of `values` is equal (or there is one), else `Each`.
    fn collapse(values: Vec<T>) -> Self {
        match values.first() {
            Some(first) if values.iter().all(|v| v == first) => PerFeature::Same(first.clone()),
            _ => PerFeature::Each(values),
        }
    }

    /// The value of feature `j` (`None` when `j` is past an `Each` list).
    pub fn get(&self, j: usize) -> Option<&T> {
        match self {
            PerFeature::Same(v) => Some(v),
            PerFeature::Each(v) => v.get(j),
        }
    }
}

/// Number types a record's features may be stored in (`f32` for data sets, `f64` for k-means).
pub trait FeatureValue: Copy + Send + Sync {
    /// Widens to `f64` (exactly, for both implementations).
    fn to_f64(self) -> f64;
    /// Narrows from `f64` (rounding to nearest for `f32`).
    fn from_f64(v: f64) -> Self;
}

impl FeatureValue for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl FeatureValue for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
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
    /// The declared public feature range [lo, hi] (features are clamped to it first): one for
    /// all features, or one per feature.
    pub feature_range: PerFeature<(f64, f64)>,
    /// Laplace scale b or Gaussian σ: one for all features, or one per feature (b_j = (hi_j −
    /// lo_j)/ε_f).
    pub noise_scale: PerFeature<f64>,
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

/// Perturbs every record of `data` in place, once, with the data set's one declared public
/// range [lo, hi] for every feature ([`Dataset::feature_range`], e.g. [0, 1] for MNIST): the
/// uniform case of [`perturb_dataset_in`].
///
/// # Privacy
/// As [`perturb_records`].
///
/// # Errors
/// As [`perturb_records`], and [`PerturbationError::Invalid`] for a data set without a
/// declared public feature range (a range read off the data would not be public). On error
/// `data` is unchanged.
pub fn perturb_dataset_with(
    data: &mut Dataset,
    mechanism: InputMechanism,
    budget: InputBudget,
    rng: &mut DpRng,
) -> Result<PerturbationReport, PerturbationError> {
    let (lo, hi) = data.feature_range.ok_or_else(|| {
        invalid(format!(
            "input perturbation needs a declared public feature range, and data set {:?} has none \
             (a range computed from the data would not be public)",
            data.name
        ))
    })?;
    let ranges = vec![(f64::from(lo), f64::from(hi)); data.n_features()];
    perturb_dataset_in(data, &ranges, mechanism, budget, rng)
}

/// Perturbs every record of `data` in place, once, feature j clamped to the public range
/// `ranges[j]` (e.g. `dpml_data::Source::published_ranges`, or bounds the user declares).
///
/// # Privacy
/// As [`perturb_records`].
///
/// # Errors
/// As [`perturb_records`]. On error `data` is unchanged.
pub fn perturb_dataset_in(
    data: &mut Dataset,
    ranges: &[(f64, f64)],
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
    let mut x = data.x.clone();
    let report =
        perturb_records(&mut x, d, ranges, mechanism, budget, rng).map_err(|e| match e {
            PerturbationError::Invalid(m) => invalid(format!("data set {:?}: {m}", data.name)),
            other => other,
        })?;
    data.x = x;
    Ok(report)
}

/// Perturbs the records in `x` (row-major, `d` features each) in place, once: feature j is
/// clamped to the declared public range `ranges[j] = [lo_j, hi_j]` and gets independent noise
/// with sensitivity w_j = hi_j − lo_j. Labels, if any, are not touched (they are not
/// protected by this mechanism).
///
/// # Privacy
/// Local DP per record (replace-one-record: any two records differ by at most w_j in
/// feature j).
/// - Laplace: scale b_j = w_j/ε_f on feature j, so each feature is ε_f-DP and the record of d
///   features is d·ε_f-DP by basic composition, which is exact here: the privacy loss is
///   Σ_j |x_j − x'_j|/b_j ≤ Σ_j w_j/b_j = d·ε_f (the L1 range of the record measured in units
///   of each feature's width). [`InputBudget::PerRecord`] ε_r sets ε_f = ε_r/d (the record's
///   L1 range as the sensitivity; the same noise).
/// - Gaussian: σ_j calibrated analytically for (ε_f, δ) per feature with L2 sensitivity w_j.
///   The record is reported through its L2 range: in units of each feature's width the same
///   noise is a Gaussian mechanism with noise multiplier σ_j/w_j on coordinates that move by
///   at most 1, so on the whole record (L2 range √d) with multiplier min_j(σ_j/w_j)/√d, whose
///   exact ε at δ (Balle & Wang 2018) is `epsilon_per_record` (much smaller than d·ε_f). On
///   the sampler's grid each coordinate moves by at most the grid sensitivity Δ_g, so the
///   record moves by at most √d·Δ_g in L2 grid units; the event uses that bound.
///
/// Anything computed from the perturbed records (a model, its accuracy, clusters) carries the
/// same per-record guarantee. Noisy values are not clamped back (the noise is zero-mean;
/// clamping would bias them).
///
/// # Citations
/// S. Kasiviswanathan, H. Lee, K. Nissim, S. Raskhodnikova, A. Smith, *What Can We Learn
/// Privately?*, FOCS 2008 (local DP); B. Balle, Y.-X. Wang, ICML 2018 (analytic Gaussian).
///
/// # Errors
/// [`PerturbationError::Invalid`] for ε not finite and > 0, `ranges` whose length is not `d`
/// (d = 0 included) or with a pair that is not finite with lo < hi, `x` not a whole number of
/// records, a NaN feature, or [`InputBudget::PerRecord`] with Gaussian noise;
/// [`PerturbationError::Mechanism`] for a bad δ or a scale out of range. On error `x` is
/// unchanged.
pub fn perturb_records<T: FeatureValue>(
    x: &mut [T],
    d: usize,
    ranges: &[(f64, f64)],
    mechanism: InputMechanism,
    budget: InputBudget,
    rng: &mut DpRng,
) -> Result<PerturbationReport, PerturbationError> {
    if d == 0 || ranges.len() != d || !x.len().is_multiple_of(d) {
        return Err(invalid(format!(
            "{} feature ranges for records of {d} features ({} values)",
            ranges.len(),
            x.len()
        )));
    }
    if let Some(j) = ranges
        .iter()
        .position(|&(lo, hi)| !(lo.is_finite() && hi.is_finite() && hi > lo))
    {
        let (lo, hi) = ranges[j];
        return Err(invalid(format!(
            "feature {j} declares an empty or invalid range [{lo}, {hi}]"
        )));
    }
    if let Some(i) = x.iter().position(|v| v.to_f64().is_nan()) {
        return Err(invalid(format!(
            "record {}, feature {} is NaN",
            i / d,
            i % d
        )));
    }
    let records = x.len() / d;
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
    let widths: Vec<f64> = ranges.iter().map(|&(lo, hi)| hi - lo).collect();
    let (noise, scales, name, epsilon_per_record, delta, event_per_record, composition) =
        match mechanism {
            InputMechanism::Laplace => {
                let ms: Vec<LaplaceMechanism> = widths
                    .iter()
                    .map(|&w| LaplaceMechanism::new(w, eps_f))
                    .collect::<Result<_, _>>()?;
                let per_record = eps_r.unwrap_or_else(|| {
                    let e = eps_f * d as f64;
                    e + e * 4.0 * f64::EPSILON
                });
                let events: Vec<PrivacyEvent> = ms.iter().map(LaplaceMechanism::event).collect();
                let event = if events.iter().all(|e| *e == events[0]) {
                    events[0].clone().repeated(d as u64)
                } else {
                    PrivacyEvent::Composed { events }
                };
                (
                    ms.iter()
                        .cloned()
                        .map(FeatureNoise::Laplace)
                        .collect::<Vec<_>>(),
                    ms.iter().map(LaplaceMechanism::scale).collect::<Vec<_>>(),
                    "laplace",
                    per_record,
                    0.0,
                    event,
                    format!("basic: {d} features x epsilon per feature (exact for the L1 range)"),
                )
            }
            InputMechanism::Gaussian { delta } => {
                let ms: Vec<GaussianMechanism> = widths
                    .iter()
                    .map(|&w| GaussianMechanism::new(w, eps_f, delta, Calibration::Analytic))
                    .collect::<Result<_, _>>()?;
                let mut multiplier = f64::INFINITY;
                for m in &ms {
                    let PrivacyEvent::Gaussian { noise_multiplier } = m.event() else {
                        return Err(invalid(
                            "internal: the Gaussian mechanism reported a non-Gaussian event",
                        ));
                    };
                    multiplier = multiplier.min(noise_multiplier);
                }
                let record_multiplier = multiplier / (d as f64).sqrt();
                let event = PrivacyEvent::Gaussian {
                    noise_multiplier: record_multiplier,
                };
                (
                    ms.iter()
                        .cloned()
                        .map(FeatureNoise::Gaussian)
                        .collect::<Vec<_>>(),
                    ms.iter().map(GaussianMechanism::sigma).collect::<Vec<_>>(),
                    "gaussian",
                    gaussian_epsilon(record_multiplier, delta),
                    delta,
                    event,
                    format!(
                        "gaussian on the record's L2 range sqrt({d}) in units of each feature's width, exact epsilon at delta"
                    ),
                )
            }
        };

    let mut rngs: Vec<DpRng> = (0..records.div_ceil(CHUNK_RECORDS))
        .map(|_| rng.fork())
        .collect();
    let mut out = x.to_vec();
    out.par_chunks_mut(CHUNK_RECORDS * d)
        .zip(rngs.par_iter_mut())
        .try_for_each(|(chunk, r)| {
            for row in chunk.chunks_exact_mut(d) {
                for ((v, f), &(lo, hi)) in row.iter_mut().zip(&noise).zip(ranges) {
                    let clamped = v.to_f64().clamp(lo, hi);
                    *v = T::from_f64(f.release(r, clamped)?);
                }
            }
            Ok::<(), PerturbationError>(())
        })?;
    x.copy_from_slice(&out);
    Ok(PerturbationReport {
        mechanism: name.into(),
        epsilon_per_feature: eps_f,
        epsilon_per_record,
        delta_per_feature: delta,
        delta_per_record: delta,
        composition,
        features: d,
        records,
        feature_range: PerFeature::collapse(ranges.to_vec()),
        noise_scale: PerFeature::collapse(scales),
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
    use crate::test_data::synthetic;

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
        let PerFeature::Same(b) = r.noise_scale else {
            panic!("one range, one scale: {:?}", r.noise_scale)
        };
        assert!(
            (100.0..100.0 * (1.0 + 2.0 * 100.0 / 2f64.powi(20))).contains(&b),
            "{b}"
        );
        assert_eq!(r.feature_range, PerFeature::Same((0.0, 1.0)));
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
        let b = *r.noise_scale.get(0).unwrap();
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
        let sigma = *r.noise_scale.get(0).unwrap();
        assert!(analytic_gaussian_delta(sigma, 1.0, 1.0) <= 1e-5 * (1.0 + 1e-6));
        assert_eq!(r.delta_per_record, 1e-5);
    }

    #[test]
    fn per_feature_ranges_set_per_feature_scales_and_the_uniform_case_is_unchanged() {
        // Two features with widths 1 and 100: the Laplace scales are w_j/ε_f, the record's ε
        // is still d·ε_f (each feature's loss is at most w_j/b_j = ε_f).
        let (n, d) = (4_000, 2);
        let clean: Vec<f64> = (0..n).flat_map(|i| [0.5, 50.0 + (i % 3) as f64]).collect();
        let mut x = clean.clone();
        let ranges = [(0.0, 1.0), (0.0, 100.0)];
        let r = perturb_records(
            &mut x,
            d,
            &ranges,
            InputMechanism::Laplace,
            InputBudget::PerRecord(2.0),
            &mut DpRng::seeded(9),
        )
        .unwrap();
        assert_eq!((r.epsilon_per_record, r.epsilon_per_feature), (2.0, 1.0));
        assert_eq!(r.feature_range, PerFeature::Each(ranges.to_vec()));
        let PerFeature::Each(scales) = &r.noise_scale else {
            panic!("{:?}", r.noise_scale)
        };
        assert!((scales[0] - 1.0).abs() < 1e-5 && (scales[1] - 100.0).abs() < 1e-3);
        // The event composes to 2 features x ε_f = 1.
        fn pure(e: &PrivacyEvent) -> f64 {
            match e {
                PrivacyEvent::Laplace { noise_multiplier } => 1.0 / noise_multiplier,
                PrivacyEvent::SelfComposed { event, count } => *count as f64 * pure(event),
                PrivacyEvent::Composed { events } => events.iter().map(pure).sum(),
                other => panic!("{other:?}"),
            }
        }
        let eps = pure(&r.event_per_record);
        assert!(eps <= 2.0 && eps > 2.0 - 1e-6, "{eps}");
        // Empirical scale of feature 1: mean |noise| = b. Over n = 4000 draws the sd of the
        // mean absolute deviation is b/√n ≈ 0.016·b; tolerance 5 sd.
        let mad = (0..n)
            .map(|i| (x[i * d + 1] - clean[i * d + 1]).abs())
            .sum::<f64>()
            / n as f64;
        assert!(
            (mad / scales[1] - 1.0).abs() < 5.0 / (n as f64).sqrt(),
            "{mad}"
        );

        // Equal ranges collapse to the uniform case: identical noise to perturb_dataset_with.
        let mut a = synthetic(300, 5);
        let mut b = a.clone();
        let ra = perturb_dataset_with(
            &mut a,
            InputMechanism::Laplace,
            InputBudget::PerRecord(3.0),
            &mut DpRng::seeded(4),
        )
        .unwrap();
        let rb = perturb_dataset_in(
            &mut b,
            &[(0.0, 1.0); 5],
            InputMechanism::Laplace,
            InputBudget::PerRecord(3.0),
            &mut DpRng::seeded(4),
        )
        .unwrap();
        assert_eq!((a.x, ra), (b.x, rb));
        let msg = perturb_records(
            &mut [0.0f64; 6],
            3,
            &[(0.0, 1.0), (2.0, 1.0)],
            InputMechanism::Laplace,
            InputBudget::PerFeature(1.0),
            &mut DpRng::seeded(1),
        )
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("2 feature ranges for records of 3 features"),
            "{msg}"
        );
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
