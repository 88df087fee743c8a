//! Naming data sets and finding the data directory.
//!
//! A [`Source`] is what a user types after `--dataset`: one of the named sets or `csv:PATH`.
//! Sets kept in files (MNIST, Fashion-MNIST) are looked up in the data directory: the one given
//! in [`LoadOptions::data_dir`], else the environment variable [`DATA_DIR_ENV`]
//! (`DPML_DATA_DIR`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::DataError;

/// The environment variable naming the data directory when none is given explicitly.
pub const DATA_DIR_ENV: &str = "DPML_DATA_DIR";

/// A data set: one of the named sets or the user's own CSV file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// MNIST handwritten digits (IDX files in `DIR/mnist/`), 60,000 train + 10,000 test.
    Mnist,
    /// Fashion-MNIST (IDX files in `DIR/fashion-mnist/`), 60,000 train + 10,000 test.
    FashionMnist,
    /// Fisher's iris, embedded: 150 rows, 4 features, 3 classes.
    Iris,
    /// Breast Cancer Wisconsin (Diagnostic), embedded: 569 rows, 30 features, 2 classes.
    BreastCancer,
    /// UCI wine, embedded: 178 rows, 13 features, 3 classes.
    Wine,
    /// UCI optical digits (8×8), embedded: 1,797 rows, 64 features, 10 classes.
    Digits,
    /// A CSV file with a header row (gzip-compressed or not), `csv:PATH`.
    Csv(PathBuf),
    /// Two NumPy arrays, features and labels: `npy:FEATURES.npy,LABELS.npy`.
    Npy {
        /// The features, `[N, …]`.
        features: PathBuf,
        /// The labels, `[N]`.
        labels: PathBuf,
    },
    /// A NumPy archive holding arrays `x` (features) and `y` (labels): `npz:FILE.npz`.
    Npz(PathBuf),
    /// IDX files of any shape: `idx:IMAGES,LABELS`.
    Idx {
        /// The images (or any unsigned-byte array `[N, …]`).
        images: PathBuf,
        /// The labels, `[N]`.
        labels: PathBuf,
    },
    /// A folder with one subfolder of PNG or JPEG images per class: `images:DIR`.
    Images(PathBuf),
    /// A Parquet table, read as a csv table is: `parquet:PATH`.
    Parquet(PathBuf),
}

/// The names [`Source::from_str`] accepts, for error messages and help text.
pub const KNOWN_NAMES: &str = "mnist, fashion-mnist, iris, breast-cancer, wine, digits, csv:PATH, \
     npy:FEATURES,LABELS, npz:PATH, idx:IMAGES,LABELS, images:DIR, parquet:PATH";

impl Source {
    /// The name a user types for this source (`csv:PATH` for a CSV file).
    pub fn name(&self) -> String {
        match self {
            Source::Mnist => "mnist".into(),
            Source::FashionMnist => "fashion-mnist".into(),
            Source::Iris => "iris".into(),
            Source::BreastCancer => "breast-cancer".into(),
            Source::Wine => "wine".into(),
            Source::Digits => "digits".into(),
            Source::Csv(path) => format!("csv:{}", path.display()),
            Source::Npy { features, labels } => {
                format!("npy:{},{}", features.display(), labels.display())
            }
            Source::Npz(path) => format!("npz:{}", path.display()),
            Source::Idx { images, labels } => {
                format!("idx:{},{}", images.display(), labels.display())
            }
            Source::Images(dir) => format!("images:{}", dir.display()),
            Source::Parquet(path) => format!("parquet:{}", path.display()),
        }
    }

    /// The user's files this source reads (empty for the named sets).
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            Source::Csv(p) | Source::Npz(p) | Source::Images(p) | Source::Parquet(p) => vec![p],
            Source::Npy { features, labels } => vec![features, labels],
            Source::Idx { images, labels } => vec![images, labels],
            _ => Vec::new(),
        }
    }

    /// Whether this is the user's own data (a file or folder), whose classes and bounds the
    /// user declares, rather than a named set with built-in ones.
    pub fn is_user_data(&self) -> bool {
        !self.paths().is_empty()
    }

    /// Every named source (all but `Csv`), in catalogue order.
    pub fn all_named() -> Vec<Source> {
        vec![
            Source::Mnist,
            Source::FashionMnist,
            Source::Iris,
            Source::BreastCancer,
            Source::Wine,
            Source::Digits,
        ]
    }

    /// Whether the data is compiled into the binary.
    pub fn is_embedded(&self) -> bool {
        matches!(
            self,
            Source::Iris | Source::BreastCancer | Source::Wine | Source::Digits
        )
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Source {
    type Err = DataError;

    /// Parses `mnist`, `fashion-mnist`, `iris`, `breast-cancer`, `wine`, `digits`, `csv:PATH`,
    /// `npy:FEATURES,LABELS`, `npz:PATH`, `idx:IMAGES,LABELS`, `images:DIR` or `parquet:PATH`.
    ///
    /// # Errors
    /// [`DataError::UnknownSource`] naming the input and listing the known names, also for
    /// `csv:` with an empty path.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || DataError::UnknownSource {
            name: s.to_string(),
            known: KNOWN_NAMES.into(),
        };
        if let Some((kind, rest)) = s.split_once(':') {
            let path = |p: &str| (!p.is_empty()).then(|| PathBuf::from(p));
            let pair = || {
                let (a, b) = rest.split_once(',')?;
                Some((path(a)?, path(b)?))
            };
            let source = match kind {
                "csv" => path(rest).map(Source::Csv),
                "npz" => path(rest).map(Source::Npz),
                "images" => path(rest).map(Source::Images),
                "parquet" => path(rest).map(Source::Parquet),
                "npy" => pair().map(|(features, labels)| Source::Npy { features, labels }),
                "idx" => pair().map(|(images, labels)| Source::Idx { images, labels }),
                _ => None,
            };
            return source.ok_or_else(unknown);
        }
        Ok(match s {
            "mnist" => Source::Mnist,
            "fashion-mnist" => Source::FashionMnist,
            "iris" => Source::Iris,
            "breast-cancer" => Source::BreastCancer,
            "wine" => Source::Wine,
            "digits" => Source::Digits,
            _ => return Err(unknown()),
        })
    }
}

/// How to find and read a data set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOptions {
    /// The data directory (holding `mnist/`, `fashion-mnist/`); `None` falls back to the
    /// environment variable `DPML_DATA_DIR`.
    pub data_dir: Option<PathBuf>,
    /// For CSV files: the column holding the class label (default: the schema's, else the
    /// last column).
    pub label_column: Option<String>,
    /// The user's declarations (bounds, classes, label range, features), over the data set's
    /// built-in schema.
    pub schema: Option<crate::Schema>,
}

/// The data directory to use: `explicit` if given, else `DPML_DATA_DIR` if set and non-empty.
pub fn resolve_data_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(DATA_DIR_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Source::all_named() {
            assert_eq!(s.name().parse::<Source>().unwrap(), s);
            assert!(KNOWN_NAMES.contains(&s.name()));
        }
        let csv: Source = "csv:some/file.csv".parse().unwrap();
        assert_eq!(csv, Source::Csv("some/file.csv".into()));
        assert_eq!(csv.name(), "csv:some/file.csv");
        assert_eq!(csv.to_string(), "csv:some/file.csv");
        for name in [
            "npy:a.npy,b.npy",
            "npz:d.npz",
            "idx:i,l",
            "images:dir",
            "parquet:t.parquet",
        ] {
            let s: Source = name.parse().unwrap();
            assert_eq!(s.name(), name);
            assert!(s.is_user_data());
        }
    }

    #[test]
    fn unknown_names_are_named_and_known_ones_listed() {
        for bad in ["mnits", "", "csv:", "MNIST", "npy:x.npy", "idx:,y", "tsv:x"] {
            let msg = bad.parse::<Source>().unwrap_err().to_string();
            assert!(msg.contains(&format!("\"{bad}\"")), "{msg}");
            assert!(
                msg.contains("fashion-mnist") && msg.contains("csv:PATH"),
                "{msg}"
            );
        }
    }

    #[test]
    fn explicit_data_dir_wins() {
        assert_eq!(
            resolve_data_dir(Some(Path::new("/x"))),
            Some(PathBuf::from("/x"))
        );
    }
}
