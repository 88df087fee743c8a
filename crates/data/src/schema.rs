//! The schema of a data set: everything privacy-relevant about it that is DECLARED, never read
//! from its records: the feature bounds (sensitivities, scaling and clamping come from them),
//! the class list of a classification task (the output layer's shape, the label-DP noise and
//! randomized-response domain) and the label range of a regression task.
//!
//! Reading any of these from the records would leak them: one record with a new label would
//! change the model's shape and the label-DP noise scale; one extreme value would move a
//! min-max range. So a private computation on a user's table needs them declared, once in a
//! schema file (`--schema FILE`, JSON or TOML) or on the command line (`--bounds`, `--classes`,
//! `--label-range`); the built-in data sets carry their own ([`Schema::builtin`]), each range
//! marked [`Provenance::Public`] (data-independent: MNIST's pixels 0–255, digits' 0–16) or
//! [`Provenance::DataDerived`] (iris, wine and breast-cancer: their documented ranges are the
//! data sets' own minima and maxima — fine for a demo, wrong as a pattern).
//!
//! A schema file (TOML; the same keys in JSON):
//!
//! ```toml
//! label_column = "diagnosis"
//! classes = ["benign", "malignant"]   # or: label_range = [0, 9] for integer labels
//! bounds = [0, 100]                   # one range for every feature, or per feature:
//! delimiter = ";"                    # csv field delimiter (default ","; "\\t" for tabs)
//! fill = 0                            # an empty numeric cell becomes 0 (default: refused)
//! [[features]]
//! name = "age"
//! bounds = [18, 90]
//! fill = 40                           # this feature's own fill value
//! [[features]]
//! name = "colour"
//! categories = ["red", "green"]       # one-hot: columns colour=red, colour=green in [0, 1]
//! ```
//!
//! Image folders take `shape = [C, H, W]` (C = 1 grayscale, 3 RGB) and `resize = true` (else
//! an image of another size is refused).
//!
//! The tables of a SQL query (`dpml sql`) are declared under `[tables.NAME]`: privacy unit,
//! public tables, bounds, contribution bounds, key sets, foreign keys (see
//! [`crate::table_decl`]); the other commands ignore them.
//!
//! When the schema lists `features`, the file must hold exactly those columns (and the label),
//! and they reach the model in the schema's order. Loading clamps every feature into its bounds
//! before anything else, so every value a learner sees is finite and bounded by construction;
//! a label that is not one of the declared classes is refused, naming the value and its line.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::table_decl::{TableDecl, check_tables, distinct_tables};
use crate::{DataError, Dataset, Source};

/// Where a declared range or class list comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Provenance {
    /// Data-independent and published (MNIST's pixel range, digits' 0–16, the digit classes).
    #[serde(rename = "public")]
    Public,
    /// Declared by the user (`--schema`, `--bounds`, `--classes`, `--label-range`).
    #[serde(rename = "declared")]
    Declared,
    /// Published with the data set but equal to its own minima and maxima (iris, wine,
    /// breast-cancer): usable for a demo, not a pattern for private data.
    #[serde(rename = "data-derived (demo only)")]
    DataDerived,
    /// Read from the records (class lists of a `csv:` table without declared classes). Only
    /// non-private computations accept it.
    #[serde(rename = "inferred from the records (not private)")]
    Inferred,
}

impl Provenance {
    /// Whether a private computation may rely on it (everything but [`Provenance::Inferred`]).
    pub fn is_declared(self) -> bool {
        self != Provenance::Inferred
    }
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Provenance::Public => "public",
            Provenance::Declared => "declared",
            Provenance::DataDerived => "data-derived (demo only)",
            Provenance::Inferred => "inferred from the records (not private)",
        };
        f.write_str(s)
    }
}

/// Feature bounds: one range for every feature, or one per feature.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FeatureBounds {
    /// The same `[lo, hi]` for every feature.
    Uniform((f64, f64)),
    /// One `[lo, hi]` per feature, in the data set's feature order.
    PerFeature(Vec<(f64, f64)>),
}

impl FeatureBounds {
    /// One range per feature for a data set of `d` features.
    ///
    /// # Errors
    /// [`DataError::Schema`] when per-feature bounds do not number `d`.
    pub fn per_feature(&self, d: usize) -> Result<Vec<(f64, f64)>, DataError> {
        match self {
            FeatureBounds::Uniform(r) => Ok(vec![*r; d]),
            FeatureBounds::PerFeature(v) if v.len() == d => Ok(v.clone()),
            FeatureBounds::PerFeature(v) => Err(DataError::Schema(format!(
                "{} feature bounds declared, but the data has {d} features",
                v.len()
            ))),
        }
    }
}

/// What is declared about a data set (see the module docs). `None` means "not declared".
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Schema {
    /// The label column of a `csv:` table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_column: Option<String>,
    /// The feature columns, in the order the model sees them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<String>>,
    /// Feature bounds; every feature is clamped into them when loaded.
    pub bounds: Option<FeatureBounds>,
    /// Where the bounds come from.
    pub bounds_provenance: Option<Provenance>,
    /// The classes, index = class; a label outside them is refused.
    pub classes: Option<Vec<String>>,
    /// Where the classes come from.
    pub classes_provenance: Option<Provenance>,
    /// The range of an integer label (regression of the label's value: its sensitivity).
    pub label_range: Option<(f64, f64)>,
    /// The record shape: an image folder's `[C, H, W]` (C = 1 grayscale, 3 RGB); for a table
    /// or array, the shape its features are laid out in (`[1, 28, 28]` for 784 pixel columns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<usize>>,
    /// Where the shape comes from: [`Provenance::Inferred`] when an image folder's was read
    /// from its first image (only non-private computations accept it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape_provenance: Option<Provenance>,
    /// Resize images of another size to `shape` instead of refusing them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resize: bool,
    /// The field delimiter of a csv table (default `,`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delimiter: Option<u8>,
    /// Categorical features of a csv table and their declared categories: each such column
    /// becomes one 0/1 column per category (`colour=red`, …), in the declared order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<(String, Vec<String>)>,
    /// The value an empty numeric cell takes, per feature; a feature without one takes
    /// `fill`, and with neither an empty cell is refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fills: Vec<(String, f64)>,
    /// The value an empty numeric cell of any feature takes (see `fills`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fill: Option<f64>,
    /// The tables of a SQL query, by name (`[tables.NAME]`; see [`crate::table_decl`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tables: BTreeMap<String, TableDecl>,
}

/// The largest schema file read (16 MiB: room for key sets of a million short keys written
/// inline; longer key lists belong in a `keys_file`, which has its own limit).
pub const MAX_SCHEMA_BYTES: u64 = 16 << 20;

/// The largest number of classes a label range may expand to.
const MAX_RANGE_CLASSES: f64 = 100_000.0;

impl Schema {
    /// The schema a named data set carries (an empty one for `csv:`): its bounds and, for the
    /// digit sets, the label range 0–9. Its classes are the compiled-in class names, which
    /// [`crate::load`] fills in.
    pub fn builtin(source: &Source) -> Schema {
        let (bounds, bounds_provenance) = match source {
            // Pixels 0–255, scaled to [0, 1] when loaded.
            Source::Mnist | Source::FashionMnist => {
                (Some(FeatureBounds::Uniform((0.0, 1.0))), Provenance::Public)
            }
            Source::Digits => (
                Some(FeatureBounds::Uniform((0.0, 16.0))),
                Provenance::Public,
            ),
            Source::Iris | Source::Wine | Source::BreastCancer => (
                source
                    .published_ranges()
                    .map(|p| FeatureBounds::PerFeature(p.ranges.to_vec())),
                Provenance::DataDerived,
            ),
            _ => return Schema::default(),
        };
        Schema {
            label_column: None,
            features: None,
            bounds,
            bounds_provenance: Some(bounds_provenance),
            // Filled in from the compiled-in class names when loaded (see `load`).
            classes: None,
            classes_provenance: None,
            // The digit's value: the label range of the "regress the digit" task.
            label_range: matches!(source, Source::Mnist | Source::Digits).then_some((0.0, 9.0)),
            ..Schema::default()
        }
    }

    /// Reads a schema file: TOML when the name ends in `.toml`, else JSON.
    ///
    /// # Errors
    /// [`DataError::Io`] when it cannot be read; [`DataError::Schema`] naming the file and what
    /// is wrong (syntax, an unknown key, a range that is not two numbers, has lo ≥ hi or a
    /// non-finite end, or feature bounds f32 features cannot hold, a class, feature or table
    /// named twice, a shape whose product overflows, both classes and label_range).
    pub fn from_file(path: &Path) -> Result<Schema, DataError> {
        let text = crate::read_text(path, "a schema", MAX_SCHEMA_BYTES)?;
        let is_toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        let mut file: SchemaFile = if is_toml {
            toml::from_str(&text).map_err(|e| schema_err(path, e.message()))?
        } else {
            serde_json::from_str(&text).map_err(|e| schema_err(path, e))?
        };
        check_tables(&mut file.tables, path.parent())
            .and_then(|()| file.into_schema())
            .map_err(|e| schema_err(path, e.to_string().trim_start_matches("schema: ")))
    }

    /// This schema with every field `over` declares replacing its own (command-line flags over
    /// a schema file, a file over a built-in schema).
    pub fn overridden_by(mut self, over: Schema) -> Schema {
        if over.label_column.is_some() {
            self.label_column = over.label_column;
        }
        if over.features.is_some() || !over.categories.is_empty() {
            // Categories and fills describe the declared feature columns; new columns replace
            // them.
            self.features = over.features;
            self.categories = over.categories;
            self.fills = over.fills;
        }
        if over.bounds.is_some() {
            self.bounds = over.bounds;
            self.bounds_provenance = over.bounds_provenance;
        }
        if over.fill.is_some() {
            self.fill = over.fill;
        }
        if over.shape.is_some() {
            self.shape = over.shape;
            self.shape_provenance = over.shape_provenance;
        }
        self.resize |= over.resize;
        if over.delimiter.is_some() {
            self.delimiter = over.delimiter;
        }
        if !over.tables.is_empty() {
            self.tables = over.tables;
        }
        if over.classes.is_some() || over.label_range.is_some() {
            // Classes and a label range describe one label domain: a new declaration of either
            // replaces both.
            self.classes = over.classes;
            self.classes_provenance = over.classes_provenance;
            self.label_range = over.label_range;
        }
        self
    }

    /// A declared record shape (the user's `--shape`).
    ///
    /// # Errors
    /// [`DataError::Schema`] for an empty shape, one with a zero extent or one whose product
    /// overflows.
    pub fn with_shape(mut self, shape: Vec<usize>) -> Result<Schema, DataError> {
        if shape.is_empty() || shape.contains(&0) {
            return Err(DataError::Schema(format!(
                "shape {shape:?} must list one or more extents, none of them 0"
            )));
        }
        // A wrapped product would pass the later "holds d values" check by accident
        // ([2^62 + 1, 4, 1] wraps to 4).
        shape_size(&shape)?;
        self.shape = Some(shape);
        self.shape_provenance = Some(Provenance::Declared);
        Ok(self)
    }

    /// Declared bounds (the user's), one range for every feature or one per feature.
    ///
    /// # Errors
    /// [`DataError::Schema`] for a range with lo ≥ hi, a non-finite end, a width hi − lo that
    /// overflows, or an end beyond the f32 range features are held in.
    pub fn with_bounds(mut self, bounds: FeatureBounds) -> Result<Schema, DataError> {
        match &bounds {
            FeatureBounds::Uniform(r) => check_bounds("bounds", *r)?,
            FeatureBounds::PerFeature(v) => {
                for (j, &r) in v.iter().enumerate() {
                    check_bounds(&format!("bounds of feature {}", j + 1), r)?;
                }
            }
        }
        self.bounds = Some(bounds);
        self.bounds_provenance = Some(Provenance::Declared);
        Ok(self)
    }

    /// The csv field delimiter: one ASCII character (`;`, a tab given as `\t` or `tab`).
    ///
    /// # Errors
    /// [`DataError::Schema`] for anything else.
    pub fn with_delimiter(mut self, text: &str) -> Result<Schema, DataError> {
        let byte = match text {
            "\\t" | "tab" | "\t" => b'\t',
            _ if text.len() == 1 && text.is_ascii() && text != "\"" && text != "\n" => {
                text.as_bytes()[0]
            }
            _ => {
                return Err(DataError::Schema(format!(
                    "delimiter must be one ASCII character other than a quote or newline (or \\t), got {text:?}"
                )));
            }
        };
        self.delimiter = Some(byte);
        Ok(self)
    }

    /// Declared classes, index = class.
    ///
    /// # Errors
    /// [`DataError::Schema`] for an empty list or a class named twice.
    pub fn with_classes(mut self, classes: Vec<String>) -> Result<Schema, DataError> {
        if classes.is_empty() {
            return Err(DataError::Schema(
                "classes must name at least one class".into(),
            ));
        }
        check_distinct("class", &classes)?;
        self.classes = Some(classes);
        self.classes_provenance = Some(Provenance::Declared);
        self.label_range = None;
        Ok(self)
    }

    /// A declared integer label range `[lo, hi]`: the classes become lo, lo + 1, …, hi (class
    /// index = value − lo), and the range is the sensitivity of a regression on the value.
    ///
    /// # Errors
    /// [`DataError::Schema`] unless lo < hi are integers with at most 100,000 values between.
    pub fn with_label_range(mut self, (lo, hi): (f64, f64)) -> Result<Schema, DataError> {
        check_range("label_range", (lo, hi))?;
        if lo.fract() != 0.0 || hi.fract() != 0.0 || hi - lo >= MAX_RANGE_CLASSES {
            return Err(DataError::Schema(format!(
                "label_range must be whole numbers lo < hi at most {MAX_RANGE_CLASSES} apart \
                 (labels are encoded as classes lo..=hi), got [{lo}, {hi}]"
            )));
        }
        let classes = (0..=(hi - lo) as u64)
            .map(|i| format_number(lo + i as f64))
            .collect();
        self = self.with_classes(classes)?;
        self.label_range = Some((lo, hi));
        Ok(self)
    }

    /// The declared categories of column `name`, if it is categorical.
    pub fn categories_of(&self, name: &str) -> Option<&[String]> {
        self.categories
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.as_slice())
    }

    /// The value an empty cell of numeric column `name` takes, if one is declared.
    pub fn fill_of(&self, name: &str) -> Option<f64> {
        self.fills
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
            .or(self.fill)
    }

    /// The schema of the one-hot encoded table: each categorical feature's bounds become one
    /// `[0, 1]` per category, so the bounds number the model's inputs.
    ///
    /// # Errors
    /// [`DataError::Schema`] when per-feature bounds do not number the declared features.
    pub(crate) fn with_categories_expanded(mut self) -> Result<Schema, DataError> {
        let (Some(features), Some(bounds)) = (&self.features, &self.bounds) else {
            return Ok(self);
        };
        if self.categories.is_empty() {
            return Ok(self);
        }
        let per = bounds.per_feature(features.len())?;
        let expanded = features
            .iter()
            .zip(per)
            .flat_map(|(f, range)| match self.categories_of(f) {
                Some(c) => vec![(0.0, 1.0); c.len()],
                None => vec![range],
            })
            .collect();
        self.bounds = Some(FeatureBounds::PerFeature(expanded));
        Ok(self)
    }

    /// The feature bounds, one per feature, when declared (of any provenance).
    ///
    /// # Errors
    /// [`DataError::Schema`] when per-feature bounds do not number `d`.
    pub fn feature_bounds(&self, d: usize) -> Result<Option<Vec<(f64, f64)>>, DataError> {
        self.bounds.as_ref().map(|b| b.per_feature(d)).transpose()
    }

    /// The feature bounds a private computation on `dataset` relies on.
    ///
    /// # Errors
    /// [`DataError::Undeclared`] naming the flags that declare them, when none are declared.
    pub fn require_bounds(&self, dataset: &str, d: usize) -> Result<Vec<(f64, f64)>, DataError> {
        self.feature_bounds(d)?
            .ok_or_else(|| undeclared(dataset, "feature bounds", "--bounds or --schema FILE"))
    }

    /// Checks that the class list is declared (not read from the records).
    ///
    /// # Errors
    /// [`DataError::Undeclared`] naming the flags that declare them.
    pub fn require_classes(&self, dataset: &str) -> Result<(), DataError> {
        match self.classes_provenance {
            Some(p) if p.is_declared() => Ok(()),
            _ => Err(undeclared(
                dataset,
                "classes",
                "--classes, --label-range or --schema FILE",
            )),
        }
    }

    /// Checks that the record shape was not read from the records: an image folder's shape
    /// (channels, height, width) fixes every record and the model's first layer, so a private
    /// computation may not take it from one image.
    ///
    /// # Errors
    /// [`DataError::Undeclared`] naming the flags that declare it.
    pub fn require_shape(&self, dataset: &str) -> Result<(), DataError> {
        match self.shape_provenance {
            Some(Provenance::Inferred) => Err(undeclared(
                dataset,
                "record shape [C, H, W]",
                "--shape C,H,W, or schema key shape",
            )),
            _ => Ok(()),
        }
    }

    /// Checks that a label range is declared (regression).
    ///
    /// # Errors
    /// [`DataError::Undeclared`] naming the flags that declare it.
    pub fn require_label_range(&self, dataset: &str) -> Result<(f64, f64), DataError> {
        self.label_range
            .ok_or_else(|| undeclared(dataset, "label range", "--label-range or --schema FILE"))
    }

    /// Clamps every feature of `data` into the declared bounds (nothing when none are
    /// declared); returns how many values of each feature were moved (empty without bounds).
    ///
    /// # Errors
    /// [`DataError::Schema`] when per-feature bounds do not number the data's features.
    pub fn clamp(&self, data: &mut Dataset) -> Result<Vec<usize>, DataError> {
        let d = data.n_features();
        let Some(bounds) = self.feature_bounds(d)? else {
            return Ok(Vec::new());
        };
        let mut clamped = vec![0; d];
        for row in data.x.chunks_exact_mut(d.max(1)) {
            for ((v, &(lo, hi)), count) in row.iter_mut().zip(&bounds).zip(&mut clamped) {
                // f32 rounding of the bounds themselves may fall a hair outside [lo, hi]; the
                // value stays finite either way, which is what the engine relies on.
                let c = v.clamp(lo as f32, hi as f32);
                *count += usize::from(c != *v);
                *v = c;
            }
        }
        Ok(clamped)
    }
}

/// A number as a class name: `2` for 2.0, `2.5` for 2.5.
pub(crate) fn format_number(v: f64) -> String {
    // `+ 0.0` turns -0 into 0.
    (v + 0.0).to_string()
}

/// The index of `cell` among `classes`: equal as text, or as numbers when both parse (so `2`,
/// `2.0` and `+2` name one class).
/// The class of a label cell under the declared label domain: [`declared_class`], or, when a
/// label range `[lo, hi]` is declared (its classes are lo..=hi), a number outside it clamped
/// to the nearest end, as features are clamped into their bounds: the range is what a
/// private computation relies on, so no record may step outside it, and clamping is a
/// per-record map fixed before seeing the data. A non-number, or a fraction inside the range,
/// has no class.
pub(crate) fn declared_label(
    classes: &[String],
    label_range: Option<(f64, f64)>,
    cell: &str,
) -> Option<u32> {
    declared_class(classes, cell).or_else(|| {
        let (lo, hi) = label_range?;
        let v: f64 = cell.parse().ok()?;
        let last = u32::try_from(classes.len().checked_sub(1)?).ok()?;
        // An infinite label is clamped too (NaN is not a number here).
        match v {
            v if v < lo => Some(0),
            v if v > hi => Some(last),
            _ => None,
        }
    })
}

pub(crate) fn declared_class(classes: &[String], cell: &str) -> Option<u32> {
    if let Some(i) = classes.iter().position(|c| c == cell) {
        return Some(i as u32);
    }
    let v: f64 = cell.parse().ok().filter(|v: &f64| v.is_finite())?;
    classes
        .iter()
        .position(|c| c.parse::<f64>().is_ok_and(|c| c == v))
        .map(|i| i as u32)
}

fn finite(what: &str, v: f64) -> Result<f64, DataError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(DataError::Schema(format!("{what} must be finite, got {v}")))
    }
}

/// A name listed more than once in `names`, if any.
pub(crate) fn repeated(names: &[String]) -> Option<&String> {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    sorted.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
}

/// Refuses a name listed twice in `names` (classes, features), naming it.
fn check_distinct(what: &str, names: &[String]) -> Result<(), DataError> {
    match repeated(names) {
        Some(name) => Err(DataError::Schema(format!(
            "{what} {name:?} is declared twice"
        ))),
        None => Ok(()),
    }
}

/// A categorical feature's categories: at least one, none twice.
fn check_categories(name: &str, c: &[String]) -> Result<Vec<String>, DataError> {
    if c.is_empty() || repeated(c).is_some() {
        return Err(DataError::Schema(format!(
            "feature {name:?}: categories must be distinct and at least one"
        )));
    }
    Ok(c.to_vec())
}

fn check_range(what: &str, (lo, hi): (f64, f64)) -> Result<(), DataError> {
    if lo.is_finite() && hi.is_finite() && lo < hi {
        Ok(())
    } else {
        Err(DataError::Schema(format!(
            "{what} must be finite with lo < hi, got [{}, {}]",
            shown(lo),
            shown(hi)
        )))
    }
}

/// A number as a file would write it: `18`, `0.5`, but `1e300` and `5e-324` rather than
/// hundreds of digits.
fn shown(v: f64) -> String {
    let a = v.abs();
    if a.is_finite() && a != 0.0 && !(1e-5..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// A feature's bounds: [`check_range`], and usable where features live. The learners work
/// in f32 (a cell beyond ±3.4e38 is refused when parsed) and scale by hi − lo, so an end
/// beyond the f32 range would become an infinity, ends that round to one f32 an empty
/// range, and an overflowing width an infinite scale: each is refused here, where the
/// message can still name the feature and show the bounds as given.
fn check_bounds(what: &str, (lo, hi): (f64, f64)) -> Result<(), DataError> {
    check_range(what, (lo, hi))?;
    let problem = if !(hi - lo).is_finite() {
        "the width hi − lo overflows"
    } else if lo < -f64::from(f32::MAX) || hi > f64::from(f32::MAX) {
        "they must lie within ±3.4e38 (features are f32)"
    } else if !(hi as f32 - lo as f32).is_finite() {
        "the width hi − lo overflows f32 (features are f32)"
    } else if lo as f32 >= hi as f32 {
        "lo and hi are the same number in f32 (features are f32)"
    } else {
        return Ok(());
    };
    Err(DataError::Schema(format!(
        "{what}: {problem}, got [{}, {}]",
        shown(lo),
        shown(hi)
    )))
}

/// The number of values a record of `shape` holds.
///
/// # Errors
/// [`DataError::Schema`] naming the shape when the product overflows.
pub(crate) fn shape_size(shape: &[usize]) -> Result<usize, DataError> {
    shape
        .iter()
        .try_fold(1usize, |p, &s| p.checked_mul(s))
        .ok_or_else(|| {
            DataError::Schema(format!(
                "shape {shape:?} is too large: the product of its extents overflows"
            ))
        })
}

/// `[lo, hi]` as read from a file: exactly two numbers. A tuple would take the first two of
/// a longer list and drop the rest unseen (`[18, 50, 90]` would clamp to [18, 50]).
fn pair(what: &str, v: Vec<f64>) -> Result<(f64, f64), DataError> {
    match v[..] {
        [lo, hi] => Ok((lo, hi)),
        _ => Err(DataError::Schema(format!(
            "{what} must be [lo, hi], got {} number{}",
            v.len(),
            if v.len() == 1 { "" } else { "s" }
        ))),
    }
}

fn undeclared(dataset: &str, what: &'static str, flags: &'static str) -> DataError {
    DataError::Undeclared {
        dataset: dataset.to_string(),
        what,
        flags,
    }
}

fn schema_err(path: &Path, e: impl fmt::Display) -> DataError {
    DataError::Schema(format!("{}: {}", path.display(), e.to_string().trim()))
}

/// The file format: a label is a string or a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum LabelName {
    Text(String),
    Number(f64),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeatureEntry {
    name: String,
    bounds: Option<Vec<f64>>,
    categories: Option<Vec<String>>,
    fill: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaFile {
    label_column: Option<String>,
    // Pairs are read as lists and checked by `pair`, so a third number is refused.
    bounds: Option<Vec<f64>>,
    features: Option<Vec<FeatureEntry>>,
    classes: Option<Vec<LabelName>>,
    label_range: Option<Vec<f64>>,
    shape: Option<Vec<usize>>,
    #[serde(default)]
    resize: bool,
    delimiter: Option<String>,
    fill: Option<f64>,
    #[serde(default, deserialize_with = "distinct_tables")]
    tables: BTreeMap<String, TableDecl>,
}

impl SchemaFile {
    fn into_schema(self) -> Result<Schema, DataError> {
        let mut s = Schema {
            label_column: self.label_column,
            resize: self.resize,
            tables: self.tables,
            ..Schema::default()
        };
        if let Some(shape) = self.shape {
            // The same checks as --shape (no zero extent, no overflowing product).
            s = s.with_shape(shape)?;
        }
        if let Some(d) = &self.delimiter {
            s = s.with_delimiter(d)?;
        }
        s.fill = self.fill.map(|v| finite("fill", v)).transpose()?;
        let common = self.bounds.map(|v| pair("bounds", v)).transpose()?;
        if let Some(c) = common {
            check_bounds("bounds", c)?;
        }
        if let Some(features) = &self.features {
            let names: Vec<String> = features.iter().map(|e| e.name.clone()).collect();
            // A feature declared twice would select its column twice (the second take finds
            // it emptied) and keep one declaration's bounds unseen: refuse it, as for classes.
            check_distinct("feature", &names)?;
            s.features = Some(names);
            // Each feature's own bounds, checked here so that the message names the feature.
            let own = features
                .iter()
                .map(|e| {
                    let what = format!("bounds of feature {:?}", e.name);
                    e.bounds
                        .clone()
                        .map(|v| pair(&what, v).and_then(|r| check_bounds(&what, r).map(|()| r)))
                        .transpose()
                })
                .collect::<Result<Vec<_>, _>>()?;
            for (e, &own) in features.iter().zip(&own) {
                match (&e.categories, e.fill, own) {
                    (Some(c), None, None) => s
                        .categories
                        .push((e.name.clone(), check_categories(&e.name, c)?)),
                    (Some(_), _, _) => {
                        return Err(DataError::Schema(format!(
                            "feature {:?} is categorical: its columns are 0/1, so it takes no \
                             bounds or fill",
                            e.name
                        )));
                    }
                    (None, Some(v), _) => s.fills.push((e.name.clone(), finite("fill", v)?)),
                    (None, None, _) => {}
                }
            }
            // Per-feature bounds win over the common one; every feature needs one or the other.
            if own.iter().any(Option::is_some) {
                let ranges = features
                    .iter()
                    .zip(&own)
                    .map(|(e, own)| {
                        // A categorical feature's one-hot columns lie in [0, 1].
                        let own = own.or(e.categories.as_ref().map(|_| (0.0, 1.0)));
                        own.or(common).ok_or_else(|| {
                            DataError::Schema(format!(
                                "feature {:?} has no bounds (and no common bounds are declared)",
                                e.name
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                s = s.with_bounds(FeatureBounds::PerFeature(ranges))?;
            }
        }
        if let (None, Some(common)) = (&s.bounds, common) {
            s = s.with_bounds(FeatureBounds::Uniform(common))?;
        }
        match (self.classes, self.label_range) {
            (Some(_), Some(_)) => {
                return Err(DataError::Schema(
                    "declare classes or label_range, not both".into(),
                ));
            }
            (Some(classes), None) => {
                let names = classes
                    .into_iter()
                    .map(|c| match c {
                        LabelName::Text(t) => Ok(t),
                        LabelName::Number(v) if v.is_finite() => Ok(format_number(v)),
                        // TOML's nan and inf: no label in a table reads as one.
                        LabelName::Number(v) => Err(DataError::Schema(format!(
                            "classes: {v} is not a class a label can be (a finite number or \
                             a text)"
                        ))),
                    })
                    .collect::<Result<_, _>>()?;
                s = s.with_classes(names)?;
            }
            (None, Some(range)) => s = s.with_label_range(pair("label_range", range)?)?,
            (None, None) => {}
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn toml_and_json_files_give_the_same_schema() {
        let (_a, toml_path) = write(
            "s.toml",
            "label_column = \"y\"\nclasses = [\"no\", 1]\nbounds = [0, 10]\n\
             [[features]]\nname = \"a\"\n[[features]]\nname = \"b\"\nbounds = [-1, 1]\n",
        );
        let (_b, json_path) = write(
            "s.json",
            r#"{"label_column": "y", "classes": ["no", 1], "bounds": [0, 10],
                "features": [{"name": "a"}, {"name": "b", "bounds": [-1, 1]}]}"#,
        );
        let t = Schema::from_file(&toml_path).unwrap();
        assert_eq!(t, Schema::from_file(&json_path).unwrap());
        assert_eq!(t.classes, Some(vec!["no".to_string(), "1".to_string()]));
        assert_eq!(
            t.bounds,
            Some(FeatureBounds::PerFeature(vec![(0.0, 10.0), (-1.0, 1.0)]))
        );
        assert_eq!(t.bounds_provenance, Some(Provenance::Declared));
        assert_eq!(t.features.as_deref().unwrap(), ["a", "b"]);
    }

    #[test]
    fn bad_files_are_named() {
        let cases = [
            ("s.json", r#"{"classes": ["a", "a"]}"#, "declared twice"),
            ("s.json", r#"{"bounds": [3, 1]}"#, "lo < hi"),
            ("s.json", r#"{"colour": 1}"#, "colour"),
            (
                "s.json",
                r#"{"classes": ["a"], "label_range": [0, 1]}"#,
                "not both",
            ),
            ("s.json", r#"{"label_range": [0, 2.5]}"#, "whole numbers"),
            (
                "s.toml",
                "[[features]]\nname = \"a\"\nbounds = [0, 1]\n[[features]]\nname = \"b\"\n",
                "\"b\" has no bounds",
            ),
            ("s.toml", "classes = [", "s.toml"),
        ];
        for (name, text, want) in cases {
            let (_d, p) = write(name, text);
            let msg = Schema::from_file(&p).unwrap_err().to_string();
            assert!(msg.contains(want) && msg.contains(name), "{text}: {msg}");
        }
        // A folder, like a FIFO, is not read (a FIFO's read could wait for ever).
        let dir = tempfile::tempdir().unwrap();
        let msg = Schema::from_file(dir.path()).unwrap_err().to_string();
        assert!(msg.contains("not a regular file"), "{msg}");
    }

    fn refusal(name: &str, text: &str) -> String {
        let (_d, p) = write(name, text);
        Schema::from_file(&p).unwrap_err().to_string()
    }

    #[test]
    fn a_feature_declared_twice_is_refused() {
        let twice = "[[features]]\nname = \"age\"\nbounds = [18, 90]\n\
                     [[features]]\nname = \"bmi\"\nbounds = [15, 50]\n\
                     [[features]]\nname = \"age\"\nbounds = [0, 1]\n";
        let msg = refusal("s.toml", twice);
        assert!(msg.contains("feature \"age\" is declared twice"), "{msg}");
        let msg = refusal(
            "s.json",
            r#"{"bounds": [0, 1], "features": [{"name": "a"}, {"name": "a"}]}"#,
        );
        assert!(msg.contains("feature \"a\" is declared twice"), "{msg}");
    }

    #[test]
    fn a_pair_of_more_or_fewer_than_two_numbers_is_refused() {
        let cases = [
            (
                "s.toml",
                "[[features]]\nname = \"age\"\nbounds = [18, 50, 90]\n",
                "bounds of feature \"age\" must be [lo, hi], got 3 numbers",
            ),
            (
                "s.json",
                r#"{"features": [{"name": "age", "bounds": [18]}]}"#,
                "bounds of feature \"age\" must be [lo, hi], got 1 number",
            ),
            (
                "s.toml",
                "bounds = [0, 1, 2]\n",
                "bounds must be [lo, hi], got 3 numbers",
            ),
            (
                "s.toml",
                "label_range = [0, 9, 10]\n",
                "label_range must be [lo, hi], got 3 numbers",
            ),
        ];
        for (name, text, want) in cases {
            let msg = refusal(name, text);
            assert!(msg.contains(want), "{text}: {msg}");
        }
    }

    #[test]
    fn a_class_that_is_no_finite_number_is_refused() {
        for class in ["nan", "inf", "-inf"] {
            let msg = refusal("s.toml", &format!("classes = [{class}, \"no\", \"yes\"]\n"));
            assert!(
                msg.contains("is not a class a label can be"),
                "{class}: {msg}"
            );
        }
    }

    #[test]
    fn an_overflowing_shape_is_refused() {
        for shape in ["[4611686018427387905, 4, 1]", "[4294967296, 4294967296, 1]"] {
            let msg = refusal("s.toml", &format!("shape = {shape}\n"));
            assert!(
                msg.contains(&format!("shape {shape}")) && msg.contains("overflows"),
                "{msg}"
            );
        }
        let msg = Schema::default()
            .with_shape(vec![usize::MAX, 2])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("overflows"), "{msg}");
        // A zero extent in a file is refused as on the command line.
        assert!(refusal("s.toml", "shape = [0, 4]\n").contains("none of them 0"));
    }

    #[test]
    fn bounds_that_features_cannot_hold_are_refused_as_given() {
        let feature = |b: &str| {
            refusal(
                "s.toml",
                &format!("[[features]]\nname = \"age\"\nbounds = {b}\n"),
            )
        };
        let cases = [
            ("[-1e300, 1e300]", "within ±3.4e38", "[-1e300, 1e300]"),
            (
                "[-1e308, 1e308]",
                "the width hi − lo overflows",
                "[-1e308, 1e308]",
            ),
            ("[-3e38, 3e38]", "overflows f32", "[-3e38, 3e38]"),
            ("[0, 5e-324]", "same number in f32", "[0, 5e-324]"),
            ("[90, 18]", "lo < hi", "[90, 18]"),
        ];
        for (bounds, want, shown) in cases {
            let msg = feature(bounds);
            assert!(
                msg.contains("bounds of feature \"age\"")
                    && msg.contains(want)
                    && msg.contains(&format!("got {shown}")),
                "{bounds}: {msg}"
            );
        }
        let msg = refusal("s.toml", "bounds = [-1e300, 1e300]\n");
        assert!(msg.contains("bounds: they must lie within"), "{msg}");
        // The same checks hold for bounds given in code or on the command line.
        let msg = Schema::default()
            .with_bounds(FeatureBounds::PerFeature(vec![(0.0, 1.0), (0.0, 5e-324)]))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("bounds of feature 2"), "{msg}");
        // The widest range f32 features can use is still accepted.
        let m = f64::from(f32::MAX);
        assert!(
            Schema::default()
                .with_bounds(FeatureBounds::Uniform((0.0, m)))
                .is_ok()
        );
    }

    #[test]
    fn a_table_declared_twice_is_refused() {
        // JSON allows a key twice (TOML does not); the second declaration must not replace
        // the first unseen.
        let msg = refusal(
            "s.json",
            r#"{"tables": {"t": {"public": true}, "t": {"privacy_unit": "u"}}}"#,
        );
        assert!(msg.contains("table \"t\" is declared twice"), "{msg}");
    }

    #[test]
    fn label_range_declares_integer_classes() {
        let s = Schema::default().with_label_range((-1.0, 2.0)).unwrap();
        assert_eq!(s.classes.unwrap(), ["-1", "0", "1", "2"]);
        assert_eq!(s.label_range, Some((-1.0, 2.0)));
        assert_eq!(declared_class(&["-1".into(), "2".into()], "2.0"), Some(1));
        assert_eq!(declared_class(&["a".into()], "b"), None);
        let digits: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        let range = Some((0.0, 9.0));
        assert_eq!(declared_label(&digits, range, "1e6"), Some(9));
        assert_eq!(declared_label(&digits, range, "-3"), Some(0));
        assert_eq!(declared_label(&digits, range, "4"), Some(4));
        assert_eq!(declared_label(&digits, range, "4.5"), None);
        assert_eq!(declared_label(&digits, range, "NaN"), None);
        assert_eq!(declared_label(&digits, None, "1e6"), None);
    }

    #[test]
    fn builtin_schemas_mark_their_provenance() {
        let mnist = Schema::builtin(&Source::Mnist);
        assert_eq!(mnist.bounds_provenance, Some(Provenance::Public));
        assert_eq!(mnist.label_range, Some((0.0, 9.0)));
        let iris = Schema::builtin(&Source::Iris);
        assert_eq!(iris.bounds_provenance, Some(Provenance::DataDerived));
        assert_eq!(iris.feature_bounds(4).unwrap().unwrap()[2], (1.0, 6.9));
        let csv = Schema::builtin(&Source::Csv("x.csv".into()));
        assert!(csv.require_bounds("csv:x.csv", 3).is_err());
        let msg = csv.require_classes("csv:x.csv").unwrap_err().to_string();
        assert!(
            msg.contains("--classes") && msg.contains("csv:x.csv"),
            "{msg}"
        );
        // A declaration replaces the built-in one and is marked as declared.
        let over = Schema::builtin(&Source::Iris).overridden_by(
            Schema::default()
                .with_bounds(FeatureBounds::Uniform((0.0, 10.0)))
                .unwrap(),
        );
        assert_eq!(over.bounds_provenance, Some(Provenance::Declared));
    }
}
