//! Tests of the table sampler: the tables against exact arithmetic, and the law it draws.

use super::*;
use crate::exp_compare::exp_bounds;
use crate::testing::{check_law, check_normal_shape, discrete_gaussian_pmf};
use num_traits::One;

fn rat(n: u64, d: u64) -> Rational {
    Rational::new(n, d).unwrap()
}

/// The σ² of the law tests: small, fractional, and DP-SGD's scale.
const SIGMA2: [(u64, u64); 5] = [(7, 2), (1, 4), (100, 1), (13, 1000), (1 << 28, 1)];

/// The probability mass the alias table gives each index, in units of 2⁻³² of a slot.
fn table_masses(entries: &[u64]) -> Vec<u64> {
    let mut mass = vec![0u64; entries.len()];
    for (j, &entry) in entries.iter().enumerate() {
        let prob = entry & PROB_MASK;
        mass[j] += prob;
        mass[(entry >> PROB_BITS) as usize] += SLOT_UNITS - prob;
    }
    mass
}

#[test]
fn the_alias_table_gives_every_index_exactly_its_weight() {
    let mut rng = DpRng::seeded(1);
    for n in [1usize, 2, 8, 64] {
        // Random weights summing to n·2³², some zero, some above one slot.
        let mut weights: Vec<u64> = (0..n)
            .map(|i| {
                if i % 3 == 2 {
                    0
                } else {
                    rng.below(3 * SLOT_UNITS)
                }
            })
            .collect();
        let total: u64 = weights.iter().sum();
        let target = n as u64 * SLOT_UNITS;
        if total > target {
            weights.iter_mut().for_each(|w| {
                *w = (u128::from(*w) * u128::from(target) / u128::from(total)) as u64
            });
        }
        weights[0] += target - weights.iter().sum::<u64>();
        assert_eq!(table_masses(&alias_table(&weights)), weights);
    }
    for (n, d) in SIGMA2 {
        let s = AliasDiscreteGaussian::new(rat(n, d)).unwrap();
        let mut padded = s.weights.clone();
        padded.resize(s.slots.len(), 0);
        assert_eq!(table_masses(&s.slots), padded, "sigma^2 = {n}/{d}");
    }
}

/// Every bound in the tables holds in exact arithmetic: each block's envelope lies above f
/// at the block's first point, each immediate-acceptance threshold below the acceptance
/// probability at the block's last point, and the tail's envelope above f at its start with a
/// ratio ρ ≥ exp(−BW/σ²). (Checked on every eighth block, the first and the last ones.)
#[test]
fn every_table_bound_holds_exactly() {
    for (n, d) in SIGMA2 {
        let s = AliasDiscreteGaussian::new(rat(n, d)).unwrap();
        let k = s.scale_exact();
        let width = BigRational::from_integer(BigInt::from(1u64 << s.width_bits));
        let checked = (0..s.blocks).filter(|&b| b % 8 == 0 || b + 1 == s.blocks);
        for b in checked {
            let w_b = BigRational::from_integer(s.weights[b].into());
            let first = (b as u64) << s.width_bits;
            let (_, f_hi) = exp_bounds(&s.gamma_exact(first));
            assert!(
                &k * &width * f_hi <= w_b,
                "σ² {n}/{d}: block {b} envelope below f"
            );
            let last = first + (1 << s.width_bits) - 1;
            let (f_lo, _) = exp_bounds(&s.gamma_exact(last));
            let threshold = BigRational::new(
                BigInt::from(s.immediate[b]),
                BigInt::from(1u64 << ACCEPT_BITS),
            );
            assert!(
                threshold <= &k * &width * f_lo / &w_b,
                "σ² {n}/{d}: block {b} threshold above the acceptance probability"
            );
        }
        let end = (s.blocks as u64) << s.width_bits;
        let two_q = BigRational::from_integer(BigInt::from(1u64) << s.tail_bits);
        let (_, f_hi) = exp_bounds(&s.gamma_exact(end));
        let w_t = BigRational::from_integer(s.weights[s.blocks].into());
        assert!(
            &k * &two_q * f_hi <= w_t,
            "σ² {n}/{d}: tail envelope below f"
        );
        // exp(−BW/σ²) with BW/σ² = BW·d/n.
        let decay = BigRational::new(BigInt::from(end) * BigInt::from(d), BigInt::from(n));
        let (_, decay_hi) = exp_bounds(&decay);
        let rho = BigRational::one() - BigRational::one() / two_q;
        assert!(decay_hi <= rho, "σ² {n}/{d}: tail ratio too small");
    }
}

#[test]
fn small_and_fractional_sigmas_draw_the_discrete_gaussian() {
    let mut rng = DpRng::seeded(2);
    for (n, d) in SIGMA2.into_iter().filter(|&(n, _)| n < 1 << 20) {
        let s2 = n as f64 / d as f64;
        let sampler = AliasDiscreteGaussian::new(rat(n, d)).unwrap();
        let law = discrete_gaussian_pmf(s2);
        check_law(|| sampler.sample(&mut rng), &law, 60_000);
    }
}

#[test]
fn a_wide_sigma_draws_the_normal_shape() {
    let sampler = AliasDiscreteGaussian::new(Rational::integer(1 << 28)).unwrap();
    let mut rng = DpRng::seeded(3);
    check_normal_shape(|| sampler.sample(&mut rng), 1 << 14, 120_000);
}

/// With the blocks cut short the tail proposal and its exact acceptance carry a large share
/// of the mass (for σ = 10 and blocks up to 8, about 40%), and the law is still exact.
#[test]
fn the_tail_draws_its_share_exactly() {
    let mut rng = DpRng::seeded(4);
    for (n, d, cover) in [(100u64, 1u64, 8u64), (7, 2, 1), (400, 1, 30)] {
        let s2 = n as f64 / d as f64;
        let sampler = AliasDiscreteGaussian::with_cover(rat(n, d), cover).unwrap();
        assert!(
            sampler.weights[sampler.blocks] > SLOT_UNITS / 16,
            "tail too light"
        );
        let law = discrete_gaussian_pmf(s2);
        check_law(|| sampler.sample(&mut rng), &law, 60_000);
    }
}

/// Draws from [`AliasDiscreteGaussian::fill`], 700 at a time (a full bulk block and a part).
fn bulk<'a>(sampler: &'a AliasDiscreteGaussian, rng: &'a mut DpRng) -> impl FnMut() -> i64 + 'a {
    let mut buf = Vec::new();
    move || {
        if buf.is_empty() {
            buf.resize(700, 0.0);
            sampler.fill(&mut buf, rng);
        }
        let y = buf.pop().expect("refilled");
        assert_eq!(y.fract(), 0.0);
        y as i64
    }
}

/// The bulk path draws the same law, including where the second pass carries much of the
/// mass (short covers put ~40% of it in the tail) and for fractional σ².
#[test]
fn bulk_draws_follow_the_discrete_gaussian() {
    let mut rng = DpRng::seeded(8);
    for (n, d, cover) in [
        (7u64, 2u64, None),
        (13, 1000, None),
        (100, 1, Some(8)),
        (7, 2, Some(1)),
    ] {
        let sampler = match cover {
            None => AliasDiscreteGaussian::new(rat(n, d)),
            Some(c) => AliasDiscreteGaussian::with_cover(rat(n, d), c),
        }
        .unwrap();
        let law = discrete_gaussian_pmf(n as f64 / d as f64);
        check_law(bulk(&sampler, &mut rng), &law, 60_000);
    }
    let wide = AliasDiscreteGaussian::new(Rational::integer(1 << 28)).unwrap();
    check_normal_shape(bulk(&wide, &mut rng), 1 << 14, 120_000);
}

#[test]
fn out_of_range_parameters_are_refused() {
    assert!(
        AliasDiscreteGaussian::new(rat(0, 1))
            .unwrap_err()
            .to_string()
            .contains("0")
    );
    let err = AliasDiscreteGaussian::new(Rational::integer(1 << 40))
        .unwrap_err()
        .to_string();
    assert!(err.contains("too large"), "{err}");
    assert!(AliasDiscreteGaussian::new(Rational::integer(1 << 38)).is_ok());
}

/// Noise on the grid takes the draws `fill` makes from the same stream and forms each value
/// from its noisy integer: (round(v/g) + y)·g, with huge values clamped and NaN taken as 0,
/// over lengths that end inside a block and with short covers, whose tail draws all go through
/// the second pass, on grids formed in `f32` and in `f64`.
#[test]
fn grid_noise_adds_the_bulk_draws_to_the_rounded_values() {
    // A grid where the values are formed in `f32`, and one outside `F32_GRIDS` (in `f64`).
    for g in [2f64.powi(-6), 2f64.powi(80)] {
        grid_noise_matches_the_bulk_draws(g);
    }
}

fn grid_noise_matches_the_bulk_draws(g: f64) {
    assert_eq!(F32_GRIDS.contains(&g), g < 1.0);
    for sampler in [
        AliasDiscreteGaussian::new(Rational::integer(1 << 20)).unwrap(),
        AliasDiscreteGaussian::with_cover(rat(100, 1), 8).unwrap(),
    ] {
        let mut source = DpRng::seeded(21);
        let len = 3 * BULK + 77;
        let mut values: Vec<f32> = (0..len)
            .map(|i| (source.next_u64() as i64 >> 40) as f32 * 1e-3 + i as f32)
            .collect();
        values[5] = f32::NAN;
        values[6] = f32::INFINITY;
        values[7] = -3e38;
        let mut draws = vec![0.0; len];
        sampler.fill(&mut draws, &mut DpRng::seeded(22));
        let want: Vec<f32> = values
            .iter()
            .zip(&draws)
            .map(|(&v, &y)| {
                let v = f64::from(v) / g;
                let k = if v.is_nan() {
                    0.0
                } else {
                    v.clamp(-2f64.powi(50), 2f64.powi(50))
                };
                ((k.round_ties_even() + y) * g) as f32
            })
            .collect();
        sampler.add_on_grid(&mut values, g, &mut DpRng::seeded(22));
        assert_eq!(values, want);
    }
}

#[test]
#[should_panic(expected = "not a power of two")]
fn grid_noise_needs_a_power_of_two() {
    let sampler = AliasDiscreteGaussian::new(Rational::integer(64)).unwrap();
    sampler.add_on_grid(&mut [1.0], 0.3, &mut DpRng::seeded(1));
}

/// The `f32` grid arithmetic gives the `f64` one's values to the bit, for values of every bit
/// pattern (NaN, infinities, subnormals, huge and tiny magnitudes), draws as large as the bulk
/// pass makes (below 2²³), on grids across `F32_GRIDS` and near its ends.
#[test]
fn grid_values_in_f32_are_those_of_f64() {
    let mut rng = DpRng::seeded(31);
    let mut checked = 0;
    for e in [-99, -60, -17, -6, 0, 3, 40, 66] {
        let g = 2f64.powi(e);
        assert!(F32_GRIDS.contains(&g), "2^{e}");
        let (g32, inv32) = (g as f32, (1.0 / g) as f32);
        let special = [
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            f32::MAX,
            f32::MIN,
        ];
        for i in 0..200_000 {
            let word = rng.next_u64();
            let v = match i % 4 {
                // Any bit pattern.
                0 => f32::from_bits(word as u32),
                // Near the grid's scale, where rounding matters.
                1 => (word as u32 as i32) as f32 * g32 / 4096.0,
                // Where r + y leaves `f32`'s exact integers (2²⁴ and up).
                2 => (word as u32 as i32) as f32 * g32 * 16.0,
                _ => special[(word as u32 % 7) as usize],
            };
            let y = ((word >> 32) as i32) >> (8 + (word >> 60) as u32 % 8);
            let want = on_grid(v, f64::from(y), g, 1.0 / g);
            let got = on_grid_f32(v, y, g32, inv32);
            assert_eq!(got.to_bits(), want.to_bits(), "v {v:e} y {y} g 2^{e}");
            checked += 1;
        }
    }
    assert_eq!(checked, 1_600_000);
}

/// [`grid_values_in_f32_are_those_of_f64`] over every `f32` bit pattern, for draws at 0, −1
/// and the bulk pass's extremes, on four grids: 2^36 values, 85 s on the 2-core Xeon in a
/// release build (`cargo test --release -p dpml-mechanisms --lib every_f32 -- --ignored`).
#[test]
#[ignore = "exhaustive: 2^32 values for each grid and draw"]
fn every_f32_goes_onto_the_grid_as_in_f64() {
    let threads = std::thread::available_parallelism().map_or(1, usize::from) as u32;
    for e in [-17, -6, 0, 10] {
        let g = 2f64.powi(e);
        let (g32, inv32) = (g as f32, (1.0 / g) as f32);
        for y in [0, -1, (1 << 23) - 1, 1 - (1 << 23)] {
            let mismatches: usize = std::thread::scope(|s| {
                let part = |t: u32| {
                    move || {
                        (t..=u32::MAX >> 16)
                            .step_by(threads as usize)
                            .map(|high| {
                                (0..=u16::MAX)
                                    .filter(|&low| {
                                        let v = f32::from_bits(high << 16 | u32::from(low));
                                        let want = on_grid(v, f64::from(y), g, 1.0 / g);
                                        on_grid_f32(v, y, g32, inv32).to_bits() != want.to_bits()
                                    })
                                    .count()
                            })
                            .sum::<usize>()
                    }
                };
                let handles: Vec<_> = (0..threads).map(|t| s.spawn(part(t))).collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            assert_eq!(mismatches, 0, "g 2^{e} y {y}");
        }
    }
}
