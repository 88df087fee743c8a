//! The release of one DP aggregate from its groups' exact totals: which groups are released
//! (every public key, or the private keys whose noisy unit count passes τ), and each released
//! cell's noisy value. Noise is drawn here and nowhere else, exactly once per part of each
//! released cell, from dpml's exact discrete Laplace sampler and the run's ChaCha20 generator;
//! the values are materialised once, into the placeholder table the rest of the query reads.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use dpml_mechanisms::{DiscreteLaplaceMechanism, DpRng, PermuteAndFlip};

use crate::aggregate::{DpAggregate, Kind};
use crate::calibrate::{AggregateCal, FINE_GRID_BITS, Part, QUANTILE_CANDIDATES, QUANTILE_SCALE};
use crate::contribute::{GroupTotals, Totals};
use crate::error::{Result, SqlError};
use crate::interval::centre;

/// The one way noise is drawn: counts every draw, and (in this crate's tests only) can be
/// switched off to check sensitivities on neighbouring tables.
pub(crate) struct Noise<'r> {
    rng: &'r mut DpRng,
    /// Sampler calls so far.
    pub draws: u64,
    #[cfg(test)]
    pub off: bool,
}

impl<'r> Noise<'r> {
    pub(crate) fn new(rng: &'r mut DpRng) -> Self {
        Self {
            rng,
            draws: 0,
            #[cfg(test)]
            off: false,
        }
    }

    /// The generator (for the run's secret hash key, drawn before any noise).
    pub(crate) fn rng(&mut self) -> &mut DpRng {
        self.rng
    }

    /// `k` plus discrete Laplace noise.
    fn laplace(&mut self, mech: &DiscreteLaplaceMechanism, k: i64) -> i64 {
        self.draws += 1;
        #[cfg(test)]
        if self.off {
            return k;
        }
        mech.release(self.rng, k)
    }

    /// A permute-and-flip choice among `utilities`.
    fn select(&mut self, pf: &PermuteAndFlip, utilities: &[f64]) -> Result<usize> {
        self.draws += 1;
        #[cfg(test)]
        if self.off {
            let best = utilities.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            return Ok(utilities.iter().position(|&u| u == best).unwrap_or(0));
        }
        Ok(pf.select(self.rng, utilities)?)
    }
}

/// One aggregate's released cells.
#[derive(Debug, Clone)]
pub(crate) struct Released {
    /// The aggregate's output rows (in the placeholder's schema).
    pub batch: RecordBatch,
    /// Bias warnings of groups released by a threshold they barely passed.
    pub warnings: Vec<String>,
}

/// Releases `agg` (see the module docs). `public_keys` holds the key columns of a public key
/// set (cross product, in order); `None` for private keys.
pub(crate) fn release(
    agg: &DpAggregate,
    cal: &AggregateCal,
    public_keys: Option<Vec<ArrayRef>>,
    totals: Totals,
    schema: SchemaRef,
    noise: &mut Noise<'_>,
) -> Result<Released> {
    let n_groups = agg.groups.len();
    let converter = match n_groups {
        0 => None,
        _ => Some(
            RowConverter::new(
                agg.groups
                    .iter()
                    .map(|g| SortField::new(g.data_type.clone()))
                    .collect(),
            )
            .map_err(SqlError::internal)?,
        ),
    };
    let mut warnings = Vec::new();
    let (key_columns, cells): (Vec<ArrayRef>, Vec<GroupTotals>) =
        match (public_keys, &cal.selection) {
            (Some(keys), _) => {
                let cells = match &converter {
                    None => vec![
                        totals
                            .into_values()
                            .next()
                            .unwrap_or_else(|| GroupTotals::empty(&parts(cal))),
                    ],
                    Some(conv) => {
                        let rows = conv.convert_columns(&keys).map_err(SqlError::internal)?;
                        rows.iter()
                            .map(|r| {
                                totals
                                    .get(r.data())
                                    .cloned()
                                    .unwrap_or_else(|| GroupTotals::empty(&parts(cal)))
                            })
                            .collect()
                    }
                };
                (keys, cells)
            }
            (None, Some(sel)) => {
                let conv = converter
                    .as_ref()
                    .ok_or_else(|| SqlError::internal("private keys without group columns"))?;
                let t = sel.mech.scale();
                let mut kept_keys = Vec::new();
                let mut cells = Vec::new();
                for (key, cell) in totals {
                    let units =
                        i64::try_from(cell.units).map_err(|_| SqlError::internal("units"))?;
                    let noisy = noise.laplace(&sel.mech, units);
                    if noisy >= sel.threshold {
                        if (noisy as f64) < sel.threshold as f64 + 3.0 * t {
                            warnings.push(kept_keys.len());
                        }
                        kept_keys.push(key);
                        cells.push(cell);
                    }
                }
                let parser = conv.parser();
                let rows: Vec<_> = kept_keys.iter().map(|k| parser.parse(k)).collect();
                let columns = conv.convert_rows(rows).map_err(SqlError::internal)?;
                (columns, cells)
            }
            (None, None) => return Err(SqlError::internal("private keys without a selection")),
        };
    let warnings = warnings
        .into_iter()
        .map(|row| {
            let key: Vec<String> = key_columns
                .iter()
                .zip(&agg.groups)
                .map(|(c, g)| {
                    let v = datafusion::arrow::util::display::array_value_to_string(c, row)
                        .unwrap_or_default();
                    format!("{} = {v}", g.display)
                })
                .collect();
            format!(
                "group ({}) passed the key threshold with a noisy unit count within three noise \
                 scales of it: groups that barely pass are biased upward",
                key.join(", ")
            )
        })
        .collect();

    // Per cell, every part of every measure, in order: one draw each, but for a part that is
    // another measure's count (the same noisy value, not a second draw).
    let mut values: Vec<Vec<Option<f64>>> =
        vec![Vec::with_capacity(cells.len()); agg.measures.len()];
    let n_parts: usize = cal.measures.iter().map(|mc| mc.parts.len()).sum();
    for cell in &cells {
        let mut drawn = vec![0.0; n_parts];
        let mut k = 0;
        for mc in &cal.measures {
            for (i, p) in mc.parts.iter().enumerate() {
                if !mc.is_shared(i) {
                    drawn[k] = noisy_part(p, cell, k, noise)?;
                }
                k += 1;
            }
        }
        let mut first = 0;
        for (i, (m, mc)) in agg.measures.iter().zip(&cal.measures).enumerate() {
            let last = first + mc.parts.len();
            if let Some((j, k)) = mc.shared {
                let owner = *drawn
                    .get(k)
                    .ok_or_else(|| SqlError::internal("a shared part out of range"))?;
                drawn[first + j] = owner;
            }
            values[i].push(finish(&m.kind, &drawn[first..last]));
            first = last;
        }
    }
    let mut columns = key_columns;
    for (m, v) in agg.measures.iter().zip(values) {
        columns.push(typed(v, &m.data_type, &m.display)?);
    }
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c)
            } else {
                cast(&c, f.data_type()).map_err(SqlError::internal)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let batch = RecordBatch::try_new(schema, columns).map_err(SqlError::internal)?;
    Ok(Released { batch, warnings })
}

/// Every part of the aggregate, in the order of the totals.
fn parts(cal: &AggregateCal) -> Vec<Part> {
    cal.measures
        .iter()
        .flat_map(|m| m.parts.iter().cloned())
        .collect()
}

/// One part's noisy value for one cell.
fn noisy_part(part: &Part, cell: &GroupTotals, k: usize, noise: &mut Noise<'_>) -> Result<f64> {
    Ok(match part {
        Part::Count { mech, .. } => noise.laplace(mech, saturated(cell.totals[k])) as f64,
        Part::Sum { grid, mech } => {
            // round(T / 2^30), half up: the exact total on the noise grid.
            let half = 1i128 << (FINE_GRID_BITS - 1);
            let on_grid = (cell.totals[k] + half).div_euclid(1i128 << FINE_GRID_BITS);
            noise.laplace(mech, saturated(on_grid)) as f64 * grid.granularity()
        }
        Part::Quantile {
            range,
            q_num,
            selector,
            ..
        } => {
            let hist = &cell.histograms[k];
            let total: u64 = hist.iter().sum();
            if total >= 1 << 33 {
                return Err(too_large());
            }
            let utilities = quantile_utilities(hist, *q_num, total);
            let j = noise.select(selector, &utilities)?;
            let step = (range.1 - range.0) / (QUANTILE_CANDIDATES - 1) as f64;
            range.0 + step * j as f64
        }
    })
}

/// The permute-and-flip utilities of the quantile candidates c_0 … c_{B−1} for the histogram
/// `hist` of a cell's values (`hist[j]` holds those in [c_{j−1}, c_j), its last entry those at
/// hi; `total` of them) at q = `q_num` / D.
///
/// # Privacy
/// Candidate j scores minus the distance of the target rank q·total from the ranks within
/// one step of c_j, [#{x < c_{j−1}}, #{x < c_{j+1}}], all scaled by D (exact integers below
/// 2^53). One unit adds or removes at most m ≤ L∞ values of the cell, which moves each end of
/// that interval minus the target by at most max(q, 1 − q)·m·D, and so the distance: the
/// sensitivity the selector is calibrated to. One step on each side: values between two
/// candidates leave both at distance 0, where the single rank #{x < c_j} would tie every
/// candidate (and pick one uniformly over the whole range).
fn quantile_utilities(hist: &[u64], q_num: i64, total: u64) -> Vec<f64> {
    let below: Vec<u64> = hist
        .iter()
        .scan(0u64, |sum, h| {
            *sum += h;
            Some(*sum)
        })
        .collect();
    let scaled = |n: u64| i128::from(n) * i128::from(QUANTILE_SCALE);
    let target = i128::from(q_num) * i128::from(total);
    (0..QUANTILE_CANDIDATES)
        .map(|j| {
            let lo = scaled(if j == 0 { 0 } else { below[j - 1] });
            let hi = scaled(below[j + 1]);
            -((lo - target).max(target - hi).max(0) as f64)
        })
        .collect()
}

/// An exact total clamped into the noise's 64-bit range.
///
/// # Privacy
/// Clamping moves two totals no further apart, so the clamped total keeps the cell's
/// sensitivity; refusing a total past the range instead would fail on some tables and not on
/// their neighbours (one unit more can take a total past it).
fn saturated(total: i128) -> i64 {
    total.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

fn too_large() -> SqlError {
    SqlError::input("an exact total is too large for the noise grid (nothing was released)")
}

/// A measure's value from its noisy parts (post-processing); None where it is undefined.
fn finish(kind: &Kind, parts: &[f64]) -> Option<f64> {
    match *kind {
        // A centred SUM: its centred sum plus the centre times the count.
        Kind::Sum { range, .. } if parts.len() == 2 => Some(parts[0] + centre(range) * parts[1]),
        Kind::Count { .. } | Kind::CountUnits { .. } | Kind::Sum { .. } | Kind::Quantile { .. } => {
            Some(parts[0])
        }
        Kind::Avg { range, .. } => {
            let (sum, n) = (parts[0], parts[1]);
            (n >= 1.0).then(|| (centre(range) + sum / n).clamp(range.0, range.1))
        }
        Kind::Var {
            range,
            population,
            sqrt,
            ..
        } => {
            let (sum, squares, n) = (parts[0], parts[1], parts[2]);
            let min_n = if population { 1.0 } else { 2.0 };
            if n < min_n {
                return None;
            }
            let mean = sum / n;
            let mut var = squares / n - mean * mean;
            if !population {
                var *= n / (n - 1.0);
            }
            let max =
                (range.1 - range.0).powi(2) / 4.0 * if population { 1.0 } else { n / (n - 1.0) };
            let var = var.clamp(0.0, max);
            Some(if sqrt { var.sqrt() } else { var })
        }
    }
}

/// The values as an array of the measure's type: counts as integers, the rest as reals cast to
/// the type; a value that does not fit the type is refused, never wrapped.
fn typed(values: Vec<Option<f64>>, data_type: &DataType, display: &str) -> Result<ArrayRef> {
    let array: ArrayRef = if data_type.is_integer() {
        let mut out = Vec::with_capacity(values.len());
        for v in &values {
            out.push(match v {
                None => None,
                Some(x) => {
                    let r = x.round();
                    if !(r >= i64::MIN as f64 && r < i64::MAX as f64) {
                        return Err(SqlError::input(format!(
                            "the noisy value {x:e} of {display} does not fit its type \
                             {data_type}: cast its argument to DOUBLE"
                        )));
                    }
                    Some(r as i64)
                }
            });
        }
        Arc::new(Int64Array::from(out))
    } else {
        Arc::new(Float64Array::from(values))
    };
    if array.data_type() == data_type {
        return Ok(array);
    }
    let out = cast(&array, data_type).map_err(SqlError::internal)?;
    if out.null_count() > array.null_count() {
        return Err(SqlError::input(format!(
            "a noisy value of {display} does not fit its type {data_type}: cast its argument \
             to DOUBLE"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A total past the noise's range is clamped, not refused (a refusal would tell a table
    /// from its neighbour with one unit more), and clamping keeps the sensitivity.
    #[test]
    fn totals_past_the_noise_range_are_clamped_within_their_sensitivity() {
        let max = i128::from(i64::MAX);
        assert_eq!(saturated(max + 5), i64::MAX);
        assert_eq!(saturated(-max - 7), i64::MIN);
        assert_eq!(saturated(-42), -42);
        for (a, b) in [
            (max - 3, max + 9),
            (max + 1, max + 2),
            (-max - 9, -max + 4),
            (0, 7),
        ] {
            let moved = (i128::from(saturated(a)) - i128::from(saturated(b))).abs();
            assert!(moved <= (a - b).abs(), "{a} and {b}: clamped {moved} apart");
        }
    }

    /// Adding m values anywhere moves every utility by at most max(q, 1 − q)·m·D, the
    /// sensitivity the selector is calibrated to; and the candidates next to values that fall
    /// between two of them score best.
    #[test]
    fn quantile_utilities_keep_their_sensitivity_and_find_the_step() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let bins = QUANTILE_CANDIDATES as u64 + 1;
        for trial in 0..300 {
            let q_num = [0, 1, QUANTILE_SCALE / 4, QUANTILE_SCALE / 2, QUANTILE_SCALE][trial % 5];
            let spread = q_num.max(QUANTILE_SCALE - q_num) as f64;
            let mut hist = vec![0u64; bins as usize];
            // Concentrated or spread out.
            let (at, width) = (next(bins), 1 + next(if trial % 2 == 0 { 3 } else { bins }));
            for _ in 0..next(50) {
                hist[((at + next(width)) % bins) as usize] += 1;
            }
            let mut neighbour = hist.clone();
            let m = 1 + next(5);
            for _ in 0..m {
                neighbour[((at + next(width)) % bins) as usize] += 1;
            }
            let total: u64 = hist.iter().sum();
            let a = quantile_utilities(&hist, q_num, total);
            let b = quantile_utilities(&neighbour, q_num, total + m);
            for (j, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - y).abs() <= spread * m as f64,
                    "trial {trial}, candidate {j}: {x} against {y}, m = {m}"
                );
            }
        }
        // Every value in [c_5, c_6): the median scores 0 at c_5 and c_6 only.
        let mut hist = vec![0u64; bins as usize];
        hist[6] = 10;
        let u = quantile_utilities(&hist, QUANTILE_SCALE / 2, 10);
        let best: Vec<usize> = (0..u.len()).filter(|&j| u[j] == 0.0).collect();
        assert_eq!(best, [5, 6]);
    }
}
