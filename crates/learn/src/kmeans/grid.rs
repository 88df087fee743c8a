//! Per-record integer grids: every clamped coordinate is rounded, once, to a power-of-two grid
//! about a public origin, so that per-cluster counts and sums are exact integers with exact
//! integer sensitivities. Integer statistics take exact discrete Laplace / Gaussian noise
//! (Canonne, Kamath, Steinke 2020), which is immune to the floating-point attacks of
//! Mironov 2012 (design invariant 4).
//!
//! Dimension j uses origin `o_j` and step `g_j = 2^e`; a record's grid value is
//! `q = round((x − o_j)/g_j)` clamped to `[−s_j, s_j]`, with `s_j = ⌈m_j/g_j⌉` and `m_j` the
//! largest `|x − o_j|` inside the bounds. Since every `q` lies in `[−s_j, s_j]` by construction,
//! adding or removing one record changes a per-cluster sum of dimension j by at most `s_j`
//! grid units, i.e. `s_j·g_j ≥ m_j` in real units: the rounding can only enlarge the
//! sensitivity that the noise is calibrated to, never shrink it.

/// Grid steps are at most `extent / 2^EXTENT_BITS`: the rounding error `g_j/2` is at most
/// 2^-17 of the half-range, far below the noise.
const EXTENT_BITS: i32 = 16;

/// The grid of every dimension.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grid {
    origin: Vec<f64>,
    step: Vec<f64>,
    bound: Vec<u64>,
}

impl Grid {
    /// A grid with origins `origin`, extents `extent` (`m_j > 0`, the largest `|x − o_j|`
    /// over the bounds) and a typical noise standard deviation or scale `noise` (real units,
    /// `> 0`): steps are at most `m_j/2^16` and at least `noise/2^noise_bits`, so that the
    /// noise stays below `2^(noise_bits+1)` grid steps (the exact samplers' integer range).
    pub(crate) fn new(origin: Vec<f64>, extent: &[f64], noise: f64, noise_bits: i32) -> Self {
        let step: Vec<f64> = extent
            .iter()
            .map(|&m| {
                let finest = (m.log2().floor() as i32 - EXTENT_BITS)
                    .max(noise.log2().floor() as i32 - noise_bits);
                2f64.powi(finest.clamp(-1000, 1000))
            })
            .collect();
        let bound = extent
            .iter()
            .zip(&step)
            .map(|(m, g)| (m / g).ceil().max(1.0) as u64)
            .collect();
        Self {
            origin,
            step,
            bound,
        }
    }

    /// Number of dimensions.
    pub(crate) fn dims(&self) -> usize {
        self.step.len()
    }

    /// Step of dimension `j`.
    pub(crate) fn step(&self, j: usize) -> f64 {
        self.step[j]
    }

    /// `s_j`: the largest |grid value| in dimension `j`, its sensitivity in grid units.
    pub(crate) fn bound(&self, j: usize) -> u64 {
        self.bound[j]
    }

    /// `s_j·g_j`: the sensitivity in real units after rounding (≥ the extent).
    pub(crate) fn real_bound(&self, j: usize) -> f64 {
        self.bound[j] as f64 * self.step[j]
    }

    /// Grid values of row-major points (already clamped into the bounds), clamped to
    /// `[−s_j, s_j]`.
    pub(crate) fn quantise(&self, points: &[f64]) -> Vec<i64> {
        let d = self.dims();
        points
            .chunks_exact(d)
            .flat_map(|row| {
                row.iter().enumerate().map(|(j, &x)| {
                    let s = self.bound[j] as f64;
                    ((x - self.origin[j]) / self.step[j]).round().clamp(-s, s) as i64
                })
            })
            .collect()
    }

    /// The origin of dimension `j`.
    pub(crate) fn origin(&self, j: usize) -> f64 {
        self.origin[j]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_powers_of_two_matched_to_extent_or_noise() {
        let g = Grid::new(vec![6.0, 0.0], &[1.8, 0.5], 0.01, 13);
        // 1.8 → 2^0 · 2^-16; 0.5 → 2^-1 · 2^-16; noise 0.01 → 2^-7 · 2^-13 is finer.
        assert_eq!(g.step(0), 2f64.powi(-16));
        assert_eq!(g.step(1), 2f64.powi(-17));
        assert_eq!(g.bound(0), (1.8 * 65536.0f64).ceil() as u64);
        assert!(g.real_bound(0) >= 1.8 && g.real_bound(0) < 1.8 + 2f64.powi(-16));
        // Huge noise: the step follows the noise so that noise/step < 2^14.
        let g = Grid::new(vec![0.0], &[1.0], 1e6, 13);
        assert!(1e6 / g.step(0) < 16384.0 && 1e6 / g.step(0) >= 8192.0);
        assert_eq!(g.bound(0), 1);
    }

    #[test]
    fn quantise_stays_within_bounds_and_round_trips() {
        let g = Grid::new(vec![6.1, 0.0], &[1.8, 1.0], 1.0, 13);
        let q = g.quantise(&[7.9, -1.0, 4.3, 0.25]);
        assert_eq!(q[0], g.bound(0) as i64);
        assert_eq!(q[1], -(g.bound(1) as i64));
        assert!(q[2] >= -(g.bound(0) as i64));
        assert!((g.origin(1) + g.step(1) * q[3] as f64 - 0.25).abs() <= g.step(1) / 2.0);
        assert!((g.origin(0) + g.step(0) * q[2] as f64 - 4.3).abs() <= g.step(0) / 2.0);
    }
}
