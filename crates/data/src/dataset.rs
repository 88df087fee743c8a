//! The two views of loaded data: [`Dataset`] for learning (f32 features, class labels) and
//! [`Table`] for DP statistics (every column by name, as f64).

use crate::DataError;

/// ML view of a data set: `n` records of features with an integer class label each.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Name for messages and reports (e.g. `mnist`, `mnist-test`, `csv:data.csv`).
    pub name: String,
    /// Features, row-major: `n × n_features` values.
    pub x: Vec<f32>,
    /// Number of records.
    pub n: usize,
    /// Shape of one record: `[1, 28, 28]` for IDX images, `[1, 8, 8]` for digits, `[d]` for
    /// tabular data. Its product is the number of features.
    pub record_shape: Vec<usize>,
    /// Class index per record, each `< n_classes`.
    pub y: Vec<u32>,
    /// Number of classes.
    pub n_classes: usize,
    /// One name per feature.
    pub feature_names: Vec<String>,
    /// One name per class, index = class.
    pub class_names: Vec<String>,
    /// A public, data-independent range that every feature lies in, when one is known
    /// (`[0, 1]` for IDX images after /255, `[0, 16]` for digits). `None` for CSV and the
    /// tabular sets: any range derived from the data itself is not public.
    pub feature_range: Option<(f32, f32)>,
}

impl Dataset {
    /// Number of features per record (the product of `record_shape`).
    pub fn n_features(&self) -> usize {
        self.record_shape.iter().product()
    }

    /// The features of record `i`.
    ///
    /// # Panics
    /// If `i >= n`, like slice indexing.
    pub fn row(&self, i: usize) -> &[f32] {
        let d = self.n_features();
        &self.x[i * d..(i + 1) * d]
    }

    /// The records at `idx`, in that order (repeats allowed), with all metadata kept.
    ///
    /// # Panics
    /// If an index is `>= n`, like slice indexing.
    pub fn subset(&self, idx: &[usize]) -> Dataset {
        let d = self.n_features();
        let mut x = Vec::with_capacity(idx.len() * d);
        for &i in idx {
            x.extend_from_slice(self.row(i));
        }
        Dataset {
            name: self.name.clone(),
            x,
            n: idx.len(),
            record_shape: self.record_shape.clone(),
            y: idx.iter().map(|&i| self.y[i]).collect(),
            n_classes: self.n_classes,
            feature_names: self.feature_names.clone(),
            class_names: self.class_names.clone(),
            feature_range: self.feature_range,
        }
    }

    /// How many records carry each class, index = class.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.n_classes];
        for &c in &self.y {
            if let Some(slot) = counts.get_mut(c as usize) {
                *slot += 1;
            }
        }
        counts
    }
}

/// A loaded data set with its test split when the source comes with one (the IDX sets do).
#[derive(Debug, Clone, PartialEq)]
pub struct Splits {
    /// The training records (all records for sources without a fixed split).
    pub train: Dataset,
    /// The source's own test split, if it has one.
    pub test: Option<Dataset>,
    /// What is declared about the data (built in, or the user's), with each declaration's
    /// provenance; the records were clamped to its bounds and their labels mapped to its
    /// classes.
    pub schema: crate::Schema,
    /// How many values of each feature were clamped into the declared bounds, over every
    /// record loaded (empty when nothing was clamped to declared bounds). Computed from the
    /// records without noise: a diagnostic.
    pub clamped: Vec<usize>,
}

/// Table view for DP statistics: every column (features and the label) by name, as f64.
///
/// For IDX sets only the `label` column is present (pixels are not materialised). The label
/// column of the embedded sets is `target` (the class index); a CSV label column keeps its
/// numbers when all its values are numbers, else holds the class index of each string.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Name for messages and reports.
    pub name: String,
    /// Column names, in file order.
    pub columns: Vec<String>,
    /// One vector per column, in the order of `columns`, each `n_rows` long.
    pub values: Vec<Vec<f64>>,
    /// A label column of text whose classes were not declared: its values are each text's
    /// index among the texts the records hold, so one record with a new text would recode
    /// every other (`a`, `b` are 0, 1; with a record `0a` they are 1, 2). [`Table::column`]
    /// refuses it.
    pub coded_from_records: Option<String>,
}

impl Table {
    /// The values of the column called `name`.
    ///
    /// # Errors
    /// [`DataError::UnknownColumn`] naming `name` and listing the available columns;
    /// [`DataError::Undeclared`] for a label column of text without declared classes (see
    /// [`Table::coded_from_records`]).
    pub fn column(&self, name: &str) -> Result<&[f64], DataError> {
        if self.coded_from_records.as_deref() == Some(name) {
            return Err(DataError::Undeclared {
                dataset: format!("{} (column {name:?} holds text)", self.name),
                what: "classes of the text column",
                flags: "classes in a --schema file, or the column coded as numbers",
            });
        }
        self.columns
            .iter()
            .position(|c| c == name)
            .and_then(|i| self.values.get(i))
            .map(Vec::as_slice)
            .ok_or_else(|| DataError::UnknownColumn {
                name: name.to_string(),
                available: self.columns.clone(),
            })
    }

    /// Number of rows (0 for a table without columns).
    pub fn n_rows(&self) -> usize {
        self.values.first().map_or(0, Vec::len)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small dataset: record i has features [i, 10 i], class i % 3.
    pub(crate) fn toy(n: usize) -> Dataset {
        Dataset {
            name: "toy".into(),
            x: (0..n).flat_map(|i| [i as f32, 10.0 * i as f32]).collect(),
            n,
            record_shape: vec![2],
            y: (0..n).map(|i| (i % 3) as u32).collect(),
            n_classes: 3,
            feature_names: vec!["a".into(), "b".into()],
            class_names: vec!["c0".into(), "c1".into(), "c2".into()],
            feature_range: None,
        }
    }

    #[test]
    fn row_and_subset_follow_indices() {
        let d = toy(5);
        assert_eq!(d.n_features(), 2);
        assert_eq!(d.row(3), &[3.0, 30.0]);
        let s = d.subset(&[4, 1, 1]);
        assert_eq!(s.n, 3);
        assert_eq!(s.x, vec![4.0, 40.0, 1.0, 10.0, 1.0, 10.0]);
        assert_eq!(s.y, vec![1, 1, 1]);
        assert_eq!(s.feature_names, d.feature_names);
        assert_eq!(d.class_counts(), vec![2, 2, 1]);
    }

    #[test]
    fn table_column_lookup() {
        let t = Table {
            name: "t".into(),
            columns: vec!["a".into(), "target".into()],
            values: vec![vec![1.0, 2.0], vec![0.0, 1.0]],
            coded_from_records: None,
        };
        assert_eq!(t.n_rows(), 2);
        assert_eq!(t.column("target").unwrap(), &[0.0, 1.0]);
        let msg = t.column("nope").unwrap_err().to_string();
        assert!(
            msg.contains("\"nope\"") && msg.contains("\"a\", \"target\""),
            "{msg}"
        );
    }
}
