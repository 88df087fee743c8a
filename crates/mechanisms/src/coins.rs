//! Uniform integers and rational coins for the exact samplers, spending as few of the
//! generator's bits as each draw needs.
//!
//! The exact samplers ([`crate::exact`]) flip many coins per sample, most of them
//! Bernoulli(num/den) with a small `den` or a fair sign. Taking a fresh `u64` of the ChaCha20
//! stream for each made generating randomness the bulk of their cost. [`Coins`] keeps the
//! unused part of the last `u64` and hands it out 32 bits (for a uniform draw below a range
//! under 2³²) or one bit (a fair coin) at a time. Every draw is still exactly uniform:
//! bits of a uniform `u64` are independent uniform bits, and ranges are reduced with
//! Lemire's multiply-and-reject method at the width used, which leaves exactly ⌊2ʷ/n⌋
//! values of a w-bit word for every result.
//!
//! Bits left in the buffer when a [`Coins`] is dropped are discarded, never reused.

use crate::DpRng;

/// A bit-economical view of a [`DpRng`] for the exact samplers.
#[derive(Debug)]
pub struct Coins<'a> {
    rng: &'a mut DpRng,
    /// Unused random bits, in the low `bits` positions.
    word: u64,
    bits: u32,
}

impl<'a> Coins<'a> {
    /// Coins drawn from `rng`'s stream.
    pub fn new(rng: &'a mut DpRng) -> Self {
        Self {
            rng,
            word: 0,
            bits: 0,
        }
    }

    /// `n ≤ 32` uniform bits (the low bits of the result).
    fn take(&mut self, n: u32) -> u64 {
        if self.bits < n {
            self.word = self.rng.next_u64();
            self.bits = 64;
        }
        let out = self.word & ((1u64 << n) - 1);
        self.word >>= n;
        self.bits -= n;
        out
    }

    /// A fair coin.
    pub fn bit(&mut self) -> bool {
        self.take(1) == 1
    }

    /// A uniform integer in `0..n` for `0 < n < 2³²`, from 32-bit words (Lemire's method).
    fn below_u32(&mut self, n: u32) -> u32 {
        let n64 = u64::from(n);
        let mut m = self.take(32) * n64;
        if (m as u32) < n {
            // 2³² mod n, computed only here (probability n/2³² per draw).
            let threshold = n.wrapping_neg() % n;
            while (m as u32) < threshold {
                m = self.take(32) * n64;
            }
        }
        (m >> 32) as u32
    }

    /// A uniform integer in `0..n`; `n` must be > 0. Ranges below 2³² take 32 bits.
    pub fn below(&mut self, n: u64) -> u64 {
        match u32::try_from(n) {
            Ok(small) => u64::from(self.below_u32(small)),
            Err(_) => self.rng.below(n),
        }
    }

    /// Bernoulli(num/den) for `den ≥ 1` (certain when `num ≥ den`).
    ///
    /// A range below 2³² is one uniform draw below `den`. A wider one is decided by
    /// comparing a uniform U ∈ [0, 1) with num/den a 32-bit digit at a time, all in exact
    /// integer products: with w the first digit, U·den lies in [w·den, (w+1)·den)/2³², which
    /// settles U < num/den unless num·2³² falls inside that interval (probability below
    /// 2⁻³²); then the remaining digits of U decide against (num·2³² − w·den)/den, the same
    /// question one digit further on.
    pub fn ratio(&mut self, num: u64, den: u64) -> bool {
        if num >= den {
            return true;
        }
        if num == 0 {
            return false;
        }
        if let Ok(small) = u32::try_from(den) {
            return u64::from(self.below_u32(small)) < num;
        }
        let (n, d) = (u128::from(num) << 32, u128::from(den));
        let lo = u128::from(self.take(32)) * d;
        if lo >= n {
            false
        } else if lo + d <= n {
            true
        } else {
            // 0 < n − lo < d ≤ u64::MAX.
            self.ratio((n - lo) as u64, den)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_and_small_ranges_are_uniform() {
        let mut rng = DpRng::seeded(12);
        let mut coins = Coins::new(&mut rng);
        let draws = 60_000;
        let heads = (0..draws).filter(|_| coins.bit()).count() as f64;
        // Binomial(60000, 1/2): sd ≈ 122; allow 5 sd.
        assert!((heads - 30_000.0).abs() < 5.0 * 122.5, "{heads}");
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[coins.below(7) as usize] += 1;
        }
        // Each count ~ Binomial(70000, 1/7): sd ≈ 92.6; allow 5 sd.
        for c in counts {
            assert!((f64::from(c) - 10_000.0).abs() < 5.0 * 92.6, "{counts:?}");
        }
    }

    /// For n just above 2³¹ the plain reduction of a 32-bit word modulo n makes the lower half
    /// of 0..n twice as likely as the upper half (mean ≈ 0.375·n); an unbiased method gives 0.5·n.
    #[test]
    fn below_is_unbiased_near_two_to_the_31() {
        let mut rng = DpRng::seeded(13);
        let mut coins = Coins::new(&mut rng);
        let n = (1u64 << 31) + 1;
        let draws = 40_000;
        let mean = (0..draws)
            .map(|_| coins.below(n) as f64 / n as f64)
            .sum::<f64>()
            / f64::from(draws);
        assert!(
            (mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / f64::from(draws)).sqrt(),
            "{mean}"
        );
        assert!(coins.ratio(3, 3) && !coins.ratio(0, 5));
    }

    /// Wide ratios go through the digit-by-digit comparison: p = 1/3 and p just below 1 over
    /// denominators above 2³².
    #[test]
    fn wide_ratios_have_the_right_frequency() {
        let mut rng = DpRng::seeded(14);
        let mut coins = Coins::new(&mut rng);
        let draws = 90_000u32;
        for (num, den, p) in [
            ((1u64 << 40) + 1, 3 * ((1u64 << 40) + 1), 1.0 / 3.0),
            (u64::MAX - 5, u64::MAX, 1.0),
            (7, 1u64 << 35, 0.0),
        ] {
            let hits = (0..draws).filter(|_| coins.ratio(num, den)).count() as f64;
            let sd = (p * (1.0 - p) / f64::from(draws)).sqrt();
            let freq = hits / f64::from(draws);
            assert!((freq - p).abs() <= 5.0 * sd + 1e-9, "{num}/{den}: {freq}");
        }
    }
}
