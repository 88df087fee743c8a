//! The 2-D scattering transform (Mallat 2012; Bruna & Mallat 2013) as a fixed, parameter-free
//! first layer: cascades of Morlet wavelet convolutions and complex moduli, averaged by a
//! Gaussian low-pass filter and subsampled by 2^J. It is data-independent, so applying it costs
//! no privacy and its outputs can be computed once per record before training (Tramèr & Boneh
//! 2021 train small private models on these features).
//!
//! The filters and the algorithm follow kymatio's `Scattering2D` (Andreux et al. 2020), so the
//! features match theirs up to f32 rounding:
//!
//! - the record is reflect-padded to M' = (⌊(M + 2^J)/2^J⌋ + 1)·2^J (likewise N'), and every
//!   convolution is circular on the padded grid, done as a product in the Fourier domain;
//! - wavelets ψ_{j,θ} (j < J, θ = 0..L−1): Morlet filters, σ = 0.8·2^j, orientation
//!   (⌊L/2⌋ − 1 − θ)·π/L, centre frequency ξ = 3π/(4·2^j), slant 4/L; the low-pass φ is a
//!   Gaussian with σ = 0.8·2^(J−1). Each filter's Fourier transform is replaced by its real
//!   part (kymatio does the same), and periodised to the lower resolutions it is applied at;
//! - subsampling by k is done in the Fourier domain by averaging the k×k aliased blocks, which
//!   equals keeping every k-th sample in space;
//! - output channels, for each input channel: S₀ = x⋆φ; S₁ = |x⋆ψ_{j₁,θ₁}|⋆φ for (j₁, θ₁) in
//!   order; S₂ = ||x⋆ψ_{j₁,θ₁}|⋆ψ_{j₂,θ₂}|⋆φ for j₂ > j₁, with (j₁, θ₁) outer and (j₂, θ₂)
//!   inner: 1 + J·L + L²·J(J−1)/2 channels at ⌊M/2^J⌋ × ⌊N/2^J⌋ after removing one border
//!   sample on each side.
//!
//! # Citations
//! S. Mallat, *Group Invariant Scattering*, CPAM 2012; J. Bruna & S. Mallat, *Invariant
//! Scattering Convolution Networks*, TPAMI 2013; M. Andreux et al., *Kymatio: Scattering
//! Transforms in Python*, JMLR 2020; F. Tramèr & D. Boneh, *Differentially Private Learning
//! Needs Better Features (or Much More Data)*, ICLR 2021.

use std::f64::consts::PI;
use std::sync::Arc;

use rayon::prelude::*;
use rustfft::num_complex::Complex;
use rustfft::num_traits::FromPrimitive;
use rustfft::{Fft, FftNum, FftPlanner};

use super::{GradMode, Layer, LayerSpec};
use crate::error::{Result, invalid};
use crate::tensor::Tensor;

type C32 = Complex<f32>;

/// The value of π in kymatio's Gabor normalisation (a truncated literal, kept so the features
/// match kymatio's: it scales every coefficient by π/3.1415 ≈ 1 + 3·10⁻⁵).
#[allow(clippy::approx_constant)]
const KYMATIO_PI: f64 = 3.1415;

/// Largest accepted J (2^J must stay a sensible image scale).
const MAX_J: usize = 8;
/// Largest accepted number of angles L.
const MAX_L: usize = 64;

/// Number of scattering channels per input channel at order 2: 1 + J·L + L²·J(J−1)/2
/// (81 for J = 2, L = 8).
pub fn scattering_channels(j: usize, l: usize) -> usize {
    1 + j * l + l * l * j * j.saturating_sub(1) / 2
}

/// The fixed scattering transform of order 2 over `[c, h, w]` records; outputs
/// `[c·(1 + J·L + L²·J(J−1)/2), ⌊h/2^J⌋, ⌊w/2^J⌋]`. No parameters; it must be a model's first
/// layer (it gives no input gradient).
#[derive(Debug, Clone)]
pub struct Scattering2d {
    j: usize,
    l: usize,
    in_shape: [usize; 3],
    out_shape: [usize; 3],
    bank: Arc<FilterBank>,
}

impl Scattering2d {
    /// The transform with `j` scales and `l` angles for records of shape `input`.
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] unless 1 ≤ j ≤ 8 and 1 ≤ l ≤ 64, or when the image
    /// is too small for 2^j (each side must be ≥ 2^j and larger than the reflect padding),
    /// naming the values.
    pub fn new(input: [usize; 3], j: usize, l: usize) -> Result<Self> {
        if !(1..=MAX_J).contains(&j) {
            return Err(invalid(format!(
                "scattering J must be in 1..={MAX_J}, got {j}"
            )));
        }
        if !(1..=MAX_L).contains(&l) {
            return Err(invalid(format!(
                "scattering L must be in 1..={MAX_L}, got {l}"
            )));
        }
        let [c, h, w] = input;
        let bank = FilterBank::new(h, w, j, l)?;
        if c == 0 {
            return Err(invalid(format!(
                "scattering needs at least one channel, got records of shape {input:?}"
            )));
        }
        let k = scattering_channels(j, l);
        Ok(Self {
            j,
            l,
            in_shape: input,
            out_shape: [c * k, h >> j, w >> j],
            bank: Arc::new(bank),
        })
    }
}

impl Layer for Scattering2d {
    fn spec(&self) -> LayerSpec {
        LayerSpec::Scattering2d {
            j: self.j,
            l: self.l,
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let [_, h, w] = self.in_shape;
        let per_channel =
            self.out_shape[0] / self.in_shape[0] * self.out_shape[1..].iter().product::<usize>();
        y.reset(x.batch(), &self.out_shape);
        let bank = &self.bank;
        y.data_mut()
            .par_chunks_mut(per_channel)
            .zip(x.data().par_chunks(h * w))
            .for_each_init(Workspace::default, |ws, (out, img)| {
                bank.transform(img, out, ws)
            });
    }

    /// The transform is only allowed as a model's first layer (checked when the model is
    /// built), so no input gradient is ever asked for; if one is, it is zero.
    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        _gy: &Tensor,
        gx: Option<&mut Tensor>,
        _mode: GradMode<'_>,
    ) {
        if let Some(gx) = gx {
            gx.reset(x.batch(), &self.in_shape);
            gx.fill_zero();
        }
    }
}

/// A 2-D DFT of an m×n row-major grid (rows, then columns through a transpose).
#[derive(Clone)]
struct Fft2<T: FftNum> {
    m: usize,
    n: usize,
    row_fwd: Arc<dyn Fft<T>>,
    row_inv: Arc<dyn Fft<T>>,
    col_fwd: Arc<dyn Fft<T>>,
    col_inv: Arc<dyn Fft<T>>,
}

impl<T: FftNum> std::fmt::Debug for Fft2<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fft2({}x{})", self.m, self.n)
    }
}

impl<T: FftNum> Fft2<T> {
    fn new(planner: &mut FftPlanner<T>, m: usize, n: usize) -> Self {
        Self {
            m,
            n,
            row_fwd: planner.plan_fft_forward(n),
            row_inv: planner.plan_fft_inverse(n),
            col_fwd: planner.plan_fft_forward(m),
            col_inv: planner.plan_fft_inverse(m),
        }
    }

    /// In-place 2-D DFT: forward unnormalised, inverse divided by m·n (numpy's convention).
    /// `tmp` and `scratch` are work buffers.
    fn run(
        &self,
        buf: &mut [Complex<T>],
        inverse: bool,
        tmp: &mut Vec<Complex<T>>,
        scratch: &mut Vec<Complex<T>>,
    ) {
        let (m, n) = (self.m, self.n);
        let (rows, cols) = if inverse {
            (&self.row_inv, &self.col_inv)
        } else {
            (&self.row_fwd, &self.col_fwd)
        };
        let need = rows
            .get_inplace_scratch_len()
            .max(cols.get_inplace_scratch_len());
        scratch.resize(need, Complex::new(T::zero(), T::zero()));
        rows.process_with_scratch(buf, scratch);
        tmp.resize(m * n, Complex::new(T::zero(), T::zero()));
        transpose(buf, tmp, m, n);
        cols.process_with_scratch(tmp, scratch);
        transpose(tmp, buf, n, m);
        if inverse {
            let s = T::one() / <T as FromPrimitive>::from_usize(m * n).unwrap_or_else(T::one);
            buf.iter_mut().for_each(|v| *v = *v * s);
        }
    }
}

/// `dst` (c×r) = transpose of `src` (r×c).
fn transpose<V: Copy>(src: &[V], dst: &mut [V], r: usize, c: usize) {
    for i in 0..r {
        for j in 0..c {
            dst[j * r + i] = src[i * c + j];
        }
    }
}

/// A wavelet's Fourier transform at each resolution it is applied at.
#[derive(Debug)]
struct Wavelet {
    j: usize,
    /// levels[res]: the filter periodised to (M'/2^res) × (N'/2^res).
    levels: Vec<Vec<f32>>,
}

/// The filters (in the Fourier domain) and FFT plans for one image size, J and L.
#[derive(Debug)]
struct FilterBank {
    j: usize,
    h: usize,
    w: usize,
    /// Reflect padding (top, left); bottom/right follow from the padded size.
    pad: [usize; 2],
    /// Padded size M' × N'.
    mp: usize,
    np: usize,
    /// phi[res]: the low-pass at resolution res, res = 0..J.
    phi: Vec<Vec<f32>>,
    psi: Vec<Wavelet>,
    /// ffts[res]: plans for (M'/2^res) × (N'/2^res), res = 0..=J.
    ffts: Vec<Fft2<f32>>,
}

/// Work buffers of one FFT call.
#[derive(Default)]
struct FftWork {
    tmp: Vec<C32>,
    scratch: Vec<C32>,
}

/// Per-thread buffers for [`FilterBank::transform`]: the Fourier transforms of the padded
/// image (u0), of the first-order modulus (u1), of the second-order modulus (u2), and the
/// low-passed output before its inverse FFT (lp).
#[derive(Default)]
struct Workspace {
    u0: Vec<C32>,
    u1: Vec<C32>,
    u2: Vec<C32>,
    lp: Vec<C32>,
    fft: FftWork,
}

/// Kymatio's padded size for one side: (⌊(m + 2^J)/2^J⌋ + 1)·2^J.
fn padded(m: usize, j: usize) -> usize {
    ((m + (1 << j)) / (1 << j) + 1) << j
}

impl FilterBank {
    fn new(h: usize, w: usize, j: usize, l: usize) -> Result<Self> {
        let (mp, np) = (padded(h, j), padded(w, j));
        let pad = [(mp - h) / 2, (np - w) / 2];
        // Reflect padding mirrors without repeating the edge, so each side of padding must be
        // shorter than the image side.
        let (pad_h, pad_w) = ((mp - h).div_ceil(2), (np - w).div_ceil(2));
        if h < (1 << j) || w < (1 << j) || pad_h >= h || pad_w >= w {
            return Err(invalid(format!(
                "scattering with J = {j} needs images of at least {} x {} pixels \
                 (reflect padding of {pad_h} x {pad_w}), got {h} x {w}",
                (pad_h + 1).max(1 << j),
                (pad_w + 1).max(1 << j)
            )));
        }
        let mut planner64 = FftPlanner::<f64>::new();
        let full = Fft2::new(&mut planner64, mp, np);
        let fourier = |spatial: Vec<Complex<f64>>| -> Vec<f64> {
            let mut buf = spatial;
            full.run(&mut buf, false, &mut Vec::new(), &mut Vec::new());
            buf.iter().map(|v| v.re).collect()
        };
        let mut psi = Vec::with_capacity(j * l);
        for scale in 0..j {
            for theta in 0..l {
                let angle = ((l - l / 2) as f64 - 1.0 - theta as f64) * PI / l as f64;
                let sigma = 0.8 * f64::from(1u32 << scale);
                let xi = 0.75 * PI / f64::from(1u32 << scale);
                let f = fourier(morlet(mp, np, sigma, angle, xi, 4.0 / l as f64));
                let levels = (0..scale.max(1))
                    .map(|res| periodize(&f, mp, np, res))
                    .collect();
                psi.push(Wavelet { j: scale, levels });
            }
        }
        let f = fourier(gabor(
            mp,
            np,
            0.8 * f64::from(1u32 << (j - 1)),
            0.0,
            0.0,
            1.0,
        ));
        let phi = (0..j).map(|res| periodize(&f, mp, np, res)).collect();
        let mut planner = FftPlanner::<f32>::new();
        let ffts = (0..=j)
            .map(|res| Fft2::new(&mut planner, mp >> res, np >> res))
            .collect();
        Ok(Self {
            j,
            h,
            w,
            pad,
            mp,
            np,
            phi,
            psi,
            ffts,
        })
    }

    /// Scattering coefficients of one `h×w` image into `out` (channel-major, as documented in
    /// the module).
    fn transform(&self, img: &[f32], out: &mut [f32], ws: &mut Workspace) {
        let (oh, ow) = (self.h >> self.j, self.w >> self.j);
        let (order01, order2) = out.split_at_mut((1 + self.psi.len()) * oh * ow);
        let mut first = order01.chunks_exact_mut(oh * ow);
        let mut second = order2.chunks_exact_mut(oh * ow);
        let Workspace {
            u0,
            u1,
            u2,
            lp,
            fft,
        } = ws;
        self.pad_into(img, u0);
        self.ffts[0].run(u0, false, &mut fft.tmp, &mut fft.scratch);
        // Order 0: x ⋆ φ.
        self.low_pass(u0, 0, lp, fft, first.next());
        for p1 in &self.psi {
            let j1 = p1.j;
            // Order 1: U₁ = FFT(|x ⋆ ψ₁|) at resolution j1, then U₁ ⋆ φ.
            self.wavelet_modulus(u0, 0, &p1.levels[0], j1, u1, fft);
            self.low_pass(u1, j1, lp, fft, first.next());
            // Order 2: ||x ⋆ ψ₁| ⋆ ψ₂| ⋆ φ for coarser ψ₂ (after all order-1 channels).
            for p2 in self.psi.iter().filter(|p| p.j > j1) {
                self.wavelet_modulus(u1, j1, &p2.levels[j1], p2.j, u2, fft);
                self.low_pass(u2, p2.j, lp, fft, second.next());
            }
        }
    }

    /// Reflect-pads `img` into `dst` (M'×N', complex).
    fn pad_into(&self, img: &[f32], dst: &mut Vec<C32>) {
        let (h, w) = (self.h as isize, self.w as isize);
        let reflect = |i: isize, n: isize| {
            let i = i.abs();
            if i >= n { 2 * (n - 1) - i } else { i }
        };
        dst.clear();
        for r in 0..self.mp as isize {
            let sr = reflect(r - self.pad[0] as isize, h) as usize;
            let row = &img[sr * self.w..(sr + 1) * self.w];
            for c in 0..self.np as isize {
                let sc = reflect(c - self.pad[1] as isize, w) as usize;
                dst.push(C32::new(row[sc], 0.0));
            }
        }
    }

    /// `dst` = FFT(|IFFT(subsample(src · filter, 2^(to − res)))|): `src` is a Fourier
    /// transform at resolution `res`, `dst` one at resolution `to`.
    fn wavelet_modulus(
        &self,
        src: &[C32],
        res: usize,
        filter: &[f32],
        to: usize,
        dst: &mut Vec<C32>,
        fft: &mut FftWork,
    ) {
        let (m, n) = (self.mp >> res, self.np >> res);
        filter_subsample(src, filter, m, n, 1 << (to - res), dst);
        let f = &self.ffts[to];
        f.run(dst, true, &mut fft.tmp, &mut fft.scratch);
        dst.iter_mut().for_each(|v| *v = C32::new(v.norm(), 0.0));
        f.run(dst, false, &mut fft.tmp, &mut fft.scratch);
    }

    /// Writes Re(IFFT(subsample(src · φ, 2^(J − res)))) without its one-sample border into
    /// `out` (`src` is a Fourier transform at resolution `res`).
    fn low_pass(
        &self,
        src: &[C32],
        res: usize,
        lp: &mut Vec<C32>,
        fft: &mut FftWork,
        out: Option<&mut [f32]>,
    ) {
        let Some(out) = out else { return };
        let jj = self.j;
        let (m, n) = (self.mp >> res, self.np >> res);
        filter_subsample(src, &self.phi[res], m, n, 1 << (jj - res), lp);
        self.ffts[jj].run(lp, true, &mut fft.tmp, &mut fft.scratch);
        let nj = self.np >> jj;
        let ow = self.w >> jj;
        for (r, row) in out.chunks_exact_mut(ow).enumerate() {
            let src = &lp[(r + 1) * nj + 1..(r + 1) * nj + 1 + ow];
            row.iter_mut().zip(src).for_each(|(o, v)| *o = v.re);
        }
    }
}

/// `dst` ((m/k)×(n/k)) = subsample_k(src · filter): the product with a real Fourier filter,
/// then the average of the k×k aliased blocks (a spatial subsampling by k, done in Fourier).
fn filter_subsample(src: &[C32], filter: &[f32], m: usize, n: usize, k: usize, dst: &mut Vec<C32>) {
    let (ms, ns) = (m / k, n / k);
    dst.clear();
    dst.resize(ms * ns, C32::new(0.0, 0.0));
    let inv = 1.0 / (k * k) as f32;
    for bi in 0..k {
        for r in 0..ms {
            let row = (bi * ms + r) * n;
            let d = &mut dst[r * ns..(r + 1) * ns];
            for bj in 0..k {
                let off = row + bj * ns;
                let (s, f) = (&src[off..off + ns], &filter[off..off + ns]);
                d.iter_mut()
                    .zip(s.iter().zip(f))
                    .for_each(|(d, (s, f))| *d += *s * (*f * inv));
            }
        }
    }
}

/// Kymatio's `periodize_filter_fft`: zero the frequencies that alias at resolution `res`
/// (the middle band of each axis), then sum the 2^res × 2^res blocks of the M×N Fourier
/// filter into an (M/2^res) × (N/2^res) one.
fn periodize(f: &[f64], m: usize, n: usize, res: usize) -> Vec<f32> {
    let k = 1usize << res;
    let (mr, nr) = (m / k, n / k);
    let band = |len: usize| {
        let start = (len as f64 * 0.5 / k as f64) as usize;
        let count = (len as f64 * (1.0 - 1.0 / k as f64)) as usize;
        start..start + count
    };
    let (rows, cols) = (band(m), band(n));
    let mut out = vec![0.0f64; mr * nr];
    for r in 0..m {
        if rows.contains(&r) {
            continue;
        }
        for c in (0..n).filter(|c| !cols.contains(c)) {
            out[(r % mr) * nr + c % nr] += f[r * n + c];
        }
    }
    out.into_iter().map(|v| v as f32).collect()
}

/// Kymatio's 2-D Gabor filter on an M×N grid, periodised over the 5×5 neighbouring copies:
/// g(u) = exp(−uᵀ A u + i ξ (u₀ cos θ + u₁ sin θ)) / (2·3.1415·σ²/slant), with
/// A = R(θ) diag(1, slant²) R(θ)ᵀ / (2σ²) (3.1415 is [`KYMATIO_PI`]).
fn gabor(m: usize, n: usize, sigma: f64, theta: f64, xi: f64, slant: f64) -> Vec<Complex<f64>> {
    let (c, s) = (theta.cos(), theta.sin());
    let s2 = slant * slant;
    let d = 2.0 * sigma * sigma;
    let a00 = (c * c + s * s * s2) / d;
    let a01 = 2.0 * c * s * (1.0 - s2) / d;
    let a11 = (s * s + c * c * s2) / d;
    let (fx, fy) = (xi * c, xi * s);
    let norm = 2.0 * KYMATIO_PI * sigma * sigma / slant;
    let mut out = vec![Complex::new(0.0, 0.0); m * n];
    for r in 0..m {
        for col in 0..n {
            let mut acc = Complex::new(0.0, 0.0);
            for ex in -2i64..=2 {
                for ey in -2i64..=2 {
                    let x = (r as i64 + ex * m as i64) as f64;
                    let y = (col as i64 + ey * n as i64) as f64;
                    let re = -(a00 * x * x + a01 * x * y + a11 * y * y);
                    acc += Complex::new(re, fx * x + fy * y).exp();
                }
            }
            out[r * n + col] = acc / norm;
        }
    }
    out
}

/// Kymatio's Morlet filter: the Gabor filter minus a multiple of its envelope so that it sums
/// to exactly zero, ψ = g_ξ − (Σ g_ξ / Σ g_0)·g_0.
fn morlet(m: usize, n: usize, sigma: f64, theta: f64, xi: f64, slant: f64) -> Vec<Complex<f64>> {
    let wave = gabor(m, n, sigma, theta, xi, slant);
    let envelope = gabor(m, n, sigma, theta, 0.0, slant);
    let k = wave.iter().sum::<Complex<f64>>() / envelope.iter().sum::<Complex<f64>>();
    wave.iter().zip(&envelope).map(|(w, e)| w - k * e).collect()
}

#[cfg(test)]
#[path = "scatter_tests.rs"]
mod tests;
