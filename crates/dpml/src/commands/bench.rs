//! `dpml bench …`: benchmarks that print what they measure in one run. Not tests: the numbers
//! depend on the machine, and only the run's own ratios and medians are meaningful.

use std::time::Instant;

use clap::{Args, Subcommand};
use dpml_accounting::calibrate::noise_multiplier;
use dpml_accounting::gdp::GdpAccountant;
use dpml_accounting::pld::PldAccountant;
use dpml_accounting::rdp::{Conversion, RdpAccountant};
use dpml_accounting::{Accountant, PrivacyEvent};
use serde_json::{Value, json};

use crate::args;
use crate::error::CliResult;
use crate::output::{Output, diag};
use crate::progress::Progress;
use dpml_learn::dpsgd::BenchEvent;
use dpml_learn::dpsgd::bench::{REPEATS, ROUNDS};

/// Benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Time of each accountant and of calibration for DP-SGD at two horizons.
    Accounting(AccountingBenchArgs),
    /// Private against non-private DP-SGD throughput of one model, measured in the same run on
    /// the same synthetic data (and the exact-noise variant).
    Dpsgd(DpsgdBenchArgs),
    /// DP SQL against the same SQL without DP on TPC-H generated into a folder: time, rows
    /// per second, peak memory and the median relative error of each released column.
    Sql(crate::commands::bench_sql::SqlBenchArgs),
}

/// Flags of `dpml bench dpsgd`.
#[derive(Args, Debug)]
pub struct DpsgdBenchArgs {
    /// Architecture to time.
    #[arg(long, value_name = "NAME", value_parser = args::ModelName, default_value = "cnn")]
    pub model: String,
    /// Time the network in this JSON architecture file instead (on uniform synthetic
    /// records of its input_shape).
    #[arg(long, value_name = "FILE", value_parser = args::input_path, conflicts_with = "model")]
    pub arch: Option<std::path::PathBuf>,
    /// Hidden sizes for mlp.
    #[arg(long, value_delimiter = ',', value_parser = args::at_least_one_at_most(args::MAX_HIDDEN_WIDTH), default_value = "512,256")]
    pub hidden: Vec<u64>,
    /// Expected batch size.
    #[arg(long, value_parser = args::at_least_one, default_value = "256")]
    pub batch_size: u64,
    /// Steps per mode and round.
    #[arg(long, value_parser = args::at_least_one, default_value = "30")]
    pub steps: u64,
    /// The machine's peak GFLOP/s for `peak_gflops` and the `peak_fraction` of each mode
    /// (default: detected as cores × FMA lanes × FMA units (2, or 1 of 16 lanes on AMD's Zen 4)
    /// × 2 × nominal clock).
    #[arg(long, value_name = "GFLOPS", value_parser = args::positive)]
    pub peak_gflops: Option<f64>,
    #[command(flatten)]
    pub seed: crate::args::SeedArg,
}

/// Flags of `dpml bench accounting`.
#[derive(Args, Debug)]
pub struct AccountingBenchArgs {
    /// Noise multiplier σ.
    #[arg(long, value_parser = args::positive, default_value = "1.1")]
    pub noise_multiplier: f64,
    /// Sampling rate q.
    #[arg(long, value_parser = args::rate, default_value = "0.004266666666666667")]
    pub sampling_rate: f64,
    /// δ.
    #[arg(long, value_parser = args::open_unit, default_value = "1e-5")]
    pub delta: f64,
    /// Step counts to time.
    #[arg(long, value_delimiter = ',', value_parser = args::at_least_one, default_value = "10000,100000")]
    pub steps: Vec<u64>,
    /// Repetitions per measurement (the median is reported), at most 10000.
    #[arg(long, value_parser = args::at_least_one_at_most(args::MAX_REPEATS), default_value = "5")]
    pub repeats: u64,
}

/// Run a benchmark.
pub fn run(cmd: &BenchCommand, out: Output) -> CliResult<()> {
    match cmd {
        BenchCommand::Accounting(a) => accounting(a, out),
        BenchCommand::Dpsgd(a) => dpsgd(a, out),
        BenchCommand::Sql(a) => crate::commands::bench_sql::run(a, out),
    }
}

/// Median wall time in milliseconds of `repeats` runs of `f`, and its last result.
fn time_ms<T>(repeats: u64, mut f: impl FnMut() -> CliResult<T>) -> CliResult<(f64, T)> {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..repeats {
        let start = Instant::now();
        last = Some(f()?);
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let result = last.expect("repeats ≥ 1 is enforced by the argument parser");
    Ok((times[times.len() / 2], result))
}

fn accounting(a: &AccountingBenchArgs, out: Output) -> CliResult<()> {
    let (sigma, q, delta, reps) = (a.noise_multiplier, a.sampling_rate, a.delta, a.repeats);
    let rdp = RdpAccountant::new(Conversion::Current);
    let pld = PldAccountant::pessimistic();
    let bar = out.progress(a.steps.len() as u64, "bench accounting", "setting");
    let mut rows = Vec::new();
    for &steps in &a.steps {
        let event = PrivacyEvent::dp_sgd(sigma, q, steps);
        let (rdp_ms, rdp_eps) = time_ms(reps, || Ok(rdp.epsilon(&event, delta)?))?;
        let (gdp_ms, gdp_eps) = time_ms(reps, || Ok(GdpAccountant.epsilon(&event, delta)?))?;
        let (pld_ms, composed) = time_ms(reps, || Ok(pld.pld(&event)?))?;
        let pld_eps = composed.epsilon(delta)?;
        let target = rdp_eps;
        let (cal_rdp_ms, cal_rdp) = time_ms(reps, || {
            Ok(noise_multiplier(&rdp, target, delta, q, steps)?)
        })?;
        let (cal_pld_ms, cal_pld) =
            time_ms(1, || Ok(noise_multiplier(&pld, target, delta, q, steps)?))?;
        rows.push(json!({
            "steps": steps,
            "rdp": {"epsilon": rdp_eps, "ms": rdp_ms, "orders": rdp.orders.len()},
            "pld": {"epsilon": pld_eps, "ms": pld_ms, "grid_points": composed.grid_points(),
                    "interval": composed.value_discretization_interval()},
            "gdp": {"epsilon": gdp_eps, "ms": gdp_ms},
            "calibration_rdp": {"target_epsilon": target, "noise_multiplier": cal_rdp.noise_multiplier, "ms": cal_rdp_ms},
            "calibration_pld": {"target_epsilon": target, "noise_multiplier": cal_pld.noise_multiplier, "ms": cal_pld_ms},
        }));
        bar.inc(1);
    }
    bar.finish_and_clear();
    out.emit(&json!({
        "benchmark": "accounting",
        "noise_multiplier": sigma, "sampling_rate": q, "delta": delta, "repeats": reps,
        "note": "wall-clock medians on this machine; RDP memory is one value per order whatever T; PLD memory is grid_points f64 values",
        "results": Value::Array(rows),
    }));
    Ok(())
}

fn dpsgd(a: &DpsgdBenchArgs, out: Output) -> CliResult<()> {
    let hidden: Vec<usize> = a.hidden.iter().map(|&h| h as usize).collect();
    let mut rng = a.seed.rng()?;
    diag!(
        "bench dpsgd: {} at batch {} for {REPEATS} rounds of {} steps per mode ...",
        a.model,
        a.batch_size,
        a.steps
    );
    let (b, steps) = (a.batch_size as usize, a.steps as usize);
    // The bar counts timed steps; each round's figures go on a line of their own (above the
    // bar on a terminal), printed between slices of steps, never inside one.
    let bar = Progress::new(
        (ROUNDS as u64).saturating_mul(a.steps),
        "bench dpsgd",
        "step",
        false,
    );
    let mut on_event = |e: &BenchEvent| match e {
        BenchEvent::Steps { done, .. } => bar.set_position(*done as u64),
        BenchEvent::Round(r) => {
            let head = format!(
                "round {}/{} ({}: {:.0} samples/s)",
                r.done, r.total, r.mode, r.samples_per_sec
            );
            bar.line(&head, Some((r.done as f64, "round")), "");
        }
    };
    let r = match &a.arch {
        Some(path) => {
            let spec = crate::commands::arch::load_arch(path)?;
            dpml_learn::dpsgd::bench_spec(spec, b, steps, &mut rng, &mut on_event)?
        }
        None => dpml_learn::dpsgd::bench(&a.model, &hidden, b, steps, &mut rng, &mut on_event)?,
    };
    bar.finish_and_clear();
    let mut v = serde_json::to_value(&r).map_err(crate::error::CliError::internal)?;
    let threads = rayon_threads();
    v["threads"] = json!(threads);
    let (peak, source) = crate::commands::peak::peak(a.peak_gflops, threads);
    v["peak_gflops"] = json!(peak);
    v["peak_source"] = source;
    if let Some(p) = peak {
        let g = &r.achieved_gflops;
        v["peak_fraction"] = json!({
            "private": g.private / p,
            "nonprivate": g.nonprivate / p,
            "exact_noise": g.exact_noise / p,
        });
    }
    out.emit(&v);
    Ok(())
}

/// Worker threads the engine uses (rayon's default: one per core unless RAYON_NUM_THREADS).
fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
