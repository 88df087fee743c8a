//! CPU kernels kept apart from layer logic: a safe single-threaded SGEMM wrapper around
//! `matrixmultiply` (chosen over the `gemm` crate by measurement at the CNN's shapes, see the
//! crate docs), a packing-free product for the convolutions' small per-sample products
//! ([`broadcast_gemm`]), im2col/col2im for convolutions, and the sample-range split used for
//! data-parallel work over a batch.

use std::ops::Range;

use multiversion::multiversion;

mod broadcast_gemm;
pub(crate) use broadcast_gemm::broadcast_gemm;

/// `C = alpha · op(A) · op(B) + beta · C` for contiguous row-major matrices, single-threaded.
///
/// `op(A)` is `m × k`: `A` is stored `m × k`, or `k × m` when `a_t`. `op(B)` is `k × n`: `B` is
/// stored `k × n`, or `n × k` when `b_t`. `C` is `m × n`. With `beta == 0` the old contents of
/// `C` are not read.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    beta: f32,
    c: &mut [f32],
) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "gemm buffer too small"
    );
    if m == 0 || n == 0 {
        return;
    }
    let (rsa, csa) = strides(m, k, a_t);
    let (rsb, csb) = strides(k, n, b_t);
    // SAFETY: the assertion above guarantees every index the strides can reach
    // (max (m-1)·rs + (k-1)·cs < m·k, and likewise for B and C) lies inside the slices, and
    // `c` is a unique borrow so it does not alias `a` or `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Row and column strides of a `rows × cols` operand stored row-major, or transposed (stored
/// `cols × rows`) when `t`.
fn strides(rows: usize, cols: usize, t: bool) -> (isize, isize) {
    if t {
        (1, rows as isize)
    } else {
        (cols as isize, 1)
    }
}

/// Multiply-adds below which [`par_gemm`] stays on the calling thread (a task costs a few
/// microseconds; this is about 30 µs of work).
const PAR_GEMM_MIN_MACS: usize = 1 << 17;
/// Rows (or columns) of C per parallel task at least: a multiple of the SGEMM kernels' tiles,
/// so that every task's ragged edge is the whole product's.
const PAR_GEMM_MIN_ROWS: usize = 32;

/// [`gemm`] with C split across the rayon threads (for layers, such as `Linear`, whose one
/// product is the whole step's work): into row blocks, or into column blocks when C is wider
/// than tall. Each task packs its own share of one operand and all of the other, so splitting
/// the longer side packs less (the MLP's first layer, 256 × 784 by 784 × 512, packs a fifth
/// less by columns). Every element of C is still computed by the same single-threaded kernel
/// over the same `k` order, so the result does not depend on the number of threads (a seeded
/// run gives the same model on any machine width).
#[allow(clippy::too_many_arguments)]
pub(crate) fn par_gemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    beta: f32,
    c: &mut [f32],
) {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads();
    let by_cols = n > m;
    if threads < 2 || m.max(n) < 2 * PAR_GEMM_MIN_ROWS || m * k * n < PAR_GEMM_MIN_MACS {
        return gemm(m, k, n, alpha, a, a_t, b, b_t, beta, c);
    }
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "gemm buffer too small"
    );
    let block = |len: usize| {
        len.div_ceil(threads)
            .next_multiple_of(PAR_GEMM_MIN_ROWS)
            .max(PAR_GEMM_MIN_ROWS)
    };
    if by_cols {
        let cols = block(n);
        let c = SharedC(c.as_mut_ptr());
        let (rsa, csa) = strides(m, k, a_t);
        let (rsb, csb) = strides(k, n, b_t);
        (0..n.div_ceil(cols)).into_par_iter().for_each(|j| {
            let (j0, nj) = (j * cols, cols.min(n - j * cols));
            // SAFETY: A and B are read through indices inside their slices (asserted above:
            // column j0 of op(B) starts j0 column strides in, and j0 + nj ≤ n; all of A is
            // read); the tasks write disjoint column blocks j0..j0 + nj of C's rows (row
            // stride n, inside c's m·n values), and `c` is a unique borrow held until every
            // task has finished.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    k,
                    nj,
                    alpha,
                    a.as_ptr(),
                    rsa,
                    csa,
                    b.as_ptr().add(j0 * csb as usize),
                    rsb,
                    csb,
                    beta,
                    c.at(j0),
                    n as isize,
                    1,
                );
            }
        });
        return;
    }
    let rows = block(m);
    c[..m * n]
        .par_chunks_mut(rows * n)
        .enumerate()
        .for_each(|(j, cj)| {
            let (i0, mj) = (j * rows, cj.len() / n);
            if a_t {
                // Rows i0.. of op(A) are columns i0.. of the stored k × m matrix.
                gemm_cols_of_at(mj, k, n, alpha, &a[i0..], m, b, b_t, beta, cj);
            } else {
                gemm(
                    mj,
                    k,
                    n,
                    alpha,
                    &a[i0 * k..(i0 + mj) * k],
                    false,
                    b,
                    b_t,
                    beta,
                    cj,
                );
            }
        });
}

/// C's storage, shared by the column-block tasks of [`par_gemm`] (each writes only its own
/// columns).
struct SharedC(*mut f32);

// SAFETY: the pointer is only offset and written through by tasks that touch disjoint
// elements, while the `&mut` it came from is held by their caller.
unsafe impl Sync for SharedC {}

impl SharedC {
    /// The address of column `j0` of row 0.
    fn at(&self, j0: usize) -> *mut f32 {
        self.0.wrapping_add(j0)
    }
}

/// `C = alpha · Aᵀ · op(B) + beta · C` where `A` is the leading `mj` columns of a stored
/// `k × lda` matrix starting at `a[0]` (so `Aᵀ` is `mj × k`).
#[allow(clippy::too_many_arguments)]
fn gemm_cols_of_at(
    mj: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    b_t: bool,
    beta: f32,
    c: &mut [f32],
) {
    assert!(
        mj <= lda && (k == 0 || a.len() > (k - 1) * lda + mj - 1) && b.len() >= k * n,
        "gemm buffer too small"
    );
    assert!(c.len() >= mj * n, "gemm buffer too small");
    if mj == 0 || n == 0 {
        return;
    }
    let (rsb, csb) = strides(k, n, b_t);
    // SAFETY: element (i, l) of Aᵀ is a[l·lda + i] with i < mj ≤ lda and l < k, at most
    // (k−1)·lda + mj − 1 < a.len() (asserted); B and C as in `gemm`; `c` is a unique borrow.
    unsafe {
        matrixmultiply::sgemm(
            mj,
            k,
            n,
            alpha,
            a.as_ptr(),
            1,
            lda as isize,
            b.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Geometry of a 2-D convolution or pooling window over one `c × h × w` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: usize,
    pub pad: usize,
    pub oh: usize,
    pub ow: usize,
}

impl Window {
    /// The window geometry, or `None` when the kernel does not fit the padded input or a
    /// padded side overflows `usize` (a declared padding of 2⁶³ must not wrap).
    pub fn new(c: usize, h: usize, w: usize, k: usize, stride: usize, pad: usize) -> Option<Self> {
        let padded = |len: usize| pad.checked_mul(2)?.checked_add(len);
        let (ph, pw) = (padded(h)?, padded(w)?);
        if stride == 0 || k == 0 || ph < k || pw < k {
            return None;
        }
        let oh = (ph - k) / stride + 1;
        let ow = (pw - k) / stride + 1;
        Some(Self {
            c,
            h,
            w,
            kh: k,
            kw: k,
            stride,
            pad,
            oh,
            ow,
        })
    }

    /// Rows of the unfolded matrix: `c·kh·kw`.
    pub fn d(&self) -> usize {
        self.c * self.kh * self.kw
    }

    /// Output positions `oh·ow` (columns of the unfolded matrix).
    pub fn t(&self) -> usize {
        self.oh * self.ow
    }

    /// For kernel offset `k` along an axis of length `len`, the output positions `o` whose input
    /// index `o·stride + k − pad` lies in `0..len`.
    fn valid(&self, k: usize, len: usize, out: usize) -> Range<usize> {
        let s = self.stride;
        // first o with o*s + k >= pad
        let lo = if k >= self.pad {
            0
        } else {
            (self.pad - k).div_ceil(s)
        };
        // last o with o*s + k - pad <= len - 1  ⇔ o*s <= len - 1 + pad - k
        let hi = if len + self.pad > k {
            ((len - 1 + self.pad - k) / s + 1).min(out)
        } else {
            0
        };
        lo..hi.max(lo)
    }

    /// The valid output ranges of every kernel row and column: [`Window::valid`] hoisted out of
    /// the channel loop (its divisions otherwise cost as much as the copies of a small layer).
    fn spans(&self) -> (Vec<Range<usize>>, Vec<Range<usize>>) {
        let ys = (0..self.kh)
            .map(|ki| self.valid(ki, self.h, self.oh))
            .collect();
        let xs = (0..self.kw)
            .map(|kj| self.valid(kj, self.w, self.ow))
            .collect();
        (ys, xs)
    }

    /// Unfolds one record `x` (`c × h × w`) into `cols` (`d × t`, row `(c, ki, kj)`, column
    /// `(oy, ox)`); out-of-bounds (padding) entries are zero.
    /// The reference for [`UnfoldMap::im2col`].
    #[cfg(test)]
    pub fn im2col(&self, x: &[f32], cols: &mut [f32]) {
        self.im2col_generic(x, cols);
    }

    /// [`Window::im2col`] for any element type (zero is `T::default()`).
    fn im2col_generic<T: Copy + Default>(&self, x: &[T], cols: &mut [T]) {
        let (t, s) = (self.t(), self.stride);
        let (ys_by_ki, xs_by_kj) = self.spans();
        for c in 0..self.c {
            let xc = &x[c * self.h * self.w..(c + 1) * self.h * self.w];
            for (ki, ys) in ys_by_ki.iter().enumerate() {
                for (kj, xs) in xs_by_kj.iter().enumerate() {
                    let row = (c * self.kh + ki) * self.kw + kj;
                    let dst = &mut cols[row * t..(row + 1) * t];
                    if ys.len() < self.oh || xs.len() < self.ow {
                        dst.fill(T::default());
                    }
                    if xs.is_empty() {
                        continue;
                    }
                    let x0 = xs.start * s + kj - self.pad;
                    for oy in ys.clone() {
                        let iy = oy * s + ki - self.pad;
                        let src = &xc[iy * self.w + x0..];
                        let drow = &mut dst[oy * self.ow + xs.start..oy * self.ow + xs.end];
                        gather_strided(drow, src, s);
                    }
                }
            }
        }
    }

    /// Adjoint of [`Window::im2col`]: adds the unfolded gradient `cols` (`d × t`) into `gx`
    /// (`c × h × w`), which the caller zeroes first. The reference for [`UnfoldMap::col2im`].
    #[cfg(test)]
    pub fn col2im(&self, cols: &[f32], gx: &mut [f32]) {
        let (t, s) = (self.t(), self.stride);
        let (ys_by_ki, xs_by_kj) = self.spans();
        for c in 0..self.c {
            let gc = &mut gx[c * self.h * self.w..(c + 1) * self.h * self.w];
            for (ki, ys) in ys_by_ki.iter().enumerate() {
                for (kj, xs) in xs_by_kj.iter().enumerate() {
                    if xs.is_empty() {
                        continue;
                    }
                    let row = (c * self.kh + ki) * self.kw + kj;
                    let src = &cols[row * t..(row + 1) * t];
                    let x0 = xs.start * s + kj - self.pad;
                    for oy in ys.clone() {
                        let iy = oy * s + ki - self.pad;
                        let drow = &mut gc[iy * self.w + x0..];
                        let srow = &src[oy * self.ow + xs.start..oy * self.ow + xs.end];
                        scatter_add_strided(drow, srow, s);
                    }
                }
            }
        }
    }
}

/// Marks a padding entry in an [`UnfoldMap`].
const PAD: u32 = u32::MAX;

/// [`Window::im2col`] as a table: for each entry of the unfolded `d × t` matrix, the index of
/// the input value it copies, or [`PAD`]. Built once per layer, it turns unfolding into one
/// flat gather: the row-wise unfold copies runs of 5–14 values (the cnn's output widths), and
/// its per-run bookkeeping cost several times the copy itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct UnfoldMap {
    src: Vec<u32>,
    in_len: usize,
}

impl UnfoldMap {
    /// The table for `win`, or `None` when a record has `u32::MAX` values or more.
    pub fn new(win: &Window) -> Option<Self> {
        let in_len = win.c * win.h * win.w;
        if in_len >= PAD as usize {
            return None;
        }
        // Unfold the indices themselves (exact in f64 below 2⁵³) with the reference unfold,
        // shifted by one so that padding (zero) stays apart from index 0.
        let idx: Vec<f64> = (0..in_len).map(|i| i as f64 + 1.0).collect();
        let mut cols = vec![0.0f64; win.d() * win.t()];
        win.im2col_generic(&idx, &mut cols);
        let src = cols
            .iter()
            .map(|&v| if v == 0.0 { PAD } else { (v - 1.0) as u32 })
            .collect();
        Some(Self { src, in_len })
    }

    /// Unfolds one record `x` into `cols` (both as for [`Window::im2col`]).
    // Inlined so that each SIMD version of its caller gets its own gather loop.
    #[inline]
    pub fn im2col(&self, x: &[f32], cols: &mut [f32]) {
        let x = &x[..self.in_len];
        for (c, &i) in cols[..self.src.len()].iter_mut().zip(&self.src) {
            *c = x.get(i as usize).copied().unwrap_or(0.0);
        }
    }

    /// Adds the unfolded gradient `cols` into `gx` (as for [`Window::col2im`]).
    pub fn col2im(&self, cols: &[f32], gx: &mut [f32]) {
        let gx = &mut gx[..self.in_len];
        for (&c, &i) in cols[..self.src.len()].iter().zip(&self.src) {
            if let Some(g) = gx.get_mut(i as usize) {
                *g += c;
            }
        }
    }
}

/// `dst[j] = src[j·s]` for every j (`dst` non-empty). Stride 1 and 2 (every strided layer of
/// the built-in models) get loops the compiler vectorises.
fn gather_strided<T: Copy>(dst: &mut [T], src: &[T], s: usize) {
    let n = dst.len();
    match s {
        1 => dst.copy_from_slice(&src[..n]),
        2 => {
            // The last element may be the plane's last value, with no partner for a pair.
            let (head, last) = dst.split_at_mut(n - 1);
            head.iter_mut()
                .zip(src.chunks_exact(2))
                .for_each(|(d, pair)| *d = pair[0]);
            last[0] = src[(n - 1) * 2];
        }
        _ => dst
            .iter_mut()
            .zip(src.iter().step_by(s))
            .for_each(|(d, v)| *d = *v),
    }
}

/// `dst[j·s] += src[j]` for every j (`src` non-empty): the adjoint of [`gather_strided`].
#[cfg(test)]
fn scatter_add_strided(dst: &mut [f32], src: &[f32], s: usize) {
    let n = src.len();
    match s {
        1 => dst.iter_mut().zip(src).for_each(|(d, v)| *d += v),
        2 => {
            let (head, last) = src.split_at(n - 1);
            dst.chunks_exact_mut(2)
                .zip(head)
                .for_each(|(pair, v)| pair[0] += v);
            dst[(n - 1) * 2] += last[0];
        }
        _ => dst
            .iter_mut()
            .step_by(s)
            .zip(src)
            .for_each(|(d, v)| *d += v),
    }
}

/// Splits `0..n` samples into at most one contiguous range per rayon thread (fewer for small
/// batches), so each thread runs single-threaded kernels on its share — no nested parallelism.
pub(crate) fn sample_ranges(n: usize) -> Vec<Range<usize>> {
    let parts = rayon::current_num_threads().clamp(1, n.max(1));
    let per = n.div_ceil(parts).max(1);
    (0..parts)
        .map(|p| (p * per).min(n)..((p + 1) * per).min(n))
        .filter(|r| !r.is_empty())
        .collect()
}

/// Splits `buf` into one slice per range, `per` values per sample. An empty `buf` gives empty
/// slices (for optional outputs).
pub(crate) fn split_mut<'a, T>(
    mut buf: &'a mut [T],
    per: usize,
    ranges: &[Range<usize>],
) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let len = if buf.is_empty() { 0 } else { r.len() * per };
        let (head, tail) = std::mem::take(&mut buf).split_at_mut(len);
        out.push(head);
        buf = tail;
    }
    out
}

/// Sum of squares.
#[multiversion(targets = "simd")]
pub(crate) fn sq_norm(x: &[f32]) -> f32 {
    // 32 independent partial sums (four AVX registers, enough adds in flight to hide their
    // latency): a single running sum is a chain the compiler may not reorder (f32 addition is
    // not associative), so it would neither vectorise nor pipeline. Over conv2's 8,224-value
    // per-sample gradients that chain was most of the private step's extra cost.
    const LANES: usize = 32;
    let mut acc = [0.0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v * v;
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    acc.iter().sum::<f32>() + tail
}

/// Adds `src` into `dst` element-wise.
pub(crate) fn add_into(dst: &mut [f32], src: &[f32]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
            }
        }
        c
    }

    fn transpose(r: usize, c: usize, x: &[f32]) -> Vec<f32> {
        let mut t = vec![0.0; r * c];
        for i in 0..r {
            for j in 0..c {
                t[j * r + i] = x[i * c + j];
            }
        }
        t
    }

    #[test]
    fn gemm_all_transposes_match_naive() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let want = naive(m, k, n, &a, &b);
        let at = transpose(m, k, &a);
        let bt = transpose(k, n, &b);
        for (aa, ta) in [(&a, false), (&at, true)] {
            for (bb, tb) in [(&b, false), (&bt, true)] {
                let mut c = vec![1.0; m * n];
                gemm(m, k, n, 2.0, aa, ta, bb, tb, 0.5, &mut c);
                for (g, w) in c.iter().zip(&want) {
                    assert!((g - (2.0 * w + 0.5)).abs() < 1e-5);
                }
            }
        }
    }

    /// The row- and column-split products equal the single-threaded one bit for bit, for every
    /// transpose and for sizes that leave a ragged last block, on 1, 2 and 3 threads.
    #[test]
    fn par_gemm_is_gemm_bit_for_bit_on_any_thread_count() {
        for (m, k, n) in [
            (200, 70, 60),
            (97, 130, 33),
            (64, 40, 1),
            (60, 70, 200),
            (33, 130, 97),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
            let c0: Vec<f32> = (0..m * n).map(|i| (i as f32 * 0.05).sin()).collect();
            let at = transpose(m, k, &a);
            let bt = transpose(k, n, &b);
            for (aa, ta) in [(&a, false), (&at, true)] {
                for (bb, tb) in [(&b, false), (&bt, true)] {
                    let mut want = c0.clone();
                    gemm(m, k, n, 1.5, aa, ta, bb, tb, 0.5, &mut want);
                    for threads in [1, 2, 3] {
                        let pool = rayon::ThreadPoolBuilder::new()
                            .num_threads(threads)
                            .build()
                            .unwrap();
                        let mut c = c0.clone();
                        pool.install(|| par_gemm(m, k, n, 1.5, aa, ta, bb, tb, 0.5, &mut c));
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&c), bits(&want), "{m}x{k}x{n} a_t={ta} b_t={tb}");
                    }
                }
            }
        }
    }

    #[test]
    fn col2im_is_adjoint_of_im2col() {
        // <im2col(x), y> == <x, col2im(y)> for all x, y: checks padding and stride book-keeping.
        for (k, s, p) in [
            (3, 1, 1),
            (4, 2, 0),
            (8, 2, 3),
            (2, 1, 0),
            (3, 3, 1),
            (2, 2, 1),
        ] {
            let win = Window::new(2, 9, 7, k, s, p).unwrap();
            let x: Vec<f32> = (0..2 * 9 * 7).map(|i| (i as f32 * 0.3).sin()).collect();
            let y: Vec<f32> = (0..win.d() * win.t())
                .map(|i| (i as f32 * 0.7).cos())
                .collect();
            let mut cols = vec![0.0; win.d() * win.t()];
            win.im2col(&x, &mut cols);
            let mut gx = vec![0.0; x.len()];
            win.col2im(&y, &mut gx);
            let lhs: f32 = cols.iter().zip(&y).map(|(a, b)| a * b).sum();
            let rhs: f32 = x.iter().zip(&gx).map(|(a, b)| a * b).sum();
            assert!(
                (lhs - rhs).abs() < 1e-3 * lhs.abs().max(1.0),
                "{k} {s} {p}: {lhs} {rhs}"
            );
        }
    }

    #[test]
    fn im2col_matches_the_definition() {
        // cols[(c, ki, kj), (oy, ox)] = x[c, oy·s + ki − p, ox·s + kj − p], 0 outside.
        for (k, s, p) in [
            (3, 1, 1),
            (4, 2, 0),
            (8, 2, 3),
            (3, 3, 1),
            (2, 2, 1),
            (3, 2, 0),
        ] {
            let (c, h, w) = (2, 9, 7);
            let win = Window::new(c, h, w, k, s, p).unwrap();
            let x: Vec<f32> = (0..c * h * w).map(|i| i as f32 + 1.0).collect();
            let mut cols = vec![f32::NAN; win.d() * win.t()];
            win.im2col(&x, &mut cols);
            for (row, col) in (0..win.d()).flat_map(|r| (0..win.t()).map(move |t| (r, t))) {
                let (ch, ki, kj) = (row / (k * k), row / k % k, row % k);
                let (oy, ox) = (col / win.ow, col % win.ow);
                let (iy, ix) = (
                    (oy * s + ki) as isize - p as isize,
                    (ox * s + kj) as isize - p as isize,
                );
                let inside = (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix);
                let want = if inside {
                    x[ch * h * w + iy as usize * w + ix as usize]
                } else {
                    0.0
                };
                assert_eq!(
                    cols[row * win.t() + col],
                    want,
                    "k {k} s {s} p {p} row {row} col {col}"
                );
            }
        }
    }

    /// The table-driven unfold and its adjoint equal the row-wise reference bit for bit, over
    /// strides, paddings (including padding wider than the stride and a kernel covering the
    /// whole padded input), channel counts and the cnn model's two layers.
    #[test]
    fn unfold_map_matches_the_reference_unfold() {
        let shapes = [
            (2, 9, 7, 3, 1, 1),
            (2, 9, 7, 4, 2, 0),
            (1, 28, 28, 8, 2, 3),
            (16, 13, 13, 4, 2, 0),
            (3, 9, 7, 3, 3, 1),
            (2, 5, 6, 2, 2, 1),
            (1, 4, 4, 6, 1, 1),
            (2, 3, 3, 1, 1, 0),
        ];
        for (c, h, w, k, s, p) in shapes {
            let win = Window::new(c, h, w, k, s, p).unwrap();
            let map = UnfoldMap::new(&win).unwrap();
            let x: Vec<f32> = (0..c * h * w).map(|i| (i as f32 * 0.3).sin()).collect();
            let mut want = vec![f32::NAN; win.d() * win.t()];
            win.im2col(&x, &mut want);
            let mut got = vec![f32::NAN; win.d() * win.t()];
            map.im2col(&x, &mut got);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "im2col {c}x{h}x{w} k{k} s{s} p{p}");
            let y: Vec<f32> = (0..want.len()).map(|i| (i as f32 * 0.7).cos()).collect();
            let mut gx_want = vec![0.0; x.len()];
            win.col2im(&y, &mut gx_want);
            let mut gx_got = vec![0.0; x.len()];
            map.col2im(&y, &mut gx_got);
            // Same terms, possibly added in another order: relative 1e-6.
            for (j, (a, b)) in gx_got.iter().zip(&gx_want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                    "col2im {c}x{h}x{w} k{k} s{s} p{p} at {j}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn im2col_picks_the_right_pixel() {
        let win = Window::new(1, 4, 4, 2, 2, 1).unwrap();
        assert_eq!((win.oh, win.ow), (3, 3));
        let x: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let mut cols = vec![0.0; win.d() * win.t()];
        win.im2col(&x, &mut cols);
        // row (ki=1,kj=1), output (1,1) reads input (1*2+1-1, 1*2+1-1) = (2,2) = 10.
        assert_eq!(cols[3 * 9 + 4], 10.0);
        // row (0,0), output (0,0) reads (-1,-1): padding.
        assert_eq!(cols[0], 0.0);
    }

    #[test]
    fn sq_norm_matches_the_sum_of_squares_at_every_length() {
        // Lengths around the 32-lane blocks: empty, remainder only, whole blocks, both.
        for len in [0, 1, 31, 32, 33, 100, 784, 8224] {
            let x: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let want: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            let got = f64::from(sq_norm(&x));
            assert!(
                (got - want).abs() <= 1e-5 * (1.0 + want),
                "{len}: {got} vs {want}"
            );
        }
        // A non-finite value stays visible (the clipping drops such samples).
        assert!(sq_norm(&[1.0, f32::INFINITY]).is_infinite());
        assert!(sq_norm(&[f32::NAN; 40]).is_nan());
    }

    #[test]
    fn ranges_cover_the_batch() {
        for n in [1, 2, 3, 17, 256] {
            let r = sample_ranges(n);
            assert_eq!(r.first().unwrap().start, 0);
            assert_eq!(r.last().unwrap().end, n);
            assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        }
    }
}
