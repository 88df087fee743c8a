//! Differentially private statistics over one numeric column: count, sum, mean and histogram,
//! with sensitivity taken from declared bounds (never from the data) and a choice of Laplace or
//! Gaussian noise.
//!
//! Neighbouring tables differ by adding or removing one record. Values are clamped to the
//! declared bounds [lo, hi] before anything is computed, so one record moves a count by at most
//! 1, a sum by at most max(|lo|, |hi|), and one histogram bin by 1.
//!
//! Sums are computed *exactly* in integers: each clamped value v is mapped to trunc(v/g′) on a
//! grid g′ = g/2^30, 2^30 times finer than the mechanism's noise grid g, the integers are added
//! exactly and the total is rounded to the noise grid. Floating-point summation would make the
//! sensitivity depend on the order and magnitude of the other records (rounding can move a sum
//! by more than the declared bound); the integer sum cannot. Proof that the grid sensitivity
//! Δ_g = ⌊Δ/g⌋ + 1 of the mechanism still holds: |trunc(v/g′)| ≤ ⌊|v|/g′⌋ ≤ Y := ⌊Δ/g′⌋, so one
//! record moves the integer sum S′ by at most Y; rounding S′/2^30 to an integer moves it by at
//! most 1/2, so the rounded totals differ by at most ⌊Y/2^30⌋ + 1, and Y/2^30 ≤ Δ/g gives
//! ⌊Y/2^30⌋ ≤ ⌊Δ/g⌋. The truncation biases each record toward 0 by less than g′ = g·2^−30.

use serde::Serialize;

use crate::grid::Grid;
use crate::validate::{self, invalid};
use crate::{
    Calibration, DpRng, GaussianMechanism, LaplaceMechanism, MechanismError, PrivacyEvent,
};

/// Most histogram bins accepted (a typo must not exhaust memory).
pub const MAX_BINS: usize = 1 << 24;

/// The per-record grid is 2^30 times finer than the noise grid.
const FINE_GRID_BITS: i32 = 30;

/// Which noise a statistic is released with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    /// The Laplace mechanism (pure ε-DP, L1 sensitivity).
    Laplace,
    /// The analytic Gaussian mechanism ((ε, δ)-DP, L2 sensitivity).
    Gaussian {
        /// δ in (0, 1).
        delta: f64,
    },
}

impl Noise {
    fn delta(self) -> f64 {
        match self {
            Noise::Laplace => 0.0,
            Noise::Gaussian { delta } => delta,
        }
    }

    /// The same noise with half the δ, after checking that δ is valid (so an invalid δ is
    /// reported as given, not halved).
    fn halved(self) -> Result<Self, MechanismError> {
        Ok(match self {
            Noise::Laplace => Noise::Laplace,
            Noise::Gaussian { delta } => Noise::Gaussian {
                delta: validate::delta(delta)? / 2.0,
            },
        })
    }
}

/// A released statistic: a number, or one number per histogram bin.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StatValue {
    /// Count, sum or mean.
    Scalar(f64),
    /// Histogram bins, in order from lo to hi.
    Vector(Vec<f64>),
}

/// A released statistic with everything needed to state its privacy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatRelease {
    /// The noisy statistic.
    pub value: StatValue,
    /// The sensitivity the noise was calibrated to (for the mean: that of the centred sum).
    pub sensitivity: f64,
    /// Total ε of the release.
    pub epsilon: f64,
    /// Total δ of the release (0 for Laplace).
    pub delta: f64,
    /// Laplace scale actually used (for the mean: that of the sum part).
    pub scale: Option<f64>,
    /// Gaussian σ actually used (for the mean: that of the sum part).
    pub sigma: Option<f64>,
    /// Grid granularity of the outputs (for the mean: that of the sum part).
    pub granularity: f64,
    /// The privacy cost, for an accountant.
    pub event: PrivacyEvent,
}

/// One scalar mechanism of either kind.
enum Scalar {
    Laplace(LaplaceMechanism),
    Gaussian(GaussianMechanism),
}

impl Scalar {
    fn new(noise: Noise, sensitivity: f64, epsilon: f64) -> Result<Self, MechanismError> {
        Ok(match noise {
            Noise::Laplace => Scalar::Laplace(LaplaceMechanism::new(sensitivity, epsilon)?),
            Noise::Gaussian { delta } => Scalar::Gaussian(GaussianMechanism::new(
                sensitivity,
                epsilon,
                delta,
                Calibration::Analytic,
            )?),
        })
    }

    fn release(&self, rng: &mut DpRng, value: f64) -> Result<f64, MechanismError> {
        match self {
            Scalar::Laplace(m) => m.release(rng, value),
            Scalar::Gaussian(m) => m.release(rng, value),
        }
    }

    fn release_on_grid(&self, rng: &mut DpRng, k: i128) -> f64 {
        match self {
            Scalar::Laplace(m) => m.release_on_grid(rng, k),
            Scalar::Gaussian(m) => m.release_on_grid(rng, k),
        }
    }

    fn grid(&self) -> Grid {
        match self {
            Scalar::Laplace(m) => m.grid(),
            Scalar::Gaussian(m) => m.grid(),
        }
    }

    fn event(&self) -> PrivacyEvent {
        match self {
            Scalar::Laplace(m) => m.event(),
            Scalar::Gaussian(m) => m.event(),
        }
    }

    /// A [`StatRelease`] describing `value` released by this mechanism.
    fn describe(
        &self,
        value: StatValue,
        sensitivity: f64,
        epsilon: f64,
        delta: f64,
        event: PrivacyEvent,
    ) -> StatRelease {
        let (scale, sigma) = match self {
            Scalar::Laplace(m) => (Some(m.scale()), None),
            Scalar::Gaussian(m) => (None, Some(m.sigma())),
        };
        StatRelease {
            value,
            sensitivity,
            epsilon,
            delta,
            scale,
            sigma,
            granularity: self.grid().granularity(),
            event,
        }
    }
}

/// Values clamped to [lo, hi], refusing NaN (naming the row).
fn clamped(
    values: &[f64],
    lo: f64,
    hi: f64,
) -> impl Iterator<Item = Result<f64, MechanismError>> + '_ {
    values.iter().enumerate().map(move |(row, &v)| {
        if v.is_nan() {
            Err(invalid(format!("value at row {row} is NaN")))
        } else {
            Ok(v.clamp(lo, hi))
        }
    })
}

/// The exact integer sum of trunc((clamp(v) − centre)/g′), rounded to the noise grid (see the
/// module docs for why its grid sensitivity is that of the mechanism).
fn grid_sum(
    values: &[f64],
    (lo, hi): (f64, f64),
    centre: f64,
    grid: Grid,
) -> Result<i128, MechanismError> {
    let fine = grid.finer(FINE_GRID_BITS);
    let mut total: i128 = 0;
    for v in clamped(values, lo, hi) {
        total = total
            .checked_add(fine.truncate(v? - centre))
            .ok_or_else(|| {
                invalid(format!(
                    "sum of {} values overflows the exact accumulator",
                    values.len()
                ))
            })?;
    }
    let half = 1i128 << (FINE_GRID_BITS - 1);
    Ok((total + half).div_euclid(1i128 << FINE_GRID_BITS))
}

/// The number of records, plus noise (sensitivity 1).
///
/// # Privacy
/// Adding or removing one record changes the count by 1: the Laplace mechanism with Δ₁ = 1 is
/// ε-DP, the analytic Gaussian with Δ₂ = 1 is (ε, δ)-DP.
///
/// # Citations
/// Dwork, McSherry, Nissim, Smith 2006; Balle & Wang 2018 (see the mechanisms).
///
/// # Errors
/// Invalid ε or δ ([`MechanismError::InvalidParameter`], naming the value).
pub fn count(
    rng: &mut DpRng,
    values: &[f64],
    epsilon: f64,
    noise: Noise,
) -> Result<StatRelease, MechanismError> {
    let mech = Scalar::new(noise, 1.0, epsilon)?;
    let value = mech.release(rng, values.len() as f64)?;
    Ok(mech.describe(
        StatValue::Scalar(value),
        1.0,
        epsilon,
        noise.delta(),
        mech.event(),
    ))
}

/// The sum of the values clamped to `bounds`, plus noise.
///
/// # Privacy
/// One record contributes a clamped value in [lo, hi], so the sum has sensitivity
/// Δ = max(|lo|, |hi|) (L1 = L2 for a scalar); the sum is computed exactly on a fine integer grid
/// (module docs) and released by the chosen mechanism: ε-DP (Laplace) or (ε, δ)-DP (Gaussian).
///
/// # Citations
/// Dwork, McSherry, Nissim, Smith 2006; Balle & Wang 2018; Casacuberta et al. 2022, *Widespread
/// Underestimation of Sensitivity in Differentially Private Libraries* (why the sum is exact).
///
/// # Errors
/// Invalid ε, δ or bounds (non-finite, or lo ≥ hi), or a NaN value (naming its row).
pub fn sum(
    rng: &mut DpRng,
    values: &[f64],
    bounds: (f64, f64),
    epsilon: f64,
    noise: Noise,
) -> Result<StatRelease, MechanismError> {
    let (lo, hi) = validate::bounds(bounds.0, bounds.1)?;
    let sensitivity = lo.abs().max(hi.abs());
    let mech = Scalar::new(noise, sensitivity, epsilon)?;
    let k = grid_sum(values, (lo, hi), 0.0, mech.grid())?;
    let value = mech.release_on_grid(rng, k);
    Ok(mech.describe(
        StatValue::Scalar(value),
        sensitivity,
        epsilon,
        noise.delta(),
        mech.event(),
    ))
}

/// The mean of the values clamped to `bounds`: a noisy centred sum over a noisy count.
///
/// # Privacy
/// The budget is split evenly: the centred sum Σ(clamp(v) − c), c = (lo + hi)/2, of sensitivity
/// (hi − lo)/2 is released with (ε/2, δ/2), the count with (ε/2, δ/2); by basic composition the
/// pair is (ε, δ)-DP, and the mean c + S̃/max(Ñ, 1), clamped to [lo, hi], is post-processing.
/// Centring halves the sum's sensitivity for symmetric-width bounds; the even split balances the
/// two error terms, which have the same sensitivity scale (hi − lo)/2 when the mean is near an
/// end of the interval. The event is the composition of both parts.
///
/// # Citations
/// Dwork & Roth 2014, Theorem 3.16 (basic composition).
///
/// # Errors
/// As [`sum`].
pub fn mean(
    rng: &mut DpRng,
    values: &[f64],
    bounds: (f64, f64),
    epsilon: f64,
    noise: Noise,
) -> Result<StatRelease, MechanismError> {
    let (lo, hi) = validate::bounds(bounds.0, bounds.1)?;
    let epsilon = validate::epsilon(epsilon)?;
    let centre = lo / 2.0 + hi / 2.0;
    // clamp(v) − centre is monotone in v, so its magnitude is at most the larger end value,
    // computed with the same floating-point operations.
    let sensitivity = (lo - centre).abs().max((hi - centre).abs());
    let half = noise.halved()?;
    let sum_mech = Scalar::new(half, sensitivity, epsilon / 2.0)?;
    let count_mech = Scalar::new(half, 1.0, epsilon / 2.0)?;
    let k = grid_sum(values, (lo, hi), centre, sum_mech.grid())?;
    let noisy_sum = sum_mech.release_on_grid(rng, k);
    let noisy_count = count_mech.release(rng, values.len() as f64)?;
    let value = (centre + noisy_sum / noisy_count.max(1.0)).clamp(lo, hi);
    let event = PrivacyEvent::Composed {
        events: vec![sum_mech.event(), count_mech.event()],
    };
    Ok(sum_mech.describe(
        StatValue::Scalar(value),
        sensitivity,
        epsilon,
        noise.delta(),
        event,
    ))
}

/// A histogram of the values with `bins` equal-width bins over `bounds`, plus noise per bin.
///
/// # Privacy
/// Each record falls in exactly one bin (values outside [lo, hi] are counted in the end bins),
/// so adding or removing it changes one count by 1: L1 = L2 sensitivity 1. Noise of that
/// sensitivity on every bin is ε-DP (Laplace: the privacy losses of the bins sum to at most
/// that of the one changed bin) or (ε, δ)-DP (Gaussian: the other bins have identical laws).
///
/// # Citations
/// Dwork, McSherry, Nissim, Smith 2006.
///
/// # Errors
/// As [`sum`], and `bins` outside 1..=[`MAX_BINS`].
pub fn histogram(
    rng: &mut DpRng,
    values: &[f64],
    bounds: (f64, f64),
    bins: usize,
    epsilon: f64,
    noise: Noise,
) -> Result<StatRelease, MechanismError> {
    let (lo, hi) = validate::bounds(bounds.0, bounds.1)?;
    if bins == 0 || bins > MAX_BINS {
        return Err(invalid(format!(
            "histogram bins must be in 1..={MAX_BINS}, got {bins}"
        )));
    }
    let mech = Scalar::new(noise, 1.0, epsilon)?;
    let mut counts = vec![0u64; bins];
    let width = hi - lo;
    for v in clamped(values, lo, hi) {
        let bin = (((v? - lo) / width) * bins as f64).floor() as usize;
        counts[bin.min(bins - 1)] += 1;
    }
    let noisy = counts
        .iter()
        .map(|&c| mech.release(rng, c as f64))
        .collect::<Result<Vec<f64>, _>>()?;
    Ok(mech.describe(
        StatValue::Vector(noisy),
        1.0,
        epsilon,
        noise.delta(),
        mech.event(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bucketize, violates};

    fn scalar(r: &StatRelease) -> f64 {
        match r.value {
            StatValue::Scalar(v) => v,
            StatValue::Vector(_) => panic!("expected a scalar"),
        }
    }

    // Tolerances: a Laplace(b) draw exceeds 20b with probability e^-20 ≈ 2e-9; a Gaussian draw
    // exceeds 7σ with probability ≈ 3e-12.

    #[test]
    fn count_and_sum_are_near_the_truth_with_stated_parameters() {
        let mut rng = DpRng::seeded(81);
        let values: Vec<f64> = vec![-5.0, 0.5, 3.0, 100.0];
        let c = count(&mut rng, &values, 1.0, Noise::Laplace).unwrap();
        assert!((scalar(&c) - 4.0).abs() < 20.0 * c.scale.unwrap());
        assert_eq!(
            (c.sensitivity, c.epsilon, c.delta, c.sigma),
            (1.0, 1.0, 0.0, None)
        );
        // Clamped to [0, 10]: 0 + 0.5 + 3 + 10 = 13.5, sensitivity 10.
        let s = sum(&mut rng, &values, (0.0, 10.0), 100.0, Noise::Laplace).unwrap();
        assert_eq!(s.sensitivity, 10.0);
        assert!(
            (scalar(&s) - 13.5).abs() < 20.0 * s.scale.unwrap(),
            "{}",
            scalar(&s)
        );
        let g = sum(
            &mut rng,
            &values,
            (-2.0, 10.0),
            50.0,
            Noise::Gaussian { delta: 1e-6 },
        )
        .unwrap();
        assert!(
            (scalar(&g) - 11.5).abs() < 7.0 * g.sigma.unwrap(),
            "{}",
            scalar(&g)
        );
        assert_eq!((g.delta, g.scale), (1e-6, None));
        assert!(matches!(g.event, PrivacyEvent::Gaussian { .. }));
    }

    #[test]
    fn sum_is_exact_and_order_independent() {
        // Same seed, values in another order: an exact integer sum gives the same release bit
        // for bit; a floating-point sum of these values would depend on the order.
        let values: Vec<f64> = (0..1000)
            .map(|i| {
                if i % 2 == 0 {
                    1e15 + i as f64 * 0.3
                } else {
                    0.1 * i as f64
                }
            })
            .collect();
        let mut reversed = values.clone();
        reversed.reverse();
        let a = sum(
            &mut DpRng::seeded(5),
            &values,
            (0.0, 2e15),
            1.0,
            Noise::Laplace,
        )
        .unwrap();
        let b = sum(
            &mut DpRng::seeded(5),
            &reversed,
            (0.0, 2e15),
            1.0,
            Noise::Laplace,
        )
        .unwrap();
        assert_eq!(scalar(&a).to_bits(), scalar(&b).to_bits());
    }

    #[test]
    fn mean_splits_the_budget_and_stays_in_bounds() {
        let mut rng = DpRng::seeded(82);
        let values: Vec<f64> = (0..2000).map(|i| (i % 10) as f64).collect(); // mean 4.5
        let m = mean(&mut rng, &values, (0.0, 9.0), 10.0, Noise::Laplace).unwrap();
        // Centred sum noise ~ Laplace(4.5/5) / 2000 and count noise tiny: well within 0.05.
        assert!((scalar(&m) - 4.5).abs() < 0.05, "{}", scalar(&m));
        assert_eq!(m.sensitivity, 4.5);
        let PrivacyEvent::Composed { events } = &m.event else {
            panic!("{:?}", m.event)
        };
        let eps: f64 = events
            .iter()
            .map(|e| match e {
                PrivacyEvent::Laplace { noise_multiplier } => 1.0 / noise_multiplier,
                other => panic!("{other:?}"),
            })
            .sum();
        assert!(eps <= 10.0 && eps > 9.999, "{eps}");
        // With a tiny budget and few records the mean is still clamped into the bounds.
        for seed in 0..20 {
            let r = mean(
                &mut DpRng::seeded(seed),
                &values[..3],
                (0.0, 9.0),
                0.01,
                Noise::Gaussian { delta: 1e-6 },
            )
            .unwrap();
            assert!((0.0..=9.0).contains(&scalar(&r)));
            assert_eq!(r.delta, 1e-6);
        }
    }

    #[test]
    fn histogram_counts_each_record_once() {
        let mut rng = DpRng::seeded(83);
        let values = [-1.0, 0.5, 1.5, 1.7, 3.9, 10.0, 4.0];
        let h = histogram(&mut rng, &values, (0.0, 4.0), 4, 100.0, Noise::Laplace).unwrap();
        let StatValue::Vector(v) = &h.value else {
            panic!()
        };
        let truth = [2.0, 2.0, 0.0, 3.0];
        for (got, want) in v.iter().zip(truth) {
            assert!((got - want).abs() < 20.0 * h.scale.unwrap(), "{v:?}");
        }
        assert_eq!(h.sensitivity, 1.0);
        let json = serde_json::to_value(&h).unwrap();
        assert!(json["value"].is_array() && json["scale"].is_number() && json["sigma"].is_null());
    }

    #[test]
    fn histogram_privacy_check_on_neighbouring_tables() {
        // Neighbouring tables differ by one record in bin 0; the released bin-0 count is checked
        // like a scalar Laplace release (the other bins have identical laws).
        let n = 50_000;
        let table: Vec<f64> = vec![0.5; 10];
        let neighbour: Vec<f64> = vec![0.5; 11];
        let b = 1.0;
        let edges: Vec<f64> = (0..=28).map(|i| 10.0 - 6.0 * b + 0.5 * i as f64).collect();
        let mut rng = DpRng::seeded(84);
        let bin0 = |t: &[f64], rng: &mut DpRng| {
            let StatValue::Vector(v) = histogram(rng, t, (0.0, 2.0), 2, 1.0, Noise::Laplace)
                .unwrap()
                .value
            else {
                panic!()
            };
            v[0]
        };
        let a = bucketize((0..n).map(|_| bin0(&table, &mut rng)), &edges);
        let c = bucketize((0..n).map(|_| bin0(&neighbour, &mut rng)), &edges);
        let (bad, z, crit) = violates(&a, &c, n as u64, 1.0, 0.0);
        assert!(!bad, "{z} > {crit}");
    }

    #[test]
    fn invalid_input_is_named() {
        let mut rng = DpRng::seeded(0);
        let v = [1.0, f64::NAN];
        let err = |r: Result<StatRelease, MechanismError>| r.unwrap_err().to_string();
        assert!(err(sum(&mut rng, &v, (0.0, 1.0), 1.0, Noise::Laplace)).contains("row 1 is NaN"));
        assert!(
            err(sum(&mut rng, &[1.0], (2.0, 1.0), 1.0, Noise::Laplace))
                .contains("lo < hi, got [2, 1]")
        );
        assert!(
            err(mean(
                &mut rng,
                &[1.0],
                (0.0, f64::INFINITY),
                1.0,
                Noise::Laplace
            ))
            .contains("finite")
        );
        assert!(
            err(histogram(
                &mut rng,
                &[1.0],
                (0.0, 1.0),
                0,
                1.0,
                Noise::Laplace
            ))
            .contains("got 0")
        );
        assert!(err(count(&mut rng, &[1.0], -1.0, Noise::Laplace)).contains("got -1"));
        assert!(
            err(count(&mut rng, &[1.0], 1.0, Noise::Gaussian { delta: 0.0 })).contains("delta")
        );
        assert!(err(mean(&mut rng, &[1.0], (0.0, 1.0), f64::NAN, Noise::Laplace)).contains("NaN"));
        let bad_delta = mean(
            &mut rng,
            &[1.0],
            (0.0, 1.0),
            1.0,
            Noise::Gaussian { delta: 1.5 },
        );
        assert!(err(bad_delta).contains("got 1.5"));
        assert!(
            err(histogram(
                &mut rng,
                &[1.0],
                (0.0, 1.0),
                usize::MAX,
                1.0,
                Noise::Laplace
            ))
            .contains("bins")
        );
    }
}
