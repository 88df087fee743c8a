//! `dpml tradeoff`: f-DP trade-off curves of a DP-SGD run — type I error α on x, the smallest
//! achievable type II error β(α) on y — from the CLT (G_μ), from the PLD accountant, and the
//! (ε, δ) family implied by RDP, written as CSV, PNG and SVG.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use dpml_accounting::fdp;
use dpml_accounting::gdp::GdpAccountant;
use dpml_accounting::pld::PldAccountant;
use dpml_accounting::rdp::{Conversion, RdpAccountant};
use dpml_accounting::{Accountant, PrivacyEvent};
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

/// Points on the α axis.
const GRID: usize = 400;
/// Points on the ε axis when turning δ(ε) curves into trade-off curves.
const EPS_GRID: usize = 300;

/// Run `dpml tradeoff`.
pub fn run(a: &TradeoffArgs, out: Output) -> CliResult<()> {
    let (q, steps) = a.schedule.resolve()?;
    let event = PrivacyEvent::dp_sgd(a.noise_multiplier, q, steps);
    let mu = GdpAccountant.mu(&event)?;
    let rdp = RdpAccountant::new(Conversion::Current);
    let (eps_rdp, _) = rdp.epsilon_and_order(&event, a.delta)?;
    let pld = PldAccountant::pessimistic();

    // The ε range that matters: up to where the PLD δ(ε) is negligible.
    let eps_max = pld.epsilon(&event, 1e-10)?.max(eps_rdp) * 1.5 + 0.1;
    let eps_grid: Vec<f64> = (0..EPS_GRID)
        .map(|i| eps_max * i as f64 / (EPS_GRID - 1) as f64)
        .collect();
    let pld_curve: Vec<(f64, f64)> = eps_grid
        .iter()
        .copied()
        .zip(pld.delta_curve(&event, &eps_grid)?)
        .collect();
    let rdp_curve = eps_grid
        .iter()
        .map(|&e| Ok((e, rdp.delta(&event, e)?)))
        .collect::<CliResult<Vec<(f64, f64)>>>()?;

    let alphas = fdp::alpha_grid(GRID);
    let rows = alphas
        .iter()
        .map(|&alpha| {
            Ok([
                alpha,
                fdp::gaussian_tradeoff(mu, alpha)?,
                fdp::tradeoff_from_delta_curve(&pld_curve, alpha)?,
                fdp::tradeoff_from_delta_curve(&rdp_curve, alpha)?,
                fdp::eps_delta_tradeoff(eps_rdp, a.delta, alpha)?,
            ])
        })
        .collect::<CliResult<Vec<[f64; 5]>>>()?;

    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", a.out.display())))?;
    let csv_path = a.out.join("tradeoff.csv");
    write_csv(&csv_path, &rows)?;

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
        "epsilon": {"rdp": eps_rdp},
        "delta": a.delta,
        "points": rows.len(),
        "inputs": inputs,
    }));
    Ok(())
}

fn write_csv(path: &std::path::Path, rows: &[[f64; 5]]) -> CliResult<()> {
    let err = |e: std::io::Error| CliError::usage(format!("writing {}: {e}", path.display()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    writeln!(
        f,
        "alpha,beta_gdp,beta_pld,beta_rdp_family,beta_rdp_eps_delta"
    )
    .map_err(err)?;
    for r in rows {
        writeln!(f, "{},{},{},{},{}", r[0], r[1], r[2], r[3], r[4]).map_err(err)?;
    }
    f.flush().map_err(err)
}
