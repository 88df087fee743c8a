//! The range of an expression over the rows of a private relation, from the declared bounds of
//! the columns it reads: interval arithmetic on `+ − × ÷`, casts, `LEAST`/`GREATEST`, `ABS`,
//! rounding and `CASE`. An aggregate needs the range of its argument to bound one unit's
//! contribution; every value is clamped into the range before it is aggregated, so the range
//! is enforced, not trusted (floating-point rounding of the expression cannot step outside).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Case, Expr, ExprSchemable, Operator};

/// A closed interval `[lo, hi]`, finite.
pub type Range = (f64, f64);

/// The middle of a range: the centre that AVG, VARIANCE and a centred SUM take their sums
/// around (see `crate::calibrate`).
pub(crate) fn centre((lo, hi): Range) -> f64 {
    (lo + hi) / 2.0
}

/// The range of `expr`, given the declared range of each column it reads (`column` answers
/// for an `Expr::Column`); `None` when the range is not finite (a column without a declared
/// range that no `LEAST`/`GREATEST` clamps) or the expression is not one this arithmetic
/// covers.
pub fn range_of(expr: &Expr, column: &dyn Fn(&Expr) -> Option<Range>) -> Option<Range> {
    let r = extended(expr, column)?;
    (r.0.is_finite() && r.1.is_finite() && r.0 <= r.1).then_some(r)
}

/// As [`range_of`], with infinite ends for unbounded columns (so that a clamp can bound them).
fn extended(expr: &Expr, column: &dyn Fn(&Expr) -> Option<Range>) -> Option<Range> {
    let range_of = extended;
    let r = match expr {
        Expr::Column(_) => column(expr).unwrap_or((f64::NEG_INFINITY, f64::INFINITY)),
        Expr::Alias(a) => range_of(&a.expr, column)?,
        Expr::Literal(v, _) => {
            let x = scalar_f64(v)?;
            (x, x)
        }
        Expr::Cast(c) => range_of(&c.expr, column)?,
        Expr::TryCast(c) => range_of(&c.expr, column)?,
        Expr::Negative(e) => {
            let (lo, hi) = range_of(e, column)?;
            (-hi, -lo)
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let a = range_of(left, column)?;
            let b = range_of(right, column)?;
            binary(a, *op, b)?
        }
        Expr::Case(Case {
            expr: None,
            when_then_expr,
            else_expr,
        }) => {
            // A CASE without ELSE yields NULL, which aggregates skip.
            let mut branches = when_then_expr.iter().map(|(_, then)| then.as_ref());
            let first = range_of(branches.next()?, column)?;
            branches
                .chain(else_expr.as_deref())
                .try_fold(first, |acc, e| {
                    let (lo, hi) = range_of(e, column)?;
                    Some((acc.0.min(lo), acc.1.max(hi)))
                })?
        }
        Expr::ScalarFunction(f) => {
            let args: Option<Vec<Range>> = f.args.iter().map(|a| range_of(a, column)).collect();
            function(f.func.name(), &args?)?
        }
        _ => return None,
    };
    // ∞ − ∞ or 0·∞ has no meaning as a bound.
    (!r.0.is_nan() && !r.1.is_nan() && r.0 <= r.1).then_some(r)
}

/// Whether `expr` (typed in `schema`) can never be NaN. Integers and decimals cannot; a float
/// can where a column or text holds one, or where arithmetic meets ∞ (∞ − ∞, 0·∞), so a float
/// expression is NaN-free only when its magnitude has a finite bound from the types it is
/// computed from (an integer below 2^64, a DECIMAL(p, s) below 10^(p−s)) and `+ − ×`, negation,
/// division by a non-zero constant and numeric casts. The declared bounds do not count here:
/// they clamp values at aggregation, they do not keep a row from holding any value.
pub(crate) fn never_nan(expr: &Expr, schema: &DFSchema) -> bool {
    match expr.get_type(schema) {
        Ok(t) if t.is_floating() => magnitude(expr, schema).is_some(),
        Ok(_) => true,
        Err(_) => false,
    }
}

/// A finite bound on |expr| from its types alone (see [`never_nan`]): an integer or a decimal
/// from its type, a float from how it is computed.
fn magnitude(expr: &Expr, schema: &DFSchema) -> Option<f64> {
    let m = match (expr, expr.get_type(schema).ok()?) {
        (_, t) if t.is_integer() => 2f64.powi(64),
        (_, DataType::Decimal128(p, s) | DataType::Decimal256(p, s)) => {
            10f64.powi(i32::from(p) - i32::from(s))
        }
        (_, t) if !t.is_floating() => return None,
        (Expr::Alias(a), _) => magnitude(&a.expr, schema)?,
        (Expr::Literal(v, _), _) => scalar_f64(v)?.abs(),
        (Expr::Cast(c), _) => magnitude(&c.expr, schema)?,
        (Expr::TryCast(c), _) => magnitude(&c.expr, schema)?,
        (Expr::Negative(e), _) => magnitude(e, schema)?,
        (Expr::BinaryExpr(BinaryExpr { left, op, right }), _) => {
            let a = magnitude(left, schema)?;
            match op {
                Operator::Plus | Operator::Minus => a + magnitude(right, schema)?,
                Operator::Multiply => a * magnitude(right, schema)?,
                Operator::Divide => match right.as_ref() {
                    Expr::Literal(v, _) => match scalar_f64(v)?.abs() {
                        d if d > 0.0 => a / d,
                        _ => return None,
                    },
                    _ => return None,
                },
                _ => return None,
            }
        }
        _ => return None,
    };
    // Twice the bound still finite: no step above can reach ∞.
    (m * 2.0).is_finite().then_some(m)
}

fn scalar_f64(v: &ScalarValue) -> Option<f64> {
    match v.cast_to(&DataType::Float64).ok()? {
        ScalarValue::Float64(Some(x)) if x.is_finite() => Some(x),
        _ => None,
    }
}

fn binary(a: Range, op: Operator, b: Range) -> Option<Range> {
    let corners = |f: fn(f64, f64) -> f64| {
        let c = [f(a.0, b.0), f(a.0, b.1), f(a.1, b.0), f(a.1, b.1)];
        let lo = c.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    Some(match op {
        Operator::Plus => (a.0 + b.0, a.1 + b.1),
        Operator::Minus => (a.0 - b.1, a.1 - b.0),
        Operator::Multiply => corners(|x, y| x * y),
        // A divisor that can be 0 has no bounded quotient.
        Operator::Divide if b.0 > 0.0 || b.1 < 0.0 => corners(|x, y| x / y),
        _ => return None,
    })
}

fn function(name: &str, args: &[Range]) -> Option<Range> {
    let fold = |f: fn(f64, f64) -> f64| {
        let first = *args.first()?;
        Some(
            args[1..]
                .iter()
                .fold(first, |acc, r| (f(acc.0, r.0), f(acc.1, r.1))),
        )
    };
    match (name, args) {
        ("least", _) => fold(f64::min),
        ("greatest", _) => fold(f64::max),
        ("abs", [(lo, hi)]) => Some(if *lo >= 0.0 {
            (*lo, *hi)
        } else if *hi <= 0.0 {
            (-hi, -lo)
        } else {
            (0.0, hi.max(-lo))
        }),
        ("floor", [(lo, hi)]) => Some((lo.floor(), hi.floor())),
        ("ceil", [(lo, hi)]) => Some((lo.ceil(), hi.ceil())),
        ("trunc", [(lo, hi)]) => Some((lo.trunc(), hi.trunc())),
        // Rounding to a number of decimals stays within one unit of the value.
        ("round", [(lo, hi), ..]) => Some((lo.floor(), hi.ceil())),
        ("coalesce", _) => fold(f64::min).zip(fold(f64::max)).map(|(l, h)| (l.0, h.1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};
    use datafusion::prelude::{abs, greatest, least};

    fn ranges(e: &Expr) -> Option<Range> {
        range_of(e, &|c| match c {
            Expr::Column(c) if c.name == "price" => Some((900.0, 105_000.0)),
            Expr::Column(c) if c.name == "discount" => Some((0.0, 0.1)),
            Expr::Column(c) if c.name == "delta" => Some((-3.0, 2.0)),
            _ => None,
        })
    }

    #[test]
    fn tpch_revenue_is_bounded() {
        let e = col("price") * (lit(1.0) - col("discount"));
        assert_eq!(ranges(&e), Some((810.0, 105_000.0)));
        let e = col("price") * (lit(1.0) - col("discount")) * (lit(1.0) + lit(0.08));
        let (lo, hi) = ranges(&e).unwrap();
        assert!((lo - 874.8).abs() < 1e-9 && (hi - 113_400.0).abs() < 1e-6);
    }

    #[test]
    fn nan_is_ruled_out_by_types_not_by_bounds() {
        use datafusion::arrow::datatypes::{Field, Schema};
        use datafusion::logical_expr::{cast, try_cast};
        let schema = DFSchema::try_from(Schema::new(vec![
            Field::new("price", DataType::Decimal128(15, 2), false),
            Field::new("qty", DataType::Int64, false),
            Field::new("x", DataType::Float64, false),
            Field::new("s", DataType::Utf8, false),
        ]))
        .unwrap();
        let double = |e: Expr| cast(e, DataType::Float64);
        let charge = double(col("price")) * (lit(1) - col("price")) * (lit(1) + col("price"));
        for (e, expect) in [
            (col("qty"), true),
            (col("price") * col("qty"), true),
            (charge, true),
            (double(col("qty")) / lit(2.0), true),
            (col("x"), false),
            (col("x") * lit(0.0), false),
            (double(col("qty")) / lit(0.0), false),
            (double(col("qty")) / double(col("qty")), false),
            (try_cast(col("s"), DataType::Float64), false),
        ] {
            assert_eq!(never_nan(&e, &schema), expect, "{e}");
        }
    }

    #[test]
    fn functions_and_refusals() {
        assert_eq!(ranges(&abs(col("delta"))), Some((0.0, 3.0)));
        assert_eq!(
            ranges(&least(vec![col("delta"), lit(1.0)])),
            Some((-3.0, 1.0))
        );
        assert_eq!(
            ranges(&greatest(vec![col("unknown"), lit(0)])),
            None,
            "a column without bounds"
        );
        let clamped = least(vec![greatest(vec![col("unknown"), lit(0)]), lit(40)]);
        assert_eq!(ranges(&clamped), Some((0.0, 40.0)), "clamped in SQL");
        assert_eq!(ranges(&(col("unknown") * lit(0))), None);
        assert_eq!(
            ranges(&(col("price") / col("delta"))),
            None,
            "divisor spans 0"
        );
        assert_eq!(ranges(&(col("price") / lit(2))), Some((450.0, 52_500.0)));
        assert_eq!(ranges(&(-col("delta"))), Some((-2.0, 3.0)));
    }
}
