//! Exact cell masses for the Gaussian mechanism and the Poisson-subsampled Gaussian mechanism.
//!
//! Remove-one direction, sensitivity 1, noise N(0, σ²): `P = (1 − q) N(0, σ²) + q N(1, σ²)` and
//! `Q = N(0, σ²)`; the loss `ℓ(x) = ln(1 − q + q e^{(2x − 1)/(2σ²)})` increases with x, so a loss
//! cell is an interval of x whose masses are normal-CDF differences. `q = 1` is the plain Gaussian
//! mechanism, `ℓ(x) = (2x − 1)/(2σ²)`. The add-one direction is the same pair swapped
//! ([`super::discretize::Cells::swapped`]).
//!
//! Outcomes with `x` more than [`Z_TRUNC`] standard deviations from both means (mass below 1e-23
//! per tail) are reported as truncated tails.

use dpml_mechanisms::normal::normal_cdf;

use super::discretize::Cells;

/// Truncation of the output space in standard deviations: `Φ(−10) ≈ 7.6e-24`.
pub(crate) const Z_TRUNC: f64 = 10.0;

/// The Poisson-subsampled Gaussian mechanism (remove direction); `q = 1` is the plain Gaussian.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SampledGaussian {
    /// Sampling rate in (0, 1].
    pub(crate) q: f64,
    /// Noise multiplier σ > 0.
    pub(crate) sigma: f64,
}

/// A standard normal tail on the side of `z`: `Φ(z)` for `z < 0`, `1 − Φ(z)` otherwise, from
/// the tail-accurate Φ of `dpml_mechanisms::normal`, so it keeps full relative precision far
/// into the tail.
#[derive(Debug, Clone, Copy)]
struct Tail {
    z: f64,
    small: f64,
}

impl Tail {
    fn at(z: f64) -> Self {
        Tail {
            z,
            small: normal_cdf(-z.abs()),
        }
    }

    /// `Φ(z)`.
    fn cdf(self) -> f64 {
        if self.z < 0.0 {
            self.small
        } else {
            1.0 - self.small
        }
    }

    /// `1 − Φ(z)`.
    fn sf(self) -> f64 {
        if self.z < 0.0 {
            1.0 - self.small
        } else {
            self.small
        }
    }
}

/// `Φ(b.z) − Φ(a.z)` for `a.z ≤ b.z`, differencing the tails on the side where they are small.
fn mass_between(a: Tail, b: Tail) -> f64 {
    let m = if a.z >= 0.0 {
        a.small - b.small
    } else if b.z <= 0.0 {
        b.small - a.small
    } else {
        1.0 - a.small - b.small
    };
    m.max(0.0)
}

/// `ln(e^a + e^b)`.
fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

impl SampledGaussian {
    /// Output range kept in the cells: `[−Z σ, 1 + Z σ]`.
    fn x_range(&self) -> (f64, f64) {
        (-Z_TRUNC * self.sigma, 1.0 + Z_TRUNC * self.sigma)
    }

    /// The privacy loss at output `x`.
    pub(crate) fn loss(&self, x: f64) -> f64 {
        let z = (2.0 * x - 1.0) / (2.0 * self.sigma * self.sigma);
        if self.q >= 1.0 {
            z
        } else {
            log_add_exp(z + self.q.ln(), (-self.q).ln_1p())
        }
    }

    /// The output whose loss is `loss` (`−∞` below the smallest loss `ln(1 − q)`).
    pub(crate) fn x_of_loss(&self, loss: f64) -> f64 {
        let var = self.sigma * self.sigma;
        if self.q >= 1.0 {
            return var * loss + 0.5;
        }
        // Solve e^loss = 1 − q + q e^z for z, avoiding cancellation near loss = 0 and overflow
        // for large losses.
        let z = if loss > 1.0 {
            loss + (-(1.0 - self.q) * (-loss).exp()).ln_1p() - self.q.ln()
        } else {
            let r = loss.exp_m1() / self.q;
            if r <= -1.0 {
                return f64::NEG_INFINITY;
            }
            r.ln_1p()
        };
        var * z + 0.5
    }

    /// Smallest and largest loss kept in the cells.
    pub(crate) fn span(&self) -> (f64, f64) {
        let (lo, hi) = self.x_range();
        (self.loss(lo), self.loss(hi))
    }

    /// The mass of `P` between two outputs given the tails of both mixture components there.
    fn p_mass(&self, m0: f64, m1: f64) -> f64 {
        if self.q >= 1.0 {
            m1
        } else {
            (1.0 - self.q) * m0 + self.q * m1
        }
    }

    /// Exact (P, Q) masses per loss cell of width `h` (remove direction).
    pub(crate) fn cells(&self, h: f64) -> Cells {
        let (x_lo, x_hi) = self.x_range();
        let (l_lo, l_hi) = self.span();
        let (j0, j1) = (Cells::cell_of(h, l_lo), Cells::cell_of(h, l_hi));
        let mut cells = Cells::new(h, j0, j1);
        let s = self.sigma;
        let tails = |x: f64| (Tail::at(x / s), Tail::at((x - 1.0) / s));
        let mut prev = tails(x_lo);
        let below = prev;
        for i in 0..cells.p.len() {
            let x = self
                .x_of_loss((j0 + i as i64 + 1) as f64 * h)
                .clamp(x_lo, x_hi);
            let next = tails(x);
            let m0 = mass_between(prev.0, next.0);
            let m1 = mass_between(prev.1, next.1);
            cells.p[i] = self.p_mass(m0, m1);
            cells.q[i] = m0;
            prev = next;
        }
        let above = tails(x_hi);
        cells.below = (self.p_mass(below.0.cdf(), below.1.cdf()), below.0.cdf());
        cells.above = (self.p_mass(above.0.sf(), above.1.sf()), above.0.sf());
        cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Φ by a slow, independent route: Simpson's rule on the density from 0 to |z|.
    fn phi_numeric(z: f64) -> f64 {
        let n = 20_000;
        let step = z.abs() / n as f64;
        let f = |t: f64| (-0.5 * t * t).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let mut s = f(0.0) + f(z.abs());
        for i in 1..n {
            s += f(i as f64 * step) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        let half = s * step / 3.0;
        if z >= 0.0 { 0.5 + half } else { 0.5 - half }
    }

    #[test]
    fn tails_agree_with_quadrature() {
        for z in [-3.0, -1.0, -0.2, 0.0, 0.7, 2.5] {
            let t = Tail::at(z);
            assert!((t.cdf() - phi_numeric(z)).abs() < 1e-12, "z = {z}");
            assert!((t.cdf() + t.sf() - 1.0).abs() < 1e-15);
        }
        // Far tail keeps relative precision: Φ(−10) = 7.619853024160527e-24.
        assert!((Tail::at(-10.0).cdf() / 7.619853024160527e-24 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn loss_and_inverse_agree() {
        for (q, sigma) in [(1.0, 2.0), (0.01, 1.1), (0.5, 0.3), (1e-5, 0.8)] {
            let m = SampledGaussian { q, sigma };
            for x in [-3.0, -0.5, 0.0, 0.4, 1.0, 2.5, 6.0] {
                let l = m.loss(x);
                if l - (-q).ln_1p() < 1e-9 {
                    continue; // the loss has saturated at ln(1 − q): x is not recoverable
                }
                let back = m.x_of_loss(l);
                assert!(
                    (back - x).abs() < 1e-6 * (1.0 + x.abs()),
                    "q {q} σ {sigma} x {x}: {back}"
                );
            }
        }
    }

    #[test]
    fn cells_hold_all_mass_and_the_right_losses() {
        let m = SampledGaussian {
            q: 0.05,
            sigma: 1.0,
        };
        let c = m.cells(1e-3);
        let p: f64 = c.p.iter().sum::<f64>() + c.above.0 + c.below.0;
        let q: f64 = c.q.iter().sum::<f64>() + c.above.1 + c.below.1;
        assert!(
            (p - 1.0).abs() < 1e-13 && (q - 1.0).abs() < 1e-13,
            "{p} {q}"
        );
        // Every cell's merged loss ln(P/Q) lies inside the cell.
        for (i, (pi, qi)) in c.p.iter().zip(&c.q).enumerate() {
            if *pi > 1e-12 {
                let l = (pi / qi).ln();
                let lo = (c.j0 + i as i64) as f64 * 1e-3;
                assert!(l >= lo - 1e-9 && l <= lo + 1e-3 + 1e-9, "cell {i}: {l}");
            }
        }
    }
}
