//! Per-unit contribution bounding (Wilson et al. 2020, §3) and the exact aggregation of the
//! bounded contributions, in Rust over the contribution rows DataFusion produces.
//!
//! 1. Pre-aggregate per (unit, group): the rows, the rows with a flag or a non-null value, and
//!    each sum part's exact fixed-point total (128-bit, saturating: it is clamped in step 2) of
//!    the clamped row values. Unsorted rows are interned by unit and by group with
//!    DataFusion's vectorised group values and added to their pair's accumulators, every part
//!    of a row together; rows sorted by unit (under a memory limit) arrive
//!    pre-aggregated by DataFusion where the parts allow ([`crate::preaggregate`]), and the
//!    bounder adds up their per-(unit, group) states.
//! 2. Bound each (unit, group): counts are clamped to L∞; when the unit has more than L∞
//!    values its sums are scaled by L∞/n (its mean times L∞), then clamped to the per-unit sum
//!    bounds and to ±Y ([`crate::calibrate`]). Quantiles keep the unit's L∞ values with the
//!    smallest keyed hash.
//! 3. Keep at most L0 groups per unit: those whose keyed hash of (unit, group) is smallest —
//!    a function of the unit's own rows and the run's secret key, never of the row order or
//!    of other units.
//! 4. Add the kept contributions per group, exactly.
//!
//! Each released cell then moves by at most the calibrated sensitivity when one unit's rows
//! are added or removed: the other units' contributions do not change at all.
//!
//! Units must not span the streams given to different [`Bounder`]s (the caller partitions the
//! rows by a hash of the unit); the groups' totals of several bounders add up.

use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array};
use datafusion::arrow::compute::{cast, filter_record_batch, is_not_null};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::logical_expr::EmitTo;
use datafusion::physical_plan::aggregates::group_values::{GroupValues, new_group_values};
use datafusion::physical_plan::aggregates::order::GroupOrdering;

use crate::calibrate::{CountSource, FixedGrid, Part, QUANTILE_CANDIDATES};
use crate::error::{Result, SqlError};
use crate::preaggregate::StateColumns;
use crate::rowid::KeyedHash;

/// What the bounder computes for one aggregate.
#[derive(Debug, Clone)]
pub(crate) struct BoundSpec {
    /// The group columns' types.
    pub group_types: Vec<DataType>,
    /// Only rows whose group (row-encoded) is listed here are kept (public keys).
    pub key_filter: Option<HashSet<Vec<u8>>>,
    /// The noisy parts, in order (each one accumulator).
    pub parts: Vec<Part>,
    /// L0 in force.
    pub max_groups: u64,
    /// L∞ (None: rows are not counted, only units and clamped sums).
    pub max_rows: Option<u64>,
    /// The secret key of the keyed hashes.
    pub hash: KeyedHash,
    /// Where each part's state column is, when the rows are pre-aggregated per (unit, group)
    /// ([`crate::preaggregate`]); None: the inputs are the contribution rows' own.
    pub states: Option<Vec<StateColumns>>,
}

/// One group's exact totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupTotals {
    /// Units with a kept contribution.
    pub units: u64,
    /// Per part: the exact total of a count or sum part (fine-grid units for sums).
    pub totals: Vec<i128>,
    /// Per part: the quantile histogram (empty for other parts).
    pub histograms: Vec<Vec<u64>>,
}

impl GroupTotals {
    /// The totals of a group no unit contributes to.
    pub(crate) fn empty(parts: &[Part]) -> Self {
        Self {
            units: 0,
            totals: vec![0; parts.len()],
            histograms: parts
                .iter()
                .map(|p| match p {
                    Part::Quantile { .. } => vec![0; QUANTILE_CANDIDATES + 1],
                    _ => Vec::new(),
                })
                .collect(),
        }
    }

    fn add(&mut self, other: &GroupTotals) -> Result<()> {
        self.units += other.units;
        for (a, b) in self.totals.iter_mut().zip(&other.totals) {
            *a = a.checked_add(*b).ok_or_else(overflow)?;
        }
        for (a, b) in self.histograms.iter_mut().zip(&other.histograms) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        Ok(())
    }
}

/// The exact totals of every group (row-encoded keys, sorted).
pub(crate) type Totals = BTreeMap<Vec<u8>, GroupTotals>;

/// Adds `other`'s totals into `into`.
pub(crate) fn merge(into: &mut Totals, other: Totals) -> Result<()> {
    for (k, v) in other {
        match into.get_mut(&k) {
            Some(t) => t.add(&v)?,
            None => {
                into.insert(k, v);
            }
        }
    }
    Ok(())
}

fn overflow() -> SqlError {
    SqlError::input(
        "an exact sum overflowed its 128-bit accumulator: the values are too large for their \
         declared bounds' grid (nothing was released)",
    )
}

/// A hash map with a fast (non-keyed) hash: the keys are the engine's own, and which groups or
/// values are kept never depends on it (that is the keyed hash's job).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The units seen: integer ids directly, anything else by its row encoding.
enum Units {
    Int(HashMap<i64, u32>),
    Bytes(HashMap<Vec<u8>, u32>, RowConverter),
}

impl Units {
    fn clear(&mut self) {
        match self {
            Units::Int(m) => m.clear(),
            Units::Bytes(m, _) => m.clear(),
        }
    }
}

/// Values seen and their exact fine-grid total, for one (unit, group) and sum part.
#[derive(Debug, Clone, Copy, Default)]
struct SumAcc {
    n: u64,
    total: i128,
}

/// Where a part's per-(unit, group) state lives: its store and its index among a pair's
/// slots in that store.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Count(usize),
    Sum(usize),
    Values(usize),
}

/// One (unit, group) accumulator, borrowed from its store.
enum Acc<'a> {
    /// A count.
    Count(&'a mut u64),
    /// Values seen and their exact fine-grid total.
    Sum(&'a mut SumAcc),
    /// The values with the smallest keyed hashes: (hash, candidate index), a max-heap.
    Values(&'a mut BinaryHeap<(u64, u32)>),
}

/// The per-(unit, group) accumulators of every pair, one dense store per kind. This state is
/// read at random once per row, so its size sets the bounder's speed: a count takes 8 bytes and
/// a sum 32 (an enum of all kinds would take 48 for each).
struct Accumulators {
    slots: Vec<Slot>,
    per_pair: [usize; 3],
    counts: Vec<u64>,
    sums: Vec<SumAcc>,
    heaps: Vec<BinaryHeap<(u64, u32)>>,
    /// Pairs held.
    pairs: usize,
}

impl Accumulators {
    fn new(parts: &[Part]) -> Self {
        let mut per_pair = [0; 3];
        let slots = parts
            .iter()
            .map(|p| {
                let (kind, slot): (usize, fn(usize) -> Slot) = match p {
                    Part::Count { .. } => (0, Slot::Count),
                    Part::Sum { .. } => (1, Slot::Sum),
                    Part::Quantile { .. } => (2, Slot::Values),
                };
                per_pair[kind] += 1;
                slot(per_pair[kind] - 1)
            })
            .collect();
        Self {
            slots,
            per_pair,
            counts: Vec::new(),
            sums: Vec::new(),
            heaps: Vec::new(),
            pairs: 0,
        }
    }

    /// Pairs held.
    fn pairs(&self) -> usize {
        self.pairs
    }

    /// Appends the zeroed accumulators of `n` new pairs.
    fn add_pairs(&mut self, n: usize) {
        let [c, s, h] = self.per_pair;
        self.counts.resize(self.counts.len() + n * c, 0);
        self.sums.resize(self.sums.len() + n * s, SumAcc::default());
        self.heaps
            .resize_with(self.heaps.len() + n * h, BinaryHeap::new);
        self.pairs += n;
    }

    /// Moves the accumulators of pair `from` to pair `to` for each `(from, to)` of `moves`,
    /// into `pairs` pairs (any pair not moved to starts at zero).
    fn rearrange(&mut self, moves: &[(usize, usize)], pairs: usize) {
        let [c, s, h] = self.per_pair;
        let mut counts = vec![0; pairs * c];
        let mut sums = vec![SumAcc::default(); pairs * s];
        let mut heaps: Vec<_> = (0..pairs * h).map(|_| BinaryHeap::new()).collect();
        for &(from, to) in moves {
            counts[to * c..(to + 1) * c].copy_from_slice(&self.counts[from * c..(from + 1) * c]);
            sums[to * s..(to + 1) * s].copy_from_slice(&self.sums[from * s..(from + 1) * s]);
            for j in 0..h {
                heaps[to * h + j] = std::mem::take(&mut self.heaps[from * h + j]);
            }
        }
        (self.counts, self.sums, self.heaps, self.pairs) = (counts, sums, heaps, pairs);
    }

    /// Bytes one pair's accumulators take (the heaps' values apart).
    fn pair_bytes(&self) -> usize {
        let [c, s, h] = self.per_pair;
        c * std::mem::size_of::<u64>()
            + s * std::mem::size_of::<SumAcc>()
            + h * std::mem::size_of::<BinaryHeap<(u64, u32)>>()
    }

    /// Forgets every pair.
    fn clear(&mut self) {
        self.counts.clear();
        self.sums.clear();
        self.heaps.clear();
        self.pairs = 0;
    }

    /// Part `k`'s accumulator of pair `pair`.
    fn get(&mut self, pair: usize, k: usize) -> Acc<'_> {
        let [c, s, h] = self.per_pair;
        match self.slots[k] {
            Slot::Count(j) => Acc::Count(&mut self.counts[pair * c + j]),
            Slot::Sum(j) => Acc::Sum(&mut self.sums[pair * s + j]),
            Slot::Values(j) => Acc::Values(&mut self.heaps[pair * h + j]),
        }
    }
}

/// Estimated bytes of the bounder's state, per entry (hash-map slots with their spare
/// capacity, vectors' headers): what it reserves in the memory pool.
const UNIT_BYTES: usize = 96;
const GROUP_BYTES: usize = 96;
const PAIR_BYTES: usize = 40;
const HEAP_VALUE_BYTES: usize = 24;

/// The units and groups of unsorted rows, interned in order of first sight: each distinct
/// unit and group gets the next id.
struct Interners {
    units: UnitIds,
    /// None without GROUP BY (one group); groups by DataFusion's vectorised group values.
    groups: Option<Box<dyn GroupValues>>,
    /// With public keys: how many. They are interned first (ids 0 to `listed − 1`), and every
    /// other group's rows get the one id `listed`, whose pairs are dropped when the stream
    /// ends: the bounder's layout, and the time a row takes, are those of the public keys
    /// whatever groups the rows hold (a 9th value of one unit would otherwise move every pair
    /// from the dense layout to the hash map, and slow the whole query).
    listed: Option<usize>,
    unit_ids: Vec<usize>,
    group_ids: Vec<usize>,
}

impl Interners {
    /// Interners for the key columns `[unit, groups…]` (the first `n_keys`) of `batch`;
    /// `listed` holds the public keys' columns, if any.
    fn new(
        batch: &RecordBatch,
        n_keys: usize,
        int_units: bool,
        listed: Option<Vec<ArrayRef>>,
    ) -> Result<Self> {
        let values = |columns: Vec<usize>| {
            let schema = batch
                .schema()
                .project(&columns)
                .map_err(SqlError::internal)?;
            new_group_values(Arc::new(schema), &GroupOrdering::None).map_err(SqlError::internal)
        };
        let mut groups = (n_keys > 1)
            .then(|| values((1..n_keys).collect()))
            .transpose()?;
        let mut group_ids = Vec::new();
        let listed = match (&mut groups, listed) {
            (Some(groups), Some(keys)) => {
                // In the batch's types (a key set's text may be Utf8 where rows are Utf8View).
                let keys = keys
                    .iter()
                    .zip(&batch.columns()[1..n_keys])
                    .map(|(k, c)| cast(k, c.data_type()))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(SqlError::internal)?;
                groups
                    .intern(&keys, &mut group_ids)
                    .map_err(SqlError::internal)?;
                Some(groups.len())
            }
            _ => None,
        };
        Ok(Self {
            units: match int_units {
                true => UnitIds::Int(IntIds::default()),
                false => UnitIds::Other(values(vec![0])?),
            },
            groups,
            listed,
            unit_ids: Vec::new(),
            group_ids,
        })
    }

    /// Each row's unit id and group id, and how many units and groups have ids.
    fn intern(&mut self, batch: &RecordBatch, n_keys: usize) -> Result<Interned<'_>> {
        let columns = batch.columns();
        match &mut self.units {
            UnitIds::Int(ids) => ids.intern(&columns[0], &mut self.unit_ids)?,
            UnitIds::Other(values) => values
                .intern(&columns[..1], &mut self.unit_ids)
                .map_err(SqlError::internal)?,
        }
        match &mut self.groups {
            Some(groups) => {
                groups
                    .intern(&columns[1..n_keys], &mut self.group_ids)
                    .map_err(SqlError::internal)?;
                if let Some(listed) = self.listed {
                    for g in &mut self.group_ids {
                        *g = (*g).min(listed);
                    }
                }
            }
            None => {
                self.group_ids.clear();
                self.group_ids.resize(batch.num_rows(), 0);
            }
        }
        Ok(Interned {
            unit_ids: &self.unit_ids,
            group_ids: &self.group_ids,
            units: match &self.units {
                UnitIds::Int(ids) => ids.keys.len(),
                UnitIds::Other(values) => values.len(),
            },
            groups: match self.listed {
                // The public keys, and the one id of every other group.
                Some(listed) => listed + 1,
                None => self.groups.as_ref().map_or(1, |g| g.len()),
            },
        })
    }

    /// Bytes the interned keys take.
    fn size(&self) -> usize {
        let units = match &self.units {
            UnitIds::Int(ids) => ids.size(),
            UnitIds::Other(values) => values.size(),
        };
        units + self.groups.as_ref().map_or(0, |g| g.size())
    }
}

/// The units of unsorted rows, in order of first sight.
enum UnitIds {
    Int(IntIds),
    /// Any other unit type, by DataFusion's vectorised group values.
    Other(Box<dyn GroupValues>),
}

/// Integer units' ids, in order of first sight. Tables mostly number their people densely
/// from 0 or 1, so an id below [`DIRECT_IDS`] finds its unit in an array (one read, which
/// stays in cache) rather than in a hash map; any other id goes through the map.
#[derive(Default)]
struct IntIds {
    /// At `id`: the unit of id `id`, or [`NO_UNIT`].
    direct: Vec<u32>,
    others: HashMap<i64, u32>,
    /// Each unit's id.
    keys: Vec<i64>,
}

/// Integer ids below this are found in [`IntIds::direct`] (at most 4 MiB).
const DIRECT_IDS: i64 = 1 << 20;

impl IntIds {
    /// Appends to `units` the unit of each id in `column` (no nulls).
    fn intern(&mut self, column: &ArrayRef, units: &mut Vec<usize>) -> Result<()> {
        let ids = cast(column, &DataType::Int64).map_err(SqlError::internal)?;
        units.clear();
        units.reserve(ids.len());
        for &id in ids.as_primitive::<Int64Type>().values() {
            let next = self.keys.len() as u32;
            let unit = if (0..DIRECT_IDS).contains(&id) {
                let at = id as usize;
                if at >= self.direct.len() {
                    self.direct.resize(at + 1, NO_UNIT);
                }
                let slot = &mut self.direct[at];
                if *slot == NO_UNIT {
                    *slot = next;
                }
                *slot
            } else {
                *self.others.entry(id).or_insert(next)
            };
            if unit == next {
                self.keys.push(id);
            }
            units.push(unit as usize);
        }
        Ok(())
    }

    /// Bytes held.
    fn size(&self) -> usize {
        self.direct.capacity() * std::mem::size_of::<u32>()
            + self.others.capacity() * 2 * std::mem::size_of::<(i64, u32)>()
            + self.keys.capacity() * std::mem::size_of::<i64>()
    }
}

/// A batch's interned rows.
struct Interned<'a> {
    unit_ids: &'a [usize],
    group_ids: &'a [usize],
    /// Units and groups with an id so far.
    units: usize,
    groups: usize,
}

/// How one part adds a row: its input read once per batch.
enum Add<'a> {
    Count(usize),
    Flagged(usize, &'a BooleanArray),
    NonNull(usize, &'a Float64Array),
    Sum(usize, &'a Float64Array, &'a FixedGrid),
    /// Any other part, row by row through [`Bounder::accumulate_part`].
    Other(usize),
}

/// Rows whose accumulators are read ahead at once (see [`Bounder::accumulate_rows`]).
const PREFETCH_ROWS: usize = 256;

/// The unit of a pair that is not bounded (its group is not among the public keys).
const NO_UNIT: u32 = u32::MAX;

/// While a stream has at most this many groups (a histogram's or Q1's handful of keys), the
/// pair of (unit, group) is `unit * width + group`: found without a lookup, its accumulators
/// next to those of the unit's other groups. Beyond, pairs are found in a hash map.
const DENSE_GROUPS: usize = 8;

/// The pairs of unsorted rows with at most [`DENSE_GROUPS`] groups.
#[derive(Debug, Default)]
struct Dense {
    /// Groups per unit (a power of two: the groups seen so far, rounded up).
    width: usize,
    /// Per unit: bit `group` is set once the pair has a row.
    seen: Vec<u8>,
}

impl Dense {
    /// Each pair with a row, unit after unit: (unit, group, pair).
    fn pairs(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        self.seen.iter().enumerate().flat_map(move |(u, &bits)| {
            (0..DENSE_GROUPS)
                .filter(move |g| bits & (1 << g) != 0)
                .map(move |g| (u, g, u * self.width + g))
        })
    }
}

/// Bounds the contribution rows of one stream (see the module docs).
///
/// What it holds is reserved in the query's memory pool, as DataFusion's own operators do;
/// when the pool cannot grant more, the query fails with the memory limit's error. Given the
/// rows sorted by unit (`sorted`), it bounds each unit as soon as the next one starts and keeps
/// only the groups' totals: one unit's state at a time.
pub(crate) struct Bounder {
    spec: Arc<BoundSpec>,
    sorted: bool,
    /// Unsorted rows: their units and groups, interned by DataFusion's vectorised group
    /// values; the keys are read off when the stream ends. Sorted rows go through the maps
    /// below, one row at a time.
    interners: Option<Interners>,
    /// The pair id of each row of the batch being added.
    row_pairs: Vec<usize>,
    units: Units,
    group_rows: RowConverter,
    groups: HashMap<Vec<u8>, u32>,
    group_keys: Vec<Vec<u8>>,
    unit_keys: Vec<Vec<u8>>,
    pairs: HashMap<u64, u32>,
    /// Unsorted rows with few groups (see [`DENSE_GROUPS`]); None for sorted rows and once
    /// there are more groups: then pairs are numbered by `pairs`.
    dense: Option<Dense>,
    /// Per pair numbered by `pairs`: its unit ([`NO_UNIT`]: a group outside the public keys)
    /// and its group.
    pair_units: Vec<u32>,
    pair_groups: Vec<u32>,
    /// Per pair: its accumulators.
    accs: Accumulators,
    /// Per group: the bounded totals of the units bounded so far.
    totals: Vec<Option<GroupTotals>>,
    /// Estimated bytes of the units' state (units, pairs, accumulators).
    unit_bytes: usize,
    /// Estimated bytes of the groups' state (keys, totals).
    group_bytes: usize,
    reservation: MemoryReservation,
    /// The pool's limit, for the error.
    limit: u64,
}

impl Bounder {
    pub(crate) fn new(
        spec: Arc<BoundSpec>,
        unit_type: &DataType,
        sorted: bool,
        pool: &Arc<dyn MemoryPool>,
    ) -> Result<Self> {
        let fields = spec
            .group_types
            .iter()
            .cloned()
            .map(SortField::new)
            .collect();
        // Integer ids that fit an i64 are keyed directly.
        let small_int = matches!(
            unit_type,
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
        );
        let units = if small_int {
            Units::Int(HashMap::default())
        } else {
            Units::Bytes(
                HashMap::default(),
                RowConverter::new(vec![SortField::new(unit_type.clone())])
                    .map_err(SqlError::internal)?,
            )
        };
        Ok(Self {
            spec: Arc::clone(&spec),
            sorted,
            interners: None,
            row_pairs: Vec::new(),
            units,
            group_rows: RowConverter::new(fields).map_err(SqlError::internal)?,
            groups: HashMap::default(),
            group_keys: Vec::new(),
            unit_keys: Vec::new(),
            pairs: HashMap::default(),
            dense: (!sorted).then(Dense::default),
            pair_units: Vec::new(),
            pair_groups: Vec::new(),
            accs: Accumulators::new(&spec.parts),
            totals: Vec::new(),
            unit_bytes: 0,
            group_bytes: 0,
            reservation: MemoryConsumer::new("dpml per-unit bounding").register(pool),
            limit: match pool.memory_limit() {
                MemoryLimit::Finite(n) => n as u64,
                _ => u64::MAX,
            },
        })
    }

    /// Adds a batch of contribution rows: `[unit, groups…, inputs…]`.
    pub(crate) fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.sorted {
            self.push_sorted(batch)
        } else {
            self.push_interned(batch)
        }
    }

    /// [`Bounder::push`] of unsorted rows: each row's unit and group are interned by
    /// DataFusion's vectorised group values (ids in order of first sight), its (unit, group)
    /// pair is looked up by the two ids, then its parts are added to the pair's accumulators.
    fn push_interned(&mut self, batch: &RecordBatch) -> Result<()> {
        let unit_col = batch.column(0);
        // Rows without a unit belong to no one and count nowhere.
        let batch = match unit_col.null_count() {
            0 => batch.clone(),
            _ => filter_record_batch(batch, &is_not_null(unit_col).map_err(SqlError::internal)?)
                .map_err(SqlError::internal)?,
        };
        let n_keys = 1 + self.spec.group_types.len();
        if self.interners.is_none() {
            let listed = self.listed_keys()?;
            self.interners = Some(Interners::new(
                &batch,
                n_keys,
                matches!(self.units, Units::Int(_)),
                listed,
            )?);
        }
        let Some(interners) = &mut self.interners else {
            unreachable!("set above")
        };
        let interned_bytes = interners.size();
        let Interned {
            unit_ids,
            group_ids,
            units: n_units,
            groups: n_groups,
        } = interners.intern(&batch, n_keys)?;
        let mut row_pairs = std::mem::take(&mut self.row_pairs);
        row_pairs.clear();
        if n_groups > DENSE_GROUPS
            && let Some(dense) = self.dense.take()
        {
            // Too many groups for the dense layout: its pairs are numbered by the hash map.
            let mut moves = Vec::new();
            for (u, g, from) in dense.pairs() {
                let p = self.pair_units.len();
                self.pairs.insert(((u as u64) << 32) | g as u64, p as u32);
                self.pair_units.push(u as u32);
                self.pair_groups.push(g as u32);
                moves.push((from, p));
            }
            self.accs.rearrange(&moves, self.pair_units.len());
            self.unit_bytes = self.pair_units.len() * (PAIR_BYTES + self.accs.pair_bytes());
        }
        match &mut self.dense {
            Some(dense) => {
                if n_groups > dense.width {
                    // More groups than the layout has room for: each unit's row widens.
                    let width = n_groups.next_power_of_two();
                    let moves: Vec<_> = dense
                        .pairs()
                        .map(|(u, g, from)| (from, u * width + g))
                        .collect();
                    self.accs.rearrange(&moves, dense.seen.len() * width);
                    dense.width = width;
                }
                dense.seen.resize(n_units, 0);
                self.accs
                    .add_pairs(n_units * dense.width - self.accs.pairs());
                for (&u, &g) in unit_ids.iter().zip(group_ids) {
                    dense.seen[u] |= 1 << g;
                    row_pairs.push(u * dense.width + g);
                }
                self.unit_bytes = n_units * (1 + dense.width * self.accs.pair_bytes());
            }
            None => {
                let known_pairs = self.pair_units.len();
                // Consecutive rows often share their pair (a unit's rows arrive together).
                let mut last: Option<(u64, usize)> = None;
                for (&u, &g) in unit_ids.iter().zip(group_ids) {
                    let key = ((u as u64) << 32) | g as u64;
                    let pair = match last {
                        Some((k, pair)) if k == key => pair,
                        _ => {
                            let next = self.pair_units.len() as u32;
                            let pair = *self.pairs.entry(key).or_insert(next);
                            if pair == next {
                                self.pair_units.push(u as u32);
                                self.pair_groups.push(g as u32);
                            }
                            pair as usize
                        }
                    };
                    last = Some((key, pair));
                    row_pairs.push(pair);
                }
                let new_pairs = self.pair_units.len() - known_pairs;
                self.accs.add_pairs(new_pairs);
                self.unit_bytes += new_pairs * (PAIR_BYTES + self.accs.pair_bytes());
            }
        }
        let added = self.accumulate_rows(&row_pairs, &batch.columns()[n_keys..]);
        self.row_pairs = row_pairs;
        added?;
        self.reservation
            .try_resize(self.unit_bytes + interned_bytes)
            .map_err(|_| SqlError::OutOfMemory {
                limit: self.limit,
                charged: false,
            })
    }

    /// The public keys' columns, in the order of their row encodings (None without public
    /// keys, or without GROUP BY).
    fn listed_keys(&self) -> Result<Option<Vec<ArrayRef>>> {
        let Some(keys) = &self.spec.key_filter else {
            return Ok(None);
        };
        if self.spec.group_types.is_empty() {
            return Ok(None);
        }
        let mut keys: Vec<&Vec<u8>> = keys.iter().collect();
        keys.sort();
        let parser = self.group_rows.parser();
        self.group_rows
            .convert_rows(keys.iter().map(|k| parser.parse(k)))
            .map(Some)
            .map_err(SqlError::internal)
    }

    /// Adds each row's parts to its pair's accumulators (`pairs[row]`): counts and sums of row
    /// values from inputs read once per batch, anything else (quantiles, pre-aggregated
    /// states) through [`Bounder::accumulate_part`].
    fn accumulate_rows(&mut self, pairs: &[usize], inputs: &[ArrayRef]) -> Result<()> {
        let spec = Arc::clone(&self.spec);
        let adds: Vec<Add<'_>> = spec
            .parts
            .iter()
            .enumerate()
            .map(
                |(k, part)| match (spec.states.is_none(), part, self.accs.slots[k]) {
                    (true, Part::Count { source, .. }, Slot::Count(j)) => match *source {
                        CountSource::Rows(None) | CountSource::Units(None) => Add::Count(j),
                        CountSource::Rows(Some(f)) | CountSource::Units(Some(f)) => {
                            Add::Flagged(j, inputs[f].as_boolean())
                        }
                        CountSource::NonNull(v) => Add::NonNull(j, inputs[v].as_primitive()),
                    },
                    (true, Part::Sum { grid, .. }, Slot::Sum(j)) => {
                        Add::Sum(j, inputs[grid.input].as_primitive(), grid)
                    }
                    _ => Add::Other(k),
                },
            )
            .collect();
        let [c, s, _] = self.accs.per_pair;
        // Row by row, every part: a pair's accumulators sit together, so a row's parts share
        // the cache lines its first part brings in. Those lines are read first for a run of
        // rows, by loads that do not wait for one another: a row's parts take long enough
        // that, read as they are needed, the lines would come from memory one at a time.
        for (start, run) in pairs.chunks(PREFETCH_ROWS).enumerate() {
            let mut touched = 0u64;
            for &pair in run {
                touched ^= self.accs.counts.get(pair * c).copied().unwrap_or(0);
                for j in (0..s).step_by(2) {
                    touched ^= self.accs.sums.get(pair * s + j).map_or(0, |a| a.n);
                }
            }
            std::hint::black_box(touched);
            for (i, &pair) in run.iter().enumerate() {
                let row = start * PREFETCH_ROWS + i;
                self.accumulate_row(pair, row, &adds, inputs)?;
            }
        }
        Ok(())
    }

    /// Adds row `row`'s parts to pair `pair`'s accumulators (see [`Bounder::accumulate_rows`]).
    #[inline]
    fn accumulate_row(
        &mut self,
        pair: usize,
        row: usize,
        adds: &[Add<'_>],
        inputs: &[ArrayRef],
    ) -> Result<()> {
        let [c, s, _] = self.accs.per_pair;
        for add in adds {
            match *add {
                Add::Count(j) => self.accs.counts[pair * c + j] += 1,
                Add::Flagged(j, flags) => {
                    self.accs.counts[pair * c + j] +=
                        u64::from(flags.is_valid(row) && flags.value(row));
                }
                Add::NonNull(j, values) => {
                    self.accs.counts[pair * c + j] +=
                        u64::from(values.is_valid(row) && !values.value(row).is_nan());
                }
                Add::Sum(j, values, grid) => {
                    let x = values.value(row);
                    // NaN has no place in a bounded range: it is skipped like NULL.
                    if values.is_valid(row) && !x.is_nan() {
                        let acc = &mut self.accs.sums[pair * s + j];
                        acc.n += 1;
                        acc.total = acc.total.saturating_add(grid.fine(x));
                    }
                }
                Add::Other(k) => self.accumulate_part(pair, k, inputs, row)?,
            }
        }
        Ok(())
    }

    /// Adds row `row`'s parts to pair `pair`'s accumulators.
    fn accumulate(&mut self, pair: usize, inputs: &[ArrayRef], row: usize) -> Result<()> {
        for k in 0..self.spec.parts.len() {
            self.accumulate_part(pair, k, inputs, row)?;
        }
        Ok(())
    }

    /// Adds row `row`'s part `k` to pair `pair`'s accumulator.
    fn accumulate_part(
        &mut self,
        pair: usize,
        k: usize,
        inputs: &[ArrayRef],
        row: usize,
    ) -> Result<()> {
        let acc = self.accs.get(pair, k);
        let grew = match &self.spec.states {
            Some(at) => merge_state(acc, inputs, at[k], row).map(|()| false)?,
            None => update(acc, &self.spec.parts[k], inputs, row, &self.spec)?,
        };
        if grew {
            self.unit_bytes += HEAP_VALUE_BYTES;
        }
        Ok(())
    }

    /// Reads the interned units' and groups' keys (once the stream has ended), so that
    /// [`Bounder::flush`] bounds the pairs as it bounds sorted rows. Pairs whose group is not
    /// among the public keys get no unit: they are dropped before any unit's groups are
    /// limited, as sorted rows outside the keys are.
    fn adopt_interned(&mut self) -> Result<()> {
        let Some(mut interners) = self.interners.take() else {
            return Ok(());
        };
        self.unit_keys = match (&mut interners.units, &self.units) {
            (UnitIds::Int(ids), _) => ids
                .keys
                .iter()
                .map(|id| id.to_le_bytes().to_vec())
                .collect(),
            (UnitIds::Other(values), Units::Bytes(_, conv)) => {
                let units = values.emit(EmitTo::All).map_err(SqlError::internal)?;
                conv.convert_columns(&units)
                    .map_err(SqlError::internal)?
                    .iter()
                    .map(|r| r.data().to_vec())
                    .collect()
            }
            (UnitIds::Other(_), Units::Int(_)) => {
                return Err(SqlError::internal("unit key kinds disagree"));
            }
        };
        self.group_keys = match &mut interners.groups {
            None => vec![Vec::new()],
            Some(groups) => {
                let keys = groups.emit(EmitTo::All).map_err(SqlError::internal)?;
                let rows = self
                    .group_rows
                    .convert_columns(&keys)
                    .map_err(SqlError::internal)?;
                rows.iter().map(|r| r.data().to_vec()).collect()
            }
        };
        if let Some(listed) = &self.spec.key_filter {
            let listed: Vec<bool> = self.group_keys.iter().map(|g| listed.contains(g)).collect();
            for (u, &g) in self.pair_units.iter_mut().zip(&self.pair_groups) {
                if !listed[g as usize] {
                    *u = NO_UNIT;
                }
            }
            if let Some(dense) = &mut self.dense {
                let mask = (0..listed.len())
                    .filter(|&g| listed[g])
                    .fold(0u8, |m, g| m | 1 << g);
                for bits in &mut dense.seen {
                    *bits &= mask;
                }
            }
        }
        Ok(())
    }

    /// [`Bounder::push`] of rows sorted by unit, one row at a time.
    fn push_sorted(&mut self, batch: &RecordBatch) -> Result<()> {
        let n_groups = self.spec.group_types.len();
        let unit_col = batch.column(0);
        let (int_units, byte_units) = match &self.units {
            Units::Int(_) => (
                Some(cast(unit_col, &DataType::Int64).map_err(SqlError::internal)?),
                None,
            ),
            Units::Bytes(_, conv) => (
                None,
                Some(
                    conv.convert_columns(std::slice::from_ref(unit_col))
                        .map_err(SqlError::internal)?,
                ),
            ),
        };
        let int_units = int_units.as_ref().map(|a| a.as_primitive::<Int64Type>());
        // A query without GROUP BY has one group, with an empty key.
        let groups = match n_groups {
            0 => None,
            _ => Some(
                self.group_rows
                    .convert_columns(&batch.columns()[1..=n_groups])
                    .map_err(SqlError::internal)?,
            ),
        };
        let inputs = &batch.columns()[1 + n_groups..];
        for row in 0..batch.num_rows() {
            if unit_col.is_null(row) {
                continue;
            }
            let g: &[u8] = groups.as_ref().map_or(&[], |r| r.row(row).data());
            if let Some(keys) = &self.spec.key_filter
                && !keys.contains(g)
            {
                continue;
            }
            // Sorted by unit: a unit not seen yet means the units held are complete.
            if self.sorted && !self.unit_keys.is_empty() {
                let seen = match (&self.units, int_units, &byte_units) {
                    (Units::Int(map), Some(ints), _) => map.contains_key(&ints.value(row)),
                    (Units::Bytes(map, _), _, Some(rows)) => map.contains_key(rows.row(row).data()),
                    _ => return Err(SqlError::internal("unit key kinds disagree")),
                };
                if !seen {
                    self.flush()?;
                }
            }
            let known_groups = self.group_keys.len();
            let gid = intern(&mut self.groups, &mut self.group_keys, g);
            if self.group_keys.len() > known_groups {
                self.group_bytes += GROUP_BYTES + 2 * g.len() + self.group_totals_bytes();
            }
            let known_units = self.unit_keys.len();
            let uid = match (&mut self.units, int_units, &byte_units) {
                (Units::Int(map), Some(ints), _) => {
                    let id = ints.value(row);
                    let next = self.unit_keys.len() as u32;
                    let uid = *map.entry(id).or_insert(next);
                    if uid == next {
                        self.unit_keys.push(id.to_le_bytes().to_vec());
                    }
                    uid
                }
                (Units::Bytes(map, _), _, Some(rows)) => {
                    intern(map, &mut self.unit_keys, rows.row(row).data())
                }
                _ => return Err(SqlError::internal("unit key kinds disagree")),
            };
            if self.unit_keys.len() > known_units {
                self.unit_bytes += UNIT_BYTES + 2 * self.unit_keys[uid as usize].len();
            }
            let next = self.pair_units.len() as u32;
            let pair = *self
                .pairs
                .entry(((uid as u64) << 32) | gid as u64)
                .or_insert(next);
            if pair == next {
                self.pair_units.push(uid);
                self.pair_groups.push(gid);
                self.accs.add_pairs(1);
                self.unit_bytes += PAIR_BYTES + self.accs.pair_bytes();
            }
            self.accumulate(pair as usize, inputs, row)?;
        }
        self.reserve()
    }

    /// Estimated bytes of one group's totals.
    fn group_totals_bytes(&self) -> usize {
        let histogram = (QUANTILE_CANDIDATES + 1) * std::mem::size_of::<u64>();
        std::mem::size_of::<Option<GroupTotals>>()
            + self
                .spec
                .parts
                .iter()
                .map(|p| match p {
                    Part::Quantile { .. } => 16 + 24 + histogram,
                    _ => 16 + 24,
                })
                .sum::<usize>()
    }

    /// Reserves what the bounder holds in the memory pool.
    fn reserve(&mut self) -> Result<()> {
        self.reservation
            .try_resize(self.unit_bytes + self.group_bytes)
            .map_err(|_| SqlError::OutOfMemory {
                limit: self.limit,
                charged: false,
            })
    }

    /// Bounds the units held (L∞, then L0 by the keyed hash) and adds their contributions to
    /// the groups' totals; then forgets them.
    fn flush(&mut self) -> Result<()> {
        let spec = Arc::clone(&self.spec);
        // The pairs of each unit, unit after unit: `by_unit[starts[u]..starts[u + 1]]`, and
        // each pair's group.
        let mut starts = vec![0usize; self.unit_keys.len() + 1];
        let mut by_unit: Vec<u32>;
        match &self.dense {
            Some(dense) => {
                by_unit = Vec::with_capacity(self.accs.pairs());
                for (u, _, p) in dense.pairs() {
                    by_unit.push(p as u32);
                    starts[u + 1] = by_unit.len();
                }
                for u in 0..self.unit_keys.len() {
                    starts[u + 1] = starts[u + 1].max(starts[u]);
                }
            }
            None => {
                // One counting sort, not a vector per unit.
                for &u in &self.pair_units {
                    if u != NO_UNIT {
                        starts[u as usize + 1] += 1;
                    }
                }
                for u in 0..self.unit_keys.len() {
                    starts[u + 1] += starts[u];
                }
                by_unit = vec![0u32; starts[self.unit_keys.len()]];
                let mut next = starts.clone();
                for (p, &u) in self.pair_units.iter().enumerate() {
                    if u != NO_UNIT {
                        by_unit[next[u as usize]] = p as u32;
                        next[u as usize] += 1;
                    }
                }
            }
        }
        let group_of = |p: usize| match &self.dense {
            Some(dense) => p % dense.width,
            None => self.pair_groups[p] as usize,
        };
        self.totals.resize(self.group_keys.len(), None);
        let mut ranked: Vec<(u64, &[u8], u32)> = Vec::new();
        for (u, unit) in self.unit_keys.iter().enumerate() {
            let mut pairs = &by_unit[starts[u]..starts[u + 1]];
            let kept: Vec<u32>;
            if pairs.len() as u64 > spec.max_groups {
                ranked.clear();
                ranked.extend(pairs.iter().map(|&p| {
                    let group = &self.group_keys[group_of(p as usize)];
                    (spec.hash.hash(&[unit, group]), group.as_slice(), p)
                }));
                ranked.sort_unstable();
                ranked.truncate(spec.max_groups as usize);
                kept = ranked.iter().map(|&(_, _, p)| p).collect();
                pairs = &kept;
            }
            for &p in pairs {
                let p = p as usize;
                let g = group_of(p);
                let t = self.totals[g].get_or_insert_with(|| GroupTotals::empty(&spec.parts));
                t.units += 1;
                for (k, part) in spec.parts.iter().enumerate() {
                    contribute(t, k, part, self.accs.get(p, k), &spec)?;
                }
            }
        }
        self.units.clear();
        self.unit_keys.clear();
        self.pairs.clear();
        if let Some(dense) = &mut self.dense {
            dense.seen.clear();
        }
        self.pair_units.clear();
        self.pair_groups.clear();
        self.accs.clear();
        self.unit_bytes = 0;
        Ok(())
    }

    /// The bounded, L0-limited totals per group.
    pub(crate) fn finish(mut self) -> Result<Totals> {
        self.adopt_interned()?;
        self.flush()?;
        let totals = std::mem::take(&mut self.totals);
        Ok(std::mem::take(&mut self.group_keys)
            .into_iter()
            .zip(totals)
            .filter_map(|(k, t)| t.map(|t| (k, t)))
            .collect())
    }
}

fn intern(map: &mut HashMap<Vec<u8>, u32>, keys: &mut Vec<Vec<u8>>, bytes: &[u8]) -> u32 {
    if let Some(&id) = map.get(bytes) {
        return id;
    }
    let id = keys.len() as u32;
    keys.push(bytes.to_vec());
    map.insert(bytes.to_vec(), id);
    id
}

fn flag(inputs: &[ArrayRef], i: usize, row: usize) -> bool {
    let a: &BooleanArray = inputs[i].as_boolean();
    a.is_valid(row) && a.value(row)
}

fn value(inputs: &[ArrayRef], i: usize, row: usize) -> Option<f64> {
    let a: &Float64Array = inputs[i].as_primitive::<Float64Type>();
    // NaN has no place in a bounded range: it is skipped like NULL.
    (a.is_valid(row) && !a.value(row).is_nan()).then(|| a.value(row))
}

/// Adds one row to one (unit, group) accumulator; true when it holds one value more.
fn update(
    acc: Acc<'_>,
    part: &Part,
    inputs: &[ArrayRef],
    row: usize,
    spec: &BoundSpec,
) -> Result<bool> {
    let mut grew = false;
    match (acc, part) {
        (Acc::Count(n), Part::Count { source, .. }) => {
            let hit = match *source {
                CountSource::Rows(None) | CountSource::Units(None) => true,
                CountSource::Rows(Some(f)) | CountSource::Units(Some(f)) => flag(inputs, f, row),
                CountSource::NonNull(v) => value(inputs, v, row).is_some(),
            };
            *n += u64::from(hit);
        }
        (Acc::Sum(acc), Part::Sum { grid, .. }) => {
            if let Some(x) = value(inputs, grid.input, row) {
                acc.n += 1;
                // Saturating (see `bounded_sum`).
                acc.total = acc.total.saturating_add(grid.fine(x));
            }
        }
        (Acc::Values(heap), Part::Quantile { input, range, .. }) => {
            if let Some(x) = value(inputs, *input, row) {
                let x = x.clamp(range.0, range.1);
                let h = spec.hash.hash(&[&x.to_bits().to_le_bytes()]);
                let bin = candidate_index(x, *range);
                heap.push((h, bin));
                if heap.len() as u64 > spec.max_rows.unwrap_or(1) {
                    heap.pop();
                } else {
                    grew = true;
                }
            }
        }
        _ => return Err(SqlError::internal("accumulator and part disagree")),
    }
    Ok(grew)
}

/// Adds one (unit, group)'s pre-aggregated state (see [`crate::preaggregate`]) to its
/// accumulator.
fn merge_state(acc: Acc<'_>, inputs: &[ArrayRef], at: StateColumns, row: usize) -> Result<()> {
    let count = |i: usize| -> Result<u64> {
        let a = inputs[i].as_primitive::<Int64Type>();
        let n = if a.is_valid(row) { a.value(row) } else { 0 };
        u64::try_from(n).map_err(|_| SqlError::internal("a negative pre-aggregated count"))
    };
    match (acc, at.total) {
        (Acc::Count(n), None) => *n += count(at.count)?,
        (Acc::Sum(acc), Some(t)) => {
            acc.n += count(at.count)?;
            let total = inputs[t].as_primitive::<Decimal128Type>();
            if total.is_valid(row) {
                acc.total = acc
                    .total
                    .checked_add(total.value(row))
                    .ok_or_else(overflow)?;
            }
        }
        _ => return Err(SqlError::internal("a state and its part disagree")),
    }
    Ok(())
}

/// The first candidate point above `x`: candidates c_j = lo + j·(hi − lo)/(B − 1).
pub(crate) fn candidate_index(x: f64, (lo, hi): (f64, f64)) -> u32 {
    let step = (hi - lo) / (QUANTILE_CANDIDATES - 1) as f64;
    let j = ((x - lo) / step).floor() + 1.0;
    j.clamp(0.0, QUANTILE_CANDIDATES as f64) as u32
}

/// Adds a bounded (unit, group) contribution to the group's totals.
fn contribute(
    t: &mut GroupTotals,
    k: usize,
    part: &Part,
    acc: Acc<'_>,
    spec: &BoundSpec,
) -> Result<()> {
    let linf = spec.max_rows;
    match (part, acc) {
        (Part::Count { source, bound, .. }, Acc::Count(n)) => {
            let c = match source {
                // Its flagged rows can be none.
                CountSource::Units(_) => (*n).min(1),
                _ => (*n).min(*bound),
            };
            t.totals[k] = t.totals[k]
                .checked_add(i128::from(c))
                .ok_or_else(overflow)?;
        }
        (Part::Sum { grid, .. }, Acc::Sum(acc)) => {
            let c = bounded_sum(acc.total, acc.n, linf, grid);
            t.totals[k] = t.totals[k].checked_add(c).ok_or_else(overflow)?;
        }
        (Part::Quantile { .. }, Acc::Values(heap)) => {
            for &(_, bin) in heap.iter() {
                t.histograms[k][bin as usize] += 1;
            }
        }
        _ => return Err(SqlError::internal("accumulator and part disagree")),
    }
    Ok(())
}

/// One unit's bounded contribution to a sum: scaled by L∞/n when it has more than L∞ values,
/// clamped into the per-unit sum bounds and to ±Y.
///
/// A unit's own total saturates rather than fails: it is clamped here whatever its value, so
/// saturating keeps the contribution a function of the unit's rows alone, where an overflow
/// error would tell whether some unit holds a few huge values (a schema whose row bounds are
/// far wider than its per-unit sum bounds makes the grid fine enough for that).
pub(crate) fn bounded_sum(s: i128, n: u64, linf: Option<u64>, grid: &FixedGrid) -> i128 {
    let scaled = match linf {
        Some(l) if n > l => s.saturating_mul(i128::from(l)) / i128::from(n),
        _ => s,
    };
    scaled.clamp(grid.sum_lo, grid.sum_hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::pow2;

    fn grid(sum: Option<(i128, i128)>) -> FixedGrid {
        let cap = (200.0 * pow2(10)) as i128;
        FixedGrid {
            input: 0,
            range: (0.0, 100.0),
            centre: 0.0,
            square: false,
            fine_exp: -10,
            sum_lo: sum.map_or(-cap, |s| s.0),
            sum_hi: sum.map_or(cap, |s| s.1),
            bound: 200.0,
        }
    }

    #[test]
    fn a_units_sum_is_scaled_to_l_infinity_and_clamped() {
        let g = grid(None);
        let one = g.fine(60.0);
        // Two values: within L∞ = 2, kept as is.
        assert_eq!(bounded_sum(2 * one, 2, Some(2), &g), 2 * one);
        // Four values of 60: scaled to two, 120.
        assert_eq!(bounded_sum(4 * one, 4, Some(2), &g), 2 * one);
        // Clamped to the per-unit bound.
        let g = grid(Some((0, g.fine(50.0))));
        assert_eq!(bounded_sum(one, 1, None, &g), g.fine(50.0));
        // A saturated total is clamped like any other (no overflow error that one unit's
        // huge values could trigger).
        assert_eq!(bounded_sum(i128::MAX, 3, Some(2), &g), g.fine(50.0));
        assert_eq!(bounded_sum(i128::MIN, 3, Some(2), &g), 0);
    }

    /// The row encoding of each integer group key.
    fn key_rows(keys: &[i64]) -> HashSet<Vec<u8>> {
        let conv = RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap();
        let array: ArrayRef = Arc::new(datafusion::arrow::array::Int64Array::from(keys.to_vec()));
        let rows = conv.convert_columns(&[array]).unwrap();
        rows.iter().map(|r| r.data().to_vec()).collect()
    }

    #[test]
    fn groups_outside_the_public_keys_leave_the_layout_and_the_totals_alone() {
        use datafusion::arrow::array::Int64Array;
        use datafusion::execution::memory_pool::UnboundedMemoryPool;
        let spec = Arc::new(BoundSpec {
            group_types: vec![DataType::Int64],
            key_filter: Some(key_rows(&[1, 2, 3])),
            parts: vec![Part::Count {
                source: CountSource::Rows(None),
                bound: 10,
                mech: dpml_mechanisms::DiscreteLaplaceMechanism::new(10, 1.0).unwrap(),
            }],
            max_groups: 3,
            max_rows: Some(10),
            hash: KeyedHash::draw(&mut dpml_mechanisms::DpRng::seeded(1)),
            states: None,
        });
        let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
        let batch = |units: Vec<i64>, groups: Vec<i64>| {
            RecordBatch::try_from_iter([
                ("unit", Arc::new(Int64Array::from(units)) as ArrayRef),
                ("group", Arc::new(Int64Array::from(groups)) as ArrayRef),
            ])
            .unwrap()
        };
        // Unit 1 in the three public groups; unit 42 adds ten groups outside them.
        let totals = |with_42: bool| {
            let mut b = Bounder::new(Arc::clone(&spec), &DataType::Int64, false, &pool).unwrap();
            b.push(&batch(vec![1, 1, 1, 1], vec![1, 2, 3, 3])).unwrap();
            if with_42 {
                b.push(&batch(vec![42; 10], (10..20).collect())).unwrap();
            }
            assert!(
                b.dense.is_some(),
                "the layout followed groups outside the keys"
            );
            b.finish().unwrap()
        };
        let (with, without) = (totals(true), totals(false));
        assert_eq!(with, without);
        let counts: Vec<i128> = with.values().map(|t| t.totals[0]).collect();
        assert_eq!(counts, vec![1, 1, 2]);
    }

    #[test]
    fn candidates_cover_the_range() {
        assert_eq!(candidate_index(0.0, (0.0, 999.0)), 1);
        assert_eq!(candidate_index(-5.0, (0.0, 999.0)), 0);
        assert_eq!(
            candidate_index(999.0, (0.0, 999.0)),
            QUANTILE_CANDIDATES as u32
        );
        assert_eq!(candidate_index(500.5, (0.0, 999.0)), 501);
    }
}
