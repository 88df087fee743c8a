//! The groups a DP aggregate may release. Group keys are released only when they are public —
//! a key set declared in the schema, the values of a public table's column, or the bins of a
//! histogram over a bounded column — or, with δ > 0, when a noisy count of the units in the
//! group passes a threshold (private keys, see [`crate::release`]). With public keys every key
//! is released, empty groups too, and rows with another key are dropped before bounding.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array, StringArray, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator};
use dpml_data::table_decl::{KeyValue, MAX_KEYS};

use crate::error::{Result, SqlError};
use crate::interval::Range;

/// Where a group column's keys come from.
#[derive(Debug, Clone)]
pub(crate) enum Keys {
    /// Declared in the schema for `table.column`.
    Declared {
        column: String,
        values: Vec<KeyValue>,
    },
    /// The distinct values of a public table's column (this plan computes them).
    PublicTable { column: String, plan: LogicalPlan },
    /// The bins `FLOOR(x / width) * scale + offset` of a bounded column.
    Bins { column: String, values: ArrayRef },
    /// Not public: released by a noisy threshold (needs δ > 0).
    Private,
}

impl Keys {
    /// Whether the key set is public.
    pub(crate) fn is_public(&self) -> bool {
        !matches!(self, Keys::Private)
    }

    /// What `"public"` says about this key set.
    pub(crate) fn describe(&self) -> Option<String> {
        match self {
            Keys::Declared { column, values } => Some(format!(
                "the declared keys of {column} ({} values)",
                values.len()
            )),
            Keys::PublicTable { column, .. } => {
                Some(format!("the values of {column} (a public table)"))
            }
            Keys::Bins { column, values } => Some(format!(
                "the {} histogram bins of {column} over its declared bounds",
                values.len()
            )),
            Keys::Private => None,
        }
    }

    /// The key values as an array of `data_type` (None for private keys); `public_values`
    /// runs a plan on public tables.
    pub(crate) fn values(
        &self,
        data_type: &DataType,
        public_values: &dyn Fn(&LogicalPlan) -> Result<ArrayRef>,
    ) -> Result<Option<ArrayRef>> {
        let array: ArrayRef = match self {
            Keys::Private => return Ok(None),
            Keys::Declared { column, values } => {
                let text: StringArray = values.iter().map(|v| Some(v.to_string())).collect();
                cast_keys(&(Arc::new(text) as ArrayRef), data_type, column)?
            }
            Keys::Bins { column, values } => cast_keys(values, data_type, column)?,
            Keys::PublicTable { column, plan } => {
                let a = public_values(plan)?;
                cast_keys(&a, data_type, column)?
            }
        };
        Ok(Some(array))
    }
}

fn cast_keys(a: &ArrayRef, data_type: &DataType, column: &str) -> Result<ArrayRef> {
    let out = cast(a, data_type).map_err(|e| {
        SqlError::input(format!(
            "the keys of {column} do not convert to its type {data_type}: {e}"
        ))
    })?;
    // A key that does not parse as the column's type becomes NULL in a cast: refuse it, named.
    if let Some(i) = (0..a.len()).find(|&i| out.is_null(i) && !a.is_null(i)) {
        let key = datafusion::arrow::util::display::array_value_to_string(a, i)
            .unwrap_or_else(|_| format!("number {}", i + 1));
        return Err(SqlError::input(format!(
            "declared key {key:?} of {column} is not a value of its type {data_type}"
        )));
    }
    distinct(&positive_zero(out))
}

/// Float keys with -0.0 as 0.0: one value to SQL (and to the groups the rows fall in), which
/// the row encoding would tell apart.
fn positive_zero(keys: ArrayRef) -> ArrayRef {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Float32Type, Float64Type};
    match keys.data_type() {
        DataType::Float64 => Arc::new(
            keys.as_primitive::<Float64Type>()
                .unary::<_, Float64Type>(|x| if x == 0.0 { 0.0 } else { x }),
        ),
        DataType::Float32 => Arc::new(
            keys.as_primitive::<Float32Type>()
                .unary::<_, Float32Type>(|x| if x == 0.0 { 0.0 } else { x }),
        ),
        _ => keys,
    }
}

/// The first occurrence of each value of `keys`, in order. Keys that differ before the cast to
/// the group's type can be one value after it (`1` and `"01"` as integers, histogram bins
/// under a cast to an integer); released twice, one group's cell would get two independent
/// noises, and their mean less noise than its ε pays for. Values are compared as the release
/// looks them up: by their row encoding.
fn distinct(keys: &ArrayRef) -> Result<ArrayRef> {
    let converter = RowConverter::new(vec![SortField::new(keys.data_type().clone())])
        .map_err(SqlError::internal)?;
    let rows = converter
        .convert_columns(std::slice::from_ref(keys))
        .map_err(SqlError::internal)?;
    let mut seen = HashSet::new();
    let first: UInt32Array = (0..rows.num_rows())
        .filter(|&i| seen.insert(rows.row(i)))
        .map(|i| u32::try_from(i).map_err(|_| SqlError::internal("too many keys")))
        .collect::<Result<_>>()?;
    if first.len() == keys.len() {
        return Ok(keys.clone());
    }
    take(keys, &first, None).map_err(SqlError::internal)
}

/// The bins of a histogram expression over one bounded column: `FLOOR(lin(x))`, optionally
/// times a positive constant and plus a constant, where `lin` is increasing in `x`
/// (`(x - a) / w`, `x / w`, …). `range` is the column's declared range, `column_type` its
/// type. The keys are in the expression's own type, each computed by the engine's kernels
/// from its FLOOR value, as the engine computes a row's group: REAL rounds after each step,
/// a cast between steps truncates or rounds, BIGINT adds exactly beyond 2^53.
pub(crate) fn bins(expr: &Expr, range: Range, column_type: &DataType) -> Option<ArrayRef> {
    let (inner, scale) = post_affine(expr)?;
    let Expr::ScalarFunction(f) = strip(inner) else {
        return None;
    };
    if f.func.name() != "floor" || f.args.len() != 1 {
        return None;
    }
    if !(slope(&f.args[0])? > 0.0 && scale > 0.0) {
        return None;
    }
    // Monotone only while no integer step wraps: its extremes are at the range's ends.
    let ends = match column_type.is_integer() {
        true => (range.0.ceil(), range.1.floor()),
        false => range,
    };
    real_at(&f.args[0], ends.0)?;
    real_at(&f.args[0], ends.1)?;
    // The first and last bins as the engine computes the groups of the range's ends: an
    // integer division truncates (`-1 / 3` is 0, not -⅓), and `0.3 / 0.1` is 2.999…, where
    // `0.3 · (1 / 0.1)` is 3.000…: a first bin above the lowest rows' would drop them.
    let first = evaluate_at(&f.args[0], ends.0, column_type)?.floor();
    let last = evaluate_at(&f.args[0], ends.1, column_type)?.floor();
    let count = last - first + 1.0;
    if !(count.is_finite() && count >= 1.0 && count <= MAX_KEYS as f64) {
        return None;
    }
    let floors = (0..count as usize).map(|k| first + k as f64);
    above_floor(expr, strip(inner), floors, column_type)
}

/// `e` evaluated by the engine's kernels (the physical expression the engine runs on rows)
/// where its node `floor` takes each of the values `floors`.
fn above_floor(
    e: &Expr,
    floor: &Expr,
    floors: impl Iterator<Item = f64>,
    column_type: &DataType,
) -> Option<ArrayRef> {
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::common::DFSchema;
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::logical_expr::ExprSchemable;
    use datafusion::physical_expr::create_physical_expr;
    use datafusion::physical_expr::execution_props::ExecutionProps;
    const FLOOR: &str = "__dpml_floor";
    let column = floor.column_refs().into_iter().next()?.clone();
    let field = Schema::new(vec![Field::new(&column.name, column_type.clone(), true)]);
    let row = match &column.relation {
        Some(table) => DFSchema::try_from_qualified_schema(table.clone(), &field),
        None => DFSchema::try_from(field),
    }
    .ok()?;
    let floor_type = floor.get_type(&row).ok()?;
    let outer = e
        .clone()
        .transform_down(|node| {
            Ok(match &node == floor {
                true => Transformed::new(
                    Expr::Column(datafusion::common::Column::from_name(FLOOR)),
                    true,
                    datafusion::common::tree_node::TreeNodeRecursion::Jump,
                ),
                false => Transformed::no(node),
            })
        })
        .ok()?
        .data;
    let schema = Arc::new(Schema::new(vec![Field::new(
        FLOOR,
        floor_type.clone(),
        true,
    )]));
    let values: ArrayRef = Arc::new(Float64Array::from_iter_values(floors));
    let batch =
        RecordBatch::try_new(Arc::clone(&schema), vec![cast(&values, &floor_type).ok()?]).ok()?;
    let physical = create_physical_expr(
        &outer,
        &DFSchema::try_from(schema.as_ref().clone()).ok()?,
        &ExecutionProps::new(),
        &datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext::default(),
    )
    .ok()?;
    let keys = physical
        .evaluate(&batch)
        .and_then(|v| v.into_array(batch.num_rows()))
        .ok()?;
    // A date or time beyond chrono's range has no text to release it as.
    if keys.data_type().is_temporal() {
        use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
        let text = ArrayFormatter::try_new(keys.as_ref(), &FormatOptions::default()).ok()?;
        if (0..keys.len()).any(|i| text.value(i).try_to_string().is_err()) {
            return None;
        }
    }
    Some(keys)
}

/// The value of `e`, an expression of one column of type `column_type`, on a row where the
/// column holds `x`: evaluated by DataFusion, as the engine evaluates it on a row.
fn evaluate_at(e: &Expr, x: f64, column_type: &DataType) -> Option<f64> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::logical_expr::simplify::SimplifyContext;
    use datafusion::optimizer::simplify_expressions::ExprSimplifier;
    let x = ScalarValue::Float64(Some(x)).cast_to(column_type).ok()?;
    let at_x = e
        .clone()
        .transform(|node| {
            Ok(match node {
                Expr::Column(_) => Transformed::yes(Expr::Literal(x.clone(), None)),
                other => Transformed::no(other),
            })
        })
        .ok()?
        .data;
    match ExprSimplifier::new(SimplifyContext::builder().build())
        .simplify(at_x)
        .ok()?
    {
        Expr::Literal(v, _) => match v.cast_to(&DataType::Float64).ok()? {
            ScalarValue::Float64(Some(y)) if y.is_finite() => Some(y),
            _ => None,
        },
        _ => None,
    }
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => strip(&a.expr),
        Expr::Cast(c) => strip(&c.expr),
        Expr::TryCast(c) => strip(&c.expr),
        other => other,
    }
}

fn constant(e: &Expr) -> Option<f64> {
    typed_constant(e).map(|(x, _)| x)
}

/// A constant's value and the type the engine computes with it: `CAST(0.1 AS REAL)` is the
/// float 0.1f32 (0.100000001…), not the double 0.1.
fn typed_constant(e: &Expr) -> Option<(f64, DataType)> {
    let value = |v: &ScalarValue| match v.cast_to(&DataType::Float64).ok()? {
        ScalarValue::Float64(Some(x)) if x.is_finite() => Some(x),
        _ => None,
    };
    match e {
        Expr::Alias(a) => typed_constant(&a.expr),
        Expr::Literal(v, _) => Some((value(v)?, v.data_type())),
        Expr::Cast(c) => {
            let (x, _) = typed_constant(&c.expr)?;
            let v = ScalarValue::Float64(Some(x))
                .cast_to(c.field.data_type())
                .ok()?;
            Some((value(&v)?, c.field.data_type().clone()))
        }
        Expr::Negative(inner) => typed_constant(inner).map(|(x, t)| (-x, t)),
        _ => None,
    }
}

/// Whether an integer type is signed, and its bits (None for other types).
fn int_bits(ty: &DataType) -> Option<(bool, u32)> {
    use DataType::*;
    Some(match ty {
        Int8 => (true, 8),
        Int16 => (true, 16),
        Int32 => (true, 32),
        Int64 => (true, 64),
        UInt8 => (false, 8),
        UInt16 => (false, 16),
        UInt32 => (false, 32),
        UInt64 => (false, 64),
        _ => return None,
    })
}

/// The values an integer type holds, as reals (None for other types).
fn int_range(ty: &DataType) -> Option<(f64, f64)> {
    int_bits(ty).map(|(signed, bits)| {
        let m = 2f64.powi(bits as i32);
        match signed {
            true => (-m / 2.0, m / 2.0 - 1.0),
            false => (0.0, m - 1.0),
        }
    })
}

/// `e` as its inner expression followed by steps of plus or times a constant (any cast
/// between them), and the product of the factors.
fn post_affine(e: &Expr) -> Option<(&Expr, f64)> {
    match strip(e) {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::Plus | Operator::Minus => {
                typed_constant(right)?;
                post_affine(left)
            }
            Operator::Multiply => {
                let (c, other) = match (constant(left), constant(right)) {
                    (Some(c), None) => (c, right),
                    (None, Some(c)) => (c, left),
                    _ => return None,
                };
                let (inner, scale) = post_affine(other)?;
                Some((inner, scale * c))
            }
            _ => Some((e, 1.0)),
        },
        _ => Some((e, 1.0)),
    }
}

/// The value of `e` (built as [`slope`] reads it) where its column holds `x`, in real
/// arithmetic; None when a step in an integer type leaves the type's range there: the engine
/// wraps it, and `e` is no longer monotone in its column (`x * 2^62` on x in [0, 4]).
fn real_at(e: &Expr, x: f64) -> Option<f64> {
    match strip(e) {
        Expr::Column(_) => Some(x),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let ((c, ty), inner, c_first) = match (typed_constant(left), typed_constant(right)) {
                (None, Some(c)) => (c, left, false),
                (Some(c), None) => (c, right, true),
                _ => return None,
            };
            let v = real_at(inner, x)?;
            let out = match (op, c_first) {
                (Operator::Plus, _) => v + c,
                (Operator::Minus, false) => v - c,
                (Operator::Multiply, _) => v * c,
                (Operator::Divide, false) => v / c,
                _ => return None,
            };
            match int_range(&ty) {
                Some((lo, hi)) if !(lo <= out && out <= hi) => None,
                _ => Some(out),
            }
        }
        _ => None,
    }
}

/// The slope of `e`, built from the one column it reads by adding, subtracting, multiplying
/// and dividing by constants (its values are then monotone in the column's, falling for a
/// negative slope).
fn slope(e: &Expr) -> Option<f64> {
    match strip(e) {
        Expr::Column(_) => Some(1.0),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            match (op, constant(left), constant(right)) {
                (Operator::Plus | Operator::Minus, None, Some(_)) => slope(left),
                (Operator::Plus, Some(_), None) => slope(right),
                (Operator::Multiply, None, Some(c)) => slope(left).map(|s| s * c),
                (Operator::Multiply, Some(c), None) => slope(right).map(|s| s * c),
                (Operator::Divide, None, Some(c)) if c != 0.0 => slope(left).map(|s| s / c),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The cross product of the key sets (the first column varies slowest), as one batch of
/// columns; refused beyond [`MAX_KEYS`] groups.
pub(crate) fn cross_product(sets: &[ArrayRef]) -> Result<Vec<ArrayRef>> {
    let total = sets
        .iter()
        .try_fold(1usize, |acc, s| acc.checked_mul(s.len()));
    let total = match total {
        Some(t) if t <= MAX_KEYS => t,
        _ => {
            return Err(SqlError::input(format!(
                "the public key sets of the GROUP BY columns make more than {MAX_KEYS} groups"
            )));
        }
    };
    let mut out = Vec::with_capacity(sets.len());
    let mut inner = total;
    for s in sets {
        let n = s.len().max(1);
        inner /= n;
        let idx: UInt32Array = (0..total).map(|r| Some(((r / inner) % n) as u32)).collect();
        out.push(take(s.as_ref(), &idx, None).map_err(SqlError::internal)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, Int64Array};
    use datafusion::arrow::datatypes::Float64Type;
    use datafusion::logical_expr::{col, lit};
    use datafusion::prelude::floor;

    /// The bins of `e` over `range` of a column of type `ty`, as reals.
    fn reals(e: &Expr, range: Range, ty: &DataType) -> Option<Vec<f64>> {
        let keys = bins(e, range, ty)?;
        let keys = cast(&keys, &DataType::Float64).unwrap();
        Some(keys.as_primitive::<Float64Type>().values().to_vec())
    }

    #[test]
    fn histogram_bins_over_the_declared_range() {
        let e = floor(col("spend") / lit(10.0)) * lit(10.0);
        assert_eq!(
            reals(&e, (0.0, 100.0), &DataType::Float64).unwrap(),
            (0..=10).map(|k| k as f64 * 10.0).collect::<Vec<_>>()
        );
        let as_double = |e: Expr| datafusion::logical_expr::cast(e, DataType::Float64);
        let e = floor(as_double((col("age") - lit(18i64)) / lit(5i64)));
        assert_eq!(
            reals(&e, (18.0, 30.0), &DataType::Int64).unwrap(),
            vec![0.0, 1.0, 2.0]
        );
        // Each bin as the engine computes a row's group, step by step: (k · 0.1) · 3 is not
        // always k · 0.3.
        let e = floor(col("spend") / lit(10.0)) * lit(0.1) * lit(3.0) - lit(0.7);
        let stepwise: Vec<f64> = (0..=10).map(|k| k as f64 * 0.1 * 3.0 - 0.7).collect();
        assert_eq!(
            reals(&e, (0.0, 100.0), &DataType::Float64).unwrap(),
            stepwise
        );
        assert!((0..=10).any(|k| stepwise[k] != k as f64 * 0.3 - 0.7));
        // The ends' bins as the engine computes them: `-1 / 3` is 0 in integers (truncated),
        // and `0.3 / 0.1` is 2.999… (bin 2, where `0.3 · 10` would say 3).
        let e = floor(as_double(col("x") / lit(3i64)));
        assert_eq!(
            reals(&e, (-10.0, -1.0), &DataType::Int64).unwrap(),
            vec![-3.0, -2.0, -1.0, 0.0]
        );
        let e = floor(col("spend") / lit(0.1));
        assert_eq!(reals(&e, (0.3, 1.0), &DataType::Float64).unwrap()[0], 2.0);
        // Steps in REAL round to f32 after each one, as the engine computes each row's key.
        let f32_lit = |x: f64| datafusion::logical_expr::cast(lit(x), DataType::Float32);
        let e = (datafusion::logical_expr::cast(floor(col("spend")), DataType::Float32)
            + f32_lit(0.1))
            * f32_lit(0.3);
        let want: Vec<f64> = (0..=20)
            .map(|k| f64::from((k as f32 + 0.1f32) * 0.3f32))
            .collect();
        assert_eq!(reals(&e, (0.0, 20.0), &DataType::Float32).unwrap(), want);
        // A cast between steps rounds there, as it does on a row.
        let e = datafusion::logical_expr::cast(floor(col("spend")) + lit(0.1), DataType::Float32)
            * f32_lit(3.0);
        let want: Vec<f64> = (0..=20)
            .map(|k| f64::from((k as f64 + 0.1) as f32 * 3.0f32))
            .collect();
        assert_eq!(reals(&e, (0.0, 20.0), &DataType::Float64).unwrap(), want);
        // Dates beyond chrono's range have no text: not a histogram.
        let e = datafusion::logical_expr::try_cast(
            datafusion::logical_expr::try_cast(floor(col("spend")) * lit(1e8), DataType::Int32),
            DataType::Date32,
        );
        assert!(bins(&e, (0.0, 20.0), &DataType::Float64).is_none());
        // BIGINT steps are exact beyond 2^53.
        let big = 9_007_199_254_740_993i64;
        let e = datafusion::logical_expr::try_cast(floor(col("spend")), DataType::Int64) + lit(big);
        let keys = bins(&e, (0.0, 20.0), &DataType::Float64).unwrap();
        let keys = keys.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        assert_eq!(
            keys.values().to_vec(),
            (0..=20).map(|k| k + big).collect::<Vec<_>>()
        );
        // An integer step that wraps inside the range makes the key no longer monotone.
        let big = 4_611_686_018_427_387_904i64;
        let e = floor(as_double(col("x") * lit(big) / lit(big)));
        assert!(bins(&e, (0.0, 4.0), &DataType::Int64).is_none());
        assert!(bins(&e, (0.0, 1.0), &DataType::Int64).is_some());
        assert!(bins(&col("spend"), (0.0, 1.0), &DataType::Float64).is_none());
        assert!(bins(&floor(col("a") * col("b")), (0.0, 1.0), &DataType::Float64).is_none());
        assert!(
            bins(&floor(col("a") / lit(1e-9)), (0.0, 1.0), &DataType::Float64).is_none(),
            "too many"
        );
    }

    #[test]
    fn the_cross_product_varies_the_last_column_fastest() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let b: ArrayRef = Arc::new(StringArray::from(vec!["x", "y", "z"]));
        let out = cross_product(&[a, b]).unwrap();
        let a = out[0].as_any().downcast_ref::<Int64Array>().unwrap();
        let b = out[1].as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(a.values().to_vec(), vec![1, 1, 1, 2, 2, 2]);
        assert_eq!(b.value(4), "y");
    }

    #[test]
    fn declared_keys_are_cast_to_the_column_type() {
        let k = Keys::Declared {
            column: "t.day".into(),
            values: vec![KeyValue::Int(3), KeyValue::Text("4".into())],
        };
        let none = |_: &LogicalPlan| -> Result<ArrayRef> { unreachable!() };
        let a = k.values(&DataType::Int32, &none).unwrap().unwrap();
        assert_eq!(a.data_type(), &DataType::Int32);
        let bad = Keys::Declared {
            column: "t.day".into(),
            values: vec![KeyValue::Int(1), KeyValue::Text("monday".into())],
        };
        let msg = bad.values(&DataType::Int32, &none).unwrap_err().to_string();
        assert!(
            msg.contains("key \"monday\" of t.day is not a value of its type"),
            "{msg}"
        );
    }

    #[test]
    fn keys_that_one_cast_makes_equal_are_released_once() {
        let none = |_: &LogicalPlan| -> Result<ArrayRef> { unreachable!() };
        let declared = Keys::Declared {
            column: "t.day".into(),
            values: ["1", "01", "+1", "2", "001"]
                .map(|v| KeyValue::Text(v.into()))
                .to_vec(),
        };
        let a = declared.values(&DataType::Int64, &none).unwrap().unwrap();
        let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(a.values().to_vec(), vec![1, 2]);
        // -0 and 0 are one REAL value.
        let zeros = Keys::Declared {
            column: "t.day".into(),
            values: ["-0.0", "0", "1"]
                .map(|v| KeyValue::Text(v.into()))
                .to_vec(),
        };
        let z = zeros.values(&DataType::Float64, &none).unwrap().unwrap();
        let z = z
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Float64Array>()
            .unwrap();
        assert_eq!(
            z.values().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            [0, 1.0f64.to_bits()]
        );
        // 101 bins of FLOOR(x) * 0.01 over [0, 100] are two integers.
        let bins = Keys::Bins {
            column: "t.x".into(),
            values: Arc::new(Float64Array::from_iter_values(
                (0..=100).map(|k| k as f64 * 0.01),
            )),
        };
        let a = bins.values(&DataType::Int64, &none).unwrap().unwrap();
        let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(a.values().to_vec(), vec![0, 1]);
        // As floats they stay 101.
        let a = bins.values(&DataType::Float64, &none).unwrap().unwrap();
        assert_eq!(a.len(), 101);
    }
}
