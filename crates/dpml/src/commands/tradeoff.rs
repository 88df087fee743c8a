//! `dpml tradeoff`: f-DP trade-off curves of a DP-SGD run — type I error α on x, the smallest
//! achievable type II error β(α) on y — from the CLT (G_μ), from the PLD accountant, and the
//! (ε, δ) family implied by RDP, written as CSV, PNG and SVG.

use std::path::PathBuf;

use clap::Args;
use dpml_core::tradeoff::{self, Tradeoff};
use serde_json::json;

use super::schedule::ScheduleArgs;
use crate::args;
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::plot::{self, Chart, Series, Style};
use crate::report;

/// Flags of `dpml tradeoff`.
#[derive(Args, Debug)]
pub struct TradeoffArgs {
    /// Noise multiplier σ.
    #[arg(long, value_parser = args::positive)]
    pub noise_multiplier: f64,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// δ at which the single (ε, δ) guarantee from RDP is drawn.
    #[arg(long, value_parser = args::open_unit, default_value = "1e-5")]
    pub delta: f64,
    /// Output folder for tradeoff.csv, tradeoff.png and tradeoff.svg.
    #[arg(long)]
    pub out: PathBuf,
}

/// Run `dpml tradeoff`.
pub fn run(a: &TradeoffArgs, out: Output) -> CliResult<()> {
    let (q, steps) = a.schedule.resolve()?;
    let Tradeoff {
        mu,
        epsilon_pld: eps_pld,
        epsilon_rdp: eps_rdp,
        rows,
    } = tradeoff::tradeoff(a.noise_multiplier, q, steps, a.delta)?;
    dpml_core::output_path::check_folder(
        "--out",
        &a.out,
        &["tradeoff.csv", "tradeoff.png", "tradeoff.svg"],
    )?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", a.out.display())))?;
    let csv_path = a.out.join("tradeoff.csv");
    tradeoff::write_csv(&csv_path, &rows)?;

    let column = |i: usize| rows.iter().map(|r| (r[0], r[i])).collect::<Vec<_>>();
    let series = vec![
        Series::new(
            format!("GDP (CLT), μ = {}", report::short(mu)),
            column(1),
            Style::Line,
        ),
        Series::new("PLD (upper bound)", column(2), Style::Line),
        Series::new("RDP: the (ε, δ(ε)) family", column(3), Style::Line),
        Series::new(
            format!(
                "RDP: one (ε = {}, δ = {})-DP guarantee",
                report::short(eps_rdp),
                report::short(a.delta)
            ),
            column(4),
            Style::Dashed,
        ),
        Series::new(
            "perfect privacy: β = 1 − α",
            column(0).iter().map(|&(x, _)| (x, 1.0 - x)).collect(),
            Style::Dashed,
        ),
    ];
    let chart = |log_x: bool, title: &str| Chart {
        title: title.to_string(),
        x_label: if log_x {
            "type I error α (log scale)".into()
        } else {
            "type I error α".into()
        },
        y_label: "type II error β".into(),
        log_x,
        log_y: false,
        series: series.clone(),
    };
    let title = format!(
        "f-DP trade-off of DP-SGD: σ = {}, q = {}, T = {steps}",
        report::short(a.noise_multiplier),
        report::short(q)
    );
    let (png, svg) = plot::write(
        &[
            chart(false, &title),
            chart(true, &format!("{title} (log α)")),
        ],
        &a.out,
        "tradeoff",
    )?;
    // The same names as `dpml account`: ε by accountant, the schedule as given.
    let mut inputs = a.schedule.inputs(q, steps);
    inputs["noise_multiplier"] = json!(a.noise_multiplier);
    out.emit(&json!({
        "csv": csv_path,
        "png": png,
        "svg": svg,
        "mu": mu,
        "epsilon": {"pld": eps_pld, "rdp": eps_rdp},
        "delta": a.delta,
        "points": rows.len(),
        "inputs": inputs,
    }));
    Ok(())
}
