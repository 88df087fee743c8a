//! The parsed form shared by CSV files and the embedded tables, and its two views.
//!
//! A reader produces [`Columns`] (every column as f64 plus the encoded class label); from it
//! [`Columns::into_dataset`] builds the ML view and [`Columns::into_table`] the statistics view,
//! so both views of one source always agree.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::Path;

use crate::{DataError, Dataset, Table};

/// A parsed table with one label column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Columns {
    /// Data set name.
    pub name: String,
    /// Column names in file order.
    pub names: Vec<String>,
    /// One vector per column (the label column holds [`Labels::values`]).
    pub values: Vec<Vec<f64>>,
    /// Index of the label column in `names`.
    pub label: usize,
    /// Class index per row.
    pub y: Vec<u32>,
    /// Class names, index = class.
    pub class_names: Vec<String>,
    /// Record shape, `None` for flat `[d]`.
    pub record_shape: Option<Vec<usize>>,
    /// Public feature range, if known.
    pub feature_range: Option<(f32, f32)>,
}

/// An encoded label column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Labels {
    /// The value the table view shows: the number itself for numeric labels, else the class.
    pub values: Vec<f64>,
    /// Class index per row.
    pub y: Vec<u32>,
    /// Class names in class order.
    pub class_names: Vec<String>,
}

impl Labels {
    /// Labels already mapped to the declared `classes`: the table view shows each label's
    /// number when every class is a number, else its class index.
    pub fn declared(y: Vec<u32>, classes: &[String]) -> Labels {
        let numbers: Option<Vec<f64>> = classes.iter().map(|c| c.parse().ok()).collect();
        let values = y
            .iter()
            .map(|&c| match &numbers {
                Some(v) => v[c as usize],
                None => f64::from(c),
            })
            .collect();
        Labels {
            values,
            y,
            class_names: classes.to_vec(),
        }
    }
}

impl Columns {
    /// Keeps exactly the declared `features` (and the label), in the declared order.
    ///
    /// # Errors
    /// [`DataError::Schema`] for a declared feature the table lacks, a column the schema does
    /// not declare (nothing is dropped silently), the label declared as a feature, or a
    /// feature declared twice.
    pub fn select_features(mut self, features: &[String]) -> Result<Columns, DataError> {
        let label_name = self.names[self.label].clone();
        // A feature listed twice would take its column twice, the second time finding it
        // emptied (`Schema::from_file` refuses it already; a `Schema` built in code may not).
        if let Some(f) = crate::schema::repeated(features) {
            return Err(DataError::Schema(format!(
                "{}: feature {f:?} is declared twice",
                self.name
            )));
        }
        if let Some(extra) = self
            .names
            .iter()
            .find(|n| **n != label_name && !features.contains(n))
        {
            return Err(DataError::Schema(format!(
                "{}: column {extra:?} is not among the schema's features ({})",
                self.name,
                features.join(", ")
            )));
        }
        let mut names = Vec::with_capacity(features.len() + 1);
        let mut values = Vec::with_capacity(features.len() + 1);
        for f in features {
            let j = self
                .names
                .iter()
                .position(|n| n == f && *n != label_name)
                .ok_or_else(|| {
                    DataError::Schema(format!(
                        "{}: the schema's feature {f:?} is not a feature column (columns: {})",
                        self.name,
                        self.names.join(", ")
                    ))
                })?;
            names.push(self.names[j].clone());
            values.push(std::mem::take(&mut self.values[j]));
        }
        names.push(label_name);
        values.push(std::mem::take(&mut self.values[self.label]));
        self.label = names.len() - 1;
        self.names = names;
        self.values = values;
        Ok(self)
    }

    /// Replaces each categorical column (holding category indices) by one 0/1 column per
    /// declared category, named `column=category`, in place.
    pub fn one_hot(mut self, categories: &[(String, Vec<String>)]) -> Columns {
        if categories.is_empty() {
            return self;
        }
        let label_name = self.names[self.label].clone();
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (name, column) in self.names.into_iter().zip(self.values) {
            match categories
                .iter()
                .find(|(n, _)| *n == name && name != label_name)
            {
                Some((_, cats)) => {
                    for (k, cat) in cats.iter().enumerate() {
                        names.push(format!("{name}={cat}"));
                        values.push(
                            column
                                .iter()
                                .map(|&v| f64::from(u8::from(v == k as f64)))
                                .collect(),
                        );
                    }
                }
                None => {
                    names.push(name);
                    values.push(column);
                }
            }
        }
        self.label = names.iter().position(|n| *n == label_name).unwrap_or(0);
        self.names = names;
        self.values = values;
        self
    }

    /// Clamps every feature column into its range (`bounds` in feature order, the label
    /// skipped); returns how many values of each feature were moved.
    ///
    /// # Errors
    /// [`DataError::Schema`] when `bounds` does not hold one range per feature column.
    pub fn clamp_features(
        &mut self,
        bounds: &crate::FeatureBounds,
    ) -> Result<Vec<usize>, DataError> {
        let label = self.label;
        let ranges = bounds.per_feature(self.names.len() - 1)?;
        let features = self
            .values
            .iter_mut()
            .enumerate()
            .filter(|(j, _)| *j != label);
        let mut clamped = vec![0; ranges.len()];
        for (((_, column), &(lo, hi)), count) in features.zip(&ranges).zip(&mut clamped) {
            for v in column.iter_mut() {
                let c = v.clamp(lo, hi);
                *count += usize::from(c != *v);
                *v = c;
            }
        }
        Ok(clamped)
    }

    /// The ML view: features are every column but the label, converted to f32 row-major.
    ///
    /// # Errors
    /// [`DataError::NoFeatures`] when the label is the only column.
    pub fn into_dataset(self, path: &Path) -> Result<Dataset, DataError> {
        let feature_idx: Vec<usize> = (0..self.names.len()).filter(|&j| j != self.label).collect();
        if feature_idx.is_empty() {
            return Err(DataError::NoFeatures {
                path: path.to_path_buf(),
                label: self.names[self.label].clone(),
            });
        }
        let n = self.y.len();
        let mut x = Vec::with_capacity(n * feature_idx.len());
        for i in 0..n {
            // Cells were checked to be within f32 range when parsed.
            x.extend(feature_idx.iter().map(|&j| self.values[j][i] as f32));
        }
        let d = feature_idx.len();
        Ok(Dataset {
            name: self.name,
            x,
            n,
            record_shape: self.record_shape.unwrap_or_else(|| vec![d]),
            y: self.y,
            n_classes: self.class_names.len(),
            feature_names: feature_idx.iter().map(|&j| self.names[j].clone()).collect(),
            class_names: self.class_names,
            feature_range: self.feature_range,
        })
    }

    /// The statistics view: every column by name.
    pub fn into_table(self) -> Table {
        Table {
            name: self.name,
            columns: self.names,
            values: self.values,
            coded_from_records: None,
        }
    }
}

/// Parses one numeric cell (already trimmed).
///
/// # Errors
/// [`DataError::MissingValue`] for an empty cell; [`DataError::NonNumeric`] for text that is
/// not a number, NaN or an infinity, or a magnitude beyond f32 (features become f32).
pub(crate) fn parse_cell(
    text: &str,
    path: &Path,
    line: u64,
    column: &str,
) -> Result<f64, DataError> {
    if text.is_empty() {
        return Err(DataError::MissingValue {
            path: path.to_path_buf(),
            line,
            column: column.to_string(),
        });
    }
    let bad = |reason| DataError::NonNumeric {
        path: path.to_path_buf(),
        line,
        column: column.to_string(),
        value: text.to_string(),
        reason,
    };
    let v: f64 = text.parse().map_err(|_| bad("is not a number"))?;
    if !v.is_finite() {
        return Err(bad("is not finite (NaN and infinities are not accepted)"));
    }
    if v.abs() > f64::from(f32::MAX) {
        return Err(bad("is beyond the f32 range (±3.4e38)"));
    }
    Ok(v)
}

/// A label cell's number, when it is a finite one (`NaN` and `inf` are texts).
pub(crate) fn label_number(cell: &str) -> Option<f64> {
    cell.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Encodes label cells as classes in sorted order: numerically when every cell is a finite
/// number ([`label_number`]; class names are the numbers, e.g. `2` for `2.0`), else as
/// strings.
pub(crate) fn encode_labels(cells: &[String]) -> Labels {
    let mut interned = LabelCells::default();
    for c in cells {
        interned.push(c);
    }
    interned.encode()
}

/// A label column's cells as read, each distinct text kept once: a table of 100 million rows
/// with two labels holds two texts and a 4-byte id per row, not 100 million strings (some
/// 6 GB where the file held 600 MB).
#[derive(Debug, Default)]
pub(crate) struct LabelCells {
    /// Per row: its text's id.
    ids: Vec<u32>,
    /// Each distinct text and its id (ids in order of first sight).
    index: HashMap<String, u32>,
}

impl LabelCells {
    /// Adds a row's label cell.
    pub(crate) fn push(&mut self, cell: &str) {
        let id = match self.index.get(cell) {
            Some(&id) => id,
            None => {
                let id = self.index.len() as u32;
                self.index.insert(cell.to_string(), id);
                id
            }
        };
        self.ids.push(id);
    }

    /// The distinct texts, by id.
    fn texts(&self) -> Vec<&str> {
        let mut texts = vec![""; self.index.len()];
        for (text, &id) in &self.index {
            texts[id as usize] = text;
        }
        texts
    }

    /// Whether no row was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The rows' labels: numbers when every cell is one (classes in numeric order), else texts
    /// (classes in text order).
    pub(crate) fn encode(&self) -> Labels {
        let texts = self.texts();
        let numbers: Option<Vec<f64>> = texts
            .iter()
            // `+ 0.0` turns -0 into 0, so "0" and "-0" are one class.
            .map(|c| label_number(c).map(|v| v + 0.0))
            .collect();
        match numbers {
            Some(numbers) => {
                let mut distinct = numbers.clone();
                distinct.sort_by(f64::total_cmp);
                distinct.dedup_by(|a, b| a.total_cmp(b) == Ordering::Equal);
                let class: Vec<u32> = numbers
                    .iter()
                    .map(|v| class_of(&distinct, v, f64::total_cmp))
                    .collect();
                Labels {
                    values: self.ids.iter().map(|&i| numbers[i as usize]).collect(),
                    y: self.ids.iter().map(|&i| class[i as usize]).collect(),
                    class_names: distinct.iter().map(|v| v.to_string()).collect(),
                }
            }
            None => {
                let mut distinct = texts.clone();
                distinct.sort();
                let class: Vec<u32> = texts
                    .iter()
                    .map(|c| class_of(&distinct, c, |a, b| a.cmp(b)))
                    .collect();
                let y: Vec<u32> = self.ids.iter().map(|&i| class[i as usize]).collect();
                Labels {
                    values: y.iter().map(|&c| f64::from(c)).collect(),
                    y,
                    class_names: distinct.into_iter().map(str::to_string).collect(),
                }
            }
        }
    }
}

/// The position of `v` in the sorted, deduplicated `distinct` (it is always there).
fn class_of<T>(distinct: &[T], v: &T, cmp: impl Fn(&T, &T) -> Ordering) -> u32 {
    let i = distinct
        .binary_search_by(|d| cmp(d, v))
        .unwrap_or_else(|i| i);
    i as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn numeric_labels_sort_numerically() {
        let l = encode_labels(&strings(&["10", "2", "2.0", "-1", "10"]));
        assert_eq!(l.class_names, strings(&["-1", "2", "10"]));
        assert_eq!(l.y, vec![2, 1, 1, 0, 2]);
        assert_eq!(l.values, vec![10.0, 2.0, 2.0, -1.0, 10.0]);
    }

    #[test]
    fn string_labels_sort_as_strings_and_table_holds_class_index() {
        let l = encode_labels(&strings(&["yes", "no", "maybe", "no", "1"]));
        assert_eq!(l.class_names, strings(&["1", "maybe", "no", "yes"]));
        assert_eq!(l.y, vec![3, 2, 1, 2, 0]);
        assert_eq!(l.values, vec![3.0, 2.0, 1.0, 2.0, 0.0]);
    }

    #[test]
    fn cells_are_checked() {
        let p = Path::new("f.csv");
        assert_eq!(parse_cell("-2.5e3", p, 3, "a").unwrap(), -2500.0);
        let cases = [
            ("", "missing value"),
            ("abc", "is not a number"),
            ("NaN", "not finite"),
            ("inf", "not finite"),
            ("1e39", "f32 range"),
        ];
        for (text, want) in cases {
            let msg = parse_cell(text, p, 7, "petal").unwrap_err().to_string();
            assert!(
                msg.contains(want) && msg.contains("f.csv: line 7, column \"petal\""),
                "{msg}"
            );
        }
    }
}
