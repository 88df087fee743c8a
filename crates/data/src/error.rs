//! The one error type of the data layer.
//!
//! Every message names what was wrong and where: the file, the line (1-based, as a user counts
//! lines in an editor), the column and the offending value, so the CLI can print it as one
//! `error: …` line without adding context.

use std::path::PathBuf;

/// Everything that can go wrong while finding, reading, splitting, scaling, verifying or
/// fetching data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// A data set name that is not one of the known ones.
    #[error("unknown data set \"{name}\"; known: {known}")]
    UnknownSource {
        /// What the user typed.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },

    /// A data set kept in files, but no data directory was given.
    #[error(
        "{dataset} needs a data directory: pass --data-dir DIR or set DPML_DATA_DIR \
         (get the files with `dpml data fetch {dataset} --to DIR`)"
    )]
    NoDataDir {
        /// The data set name.
        dataset: String,
    },

    /// A required file is in none of the places we looked.
    #[error(
        "{dataset}: file not found: looked for {} (get the files with `dpml data fetch {dataset} --to {}`)",
        looked_for.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and "),
        data_dir.display()
    )]
    NotFound {
        /// The data set name.
        dataset: String,
        /// Every path that was tried.
        looked_for: Vec<PathBuf>,
        /// The data directory that was searched.
        data_dir: PathBuf,
    },

    /// An operating-system error on a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// A file that is not a valid IDX file (bad magic, element type, dimensions, trailing data).
    #[error("{}: not a valid IDX file: {reason}", path.display())]
    InvalidIdx {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the values found.
        reason: String,
    },

    /// A file that ends before the length its header declares.
    #[error(
        "{}: truncated: header declares {expected} data bytes but the file holds only {got}",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes of data the header declares.
        expected: u64,
        /// Bytes actually present.
        got: u64,
    },

    /// A compressed file whose gzip stream is damaged.
    #[error("{}: corrupt or truncated gzip data: {detail}", path.display())]
    CorruptGzip {
        /// The file.
        path: PathBuf,
        /// The decoder's message.
        detail: String,
    },

    /// Image and label files that disagree on the number of records.
    #[error(
        "{} holds {images} images but {} holds {labels} labels",
        images_path.display(),
        labels_path.display()
    )]
    CountMismatch {
        /// The image file.
        images_path: PathBuf,
        /// Its record count.
        images: usize,
        /// The label file.
        labels_path: PathBuf,
        /// Its record count.
        labels: usize,
    },

    /// A CSV file that cannot be parsed (ragged rows, invalid UTF-8, …).
    #[error("{}: line {line}: {reason}", path.display())]
    Csv {
        /// The file (or `embedded:NAME`).
        path: PathBuf,
        /// The line number, 1-based.
        line: u64,
        /// What is wrong.
        reason: String,
    },

    /// An input file, or one line of it, larger than this reader accepts (named limits keep a
    /// huge or endless file from exhausting memory).
    #[error("{}: {reason}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// What is too large, and the limit.
        reason: String,
    },

    /// A CSV file with no header row.
    #[error("{}: empty file: expected a header row naming the columns", path.display())]
    EmptyCsv {
        /// The file.
        path: PathBuf,
    },

    /// A CSV file with a header but no data rows.
    #[error("{}: the header is there but there are no data rows", path.display())]
    NoRows {
        /// The file.
        path: PathBuf,
    },

    /// A header that names the same column twice.
    #[error("{}: column {} appears more than once in the header", path.display(), quoted(column))]
    DuplicateColumn {
        /// The file.
        path: PathBuf,
        /// The repeated name.
        column: String,
    },

    /// A cell that should be a number but is not (or is not finite, or is beyond f32 range).
    #[error("{}: line {line}, column {}: {} {reason}", path.display(), quoted(column), quoted(value))]
    NonNumeric {
        /// The file.
        path: PathBuf,
        /// The line number, 1-based.
        line: u64,
        /// The column name.
        column: String,
        /// The cell's text.
        value: String,
        /// What is wrong with it, e.g. "is not a number".
        reason: &'static str,
    },

    /// An empty cell.
    #[error("{}: line {line}, column {}: missing value", path.display(), quoted(column))]
    MissingValue {
        /// The file.
        path: PathBuf,
        /// The line number, 1-based.
        line: u64,
        /// The column name.
        column: String,
    },

    /// A table with nothing left to use as features.
    #[error("{}: no feature columns besides the label column {}", path.display(), quoted(label))]
    NoFeatures {
        /// The file.
        path: PathBuf,
        /// The label column.
        label: String,
    },

    /// A column name that does not exist.
    #[error(
        "unknown column {}; available: {}",
        quoted(name),
        quoted_list(available)
    )]
    UnknownColumn {
        /// The requested name.
        name: String,
        /// The columns that exist.
        available: Vec<String>,
    },

    /// A parameter outside its valid range.
    #[error("{name} must be {expected}, got {value}")]
    InvalidParameter {
        /// The parameter name, e.g. `test_fraction`.
        name: &'static str,
        /// The valid range, in words.
        expected: String,
        /// The value given.
        value: String,
    },

    /// A per-record split that left one side without records: each record picks its side on
    /// its own, so a small data set, an extreme fraction or many folds can leave one empty.
    #[error(
        "{side} came out empty: {n} records split with {setting} and split key {key}; each \
         record picks its side on its own, so use more records, a less extreme setting or \
         another split key"
    )]
    EmptySplit {
        /// Which part is empty, e.g. "the test set" or "fold 3 of 5".
        side: String,
        /// The number of records split.
        n: usize,
        /// The setting used, e.g. "test_fraction 0.2" or "k = 5".
        setting: String,
        /// The split key, hex.
        key: String,
    },

    /// Two data sets or a scaler and a data set whose feature counts disagree.
    #[error("feature count mismatch: {what} has {expected} features but the data set has {got}")]
    FeatureMismatch {
        /// What was fitted (e.g. "the MinMaxScaler").
        what: &'static str,
        /// Its feature count.
        expected: usize,
        /// The data set's feature count.
        got: usize,
    },

    /// A data set that has no public feature range where one is required.
    #[error("{dataset} has no public, data-independent feature range; {hint}")]
    NoPublicRange {
        /// The data set name.
        dataset: String,
        /// What to do instead.
        hint: &'static str,
    },

    /// A schema that cannot be used (file syntax, an unknown key, a bad range, columns that do
    /// not match the data).
    #[error("schema: {0}")]
    Schema(String),

    /// A private computation that needs a declaration (bounds, classes, label range) the data
    /// set does not carry.
    #[error(
        "{dataset}: declare the {what} ({flags}); a private computation cannot read them from the records, which would leak them"
    )]
    Undeclared {
        /// The data set name.
        dataset: String,
        /// What is missing, e.g. "feature bounds".
        what: &'static str,
        /// The flags that declare it.
        flags: &'static str,
    },

    /// A label that is not one of the declared classes.
    #[error(
        "{}: line {line}: label {} is not one of the declared classes ({classes})",
        path.display(),
        quoted(value)
    )]
    UndeclaredLabel {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u64,
        /// The label cell.
        value: String,
        /// The declared classes, comma-separated.
        classes: String,
    },

    /// A label of an array or image input that is not one of the declared classes.
    #[error(
        "{}: {at}: label {} is not one of the declared classes ({classes})",
        path.display(),
        quoted(value)
    )]
    UndeclaredRecordLabel {
        /// The file or folder.
        path: PathBuf,
        /// Where: "record 7" or "subfolder \"cat\"".
        at: String,
        /// The label.
        value: String,
        /// The declared classes, comma-separated.
        classes: String,
    },

    /// An input file (npy, npz, image, parquet) that cannot be used, with the reason.
    #[error("{}: {reason}", path.display())]
    BadInput {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong, with the values found.
        reason: String,
    },

    /// A categorical cell whose value is not one of the column's declared categories.
    #[error(
        "{}: line {line}, column {}: {} is not one of the declared categories ({categories})",
        path.display(),
        quoted(column),
        quoted(value)
    )]
    UndeclaredCategory {
        /// The file.
        path: PathBuf,
        /// The line number, 1-based.
        line: u64,
        /// The column name.
        column: String,
        /// The cell's text.
        value: String,
        /// The declared categories, comma-separated.
        categories: String,
    },

    /// A name `fetch` does not know how to download.
    #[error("cannot fetch \"{name}\": fetch knows mnist and fashion-mnist{hint}")]
    UnknownFetchName {
        /// The requested name.
        name: String,
        /// Extra explanation, empty or starting with "; ".
        hint: String,
    },

    /// A download that failed (connection, HTTP status, early end).
    #[error("download of {url} failed: {reason}")]
    Download {
        /// The URL.
        url: String,
        /// What happened.
        reason: String,
    },

    /// Downloaded bytes whose SHA-256 is not the known one.
    #[error(
        "download of {url} rejected: SHA-256 {actual} does not match the known {expected} \
         ({bytes} bytes received); nothing was written"
    )]
    ChecksumMismatch {
        /// The URL.
        url: String,
        /// The known SHA-256, hex.
        expected: String,
        /// The SHA-256 of what arrived, hex.
        actual: String,
        /// How many bytes arrived.
        bytes: u64,
    },
}

impl DataError {
    /// Wraps an I/O error with the path it happened on.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`DataError::Io`] error when `path` exists and is not a regular file: a FIFO would
    /// block its read until a writer closes it, perhaps for ever, and a device could read
    /// without end. `read_as` says what the file was to be read as.
    pub(crate) fn unless_regular(path: &std::path::Path, read_as: &str) -> Result<(), Self> {
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => Err(Self::not_regular(path, read_as)),
            _ => Ok(()),
        }
    }

    /// The [`DataError::Io`] error of [`DataError::unless_regular`].
    pub(crate) fn not_regular(path: &std::path::Path, read_as: &str) -> Self {
        Self::io(
            path,
            std::io::Error::other(format!(
                "not a regular file (a folder, FIFO or device cannot be read as {read_as})"
            )),
        )
    }

    /// An unusable input file, with the reason.
    pub(crate) fn bad_input(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::BadInput {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// A split whose `side` came out empty.
    pub(crate) fn empty_split(
        side: &str,
        n: usize,
        setting: String,
        key: &crate::SplitKey,
    ) -> Self {
        Self::EmptySplit {
            side: side.to_string(),
            n,
            setting,
            key: key.to_string(),
        }
    }

    /// A parameter error.
    pub(crate) fn param(
        name: &'static str,
        expected: impl Into<String>,
        value: impl ToString,
    ) -> Self {
        Self::InvalidParameter {
            name,
            expected: expected.into(),
            value: value.to_string(),
        }
    }
}

/// The most names of a list (a header's columns) an error message quotes.
const QUOTE_NAMES: usize = 20;

/// Names from the user's file (a header's columns), each [`quoted`], at most [`QUOTE_NAMES`]
/// of them and then how many more.
pub fn quoted_list(names: &[String]) -> String {
    let mut out: Vec<String> = names.iter().take(QUOTE_NAMES).map(|n| quoted(n)).collect();
    if names.len() > QUOTE_NAMES {
        out.push(format!("… and {} more", names.len() - QUOTE_NAMES));
    }
    out.join(", ")
}

/// The most characters of a cell an error message quotes.
const QUOTE_CHARS: usize = 80;

/// A cell from the user's file, quoted for an error message and cut to [`QUOTE_CHARS`]
/// characters: a one-line CSV can hold megabytes in one cell, and the message must stay one
/// readable line.
pub fn quoted(cell: &str) -> String {
    if cell.chars().count() <= QUOTE_CHARS {
        format!("{cell:?}")
    } else {
        let head: String = cell.chars().take(QUOTE_CHARS - 1).collect();
        format!("{:?}", format!("{head}…"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_cells_are_quoted_in_at_most_80_characters() {
        assert_eq!(quoted("abc"), "\"abc\"");
        let long = "x".repeat(10_000);
        let q = quoted(&long);
        assert_eq!(q.chars().count(), QUOTE_CHARS + 2, "{q}");
        assert!(q.ends_with("…\""), "{q}");
    }
}
