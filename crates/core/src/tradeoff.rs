//! f-DP trade-off curves of a DP-SGD run: type I error α against the smallest achievable type
//! II error β(α), from the CLT (G_μ), from the PLD accountant, and the (ε, δ) family implied
//! by RDP.

use std::io::Write;

use dpml_accounting::fdp;
use dpml_accounting::gdp::GdpAccountant;
use dpml_accounting::pld::PldAccountant;
use dpml_accounting::rdp::{Conversion, RdpAccountant};
use dpml_accounting::{Accountant, PrivacyEvent};

use crate::error::{Error, Result};

/// Points on the α axis.
const GRID: usize = 400;
/// Points on the ε axis when turning δ(ε) curves into trade-off curves.
const EPS_GRID: usize = 300;

/// The trade-off curves of one run.
#[derive(Debug, Clone)]
pub struct Tradeoff {
    /// μ of the CLT's Gaussian trade-off G_μ.
    pub mu: f64,
    /// The PLD accountant's ε at the given δ (the tight one).
    pub epsilon_pld: f64,
    /// RDP's ε at the given δ.
    pub epsilon_rdp: f64,
    /// One row per α: α, β of GDP, of PLD, of the RDP (ε, δ(ε)) family, and of RDP's one
    /// (ε, δ) guarantee.
    pub rows: Vec<[f64; 5]>,
}

/// The trade-off curves of DP-SGD with `noise_multiplier` at `sampling_rate` over `steps`,
/// RDP's single guarantee drawn at `delta`.
///
/// # Errors
/// The accountants' refusals.
pub fn tradeoff(
    noise_multiplier: f64,
    sampling_rate: f64,
    steps: u64,
    delta: f64,
) -> Result<Tradeoff> {
    let event = PrivacyEvent::dp_sgd(noise_multiplier, sampling_rate, steps);
    let mu = GdpAccountant.mu(&event)?;
    let rdp = RdpAccountant::new(Conversion::Current);
    let (eps_rdp, _) = rdp.epsilon_and_order(&event, delta)?;
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
        .collect::<Result<Vec<(f64, f64)>>>()?;

    let alphas = fdp::alpha_grid(GRID);
    let rows = alphas
        .iter()
        .map(|&alpha| {
            Ok([
                alpha,
                fdp::gaussian_tradeoff(mu, alpha)?,
                fdp::tradeoff_from_delta_curve(&pld_curve, alpha)?,
                fdp::tradeoff_from_delta_curve(&rdp_curve, alpha)?,
                fdp::eps_delta_tradeoff(eps_rdp, delta, alpha)?,
            ])
        })
        .collect::<Result<Vec<[f64; 5]>>>()?;

    Ok(Tradeoff {
        mu,
        epsilon_pld: pld.epsilon(&event, delta)?,
        epsilon_rdp: eps_rdp,
        rows,
    })
}

/// Writes the curves as CSV: one row per α.
///
/// # Errors
/// A usage error naming the file when it cannot be written.
pub fn write_csv(path: &std::path::Path, rows: &[[f64; 5]]) -> Result<()> {
    let err = |e: std::io::Error| Error::usage(format!("writing {}: {e}", path.display()));
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
