//! A helper of the bulk samplers (the exact discrete Gaussian here, the floating-point normal
//! of DP-SGD): a branch-free pass decides almost every draw from its first word and flags the
//! few it cannot, which a second pass finishes. Flags, unlike a running count of the deferred
//! draws, leave the first pass without a dependence from one draw to the next, so it runs
//! several draws to a vector.

/// Calls `f(i)` for every i with `flags[i]` = 1 (the others 0), in ascending order. Flags are
/// rare (a few in a thousand to a few in a hundred), so the scan first asks whether any of 64
/// flags is set (eight words or-ed together, one branch), and only then looks at their eight
/// words; each set flag then costs a branch.
pub fn for_each_flagged(flags: &[u8], mut f: impl FnMut(usize)) {
    let wide = flags.chunks_exact(64);
    let rest = wide.remainder();
    for (w, group) in wide.enumerate() {
        let words: [u64; 8] = std::array::from_fn(|j| {
            u64::from_le_bytes(group[8 * j..8 * j + 8].try_into().expect("8 flags"))
        });
        if words.iter().fold(0, |a, b| a | b) == 0 {
            continue;
        }
        for (j, &bits) in words.iter().enumerate() {
            each_set_byte(bits, 64 * w + 8 * j, &mut f);
        }
    }
    // Fewer than 64 flags left (the samplers' blocks are multiples of 64; only a chunk's last
    // block leaves a rest): one at a time.
    let base = flags.len() - rest.len();
    rest.iter()
        .enumerate()
        .filter(|(_, flag)| **flag != 0)
        .for_each(|(j, _)| f(base + j));
}

/// `f(base + j)` for every byte j of `bits` that is not zero, in ascending order.
#[inline(always)]
fn each_set_byte(mut bits: u64, base: usize, f: &mut impl FnMut(usize)) {
    while bits != 0 {
        f(base + bits.trailing_zeros() as usize / 8);
        bits &= bits - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_set_flags_in_order() {
        for len in [0, 1, 7, 8, 9, 64, 75, 128, 200, 1024] {
            let flags: Vec<u8> = (0..len).map(|i| u8::from(i % 3 == 0 || i == 6)).collect();
            let mut got = Vec::new();
            for_each_flagged(&flags, |i| got.push(i));
            let want: Vec<usize> = (0..len).filter(|&i| flags[i] == 1).collect();
            assert_eq!(got, want, "{len} flags");
        }
    }
}
