//! The budget of a query, split and turned into mechanisms before any row is read: ε is
//! divided across the released aggregates by their weights (default even) and, for an
//! aggregate with private keys, its key selection; each aggregate's share goes to its noisy
//! parts (AVG: a sum and a count; VARIANCE: a count, a sum and a sum of squares). Every part's
//! sensitivity comes from the declared bounds and the contribution bounds L0 and L∞.
//!
//! # A count released once
//! An AVG or a VARIANCE whose value is never NULL nor NaN counts the same rows as a COUNT(*)
//! of the same aggregate (same rows, groups and bound L∞). When the query releases that
//! COUNT(*), the AVG takes its noisy value instead of a second noisy count: a function of two
//! released values, post-processing, with no event of its own; its whole share goes to its
//! sums. The events of the query still add up to ε.
//!
//! A SUM of such a value takes the same count where that adds less noise: it releases the sum
//! of (x − c), c the middle of its bounds, whose sensitivity is L∞·(hi − lo)/2 instead of
//! L∞·max(|lo|, |hi|), and adds c times the noisy count. For bounds [0, hi] and equal shares
//! that halves the noise variance (TPC-H Q1's sums).
//!
//! # Sensitivities (add or remove all rows of one unit)
//! After bounding (see [`crate::contribute`]) a unit contributes to at most L0 groups, and to
//! each by at most C: a count L∞ (rows) or 1 (units), a sum the per-unit bound of its argument
//! (L∞·max|x| or the declared per-unit sum bounds), a centred sum L∞·(hi − lo)/2. The vector
//! of all groups' values therefore moves by at most L0·C in L1 norm, and each group gets
//! discrete Laplace noise of scale L0·C/ε_part: ε_part-DP for the whole vector.
//!
//! # Sums on a grid (no floating-point sum ever reaches a release)
//! A sum part with nominal scale b = L0·C/ε works on a noise grid g = 2^(⌊log₂ b⌋ − 20) and a
//! 2^30 times finer grid g′. Each row's clamped value becomes the integer trunc(x/g′); a unit's
//! integers are added exactly in 128 bits (checked), scaled and clamped to |c| ≤ Y = ⌊C/g′⌋;
//! the group's exact total T is rounded to the noise grid, k = round(T/2^30), and released as
//! (k + Z)·g with Z discrete Laplace for the integer sensitivity Δ_g = L0·(⌊C/g⌋ + 1).
//! *Why Δ_g holds:* in one group the unit moves T by |c| ≤ Y, so k moves by at most
//! ⌊Y/2^30⌋ + 1 ≤ ⌊C/g⌋ + 1 (rounding moves a value by at most ½, and an integer ≤ y + 1 is
//! ≤ ⌊y⌋ + 1; Y/2^30 ≤ C/g); over its at most L0 groups, by at most L0·(⌊C/g⌋ + 1). Rounding
//! is per group, so the +1 is counted per group. The integer noise has scale t ≥ Δ_g/ε (the
//! exact sampler rounds t up), hence ε-DP; k + Z times g is post-processing.
//!
//! # Private keys (Wilson et al. 2020, §3)
//! A group's units are counted (a unit adds 1 to at most L0 groups: sensitivity L0) with
//! discrete Laplace noise of scale t = L0/ε_sel, and the group is released when the noisy count
//! reaches τ = 1 + ⌈t·ln(L0/δ)⌉. A group that only the added unit has (count 1) passes with
//! probability P(Z ≥ τ − 1) = p^(τ−1)/(1 + p) ≤ e^(−(τ−1)/t) with p = e^(−1/t); over its at
//! most L0 such groups, at most L0·e^(−(τ−1)/t) ≤ δ. So selection is (ε_sel, δ)-DP.

use std::collections::BTreeMap;

use dpml_mechanisms::{DiscreteLaplaceMechanism, PermuteAndFlip, PrivacyEvent};

use crate::aggregate::{DpAggregate, Kind, Measure};
use crate::error::{Result, SqlError};
use crate::interval::{Range, centre};

/// The noise grid spans about 2^20 steps per unit of scale (as the Laplace mechanism's).
const NOISE_GRID_BITS: i32 = 20;
/// The per-row grid is 2^30 times finer than the noise grid.
pub(crate) const FINE_GRID_BITS: i32 = 30;
/// Candidate points of a quantile, evenly spaced over the declared range.
pub(crate) const QUANTILE_CANDIDATES: usize = 1000;
/// Quantiles are taken at q rounded to a multiple of 2^-20 (utilities stay exact integers).
pub(crate) const QUANTILE_SCALE: i64 = 1 << 20;

/// How the query's ε and δ are split, and the options that shape the noise.
#[derive(Debug, Clone, Default)]
pub struct Split {
    /// Relative weight of each aggregate, by its column (default 1); the engine has matched
    /// each name to an aggregate and checked each weight.
    pub weights: BTreeMap<String, f64>,
}

/// One noisy part of a measure.
#[derive(Debug, Clone)]
pub(crate) enum Part {
    /// An integer count with per-unit bound `bound` per group.
    Count {
        source: CountSource,
        bound: u64,
        mech: DiscreteLaplaceMechanism,
    },
    /// A sum on a grid (see the module docs).
    Sum {
        grid: FixedGrid,
        mech: DiscreteLaplaceMechanism,
    },
    /// A quantile: permute-and-flip over candidate points, per group.
    Quantile {
        input: usize,
        range: Range,
        q_num: i64,
        selector: PermuteAndFlip,
    },
}

/// What a count part counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CountSource {
    /// Rows, or rows where this flag input is true.
    Rows(Option<usize>),
    /// Rows where this value input is not null.
    NonNull(usize),
    /// Units (1 per unit and group), or units with a row where this flag input is true.
    Units(Option<usize>),
}

/// The fixed-point form of one sum part.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FixedGrid {
    /// The value input summed.
    pub input: usize,
    /// Every value is clamped into `range`, then `centre` is subtracted (and the result
    /// squared, for a sum of squares).
    pub range: Range,
    pub centre: f64,
    pub square: bool,
    /// g′ = 2^fine_exp; the noise grid is g = 2^(fine_exp + 30).
    pub fine_exp: i32,
    /// One unit's total in one group is clamped into `[sum_lo, sum_hi]` (fine units).
    pub sum_lo: i128,
    pub sum_hi: i128,
    /// The per-unit, per-group bound C (real units).
    pub bound: f64,
}

impl FixedGrid {
    /// The noise grid's granularity g.
    pub(crate) fn granularity(&self) -> f64 {
        pow2(self.fine_exp + FINE_GRID_BITS)
    }

    /// The row value `x` (finite) as fine-grid integer: trunc((clamp(x) − centre)[²]/g′).
    pub(crate) fn fine(&self, x: f64) -> i128 {
        let v = x.clamp(self.range.0, self.range.1) - self.centre;
        let v = if self.square { v * v } else { v };
        // Scaling by a power of two is exact; the cast truncates toward zero (saturating).
        // Through i64 where it fits: the same truncation, without the slow 128-bit conversion.
        let scaled = v * pow2(-self.fine_exp);
        if scaled.abs() < pow2(63) {
            scaled as i64 as i128
        } else {
            scaled as i128
        }
    }
}

/// One measure's calibration.
#[derive(Debug, Clone)]
pub(crate) struct MeasureCal {
    pub epsilon: f64,
    pub parts: Vec<Part>,
    /// (i, k): part `i` of this measure is not drawn: it is the aggregate's part `k` (counting
    /// the parts of all its measures in order), a count another measure releases.
    pub shared: Option<(usize, usize)>,
}

impl MeasureCal {
    /// The ε of part `i`: the measure's ε split evenly over the parts it draws itself (a
    /// quantile's selection spends all of it; a shared part none).
    pub(crate) fn part_epsilon(&self, i: usize) -> f64 {
        let drawn = self.parts.len() - usize::from(self.shared.is_some());
        match &self.parts[i] {
            _ if self.is_shared(i) => 0.0,
            Part::Quantile { .. } => self.epsilon,
            _ => self.epsilon / drawn as f64,
        }
    }

    /// Whether part `i` is another measure's (not drawn for this one).
    pub(crate) fn is_shared(&self, i: usize) -> bool {
        self.shared.is_some_and(|(j, _)| j == i)
    }
}

/// An aggregate's key selection.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    pub epsilon: f64,
    pub delta: f64,
    pub mech: DiscreteLaplaceMechanism,
    /// τ: a group is released when its noisy unit count reaches it.
    pub threshold: i64,
}

/// One aggregate's calibration.
#[derive(Debug, Clone)]
pub(crate) struct AggregateCal {
    /// L0 in force (at most the number of public groups).
    pub max_groups: u64,
    pub selection: Option<Selection>,
    pub measures: Vec<MeasureCal>,
}

/// The whole query's calibration.
#[derive(Debug, Clone)]
pub(crate) struct Calibration {
    pub aggregates: Vec<AggregateCal>,
    /// ε and δ spent in total (basic composition of the parts).
    pub epsilon: f64,
    pub delta: f64,
    /// The privacy events of every part, in order.
    pub events: Vec<PrivacyEvent>,
}

/// Calibrates every aggregate; `public_groups[i]` is the number of public groups of aggregate
/// `i` (None for private keys).
pub(crate) fn calibrate(
    aggregates: &[DpAggregate],
    public_groups: &[Option<usize>],
    epsilon: f64,
    delta: f64,
    split: &Split,
) -> Result<Calibration> {
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(SqlError::input(format!(
            "epsilon must be finite and > 0, got {epsilon}"
        )));
    }
    if !(0.0..1.0).contains(&delta) {
        return Err(SqlError::input(format!(
            "delta must be in [0, 1), got {delta}"
        )));
    }
    let weight = |name: &str| split.weights.get(name).copied().unwrap_or(1.0);
    let selections = public_groups.iter().filter(|g| g.is_none()).count();
    let total: f64 = aggregates
        .iter()
        .flat_map(|a| a.measures.iter().map(|m| weight(&m.column)))
        .sum::<f64>()
        + selections as f64;
    if total <= 0.0 {
        return Err(SqlError::input("the query releases no aggregate"));
    }
    if selections > 0 && delta <= 0.0 {
        return Err(SqlError::input(
            "private group keys need delta > 0 (--delta) for the noisy threshold",
        ));
    }
    let mut events = Vec::new();
    let mut out = Vec::new();
    for (a, groups) in aggregates.iter().zip(public_groups) {
        let max_groups = match groups {
            Some(n) => a.max_groups.min((*n).max(1) as u64),
            None => a.max_groups,
        };
        let selection = match groups {
            Some(_) => None,
            None => {
                let eps = epsilon / total;
                let delta = delta / selections as f64;
                let mech = DiscreteLaplaceMechanism::new(max_groups, eps)?;
                let t = mech.scale_rational().to_f64_up();
                let threshold: f64 = 1.0 + (t * (max_groups as f64 / delta).ln()).ceil();
                if !(threshold.is_finite() && threshold < i64::MAX as f64 / 2.0) {
                    return Err(SqlError::input("the key-selection threshold overflows"));
                }
                events.push(PrivacyEvent::EpsilonDelta {
                    epsilon: eps,
                    delta,
                });
                Some(Selection {
                    epsilon: eps,
                    delta,
                    mech,
                    threshold: threshold as i64,
                })
            }
        };
        let eps_of = |m: &Measure| epsilon * weight(&m.column) / total;
        // Which SUMs are released centred, on the best-funded COUNT(*) of the aggregate.
        let star_epsilon = a
            .measures
            .iter()
            .filter(|m| m.kind == Kind::Count { flag: None })
            .map(eps_of)
            .reduce(f64::max);
        let centred: Vec<bool> = a
            .measures
            .iter()
            .map(|m| centres(&m.kind, a.max_rows, eps_of(m), star_epsilon))
            .collect();
        // The counts that COUNT measures release, by the aggregate's part index, with their ε:
        // an AVG, a VARIANCE or a centred SUM that needs the same count reuses the best-funded
        // one and spends its whole share on its sums.
        let mut released_counts = Vec::new();
        let mut k = 0;
        for (m, &centred) in a.measures.iter().zip(&centred) {
            if let Kind::Count { flag } = m.kind {
                released_counts.push((CountSource::Rows(flag), k, eps_of(m)));
            }
            k += part_count(&m.kind, centred);
        }
        let mut measures = Vec::new();
        for (m, &centred) in a.measures.iter().zip(&centred) {
            let eps = eps_of(m);
            let own = count_source(&m.kind, centred);
            let released = released_counts
                .iter()
                .filter(|(source, _, _)| own.is_some_and(|(s, _)| s == *source))
                .max_by(|a, b| a.2.total_cmp(&b.2));
            let parts = parts(&m.kind, eps, max_groups, a.max_rows, released.is_some()).map_err(
                |e| match e {
                    // The samplers' own limits, told in the terms of the query.
                    SqlError::Input(why) => {
                        // A reason that ends in its own advice (in parentheses) keeps it;
                        // otherwise a tiny share made the noise too wide, a huge one too fine.
                        let what = if eps < 1.0 { "larger" } else { "smaller" };
                        let advice = match why.ends_with(')') {
                            true => String::new(),
                            false => {
                                format!(" (give a {what} ε, or this aggregate a {what} --weight)")
                            }
                        };
                        SqlError::input(format!(
                            "{} cannot be released at its ε share {eps:e}: {why}{advice}",
                            m.display
                        ))
                    }
                    other => other,
                },
            )?;
            let shared = own.zip(released).map(|((_, i), (_, k, _))| (i, *k));
            // The part indices above assume the layout `parts` builds.
            let shared_is_a_count = shared.is_none_or(|(i, _)| {
                matches!(parts.get(i), Some(Part::Count { source, .. }) if own.is_some_and(|(s, _)| s == *source))
            });
            if parts.len() != part_count(&m.kind, centred) || !shared_is_a_count {
                return Err(SqlError::internal(
                    "a measure's parts are not laid out as counted",
                ));
            }
            let cal = MeasureCal {
                epsilon: eps,
                parts,
                shared,
            };
            for (i, p) in cal.parts.iter().enumerate() {
                match p {
                    _ if cal.is_shared(i) => {}
                    Part::Count { mech, .. } | Part::Sum { mech, .. } => events.push(mech.event()),
                    Part::Quantile { .. } => events.push(PrivacyEvent::EpsilonDelta {
                        epsilon: eps,
                        delta: 0.0,
                    }),
                }
            }
            measures.push(cal);
        }
        out.push(AggregateCal {
            max_groups,
            selection,
            measures,
        });
    }
    let used_delta = if selections > 0 { delta } else { 0.0 };
    Ok(Calibration {
        aggregates: out,
        epsilon,
        delta: used_delta,
        events,
    })
}

/// How many parts a measure of `kind` has (a SUM: 2 when `centred`).
fn part_count(kind: &Kind, centred: bool) -> usize {
    match kind {
        Kind::Avg { .. } => 2,
        Kind::Var { .. } => 3,
        Kind::Sum { .. } if centred => 2,
        _ => 1,
    }
}

/// Whether a SUM is released centred: as its sum of (x − centre), centre the middle of its
/// bounds, plus centre × the aggregate's noisy COUNT(*) (with `count_epsilon`, when there is
/// one). The count is already released, so this costs nothing; it is chosen when it adds less
/// noise than the plain sum. Per unit and group, the plain sum moves by up to L∞·max(|lo|,
/// |hi|), the centred one by L∞·(hi − lo)/2, and the count by L∞; so, in units of (L0·L∞)²,
/// the variances compare as max²/ε² against half²/ε² + centre²/ε_count² (for bounds [0, hi]
/// at equal shares: half of the variance). It needs rows bounded by L∞ (the count's bound),
/// no per-unit sum bounds (they clamp the plain sum) and a value that is never NULL nor NaN (so
/// that the rows summed are the rows counted).
fn centres(kind: &Kind, linf: Option<u64>, epsilon: f64, count_epsilon: Option<f64>) -> bool {
    let Kind::Sum {
        range: (lo, hi),
        sum_range: None,
        never_null: true,
        ..
    } = *kind
    else {
        return false;
    };
    let (Some(_), Some(eps_count)) = (linf, count_epsilon) else {
        return false;
    };
    let (centre, half, max) = (centre((lo, hi)), (hi - lo) / 2.0, lo.abs().max(hi.abs()));
    (half / epsilon).powi(2) + (centre / eps_count).powi(2) < (max / epsilon).powi(2)
}

/// What the count part of an AVG or a VARIANCE of input `value` counts: the rows where it is
/// not NULL, that is every row when it is never NULL.
fn count_of(value: usize, never_null: bool) -> CountSource {
    match never_null {
        true => CountSource::Rows(None),
        false => CountSource::NonNull(value),
    }
}

/// The count part of a measure that has one (AVG, VARIANCE, a centred SUM): what it counts,
/// and its index among the measure's parts.
fn count_source(kind: &Kind, centred: bool) -> Option<(CountSource, usize)> {
    match *kind {
        Kind::Sum { .. } if centred => Some((CountSource::Rows(None), 1)),
        Kind::Avg {
            value, never_null, ..
        } => Some((count_of(value, never_null), 1)),
        Kind::Var {
            value, never_null, ..
        } => Some((count_of(value, never_null), 2)),
        _ => None,
    }
}

/// The noisy parts of one measure, each with an even share of its ε; with `count_released`,
/// its count part is another measure's (see [`MeasureCal::shared`]) and the share goes to the
/// other parts alone (a SUM then has a count part: it is released centred).
fn parts(
    kind: &Kind,
    epsilon: f64,
    l0: u64,
    linf: Option<u64>,
    count_released: bool,
) -> Result<Vec<Part>> {
    let rows = linf.unwrap_or(1);
    let count = |source: CountSource, bound: u64, eps: f64| -> Result<Part> {
        let sensitivity = l0.checked_mul(bound).ok_or_else(|| {
            SqlError::input("the contribution bounds overflow: L0·L∞ is too large")
        })?;
        Ok(Part::Count {
            source,
            bound,
            mech: DiscreteLaplaceMechanism::new(sensitivity, eps)?,
        })
    };
    let sum =
        |input: usize,
         range: Range,
         centre: f64,
         square: bool,
         sum_range: Option<Range>,
         eps: f64| { sum_part(input, range, centre, square, sum_range, linf, l0, eps) };
    Ok(match *kind {
        Kind::Count { flag } => vec![count(CountSource::Rows(flag), rows, epsilon)?],
        Kind::CountUnits { flag } => vec![count(CountSource::Units(flag), 1, epsilon)?],
        // Centred (see `centres`): the count is the aggregate's COUNT(*), not drawn again.
        Kind::Sum { value, range, .. } if count_released => {
            let centre = centre(range);
            vec![
                sum(value, range, centre, false, None, epsilon)?,
                count(CountSource::Rows(None), rows, epsilon)?,
            ]
        }
        Kind::Sum {
            value,
            range,
            sum_range,
            ..
        } => {
            // Without L∞, one unit's sum in a group is clamped into the bounds (the per-unit
            // clamp of the schema's `bounds`).
            let sum_range = sum_range.or(if linf.is_none() { Some(range) } else { None });
            vec![sum(value, range, 0.0, false, sum_range, epsilon)?]
        }
        Kind::Avg {
            value,
            range,
            never_null,
        } => {
            let e = epsilon / if count_released { 1.0 } else { 2.0 };
            let centre = centre(range);
            vec![
                sum(value, range, centre, false, None, e)?,
                count(count_of(value, never_null), rows, e)?,
            ]
        }
        Kind::Var {
            value,
            range,
            never_null,
            ..
        } => {
            let e = epsilon / if count_released { 2.0 } else { 3.0 };
            let centre = centre(range);
            vec![
                sum(value, range, centre, false, None, e)?,
                sum(value, range, centre, true, None, e)?,
                count(count_of(value, never_null), rows, e)?,
            ]
        }
        Kind::Quantile { value, range, q } => {
            let q_num = (q * QUANTILE_SCALE as f64).round() as i64;
            let spread = q_num.max(QUANTILE_SCALE - q_num).max(1) as f64;
            // Each group's selection runs at ε/L0: a unit changes at most L0 groups.
            let selector = PermuteAndFlip::new(epsilon / l0 as f64, rows as f64 * spread)?;
            vec![Part::Quantile {
                input: value,
                range,
                q_num,
                selector,
            }]
        }
    })
}

/// A sum part on its grid (see the module docs).
#[allow(clippy::too_many_arguments)]
fn sum_part(
    input: usize,
    range: Range,
    centre: f64,
    square: bool,
    sum_range: Option<Range>,
    linf: Option<u64>,
    l0: u64,
    epsilon: f64,
) -> Result<Part> {
    let half = (range.1 - range.0) / 2.0;
    let per_row = if square {
        half * half
    } else {
        (range.0 - centre).abs().max((range.1 - centre).abs())
    };
    let mut bound = f64::INFINITY;
    if let Some(l) = linf {
        bound = bound.min(l as f64 * per_row);
    }
    if let Some((lo, hi)) = sum_range {
        bound = bound.min(lo.abs().max(hi.abs()));
    }
    if !bound.is_finite() {
        return Err(match (linf, sum_range) {
            (None, None) => SqlError::internal("a sum part without a per-unit bound"),
            _ => SqlError::input(format!(
                "bounds [{}, {}] are too wide to sum: one unit's contribution to a group is \
                 not a finite number (declare narrower bounds or sum_bounds)",
                range.0, range.1
            )),
        });
    }
    if bound <= 0.0 {
        // Every contribution is 0 (bounds [0, 0] after centring): a tiny bound keeps the
        // mechanism well defined and adds only negligible noise, on a grid dpml represents.
        bound = pow2(-300);
    }
    let scale = l0 as f64 * bound / epsilon;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(SqlError::input(format!(
            "the noise scale of a sum, {l0}·{bound}/{epsilon}, is not representable"
        )));
    }
    let noise_exp = floor_log2(scale) - NOISE_GRID_BITS;
    let fine_exp = noise_exp - FINE_GRID_BITS;
    if fine_exp > 900 {
        return Err(SqlError::input(format!(
            "the noise scale of a sum ({scale:e}) is beyond the range dpml represents (declare \
             narrower bounds or sum_bounds, or give a larger ε)"
        )));
    }
    if fine_exp < -900 {
        return Err(SqlError::input(format!(
            "the noise scale of a sum ({scale:e}) is below the range dpml represents (give a \
             smaller ε, or this aggregate a smaller --weight)"
        )));
    }
    let per_group = (bound * pow2(-noise_exp)).floor();
    if per_group >= (1u64 << 53) as f64 {
        return Err(SqlError::input("a sum's bound is too large for its grid"));
    }
    let grid_sensitivity = l0
        .checked_mul(per_group as u64 + 1)
        .ok_or_else(|| SqlError::input("a sum's grid sensitivity overflows"))?;
    let cap = (bound * pow2(-fine_exp)).floor() as i128;
    let (sum_lo, sum_hi) = match sum_range {
        Some((lo, hi)) => (
            ((lo * pow2(-fine_exp)) as i128).max(-cap),
            ((hi * pow2(-fine_exp)) as i128).min(cap),
        ),
        None => (-cap, cap),
    };
    Ok(Part::Sum {
        grid: FixedGrid {
            input,
            range,
            centre,
            square,
            fine_exp,
            sum_lo,
            sum_hi,
            bound,
        },
        mech: DiscreteLaplaceMechanism::new(grid_sensitivity, epsilon)?,
    })
}

/// 2^e for e in the normal range, exactly.
pub(crate) fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// ⌊log₂ x⌋ for a finite x > 0, exactly (from the exponent bits).
fn floor_log2(x: f64) -> i32 {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: shift into the normal range.
        floor_log2(x * pow2(64)) - 64
    } else {
        exp - 1023
    }
}

impl Part {
    /// The noise scale in output units (the Laplace b of the released value), the
    /// sensitivity the noise covers (real units), and the 95% half-width of the noise.
    pub(crate) fn scale_sensitivity_halfwidth(&self, l0: u64) -> (f64, f64, f64) {
        match self {
            Part::Count { mech, bound, .. } => {
                let t = mech.scale();
                (t, (l0 * bound) as f64, discrete_half_width(t))
            }
            Part::Sum { grid, mech } => {
                let g = grid.granularity();
                let t = mech.scale();
                (t * g, l0 as f64 * grid.bound, discrete_half_width(t) * g)
            }
            Part::Quantile { .. } => (f64::NAN, f64::NAN, f64::NAN),
        }
    }
}

/// The smallest h with P(|Z| > h) ≤ 5% for Z discrete Laplace of scale t:
/// P(|Z| ≥ k) = 2p^k/(1 + p), p = e^(−1/t).
pub(crate) fn discrete_half_width(t: f64) -> f64 {
    let p = (-1.0 / t).exp();
    if p <= 0.0 {
        return 0.0;
    }
    // P(|Z| > h) = 2 p^(h+1) / (1 + p) ≤ 0.05  ⇔  h + 1 ≥ ln(0.025 (1 + p)) / ln p.
    ((0.025 * (1.0 + p)).ln() / p.ln()).ceil().max(1.0) - 1.0
}

/// The noise of a centred SUM's released value, X + c·Z: X the centred sum's noise, Laplace
/// of scale `b` (on a grid 2^20 times finer than b: continuous to that precision), Z the
/// count's discrete Laplace noise of scale `t`. Returns the Laplace scale of the same variance
/// and the 95% half-width.
pub(crate) fn centred_sum_noise(b: f64, c: f64, t: f64) -> (f64, f64) {
    let p = (-1.0 / t).exp();
    let count_variance = 2.0 * p / ((1.0 - p) * (1.0 - p));
    let variance = 2.0 * b * b + c * c * count_variance;
    (
        (variance / 2.0).sqrt(),
        centred_sum_abs_quantile(b, c, t, 0.95),
    )
}

/// The `prob`-quantile of |X + c·Z|, the noise of a centred SUM's value: X Laplace of scale
/// `b` (its centred sum's), Z discrete Laplace of scale `t` (its count's); by bisection on the
/// tail.
pub fn centred_sum_abs_quantile(b: f64, c: f64, t: f64, prob: f64) -> f64 {
    let tail = 1.0 - prob;
    let mut hi = b + c.abs() * t;
    while centred_sum_tail(hi, b, c, t) > tail && hi.is_finite() {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if centred_sum_tail(mid, b, c, t) > tail {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// P(|X + c·Z| > h) (see [`centred_sum_noise`]). Summed over Z's values while its scale is
/// small; above that, Z·c is a Laplace of scale c·t to within 1/(8t²) in its tails, and the
/// sum of two Laplace variables of scales b and s has P(|X + Y| > h) =
/// (b²e^(−h/b) − s²e^(−h/s))/(b² − s²).
fn centred_sum_tail(h: f64, b: f64, c: f64, t: f64) -> f64 {
    // P(X > u) for X Laplace of scale b.
    let upper = |u: f64| {
        if u >= 0.0 {
            0.5 * (-u / b).exp()
        } else {
            1.0 - 0.5 * (u / b).exp()
        }
    };
    // P(|X + s| > h).
    let shifted = |s: f64| upper(h - s) + upper(h + s);
    let c = c.abs();
    let p = (-1.0 / t).exp();
    if c == 0.0 || p == 0.0 {
        return shifted(0.0);
    }
    if t > 200.0 {
        let s = c * t;
        return if (b - s).abs() <= 1e-6 * b.max(s) {
            (1.0 + h / (2.0 * b)) * (-h / b).exp()
        } else {
            (b * b * (-h / b).exp() - s * s * (-h / s).exp()) / (b * b - s * s)
        };
    }
    // P(Z = z) = (1 − p)/(1 + p)·p^|z|; X is symmetric, so z and −z weigh the same.
    let z0 = (1.0 - p) / (1.0 + p);
    let mut total = z0 * shifted(0.0);
    let mut weight = z0;
    for z in 1..=(40.0 * t).ceil() as i64 + 1 {
        weight *= p;
        total += 2.0 * weight * shifted(c * z as f64);
    }
    total
}

/// P(n + Z ≥ τ) for Z discrete Laplace of scale t: the chance that a key with n units passes.
pub(crate) fn release_probability(n: i64, threshold: i64, t: f64) -> f64 {
    let p = (-1.0 / t).exp();
    // P(Z ≥ k) = p^k/(1 + p) for k ≥ 1, and for k ≤ 0, by symmetry,
    // P(Z ≥ k) = 1 − P(Z ≥ 1 − k) = 1 − p^(1−k)/(1 + p).
    let k = threshold - n;
    if k >= 1 {
        p.powi(k.min(i32::MAX as i64) as i32) / (1.0 + p)
    } else {
        1.0 - p.powi((1 - k).min(i32::MAX as i64) as i32) / (1.0 + p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_too_wide_to_sum_are_bad_input() {
        let wide = (-1e308, 1e308);
        for square in [false, true] {
            let err = sum_part(0, wide, 0.0, square, None, Some(2), 3, 1.0).unwrap_err();
            assert!(matches!(err, SqlError::Input(_)), "{err}");
            assert!(err.to_string().contains("too wide"), "{err}");
        }
    }

    #[test]
    fn powers_and_logs_are_exact() {
        assert_eq!(pow2(-3), 0.125);
        assert_eq!(floor_log2(10.0), 3);
        assert_eq!(floor_log2(8.0), 3);
        assert_eq!(floor_log2(0.3), -2);
        assert_eq!(floor_log2(f64::MIN_POSITIVE / 4.0), -1024);
    }

    #[test]
    fn the_grid_sensitivity_covers_rounding_per_group() {
        let Part::Sum { grid, mech } =
            sum_part(0, (0.0, 100.0), 0.0, false, None, Some(2), 3, 0.5).unwrap()
        else {
            panic!()
        };
        // C = 2·100, b = 3·200/0.5 = 1200 → g = 2^(10 − 20).
        assert_eq!(grid.bound, 200.0);
        assert_eq!(grid.granularity(), pow2(-10));
        assert_eq!(grid.fine_exp, -40);
        let expect = 3 * ((200.0 * 1024.0) as u64 + 1);
        assert_eq!(mech.sensitivity(), expect);
        assert!(mech.scale() >= expect as f64 / 0.5);
        assert_eq!(grid.sum_hi, (200.0 * pow2(40)) as i128);
        assert_eq!(
            grid.fine(150.0),
            (100.0 * pow2(40)) as i128,
            "clamped to the range"
        );
    }

    #[test]
    fn the_threshold_bounds_delta() {
        let mech = DiscreteLaplaceMechanism::new(4, 0.5).unwrap();
        let t = mech.scale();
        let tau = 1 + (t * (4.0f64 / 1e-6).ln()).ceil() as i64;
        // A group of one unit passes with probability ≤ δ/L0.
        assert!(4.0 * release_probability(1, tau, t) <= 1e-6);
        assert!(release_probability(tau + 1000, tau, t) > 0.999);
        assert!(
            (release_probability(tau, tau, t)
                - (1.0 - (-1.0 / t).exp() / (1.0 + (-1.0 / t).exp())))
            .abs()
                < 1e-12
        );
    }

    #[test]
    fn half_width_matches_the_laplace_tail() {
        // For large t the discrete Laplace approaches Laplace(t): h ≈ t·ln 20.
        let h = discrete_half_width(1000.0);
        assert!((h / (1000.0 * 20f64.ln()) - 1.0).abs() < 0.01, "{h}");
        assert_eq!(discrete_half_width(1e-3), 0.0);
    }

    #[test]
    fn a_sum_is_centred_when_that_adds_less_noise() {
        let sum = |range: Range, sum_range: Option<Range>, never_null: bool| Kind::Sum {
            value: 0,
            range,
            sum_range,
            never_null,
        };
        let positive = sum((900.0, 105_000.0), None, true);
        assert!(centres(&positive, Some(100), 0.125, Some(0.125)));
        // Not without a COUNT(*) or without L∞.
        assert!(!centres(&positive, Some(100), 0.125, None));
        assert!(!centres(&positive, None, 0.125, Some(0.125)));
        // At L∞ = 1 and ε = 1, with a count at `count_epsilon`.
        let at = |kind: Kind, count_epsilon: f64| centres(&kind, Some(1), 1.0, Some(count_epsilon));
        // Not with a NULL-able value or per-unit sum bounds.
        assert!(!at(sum((0.0, 1.0), None, false), 1.0));
        assert!(!at(sum((0.0, 1.0), Some((0.0, 2.0)), true), 1.0));
        // Not where it gains nothing (bounds symmetric about 0) or the count is too noisy:
        // [0, 1] at ε 1 against a count at ε 1/3 gives 1/4 + 9/4 > 1.
        assert!(!at(sum((-5.0, 5.0), None, true), 1.0));
        assert!(!at(sum((0.0, 1.0), None, true), 1.0 / 3.0));
        assert!(at(sum((-1.0, 3.0), None, true), 1.0));
    }

    /// The 95% half-width and the median of |X + c·Z| against samples of X (Laplace of scale
    /// b) and Z (dpml's discrete Laplace of scale t), on both sides of the switch from a sum
    /// over Z's values to the closed form.
    #[test]
    fn the_centred_sum_noise_matches_samples() {
        let mut rng = dpml_mechanisms::DpRng::seeded(11);
        for (b, c, sensitivity, eps) in [
            (1.0, 3.0, 7, 10.0),
            (40.0, 250.0, 6, 1.0 / 3.0),
            (5.0, 1.0, 500, 1.0),
            (300.0, 2.0, 300, 2.0),
        ] {
            let count = DiscreteLaplaceMechanism::new(sensitivity, eps).unwrap();
            let t = count.scale();
            let mut samples: Vec<f64> = (0..100_000)
                .map(|_| {
                    let u = rng.uniform_f64() - 0.5;
                    let x = -b * u.signum() * (1.0 - 2.0 * u.abs()).ln();
                    (x + c * count.release(&mut rng, 0) as f64).abs()
                })
                .collect();
            samples.sort_by(f64::total_cmp);
            let (scale, half) = centred_sum_noise(b, c, t);
            let median = centred_sum_abs_quantile(b, c, t, 0.5);
            let at = |q: f64| samples[(q * samples.len() as f64) as usize];
            for (computed, sampled, what) in [(half, at(0.95), "95%"), (median, at(0.5), "median")]
            {
                assert!(
                    (computed / sampled - 1.0).abs() < 0.03,
                    "b {b}, c {c}, t {t}: {what} {computed} against {sampled} sampled"
                );
            }
            let variance = samples.iter().map(|x| x * x).sum::<f64>() / samples.len() as f64;
            assert!(
                ((2.0 * scale * scale) / variance - 1.0).abs() < 0.05,
                "b {b}, c {c}, t {t}: scale {scale}, variance {variance}"
            );
        }
        // Without the count's noise: a Laplace's half-width, b·ln 20.
        let h = centred_sum_abs_quantile(2.0, 0.0, 1.0, 0.95);
        assert!((h / (2.0 * 20f64.ln()) - 1.0).abs() < 1e-9, "{h}");
    }
}
