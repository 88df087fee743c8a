//! Turning named rows of text cells into [`Columns`]: the part csv and Parquet tables share
//! (the label column, declared classes, categories, fill values, numeric cells).

use std::path::{Path, PathBuf};

use crate::schema::declared_label;
use crate::tabular::{Columns, LabelCells, Labels, parse_cell};
use crate::{DataError, Schema};

/// A table being read row by row under a schema.
pub(crate) struct Rows<'a> {
    path: PathBuf,
    schema: &'a Schema,
    names: Vec<String>,
    label: usize,
    values: Vec<Vec<f64>>,
    label_cells: LabelCells,
    declared_y: Vec<u32>,
}

impl<'a> Rows<'a> {
    /// A table with columns `names`; the label is the schema's label column, else the last.
    ///
    /// # Errors
    /// [`DataError::DuplicateColumn`]; [`DataError::UnknownColumn`] for a label column that
    /// is not among `names`.
    pub fn new(path: &Path, schema: &'a Schema, names: Vec<String>) -> Result<Self, DataError> {
        check_unique(path, &names)?;
        let label =
            match schema.label_column.as_deref() {
                Some(want) => names.iter().position(|c| c == want).ok_or_else(|| {
                    DataError::UnknownColumn {
                        name: want.to_string(),
                        available: names.clone(),
                    }
                })?,
                None => names.len().saturating_sub(1),
            };
        Ok(Rows {
            path: path.to_path_buf(),
            schema,
            values: vec![Vec::new(); names.len()],
            names,
            label,
            label_cells: LabelCells::default(),
            declared_y: Vec::new(),
        })
    }

    /// Adds the row at `line` (1-based, for messages), its cells in column order (trimmed, an
    /// empty one meaning missing).
    ///
    /// # Errors
    /// [`DataError::MissingValue`], [`DataError::NonNumeric`], [`DataError::UndeclaredLabel`],
    /// [`DataError::UndeclaredCategory`] naming line and column.
    pub fn push<'c>(
        &mut self,
        line: u64,
        cells: impl Iterator<Item = &'c str>,
    ) -> Result<(), DataError> {
        let path = self.path.as_path();
        for (j, cell) in cells.enumerate() {
            if j != self.label {
                self.values[j].push(feature_cell(self.schema, cell, path, line, &self.names[j])?);
                continue;
            }
            if cell.is_empty() {
                return Err(DataError::MissingValue {
                    path: path.to_path_buf(),
                    line,
                    column: self.names[j].clone(),
                });
            }
            match self.schema.classes.as_deref() {
                Some(classes) => {
                    let class = declared_label(classes, self.schema.label_range, cell).ok_or_else(
                        || DataError::UndeclaredLabel {
                            path: path.to_path_buf(),
                            line,
                            value: cell.to_string(),
                            classes: classes.join(", "),
                        },
                    )?;
                    self.declared_y.push(class);
                }
                None => self.label_cells.push(cell),
            }
        }
        Ok(())
    }

    /// The table read, named `name`.
    ///
    /// # Errors
    /// [`DataError::NoRows`] when no row was added.
    pub fn finish(mut self, name: String) -> Result<Columns, DataError> {
        if self.label_cells.is_empty() && self.declared_y.is_empty() {
            return Err(DataError::NoRows { path: self.path });
        }
        let labels = match self.schema.classes.as_deref() {
            Some(classes) => Labels::declared(self.declared_y, classes),
            None => self.label_cells.encode(),
        };
        self.values[self.label] = labels.values;
        Ok(Columns {
            name,
            names: self.names,
            values: self.values,
            label: self.label,
            y: labels.y,
            class_names: labels.class_names,
            record_shape: None,
            feature_range: None,
        })
    }
}

/// One feature cell: a categorical column's category index (one-hot encoded later, see
/// [`Columns::one_hot`]), or a number, an empty cell taking the declared fill value.
fn feature_cell(
    schema: &Schema,
    cell: &str,
    path: &Path,
    line: u64,
    column: &str,
) -> Result<f64, DataError> {
    if let Some(categories) = schema.categories_of(column) {
        return match categories.iter().position(|c| c == cell) {
            Some(i) => Ok(i as f64),
            None if cell.is_empty() => Err(DataError::MissingValue {
                path: path.to_path_buf(),
                line,
                column: column.to_string(),
            }),
            None => Err(DataError::UndeclaredCategory {
                path: path.to_path_buf(),
                line,
                column: column.to_string(),
                value: cell.to_string(),
                categories: categories.join(", "),
            }),
        };
    }
    match schema.fill_of(column) {
        Some(fill) if cell.is_empty() => Ok(fill),
        _ => parse_cell(cell, path, line, column),
    }
}

/// Rejects a header that names a column twice (lookups by name would be ambiguous).
fn check_unique(path: &Path, names: &[String]) -> Result<(), DataError> {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    match sorted.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(DataError::DuplicateColumn {
            path: path.to_path_buf(),
            column: w[0].clone(),
        }),
        None => Ok(()),
    }
}
