//! Queries over tables larger than memory: a memory limit, parsed from what a person types
//! (`4G`), and the session settings that keep a query under it.
//!
//! Under a limit every query runs in DataFusion's [`FairSpillPool`] with a disk manager that
//! spills to a temporary folder: sorts, aggregations and sort-merge joins spill; hash joins do
//! not (their build side must fit), so joins are planned as sort-merge joins. The pool is the
//! fair one rather than the greedy one because a query runs several spilling operators at once
//! (one sort or aggregation per partition and per stage): the greedy pool hands the whole limit
//! to whichever operator asks first and then fails the others, where the fair pool gives each
//! spilling operator its share and makes it spill. The per-unit bounding of dpml's own
//! aggregates reserves what it holds in the same pool (see `contribute`), and reads each
//! partition's rows sorted by unit, so that it holds one unit at a time.
//!
//! [`FairSpillPool`]: datafusion::execution::memory_pool::FairSpillPool

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::SessionConfig;

use crate::error::{Result, SqlError};

/// The smallest limit accepted: below it not even one batch of rows fits.
pub const MIN_LIMIT: usize = 64 * 1024;

/// How a query may use memory and disk.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// The most bytes the query's operators may hold (None: no limit, nothing spills).
    pub memory: Option<usize>,
    /// Where spill files go (None: the system's temporary folder).
    pub spill_dir: Option<PathBuf>,
}

impl Limits {
    /// No memory limit.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// A memory limit of `bytes`.
    ///
    /// # Errors
    /// [`SqlError::Input`] for a limit below [`MIN_LIMIT`].
    pub fn memory(bytes: usize) -> Result<Self> {
        if bytes < MIN_LIMIT {
            return Err(SqlError::input(format!(
                "memory limit {} is below the smallest accepted, {}",
                format_bytes(bytes as u64),
                format_bytes(MIN_LIMIT as u64)
            )));
        }
        Ok(Self {
            memory: Some(bytes),
            spill_dir: None,
        })
    }

    /// The session settings for these limits, on top of `config`.
    pub(crate) fn configure(&self, config: SessionConfig) -> SessionConfig {
        let Some(limit) = self.memory else {
            return config;
        };
        let partitions = config.target_partitions().max(1);
        // A sort reserves this much up front to merge what it spilled; DataFusion's default
        // (10 MiB) alone exceeds a small limit. A share of one partition's part of the pool.
        let merge_reserve = (limit / (8 * partitions)).clamp(16 * 1024, 10 * 1024 * 1024);
        // A sort must hold at least one batch in its share of the pool (the pool divided
        // among a dozen spilling operators on a small machine): smaller batches under small
        // limits, DataFusion's 8192 rows from about 256 MiB per partition up.
        let batch_rows = (limit / (partitions * 32 * 1024)).clamp(256, 8192);
        config
            .with_batch_size(batch_rows)
            // Hash joins hold their whole build side and never spill: sort-merge joins do.
            .set_bool("datafusion.optimizer.prefer_hash_join", false)
            .set_usize(
                "datafusion.execution.sort_spill_reservation_bytes",
                merge_reserve,
            )
            .set_usize(
                "datafusion.execution.sort_in_place_threshold_bytes",
                merge_reserve,
            )
    }

    /// The runtime (memory pool and spill folder) for these limits.
    pub(crate) fn runtime(&self) -> Result<Arc<RuntimeEnv>> {
        let mut builder = RuntimeEnvBuilder::new();
        if let Some(limit) = self.memory {
            let mode = match &self.spill_dir {
                Some(dir) => DiskManagerMode::Directories(vec![dir.clone()]),
                None => DiskManagerMode::OsTmpDirectory,
            };
            builder = builder
                .with_memory_pool(Arc::new(FairSpillPool::new(limit)))
                .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(mode));
        }
        builder
            .build_arc()
            .map_err(|e| SqlError::input(format!("cannot set up the memory limit: {e}")))
    }
}

/// Parses a size as a person types it: bytes (`1048576`), or a number with a binary suffix
/// `K`, `M`, `G` or `T` (`512M`, `4G`, `1.5G`; `KiB`/`KB`-style spellings too, case ignored).
///
/// # Errors
/// [`SqlError::Input`] naming the value when it is not such a size or is 0.
pub fn parse_size(text: &str) -> Result<usize> {
    let bad = || {
        SqlError::input(format!(
            "memory limit {text:?} is not a size: give bytes or a number with K, M, G or T \
             (for example 4G or 512M)"
        ))
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_uppercase();
    let power = match unit.trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        _ => return Err(bad()),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * 1024f64.powi(power);
    if bytes < 1.0 {
        return Err(SqlError::input(format!(
            "memory limit {text:?} is less than one byte: give a positive size (for example 4G)"
        )));
    }
    if bytes >= usize::MAX as f64 {
        return Err(SqlError::input(format!(
            "memory limit {text:?} is more bytes than this machine can address: give a size \
             such as 4G"
        )));
    }
    Ok(bytes as usize)
}

/// `4.0 MiB`: a size for a person.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4G").unwrap(), 4 << 30);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        for bad in [
            "",
            "G",
            "4X",
            "-1G",
            "0",
            "4 G B x",
            "nan",
            "1e3G",
            "99999999999T",
        ] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        let e = parse_size("99999999999T").unwrap_err().to_string();
        assert!(
            e.contains("more bytes than this machine can address"),
            "{e}"
        );
        for zero in ["0", "0.4", "0G"] {
            let e = parse_size(zero).unwrap_err().to_string();
            assert!(e.contains("less than one byte"), "{zero}: {e}");
        }
    }

    #[test]
    fn sizes_print_for_a_person() {
        assert_eq!(format_bytes(4 << 20), "4.0 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(12), "12 B");
    }

    #[test]
    fn a_limit_below_one_batch_is_refused() {
        assert!(Limits::memory(1024).is_err());
        assert_eq!(Limits::memory(1 << 20).unwrap().memory, Some(1 << 20));
    }
}
