//! The flags that declare a data set's schema (`--schema FILE`, `--bounds`, `--classes`,
//! `--label-range`) and the rule every private command applies before it touches a record:
//! the domain it relies on is declared, never read from the records (see `dpml_data::Schema`).

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_core::schema::Declarations;
use dpml_data::{FeatureBounds, LoadOptions};

use crate::args;
use crate::error::CliResult;

/// What the user declares about the data; flags override the schema file's entries.
#[derive(Args, Debug, Clone, Default)]
pub struct SchemaArgs {
    /// Schema file (JSON, or TOML by its .toml name): label_column, features (name and
    /// bounds each), bounds (one range for every feature), classes or label_range.
    #[arg(long, value_parser = crate::args::input_path)]
    pub schema: Option<PathBuf>,
    /// Declared feature bounds: one range for every feature (LO,HI or LO:HI), or
    /// lo1:hi1,lo2:hi2,… one per feature. Features are clamped to them when loaded; sensitivities and scaling come from
    /// them. Default: the data set's own (MNIST 0–255, digits 0–16: public; iris, wine,
    /// breast-cancer: data-derived, demo only); csv: tables have none.
    #[arg(long, allow_hyphen_values = true, value_parser = feature_bounds)]
    pub bounds: Option<FeatureBounds>,
    /// Declared classes of a csv: table, comma-separated (a label outside them is refused).
    #[arg(long, value_delimiter = ',')]
    pub classes: Option<Vec<String>>,
    /// Declared integer label range LO,HI (or LO:HI) of a csv: table: the classes are LO..=HI, and HI − LO
    /// is the sensitivity of a regression on the label's value.
    #[arg(long, allow_hyphen_values = true, value_parser = args::bounds, conflicts_with = "classes")]
    pub label_range: Option<(f64, f64)>,
    /// Field delimiter of a csv: table: one character such as ';', or '\t' for tabs
    /// (default ',').
    #[arg(long)]
    pub delimiter: Option<String>,
    /// Declared record shape C,H,W of an images: folder (C = 1 grayscale, 3 RGB; schema key
    /// `shape`), or the shape an array's or table's features are laid out in. A private run
    /// on images: needs it: the first image's size is used only by non-private runs.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(usize))]
    pub shape: Option<Vec<usize>>,
    /// Resize the images of an images: folder to the declared shape (--shape or schema key
    /// `shape`) instead of refusing an image of another size.
    #[arg(long)]
    pub resize: bool,
}

impl SchemaArgs {
    /// The declarations these flags make, for the library.
    pub fn declarations(&self) -> Declarations {
        Declarations {
            schema: self.schema.clone(),
            bounds: self.bounds.clone(),
            classes: self.classes.clone(),
            label_range: self.label_range,
            delimiter: self.delimiter.clone(),
            shape: self.shape.clone(),
            resize: self.resize,
        }
    }

    /// How to load a data set with these declarations.
    ///
    /// # Errors
    /// As [`Declarations::schema`].
    pub fn load_options(
        &self,
        data_dir: Option<&Path>,
        label_column: Option<&str>,
    ) -> CliResult<LoadOptions> {
        Ok(self.declarations().load_options(data_dir, label_column)?)
    }
}

/// One range for every feature, `LO,HI` or `LO:HI` alike, or `lo1:hi1,lo2:hi2,…` (one per
/// feature).
pub fn feature_bounds(spec: &str) -> Result<FeatureBounds, String> {
    if !(spec.contains(':') && spec.contains(',')) {
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
        // One range is one range, written either way: broadcast to every feature.
        assert_eq!(
            feature_bounds("0:16").unwrap(),
            FeatureBounds::Uniform((0.0, 16.0))
        );
        assert_eq!(args::bounds("0:9").unwrap(), (0.0, 9.0));
        for bad in ["1", "2,1", "0:1,3", "0:1,2:2", "a:1", "1:0", "0:1:2"] {
            assert!(feature_bounds(bad).is_err(), "{bad}");
        }
    }
}
