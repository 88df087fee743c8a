//! A matrix product without packing, for the small per-sample products of convolutions.
//!
//! `matrixmultiply` copies ("packs") both operands into its own layout on every call. At a
//! convolution's per-sample shapes (the `cnn` model's conv2: 32 output channels, 25 positions,
//! 256 unfolded inputs) each packed value is used only a few dozen times, so packing cost as
//! much as the multiply-adds: 18% of a CNN step against 22% for the kernel. Here B is read in
//! place, a register block of C at a time: per step along k, two vector loads from one row of
//! B and one value of A per row, broadcast. B's rows must be contiguous; A may have any strides
//! (its values are read one at a time). Any n: the last register of a row is masked. Written
//! with intrinsics (AVX-512, or AVX2 where the processor has no AVX-512): the compiler's own
//! vectorisation of the same loops shuffled values between registers and ran three times
//! slower than `matrixmultiply`.
//!
//! Measured on the 2-core Xeon (interleaved `dpml bench dpsgd --model cnn` rounds): using it for
//! the convolutions' forward, input-gradient and per-sample weight-gradient products made CNN
//! steps 22% faster (private) and 14% (non-private); with both it and `matrixmultiply` held to
//! AVX2 (the latter built with `MMTEST_FEATURE=avx,avx2,fma,sse2`), 4.5% and 1.4%. For the MLP's
//! large products `matrixmultiply` stays faster (7%), its packing being spread over many more
//! uses.

/// `C = alpha · A · B + beta · C` with C row-major `m × n`, B row-major `k × n`, and A's element
/// (i, l) at `a[i·rsa + l·csa]`. With `beta == 0` the old contents of C are not read. Without
/// AVX-512 or AVX2 and FMA (or off x86-64) this is `matrixmultiply`'s product on the same
/// strides.
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
    if is_x86_feature_detected!("fma") {
        // SAFETY: the processor has the features each function is compiled for; the
        // assertion above bounds every index they read or write (module `simd`).
        if is_x86_feature_detected!("avx512f") {
            return unsafe { simd::product_avx512(&p, c) };
        }
        if is_x86_feature_detected!("avx2") {
            return unsafe { simd::product_avx2(&p, c) };
        }
    }
    portable(&p, c);
}

/// `matrixmultiply`'s product on the same strides (no AVX-512 or AVX2, or not x86-64).
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

/// The product in registers, for x86-64 processors with AVX-512 or AVX2 (and FMA): column blocks
/// of two registers, the last block's last register masked to the columns left; within each,
/// blocks of `MR` rows, then single rows. AVX-512: 8 rows × 32 columns, 16 accumulators of its
/// 32 registers; AVX2: 6 rows × 16 columns, 12 of its 16. Either way enough independent
/// multiply-adds to keep both FMA units busy. One generic body for both: the entry points are
/// compiled for their instruction sets and everything below them is inlined into them.
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::Problem;

    /// The vector operations the product needs, on one instruction set.
    trait Isa {
        /// A register of `LANES` values.
        type V: Copy;
        /// Which lanes a load or store touches.
        type M: Copy;
        const LANES: usize;
        /// The first `valid` lanes (1..=LANES).
        unsafe fn mask(valid: usize) -> Self::M;
        unsafe fn zero() -> Self::V;
        unsafe fn splat(x: f32) -> Self::V;
        /// Masked load: lanes outside `m` read nothing (and are 0).
        unsafe fn load(at: *const f32, m: Self::M) -> Self::V;
        /// Masked store: lanes outside `m` write nothing.
        unsafe fn store(at: *mut f32, m: Self::M, v: Self::V);
        unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
        /// a·b + c, fused.
        unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    }

    struct Avx512;

    impl Isa for Avx512 {
        type V = __m512;
        type M = __mmask16;
        const LANES: usize = 16;
        #[inline(always)]
        unsafe fn mask(valid: usize) -> __mmask16 {
            ((1u32 << valid) - 1) as u16
        }
        #[inline(always)]
        unsafe fn zero() -> __m512 {
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> __m512 {
            unsafe { _mm512_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn load(at: *const f32, m: __mmask16) -> __m512 {
            unsafe { _mm512_maskz_loadu_ps(m, at) }
        }
        #[inline(always)]
        unsafe fn store(at: *mut f32, m: __mmask16, v: __m512) {
            unsafe { _mm512_mask_storeu_ps(at, m, v) }
        }
        #[inline(always)]
        unsafe fn mul(a: __m512, b: __m512) -> __m512 {
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
    }

    struct Avx2;

    impl Isa for Avx2 {
        type V = __m256;
        type M = __m256i;
        const LANES: usize = 8;
        #[inline(always)]
        unsafe fn mask(valid: usize) -> __m256i {
            // Lane j is on when j < valid (its sign bit set by the comparison).
            unsafe {
                _mm256_cmpgt_epi32(
                    _mm256_set1_epi32(valid as i32),
                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                )
            }
        }
        #[inline(always)]
        unsafe fn zero() -> __m256 {
            unsafe { _mm256_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> __m256 {
            unsafe { _mm256_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn load(at: *const f32, m: __m256i) -> __m256 {
            unsafe { _mm256_maskload_ps(at, m) }
        }
        #[inline(always)]
        unsafe fn store(at: *mut f32, m: __m256i, v: __m256) {
            unsafe { _mm256_maskstore_ps(at, m, v) }
        }
        #[inline(always)]
        unsafe fn mul(a: __m256, b: __m256) -> __m256 {
            unsafe { _mm256_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }
    }

    /// # Safety
    /// The processor has AVX-512F and FMA; `c` and the operands hold the sizes that
    /// [`super::broadcast_gemm`] asserts.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn product_avx512(p: &Problem, c: &mut [f32]) {
        unsafe { product::<Avx512, 8>(p, c) }
    }

    /// # Safety
    /// As [`product_avx512`], with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn product_avx2(p: &Problem, c: &mut [f32]) {
        unsafe { product::<Avx2, 6>(p, c) }
    }

    #[inline(always)]
    unsafe fn product<S: Isa, const MR: usize>(p: &Problem, c: &mut [f32]) {
        let width = 2 * S::LANES;
        let mut j0 = 0;
        while j0 < p.n {
            // SAFETY (here and below): columns j0..min(j0 + 16·NV, n) lie inside 0..n.
            if j0 + S::LANES < p.n {
                unsafe { rows::<S, MR, 2>(p, j0, c) };
            } else {
                unsafe { rows::<S, MR, 1>(p, j0, c) };
            }
            j0 += width;
        }
    }

    /// Columns `j0..min(j0 + LANES·NV, n)` of every row (only the last register may be
    /// partial).
    #[inline(always)]
    unsafe fn rows<S: Isa, const MR: usize, const NV: usize>(
        p: &Problem,
        j0: usize,
        c: &mut [f32],
    ) {
        let tail = (p.n - j0 - S::LANES * (NV - 1)).min(S::LANES);
        let (full, last) = unsafe { (S::mask(S::LANES), S::mask(tail)) };
        let mut i0 = 0;
        while i0 + MR <= p.m {
            unsafe { block::<S, MR, NV>(p, i0, j0, (full, last), c) };
            i0 += MR;
        }
        for i in i0..p.m {
            unsafe { block::<S, 1, NV>(p, i, j0, (full, last), c) };
        }
    }

    /// Rows `i0..i0 + MR`, columns `j0..j0 + LANES·NV` of C (the last register's lanes
    /// outside `last` left alone), accumulated in registers.
    ///
    /// # Safety
    /// As [`product_avx512`], with `i0 + MR ≤ m` and the masked columns inside `0..n`: then
    /// every A index is at most (m − 1)·rsa + (k − 1)·csa, every B index read below k·n and
    /// every C index touched below m·n.
    #[inline(always)]
    unsafe fn block<S: Isa, const MR: usize, const NV: usize>(
        p: &Problem,
        i0: usize,
        j0: usize,
        (full, last): (S::M, S::M),
        c: &mut [f32],
    ) {
        let (a, b) = (p.a.as_ptr(), p.b.as_ptr());
        let lanes = |v: usize| if v + 1 == NV { last } else { full };
        let zero = unsafe { S::zero() };
        let mut acc = [[zero; NV]; MR];
        for l in 0..p.k {
            let mut row = [zero; NV];
            for (v, r) in row.iter_mut().enumerate() {
                let at = b.wrapping_add(l * p.n + j0 + S::LANES * v);
                *r = unsafe { S::load(at, lanes(v)) };
            }
            for (i, acc) in acc.iter_mut().enumerate() {
                let x = unsafe { S::splat(*a.add((i0 + i) * p.rsa + l * p.csa)) };
                for (s, &r) in acc.iter_mut().zip(&row) {
                    *s = unsafe { S::fmadd(x, r, *s) };
                }
            }
        }
        let (alpha, beta) = unsafe { (S::splat(p.alpha), S::splat(p.beta)) };
        let out = c.as_mut_ptr();
        for (i, acc) in acc.iter().enumerate() {
            for (v, &s) in acc.iter().enumerate() {
                let o = out.wrapping_add((i0 + i) * p.n + j0 + S::LANES * v);
                unsafe {
                    let mut y = S::mul(alpha, s);
                    if p.beta != 0.0 {
                        y = S::fmadd(beta, S::load(o, lanes(v)), y);
                    }
                    S::store(o, lanes(v), y);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every implementation this processor runs: the AVX-512 and AVX2 ones where it has them,
    /// and the portable one.
    fn paths() -> Vec<fn(&Problem, &mut [f32])> {
        let mut out: Vec<fn(&Problem, &mut [f32])> = vec![portable];
        #[cfg(target_arch = "x86_64")]
        {
            let fma = is_x86_feature_detected!("fma");
            if fma && is_x86_feature_detected!("avx512f") {
                // SAFETY: the processor has the features (as in `broadcast_gemm`).
                out.push(|p, c| unsafe { simd::product_avx512(p, c) });
            }
            if fma && is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
                out.push(|p, c| unsafe { simd::product_avx2(p, c) });
            }
        }
        out
    }

    /// Every shape class (column blocks of 32, a partial last register, row blocks and single
    /// rows, k = 0), A plain and transposed (through its strides), beta 0 (on a NaN-filled C)
    /// and not, on every implementation the processor runs: the same as a plain triple loop
    /// in `f64`, to `f32` rounding.
    #[test]
    fn matches_the_definition() {
        for (m, k, n) in [
            (8, 5, 32),
            (13, 25, 57),
            (1, 7, 16),
            (17, 1, 5),
            (4, 0, 48),
            (64, 196, 16),
            (7, 9, 12),
            (6, 3, 8),
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
                for ((aa, (rsa, csa)), path) in [(&a, (k, 1)), (&at, (1, m))]
                    .into_iter()
                    .flat_map(|x| paths().into_iter().map(move |path| (x, path)))
                {
                    let mut c: Vec<f32> = if beta == 0.0 {
                        vec![start; m * n]
                    } else {
                        c0.clone()
                    };
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
                    path(&p, &mut c);
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
