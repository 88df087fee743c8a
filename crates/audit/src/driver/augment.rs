//! LiRA's query augmentations: every audit record is scored by the target and reference models
//! not only as it is but also on copies shifted by one pixel (images only), and LiRA sums the
//! per-copy log-likelihood ratios, as with the augmented queries of Carlini et al. (2022,
//! Section VI-B: a Gaussian per augmentation, diagonal covariance).
//!
//! Shifts are made on the raw records; each model's input transform is applied afterwards, as
//! to every record it scores. Pixels shifted in from outside the image repeat the edge pixel.

use dpml_data::Dataset;

use super::error::{DriverError, Result};

/// Which copies of each record LiRA queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LiraQueries {
    /// The record as it is.
    #[default]
    Single,
    /// The record and its four 1-pixel shifts (up, down, left, right): 5 queries.
    Shifts,
}

/// The names accepted by [`LiraQueries::parse`].
pub const LIRA_QUERY_NAMES: &str = "single, shifts";

/// The (row, column) offsets of [`LiraQueries::Shifts`] after the identity.
const SHIFTS: [(isize, isize); 4] = [(-1, 0), (1, 0), (0, -1), (0, 1)];

impl LiraQueries {
    /// Parses "single" or "shifts".
    ///
    /// # Errors
    /// [`DriverError::Invalid`] naming an unknown value.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "single" => Ok(LiraQueries::Single),
            "shifts" => Ok(LiraQueries::Shifts),
            other => Err(DriverError::Invalid(format!(
                "unknown LiRA queries {other:?}; known: {LIRA_QUERY_NAMES}"
            ))),
        }
    }

    /// The name [`LiraQueries::parse`] accepts.
    pub fn name(self) -> &'static str {
        match self {
            LiraQueries::Single => "single",
            LiraQueries::Shifts => "shifts",
        }
    }

    /// Queries per record (1 or 5).
    pub fn count(self) -> usize {
        match self {
            LiraQueries::Single => 1,
            LiraQueries::Shifts => 1 + SHIFTS.len(),
        }
    }

    /// Checks that `data` can be queried this way.
    ///
    /// # Errors
    /// [`DriverError::Invalid`] for shifts of records that are not images `[C, H, W]`.
    pub fn check(self, data: &Dataset) -> Result<()> {
        if self == LiraQueries::Shifts && data.record_shape.len() != 3 {
            return Err(DriverError::Invalid(format!(
                "LiRA queries \"shifts\" need image records [channels, height, width]; {:?} has \
                 record shape {:?} (use \"single\")",
                data.name, data.record_shape
            )));
        }
        Ok(())
    }

    /// The records every model is scored on for LiRA: `data`, then each shifted copy of it
    /// (copy `a` of record `i` at row `a · n + i`).
    ///
    /// # Errors
    /// As [`LiraQueries::check`].
    pub fn eval_set(self, data: &Dataset) -> Result<Dataset> {
        self.check(data)?;
        let mut out = data.clone();
        if self == LiraQueries::Shifts {
            for &(dy, dx) in &SHIFTS {
                for i in 0..data.n {
                    shift_into(data.row(i), &data.record_shape, dy, dx, &mut out.x);
                }
                out.y.extend_from_slice(&data.y);
                out.n += data.n;
            }
        }
        Ok(out)
    }
}

/// Appends `record` (shape `[C, H, W]`) moved by `dy` rows and `dx` columns to `out`
/// (the pixel at (r, c) is the input's (r − dy, c − dx), clamped to the image).
fn shift_into(record: &[f32], shape: &[usize], dy: isize, dx: isize, out: &mut Vec<f32>) {
    let (h, w) = (shape[1], shape[2]);
    let clamp = |v: isize, n: usize| v.clamp(0, n as isize - 1) as usize;
    for plane in record.chunks(h * w) {
        for r in 0..h {
            let src_r = clamp(r as isize - dy, h);
            for c in 0..w {
                out.push(plane[src_r * w + clamp(c as isize - dx, w)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Dataset {
        // One 1×3×3 image with pixels 1..9, row-major.
        Dataset {
            name: "img".into(),
            x: (1..=9).map(|v| v as f32).collect(),
            n: 1,
            record_shape: vec![1, 3, 3],
            y: vec![7],
            n_classes: 10,
            feature_names: vec![],
            class_names: vec![],
            feature_range: None,
        }
    }

    #[test]
    fn shifts_move_pixels_and_repeat_the_edge() {
        let q = LiraQueries::Shifts.eval_set(&image()).unwrap();
        assert_eq!((q.n, q.y.clone()), (5, vec![7; 5]));
        let copy = |a: usize| q.x[a * 9..(a + 1) * 9].to_vec();
        assert_eq!(copy(0), (1..=9).map(|v| v as f32).collect::<Vec<_>>());
        // Up by one row: rows 2, 3, 3.
        assert_eq!(copy(1), vec![4., 5., 6., 7., 8., 9., 7., 8., 9.]);
        // Down by one row: rows 1, 1, 2.
        assert_eq!(copy(2), vec![1., 2., 3., 1., 2., 3., 4., 5., 6.]);
        // Left by one column.
        assert_eq!(copy(3), vec![2., 3., 3., 5., 6., 6., 8., 9., 9.]);
        // Right by one column.
        assert_eq!(copy(4), vec![1., 1., 2., 4., 4., 5., 7., 7., 8.]);
        assert_eq!(LiraQueries::Single.eval_set(&image()).unwrap(), image());
    }

    #[test]
    fn names_and_bad_input() {
        assert_eq!(LiraQueries::parse("shifts").unwrap().count(), 5);
        assert_eq!(LiraQueries::parse("single").unwrap().name(), "single");
        let e = LiraQueries::parse("flips").unwrap_err().to_string();
        assert!(
            e.contains("\"flips\"") && e.contains("single, shifts"),
            "{e}"
        );
        let table = Dataset {
            record_shape: vec![9],
            ..image()
        };
        let e = LiraQueries::Shifts.check(&table).unwrap_err().to_string();
        assert!(e.contains("[9]") && e.contains("image"), "{e}");
        assert!(LiraQueries::Single.check(&table).is_ok());
    }
}
