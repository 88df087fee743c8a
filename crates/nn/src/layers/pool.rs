//! Max and average pooling over square windows (no padding).

use multiversion::multiversion;
use rayon::prelude::*;

use super::{GradMode, Layer, LayerSpec};
use crate::error::{Result, invalid};
use crate::kernels::{Window, sample_ranges, split_mut};
use crate::tensor::Tensor;

fn window(input: [usize; 3], kernel: usize, stride: usize, what: &str) -> Result<Window> {
    let [c, h, w] = input;
    Window::new(c, h, w, kernel, stride, 0).ok_or_else(|| {
        let why = if kernel == 0 || stride == 0 {
            "kernel and stride must be > 0"
        } else {
            "the kernel is larger than the input"
        };
        invalid(format!(
            "{what} kernel {kernel} with stride {stride} does not fit input {input:?} ({why})"
        ))
    })
}

/// Max pooling. The forward pass is separable (row maxima, then column maxima) and records
/// where each window's first maximum lies (in scan order, as PyTorch routes ties); the backward
/// pass only routes each output gradient there.
#[derive(Debug, Clone)]
pub struct MaxPool2d {
    win: Window,
    out_shape: [usize; 3],
    /// For each output of the last forward pass, the index within its input plane of the
    /// window's first maximum.
    argmax: Vec<u32>,
    /// One row-maxima scratch per thread, kept between steps (no allocation in the step loop).
    rows: Vec<RowMax>,
}

impl MaxPool2d {
    /// Max pooling with a `kernel × kernel` window and the given stride over `[c, h, w]`.
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when kernel or stride is 0 or the window does not
    /// fit.
    pub fn new(input: [usize; 3], kernel: usize, stride: usize) -> Result<Self> {
        let win = window(input, kernel, stride, "max-pool")?;
        if win.h * win.w > u32::MAX as usize {
            return Err(invalid(format!(
                "max-pool input plane {}×{} is too large",
                win.h, win.w
            )));
        }
        Ok(Self {
            win,
            out_shape: [win.c, win.oh, win.ow],
            argmax: Vec::new(),
            rows: Vec::new(),
        })
    }
}

/// Row maxima of one plane: for each input row and output column, the window's maximum along
/// the row and its first position (index within the plane); `h·w` long so that the stride-1
/// path can index them like the plane. `col_value`/`col_at` hold that path's column pass.
#[derive(Debug, Clone, Default)]
struct RowMax {
    value: Vec<f32>,
    at: Vec<u32>,
    col_value: Vec<f32>,
    col_at: Vec<u32>,
}

/// Max pooling of one `h × w` plane into `oh × ow` values `out` and plane indices `arg`.
/// Strict `>` keeps the first maximum in scan order (rows first, then the row within).
#[inline(always)]
fn max_plane(w: &Window, x: &[f32], rows: &mut RowMax, out: &mut [f32], arg: &mut [u32]) {
    let s = w.stride;
    for (iy, xr) in x.chunks_exact(w.w).enumerate() {
        let (rv, ra) = (
            &mut rows.value[iy * w.ow..(iy + 1) * w.ow],
            &mut rows.at[iy * w.ow..(iy + 1) * w.ow],
        );
        let row0 = (iy * w.w) as u32;
        for (ox, (v, a)) in rv.iter_mut().zip(ra.iter_mut()).enumerate() {
            let (mut best, mut at) = (xr[ox * s], ox * s);
            for kj in 1..w.kw {
                let u = xr[ox * s + kj];
                let better = u > best;
                at = if better { ox * s + kj } else { at };
                best = if better { u } else { best };
            }
            *v = best;
            *a = row0 + at as u32;
        }
    }
    for (oy, (orow, arow)) in out
        .chunks_exact_mut(w.ow)
        .zip(arg.chunks_exact_mut(w.ow))
        .enumerate()
    {
        let first = oy * s * w.ow;
        orow.copy_from_slice(&rows.value[first..first + w.ow]);
        arow.copy_from_slice(&rows.at[first..first + w.ow]);
        for ki in 1..w.kh {
            let r = (oy * s + ki) * w.ow;
            let (rv, ra) = (&rows.value[r..r + w.ow], &rows.at[r..r + w.ow]);
            for (((o, a), &v), &at) in orow.iter_mut().zip(arow.iter_mut()).zip(rv).zip(ra) {
                take_if_greater(o, a, v, at);
            }
        }
    }
}

/// `(v, a) = (u, at)` when `u > v` (strictly: the first maximum stays; a NaN never replaces
/// nor is replaced), as bit masks rather than a branch: on real activations the comparison is
/// a coin flip that a branch mispredicts, and LLVM compiles a select back into its own place
/// as a conditional store, which blocks vectorisation.
#[inline(always)]
fn take_if_greater(v: &mut f32, a: &mut u32, u: f32, at: u32) {
    let m = u32::from(u > *v).wrapping_neg();
    *a = (*a & !m) | (at & m);
    *v = f32::from_bits((v.to_bits() & !m) | (u.to_bits() & m));
}

/// [`max_plane`] for stride 1 (the cnn models' pools), over the plane as one flat run: the
/// maximum of window row `kj` at flat position i is over `x[i..i + kw]`, and of the window at
/// i over the row maxima at `i, i + w, …`. Positions whose window wraps past a row end are
/// computed and dropped. Long runs instead of `ow`-wide rows let the compiler vectorise; the
/// scan order of ties (rows first, then within the row, strict `>`) is the same.
#[inline(always)]
fn max_plane_stride1(w: &Window, x: &[f32], rows: &mut RowMax, out: &mut [f32], arg: &mut [u32]) {
    let wd = w.w;
    // Row pass over every start i whose row window stays inside the plane.
    let nr = w.h * wd - (w.kw - 1);
    let (rv, ra) = (&mut rows.value[..nr], &mut rows.at[..nr]);
    rv.copy_from_slice(&x[..nr]);
    ra.iter_mut().enumerate().for_each(|(i, a)| *a = i as u32);
    for kj in 1..w.kw {
        for (i, ((v, a), &u)) in rv
            .iter_mut()
            .zip(ra.iter_mut())
            .zip(&x[kj..kj + nr])
            .enumerate()
        {
            take_if_greater(v, a, u, (i + kj) as u32);
        }
    }
    // Column pass over every output start oy·w + ox (the last reads row maximum h·w − kw).
    let nc = (w.oh - 1) * wd + w.ow;
    let (cv, ca) = (&mut rows.col_value[..nc], &mut rows.col_at[..nc]);
    cv.copy_from_slice(&rv[..nc]);
    ca.copy_from_slice(&ra[..nc]);
    for ki in 1..w.kh {
        let (uv, ua) = (&rv[ki * wd..ki * wd + nc], &ra[ki * wd..ki * wd + nc]);
        for (((v, a), &u), &at) in cv.iter_mut().zip(ca.iter_mut()).zip(uv).zip(ua) {
            take_if_greater(v, a, u, at);
        }
    }
    for (oy, (orow, arow)) in out
        .chunks_exact_mut(w.ow)
        .zip(arg.chunks_exact_mut(w.ow))
        .enumerate()
    {
        orow.copy_from_slice(&cv[oy * wd..oy * wd + w.ow]);
        arow.copy_from_slice(&ca[oy * wd..oy * wd + w.ow]);
    }
}

/// Max pooling of every plane of `xs` (planes of `h·w` values) into `ys` and `args`.
/// Compiled for each SIMD level and chosen at run time: the baseline x86-64 build vectorises
/// the comparisons 4 lanes wide, AVX-512 16.
#[multiversion(targets = "simd")]
fn max_planes(w: &Window, xs: &[f32], rows: &mut RowMax, ys: &mut [f32], args: &mut [u32]) {
    let (plane, oplane) = (w.h * w.w, w.oh * w.ow);
    for ((xp, yp), ap) in xs
        .chunks_exact(plane)
        .zip(ys.chunks_exact_mut(oplane))
        .zip(args.chunks_exact_mut(oplane))
    {
        if w.stride == 1 {
            max_plane_stride1(w, xp, rows, yp, ap);
        } else {
            max_plane(w, xp, rows, yp, ap);
        }
    }
}

impl Layer for MaxPool2d {
    fn spec(&self) -> LayerSpec {
        LayerSpec::MaxPool2d {
            kernel: self.win.kh,
            stride: self.win.stride,
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let (n, w) = (x.batch(), self.win);
        let (plane, oplane) = (w.h * w.w, w.oh * w.ow);
        y.reset(n, &self.out_shape);
        self.argmax.resize(n * w.c * oplane, 0);
        let ranges = sample_ranges(n);
        let ys = split_mut(y.data_mut(), w.c * oplane, &ranges);
        let args = split_mut(&mut self.argmax, w.c * oplane, &ranges);
        self.rows.resize_with(ranges.len(), RowMax::default);
        for rows in &mut self.rows {
            rows.value.resize(plane, 0.0);
            rows.at.resize(plane, 0);
            rows.col_value.resize(plane, 0.0);
            rows.col_at.resize(plane, 0);
        }
        ranges
            .into_par_iter()
            .zip(ys)
            .zip(args)
            .zip(&mut self.rows[..])
            .for_each(|(((r, ys), args), rows)| {
                let xs = &x.data()[r.start * w.c * plane..r.end * w.c * plane];
                max_planes(&w, xs, rows, ys, args);
            });
    }

    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        _mode: GradMode<'_>,
    ) {
        let Some(gx) = gx else { return };
        let (n, w) = (x.batch(), self.win);
        let (plane, oplane) = (w.h * w.w, w.oh * w.ow);
        assert_eq!(
            self.argmax.len(),
            n * w.c * oplane,
            "max-pool backward without its forward pass"
        );
        gx.reset(n, &[w.c, w.h, w.w]);
        gx.fill_zero();
        let ranges = sample_ranges(n);
        let gxs = split_mut(gx.data_mut(), w.c * plane, &ranges);
        let argmax = &self.argmax;
        ranges.into_par_iter().zip(gxs).for_each(|(r, gxs)| {
            let o = r.start * w.c * oplane..r.end * w.c * oplane;
            for ((gp, gyp), ap) in gxs
                .chunks_exact_mut(plane)
                .zip(gy.data()[o.clone()].chunks_exact(oplane))
                .zip(argmax[o].chunks_exact(oplane))
            {
                for (&g, &a) in gyp.iter().zip(ap) {
                    gp[a as usize] += g;
                }
            }
        });
    }
}

/// Average pooling.
#[derive(Debug, Clone)]
pub struct AvgPool2d {
    win: Window,
    out_shape: [usize; 3],
}

impl AvgPool2d {
    /// Average pooling with a `kernel × kernel` window and the given stride over `[c, h, w]`.
    ///
    /// # Errors
    /// As [`MaxPool2d::new`].
    pub fn new(input: [usize; 3], kernel: usize, stride: usize) -> Result<Self> {
        let win = window(input, kernel, stride, "avg-pool")?;
        Ok(Self {
            win,
            out_shape: [win.c, win.oh, win.ow],
        })
    }

    /// Calls `f(output index, input index)` for every (output, window member) pair of a record.
    fn for_each_pair(&self, mut f: impl FnMut(usize, usize)) {
        let w = self.win;
        let mut o = 0;
        for c in 0..w.c {
            for oy in 0..w.oh {
                for ox in 0..w.ow {
                    for ki in 0..w.kh {
                        let row = c * w.h * w.w + (oy * w.stride + ki) * w.w + ox * w.stride;
                        (row..row + w.kw).for_each(|j| f(o, j));
                    }
                    o += 1;
                }
            }
        }
    }
}

impl Layer for AvgPool2d {
    fn spec(&self) -> LayerSpec {
        LayerSpec::AvgPool2d {
            kernel: self.win.kh,
            stride: self.win.stride,
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let w = self.win;
        let (ilen, olen) = (w.c * w.h * w.w, w.c * w.oh * w.ow);
        let scale = 1.0 / (w.kh * w.kw) as f32;
        y.reset(x.batch(), &self.out_shape);
        y.fill_zero();
        for (xi, yi) in x
            .data()
            .chunks_exact(ilen)
            .zip(y.data_mut().chunks_exact_mut(olen))
        {
            self.for_each_pair(|o, j| yi[o] += scale * xi[j]);
        }
    }

    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        _mode: GradMode<'_>,
    ) {
        let Some(gx) = gx else { return };
        let w = self.win;
        let (ilen, olen) = (w.c * w.h * w.w, w.c * w.oh * w.ow);
        let scale = 1.0 / (w.kh * w.kw) as f32;
        gx.reset(x.batch(), &[w.c, w.h, w.w]);
        gx.fill_zero();
        for (gi, go) in gx
            .data_mut()
            .chunks_exact_mut(ilen)
            .zip(gy.data().chunks_exact(olen))
        {
            self.for_each_pair(|o, j| gi[j] += scale * go[o]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::check_layer;

    #[test]
    fn maxpool_gradient_matches_finite_differences() {
        check_layer(
            &mut MaxPool2d::new([2, 5, 5], 2, 1).unwrap(),
            &[3, 2, 5, 5],
            1,
        );
        check_layer(
            &mut MaxPool2d::new([1, 6, 6], 3, 2).unwrap(),
            &[2, 1, 6, 6],
            2,
        );
    }

    /// Per window, by definition: the value and plane index of the first maximum in scan order.
    fn naive_max(w: &Window, x: &[f32]) -> (Vec<f32>, Vec<u32>) {
        let mut out = (Vec::new(), Vec::new());
        for (oy, ox) in (0..w.oh).flat_map(|oy| (0..w.ow).map(move |ox| (oy, ox))) {
            let mut best = (f32::NAN, u32::MAX);
            for (ki, kj) in (0..w.kh).flat_map(|ki| (0..w.kw).map(move |kj| (ki, kj))) {
                let i = (oy * w.stride + ki) * w.w + ox * w.stride + kj;
                if best.1 == u32::MAX || x[i] > best.0 {
                    best = (x[i], i as u32);
                }
            }
            out.0.push(best.0);
            out.1.push(best.1);
        }
        out
    }

    fn run_plane(
        f: fn(&Window, &[f32], &mut RowMax, &mut [f32], &mut [u32]),
        w: &Window,
        x: &[f32],
    ) -> (Vec<u32>, Vec<u32>) {
        let len = w.h * w.w;
        let mut rows = RowMax {
            value: vec![0.0; len],
            at: vec![0; len],
            col_value: vec![0.0; len],
            col_at: vec![0; len],
        };
        let (mut v, mut a) = (vec![0.0; w.t()], vec![0; w.t()]);
        f(w, x, &mut rows, &mut v, &mut a);
        (v.iter().map(|x| x.to_bits()).collect(), a)
    }

    /// Both plane kernels (the flat stride-1 one and the general one) against the definition,
    /// with ties (few distinct values) and kernels from 1 to the whole plane; with a NaN
    /// (where the separable scan order is the contract) the two kernels agree bit for bit.
    #[test]
    fn max_plane_kernels_match_the_definition() {
        let (h, wd) = (7, 6);
        let x: Vec<f32> = (0..h * wd).map(|i| ((i * 7) % 5) as f32).collect();
        let mut x_nan = x.clone();
        x_nan[9] = f32::NAN;
        for (k, s) in [(1, 1), (2, 1), (3, 1), (6, 1), (2, 2), (3, 2), (2, 3)] {
            let w = Window::new(1, h, wd, k, s, 0).unwrap();
            let (want_v, want_a) = naive_max(&w, &x);
            let want = (want_v.iter().map(|x| x.to_bits()).collect(), want_a);
            assert_eq!(run_plane(max_plane, &w, &x), want, "general, k {k} s {s}");
            if s == 1 {
                assert_eq!(
                    run_plane(max_plane_stride1, &w, &x),
                    want,
                    "stride 1, k {k}"
                );
                assert_eq!(
                    run_plane(max_plane_stride1, &w, &x_nan),
                    run_plane(max_plane, &w, &x_nan),
                    "NaN, k {k}"
                );
            }
        }
    }

    #[test]
    fn avgpool_gradient_matches_finite_differences() {
        check_layer(
            &mut AvgPool2d::new([2, 5, 4], 2, 2).unwrap(),
            &[2, 2, 5, 4],
            3,
        );
    }

    #[test]
    fn maxpool_picks_the_maximum() {
        let mut p = MaxPool2d::new([1, 2, 2], 2, 1).unwrap();
        let x = Tensor::from_vec(&[1, 1, 2, 2], vec![1.0, 5.0, -2.0, 3.0]).unwrap();
        let mut y = Tensor::default();
        p.forward(&x, &mut y);
        assert_eq!(y.data(), &[5.0]);
    }

    #[test]
    fn zero_stride_is_refused() {
        assert!(
            MaxPool2d::new([1, 4, 4], 2, 0)
                .unwrap_err()
                .to_string()
                .contains("stride 0")
        );
    }
}
