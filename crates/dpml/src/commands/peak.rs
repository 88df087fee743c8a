//! The machine's peak single-precision rate for `dpml bench dpsgd`: cores × FMA lanes × FMA
//! units × 2 FLOPs × clock, detected from the CPU, or given by the user.
//!
//! Detection is an estimate: the lane width comes from the instruction sets the CPU reports
//! (AVX-512: 16 f32 lanes, AVX2 + FMA: 8, otherwise SSE: 4 lanes and no fused multiply-add),
//! the FMA unit count is assumed to be 2 (every AVX2-era x86 core from Haswell and Zen 2 on;
//! not detectable), except on AMD's family 19h (Zen 3 and Zen 4), whose two FMA pipes are
//! 256 bits wide: Zen 4 runs an AVX-512 instruction on both at once, one 16-lane FMA a cycle.
//! The clock is the nominal one the kernel reports (`cpuinfo_max_freq`, else the highest
//! `cpu MHz` of /proc/cpuinfo), which turbo can exceed. Pass `--peak-gflops` when the real
//! figure is known.

use serde_json::{Value, json};

/// FMA pipes per core assumed by detection.
const FMA_UNITS: u64 = 2;
/// Widest FMA pipe, in f32 lanes, of AMD's family 19h (Zen 3, Zen 4: 256 bits).
const FAMILY_19H_PIPE_LANES: u64 = 8;

/// The peak and how it was obtained, as JSON fields `peak_gflops` and `peak_source`; `None`
/// for the peak when it cannot be detected (no clock reported).
pub fn peak(given: Option<f64>, cores: usize) -> (Option<f64>, Value) {
    if let Some(p) = given {
        return (Some(p), json!("--peak-gflops"));
    }
    let (lanes, fma) = simd_lanes();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let Some(ghz) = clock_ghz(&cpuinfo) else {
        return (None, json!("not detected: no CPU clock reported"));
    };
    let units = fma_units(lanes, &cpuinfo);
    let peak = peak_gflops(cores, lanes, units, ghz);
    let how = format!(
        "detected: {cores} cores x {lanes} f32 lanes x {units} {} units x 2 flops x {ghz:.3} GHz (nominal clock)",
        if fma { "FMA" } else { "mul/add" }
    );
    (Some(peak), json!(how))
}

/// cores × lanes × FMA units × 2 FLOPs × GHz. Without FMA a multiply and an add each count
/// one FLOP per lane, on the same two pipes, so the product is the same.
fn peak_gflops(cores: usize, lanes: u64, units: f64, ghz: f64) -> f64 {
    cores as f64 * lanes as f64 * units * 2.0 * ghz
}

/// FMA units of the CPU that /proc/cpuinfo's text describes, counted at `lanes` wide:
/// [`FMA_UNITS`], or fewer where the pipes are narrower than `lanes` (AMD family 19h with
/// AVX-512, i.e. Zen 4: its two 8-lane pipes make one 16-lane unit).
fn fma_units(lanes: u64, cpuinfo: &str) -> f64 {
    let field = |name| cpuinfo_values(cpuinfo, name).next();
    let family_19h = field("vendor_id") == Some("AuthenticAMD")
        && field("cpu family").and_then(|f| f.parse::<u32>().ok()) == Some(0x19);
    if family_19h && lanes > FAMILY_19H_PIPE_LANES {
        (FMA_UNITS * FAMILY_19H_PIPE_LANES) as f64 / lanes as f64
    } else {
        FMA_UNITS as f64
    }
}

/// f32 lanes of the widest vector unit, and whether it has fused multiply-add.
fn simd_lanes() -> (u64, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return (16, true);
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return (8, true);
        }
        (4, false)
    }
    #[cfg(target_arch = "aarch64")]
    {
        // NEON: 4 f32 lanes with FMA.
        (4, true)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        (1, false)
    }
}

/// The nominal clock in GHz: the kernel's maximum frequency, else the fastest `cpu MHz` of
/// `cpuinfo` (the text of /proc/cpuinfo).
fn clock_ghz(cpuinfo: &str) -> Option<f64> {
    let sys = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
    if let Some(khz) = sys.ok().and_then(|s| s.trim().parse::<f64>().ok()) {
        return Some(khz / 1e6).filter(|g| *g > 0.0);
    }
    max_cpu_mhz(cpuinfo).map(|mhz| mhz / 1e3)
}

/// The values of the field `name` in a /proc/cpuinfo text (one per core for most fields),
/// trimmed.
fn cpuinfo_values<'a>(info: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    info.lines().filter_map(move |l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == name).then(|| value.trim())
    })
}

/// The highest `cpu MHz` line of a /proc/cpuinfo text.
fn max_cpu_mhz(info: &str) -> Option<f64> {
    cpuinfo_values(info, "cpu MHz")
        .filter_map(|v| v.parse::<f64>().ok())
        .filter(|m| m.is_finite() && *m > 0.0)
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_clock_is_the_fastest_core() {
        let info = "processor\t: 0\ncpu MHz\t\t: 2445.404\n\nprocessor\t: 1\ncpu MHz\t\t: 3100.5\n";
        assert_eq!(max_cpu_mhz(info), Some(3100.5));
        assert_eq!(max_cpu_mhz("model name : x\n"), None);
    }

    #[test]
    fn given_peak_wins_and_the_formula_counts_fma_pipes() {
        assert_eq!(peak(Some(12.5), 2).0, Some(12.5));
        // This project's machine: 2 Zen 3 cores, AVX2 + FMA, 2.445 GHz: 156.5 GFLOP/s.
        assert!((peak_gflops(2, 8, 2.0, 2.445) - 156.48).abs() < 1e-9);
    }

    #[test]
    fn zen4_counts_its_avx512_as_one_unit_of_16_lanes() {
        let zen4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n";
        assert_eq!(fma_units(16, zen4), 1.0);
        // The same family without AVX-512 (Zen 3) keeps two 8-lane units.
        assert_eq!(fma_units(8, zen4), 2.0);
        let zen5 = zen4.replace(": 25", ": 26");
        assert_eq!(fma_units(16, &zen5), 2.0);
        let intel = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n";
        assert_eq!(fma_units(16, intel), 2.0);
        assert_eq!(fma_units(16, ""), 2.0);
        // 2 Zen 4 cores at 2.596 GHz: 166.1 GFLOP/s, half of what 16 lanes x 2 units claimed.
        assert!((peak_gflops(2, 16, fma_units(16, zen4), 2.596) - 166.144).abs() < 1e-9);
    }
}
