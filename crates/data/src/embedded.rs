//! The four small classic tables compiled into the binary: iris, breast-cancer, wine, digits.
//!
//! The files in `crates/data/data/` are byte-exact copies from scikit-learn 1.9.1 (license
//! lines in `data/NOTICE`). The three plain CSVs start with a line
//! `n_samples,n_features,<class names>` and then hold `n_features` numbers and an integer
//! class per row; `digits.csv.gz` is a gzip CSV without header, 64 pixel values (0..16) and the
//! digit per row. The bytes are parsed on use, never at startup. Feature names are snake_case
//! versions of scikit-learn's; the label column is `target`.

use std::io::Read;
use std::path::{Path, PathBuf};

use csv::{ReaderBuilder, StringRecord};
use flate2::read::GzDecoder;

use crate::csvfile::csv_error;
use crate::tabular::{Columns, parse_cell};
use crate::{DataError, Source};

/// The name of the label column of every embedded table.
pub const LABEL_COLUMN: &str = "target";

/// One embedded table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Embedded {
    Iris,
    BreastCancer,
    Wine,
    Digits,
}

const BREAST_CANCER_BASE: [&str; 10] = [
    "radius",
    "texture",
    "perimeter",
    "area",
    "smoothness",
    "compactness",
    "concavity",
    "concave_points",
    "symmetry",
    "fractal_dimension",
];

const WINE_FEATURES: [&str; 13] = [
    "alcohol",
    "malic_acid",
    "ash",
    "alcalinity_of_ash",
    "magnesium",
    "total_phenols",
    "flavanoids",
    "nonflavanoid_phenols",
    "proanthocyanins",
    "color_intensity",
    "hue",
    "od280/od315_of_diluted_wines",
    "proline",
];

const IRIS_FEATURES: [&str; 4] = ["sepal_length", "sepal_width", "petal_length", "petal_width"];

impl Embedded {
    /// Every embedded table.
    pub const ALL: [Embedded; 4] = [
        Embedded::Iris,
        Embedded::BreastCancer,
        Embedded::Wine,
        Embedded::Digits,
    ];

    /// The embedded table behind `source`, if it is one.
    pub fn from_source(source: &Source) -> Option<Self> {
        match source {
            Source::Iris => Some(Embedded::Iris),
            Source::BreastCancer => Some(Embedded::BreastCancer),
            Source::Wine => Some(Embedded::Wine),
            Source::Digits => Some(Embedded::Digits),
            _ => None,
        }
    }

    /// The source this table is loaded for.
    pub fn source(self) -> Source {
        match self {
            Embedded::Iris => Source::Iris,
            Embedded::BreastCancer => Source::BreastCancer,
            Embedded::Wine => Source::Wine,
            Embedded::Digits => Source::Digits,
        }
    }

    /// The data set name (as in [`Source::name`]).
    pub fn name(self) -> &'static str {
        match self {
            Embedded::Iris => "iris",
            Embedded::BreastCancer => "breast-cancer",
            Embedded::Wine => "wine",
            Embedded::Digits => "digits",
        }
    }

    /// The original file name (as in scikit-learn and `SHA256SUMS`).
    pub fn file_name(self) -> &'static str {
        match self {
            Embedded::Iris => "iris.csv",
            Embedded::BreastCancer => "breast_cancer.csv",
            Embedded::Wine => "wine_data.csv",
            Embedded::Digits => "digits.csv.gz",
        }
    }

    /// The compiled-in bytes.
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Embedded::Iris => include_bytes!("../data/iris.csv"),
            Embedded::BreastCancer => include_bytes!("../data/breast_cancer.csv"),
            Embedded::Wine => include_bytes!("../data/wine_data.csv"),
            Embedded::Digits => include_bytes!("../data/digits.csv.gz"),
        }
    }

    /// (rows, features, classes), known without parsing; tests check them against the data.
    pub fn shape(self) -> (usize, usize, usize) {
        match self {
            Embedded::Iris => (150, 4, 3),
            Embedded::BreastCancer => (569, 30, 2),
            Embedded::Wine => (178, 13, 3),
            Embedded::Digits => (1797, 64, 10),
        }
    }

    /// The path used in error messages: `embedded:FILE`.
    pub fn pseudo_path(self) -> PathBuf {
        PathBuf::from(format!("embedded:{}", self.file_name()))
    }

    fn feature_names(self) -> Vec<String> {
        match self {
            Embedded::Iris => IRIS_FEATURES.iter().map(|s| s.to_string()).collect(),
            Embedded::Wine => WINE_FEATURES.iter().map(|s| s.to_string()).collect(),
            Embedded::BreastCancer => {
                let mean = BREAST_CANCER_BASE.iter().map(|b| format!("mean_{b}"));
                let error = BREAST_CANCER_BASE.iter().map(|b| format!("{b}_error"));
                let worst = BREAST_CANCER_BASE.iter().map(|b| format!("worst_{b}"));
                mean.chain(error).chain(worst).collect()
            }
            Embedded::Digits => (0..64).map(|i| format!("pixel_{i}")).collect(),
        }
    }

    /// Parses the compiled-in bytes.
    ///
    /// # Errors
    /// Only if the compiled-in data were damaged (the tests rule that out): a [`DataError`]
    /// naming `embedded:FILE` and the line.
    pub fn parse(self) -> Result<Columns, DataError> {
        let path = self.pseudo_path();
        let (rows, n_features, n_classes) = self.shape();
        let mut text = Vec::new();
        let bytes: &[u8] = if self == Embedded::Digits {
            GzDecoder::new(self.bytes())
                .read_to_end(&mut text)
                .map_err(|e| DataError::CorruptGzip {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
            &text
        } else {
            self.bytes()
        };
        let mut reader = ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(bytes);
        let mut records = reader.records();
        let class_names = if self == Embedded::Digits {
            (0..10).map(|d| d.to_string()).collect()
        } else {
            let header = records
                .next()
                .transpose()
                .map_err(|e| csv_error(&path, e))?;
            header_classes(&path, header, rows, n_features, n_classes)?
        };

        let mut names = self.feature_names();
        names.push(LABEL_COLUMN.to_string());
        let mut values = vec![Vec::with_capacity(rows); n_features + 1];
        let mut y = Vec::with_capacity(rows);
        for record in records {
            let record = record.map_err(|e| csv_error(&path, e))?;
            let line = record.position().map_or(0, csv::Position::line);
            if record.len() != n_features + 1 {
                return Err(DataError::Csv {
                    path: path.clone(),
                    line,
                    reason: format!("{} fields, expected {}", record.len(), n_features + 1),
                });
            }
            for (j, cell) in record.iter().enumerate() {
                values[j].push(parse_cell(cell, &path, line, &names[j])?);
            }
            y.push(class_index(&path, line, &record[n_features], n_classes)?);
        }
        if y.len() != rows {
            return Err(DataError::Csv {
                path,
                line: 0,
                reason: format!("{} rows, expected {rows}", y.len()),
            });
        }
        Ok(Columns {
            name: self.name().to_string(),
            names,
            values,
            label: n_features,
            y,
            class_names,
            record_shape: (self == Embedded::Digits).then(|| vec![1, 8, 8]),
            // Digits' one published range ([0, 16] for every pixel); the other sets publish one
            // range per feature (`Source::published_ranges`), not a common one.
            feature_range: self
                .source()
                .published_ranges()
                .and_then(|p| p.uniform())
                .map(|(lo, hi)| (lo as f32, hi as f32)),
        })
    }
}

/// Checks the scikit-learn header line `n_samples,n_features,<class names>` against the
/// declared shape; returns the class names.
fn header_classes(
    path: &Path,
    header: Option<StringRecord>,
    rows: usize,
    n_features: usize,
    n_classes: usize,
) -> Result<Vec<String>, DataError> {
    let header = header.ok_or_else(|| DataError::EmptyCsv {
        path: path.to_path_buf(),
    })?;
    let declared = (
        header.get(0).and_then(|s| s.parse().ok()),
        header.get(1).and_then(|s| s.parse().ok()),
    );
    if declared != (Some(rows), Some(n_features)) || header.len() != n_classes + 2 {
        return Err(DataError::Csv {
            path: path.to_path_buf(),
            line: 1,
            reason: format!(
                "header {header:?} does not declare {rows} rows of {n_features} features and \
                 {n_classes} classes"
            ),
        });
    }
    Ok(header.iter().skip(2).map(str::to_string).collect())
}

/// Parses a class index cell, which must be an integer below `n_classes`.
fn class_index(path: &Path, line: u64, cell: &str, n_classes: usize) -> Result<u32, DataError> {
    cell.parse::<u32>()
        .ok()
        .filter(|&c| (c as usize) < n_classes)
        .ok_or_else(|| DataError::Csv {
            path: path.to_path_buf(),
            line,
            reason: format!(
                "class {} is not an integer in 0..{n_classes}",
                crate::error::quoted(cell)
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_matches_its_declared_shape() {
        for e in Embedded::ALL {
            let c = e.parse().unwrap();
            let (rows, features, classes) = e.shape();
            let d = c.clone().into_dataset(&e.pseudo_path()).unwrap();
            assert_eq!(
                (d.n, d.n_features(), d.n_classes),
                (rows, features, classes),
                "{e:?}"
            );
            assert_eq!(d.feature_names.len(), features);
            assert_eq!(d.x.len(), rows * features);
            assert!(
                d.class_counts().iter().all(|&k| k > 0),
                "{e:?}: {:?}",
                d.class_counts()
            );
            let t = c.into_table();
            assert_eq!(t.columns.len(), features + 1);
            assert_eq!(t.n_rows(), rows);
            assert!(t.values.iter().all(|col| col.len() == rows));
            let target = t.column(LABEL_COLUMN).unwrap();
            assert!(target.iter().zip(&d.y).all(|(&v, &c)| v == f64::from(c)));
        }
    }

    #[test]
    fn tables_have_their_documented_classes_and_values() {
        let iris = Embedded::Iris
            .parse()
            .unwrap()
            .into_dataset(Path::new(""))
            .unwrap();
        assert_eq!(iris.class_names, vec!["setosa", "versicolor", "virginica"]);
        assert_eq!(iris.class_counts(), vec![50, 50, 50]);
        assert_eq!(iris.row(0), &[5.1, 3.5, 1.4, 0.2]);
        assert_eq!(iris.feature_names[2], "petal_length");

        let bc = Embedded::BreastCancer
            .parse()
            .unwrap()
            .into_dataset(Path::new(""))
            .unwrap();
        assert_eq!(bc.class_names, vec!["malignant", "benign"]);
        assert_eq!(bc.class_counts(), vec![212, 357]);
        assert_eq!(bc.feature_names[0], "mean_radius");
        assert_eq!(bc.feature_names[10], "radius_error");
        assert_eq!(bc.feature_names[29], "worst_fractal_dimension");

        let wine = Embedded::Wine
            .parse()
            .unwrap()
            .into_dataset(Path::new(""))
            .unwrap();
        assert_eq!(wine.class_counts(), vec![59, 71, 48]);
        assert_eq!(wine.feature_names[12], "proline");
        assert_eq!(wine.row(0)[12], 1065.0);

        let digits = Embedded::Digits
            .parse()
            .unwrap()
            .into_dataset(Path::new(""))
            .unwrap();
        assert_eq!(digits.record_shape, vec![1, 8, 8]);
        assert_eq!(digits.feature_range, Some((0.0, 16.0)));
        assert!(
            digits
                .x
                .iter()
                .all(|&v| (0.0..=16.0).contains(&v) && v.fract() == 0.0)
        );
        let counts = digits.class_counts();
        assert!(
            counts.iter().all(|&k| (174..=183).contains(&k)),
            "{counts:?}"
        );
        assert_eq!(digits.y[0], 0);
    }
}
