//! Feature scaling: min-max to [0, 1] and standardisation to zero mean, unit variance.
//!
//! # Privacy
//! [`MinMaxScaler::fit`] and [`StandardScaler::fit`] read the data: the fitted minima, maxima,
//! means and deviations are functions of the records and are **not** differentially private.
//! Fit them on public data, or use [`MinMaxScaler::from_public_range`] /
//! [`MinMaxScaler::from_bounds`], which take data-independent bounds (design invariant 2:
//! sensitivity from declared bounds, never from the data). Only those scalers keep a public
//! [`Dataset::feature_range`] after `transform` (they clamp to it); data-fitted ones set it to
//! `None`.

use crate::{DataError, Dataset};

/// Maps each feature from `[min, max]` to `[0, 1]`; a constant feature maps to 0.
#[derive(Debug, Clone, PartialEq)]
pub struct MinMaxScaler {
    min: Vec<f32>,
    max: Vec<f32>,
    public: bool,
}

impl MinMaxScaler {
    /// Fits per-feature minima and maxima on `d` (not private; see the module docs).
    ///
    /// # Errors
    /// [`DataError::InvalidParameter`] for a data set without records.
    pub fn fit(d: &Dataset) -> Result<Self, DataError> {
        check_nonempty(d)?;
        let p = d.n_features();
        let (mut min, mut max) = (vec![f32::INFINITY; p], vec![f32::NEG_INFINITY; p]);
        for row in d.x.chunks_exact(p) {
            for ((lo, hi), &v) in min.iter_mut().zip(max.iter_mut()).zip(row) {
                *lo = lo.min(v);
                *hi = hi.max(v);
            }
        }
        Ok(Self {
            min,
            max,
            public: false,
        })
    }

    /// A scaler from the data set's public, data-independent [`Dataset::feature_range`]
    /// (e.g. `[0, 16]` for digits).
    ///
    /// # Errors
    /// [`DataError::NoPublicRange`] when the data set has none (CSV and tabular sets).
    pub fn from_public_range(d: &Dataset) -> Result<Self, DataError> {
        let (lo, hi) = d.feature_range.ok_or_else(|| DataError::NoPublicRange {
            dataset: d.name.clone(),
            hint: "declare bounds with MinMaxScaler::from_bounds",
        })?;
        Self::from_bounds(lo, hi, d.n_features())
    }

    /// A scaler from declared bounds `[lo, hi]`, the same for all `n_features` features.
    ///
    /// # Errors
    /// [`DataError::InvalidParameter`] unless `lo < hi`, both finite.
    pub fn from_bounds(lo: f32, hi: f32, n_features: usize) -> Result<Self, DataError> {
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            return Err(DataError::param(
                "bounds",
                "finite with lo < hi",
                format!("[{lo}, {hi}]"),
            ));
        }
        Ok(Self {
            min: vec![lo; n_features],
            max: vec![hi; n_features],
            public: true,
        })
    }

    /// Per-feature lower ends.
    pub fn min(&self) -> &[f32] {
        &self.min
    }

    /// Per-feature upper ends.
    pub fn max(&self) -> &[f32] {
        &self.max
    }

    /// Scales `d` in place: `(x − min) / (max − min)`. Scalers from declared bounds clamp to
    /// [0, 1] and set `feature_range` to `(0, 1)`; fitted ones set it to `None`.
    ///
    /// # Errors
    /// [`DataError::FeatureMismatch`] when `d` has a different number of features.
    pub fn transform(&self, d: &mut Dataset) -> Result<(), DataError> {
        check_features("the MinMaxScaler", self.min.len(), d)?;
        let span: Vec<f32> = self
            .min
            .iter()
            .zip(&self.max)
            .map(|(lo, hi)| hi - lo)
            .collect();
        for row in d.x.chunks_exact_mut(self.min.len()) {
            for ((v, lo), s) in row.iter_mut().zip(&self.min).zip(&span) {
                let t = if *s > 0.0 { (*v - lo) / s } else { 0.0 };
                *v = if self.public { t.clamp(0.0, 1.0) } else { t };
            }
        }
        d.feature_range = self.public.then_some((0.0, 1.0));
        Ok(())
    }
}

/// Maps each feature to `(x − mean) / std` (population std); a constant feature is only
/// centred.
#[derive(Debug, Clone, PartialEq)]
pub struct StandardScaler {
    mean: Vec<f64>,
    std: Vec<f64>,
}

impl StandardScaler {
    /// Fits per-feature means and standard deviations on `d`, in f64 with two passes (not
    /// private; see the module docs).
    ///
    /// # Errors
    /// [`DataError::InvalidParameter`] for a data set without records.
    pub fn fit(d: &Dataset) -> Result<Self, DataError> {
        check_nonempty(d)?;
        let p = d.n_features();
        let n = d.n as f64;
        let mut mean = vec![0.0f64; p];
        for row in d.x.chunks_exact(p) {
            for (m, &v) in mean.iter_mut().zip(row) {
                *m += f64::from(v);
            }
        }
        mean.iter_mut().for_each(|m| *m /= n);
        let mut var = vec![0.0f64; p];
        for row in d.x.chunks_exact(p) {
            for ((s, &v), m) in var.iter_mut().zip(row).zip(&mean) {
                *s += (f64::from(v) - m).powi(2);
            }
        }
        let std = var.into_iter().map(|s| (s / n).sqrt()).collect();
        Ok(Self { mean, std })
    }

    /// Per-feature means.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Per-feature population standard deviations.
    pub fn std(&self) -> &[f64] {
        &self.std
    }

    /// Standardises `d` in place and sets `feature_range` to `None`.
    ///
    /// # Errors
    /// [`DataError::FeatureMismatch`] when `d` has a different number of features.
    pub fn transform(&self, d: &mut Dataset) -> Result<(), DataError> {
        check_features("the StandardScaler", self.mean.len(), d)?;
        for row in d.x.chunks_exact_mut(self.mean.len()) {
            for ((v, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                let scale = if *s > 0.0 { *s } else { 1.0 };
                *v = ((f64::from(*v) - m) / scale) as f32;
            }
        }
        d.feature_range = None;
        Ok(())
    }
}

fn check_nonempty(d: &Dataset) -> Result<(), DataError> {
    if d.n == 0 || d.n_features() == 0 {
        return Err(DataError::param(
            "dataset",
            "non-empty to fit a scaler",
            format!("{} records of {} features", d.n, d.n_features()),
        ));
    }
    Ok(())
}

fn check_features(what: &'static str, expected: usize, d: &Dataset) -> Result<(), DataError> {
    if d.n_features() != expected {
        return Err(DataError::FeatureMismatch {
            what,
            expected,
            got: d.n_features(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::tests::toy;

    #[test]
    fn min_max_maps_to_unit_interval() {
        let mut d = toy(5); // features [i, 10 i], i = 0..4
        let s = MinMaxScaler::fit(&d).unwrap();
        assert_eq!((s.min(), s.max()), (&[0.0, 0.0][..], &[4.0, 40.0][..]));
        s.transform(&mut d).unwrap();
        assert_eq!(d.row(2), &[0.5, 0.5]);
        assert_eq!(d.row(4), &[1.0, 1.0]);
        assert_eq!(d.feature_range, None);
        // Unseen data may fall outside [0, 1] with a fitted scaler.
        let mut wider = toy(9);
        s.transform(&mut wider).unwrap();
        assert_eq!(wider.row(8), &[2.0, 2.0]);
    }

    #[test]
    fn declared_bounds_clamp_and_keep_a_public_range() {
        let mut d = toy(5);
        d.feature_range = Some((0.0, 20.0));
        let s = MinMaxScaler::from_public_range(&d).unwrap();
        s.transform(&mut d).unwrap();
        assert_eq!(d.row(1), &[0.05, 0.5]);
        assert_eq!(d.row(3), &[0.15, 1.0]); // 30 clamped to the declared 20
        assert_eq!(d.feature_range, Some((0.0, 1.0)));
        let msg = MinMaxScaler::from_public_range(&toy(3))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("toy has no public"), "{msg}");
        assert!(MinMaxScaler::from_bounds(1.0, 1.0, 2).is_err());
        assert!(MinMaxScaler::from_bounds(f32::NAN, 1.0, 2).is_err());
    }

    #[test]
    fn standard_scaler_gives_zero_mean_unit_variance() {
        let mut d = toy(6);
        let s = StandardScaler::fit(&d).unwrap();
        assert!((s.mean()[0] - 2.5).abs() < 1e-12);
        // Population variance of 0..5 is 35/12.
        assert!((s.std()[0] - (35.0f64 / 12.0).sqrt()).abs() < 1e-12);
        s.transform(&mut d).unwrap();
        let refit = StandardScaler::fit(&d).unwrap();
        for j in 0..2 {
            assert!(refit.mean()[j].abs() < 1e-6 && (refit.std()[j] - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn constant_features_and_mismatches() {
        let mut d = toy(4);
        d.x.iter_mut().step_by(2).for_each(|v| *v = 3.0);
        let mut m = d.clone();
        MinMaxScaler::fit(&m).unwrap().transform(&mut m).unwrap();
        assert!(m.x.iter().step_by(2).all(|&v| v == 0.0));
        StandardScaler::fit(&d).unwrap().transform(&mut d).unwrap();
        assert!(d.x.iter().step_by(2).all(|&v| v == 0.0));

        let s = StandardScaler::fit(&toy(3)).unwrap();
        let mut other = toy(3);
        other.record_shape = vec![1];
        other.x.truncate(3);
        let msg = s.transform(&mut other).unwrap_err().to_string();
        assert!(
            msg.contains("has 2 features but the data set has 1"),
            "{msg}"
        );
        assert!(MinMaxScaler::fit(&toy(0)).is_err() && StandardScaler::fit(&toy(0)).is_err());
    }
}
