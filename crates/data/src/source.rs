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
    /// A CSV file with a header row.
    Csv(PathBuf),
}

/// The names [`Source::from_str`] accepts, for error messages and help text.
pub const KNOWN_NAMES: &str = "mnist, fashion-mnist, iris, breast-cancer, wine, digits, csv:PATH";

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
        }
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

    /// Parses `mnist`, `fashion-mnist`, `iris`, `breast-cancer`, `wine`, `digits` or
    /// `csv:PATH`.
    ///
    /// # Errors
    /// [`DataError::UnknownSource`] naming the input and listing the known names, also for
    /// `csv:` with an empty path.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || DataError::UnknownSource {
            name: s.to_string(),
            known: KNOWN_NAMES.into(),
        };
        if let Some(path) = s.strip_prefix("csv:") {
            return if path.is_empty() {
                Err(unknown())
            } else {
                Ok(Source::Csv(path.into()))
            };
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
    }

    #[test]
    fn unknown_names_are_named_and_known_ones_listed() {
        for bad in ["mnits", "", "csv:", "MNIST"] {
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
