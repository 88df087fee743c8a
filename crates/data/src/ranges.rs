//! Per-feature ranges PUBLISHED with the embedded data sets: the one table every learner reads
//! when it needs public bounds (min-max scaling before DP-SGD, clamping boxes of DP k-means,
//! sensitivities of input perturbation).
//!
//! Nothing here is computed from the records. The numbers are copied from the data sets' own
//! documentation, which anyone can read without access to the data:
//! - iris: UCI `iris.names`, "Summary Statistics" (also scikit-learn's `iris.rst` DESCR);
//! - wine: the "Summary Statistics" table of scikit-learn's `wine_data.rst` DESCR (the UCI
//!   `wine.names` lists the attributes without ranges);
//! - breast-cancer: the "Summary Statistics" Min/Max table of scikit-learn's
//!   `breast_cancer.rst` DESCR;
//! - digits: UCI `optdigits.names` ("each element is an integer in the range 0..16").
//!
//! The published values are rounded to the digits printed there, so a few records lie just
//! outside (e.g. wine's colour intensity 1.28 against a published minimum of 1.3); users of
//! the table clamp into it, which keeps every sensitivity bound valid.

use crate::Source;

/// A data set's published per-feature ranges and where they are published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublishedRanges {
    /// `(min, max)` of every feature, in the column order of the loaded data set.
    pub ranges: &'static [(f64, f64)],
    /// The document the numbers are copied from.
    pub source: &'static str,
}

impl PublishedRanges {
    /// The common range when every feature has the same one (digits: `[0, 16]`).
    pub fn uniform(&self) -> Option<(f64, f64)> {
        let first = *self.ranges.first()?;
        self.ranges.iter().all(|&r| r == first).then_some(first)
    }
}

/// Iris (cm): sepal length, sepal width, petal length, petal width.
const IRIS: [(f64, f64); 4] = [(4.3, 7.9), (2.0, 4.4), (1.0, 6.9), (0.1, 2.5)];

/// Wine: alcohol, malic acid, ash, alcalinity of ash, magnesium, total phenols, flavanoids,
/// nonflavanoid phenols, proanthocyanins, colour intensity, hue, OD280/OD315, proline.
const WINE: [(f64, f64); 13] = [
    (11.0, 14.8),
    (0.74, 5.80),
    (1.36, 3.23),
    (10.6, 30.0),
    (70.0, 162.0),
    (0.98, 3.88),
    (0.34, 5.08),
    (0.13, 0.66),
    (0.41, 3.58),
    (1.3, 13.0),
    (0.48, 1.71),
    (1.27, 4.00),
    (278.0, 1680.0),
];

/// Breast cancer: the ten nucleus measurements (radius, texture, perimeter, area, smoothness,
/// compactness, concavity, concave points, symmetry, fractal dimension) as mean, standard
/// error and worst, in that order (the column order of scikit-learn and `dpml-data`).
const BREAST_CANCER: [(f64, f64); 30] = [
    (6.981, 28.11),
    (9.71, 39.28),
    (43.79, 188.5),
    (143.5, 2501.0),
    (0.053, 0.163),
    (0.019, 0.345),
    (0.0, 0.427),
    (0.0, 0.201),
    (0.106, 0.304),
    (0.05, 0.097),
    (0.112, 2.873),
    (0.36, 4.885),
    (0.757, 21.98),
    (6.802, 542.2),
    (0.002, 0.031),
    (0.002, 0.135),
    (0.0, 0.396),
    (0.0, 0.053),
    (0.008, 0.079),
    (0.001, 0.03),
    (7.93, 36.04),
    (12.02, 49.54),
    (50.41, 251.2),
    (185.2, 4254.0),
    (0.071, 0.223),
    (0.027, 1.058),
    (0.0, 1.252),
    (0.0, 0.291),
    (0.156, 0.664),
    (0.055, 0.208),
];

/// Digits: 64 pixels, each an integer count in 0..16.
const DIGITS: [(f64, f64); 64] = [(0.0, 16.0); 64];

impl Source {
    /// The per-feature ranges published with this data set's documentation (see the module
    /// docs for each source), or `None` where none are published: MNIST and Fashion-MNIST
    /// (their `[0, 1]` pixel range after /255 is carried by [`crate::Dataset::feature_range`])
    /// and `csv:` files, whose bounds only the user can declare.
    ///
    /// Never computed from records: a range read off private data would leak it.
    ///
    /// ```
    /// use dpml_data::Source;
    /// let iris = Source::Iris.published_ranges().unwrap();
    /// assert_eq!(iris.ranges[2], (1.0, 6.9)); // petal length, cm
    /// assert!(Source::Csv("x.csv".into()).published_ranges().is_none());
    /// ```
    pub fn published_ranges(&self) -> Option<PublishedRanges> {
        let (ranges, source): (&'static [(f64, f64)], &'static str) = match self {
            Source::Iris => (
                &IRIS,
                "UCI iris.names, Summary Statistics (= scikit-learn iris.rst)",
            ),
            Source::Wine => (&WINE, "scikit-learn wine_data.rst, Summary Statistics"),
            Source::BreastCancer => (
                &BREAST_CANCER,
                "scikit-learn breast_cancer.rst, Summary Statistics",
            ),
            Source::Digits => (&DIGITS, "UCI optdigits.names: integers in 0..16"),
            _ => return None,
        };
        Some(PublishedRanges { ranges, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LoadOptions, load};

    #[test]
    fn every_embedded_set_has_one_valid_range_per_feature() {
        for source in Source::all_named() {
            let Some(p) = source.published_ranges() else {
                assert!(!source.is_embedded(), "{source}");
                continue;
            };
            let data = load(&source, &LoadOptions::default()).unwrap().train;
            assert_eq!(p.ranges.len(), data.n_features(), "{source}");
            assert!(
                p.ranges
                    .iter()
                    .all(|&(lo, hi)| lo.is_finite() && hi.is_finite() && lo < hi),
                "{source}"
            );
        }
    }

    /// The table is typed by hand from the documentation, so check it against the data: a
    /// published min/max is the data's own rounded to the printed digits, so every value must
    /// lie inside the range widened by 1% of its width (the largest rounding gap is wine's
    /// alcohol minimum, 11.03 printed as 11.0: 0.8% of 3.8), and the range must not be far
    /// wider than the data (each end within 5% of the width of an observed value), which
    /// catches a misplaced row or a digit typed wrong.
    #[test]
    fn published_ranges_match_the_data_up_to_rounding() {
        for source in [
            Source::Iris,
            Source::Wine,
            Source::BreastCancer,
            Source::Digits,
        ] {
            let p = source.published_ranges().unwrap();
            let data = load(&source, &LoadOptions::default()).unwrap().train;
            let d = data.n_features();
            for (j, &(lo, hi)) in p.ranges.iter().enumerate() {
                let col = (0..data.n).map(|i| f64::from(data.x[i * d + j]));
                let (min, max) = col.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(v), b.max(v))
                });
                let w = hi - lo;
                assert!(
                    (min - lo).abs() <= 0.05 * w || source == Source::Digits,
                    "{source} feature {j}: min {min} vs {lo}"
                );
                assert!(
                    (max - hi).abs() <= 0.05 * w || source == Source::Digits,
                    "{source} feature {j}: max {max} vs {hi}"
                );
                assert!(
                    min >= lo - 0.01 * w && max <= hi + 0.01 * w,
                    "{source} feature {j}: data [{min}, {max}] outside [{lo}, {hi}]"
                );
            }
        }
    }

    #[test]
    fn uniform_range_is_the_common_one() {
        assert_eq!(
            Source::Digits.published_ranges().unwrap().uniform(),
            Some((0.0, 16.0))
        );
        assert_eq!(Source::Iris.published_ranges().unwrap().uniform(), None);
        assert!(Source::Mnist.published_ranges().is_none());
    }
}
