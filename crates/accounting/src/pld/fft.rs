//! FFT kernels for privacy-loss distributions: linear convolution of two probability vectors and
//! the `count`-fold self-convolution, both with `rustfft` on zero-padded buffers.
//!
//! Results are clamped to be non-negative: FFT round-off leaves values of about 1e-17 times the
//! largest probability, of either sign, where the exact result is tiny.

use std::cell::RefCell;
use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

/// Below this many multiply-adds a direct convolution is cheaper than three FFTs.
const DIRECT_LIMIT: usize = 1 << 16;

/// The smallest `2^a · 3^b` (b ≤ 1) that is at least `n`: sizes rustfft plans and runs fast, and
/// few enough that the two directions of a PLD usually share one cached plan.
pub(crate) fn fast_len(n: usize) -> usize {
    let n = n.max(1);
    let pow2 = n.next_power_of_two();
    if pow2 >= 4 && pow2 / 4 * 3 >= n {
        pow2 / 4 * 3
    } else {
        pow2
    }
}

/// A forward plan and its length.
type Plan = (usize, Arc<dyn Fft<f64>>);

/// How many plans each thread keeps. One: a calibration search tries many lengths in turn, and
/// every cached plan of 2^19 points holds about 8 MiB of twiddles for the rest of the process
/// (four cached forward/inverse pairs were 64 MiB of a private `dpml train`'s peak); the two
/// directions of one PLD, composed one after the other, still share it.
const CACHED_PLANS: usize = 1;

thread_local! {
    /// Plans are costly to build for large sizes (tens of ms), so the most recent is kept.
    static PLANS: RefCell<Vec<Plan>> = const { RefCell::new(Vec::new()) };
}

/// The forward FFT plan of length `m`, from a small per-thread cache. Inverse transforms use it
/// too ([`inverse_in_place`]), so no second plan of the same size is held.
fn plan(m: usize) -> Arc<dyn Fft<f64>> {
    PLANS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(pos) = cache.iter().position(|(len, _)| *len == m) {
            let entry = cache.remove(pos);
            let plan = entry.1.clone();
            cache.push(entry);
            return plan;
        }
        // Drop the old plans before building the new one, so they are never held together.
        while cache.len() >= CACHED_PLANS {
            cache.remove(0);
        }
        let forward = FftPlanner::new().plan_fft_forward(m);
        cache.push((m, forward.clone()));
        forward
    })
}

/// The unnormalised inverse DFT by the forward plan: `IDFT(x) = conj(DFT(conj(x)))`.
fn inverse_in_place(forward: &dyn Fft<f64>, z: &mut [Complex<f64>]) {
    z.iter_mut().for_each(|c| c.im = -c.im);
    forward.process(z);
    z.iter_mut().for_each(|c| c.im = -c.im);
}

/// The linear convolution of `a` and `b` (length `a.len() + b.len() - 1`).
pub(crate) fn convolve(a: &[f64], b: &[f64]) -> Vec<f64> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let out_len = a.len() + b.len() - 1;
    if a.len().saturating_mul(b.len()) <= DIRECT_LIMIT || a.len().min(b.len()) <= 8 {
        let mut out = vec![0.0; out_len];
        for (i, &x) in a.iter().enumerate() {
            if x == 0.0 {
                continue;
            }
            for (o, &y) in out[i..].iter_mut().zip(b) {
                *o += x * y;
            }
        }
        return out;
    }
    let m = fast_len(out_len);
    let forward = plan(m);
    // Pack both real inputs into one complex signal z = a + i b; one FFT gives both spectra:
    // A[k] = (Z[k] + conj Z[-k]) / 2, B[k] = (Z[k] - conj Z[-k]) / 2i.
    let mut z = vec![Complex::new(0.0, 0.0); m];
    for (zi, &x) in z.iter_mut().zip(a) {
        zi.re = x;
    }
    for (zi, &y) in z.iter_mut().zip(b) {
        zi.im = y;
    }
    forward.process(&mut z);
    let mut prod = vec![Complex::new(0.0, 0.0); m];
    for k in 0..m {
        let zk = z[k];
        let zn = z[(m - k) % m].conj();
        let ak = (zk + zn) * 0.5;
        let bk = (zk - zn) * Complex::new(0.0, -0.5);
        prod[k] = ak * bk;
    }
    inverse_in_place(forward.as_ref(), &mut prod);
    let scale = 1.0 / m as f64;
    prod[..out_len]
        .iter()
        .map(|c| (c.re * scale).max(0.0))
        .collect()
}

/// Entries `start ..= start + len - 1` (indices of the sum of `count` independent draws from
/// `probs`, taken modulo the FFT length) of the `count`-fold self-convolution of `probs`.
///
/// The caller chooses the window so that the mass outside it is negligible (it wraps around into
/// the window; the caller accounts for it). Requires `len >= 1`.
pub(crate) fn self_convolve_window(probs: &[f64], count: u64, start: u64, len: usize) -> Vec<f64> {
    let m = fast_len(len.max(probs.len()));
    // |z|^count below e^{-745} underflows anyway: skip the exponentiation there (most of the
    // spectrum of a smooth distribution).
    let negligible = (-1490.0 / count as f64).exp();
    let power = |z: Complex<f64>| {
        if z.norm_sqr() < negligible {
            Complex::new(0.0, 0.0)
        } else {
            complex_pow(z, count)
        }
    };
    if m % 2 == 1 {
        return self_convolve_complex(probs, m, power, start, len);
    }
    // Real input: pack it into a complex signal of half the length (even entries real, odd
    // imaginary), so the buffer, the FFT scratch and the plan are half the size of a plain
    // length-m transform: these buffers are the PLD calibration's peak memory (issue 15).
    let h = m / 2;
    let forward = plan(h);
    let mut z = vec![Complex::new(0.0, 0.0); h];
    for (zi, pair) in z.iter_mut().zip(probs.chunks(2)) {
        *zi = Complex::new(pair[0], pair.get(1).copied().unwrap_or(0.0));
    }
    forward.process(&mut z);
    // Spectrum P[k] = E[k] + w^k O[k] (w = e^{-2πi/m}) of the real signal, from the packed
    // spectrum X: E[k] = (X[k] + conj X[h−k])/2, O[k] = (X[k] − conj X[h−k])/(2i). Its power
    // Y = P^count is Hermitian, so the packed spectrum of the result,
    // Z[k] = (Y[k] + conj Y[h−k])/2 + i w^{−k} (Y[k] − conj Y[h−k])/2, needs only the pair
    // (k, h−k): each pair is transformed in place.
    let half = Complex::new(0.5, 0.0);
    let minus_half_i = Complex::new(0.0, -0.5);
    let i = Complex::new(0.0, 1.0);
    // `w` is the twiddle w^k of the entry being computed.
    let spectrum = |xk: Complex<f64>, xj: Complex<f64>, w: Complex<f64>| {
        let e = (xk + xj.conj()) * half;
        let o = (xk - xj.conj()) * minus_half_i;
        e + w * o
    };
    let packed = |yk: Complex<f64>, yj: Complex<f64>, w: Complex<f64>| {
        (yk + yj.conj()) * half + i * w.conj() * (yk - yj.conj()) * half
    };
    {
        // k = 0 pairs with k = h: P[0] = E + O and P[h] = E − O, both real.
        let x0 = z[0];
        let (y0, yh) = (
            power(Complex::new(x0.re + x0.im, 0.0)),
            power(Complex::new(x0.re - x0.im, 0.0)),
        );
        z[0] = (y0 + yh) * half + i * (y0 - yh) * half;
    }
    for k in 1..=h / 2 {
        let j = h - k;
        // One sine and cosine per pair: w^(h−k) = w^h · w^(−k) = −conj(w^k), as w^h = −1.
        let wk = Complex::from_polar(1.0, -std::f64::consts::TAU * k as f64 / m as f64);
        let wj = -wk.conj();
        let (xk, xj) = (z[k], z[j]);
        let yk = power(spectrum(xk, xj, wk));
        let yj = power(spectrum(xj, xk, wj));
        z[k] = packed(yk, yj, wk);
        z[j] = packed(yj, yk, wj);
    }
    inverse_in_place(forward.as_ref(), &mut z);
    let scale = 1.0 / h as f64;
    let offset = (start % m as u64) as usize;
    (0..len)
        .map(|n| {
            let t = (offset + n) % m;
            let c = z[t / 2];
            let v = if t.is_multiple_of(2) { c.re } else { c.im };
            (v * scale).max(0.0)
        })
        .collect()
}

/// [`self_convolve_window`] by a plain complex transform of odd length `m`.
fn self_convolve_complex(
    probs: &[f64],
    m: usize,
    power: impl Fn(Complex<f64>) -> Complex<f64>,
    start: u64,
    len: usize,
) -> Vec<f64> {
    let forward = plan(m);
    let mut z = vec![Complex::new(0.0, 0.0); m];
    for (zi, &x) in z.iter_mut().zip(probs) {
        zi.re = x;
    }
    forward.process(&mut z);
    z.iter_mut().for_each(|zk| *zk = power(*zk));
    inverse_in_place(forward.as_ref(), &mut z);
    let scale = 1.0 / m as f64;
    let offset = (start % m as u64) as usize;
    (0..len)
        .map(|i| (z[(offset + i) % m].re * scale).max(0.0))
        .collect()
}

/// `z^n` by binary exponentiation (relative error about `n` ulps, like the polar form).
fn complex_pow(mut z: Complex<f64>, mut n: u64) -> Complex<f64> {
    let mut acc = Complex::new(1.0, 0.0);
    while n > 0 {
        if n & 1 == 1 {
            acc *= z;
        }
        n >>= 1;
        if n > 0 {
            z *= z;
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; a.len() + b.len() - 1];
        for (i, x) in a.iter().enumerate() {
            for (j, y) in b.iter().enumerate() {
                out[i + j] += x * y;
            }
        }
        out
    }

    #[test]
    fn fast_len_is_smooth_and_minimal() {
        assert_eq!(fast_len(1), 1);
        assert_eq!(fast_len(7), 8);
        assert_eq!(fast_len(11), 12);
        assert_eq!(fast_len(1025), 1536);
        assert_eq!(fast_len(1 << 20), 1 << 20);
        for n in 1..2000 {
            let m = fast_len(n);
            assert!(m >= n);
            let mut r = m;
            assert!(m < 2 * n, "{m} wastes too much for {n}");
            for p in [2, 3] {
                while r.is_multiple_of(p) {
                    r /= p;
                }
            }
            assert_eq!(r, 1, "{m} is not 3-smooth");
        }
    }

    #[test]
    fn one_plan_is_kept_and_inverse_transforms_reuse_it() {
        // Memory bound (issue 15): lengths tried one after another never pile up plans.
        let a = vec![0.5; 400];
        for n in [300usize, 700, 1500] {
            let b = vec![1.0 / n as f64; n];
            let fast = convolve(&a, &b);
            let slow = direct(&a, &b);
            for (x, y) in fast.iter().zip(&slow) {
                assert!((x - y).abs() <= 1e-13, "{x} vs {y}");
            }
            assert_eq!(PLANS.with(|c| c.borrow().len()), CACHED_PLANS);
        }
        assert_eq!(CACHED_PLANS, 1);
        // The inverse by conjugation is the true inverse: a round trip returns the input.
        let forward = plan(12);
        let x: Vec<Complex<f64>> = (0..12)
            .map(|i| Complex::new(i as f64, (i * i) as f64 / 7.0))
            .collect();
        let mut z = x.clone();
        forward.process(&mut z);
        inverse_in_place(forward.as_ref(), &mut z);
        for (a, b) in z.iter().zip(&x) {
            assert!((a / 12.0 - b).norm() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn fft_convolution_matches_direct() {
        // Lengths large enough to take the FFT path (product above DIRECT_LIMIT).
        let a: Vec<f64> = (0..700)
            .map(|i| ((i * 37 % 101) as f64 + 1.0) / 1e4)
            .collect();
        let b: Vec<f64> = (0..300)
            .map(|i| ((i * 53 % 89) as f64 + 1.0) / 1e4)
            .collect();
        let fast = convolve(&a, &b);
        let slow = direct(&a, &b);
        assert_eq!(fast.len(), slow.len());
        let max = slow.iter().cloned().fold(0.0, f64::max);
        for (x, y) in fast.iter().zip(&slow) {
            assert!((x - y).abs() <= 1e-12 * max, "{x} vs {y}");
        }
    }

    #[test]
    fn self_convolution_window_matches_repeated_convolution() {
        let p = [0.2, 0.5, 0.3];
        let mut full = vec![1.0];
        for _ in 0..5 {
            full = direct(&full, &p);
        }
        let w = self_convolve_window(&p, 5, 0, 11);
        for (i, x) in w.iter().enumerate() {
            assert!((x - full[i]).abs() < 1e-14, "{i}: {x} vs {}", full[i]);
        }
        // Support {2, 3}: five draws sum to 10..=15; a window of exactly that range is read
        // through the wrap-around (FFT length 6) without collisions.
        let q = [0.0, 0.0, 0.25, 0.75];
        let w = self_convolve_window(&q, 5, 10, 6);
        let binom = [1.0, 5.0, 10.0, 10.0, 5.0, 1.0];
        for (k, x) in w.iter().enumerate() {
            let exact = binom[k] * 0.25f64.powi(5 - k as i32) * 0.75f64.powi(k as i32);
            assert!((x - exact).abs() < 1e-14, "{k}: {x} vs {exact}");
        }
        assert_eq!(
            complex_pow(Complex::new(0.0, 1.0), 4),
            Complex::new(1.0, 0.0)
        );
    }
}
