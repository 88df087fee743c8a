//! Conversion of an RDP curve {(αᵢ, εᵢ)} to (ε, δ)-DP.

use serde::{Deserialize, Serialize};

/// How an RDP curve is turned into (ε, δ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conversion {
    /// Balle et al. 2020, Theorem 21 (as in Opacus, TF Privacy and Google's dp_accounting now):
    /// ε = min_α [ ε(α) + ln(1 − 1/α) − ln(δ·α)/(α − 1) ], with ε = 0 where the KL bound
    /// √(1 − e^{−ε(α)}) ≤ δ already holds. Tighter than [`Conversion::Classic`].
    #[default]
    Current,
    /// Mironov 2017, Proposition 3: ε = min_α [ ε(α) + ln(1/δ)/(α − 1) ]. The conversion the
    /// Opacus and TF Privacy READMEs (and many papers) still quote.
    Classic,
}

impl std::str::FromStr for Conversion {
    type Err = crate::AccountingError;

    /// Parses `current` or `classic` (the CLI's `--conversion` values).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "current" => Ok(Conversion::Current),
            "classic" => Ok(Conversion::Classic),
            other => Err(crate::AccountingError::InvalidParameter(format!(
                "conversion must be current or classic, got {other}"
            ))),
        }
    }
}

/// Orders at or below this are skipped by the current conversion (its formula is unstable
/// as α → 1, and the bound is useless there), as in dp_accounting.
const MIN_ORDER_CURRENT: f64 = 1.01;

/// The smallest ε over the orders for a given δ in (0, 1), and the order attaining it.
///
/// `rdp[i]` is the RDP at `orders[i]`; both slices have the same non-zero length and the
/// orders are > 1.
pub(crate) fn epsilon(
    orders: &[f64],
    rdp: &[f64],
    delta: f64,
    conversion: Conversion,
) -> (f64, f64) {
    let ln_delta = delta.ln();
    let mut best = (f64::INFINITY, orders[0]);
    for (&a, &r) in orders.iter().zip(rdp) {
        let r = super::bound(r);
        let eps = match conversion {
            Conversion::Classic => r - ln_delta / (a - 1.0),
            Conversion::Current => {
                if delta * delta + (-r).exp_m1() > 0.0 {
                    0.0
                } else if a > MIN_ORDER_CURRENT {
                    r + (-1.0 / a).ln_1p() - (ln_delta + a.ln()) / (a - 1.0)
                } else {
                    f64::INFINITY
                }
            }
        };
        if eps < best.0 {
            best = (eps, a);
        }
    }
    (best.0.max(0.0), best.1)
}

/// The smallest δ over the orders for a given ε ≥ 0, and the order attaining it.
pub(crate) fn delta(
    orders: &[f64],
    rdp: &[f64],
    epsilon: f64,
    conversion: Conversion,
) -> (f64, f64) {
    let mut best = (f64::INFINITY, orders[0]);
    for (&a, &r) in orders.iter().zip(rdp) {
        let r = super::bound(r);
        let ln_delta = match conversion {
            Conversion::Classic => (a - 1.0) * (r - epsilon),
            Conversion::Current => {
                // KL bound δ ≤ √(1 − e^{−KL}) with KL ≤ ε(α), then the Balle et al. bound
                // δ = e^{(α−1)(ε(α) − ε + ln(1 − 1/α))}/α (their Theorem 21 solved for δ).
                let kl = if r == 0.0 {
                    f64::NEG_INFINITY
                } else {
                    0.5 * (-(-r).exp()).ln_1p()
                };
                if a > MIN_ORDER_CURRENT {
                    kl.min((a - 1.0) * (r - epsilon + (-1.0 / a).ln_1p()) - a.ln())
                } else {
                    kl
                }
            }
        };
        if ln_delta < best.0 {
            best = (ln_delta, a);
        }
    }
    (best.0.exp().min(1.0), best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_sigma_two_reference() {
        // Single Gaussian σ = 2, δ = 1e-5, default orders: ε = 2.1657 (issue 3).
        let orders = super::super::default_orders();
        let rdp: Vec<f64> = orders.iter().map(|a| a / 8.0).collect();
        let (eps, _) = epsilon(&orders, &rdp, 1e-5, Conversion::Current);
        assert!((eps - 2.1657).abs() < 2e-3, "{eps}");
        // Classic is looser: with ε(α) = α/8, min_α α/8 + ln(1e5)/(α−1) ≈ 2.5 at α ≈ 10.6.
        let (classic, _) = epsilon(&orders, &rdp, 1e-5, Conversion::Classic);
        assert!(classic > eps);
    }

    #[test]
    fn delta_inverts_epsilon() {
        let orders = super::super::default_orders();
        let rdp: Vec<f64> = orders.iter().map(|a| 0.01 * a).collect();
        for conversion in [Conversion::Current, Conversion::Classic] {
            let (eps, _) = epsilon(&orders, &rdp, 1e-6, conversion);
            let (d, _) = delta(&orders, &rdp, eps, conversion);
            assert!(d <= 1e-6 * (1.0 + 1e-9), "{conversion:?}: δ(ε(1e-6)) = {d}");
            let (d_less, _) = delta(&orders, &rdp, eps * 0.9, conversion);
            assert!(d_less > 1e-6, "{conversion:?}");
        }
    }

    #[test]
    fn parses_cli_names() {
        assert_eq!(
            "current".parse::<Conversion>().unwrap(),
            Conversion::Current
        );
        assert_eq!(
            "classic".parse::<Conversion>().unwrap(),
            Conversion::Classic
        );
        let e = "new".parse::<Conversion>().unwrap_err().to_string();
        assert!(e.contains("got new"), "{e}");
        assert_eq!(
            serde_json::to_string(&Conversion::Classic).unwrap(),
            "\"classic\""
        );
    }

    #[test]
    fn zero_curve_gives_zero_epsilon_and_delta() {
        let orders = [2.0, 3.0];
        let rdp = [0.0, 0.0];
        assert_eq!(epsilon(&orders, &rdp, 1e-5, Conversion::Current).0, 0.0);
        assert_eq!(delta(&orders, &rdp, 0.0, Conversion::Current).0, 0.0);
    }
}
