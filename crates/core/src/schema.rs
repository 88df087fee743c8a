//! What a caller declares about a data set (a schema file, feature bounds, classes, label
//! range) and the rule every private computation applies before it touches a record: the
//! domain it relies on is declared, never read from the records (see [`dpml_data::Schema`]).

use std::path::{Path, PathBuf};

use dpml_data::{Dataset, FeatureBounds, LoadOptions, Provenance, Schema};

use crate::error::{Error, Result};

/// The caller's declarations; each given entry overrides the schema file's.
#[derive(Debug, Clone, Default)]
pub struct Declarations {
    /// Schema file (JSON, or TOML by its .toml name).
    pub schema: Option<PathBuf>,
    /// Feature bounds: one range for every feature, or one per feature.
    pub bounds: Option<FeatureBounds>,
    /// Classes of a `csv:` table.
    pub classes: Option<Vec<String>>,
    /// Integer label range of a `csv:` table.
    pub label_range: Option<(f64, f64)>,
    /// Field delimiter of a `csv:` table.
    pub delimiter: Option<String>,
    /// The record shape (an `images:` folder's `[C, H, W]`).
    pub shape: Option<Vec<usize>>,
    /// Resize the images of an `images:` folder to the declared shape.
    pub resize: bool,
}

impl Declarations {
    /// The declared schema: the file with every given entry applied over it; `None` when
    /// nothing is declared.
    ///
    /// # Errors
    /// A usage error for a schema file that cannot be read or used, or declarations that
    /// contradict each other.
    pub fn schema(&self) -> Result<Option<Schema>> {
        let mut schema = match &self.schema {
            Some(path) => Schema::from_file(path)?,
            None if self.bounds.is_none()
                && self.classes.is_none()
                && self.label_range.is_none()
                && self.delimiter.is_none()
                && self.shape.is_none()
                && !self.resize =>
            {
                return Ok(None);
            }
            None => Schema::default(),
        };
        if let Some(b) = &self.bounds {
            schema = schema.with_bounds(b.clone())?;
        }
        if let Some(c) = &self.classes {
            schema = schema.with_classes(c.clone())?;
        }
        if let Some(r) = self.label_range {
            schema = schema.with_label_range(r)?;
        }
        if let Some(d) = &self.delimiter {
            schema = schema.with_delimiter(d)?;
        }
        if let Some(shape) = &self.shape {
            schema = schema.with_shape(shape.clone())?;
        }
        schema.resize |= self.resize;
        Ok(Some(schema))
    }

    /// How to load a data set under these declarations.
    ///
    /// # Errors
    /// As [`Declarations::schema`].
    pub fn load_options(
        &self,
        data_dir: Option<&Path>,
        label_column: Option<&str>,
    ) -> Result<LoadOptions> {
        Ok(LoadOptions {
            data_dir: data_dir.map(Path::to_path_buf),
            label_column: label_column.map(String::from),
            schema: self.schema()?,
        })
    }
}

/// Which declarations a private computation needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    /// The class list (classification).
    pub classes: bool,
    /// The label range (regression on the label's value).
    pub label_range: bool,
    /// The feature bounds.
    pub bounds: bool,
}

/// What a private computation on `data` may rely on: its classes (when it learns them), its
/// feature bounds (when they bound a sensitivity or scale the features) and its record shape
/// (an image folder's, whenever anything is needed: the shape fixes every record and the
/// model), declared rather than read from the records. Returns the bounds when asked for them.
///
/// # Errors
/// A usage error naming the flag that declares what is missing.
pub fn require_declared(
    schema: &Schema,
    data: &Dataset,
    needs: Needs,
) -> Result<Option<Vec<(f64, f64)>>> {
    if needs.classes || needs.label_range || needs.bounds {
        schema.require_shape(&data.name)?;
    }
    if needs.classes {
        schema.require_classes(&data.name)?;
    }
    if needs.label_range {
        schema.require_label_range(&data.name)?;
    }
    needs
        .bounds
        .then(|| schema.require_bounds(&data.name, data.n_features()))
        .transpose()
        .map_err(Error::from)
}

/// The schema's facts for a JSON report: each declaration's provenance.
pub fn provenance_report(schema: &Schema) -> serde_json::Value {
    let name = |p: Option<Provenance>| p.map(|p| p.to_string());
    serde_json::json!({
        "bounds": name(schema.bounds.as_ref().and(schema.bounds_provenance)),
        "classes": name(schema.classes_provenance),
        "label_range": schema.label_range,
        "shape": name(schema.shape.as_ref().and(schema.shape_provenance)),
    })
}

/// A feature clamped for more than this share of the records is warned about: its declared
/// range probably misses where the data live (one range for every feature, `--bounds 0,100`,
/// turns a column in 980–1040 into a constant).
const MOSTLY_CLAMPED: f64 = 0.5;

/// The clamping of `records` loaded records into the declared bounds, as diagnostics (counts
/// computed from the records without noise): `{"clamped": {feature: values moved}}` for the
/// features with any, and `"warnings"` naming each feature clamped for most records. `None`
/// when nothing was clamped.
pub fn clamp_diagnostics(
    clamped: &[usize],
    feature_names: &[String],
    records: usize,
) -> Option<serde_json::Value> {
    let name = |j: usize| {
        feature_names
            .get(j)
            .cloned()
            .unwrap_or_else(|| format!("feature {j}"))
    };
    let moved: serde_json::Map<String, serde_json::Value> = clamped
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c > 0)
        .map(|(j, &c)| (name(j), c.into()))
        .collect();
    if moved.is_empty() {
        return None;
    }
    let warnings: Vec<String> = clamped
        .iter()
        .enumerate()
        .filter(|&(_, &c)| records > 0 && c as f64 > MOSTLY_CLAMPED * records as f64)
        .map(|(j, &c)| {
            format!(
                "feature {} was clamped into its declared bounds for {c} of {records} records: the bounds probably miss its values (declare one range per feature)",
                name(j)
            )
        })
        .collect();
    Some(serde_json::json!({"clamped": moved, "warnings": warnings}))
}
