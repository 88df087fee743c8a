//! A matrix product without packing, for the small per-sample products of convolutions.
//!
//! `matrixmultiply` copies ("packs") both operands into its own layout on every call. At a
//! convolution's per-sample shapes (the `cnn` model's conv2: 32 output channels, 25 positions,
//! 256 unfolded inputs) each packed value is used only a few dozen times, so packing cost as
//! much as the multiply-adds: 18% of a CNN step against 22% for the kernel. Here B is read in
//! place, a register block of 8 rows × 32 columns of C at a time: per step along k, two vector
//! loads from one row of B and one value of A per row, broadcast. B's rows must be contiguous;
//! A may have any strides (its values are read one at a time). Any n: the last register of a
//! row is masked. Written with AVX-512 intrinsics: the compiler's own vectorisation of the
//! same loops shuffled values between registers and ran three times slower than
//! `matrixmultiply`. On the 2-core Xeon, using it for the convolutions' forward, input-gradient
//! and per-sample weight-gradient products made CNN steps 22% faster (private) and 14%
//! (non-private); for the MLP's large products `matrixmultiply` stays faster (7%), its packing
//! being spread over many more uses.

/// `C = alpha · A · B + beta · C` with C row-major `m × n`, B row-major `k × n`, and A's element
/// (i, l) at `a[i·rsa + l·csa]`. With `beta == 0` the old contents of C are not read. Without
/// AVX-512 (or off x86-64) this is `matrixmultiply`'s product on the same strides.
#[allow(clippy::too_many_arguments)]
pub(crate) fn broadcast_gemm(
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    beta: f32,
    c: &mut [f32],
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        c.len() >= m * n && b.len() >= k * n && (k == 0 || a.len() > (m - 1) * rsa + (k - 1) * csa),
        "gemm buffer too small"
    );
    let p = Problem {
        m,
        k,
        n,
        alpha,
        a,
        rsa,
        csa,
        b,
        beta,
    };
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
        // SAFETY: the processor has the features `avx512::product` is compiled for; the
        // assertion above bounds every index it reads or writes (module `avx512`).
        return unsafe { avx512::product(&p, c) };
    }
    portable(&p, c);
}

/// `matrixmultiply`'s product on the same strides (no AVX-512, or not x86-64).
fn portable(p: &Problem, c: &mut [f32]) {
    let Problem {
        m,
        k,
        n,
        alpha,
        a,
        rsa,
        csa,
        b,
        beta,
    } = *p;
    // SAFETY: `broadcast_gemm` asserted that every index the strides reach lies inside the
    // slices; `c` is a unique borrow, so it aliases neither `a` nor `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            n as isize,
            1,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// The operands of one product (C apart, the one mutable operand).
#[derive(Clone, Copy)]
struct Problem<'a> {
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &'a [f32],
    rsa: usize,
    csa: usize,
    b: &'a [f32],
    beta: f32,
}

/// The AVX-512 product: column blocks of 32 (two registers), the last of them partial; within
/// each, blocks of 8 rows, then single rows. 8 × 32 is 16
/// accumulator registers of the 32, enough independent multiply-adds to keep both FMA units
/// busy.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::Problem;

    /// # Safety
    /// The processor has AVX-512F and FMA; `c` and the operands hold the sizes that
    /// [`super::broadcast_gemm`] asserts.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn product(p: &Problem, c: &mut [f32]) {
        let mut j0 = 0;
        while j0 + 32 <= p.n {
            // SAFETY (here and below): columns j0..j0 + 16·NV lie inside 0..n.
            unsafe { rows::<2>(p, j0, c) };
            j0 += 32;
        }
        // The last 1–31 columns: their last register's lanes past n masked off (masked loads
        // and stores do not touch memory in those lanes).
        if j0 + 16 < p.n {
            unsafe { rows::<2>(p, j0, c) };
        } else if j0 < p.n {
            unsafe { rows::<1>(p, j0, c) };
        }
    }

    /// Columns `j0..min(j0 + 16·NV, n)` of every row (only the last register may be partial).
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn rows<const NV: usize>(p: &Problem, j0: usize, c: &mut [f32]) {
        let tail = (p.n - j0 - 16 * (NV - 1)).min(16);
        let mask: __mmask16 = (((1u32 << tail) - 1) & 0xFFFF) as u16;
        let mut i0 = 0;
        while i0 + 8 <= p.m {
            unsafe { block::<8, NV>(p, i0, j0, mask, c) };
            i0 += 8;
        }
        for i in i0..p.m {
            unsafe { block::<1, NV>(p, i, j0, mask, c) };
        }
    }

    /// Rows `i0..i0 + MR`, columns `j0..j0 + 16·NV` of C (the last register's lanes outside
    /// `mask` left alone), accumulated in registers.
    ///
    /// # Safety
    /// As [`product`], with `i0 + MR ≤ m` and the masked columns inside `0..n`: then every A
    /// index is at most (m − 1)·rsa + (k − 1)·csa, every B index read below k·n and every C
    /// index touched below m·n.
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn block<const MR: usize, const NV: usize>(
        p: &Problem,
        i0: usize,
        j0: usize,
        mask: __mmask16,
        c: &mut [f32],
    ) {
        let (a, b) = (p.a.as_ptr(), p.b.as_ptr());
        let lanes = |v: usize| if v + 1 == NV { mask } else { 0xFFFF };
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        for l in 0..p.k {
            let mut row = [_mm512_setzero_ps(); NV];
            for (v, r) in row.iter_mut().enumerate() {
                let at = b.wrapping_add(l * p.n + j0 + 16 * v);
                *r = unsafe { _mm512_maskz_loadu_ps(lanes(v), at) };
            }
            for (i, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(unsafe { *a.add((i0 + i) * p.rsa + l * p.csa) });
                for (s, &r) in acc.iter_mut().zip(&row) {
                    *s = _mm512_fmadd_ps(x, r, *s);
                }
            }
        }
        let (alpha, beta) = (_mm512_set1_ps(p.alpha), _mm512_set1_ps(p.beta));
        let out = c.as_mut_ptr();
        for (i, acc) in acc.iter().enumerate() {
            for (v, &s) in acc.iter().enumerate() {
                let o = out.wrapping_add((i0 + i) * p.n + j0 + 16 * v);
                let mut y = _mm512_mul_ps(alpha, s);
                if p.beta != 0.0 {
                    y = _mm512_fmadd_ps(beta, unsafe { _mm512_maskz_loadu_ps(lanes(v), o) }, y);
                }
                unsafe { _mm512_mask_storeu_ps(o, lanes(v), y) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape class (column blocks of 32, a partial last register, row blocks and single
    /// rows, k = 0), A plain and transposed (through its strides), beta 0 (on a NaN-filled C)
    /// and not, on the vector path (where the processor has it) and the portable one: the
    /// same as a plain triple loop in `f64`, to `f32` rounding.
    #[test]
    fn matches_the_definition() {
        for (m, k, n) in [
            (8, 5, 32),
            (13, 25, 57),
            (1, 7, 16),
            (17, 1, 5),
            (4, 0, 48),
            (64, 196, 16),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
            let c0: Vec<f32> = (0..m * n).map(|i| (i as f32 * 0.05).sin()).collect();
            let at: Vec<f32> = (0..m * k).map(|i| a[(i % m) * k + i / m]).collect();
            for (beta, start) in [(0.0f32, f32::NAN), (0.5, 0.0)] {
                let want: Vec<f64> = (0..m * n)
                    .map(|ij| {
                        let (i, j) = (ij / n, ij % n);
                        let dot: f64 = (0..k)
                            .map(|l| f64::from(a[i * k + l]) * f64::from(b[l * n + j]))
                            .sum();
                        let old = if beta == 0.0 { 0.0 } else { f64::from(c0[ij]) };
                        1.5 * dot + f64::from(beta) * old
                    })
                    .collect();
                for ((aa, (rsa, csa)), fast) in [(&a, (k, 1)), (&at, (1, m))]
                    .into_iter()
                    .flat_map(|x| [(x, true), (x, false)])
                {
                    let mut c: Vec<f32> = if beta == 0.0 {
                        vec![start; m * n]
                    } else {
                        c0.clone()
                    };
                    if fast {
                        broadcast_gemm((m, k, n), 1.5, aa, (rsa, csa), &b, beta, &mut c);
                    } else {
                        let p = Problem {
                            m,
                            k,
                            n,
                            alpha: 1.5,
                            a: aa,
                            rsa,
                            csa,
                            b: &b,
                            beta,
                        };
                        portable(&p, &mut c);
                    }
                    for (got, want) in c.iter().zip(&want) {
                        let tol = 1e-5 * (1.0 + k as f64);
                        assert!(
                            (f64::from(*got) - want).abs() <= tol,
                            "{m}x{k}x{n} {got} {want}"
                        );
                    }
                }
            }
        }
    }
}
