//! The machine's peak single-precision rate for `dpml bench dpsgd`: cores × FMA lanes × FMA
//! units × 2 FLOPs × clock, detected from the CPU, or given by the user.
//!
//! Detection is an estimate: the lane width comes from the instruction sets the CPU reports
//! (AVX-512: 16 f32 lanes, AVX2 + FMA: 8, otherwise SSE: 4 lanes and no fused multiply-add),
//! the FMA unit count is assumed to be 2 (every AVX2-era x86 core from Haswell and Zen 2 on;
//! not detectable), and the clock is the nominal one the kernel reports (`cpuinfo_max_freq`,
//! else the highest `cpu MHz` of /proc/cpuinfo), which turbo can exceed. Pass
//! `--peak-gflops` when the real figure is known.

use serde_json::{Value, json};

/// FMA pipes per core assumed by detection.
const FMA_UNITS: u64 = 2;

/// The peak and how it was obtained, as JSON fields `peak_gflops` and `peak_source`; `None`
/// for the peak when it cannot be detected (no clock reported).
pub fn peak(given: Option<f64>, cores: usize) -> (Option<f64>, Value) {
    if let Some(p) = given {
        return (Some(p), json!("--peak-gflops"));
    }
    let (lanes, fma) = simd_lanes();
    let Some(ghz) = clock_ghz() else {
        return (None, json!("not detected: no CPU clock reported"));
    };
    let peak = peak_gflops(cores, lanes, ghz);
    let how = format!(
        "detected: {cores} cores x {lanes} f32 lanes x {FMA_UNITS} {} units x 2 flops x {ghz:.3} GHz (nominal clock)",
        if fma { "FMA" } else { "mul/add" }
    );
    (Some(peak), json!(how))
}

/// cores × lanes × [`FMA_UNITS`] × 2 FLOPs × GHz. Without FMA a multiply and an add each
/// count one FLOP per lane, on the same two pipes, so the product is the same.
fn peak_gflops(cores: usize, lanes: u64, ghz: f64) -> f64 {
    cores as f64 * (lanes * FMA_UNITS * 2) as f64 * ghz
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

/// The nominal clock in GHz: the kernel's maximum frequency, else the fastest `cpu MHz`.
fn clock_ghz() -> Option<f64> {
    let sys = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
    if let Some(khz) = sys.ok().and_then(|s| s.trim().parse::<f64>().ok()) {
        return Some(khz / 1e6).filter(|g| *g > 0.0);
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    max_cpu_mhz(&info).map(|mhz| mhz / 1e3)
}

/// The highest `cpu MHz` line of a /proc/cpuinfo text.
fn max_cpu_mhz(info: &str) -> Option<f64> {
    info.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
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
        assert!((peak_gflops(2, 8, 2.445) - 156.48).abs() < 1e-9);
    }
}
