//! What DataFusion computes while it plans, before any check of dpml's can refuse it: calls of
//! functions on constants are folded into their values. `repeat('x', 2000000000)` or
//! `replace(repeat('a', 65536), 'a', repeat('b', 65536))` would allocate gigabytes whatever
//! the query, so the size of what a constant call builds is bounded from the SQL text itself.
//! A call that reads a column is not folded; it is checked with the rest of its expression.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Statement, Value,
    Visit, Visitor,
};

use crate::error::{Result, SqlError};

/// The largest count or bound a size-growing function may be given.
const MAX_GROWTH: f64 = 65_536.0;

/// The functions that make a series of values between bounds.
const SERIES: [&str; 3] = ["range", "generate_series", "gen_series"];

/// The most bytes a constant call may build, as estimated by [`folded_bytes`].
const MAX_FOLDED_BYTES: f64 = 16.0 * 1024.0 * 1024.0;

/// Refuses a statement with a constant call that would build too much while it is planned.
pub(crate) fn check(statement: &Statement) -> Result<()> {
    match statement.visit(&mut Growing) {
        ControlFlow::Break(refusal) => Err(refusal),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Finds a function call whose size argument is a constant other than a literal of at most
/// [`MAX_GROWTH`], or a constant call that would build more than [`MAX_FOLDED_BYTES`].
struct Growing;

impl Visitor for Growing {
    type Break = SqlError;

    fn pre_visit_expr(&mut self, expr: &SqlExpr) -> ControlFlow<SqlError> {
        let SqlExpr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        let name = function_name(f);
        let args = arguments(f);
        let series = SERIES.contains(&name.as_str());
        // The arguments that set the size: the count (second), or every bound of a series.
        let sizes = match name.as_str() {
            "repeat" | "lpad" | "rpad" | "array_repeat" | "list_repeat" | "array_resize"
            | "list_resize" => 1..2,
            _ if series => 0..usize::MAX,
            _ => 0..0,
        };
        let constant = !reads_a_column(expr);
        if series
            && constant
            && args
                .iter()
                .any(|e| matches!(e, SqlExpr::TypedString { .. } | SqlExpr::Interval(_)))
        {
            return ControlFlow::Break(SqlError::refused(
                format!("{name}(…) of dates or times"),
                "how many values a series of constant dates or times holds depends on its \
                 step (INTERVAL '1 microsecond' makes billions), and DataFusion builds it while \
                 it plans; make a series of at most 65536 numbers and add it to a date \
                 (DATE '2020-01-01' + INTERVAL '1 day' * n)",
            ));
        }
        for (i, e) in args.iter().enumerate() {
            if sizes.contains(&i) && !reads_a_column(e) && !small_literal(e) {
                return ControlFlow::Break(SqlError::refused(
                    format!("{name}(…, {e}, …)"),
                    format!(
                        "the size of what {name} builds must be a number of at most \
                         {MAX_GROWTH} written in the query (DataFusion computes constant calls \
                         while it plans, before anything is checked)"
                    ),
                ));
            }
        }
        if constant {
            let bytes = folded_bytes(expr);
            if bytes > MAX_FOLDED_BYTES {
                return ControlFlow::Break(SqlError::refused(
                    format!("{name}(…) of constants"),
                    format!(
                        "it can build about {bytes:.0} bytes, more than the {MAX_FOLDED_BYTES:.0} \
                         a constant call may (DataFusion computes constant calls while it \
                         plans, before anything is checked)"
                    ),
                ));
            }
        }
        ControlFlow::Continue(())
    }
}

/// A function's name, lower case, without its schema.
fn function_name(f: &Function) -> String {
    let name = f.name.to_string().to_lowercase();
    name.rsplit('.').next().unwrap_or_default().to_string()
}

/// A function's argument expressions, in order (named ones too).
fn arguments(f: &Function) -> Vec<&SqlExpr> {
    let FunctionArguments::List(list) = &f.args else {
        return Vec::new();
    };
    list.args
        .iter()
        .filter_map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
            | FunctionArg::Named {
                arg: FunctionArgExpr::Expr(e),
                ..
            }
            | FunctionArg::ExprNamed {
                arg: FunctionArgExpr::Expr(e),
                ..
            } => Some(e),
            _ => None,
        })
        .collect()
}

/// A literal of at most [`MAX_GROWTH`] (or a date, time or text: a series of days is as long
/// as its span, and a text count fails to plan anyway).
fn small_literal(e: &SqlExpr) -> bool {
    match e {
        SqlExpr::Value(_) | SqlExpr::TypedString(_) => {
            literal_number(e).is_none_or(|x| x.abs() <= MAX_GROWTH)
        }
        SqlExpr::Interval(_) => true,
        _ => false,
    }
}

/// The number a literal reads as: a number's, or a text's that DataFusion would cast to one
/// (`INTEGER '2147483647'`, `'2147483647'`); None for any other literal.
fn literal_number(e: &SqlExpr) -> Option<f64> {
    let value = match e {
        SqlExpr::Value(v) => &v.value,
        SqlExpr::TypedString(t) => &t.value.value,
        _ => return None,
    };
    let text = match value {
        Value::Number(n, _) => n.clone(),
        other => other.clone().into_string()?,
    };
    text.trim().parse::<f64>().ok()
}

/// A literal number's value (size arguments that are not one are refused, see [`Growing`]).
fn number(e: Option<&&SqlExpr>) -> f64 {
    e.and_then(|e| literal_number(e))
        .map_or(MAX_GROWTH, f64::abs)
}

/// An upper estimate of the bytes a constant expression builds: a literal its text; a growing
/// function its input times its count (`replace` its input times its replacement); any other
/// expression what its parts build together.
fn folded_bytes(e: &SqlExpr) -> f64 {
    match e {
        SqlExpr::Value(v) => v.to_string().len() as f64,
        SqlExpr::Nested(e) | SqlExpr::Cast { expr: e, .. } => folded_bytes(e),
        SqlExpr::BinaryOp { left, right, .. } => folded_bytes(left) + folded_bytes(right),
        SqlExpr::Function(f) => {
            let args = arguments(f);
            let size = |i: usize| args.get(i).map_or(0.0, |e| folded_bytes(e));
            match function_name(f).as_str() {
                "repeat" | "array_repeat" | "list_repeat" => size(0) * number(args.get(1)).max(1.0),
                // A pad character takes at most 4 bytes.
                "lpad" | "rpad" => size(0) + size(2) + 4.0 * number(args.get(1)),
                "array_resize" | "list_resize" => size(0) + size(2).max(8.0) * number(args.get(1)),
                n if SERIES.contains(&n) => 16.0 * MAX_GROWTH,
                // Every match (every position, for an empty pattern) can be replaced.
                "replace" | "regexp_replace" => size(0) + (size(0) + 1.0) * size(2),
                "translate" => 4.0 * size(0) + size(2),
                // Any other call: its arguments, and as much again as the two largest
                // multiplied (`array_to_string(list, separator)` repeats the separator per
                // element).
                _ => {
                    let mut sizes: Vec<f64> = args.iter().map(|e| folded_bytes(e)).collect();
                    sizes.sort_by(|a, b| b.total_cmp(a));
                    let product = match sizes.as_slice() {
                        [a, b, ..] => a * b,
                        _ => 0.0,
                    };
                    sizes.iter().sum::<f64>() + product + 16.0
                }
            }
        }
        other => parts_bytes(other),
    }
}

/// What the parts of an expression of another kind (CASE, OVERLAY, an array, …) build
/// together: the sum over every literal and function call inside it, an upper bound.
fn parts_bytes(e: &SqlExpr) -> f64 {
    struct Parts<'a> {
        outer: &'a SqlExpr,
        bytes: f64,
    }
    impl Visitor for Parts<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &SqlExpr) -> ControlFlow<()> {
            if !std::ptr::eq(e, self.outer) && matches!(e, SqlExpr::Value(_) | SqlExpr::Function(_))
            {
                self.bytes += folded_bytes(e);
            }
            ControlFlow::Continue(())
        }
    }
    let mut parts = Parts {
        outer: e,
        bytes: 16.0,
    };
    let _ = e.visit(&mut parts);
    parts.bytes
}

/// Whether a SQL expression names a column anywhere (then it is not folded while planning).
fn reads_a_column(e: &SqlExpr) -> bool {
    struct Names;
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &SqlExpr) -> ControlFlow<()> {
            match e {
                SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_) => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    e.visit(&mut Names).is_break()
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn checked(sql: &str) -> Result<()> {
        let statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        check(&statement)
    }

    #[test]
    fn constant_calls_that_build_too_much_are_refused() {
        for sql in [
            "SELECT repeat('x', 2000000000)",
            "SELECT length(replace(repeat('a', 65536), 'a', repeat('b', 65536)))",
            "SELECT regexp_replace(repeat('a', 65536), '', repeat('b', 65536), 'g')",
            "SELECT repeat(repeat('a', 65536), 65536)",
            "SELECT repeat(CAST(repeat('a', 65536) AS VARCHAR), 65536)",
            "SELECT repeat(CASE WHEN true THEN repeat('ab', 60000) END, 60000)",
            "SELECT lpad(repeat('a', 10), 65536, repeat('b', 65536)) || \
             repeat(repeat('c', 1000), 60000)",
            "SELECT array_to_string(array_repeat('a', 65536), repeat('b', 65536))",
            "SELECT generate_series(TIMESTAMP '2000-01-01', TIMESTAMP '2000-01-02', \
             INTERVAL '1 microsecond')",
            // A text that DataFusion casts to the count it names.
            "SELECT repeat('a', INTEGER '2147483647') || repeat('b', INTEGER '2147483647')",
            "SELECT repeat('a', '2147483647')",
        ] {
            let e = checked(sql).expect_err(sql).to_string();
            assert!(e.contains("refused"), "{sql}: {e}");
        }
    }

    #[test]
    fn small_constant_calls_and_calls_on_columns_pass() {
        for sql in [
            "SELECT repeat('x', 1000), replace('abc', 'b', 'xyz'), lpad('a', 10, '-')",
            "SELECT generate_series(1, 100)",
            "SELECT replace(repeat(name, 65536), 'a', repeat('b', 65536)) FROM t",
            "SELECT regexp_replace(repeat('ab', 100), 'a', 'c', 'g')",
            "SELECT repeat('a', INTEGER '100'), repeat('b', NULL)",
        ] {
            checked(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
}
