//! Argument types and value parsers shared by commands. Parsers reject NaN, infinities and
//! out-of-range values at parse time, so clap's error names the flag and the bad value.

use std::path::PathBuf;

use clap::Args;

/// A finite number > 0 (ε, σ, sensitivities, clipping norms).
pub fn positive(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("must be > 0, got {s}"))
    }
}

/// Any finite number.
pub fn finite(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("not a number: {s}"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("must be finite, got {s}"))
    }
}

/// A probability strictly inside (0, 1) (δ).
pub fn open_unit(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!("must be in (0, 1), got {s}"))
    }
}

/// A probability in [0, 1) (a δ budget, where 0 means pure ε).
pub fn unit_from_zero(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be in [0, 1), got {s}"))
    }
}

/// A sampling rate in (0, 1].
pub fn rate(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("must be in (0, 1], got {s}"))
    }
}

/// An integer ≥ 1.
pub fn at_least_one(s: &str) -> Result<u64, String> {
    let v: u64 = s
        .trim()
        .parse()
        .map_err(|e: std::num::ParseIntError| match e.kind() {
            std::num::IntErrorKind::PosOverflow => format!("must be at most {}, got {s}", u64::MAX),
            _ => format!("not a whole number: {s}"),
        })?;
    if v >= 1 {
        Ok(v)
    } else {
        Err(format!("must be at least 1, got {s}"))
    }
}

/// An integer in 1..=`max`: counts that size a loop or an allocation (iterations, layer
/// widths), so a typo like `4000000000` is refused by name instead of hanging or aborting.
pub fn at_least_one_at_most(max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |s| {
        let v = at_least_one(s)?;
        if v <= max {
            Ok(v)
        } else {
            Err(format!("must be at most {max}, got {s}"))
        }
    }
}

/// The most Lloyd iterations a k-means run takes (the library's own limit).
pub const MAX_ITERATIONS: u64 = dpml_learn::kmeans::MAX_ITERATIONS as u64;

/// The widest hidden layer `--hidden` accepts (the library's own limit).
pub const MAX_HIDDEN_WIDTH: u64 = dpml_learn::dpsgd::MAX_HIDDEN_WIDTH as u64;

/// The most threads `--threads` starts: far more than any machine's cores, and a typo such as
/// 4294967297 would otherwise start threads until the system refuses.
pub const MAX_THREADS: u64 = 1 << 12;

/// The most runs per ε a sweep takes (and repetitions a benchmark times): error bars and
/// medians settle long before, and each run's job is laid out before the first starts.
pub const MAX_REPEATS: u64 = 10_000;

/// One range, `LO,HI` or `LO:HI` alike, with LO < HI, both finite.
pub fn bounds(s: &str) -> Result<(f64, f64), String> {
    let sep = if s.contains(':') { ':' } else { ',' };
    let parts: Vec<&str> = s.split(sep).collect();
    let [lo, hi] = parts.as_slice() else {
        return Err(format!("expected LO,HI or LO:HI, got {s}"));
    };
    let (lo, hi) = (finite(lo)?, finite(hi)?);
    if lo < hi {
        Ok((lo, hi))
    } else {
        Err(format!("LO must be below HI, got {s}"))
    }
}

/// A path the user names as an input (`--model`, `--events`, `--schema`, `--ledger`,
/// `csv:PATH`): it must be a regular file, or not exist yet (then opening it fails, or the
/// ledger is created, as usual). It is noted as an input of the run, which no output may
/// name ([`dpml_core::output_path::note_input`]). A FIFO would block the open forever and `/dev/zero` would
/// read until memory runs out, so special files are refused by name before anything opens
/// them. `metadata` only stats the path: it does not block on a FIFO.
pub fn input_path(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    if dpml_core::output_path::names_a_folder(&path) {
        // `new/` would be made as the file `new`, its key as `new/.key`: refused by name.
        return Err(format!("{s} ends as a folder does: name a file"));
    }
    match std::fs::metadata(&path) {
        Ok(m) if !m.is_file() => Err(format!(
            "{s} is not a regular file (a folder, FIFO or device cannot be read as input)"
        )),
        _ => {
            // No output of the run may then overwrite it.
            dpml_core::output_path::note_input(&path);
            Ok(path)
        }
    }
}

/// `--model NAME` of every command that trains: one of the architectures training knows. The
/// possible values come from the table training itself uses ([`dpml_learn::dpsgd::MODEL_NAMES`]),
/// so `--help` lists every model, and a name is checked by training's own rule
/// ([`dpml_learn::dpsgd::check_model_name`]: any case; BatchNorm refused with the reason).
#[derive(Clone, Copy, Debug)]
pub struct ModelName;

impl clap::builder::TypedValueParser for ModelName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        use clap::error::ErrorKind;
        let name = value.to_string_lossy();
        dpml_learn::dpsgd::check_model_name(&name).map_err(|e| {
            let flag = arg.map_or_else(|| "--model".to_string(), ToString::to_string);
            cmd.clone().error(
                ErrorKind::InvalidValue,
                format!("invalid value '{name}' for '{flag}': {e}"),
            )
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let names = dpml_learn::dpsgd::MODEL_NAMES.iter();
        Some(Box::new(names.map(clap::builder::PossibleValue::new)))
    }
}

/// `--dataset`: a data set name, or the user's files (`csv:PATH`, `npy:X,Y`, `npz:PATH`,
/// `idx:IMAGES,LABELS`, `images:DIR`), each path checked as [`input_path`].
pub fn dataset(s: &str) -> Result<dpml_data::Source, String> {
    let source: dpml_data::Source = s.parse().map_err(|e: dpml_data::DataError| e.to_string())?;
    // An image folder is a folder; the files in it are checked as they are read.
    if !matches!(source, dpml_data::Source::Images(_)) {
        for path in source.paths() {
            input_path(&path.to_string_lossy())?;
        }
    }
    Ok(source)
}

/// `--seed N`: a reproducible run, reported as `"seeded": true`.
#[derive(Args, Debug, Clone, Copy)]
pub struct SeedArg {
    /// Seed the random generator for reproducibility (outputs then say "seeded": true; do not
    /// use seeded runs for real releases).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl SeedArg {
    /// The generator for this run: seeded, or from the operating system.
    pub fn rng(&self) -> crate::error::CliResult<dpml_mechanisms::DpRng> {
        dpml_mechanisms::DpRng::new(self.seed).map_err(crate::error::CliError::internal)
    }
}

/// The forms every `--dataset` flag takes, for its help, as a literal for `concat!` (one
/// text, so that no command leaves a form out).
macro_rules! dataset_help {
    () => {
        "mnist, fashion-mnist, digits, iris, breast-cancer, wine, or your files: \
         csv:PATH (gzip too), parquet:PATH, npy:FEATURES.npy,LABELS.npy, npz:PATH (arrays x \
         and y), idx:IMAGES,LABELS, images:DIR (one subfolder per class)."
    };
}
pub(crate) use dataset_help;

/// `--dataset` and how to find it.
#[derive(Args, Debug, Clone)]
pub struct DataArgs {
    #[arg(long, value_parser = dataset, help = concat!("Data set: ", dataset_help!()))]
    pub dataset: dpml_data::Source,
    /// Label column of a csv: data set (default: the last column).
    #[arg(long)]
    pub label_column: Option<String>,
}

/// Where the IDX data sets live: `--data-dir` or `DPML_DATA_DIR`.
#[derive(Args, Debug, Clone)]
pub struct DataDir {
    /// Folder holding mnist/ and fashion-mnist/ (default: $DPML_DATA_DIR).
    #[arg(long, global = true, env = "DPML_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_beyond_u64_is_called_too_large_not_fractional() {
        let err = at_least_one("18446744073709551616").unwrap_err();
        assert!(
            err.starts_with("must be at most 18446744073709551615"),
            "{err}"
        );
        assert_eq!(at_least_one("2.5").unwrap_err(), "not a whole number: 2.5");
        assert_eq!(at_least_one("0").unwrap_err(), "must be at least 1, got 0");
    }

    #[test]
    fn an_input_file_named_as_a_folder_is_refused() {
        for s in ["nodir/", "nodir/."] {
            assert!(input_path(s).unwrap_err().contains("name a file"), "{s}");
        }
        assert!(input_path("nodir/x.db").is_ok());
    }
}
