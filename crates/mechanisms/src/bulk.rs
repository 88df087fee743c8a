//! A helper of the bulk samplers (the exact discrete Gaussian here, the floating-point normal
//! of DP-SGD): a branch-free pass decides almost every draw from its first word and flags the
//! few it cannot, which a second pass finishes. Flags, unlike a running count of the deferred
//! draws, leave the first pass without a dependence from one draw to the next, so it runs
//! several draws to a vector.

/// Calls `f(i)` for every i with `flags[i]` = 1 (the others 0), in ascending order: eight flags
/// at a time, so the few set ones cost a branch each and the rest almost nothing.
pub fn for_each_flagged(flags: &[u8], mut f: impl FnMut(usize)) {
    let groups = flags.chunks_exact(8);
    let rest = groups.remainder();
    for (g, group) in groups.enumerate() {
        let mut bits = u64::from_le_bytes(group.try_into().expect("8 flags"));
        while bits != 0 {
            f(8 * g + bits.trailing_zeros() as usize / 8);
            bits &= bits - 1;
        }
    }
    let base = flags.len() - rest.len();
    rest.iter()
        .enumerate()
        .filter(|(_, flag)| **flag != 0)
        .for_each(|(j, _)| f(base + j));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_set_flags_in_order() {
        for len in [0, 1, 7, 8, 9, 64, 75] {
            let flags: Vec<u8> = (0..len).map(|i| u8::from(i % 3 == 0 || i == 6)).collect();
            let mut got = Vec::new();
            for_each_flagged(&flags, |i| got.push(i));
            let want: Vec<usize> = (0..len).filter(|&i| flags[i] == 1).collect();
            assert_eq!(got, want, "{len} flags");
        }
    }
}
