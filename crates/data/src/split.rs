//! Train/test splits and k-fold cross-validation decided record by record, under a key.
//!
//! # Why per record
//!
//! A differentially private model protects the records it is trained on. When the training
//! set is cut out of the user's data set by shuffling all of it, removing one record moves
//! many others across the cut, so the two training sets are no longer neighbours and the
//! reported ε holds only for the derived split, not for the data set handed in. Here each
//! record's side (or fold) depends on that record alone: a keyed hash of the part of it that
//! the run's neighbouring relation leaves fixed ([`SplitBasis`]). For add/remove-one DP that
//! is the whole record, the bytes of its feature values and the name of its class: removing
//! or adding one record changes the training set by that record at most, for every key, so
//! the guarantee of the training run holds for the data set itself.
//!
//! # Relations that change a record
//!
//! Under label DP the neighbours differ in one record's label, and under local DP on the
//! features in one record's features. Hashing the protected part would let the changed record
//! change sides: the training set (and its public size) would depend on the protected value.
//! So label DP hashes the features only ([`SplitBasis::Features`]) and local DP on the
//! features hashes the record's position in the data set ([`SplitBasis::Position`]): what the
//! relation changes never reaches the hash, and the split is identical on both neighbours.
//!
//! # Consequences
//!
//! - The test set's size is random: Binomial(n, test_fraction); fold sizes are multinomial.
//!   There is no stratification (balancing classes would couple records).
//! - A side that comes out empty is refused ([`DataError::EmptySplit`]) rather than repaired
//!   by moving records, which would couple them again.
//! - Identical records (same features and class) always land on the same side. That does not
//!   break add/remove-one neighbouring: the hash of every other record is unchanged, so the
//!   neighbouring data sets still give neighbouring training sets.
//! - Indices on each side are ascending (the records keep the data set's order).
//!
//! # The key
//!
//! The hash is SHA-256 over the key, a purpose tag, and the record. The key need not be secret
//! (the guarantee above holds for every key, so it may be published); it is drawn from the
//! run's cryptographic generator so that the split is not a fixed function anyone could aim
//! records at, and reported so that a split can be reproduced ([`SplitKey`]'s hex form).

use std::fmt;
use std::str::FromStr;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};

use crate::{DataError, Dataset};

/// The 256-bit key of a split: which records are held out is a keyed hash of each record.
///
/// Displayed and parsed as 64 lowercase hexadecimal digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SplitKey([u8; 32]);

impl SplitKey {
    /// A fresh key from a cryptographic generator (a run's `DpRng`, through its `as_rng`).
    pub fn from_rng<R: rand::CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut key = [0u8; 32];
        rng.fill_bytes(&mut key);
        Self(key)
    }

    /// The key with these bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key's bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A key derived from a small number, for the deprecated `--split-seed` of scripts written
    /// before splits were keyed: the first 32 bytes of ChaCha20 seeded with `seed`. Such a key
    /// is guessable, which is harmless (keys are public) but gives no protection against data
    /// sets crafted for a known split.
    pub fn from_seed(seed: u64) -> Self {
        Self::from_rng(&mut ChaCha20Rng::seed_from_u64(seed))
    }
}

impl fmt::Display for SplitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for SplitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SplitKey({self})")
    }
}

impl FromStr for SplitKey {
    type Err = DataError;

    /// Parses 64 hexadecimal digits (either case), as [`SplitKey`]'s `Display` writes them.
    fn from_str(s: &str) -> Result<Self, DataError> {
        let bad = || DataError::param("split_key", "64 hexadecimal digits", s);
        let digits = s.trim().as_bytes();
        // Checked first: `from_str_radix` would also take a sign ("+f").
        if digits.len() != 64 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(bad());
        }
        let nibble = |c: u8| (c as char).to_digit(16).map_or(0, |v| v as u8);
        let mut key = [0u8; 32];
        for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
            *byte = nibble(pair[0]) << 4 | nibble(pair[1]);
        }
        Ok(Self(key))
    }
}

/// What a record's side may depend on: the part of the record that the run's neighbouring
/// relation leaves fixed (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SplitBasis {
    /// Add/remove one record: the whole record, its feature values and its class.
    #[default]
    Record,
    /// Label DP (one record's label changes): the feature values only.
    Features,
    /// Local DP on the features (one record's features change): the record's position in
    /// the data set.
    Position,
}

impl SplitBasis {
    /// What the split hashes, in words (for the release's list of public facts).
    pub const fn describe(self) -> &'static str {
        match self {
            Self::Record => "each record's features and class",
            Self::Features => "each record's features (not its label)",
            Self::Position => "each record's position (not its features)",
        }
    }
}

/// What a record's hash is used for: the train/test cut, the folds and the validation cut draw
/// independent values from the same key.
#[derive(Clone, Copy)]
enum Purpose {
    TrainTest,
    Folds,
    Validation,
}

/// A uniform `u64` that depends only on the key, the purpose and the `basis` part of record
/// `i`.
fn record_draw(d: &Dataset, i: usize, key: &SplitKey, purpose: Purpose, basis: SplitBasis) -> u64 {
    let mut h = Sha256::new();
    h.update(key.as_bytes());
    h.update(match purpose {
        Purpose::TrainTest => b"dpml split v1: train/test\0",
        Purpose::Folds => b"dpml split v1: k-fold    \0",
        Purpose::Validation => b"dpml split v1: validation\0",
    });
    // Record hashes the v1 bytes unchanged (keys of earlier runs reproduce their splits); the
    // other bases are tagged so that no record's bytes can collide with a position.
    match basis {
        SplitBasis::Record => {}
        SplitBasis::Features => h.update(b"features\0"),
        SplitBasis::Position => {
            h.update(b"position\0");
            h.update((i as u64).to_le_bytes());
            return first_u64(&h.finalize());
        }
    }
    let row = d.row(i);
    h.update((row.len() as u64).to_le_bytes());
    for &v in row {
        // -0.0 and 0.0 are the same value; records equal as numbers hash alike.
        let v = if v == 0.0 { 0.0f32 } else { v };
        h.update(v.to_bits().to_le_bytes());
    }
    if basis == SplitBasis::Features {
        return first_u64(&h.finalize());
    }
    // The class by name where there is one: class indices can depend on the other records
    // (a CSV's labels are numbered in sorted order of the values present), names cannot.
    let y = d.y[i];
    match d.class_names.get(y as usize) {
        Some(name) => {
            let name = canonical_label(name);
            h.update([1u8]);
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
        }
        None => {
            h.update([0u8]);
            h.update(y.to_le_bytes());
        }
    }
    first_u64(&h.finalize())
}

/// The first eight bytes of a digest as a little-endian `u64`.
fn first_u64(digest: &[u8]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// A class name as it would read had every label of the file been a number. A CSV's labels
/// are all read as numbers (names like "2") or, when one is not a number, all as text (names
/// like "2.0" as written), so one record can switch how the others are named.
fn canonical_label(name: &str) -> std::borrow::Cow<'_, str> {
    match name.trim().parse::<f64>() {
        // `+ 0.0` turns -0 into 0, as the CSV reader does.
        Ok(v) if v.is_finite() => (v + 0.0).to_string().into(),
        _ => name.into(),
    }
}

/// Splits `d` into (train, test): each record goes to test with probability `test_fraction`,
/// independently of every other record, as decided by the keyed hash of its `basis` part (see
/// the module documentation for why, and what follows). The records keep their order.
///
/// # Errors
/// [`DataError::InvalidParameter`] when `test_fraction` is not in (0, 1);
/// [`DataError::EmptySplit`] when either part comes out empty.
pub fn train_test_split(
    d: &Dataset,
    test_fraction: f64,
    key: &SplitKey,
    basis: SplitBasis,
) -> Result<(Dataset, Dataset), DataError> {
    let (train, test) = split_indices(d, test_fraction, key, basis)?;
    Ok((d.subset(&train), d.subset(&test)))
}

/// The indices behind [`train_test_split`]: (train, test), each ascending.
///
/// # Errors
/// As [`train_test_split`].
pub fn split_indices(
    d: &Dataset,
    test_fraction: f64,
    key: &SplitKey,
    basis: SplitBasis,
) -> Result<(Vec<usize>, Vec<usize>), DataError> {
    cut(
        d,
        test_fraction,
        key,
        Purpose::TrainTest,
        basis,
        ("test_fraction", "the training set", "the test set"),
    )
}

/// Splits `d` (a training set) into (fit, validation) for a private search that scores its
/// trials on records none of them trained on: each record goes to validation with probability
/// `validation_fraction`, independently of every other record, by the keyed hash of its
/// `basis` part (what the run's neighbouring relation leaves fixed), drawn apart from the
/// train/test cut and the folds (another purpose tag). Neighbouring data sets give neighbouring
/// (fit, validation) pairs, so the trials' guarantees and the noisy scores' hold for `d` itself
/// (see the module documentation). The records keep their order.
///
/// # Errors
/// [`DataError::InvalidParameter`] when `validation_fraction` is not in (0, 1);
/// [`DataError::EmptySplit`] when either part comes out empty.
pub fn validation_split(
    d: &Dataset,
    validation_fraction: f64,
    key: &SplitKey,
    basis: SplitBasis,
) -> Result<(Dataset, Dataset), DataError> {
    let (fit, validation) = validation_indices(d, validation_fraction, key, basis)?;
    Ok((d.subset(&fit), d.subset(&validation)))
}

/// The indices behind [`validation_split`]: (fit, validation), each ascending.
///
/// # Errors
/// As [`validation_split`].
pub fn validation_indices(
    d: &Dataset,
    validation_fraction: f64,
    key: &SplitKey,
    basis: SplitBasis,
) -> Result<(Vec<usize>, Vec<usize>), DataError> {
    cut(
        d,
        validation_fraction,
        key,
        Purpose::Validation,
        basis,
        (
            "validation_fraction",
            "the set the trials train on",
            "the validation set",
        ),
    )
}

/// (kept, held out) indices of `d`, each ascending: a record is held out when its draw for
/// `purpose` falls below `fraction`. The last argument names the fraction's setting, the kept
/// side and the held-out side, for messages.
fn cut(
    d: &Dataset,
    fraction: f64,
    key: &SplitKey,
    purpose: Purpose,
    basis: SplitBasis,
    (setting, kept_side, held_side): (&'static str, &str, &str),
) -> Result<(Vec<usize>, Vec<usize>), DataError> {
    if !(fraction.is_finite() && fraction > 0.0 && fraction < 1.0) {
        return Err(DataError::param(setting, "finite and in (0, 1)", fraction));
    }
    // u < f·2⁶⁴ has probability f (to within 2⁻⁶⁴); the cast saturates just below 1.
    let threshold = (fraction * 2f64.powi(64)) as u64;
    let (held, kept): (Vec<usize>, Vec<usize>) =
        (0..d.n).partition(|&i| record_draw(d, i, key, purpose, basis) < threshold);
    for (part, side) in [(&kept, kept_side), (&held, held_side)] {
        if part.is_empty() {
            return Err(DataError::empty_split(
                side,
                d.n,
                format!("{setting} {fraction}"),
                key,
            ));
        }
    }
    Ok((kept, held))
}

/// One fold of [`kfold`]: (train indices, test indices), each ascending.
pub type Fold = (Vec<usize>, Vec<usize>);

/// The fold (in `0..k`) of every record of `d`: a keyed hash of the record's `basis` part, so
/// each record's fold is independent of the other records and uniform over the `k` folds.
///
/// # Errors
/// [`DataError::InvalidParameter`] unless `2 ≤ k ≤ n`; [`DataError::EmptySplit`] when a fold
/// gets no records.
pub fn fold_assignments(
    d: &Dataset,
    k: usize,
    key: &SplitKey,
    basis: SplitBasis,
) -> Result<Vec<usize>, DataError> {
    if k < 2 || k > d.n {
        return Err(DataError::param(
            "k",
            format!("between 2 and the number of records {}", d.n),
            k,
        ));
    }
    // Multiply-shift maps the uniform u64 onto 0..k with bias below k/2⁶⁴.
    let folds: Vec<usize> = (0..d.n)
        .map(|i| {
            let u = record_draw(d, i, key, Purpose::Folds, basis);
            ((u128::from(u) * k as u128) >> 64) as usize
        })
        .collect();
    let mut sizes = vec![0usize; k];
    for &f in &folds {
        sizes[f] += 1;
    }
    if let Some(empty) = sizes.iter().position(|&s| s == 0) {
        return Err(DataError::empty_split(
            &format!("fold {} of {k}", empty + 1),
            d.n,
            format!("k = {k}"),
            key,
        ));
    }
    Ok(folds)
}

/// `k` (train, test) index pairs for k-fold cross-validation over `d`: fold i's test set is
/// the records whose [`fold_assignments`] is i, its training set all the others. Each record
/// is in the test set of exactly one fold and in the training set of the other k − 1; fold
/// sizes are random (about n/k each).
///
/// # Errors
/// As [`fold_assignments`].
pub fn kfold(
    d: &Dataset,
    k: usize,
    key: &SplitKey,
    basis: SplitBasis,
) -> Result<Vec<Fold>, DataError> {
    let assignment = fold_assignments(d, k, key, basis)?;
    Ok((0..k)
        .map(|f| (0..d.n).partition(|&i| assignment[i] != f))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::tests::toy;

    fn key(b: u8) -> SplitKey {
        SplitKey::from_bytes([b; 32])
    }

    fn is_partition(a: &[usize], b: &[usize], n: usize) -> bool {
        let mut all: Vec<usize> = a.iter().chain(b).copied().collect();
        all.sort_unstable();
        all == (0..n).collect::<Vec<_>>()
    }

    #[test]
    fn split_is_a_reproducible_partition_that_keeps_rows_whole() {
        let d = toy(40);
        let (train, test) = split_indices(&d, 0.3, &key(1), SplitBasis::Record).unwrap();
        assert!(is_partition(&train, &test, 40));
        assert!(train.windows(2).all(|w| w[0] < w[1]));
        assert!(test.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            split_indices(&d, 0.3, &key(1), SplitBasis::Record).unwrap(),
            (train.clone(), test.clone())
        );
        assert_ne!(
            split_indices(&d, 0.3, &key(2), SplitBasis::Record)
                .unwrap()
                .1,
            test
        );
        let (a, b) = train_test_split(&d, 0.3, &key(1), SplitBasis::Record).unwrap();
        assert_eq!((a.n, b.n), (train.len(), test.len()));
        assert_eq!(a.x.len(), 2 * a.n);
        // Rows keep their labels: feature 0 of record i is i, its class i % 3.
        for part in [&a, &b] {
            for r in 0..part.n {
                assert_eq!(part.y[r], (part.row(r)[0] as u32) % 3);
            }
        }
    }

    #[test]
    fn a_larger_fraction_holds_out_a_superset() {
        // Both cuts threshold the same per-record value.
        let d = toy(200);
        let small = split_indices(&d, 0.2, &key(3), SplitBasis::Record)
            .unwrap()
            .1;
        let large = split_indices(&d, 0.5, &key(3), SplitBasis::Record)
            .unwrap()
            .1;
        assert!(small.iter().all(|i| large.contains(i)));
    }

    #[test]
    fn identical_records_draw_alike_and_negative_zero_is_zero() {
        let mut d = toy(6);
        for i in 0..6 {
            d.x[2 * i] = if i % 2 == 0 { 0.0 } else { -0.0 };
            d.x[2 * i + 1] = 5.0;
            d.y[i] = 1;
        }
        let draw =
            |d: &Dataset, i| record_draw(d, i, &key(4), Purpose::TrainTest, SplitBasis::Record);
        assert!((0..6).all(|i| draw(&d, i) == draw(&d, 0)));
        d.y[5] = 2;
        assert_ne!(draw(&d, 5), draw(&d, 0));
        // Labels that read as numbers are compared as numbers.
        d.class_names = vec!["x".into(), "1.0".into(), "-0".into()];
        let (one, zero) = (draw(&d, 0), draw(&d, 5));
        d.class_names = vec!["x".into(), "1".into(), "0".into()];
        assert_eq!((draw(&d, 0), draw(&d, 5)), (one, zero));
        d.y[5] = 1;
        d.x[11] = 5.5;
        assert_ne!(draw(&d, 5), draw(&d, 0));
    }

    #[test]
    fn split_rejects_bad_fractions_and_empty_sides() {
        let d = toy(10);
        for f in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY] {
            let msg = split_indices(&d, f, &key(0), SplitBasis::Record)
                .unwrap_err()
                .to_string();
            assert!(msg.contains("test_fraction"), "{msg}");
        }
        for f in [1e-12, 1.0 - 1e-12] {
            let e = split_indices(&d, f, &key(0), SplitBasis::Record).unwrap_err();
            assert!(matches!(e, DataError::EmptySplit { .. }), "{e}");
            let msg = e.to_string();
            assert!(msg.contains("came out empty") && msg.contains(&key(0).to_string()));
            assert!(msg.contains(&format!("test_fraction {f}")), "{msg}");
        }
    }

    #[test]
    fn validation_cut_is_per_record_and_apart_from_the_test_cut() {
        let d = toy(300);
        let (fit, validation) = validation_split(&d, 0.25, &key(7), SplitBasis::Record).unwrap();
        assert_eq!(fit.n + validation.n, 300);
        assert!((50..=100).contains(&validation.n), "{}", validation.n);
        // Another purpose: not the records the test cut at the same fraction holds out.
        let test = split_indices(&d, 0.25, &key(7), SplitBasis::Record)
            .unwrap()
            .1;
        let held: Vec<f32> = test.iter().map(|&i| d.row(i)[0]).collect();
        let valid: Vec<f32> = (0..validation.n).map(|i| validation.row(i)[0]).collect();
        assert_ne!(held, valid);
        // Removing a record moves only that record: the others keep their side.
        let without = d.subset(&(1..300).collect::<Vec<_>>());
        let (_, v2) = validation_split(&without, 0.25, &key(7), SplitBasis::Record).unwrap();
        let first_out = validation.row(0)[0] == 0.0;
        assert_eq!(v2.n, validation.n - usize::from(first_out));
        let msg = validation_split(&d, 1.5, &key(7), SplitBasis::Record)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("validation_fraction"), "{msg}");
        let msg = validation_split(&toy(3), 1e-9, &key(7), SplitBasis::Record)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("the validation set"), "{msg}");
    }

    #[test]
    fn kfold_folds_partition_and_cover_everything_once() {
        let d = toy(60);
        let folds = kfold(&d, 5, &key(11), SplitBasis::Record).unwrap();
        assert_eq!(folds.len(), 5);
        let assignment = fold_assignments(&d, 5, &key(11), SplitBasis::Record).unwrap();
        let mut seen = [0; 60];
        for (f, (train, test)) in folds.iter().enumerate() {
            assert!(is_partition(train, test, 60));
            assert!(!test.is_empty());
            assert!(test.windows(2).all(|w| w[0] < w[1]));
            for &i in test {
                assert_eq!(assignment[i], f);
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
        assert_eq!(kfold(&d, 5, &key(11), SplitBasis::Record).unwrap(), folds);
        assert_ne!(kfold(&d, 5, &key(12), SplitBasis::Record).unwrap(), folds);
        // Folds and the train/test cut draw independent values from one key.
        assert_ne!(
            fold_assignments(&d, 2, &key(11), SplitBasis::Record).unwrap(),
            (0..60)
                .map(|i| usize::from(
                    split_indices(&d, 0.5, &key(11), SplitBasis::Record)
                        .unwrap()
                        .1
                        .contains(&i)
                ))
                .collect::<Vec<_>>()
        );
        for (n, k) in [(5, 1), (5, 6)] {
            let msg = kfold(&toy(n), k, &key(0), SplitBasis::Record)
                .unwrap_err()
                .to_string();
            assert!(msg.contains("k must be"), "{msg}");
        }
        let msg = kfold(&toy(3), 3, &key(0), SplitBasis::Record)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("fold") && msg.contains("came out empty"),
            "{msg}"
        );
    }

    #[test]
    fn keys_round_trip_through_hex() {
        let k = SplitKey::from_bytes(std::array::from_fn(|i| (i * 37) as u8));
        let hex = k.to_string();
        assert_eq!(hex.len(), 64);
        assert_eq!(hex, hex.to_lowercase());
        assert_eq!(hex.parse::<SplitKey>().unwrap(), k);
        assert_eq!(hex.to_uppercase().parse::<SplitKey>().unwrap(), k);
        assert_eq!(SplitKey::from_seed(0), SplitKey::from_seed(0));
        assert_ne!(SplitKey::from_seed(0), SplitKey::from_seed(1));
        let signed = format!("+f{}", &hex[2..]);
        for bad in [
            "",
            "00",
            &hex[1..],
            &format!("{hex}0"),
            &signed,
            &hex.replace('0', "g"),
        ] {
            let msg = bad.parse::<SplitKey>().unwrap_err().to_string();
            assert!(
                msg.contains("split_key must be 64 hexadecimal digits"),
                "{msg}"
            );
        }
        // Multi-byte characters are not hex digits (and must not panic).
        let msg = "é".repeat(32).parse::<SplitKey>().unwrap_err().to_string();
        assert!(msg.contains("split_key"), "{msg}");
    }
}
