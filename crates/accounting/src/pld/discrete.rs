//! Exact cell masses for the mechanisms whose privacy loss has atoms: Laplace (a continuous
//! middle and two atoms), randomized response, the generic (ε, δ) pair, discrete Laplace and
//! discrete Gaussian. All are symmetric under add/remove, so one direction is enough.

use super::discretize::Cells;
use crate::AccountingError;

/// Most support points enumerated for a discrete Gaussian or discrete Laplace mechanism.
pub(crate) const MAX_SUPPORT: u64 = 20_000_000;

/// Discrete Gaussian support kept: `|k − centre| ≤ 11σ` (tail mass below 1e-27).
const DG_TRUNC: f64 = 11.0;

/// Laplace noise of scale `b` on sensitivity 1: `P = Lap(1, b)`, `Q = Lap(0, b)`.
///
/// Loss `(|x| − |x − 1|)/b`: the atom `+1/b` (x ≥ 1, P = ½, Q = ½e^{−1/b}), the atom `−1/b`
/// (x ≤ 0) and, for x in (0, 1), the loss `(2x − 1)/b`, whose masses on `[a, c]` are
/// `P = ½ e^{a/2 − 1/(2b)} (e^{(c−a)/2} − 1)` and `Q = ½ e^{−c/2 − 1/(2b)} (e^{(c−a)/2} − 1)`.
pub(crate) fn laplace(b: f64, h: f64) -> Cells {
    let m = 1.0 / b;
    let mut cells = Cells::new(h, Cells::cell_of(h, -m), Cells::cell_of(h, m));
    for i in 0..cells.p.len() {
        let a = ((cells.j0 + i as i64) as f64 * h).max(-m);
        let c = ((cells.j0 + i as i64 + 1) as f64 * h).min(m);
        if c > a {
            let w = (0.5 * (c - a)).exp_m1();
            cells.p[i] += 0.5 * (0.5 * a - 0.5 * m).exp() * w;
            cells.q[i] += 0.5 * (-0.5 * c - 0.5 * m).exp() * w;
        }
    }
    let e = (-m).exp();
    cells.add_atom(m, 0.5, 0.5 * e);
    cells.add_atom(-m, 0.5 * e, 0.5);
    cells
}

/// Cells spanning the given atoms `(loss, P, Q)`, with the masses added.
fn atoms(h: f64, list: &[(f64, f64, f64)], inf_p: f64) -> Cells {
    let finite = || list.iter().map(|a| a.0).filter(|l| l.is_finite());
    let lo = finite().fold(0.0, f64::min);
    let hi = finite().fold(0.0, f64::max);
    let mut cells = Cells::new(h, Cells::cell_of(h, lo), Cells::cell_of(h, hi));
    for &(l, p, q) in list {
        cells.add_atom(l, p, q);
    }
    cells.inf_p += inf_p;
    cells
}

/// k-ary randomized response with parameter ε: losses ε (true answer), −ε (the neighbour's
/// answer) and 0 (the k − 2 others), with `Z = e^ε + k − 1`.
pub(crate) fn randomized_response(epsilon: f64, categories: u32, h: f64) -> Cells {
    let e = (-epsilon).exp();
    let z = 1.0 + (f64::from(categories) - 1.0) * e; // (e^ε + k − 1) e^{−ε}
    let (hi, lo) = (1.0 / z, e / z);
    let rest = (f64::from(categories) - 2.0) * e / z;
    atoms(
        h,
        &[(epsilon, hi, lo), (-epsilon, lo, hi), (0.0, rest, rest)],
        0.0,
    )
}

/// The (ε, δ) pair of Kairouz et al.: mass δ at loss `+∞` and losses ±ε with
/// `P(ε) = (1 − δ) e^ε / (1 + e^ε)`, `P(−ε) = (1 − δ) / (1 + e^ε)`.
pub(crate) fn epsilon_delta(epsilon: f64, delta: f64, h: f64) -> Cells {
    let e = (-epsilon).exp();
    let (hi, lo) = ((1.0 - delta) / (1.0 + e), (1.0 - delta) * e / (1.0 + e));
    atoms(h, &[(epsilon, hi, lo), (-epsilon, lo, hi)], delta)
}

/// Discrete Laplace `P(k) ∝ e^{−|k − s|/t}` against `Q(k) ∝ e^{−|k|/t}`, with `r = e^{−1/t}`:
/// loss `s/t` for `k ≥ s` (P = 1/(1+r), Q = r^s/(1+r)), `−s/t` for `k ≤ 0`, and `(2k − s)/t`
/// for `0 < k < s` (P = r^{s−k}(1−r)/(1+r), Q = r^k(1−r)/(1+r)).
pub(crate) fn discrete_laplace(
    scale: f64,
    sensitivity: u64,
    h: f64,
) -> Result<Cells, AccountingError> {
    if sensitivity > MAX_SUPPORT {
        return Err(AccountingError::Unsupported(format!(
            "discrete Laplace sensitivity {sensitivity} needs more than {MAX_SUPPORT} support points"
        )));
    }
    let s = sensitivity as f64;
    let r = (-1.0 / scale).exp();
    let one_minus_r = -(-1.0 / scale).exp_m1();
    let rs = (-s / scale).exp();
    let mut list = vec![
        (s / scale, 1.0 / (1.0 + r), rs / (1.0 + r)),
        (-s / scale, rs / (1.0 + r), 1.0 / (1.0 + r)),
    ];
    let mid = one_minus_r / (1.0 + r);
    for k in 1..sensitivity {
        let k = k as f64;
        list.push((
            (2.0 * k - s) / scale,
            (-(s - k) / scale).exp() * mid,
            (-k / scale).exp() * mid,
        ));
    }
    Ok(atoms(h, &list, 0.0))
}

/// Discrete Gaussian `P(k) ∝ e^{−(k − s)²/(2σ²)}` against `Q(k) ∝ e^{−k²/(2σ²)}` (same
/// normaliser Z), loss `s(2k − s)/(2σ²)`, enumerated for k within 11σ of both centres; the rest
/// is reported as truncated tails, with masses bounded by `e^{−m²/(2σ²)} + ∫_m^∞ e^{−x²/(2σ²)}dx`.
pub(crate) fn discrete_gaussian(
    sigma: f64,
    sensitivity: u64,
    h: f64,
) -> Result<Cells, AccountingError> {
    let s = sensitivity as f64;
    let k_lo = (-DG_TRUNC * sigma).floor() - 1.0;
    let k_hi = (s + DG_TRUNC * sigma).ceil() + 1.0;
    let points = k_hi - k_lo + 1.0;
    if points > MAX_SUPPORT as f64 {
        return Err(AccountingError::Unsupported(format!(
            "discrete Gaussian with sigma {sigma} and sensitivity {sensitivity} needs {points:.0} \
             support points, more than {MAX_SUPPORT}; use the Gaussian event instead"
        )));
    }
    let two_var = 2.0 * sigma * sigma;
    let weight = |k: f64| (-k * k / two_var).exp();
    // Kahan-compensated normaliser over the kept support (it covers ±11σ around 0).
    let (mut z, mut comp) = (0.0f64, 0.0f64);
    let mut k = k_lo;
    while k <= k_hi {
        let y = weight(k) - comp;
        let t = z + y;
        comp = (t - z) - y;
        z = t;
        k += 1.0;
    }
    let loss = |k: f64| s * (2.0 * k - s) / two_var;
    let mut cells = Cells::new(
        h,
        Cells::cell_of(h, loss(k_lo)),
        Cells::cell_of(h, loss(k_hi)),
    );
    let mut k = k_lo;
    while k <= k_hi {
        cells.add_atom(loss(k), weight(k - s) / z, weight(k) / z);
        k += 1.0;
    }
    // Tail bound for Σ_{m ≥ m0} e^{−m²/(2σ²)}, m0 > 0.
    let tail = |m0: f64| {
        weight(m0)
            + sigma
                * (std::f64::consts::PI / 2.0).sqrt()
                * libm::erfc(m0 / (sigma * std::f64::consts::SQRT_2))
    };
    cells.above = (tail(k_hi + 1.0 - s) / z, tail(k_hi + 1.0) / z);
    cells.below = (tail(s - k_lo + 1.0) / z, tail(-k_lo + 1.0) / z);
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(c: &Cells) -> (f64, f64) {
        (
            c.p.iter().sum::<f64>() + c.inf_p + c.above.0 + c.below.0,
            c.q.iter().sum::<f64>() + c.neg_inf_q + c.above.1 + c.below.1,
        )
    }

    #[test]
    fn every_mechanism_has_total_mass_one() {
        let all = [
            laplace(0.7, 1e-3),
            randomized_response(1.2, 5, 1e-3),
            epsilon_delta(0.5, 1e-6, 1e-3),
            discrete_laplace(2.0, 3, 1e-3).unwrap(),
            discrete_gaussian(3.0, 2, 1e-3).unwrap(),
        ];
        for c in &all {
            let (p, q) = totals(c);
            assert!((p - 1.0).abs() < 1e-12, "{p}");
            assert!((q - 1.0).abs() < 1e-12 || c.inf_p > 0.0, "{q}");
        }
    }

    #[test]
    fn randomized_response_has_three_losses() {
        let c = randomized_response(3f64.ln(), 2, 1e-3);
        let used: Vec<usize> = (0..c.p.len()).filter(|&i| c.p[i] > 0.0).collect();
        assert_eq!(used.len(), 2, "binary RR has only the losses ±ln 3");
        assert!((c.p[used[1]] - 0.75).abs() < 1e-15 && (c.q[used[1]] - 0.25).abs() < 1e-15);
    }

    #[test]
    fn discrete_laplace_matches_enumeration() {
        // Sum P and Q over k directly for the atom at the top loss s/t.
        let t = 1.5;
        let c = discrete_laplace(t, 2, 1e-3).unwrap();
        let norm: f64 = (-200..=200)
            .map(|k: i64| (-(k.abs() as f64) / t).exp())
            .sum();
        let p_top: f64 = (2..=200)
            .map(|k: i64| (-((k - 2).abs() as f64) / t).exp())
            .sum::<f64>()
            / norm;
        let top = c.p.iter().rposition(|p| *p > 0.0).unwrap();
        assert!((c.p[top] - p_top).abs() < 1e-12, "{} vs {p_top}", c.p[top]);
    }
}
