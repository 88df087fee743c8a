//! Declared per-dimension bounds: the public box every record is clamped into, and the source
//! of every sensitivity in this module (design invariant 2: never from the data).

use serde::Serialize;

use crate::LearnError;

/// Public per-dimension bounds `[lo_j, hi_j]` declared by the user, not computed from the
/// private data. Records are clamped into this box before anything else touches them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bounds {
    lo: Vec<f64>,
    hi: Vec<f64>,
}

impl Bounds {
    /// Bounds with lower ends `lo` and upper ends `hi`, one pair per dimension.
    ///
    /// # Errors
    /// [`LearnError::InvalidParameter`] when the two lists differ in length or are empty, or
    /// when some `lo_j`, `hi_j` is not finite or `lo_j >= hi_j` (the message names j and both
    /// values).
    pub fn new(lo: Vec<f64>, hi: Vec<f64>) -> Result<Self, LearnError> {
        if lo.len() != hi.len() {
            return Err(LearnError::invalid(
                "bounds",
                "must give as many upper as lower ends",
                format!("{} lower and {} upper", lo.len(), hi.len()),
            ));
        }
        if lo.is_empty() {
            return Err(LearnError::invalid(
                "bounds",
                "must cover at least one dimension",
                "none",
            ));
        }
        for (j, (&l, &h)) in lo.iter().zip(&hi).enumerate() {
            if !(l.is_finite() && h.is_finite() && l < h) {
                return Err(LearnError::invalid(
                    "bounds",
                    "must be finite with lo < hi in every dimension",
                    format!("[{l}, {h}] in dimension {j}"),
                ));
            }
        }
        Ok(Self { lo, hi })
    }

    /// The same interval `[lo, hi]` in each of `d` dimensions.
    ///
    /// # Errors
    /// As [`Bounds::new`] (also for `d = 0`).
    pub fn uniform(lo: f64, hi: f64, d: usize) -> Result<Self, LearnError> {
        Self::new(vec![lo; d], vec![hi; d])
    }

    /// Bounds from `(lo, hi)` pairs, one per dimension.
    ///
    /// # Errors
    /// As [`Bounds::new`].
    pub fn from_pairs(pairs: &[(f64, f64)]) -> Result<Self, LearnError> {
        Self::new(
            pairs.iter().map(|p| p.0).collect(),
            pairs.iter().map(|p| p.1).collect(),
        )
    }

    /// Number of dimensions covered.
    pub fn dims(&self) -> usize {
        self.lo.len()
    }

    /// Lower ends.
    pub fn lo(&self) -> &[f64] {
        &self.lo
    }

    /// Upper ends.
    pub fn hi(&self) -> &[f64] {
        &self.hi
    }

    /// `v` clamped into `[lo_j, hi_j]`. NaN must be rejected before.
    pub(crate) fn clamp(&self, j: usize, v: f64) -> f64 {
        v.clamp(self.lo[j], self.hi[j])
    }

    /// The midpoint of dimension `j`.
    pub(crate) fn mid(&self, j: usize) -> f64 {
        0.5 * self.lo[j] + 0.5 * self.hi[j]
    }

    /// Width `hi_j − lo_j`.
    pub(crate) fn width(&self, j: usize) -> f64 {
        self.hi[j] - self.lo[j]
    }

    /// `v` mapped affinely from `[lo_j, hi_j]` to `[-1, 1]` (Su et al.'s normalisation).
    pub(crate) fn to_unit(&self, j: usize, v: f64) -> f64 {
        (2.0 * (v - self.lo[j]) / self.width(j) - 1.0).clamp(-1.0, 1.0)
    }

    /// The inverse of [`Bounds::to_unit`].
    pub(crate) fn unscale(&self, j: usize, u: f64) -> f64 {
        self.clamp(j, self.lo[j] + 0.5 * (u + 1.0) * self.width(j))
    }

    /// Checks that the bounds cover exactly `d` dimensions.
    pub(crate) fn check_dims(&self, d: usize) -> Result<(), LearnError> {
        if self.dims() == d {
            Ok(())
        } else {
            Err(LearnError::BoundsDimension {
                bounds: self.dims(),
                data: d,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_bounds_are_named() {
        let msg = Bounds::new(vec![0.0, 1.0], vec![1.0, 1.0])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("[1, 1] in dimension 1"), "{msg}");
        let msg = Bounds::new(vec![f64::NAN], vec![1.0])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("NaN"), "{msg}");
        let msg = Bounds::new(vec![0.0], vec![1.0, 2.0])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("1 lower and 2 upper"), "{msg}");
        assert!(Bounds::uniform(0.0, 1.0, 0).is_err());
        let msg = Bounds::uniform(0.0, 1.0, 3)
            .unwrap()
            .check_dims(4)
            .unwrap_err()
            .to_string();
        assert_eq!(msg, "bounds cover 3 dimensions, but the data has 4");
    }

    #[test]
    fn unit_map_round_trips_and_clamps() {
        let b = Bounds::from_pairs(&[(4.0, 8.0), (-1.0, 0.0)]).unwrap();
        assert_eq!(b.to_unit(0, 4.0), -1.0);
        assert_eq!(b.to_unit(0, 8.0), 1.0);
        assert_eq!(b.to_unit(0, 100.0), 1.0);
        assert!((b.unscale(1, b.to_unit(1, -0.25)) + 0.25).abs() < 1e-12);
        assert_eq!(b.mid(0), 6.0);
        assert_eq!(b.clamp(1, 3.0), 0.0);
    }
}
