//! The flags that declare a data set's schema (`--schema FILE`, `--bounds`, `--classes`,
//! `--label-range`) and the rule every private command applies before it touches a record:
//! the domain it relies on is declared, never read from the records (see `dpml_data::Schema`).

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_data::{Dataset, FeatureBounds, LoadOptions, Provenance, Schema, Source, Splits};

use crate::args;
use crate::error::{CliError, CliResult};

/// What the user declares about the data; flags override the schema file's entries.
#[derive(Args, Debug, Clone, Default)]
pub struct SchemaArgs {
    /// Schema file (JSON, or TOML by its .toml name): label_column, features (name and
    /// bounds each), bounds (one range for every feature), classes or label_range.
    #[arg(long, value_parser = crate::args::input_path)]
    pub schema: Option<PathBuf>,
    /// Declared feature bounds: LO,HI for every feature, or lo1:hi1,lo2:hi2,… one per
    /// feature. Features are clamped to them when loaded; sensitivities and scaling come from
    /// them. Default: the data set's own (MNIST 0–255, digits 0–16: public; iris, wine,
    /// breast-cancer: data-derived, demo only); csv: tables have none.
    #[arg(long, allow_hyphen_values = true, value_parser = feature_bounds)]
    pub bounds: Option<FeatureBounds>,
    /// Declared classes of a csv: table, comma-separated (a label outside them is refused).
    #[arg(long, value_delimiter = ',')]
    pub classes: Option<Vec<String>>,
    /// Declared integer label range LO,HI of a csv: table: the classes are LO..=HI, and HI − LO
    /// is the sensitivity of a regression on the label's value.
    #[arg(long, allow_hyphen_values = true, value_parser = args::bounds, conflicts_with = "classes")]
    pub label_range: Option<(f64, f64)>,
    /// Field delimiter of a csv: table: one character such as ';', or '\t' for tabs
    /// (default ',').
    #[arg(long)]
    pub delimiter: Option<String>,
    /// Resize the images of an images: folder to the declared shape (schema key `shape`)
    /// instead of refusing an image of another size.
    #[arg(long)]
    pub resize: bool,
}

impl SchemaArgs {
    /// The user's declarations: the schema file with every flag given applied over it.
    ///
    /// # Errors
    /// A usage error for a schema file that cannot be read or used, or declarations that
    /// contradict each other.
    pub fn declared(&self) -> CliResult<Option<Schema>> {
        let mut schema = match &self.schema {
            Some(path) => Schema::from_file(path)?,
            None if self.bounds.is_none()
                && self.classes.is_none()
                && self.label_range.is_none()
                && self.delimiter.is_none()
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
        schema.resize |= self.resize;
        Ok(Some(schema))
    }

    /// How to load a data set with these declarations.
    ///
    /// # Errors
    /// As [`SchemaArgs::declared`].
    pub fn load_options(
        &self,
        data_dir: Option<&Path>,
        label_column: Option<&str>,
    ) -> CliResult<LoadOptions> {
        Ok(LoadOptions {
            data_dir: data_dir.map(Path::to_path_buf),
            label_column: label_column.map(String::from),
            schema: self.declared()?,
        })
    }

    /// Loads `source` under these declarations.
    ///
    /// # Errors
    /// As [`SchemaArgs::declared`] and [`dpml_data::load`].
    pub fn load(
        &self,
        source: &Source,
        label_column: Option<&str>,
        data_dir: Option<&Path>,
    ) -> CliResult<Splits> {
        Ok(dpml_data::load(
            source,
            &self.load_options(data_dir, label_column)?,
        )?)
    }
}

/// `LO,HI` (one range for every feature) or `lo1:hi1,lo2:hi2,…` (one per feature).
pub fn feature_bounds(spec: &str) -> Result<FeatureBounds, String> {
    if !spec.contains(':') {
        return args::bounds(spec).map(FeatureBounds::Uniform);
    }
    spec.split(',')
        .map(|pair| {
            let (lo, hi) = pair
                .split_once(':')
                .ok_or_else(|| format!("{pair} is not lo:hi"))?;
            let (lo, hi) = (args::finite(lo)?, args::finite(hi)?);
            if lo < hi {
                Ok((lo, hi))
            } else {
                Err(format!("lo must be below hi, got {pair}"))
            }
        })
        .collect::<Result<Vec<_>, String>>()
        .map(FeatureBounds::PerFeature)
}

/// What a private computation on `data` may rely on: its classes (when it learns them) and its
/// feature bounds (when they bound a sensitivity or scale the features), declared rather than
/// read from the records. Returns the bounds when asked for them.
///
/// # Errors
/// A usage error naming the flag that declares what is missing.
pub fn require_declared(
    schema: &Schema,
    data: &Dataset,
    needs: Needs,
) -> CliResult<Option<Vec<(f64, f64)>>> {
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
        .map_err(CliError::from)
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

/// The schema's facts for a JSON report: each declaration's provenance.
pub fn provenance_report(schema: &Schema) -> serde_json::Value {
    let name = |p: Option<Provenance>| p.map(|p| p.to_string());
    serde_json::json!({
        "bounds": name(schema.bounds.as_ref().and(schema.bounds_provenance)),
        "classes": name(schema.classes_provenance),
        "label_range": schema.label_range,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse_as_one_range_or_one_per_feature() {
        assert_eq!(
            feature_bounds("-1,2").unwrap(),
            FeatureBounds::Uniform((-1.0, 2.0))
        );
        assert_eq!(
            feature_bounds("0:1,-5:5").unwrap(),
            FeatureBounds::PerFeature(vec![(0.0, 1.0), (-5.0, 5.0)])
        );
        for bad in ["1", "2,1", "0:1,3", "0:1,2:2", "a:1"] {
            assert!(feature_bounds(bad).is_err(), "{bad}");
        }
    }
}
