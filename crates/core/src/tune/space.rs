//! The space a private search draws each trial's hyperparameters from: ranges (uniform or
//! log-uniform) and lists of choices, written as `--search` text
//! (`"learning-rate=0.05..2 log, batch-size=128|256|512, epochs=10..40"`) or as a TOML/JSON
//! table. Drawing a point uses the run's generator and no data, so the hyperparameters of every
//! trial are public randomness; the search's guarantee accounts for the privacy-relevant ones
//! (batch size and epochs set a trial's sampling rate and steps) through [`SearchSpace::cells`].

use std::path::Path;

use dpml_learn::dpsgd::{OptimizerKind, TrainConfig};
use dpml_mechanisms::DpRng;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// The most choices one hyperparameter may list (a search draws a handful of trials; a longer
/// list is a mistake, and bounding it bounds what is allocated).
pub const MAX_CHOICES: usize = 1000;

/// The largest search-space file read (1 MiB: a space names a few hyperparameters, each with
/// at most [`MAX_CHOICES`] choices).
pub const MAX_SPACE_FILE_BYTES: u64 = 1 << 20;

/// The largest batch size a space may hold (as `--batch-size` allows, within memory sense).
const MAX_BATCH: f64 = (1u64 << 31) as f64;
/// The most epochs a search space may hold: every whole number up to it is exact in an f64, so
/// a range of whole epochs can be counted and drawn from.
const MAX_EPOCHS: f64 = (1u64 << 53) as f64;

/// Cells per range of an integer hyperparameter that changes a trial's privacy (batch size,
/// epochs): trials in a cell share the noise calibrated for the cell's costliest corner.
const CELLS_PER_RANGE: usize = 8;

/// A hyperparameter a search may vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hyperparameter {
    /// The learning rate (> 0).
    LearningRate,
    /// The clipping norm C (> 0); σ is relative to it, so it does not change ε.
    MaxGradNorm,
    /// The expected batch size B (a whole number ≥ 1): q = B/N.
    BatchSize,
    /// The epochs E (> 0; whole numbers when drawn from a range): T = ⌈E·N/B⌉.
    Epochs,
    /// SGD momentum in [0, 1).
    Momentum,
}

impl Hyperparameter {
    /// Every hyperparameter, in the order reports list them.
    pub const ALL: [Hyperparameter; 5] = [
        Hyperparameter::LearningRate,
        Hyperparameter::MaxGradNorm,
        Hyperparameter::BatchSize,
        Hyperparameter::Epochs,
        Hyperparameter::Momentum,
    ];

    /// The name `--search` takes (the training flag's): `learning-rate`, `max-grad-norm`,
    /// `batch-size`, `epochs`, `momentum`.
    pub fn name(self) -> &'static str {
        match self {
            Hyperparameter::LearningRate => "learning-rate",
            Hyperparameter::MaxGradNorm => "max-grad-norm",
            Hyperparameter::BatchSize => "batch-size",
            Hyperparameter::Epochs => "epochs",
            Hyperparameter::Momentum => "momentum",
        }
    }

    /// The key JSON results use (the recipe's field): `learning_rate`, `max_grad_norm`,
    /// `batch_size`, `epochs`, `momentum`.
    pub fn key(self) -> &'static str {
        match self {
            Hyperparameter::LearningRate => "learning_rate",
            Hyperparameter::MaxGradNorm => "max_grad_norm",
            Hyperparameter::BatchSize => "batch_size",
            Hyperparameter::Epochs => "epochs",
            Hyperparameter::Momentum => "momentum",
        }
    }

    fn parse(name: &str) -> Result<Self> {
        let wanted = name.trim().replace('_', "-");
        Self::ALL
            .into_iter()
            .find(|h| h.name() == wanted || (wanted == "lr" && *h == Self::LearningRate))
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|h| h.name()).collect();
                Error::usage(format!(
                    "unknown hyperparameter {name:?} in the search space; known: {}",
                    known.join(", ")
                ))
            })
    }

    /// Whether its values are whole numbers when drawn from a range.
    fn integer(self) -> bool {
        matches!(self, Hyperparameter::BatchSize | Hyperparameter::Epochs)
    }

    /// Checks one value of this hyperparameter.
    fn check(self, v: f64) -> Result<f64> {
        let bad = |rule: &str| {
            Err(Error::usage(format!(
                "{} in the search space must be {rule}, got {v}",
                self.name()
            )))
        };
        match self {
            _ if !v.is_finite() => bad("finite"),
            Hyperparameter::LearningRate | Hyperparameter::MaxGradNorm | Hyperparameter::Epochs
                if v <= 0.0 =>
            {
                bad("> 0")
            }
            Hyperparameter::BatchSize if !((1.0..=MAX_BATCH).contains(&v) && v.fract() == 0.0) => {
                bad(&format!("a whole number in [1, {MAX_BATCH}]"))
            }
            Hyperparameter::Momentum if !(0.0..1.0).contains(&v) => bad("in [0, 1)"),
            Hyperparameter::Epochs if v > MAX_EPOCHS => bad(&format!("at most {MAX_EPOCHS}")),
            _ => Ok(v),
        }
    }
}

/// The values one hyperparameter takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Uniform on [lo, hi] (log-uniform with `log`); whole numbers for batch size and epochs.
    Range {
        /// Low end.
        lo: f64,
        /// High end (> lo).
        hi: f64,
        /// Log-uniform.
        log: bool,
    },
    /// One of these, each equally likely.
    Choices(Vec<f64>),
}

/// One hyperparameter of a space and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Dimension {
    /// Which hyperparameter.
    pub hyperparameter: Hyperparameter,
    /// Its values.
    pub values: Values,
}

impl Dimension {
    /// A checked dimension.
    fn new(hyperparameter: Hyperparameter, values: Values) -> Result<Self> {
        let name = hyperparameter.name();
        match &values {
            Values::Range { lo, hi, log } => {
                hyperparameter.check(*lo)?;
                hyperparameter.check(*hi)?;
                if lo >= hi {
                    return Err(Error::usage(format!(
                        "empty range {lo}..{hi} for {name} in the search space: the low end \
                         must be below the high end"
                    )));
                }
                if *log && *lo <= 0.0 {
                    return Err(Error::usage(format!(
                        "a log range for {name} needs a low end > 0, got {lo}"
                    )));
                }
                if hyperparameter.integer() && lo.ceil() > hi.floor() {
                    return Err(Error::usage(format!(
                        "the range {lo}..{hi} for {name} holds no whole number"
                    )));
                }
            }
            Values::Choices(list) => {
                if list.is_empty() {
                    return Err(Error::usage(format!(
                        "{name} in the search space lists no value"
                    )));
                }
                if list.len() > MAX_CHOICES {
                    return Err(Error::usage(format!(
                        "{name} in the search space lists {} values, more than {MAX_CHOICES}",
                        list.len()
                    )));
                }
                for &v in list {
                    hyperparameter.check(v)?;
                }
            }
        }
        Ok(Self {
            hyperparameter,
            values,
        })
    }

    /// Whether it takes one value only.
    fn is_fixed(&self) -> bool {
        match &self.values {
            Values::Range { .. } => false,
            Values::Choices(list) => list.iter().all(|&v| v == list[0]),
        }
    }

    /// A value drawn with `rng`.
    fn draw(&self, rng: &mut DpRng) -> f64 {
        match &self.values {
            Values::Choices(list) => list[rng.below(list.len() as u64) as usize],
            Values::Range { lo, hi, log } if self.hyperparameter.integer() => {
                let (a, b) = (lo.ceil(), hi.floor());
                if *log {
                    // Log-uniform on [a − ½, b + ½) rounded: each whole number gets the mass
                    // of its unit interval on the log scale.
                    let (la, lb) = ((a - 0.5).max(0.5).ln(), (b + 0.5).ln());
                    let v = (la + rng.uniform_f64() * (lb - la)).exp().round();
                    v.clamp(a, b)
                } else {
                    a + rng.below((b - a) as u64 + 1) as f64
                }
            }
            Values::Range { lo, hi, log: true } => {
                let (la, lb) = (lo.ln(), hi.ln());
                (la + rng.uniform_f64() * (lb - la)).exp().clamp(*lo, *hi)
            }
            Values::Range { lo, hi, .. } => lo + rng.uniform_f64() * (hi - lo),
        }
    }

    /// The intervals of values that share one noise level: each choice alone; a range of whole
    /// numbers cut into at most [`CELLS_PER_RANGE`] runs of consecutive ones (log-spaced for a
    /// log range).
    fn cells(&self) -> Vec<(f64, f64)> {
        match &self.values {
            Values::Choices(list) => {
                let mut v = list.clone();
                v.sort_by(f64::total_cmp);
                v.dedup();
                v.into_iter().map(|x| (x, x)).collect()
            }
            Values::Range { lo, hi, log } => {
                let (a, b) = (lo.ceil(), hi.floor());
                let count = (b - a) as usize + 1;
                if count <= CELLS_PER_RANGE {
                    return (0..count).map(|i| (a + i as f64, a + i as f64)).collect();
                }
                // Cut points between a and b, on the log or linear scale, rounded to whole
                // numbers; consecutive cells share no value.
                let at = |t: f64| -> f64 {
                    if *log {
                        (a.ln() + t * (b.ln() - a.ln())).exp().round()
                    } else {
                        (a + t * (b - a)).round()
                    }
                };
                let mut cells = Vec::new();
                let mut start = a;
                for i in 1..=CELLS_PER_RANGE {
                    let end = if i == CELLS_PER_RANGE {
                        b
                    } else {
                        at(i as f64 / CELLS_PER_RANGE as f64).max(start)
                    };
                    if end >= start {
                        cells.push((start, end));
                        start = end + 1.0;
                    }
                }
                cells
            }
        }
    }
}

/// A search space: the hyperparameters a search varies and their values. At least one
/// hyperparameter varies; each appears once.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSpace {
    dims: Vec<Dimension>,
}

/// One trial's hyperparameters, in the space's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Point(Vec<(Hyperparameter, f64)>);

impl Point {
    /// The value of `h`, if the space varies it.
    pub fn get(&self, h: Hyperparameter) -> Option<f64> {
        self.0.iter().find(|(k, _)| *k == h).map(|&(_, v)| v)
    }

    /// The values, in the space's order.
    pub fn values(&self) -> &[(Hyperparameter, f64)] {
        &self.0
    }

    /// `{"learning_rate": 0.3, "batch_size": 256, …}`.
    pub fn to_json(&self) -> Value {
        let map: Map<String, Value> = self
            .0
            .iter()
            .map(|&(h, v)| {
                let v = if h.integer() {
                    json!(v as u64)
                } else {
                    json!(v)
                };
                (h.key().to_string(), v)
            })
            .collect();
        Value::Object(map)
    }

    /// `base` with this point's values.
    ///
    /// # Errors
    /// A usage error for a momentum given to Adam.
    pub fn apply(&self, base: &TrainConfig) -> Result<TrainConfig> {
        let mut cfg = base.clone();
        for &(h, v) in &self.0 {
            match h {
                Hyperparameter::LearningRate => cfg.lr = v as f32,
                Hyperparameter::MaxGradNorm => cfg.max_grad_norm = v as f32,
                Hyperparameter::BatchSize => cfg.batch_size = v as usize,
                Hyperparameter::Epochs => cfg.epochs = v,
                Hyperparameter::Momentum => match &mut cfg.optimizer {
                    OptimizerKind::Sgd { momentum, .. } => *momentum = v as f32,
                    OptimizerKind::Adam => {
                        return Err(Error::usage(
                            "momentum in the search space applies to sgd, not adam",
                        ));
                    }
                },
            }
        }
        Ok(cfg)
    }
}

/// The trials of one cell share one noise level, calibrated for the cell's costliest corner:
/// the largest batch (largest q) with the most epochs over the smallest batch (most steps).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// Batch sizes [lo, hi].
    pub batch: (f64, f64),
    /// Epochs [lo, hi].
    pub epochs: (f64, f64),
}

impl Cell {
    /// Whether `cfg`'s batch size and epochs fall in this cell.
    pub fn holds(&self, cfg: &TrainConfig) -> bool {
        let b = cfg.batch_size as f64;
        (self.batch.0..=self.batch.1).contains(&b)
            && (self.epochs.0..=self.epochs.1).contains(&cfg.epochs)
    }
}

impl SearchSpace {
    /// Parses `--search` text: comma-separated `name=VALUES`, VALUES being `LO..HI`,
    /// `LO..HI log` or `A|B|C`.
    ///
    /// # Errors
    /// A usage error naming the bad entry ([`SearchSpace::new`]'s rules too).
    pub fn parse(spec: &str) -> Result<Self> {
        let mut dims = Vec::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, values) = entry.split_once('=').ok_or_else(|| {
                Error::usage(format!(
                    "search space entry {entry:?} is not name=VALUES (LO..HI, LO..HI log or A|B|C)"
                ))
            })?;
            let h = Hyperparameter::parse(name)?;
            dims.push(Dimension::new(h, parse_values(h, values)?)?);
        }
        Self::new(dims)
    }

    /// Reads a space from a TOML (`.toml`) or JSON file: a table whose keys are hyperparameter
    /// names and whose values are `--search` text (`"0.05..2 log"`), a list of choices, or a
    /// table `{range = [LO, HI], log = true}` / `{choices = [A, B]}`.
    ///
    /// # Errors
    /// A usage error naming the file when it cannot be read or parsed, or the bad entry.
    pub fn read(path: &Path) -> Result<Self> {
        let text = dpml_data::read_text(path, "a search space", MAX_SPACE_FILE_BYTES)
            .map_err(|e| Error::usage(format!("cannot read search space {e}")))?;
        let bad = |e: String| {
            Error::usage(format!(
                "search space {} does not parse: {e}",
                path.display()
            ))
        };
        let value: Value = if path.extension().is_some_and(|e| e == "toml") {
            let table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
            serde_json::to_value(table).map_err(|e| bad(e.to_string()))?
        } else {
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?
        };
        Self::from_json(&value)
    }

    /// A space from a JSON object (as [`SearchSpace::read`] describes).
    ///
    /// # Errors
    /// A usage error naming the bad entry.
    pub fn from_json(value: &Value) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(Error::usage(
                "a search space is a table of hyperparameter names",
            ));
        };
        let mut dims = Vec::new();
        for (name, v) in map {
            let h = Hyperparameter::parse(name)?;
            let values = match v {
                Value::String(s) => parse_values(h, s)?,
                Value::Number(_) => Values::Choices(vec![number(h, v)?]),
                Value::Array(list) => Values::Choices(
                    list.iter()
                        .take(MAX_CHOICES + 1)
                        .map(|x| number(h, x))
                        .collect::<Result<_>>()?,
                ),
                Value::Object(t) => table_values(h, t)?,
                other => {
                    return Err(Error::usage(format!(
                        "{} in the search space: expected \"LO..HI\", a list or a table, got {other}",
                        h.name()
                    )));
                }
            };
            dims.push(Dimension::new(h, values)?);
        }
        Self::new(dims)
    }

    /// A space of `dims`.
    ///
    /// # Errors
    /// A usage error for no dimension, a hyperparameter given twice, or a space of one point
    /// (nothing to search).
    pub fn new(mut dims: Vec<Dimension>) -> Result<Self> {
        if dims.is_empty() {
            return Err(Error::usage(
                "the search space is empty: give name=VALUES entries, e.g. \
                 \"learning-rate=0.05..2 log, batch-size=128|256\"",
            ));
        }
        dims.sort_by_key(|d| d.hyperparameter);
        if let Some(w) = dims
            .windows(2)
            .find(|w| w[0].hyperparameter == w[1].hyperparameter)
        {
            return Err(Error::usage(format!(
                "{} appears twice in the search space",
                w[0].hyperparameter.name()
            )));
        }
        if dims.iter().all(Dimension::is_fixed) {
            return Err(Error::usage(
                "the search space has one point only: nothing to search (train that recipe \
                 with dpml train, or give a range or several choices)",
            ));
        }
        Ok(Self { dims })
    }

    /// The dimensions, in [`Hyperparameter::ALL`] order.
    pub fn dimensions(&self) -> &[Dimension] {
        &self.dims
    }

    /// Whether the space varies `h`.
    pub fn varies(&self, h: Hyperparameter) -> bool {
        self.dims.iter().any(|d| d.hyperparameter == h)
    }

    /// One point, drawn with `rng` (no data involved).
    pub fn draw(&self, rng: &mut DpRng) -> Point {
        Point(
            self.dims
                .iter()
                .map(|d| (d.hyperparameter, d.draw(rng)))
                .collect(),
        )
    }

    /// The cells of batch size × epochs that trials share noise levels in; batch size and
    /// epochs the space does not vary take `base`'s.
    pub fn cells(&self, base: &TrainConfig) -> Vec<Cell> {
        let of = |h: Hyperparameter, fixed: f64| -> Vec<(f64, f64)> {
            self.dims
                .iter()
                .find(|d| d.hyperparameter == h)
                .map_or_else(|| vec![(fixed, fixed)], Dimension::cells)
        };
        let batches = of(Hyperparameter::BatchSize, base.batch_size as f64);
        let epochs = of(Hyperparameter::Epochs, base.epochs);
        batches
            .iter()
            .flat_map(|&batch| epochs.iter().map(move |&epochs| Cell { batch, epochs }))
            .collect()
    }

    /// The largest batch size any trial may draw (or `base`'s).
    pub fn largest_batch(&self, base: &TrainConfig) -> f64 {
        self.cells(base)
            .iter()
            .map(|c| c.batch.1)
            .fold(0.0, f64::max)
    }
}

/// `LO..HI`, `LO..HI log` or `A|B|C`.
fn parse_values(h: Hyperparameter, text: &str) -> Result<Values> {
    let text = text.trim();
    let num = |s: &str| -> Result<f64> {
        s.trim().parse::<f64>().map_err(|_| {
            Error::usage(format!(
                "{} in the search space: {s:?} is not a number",
                h.name()
            ))
        })
    };
    if let Some((lo, rest)) = text.split_once("..") {
        let rest = rest.trim();
        let (hi, log) = match rest.strip_suffix("log") {
            Some(hi) => (hi, true),
            None => (rest, false),
        };
        return Ok(Values::Range {
            lo: num(lo)?,
            hi: num(hi)?,
            log,
        });
    }
    let parts: Vec<&str> = text.split('|').collect();
    if parts.len() > MAX_CHOICES {
        return Err(Error::usage(format!(
            "{} in the search space lists more than {MAX_CHOICES} values",
            h.name()
        )));
    }
    Ok(Values::Choices(
        parts.into_iter().map(num).collect::<Result<_>>()?,
    ))
}

fn number(h: Hyperparameter, v: &Value) -> Result<f64> {
    v.as_f64().ok_or_else(|| {
        Error::usage(format!(
            "{} in the search space: {v} is not a number",
            h.name()
        ))
    })
}

/// `{range = [LO, HI], log = true}` or `{choices = [A, B]}`.
fn table_values(h: Hyperparameter, t: &Map<String, Value>) -> Result<Values> {
    let bad = || {
        Error::usage(format!(
            "{} in the search space: a table needs range = [LO, HI] (with log = true or false) \
             or choices = [A, B, …]",
            h.name()
        ))
    };
    if let Some(unknown) = t
        .keys()
        .find(|k| !matches!(k.as_str(), "range" | "log" | "choices"))
    {
        return Err(Error::usage(format!(
            "{} in the search space: unknown key {unknown:?} (range, log, choices)",
            h.name()
        )));
    }
    match (t.get("range"), t.get("choices")) {
        (Some(Value::Array(r)), None) if r.len() == 2 => Ok(Values::Range {
            lo: number(h, &r[0])?,
            hi: number(h, &r[1])?,
            log: match t.get("log") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(bad()),
            },
        }),
        (None, Some(Value::Array(list))) if !t.contains_key("log") => Ok(Values::Choices(
            list.iter()
                .take(MAX_CHOICES + 1)
                .map(|x| number(h, x))
                .collect::<Result<_>>()?,
        )),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(spec: &str) -> String {
        match SearchSpace::parse(spec) {
            Err(Error::Usage(m)) => m,
            other => panic!("{spec}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn parses_the_issue_example_and_draws_inside_it() {
        let s = SearchSpace::parse(
            "learning-rate=0.05..2 log, max-grad-norm=0.1..2 log, batch-size=128|256|512, \
             epochs=10..40",
        )
        .unwrap();
        assert_eq!(s.dimensions().len(), 4);
        let mut rng = DpRng::seeded(3);
        let mut lrs = Vec::new();
        for _ in 0..2000 {
            let p = s.draw(&mut rng);
            let lr = p.get(Hyperparameter::LearningRate).unwrap();
            assert!((0.05..=2.0).contains(&lr));
            lrs.push(lr);
            assert!([128.0, 256.0, 512.0].contains(&p.get(Hyperparameter::BatchSize).unwrap()));
            let e = p.get(Hyperparameter::Epochs).unwrap();
            assert!((10.0..=40.0).contains(&e) && e.fract() == 0.0);
            assert_eq!(p.get(Hyperparameter::Momentum), None);
        }
        // Log-uniform: half the draws below the geometric mean √(0.05·2) ≈ 0.316.
        let below = lrs.iter().filter(|&&v| v < 0.1f64.sqrt()).count() as f64;
        assert!((below - 1000.0).abs() < 5.0 * 22.4, "{below}");
        let base = TrainConfig::default();
        let cells = s.cells(&base);
        assert_eq!(cells.len(), 3 * 8);
        // The cells of each batch size cover 10..=40 without gaps or overlaps.
        let mut covered: Vec<f64> = cells
            .iter()
            .filter(|c| c.batch == (256.0, 256.0))
            .flat_map(|c| (c.epochs.0 as u32..=c.epochs.1 as u32).map(f64::from))
            .collect();
        covered.sort_by(f64::total_cmp);
        assert_eq!(covered, (10..=40).map(f64::from).collect::<Vec<_>>());
        let point = s.draw(&mut rng);
        let cfg = point.apply(&base).unwrap();
        assert_eq!(cells.iter().filter(|c| c.holds(&cfg)).count(), 1);
        assert_eq!(point.to_json().as_object().unwrap().len(), 4);
    }

    #[test]
    fn bad_spaces_are_refused_by_name() {
        for (spec, words) in [
            ("learning-rate=2..0.05", "empty range"),
            ("learning-rate=0.1..0.1", "empty range"),
            (
                "learning-rate=-0.1..2",
                "learning-rate in the search space must be > 0",
            ),
            ("learning-rate=-1|0.5", "must be > 0"),
            ("temperature=1..2", "unknown hyperparameter \"temperature\""),
            ("batch-size=256", "one point only"),
            ("batch-size=256|256, learning-rate=0.1", "one point only"),
            ("", "empty"),
            ("learning-rate", "not name=VALUES"),
            ("learning-rate=a..b", "is not a number"),
            ("batch-size=12.5|64", "whole number"),
            ("epochs=1.2..1.8", "no whole number"),
            ("momentum=0..1.5", "in [0, 1)"),
            ("learning-rate=0..1 log", "must be > 0"),
            ("epochs=1..5, epochs=2..3", "twice"),
            (
                "epochs=1..1e20",
                "epochs in the search space must be at most 9007199254740992",
            ),
        ] {
            let m = usage(spec);
            assert!(m.contains(words), "{spec}: {m}");
        }
    }

    #[test]
    fn files_give_the_same_space_as_text() {
        let dir = tempfile::tempdir().unwrap();
        let text = SearchSpace::parse("learning-rate=0.05..2 log, batch-size=128|256").unwrap();
        let toml_path = dir.path().join("space.toml");
        std::fs::write(
            &toml_path,
            "learning-rate = { range = [0.05, 2], log = true }\nbatch-size = [128, 256]\n",
        )
        .unwrap();
        assert_eq!(SearchSpace::read(&toml_path).unwrap(), text);
        let json_path = dir.path().join("space.json");
        std::fs::write(
            &json_path,
            r#"{"learning_rate": "0.05..2 log", "batch-size": {"choices": [128, 256]}}"#,
        )
        .unwrap();
        assert_eq!(SearchSpace::read(&json_path).unwrap(), text);
        std::fs::write(
            &json_path,
            r#"{"learning-rate": {"range": [1], "log": true}}"#,
        )
        .unwrap();
        let m = SearchSpace::read(&json_path).unwrap_err().to_string();
        assert!(m.contains("range = [LO, HI]"), "{m}");
        std::fs::write(&json_path, "[1, 2]").unwrap();
        assert!(SearchSpace::read(&json_path).is_err());
    }

    #[test]
    fn integer_log_ranges_reach_both_ends() {
        let s = SearchSpace::parse("batch-size=64..1024 log").unwrap();
        let mut rng = DpRng::seeded(9);
        let draws: Vec<f64> = (0..3000)
            .map(|_| s.draw(&mut rng).get(Hyperparameter::BatchSize).unwrap())
            .collect();
        assert!(
            draws
                .iter()
                .all(|&b| (64.0..=1024.0).contains(&b) && b.fract() == 0.0)
        );
        let cells = s.cells(&TrainConfig::default());
        assert_eq!(cells.first().unwrap().batch.0, 64.0);
        assert_eq!(cells.last().unwrap().batch.1, 1024.0);
        for w in cells.windows(2) {
            assert_eq!(w[0].batch.1 + 1.0, w[1].batch.0);
        }
        let base = TrainConfig::default();
        for &b in &draws {
            let cfg = TrainConfig {
                batch_size: b as usize,
                ..base.clone()
            };
            assert_eq!(cells.iter().filter(|c| c.holds(&cfg)).count(), 1, "{b}");
        }
    }
}
