//! Max and average pooling over square windows (no padding).

use rayon::prelude::*;

use super::{GradMode, Layer, LayerSpec};
use crate::error::{Result, invalid};
use crate::kernels::{Window, sample_ranges, split_mut};
use crate::tensor::Tensor;

fn window(input: [usize; 3], kernel: usize, stride: usize, what: &str) -> Result<Window> {
    let [c, h, w] = input;
    Window::new(c, h, w, kernel, stride, 0).ok_or_else(|| {
        invalid(format!("{what} kernel {kernel} with stride {stride} does not fit input {input:?} (both must be > 0)"))
    })
}

/// Max pooling. The forward pass is separable (row maxima, then column maxima) and keeps no
/// indices; the backward pass finds each window's first maximum again (branch-free) and routes
/// the output gradient there, as PyTorch does for ties.
#[derive(Debug, Clone)]
pub struct MaxPool2d {
    win: Window,
    out_shape: [usize; 3],
}

impl MaxPool2d {
    /// Max pooling with a `kernel × kernel` window and the given stride over `[c, h, w]`.
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when kernel or stride is 0 or the window does not
    /// fit.
    pub fn new(input: [usize; 3], kernel: usize, stride: usize) -> Result<Self> {
        let win = window(input, kernel, stride, "max-pool")?;
        Ok(Self {
            win,
            out_shape: [win.c, win.oh, win.ow],
        })
    }
}

/// Max pooling of one `h × w` plane into `oh × ow`, using `rows` (`h × ow`) as scratch.
fn max_plane(w: &Window, x: &[f32], rows: &mut [f32], out: &mut [f32]) {
    let s = w.stride;
    for (xr, rr) in x.chunks_exact(w.w).zip(rows.chunks_exact_mut(w.ow)) {
        rr.copy_from_slice(&xr[..w.ow]);
        if s == 1 {
            for kj in 1..w.kw {
                rr.iter_mut()
                    .zip(&xr[kj..])
                    .for_each(|(r, v)| *r = r.max(*v));
            }
        } else {
            for (ox, r) in rr.iter_mut().enumerate() {
                *r = xr[ox * s..ox * s + w.kw]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max);
            }
        }
    }
    for (oy, orow) in out.chunks_exact_mut(w.ow).enumerate() {
        orow.copy_from_slice(&rows[oy * s * w.ow..(oy * s + 1) * w.ow]);
        for ki in 1..w.kh {
            let r = &rows[(oy * s + ki) * w.ow..(oy * s + ki + 1) * w.ow];
            orow.iter_mut().zip(r).for_each(|(o, v)| *o = o.max(*v));
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
        let ranges = sample_ranges(n);
        let ys = split_mut(y.data_mut(), w.c * oplane, &ranges);
        ranges.into_par_iter().zip(ys).for_each(|(r, ys)| {
            let mut rows = vec![0.0; w.h * w.ow];
            let xs = &x.data()[r.start * w.c * plane..r.end * w.c * plane];
            for (xp, yp) in xs.chunks_exact(plane).zip(ys.chunks_exact_mut(oplane)) {
                max_plane(&w, xp, &mut rows, yp);
            }
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
        gx.reset(n, &[w.c, w.h, w.w]);
        gx.fill_zero();
        let ranges = sample_ranges(n);
        let gxs = split_mut(gx.data_mut(), w.c * plane, &ranges);
        ranges.into_par_iter().zip(gxs).for_each(|(r, gxs)| {
            let o0 = r.start * w.c * oplane;
            let xs = &x.data()[r.start * w.c * plane..r.end * w.c * plane];
            for (p, (xp, gp)) in xs
                .chunks_exact(plane)
                .zip(gxs.chunks_exact_mut(plane))
                .enumerate()
            {
                let o = o0 + p * oplane;
                let gyp = &gy.data()[o..o + oplane];
                for oy in 0..w.oh {
                    for ox in 0..w.ow {
                        let g = gyp[oy * w.ow + ox];
                        // First maximum in scan order, found without data-dependent branches.
                        let base = oy * w.stride * w.w + ox * w.stride;
                        let (mut best, mut arg) = (xp[base], base);
                        for ki in 0..w.kh {
                            let row = base + ki * w.w;
                            for (j, &v) in xp[row..row + w.kw].iter().enumerate() {
                                let better = v > best;
                                arg = if better { row + j } else { arg };
                                best = if better { v } else { best };
                            }
                        }
                        gp[arg] += g;
                    }
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
