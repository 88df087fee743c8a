//! A DP aggregate: an aggregate of private rows, cut out of the query plan. The rewrite keeps
//! what the aggregate reads as *contribution rows* (unit, group values, one input column per
//! aggregate argument) and puts a placeholder table in its place; the released cells fill the
//! placeholder once, and the rest of the query (HAVING, ORDER BY, LIMIT, arithmetic, joins
//! with public tables) runs on it as post-processing.
//!
//! Each aggregate of the SELECT list becomes a [`Measure`] with the range of its argument
//! (from the declared bounds, see [`crate::interval`]); what one unit may contribute to it is
//! fixed here, before any row is read.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::compute::can_cast_types;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::{Column, DFSchemaRef, ScalarValue};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{
    Aggregate, Expr, ExprSchemable, Filter, LogicalPlan, LogicalPlanBuilder, Projection, lit, when,
};

use crate::catalog::UnitSource;
use crate::error::{Result, SqlError, plan_err};
use crate::interval::{Range, never_nan, range_of};
use crate::keys::{Keys, bins};
use crate::rewrite::{Origin, Rel, Rewriter};

/// One released aggregate of the SELECT list.
#[derive(Debug, Clone)]
pub(crate) struct Measure {
    /// Its column in the aggregate's output (DataFusion's name, e.g. `sum(t.x)`).
    pub column: String,
    /// The aggregate as the query wrote it.
    pub display: String,
    /// What it computes.
    pub kind: Kind,
    /// Its output type.
    pub data_type: DataType,
}

/// What a measure computes from each unit's rows in a group. `value` and `flag` index the
/// aggregate's input columns (after the unit and the group columns).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// Rows (where `flag` is true): COUNT(*), COUNT(x), COUNT(*) FILTER (WHERE …).
    Count { flag: Option<usize> },
    /// Units with a row in the group (where `flag` is true): COUNT(DISTINCT unit).
    CountUnits { flag: Option<usize> },
    /// SUM of a value in `range`; one unit's sum in a group is clamped into `sum_range`.
    /// `never_null` as for AVG (a SUM of a never-NULL value can be released centred, see
    /// [`crate::calibrate`]).
    Sum {
        value: usize,
        range: Range,
        sum_range: Option<Range>,
        never_null: bool,
    },
    /// AVG: a noisy sum over a noisy count. `never_null`: the value is never NULL (by the
    /// schema) nor NaN (by its types), so its count is the rows' count.
    Avg {
        value: usize,
        range: Range,
        never_null: bool,
    },
    /// VARIANCE (`population`: VAR_POP) or, with `sqrt`, STDDEV; `never_null` as for AVG.
    Var {
        value: usize,
        range: Range,
        never_null: bool,
        population: bool,
        sqrt: bool,
    },
    /// The `q`-quantile (MEDIAN: 0.5), by the exponential mechanism.
    Quantile { value: usize, range: Range, q: f64 },
}

impl Kind {
    /// Whether one unit's row count per group must be bounded (L∞) for this measure.
    fn needs_row_bound(&self) -> bool {
        !matches!(self, Kind::CountUnits { .. } | Kind::Sum { .. })
    }
}

/// One group column.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The GROUP BY expression as written.
    pub display: String,
    /// Its type.
    pub data_type: DataType,
    /// Where its keys come from.
    pub keys: Keys,
}

/// An aggregate of private rows (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct DpAggregate {
    /// The private tables it reads.
    pub tables: BTreeSet<String>,
    /// The contribution rows: `__unit`, `__g0…`, `__x0…`.
    pub rows: LogicalPlan,
    /// The group columns.
    pub groups: Vec<Group>,
    /// The released aggregates.
    pub measures: Vec<Measure>,
    /// L0: groups one unit may contribute to.
    pub max_groups: u64,
    /// L∞: rows one unit's rows in one group count as at most.
    pub max_rows: Option<u64>,
    /// The placeholder the released cells fill.
    pub released: Arc<MemTable>,
}

impl DpAggregate {
    /// Cuts the aggregate `a` over the private relation `input` (whose unit is in a column)
    /// out of the plan; returns the placeholder that replaces it.
    pub(crate) fn build(rw: &mut Rewriter<'_>, input: Rel, a: &Aggregate) -> Result<LogicalPlan> {
        let id = rw.aggregates.len() + 1;
        let catalog = rw.catalog;
        let origin = |e: &Expr| -> Option<&Origin> { input.lineage[input.index_of(e)?].as_ref() };
        let column_range = |e: &Expr| -> Option<Range> {
            let o = origin(e)?;
            catalog.bounds(&o.table, &o.column)
        };

        let mut groups = Vec::new();
        for (i, g) in a.group_expr.iter().enumerate() {
            if a.group_expr[..i].contains(g) {
                return Err(SqlError::input(format!(
                    "GROUP BY lists {g} twice: list each group once"
                )));
            }
            if matches!(g, Expr::GroupingSet(_)) {
                return Err(SqlError::refused(
                    g.to_string(),
                    "GROUPING SETS, ROLLUP and CUBE release overlapping groups; write one query \
                     per grouping",
                ));
            }
            let keys = match origin(g) {
                Some(o) => match catalog.keys(&o.table, &o.column) {
                    Some(values) => Keys::Declared {
                        column: format!("{}.{}", o.table, o.column),
                        values: values.to_vec(),
                    },
                    None if catalog.is_public(&o.table) => Keys::PublicTable {
                        column: format!("{}.{}", o.table, o.column),
                        plan: distinct_values(rw, &o.table, &o.column)?,
                    },
                    None => Keys::Private,
                },
                None => histogram(g, &column_range, &input).unwrap_or(Keys::Private),
            };
            // DataFusion groups the aggregate of a correlated scalar subquery by this
            // constant when it turns the subquery into a join: no GROUP BY the user wrote.
            if g.schema_name().to_string().ends_with("__always_true") {
                return Err(SqlError::refused(
                    "a correlated subquery with an aggregate over private rows",
                    "DataFusion computes it per outer row, which mixes units; compute the \
                     aggregate in FROM and join it",
                ));
            }
            if !keys.is_public() && rw.delta <= 0.0 {
                return Err(SqlError::refused(
                    format!("GROUP BY {g}"),
                    "its keys are private: declare a public key set for the column (keys or \
                     keys_file in the schema), group by a public table's column or by histogram \
                     bins of a bounded column, or give δ > 0 (--delta) to release keys whose \
                     noisy unit count passes a threshold",
                ));
            }
            groups.push(Group {
                display: g.to_string(),
                data_type: a.schema.field(i).data_type().clone(),
                keys,
            });
        }

        let rows_bound = input.rows_per_unit.filter(|&r| r == 1);
        let tables: Vec<_> = input
            .tables
            .iter()
            .filter_map(|t| catalog.table(t).ok())
            .collect();
        let max_groups = if rows_bound.is_some() {
            1
        } else {
            tables.iter().map(|t| t.max_groups()).max().unwrap_or(1)
        };
        let max_rows = rows_bound.or_else(|| {
            tables
                .iter()
                .filter_map(|t| t.decl.max_rows_per_unit_per_group)
                .max()
        });

        let mut inputs: Vec<(Expr, bool)> = Vec::new();
        let mut measures = Vec::new();
        for (i, e) in a.aggr_expr.iter().enumerate() {
            let field = a.schema.field(a.group_expr.len() + i);
            let kind = measure(e, &input, &column_range, &mut inputs, catalog)?;
            if matches!(kind, Kind::Sum { .. }) && field.data_type().is_unsigned_integer() {
                // Checked before the charge: the release would fail, after it, whenever
                // the noise made the sum negative.
                return Err(SqlError::refused(
                    e.to_string(),
                    format!(
                        "its type {} cannot hold a negative noisy sum: sum a signed value \
                         (CAST(x AS DOUBLE) or TRY_CAST(x AS BIGINT))",
                        field.data_type()
                    ),
                ));
            }
            // The noisy value is a real (an integer for an integer type) cast to the measure's
            // type: a type it cannot be cast to (MEDIAN of a column of type Null, whose type is
            // its argument's) is told from the schema, so refused before the charge.
            let noisy = if field.data_type().is_integer() {
                DataType::Int64
            } else {
                DataType::Float64
            };
            if !can_cast_types(&noisy, field.data_type()) {
                return Err(SqlError::refused(
                    e.to_string(),
                    format!(
                        "its type {} cannot hold a noisy value{}: cast its argument to DOUBLE",
                        field.data_type(),
                        if field.data_type().is_null() {
                            " (a column of type Null holds NULLs only)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            if kind.needs_row_bound() && max_rows.is_none() {
                return Err(SqlError::refused(
                    e.to_string(),
                    format!(
                        "one unit's rows in a group are unbounded: declare \
                         max_rows_per_unit_per_group for {} in the schema",
                        input.tables.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            measures.push(Measure {
                column: field.name().clone(),
                display: e.to_string(),
                kind,
                data_type: field.data_type().clone(),
            });
        }

        let rows = contribution_rows(&input, &a.group_expr, &inputs)?;
        let (released, placeholder) = empty_table(rw, &format!("released{id}"), &a.schema)?;
        rw.aggregates.push(DpAggregate {
            tables: input.tables.clone(),
            rows,
            groups,
            measures,
            max_groups,
            max_rows,
            released,
        });
        Ok(placeholder)
    }

    /// Whether every group column has public keys.
    pub(crate) fn public_keys(&self) -> bool {
        self.groups.iter().all(|g| g.keys.is_public())
    }
}

/// The measure of one aggregate expression, adding the input columns it reads.
fn measure(
    e: &Expr,
    input: &Rel,
    column_range: &dyn Fn(&Expr) -> Option<Range>,
    inputs: &mut Vec<(Expr, bool)>,
    catalog: &crate::catalog::Catalog,
) -> Result<Kind> {
    let f: &AggregateFunction = match strip_alias(e) {
        Expr::AggregateFunction(f) => f,
        other => {
            return Err(SqlError::refused(
                other.to_string(),
                "only aggregate functions are computed from private rows",
            ));
        }
    };
    let p = &f.params;
    let name = f.func.name().to_ascii_lowercase();
    let refuse = |reason: &str| SqlError::refused(e.to_string(), reason);
    let filter = p.filter.as_deref().cloned();
    if p.distinct && name != "count" {
        return Err(refuse(
            "DISTINCT inside an aggregate other than COUNT(DISTINCT unit) has no bounded \
             contribution per unit",
        ));
    }
    // COUNT(x, y) counts the rows where every argument is not NULL, COUNT(DISTINCT x, y) the
    // distinct tuples: neither is what the one argument read below would release.
    if name == "count" && p.args.len() > 1 {
        return Err(refuse(
            "COUNT of several arguments is not released: count one (the rows where all are \
             not NULL: COUNT(*) FILTER (WHERE x IS NOT NULL AND y IS NOT NULL))",
        ));
    }
    let arg = p.args.first();
    // An input's index, the range of its value, and whether it is never NULL.
    let mut value = |arg: &Expr| -> Result<(usize, Range, bool)> {
        let range = range_of(arg, column_range).ok_or_else(|| {
            let bounded = arg
                .column_refs()
                .into_iter()
                .all(|c| column_range(&Expr::Column(c.clone())).is_some());
            refuse(&if bounded {
                format!(
                    "the range of {arg} is not finite: its columns' declared bounds overflow \
                     (or it divides by a range with 0 in it); narrow the bounds, or clamp it \
                     with LEAST/GREATEST"
                )
            } else {
                format!(
                    "{arg} has no declared bounds: declare bounds = [lo, hi] for its columns \
                     in the schema, or clamp it with LEAST/GREATEST"
                )
            })
        })?;
        let v = Expr::Cast(datafusion::logical_expr::Cast::new(
            Box::new(arg.clone()),
            DataType::Float64,
        ));
        let v = match &filter {
            Some(f) => when(f.clone(), v)
                .otherwise(lit(ScalarValue::Float64(None)))
                .map_err(plan_err)?,
            None => v,
        };
        // NaN is skipped like NULL: a value that can be NaN is not counted by COUNT(*).
        let schema = input.plan.schema();
        let never_null = v.nullable(schema.as_ref()).is_ok_and(|n| !n) && never_nan(&v, schema);
        inputs.push((v, false));
        Ok((inputs.len() - 1, range, never_null))
    };
    let kind = match name.as_str() {
        "count" if p.distinct => {
            let index = arg.and_then(|a| input.index_of(a));
            // The row's own unit column: never NULL on a contribution row.
            let own = index.is_some_and(|i| input.unit.columns().contains(&i));
            // A copy of a table's unit column (the other side of a join on the unit): NULL on
            // the rows an outer join pads, so only the rows where it is not NULL count.
            let copy = index
                .and_then(|i| input.lineage[i].as_ref())
                .is_some_and(|o| {
                    catalog
                        .table(&o.table)
                        .is_ok_and(|t| t.unit == UnitSource::Column(o.column.clone()))
                });
            let (Some(arg), true) = (arg, own || copy) else {
                return Err(refuse(
                    "COUNT(DISTINCT …) is released only of the privacy unit's column: other \
                     distinct counts are not sums of per-unit contributions",
                ));
            };
            let not_null = (!own).then(|| arg.clone().is_not_null());
            Kind::CountUnits {
                flag: push_flag(inputs, not_null, filter.as_ref()),
            }
        }
        "count" => {
            // COUNT(x) counts the rows where x is not NULL; COUNT(*) and COUNT(1) every row.
            let not_null = arg
                .filter(|a| !matches!(strip_alias(a), Expr::Literal(v, _) if !v.is_null()))
                .map(|a| a.clone().is_not_null());
            Kind::Count {
                flag: push_flag(inputs, not_null, filter.as_ref()),
            }
        }
        "sum" => {
            let arg = arg.ok_or_else(|| refuse("SUM needs an argument"))?;
            let sum_range = input
                .index_of(arg)
                .and_then(|i| input.lineage[i].as_ref())
                .and_then(|o| catalog.sum_bounds(&o.table, &o.column));
            let (value, range, never_null) = value(arg)?;
            Kind::Sum {
                value,
                range,
                sum_range,
                never_null,
            }
        }
        "avg" | "mean" => {
            let (value, range, never_null) =
                value(arg.ok_or_else(|| refuse("AVG needs an argument"))?)?;
            Kind::Avg {
                value,
                range,
                never_null,
            }
        }
        "var" | "var_samp" | "var_pop" | "stddev" | "stddev_samp" | "stddev_pop" => {
            let (value, range, never_null) =
                value(arg.ok_or_else(|| refuse("needs an argument"))?)?;
            Kind::Var {
                value,
                range,
                never_null,
                population: name.ends_with("_pop"),
                sqrt: name.starts_with("stddev"),
            }
        }
        "median" | "approx_median" | "percentile_cont" | "approx_percentile_cont" => {
            let q = if name.ends_with("median") {
                0.5
            } else {
                p.args
                    .get(1)
                    .and_then(|e| match strip_alias(e) {
                        Expr::Literal(v, _) => v.cast_to(&DataType::Float64).ok(),
                        _ => None,
                    })
                    .and_then(|v| match v {
                        ScalarValue::Float64(Some(q)) if (0.0..=1.0).contains(&q) => Some(q),
                        _ => None,
                    })
                    .ok_or_else(|| refuse("the quantile must be a constant in [0, 1]"))?
            };
            // WITHIN GROUP (ORDER BY x DESC) counts q from the top, as DataFusion does (its
            // planner makes the ordered expression the value).
            let q = match p.order_by.first() {
                Some(sort) if !sort.asc => 1.0 - q,
                _ => q,
            };
            let (value, range, _) = value(arg.ok_or_else(|| refuse("needs an argument"))?)?;
            Kind::Quantile { value, range, q }
        }
        "min" | "max" => {
            return Err(refuse(
                "one unit moves a MIN or MAX arbitrarily far; use QUANTILE(x, 0.0) or \
                 QUANTILE(x, 1.0) over the declared bounds instead",
            ));
        }
        _ => {
            return Err(refuse(
                "no DP version of this aggregate: COUNT(*), COUNT(x), COUNT(DISTINCT unit), \
                 SUM, AVG, VARIANCE, STDDEV, MEDIAN and QUANTILE are released",
            ));
        }
    };
    if !p.order_by.is_empty() && !matches!(kind, Kind::Quantile { .. }) {
        return Err(refuse("an ordered aggregate (ORDER BY inside it)"));
    }
    Ok(kind)
}

/// `e` without its aliases.
pub(crate) fn strip_alias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => strip_alias(&a.expr),
        other => other,
    }
}

/// Histogram bins of a GROUP BY expression over one bounded column.
fn histogram(g: &Expr, column_range: &dyn Fn(&Expr) -> Option<Range>, input: &Rel) -> Option<Keys> {
    let columns = g.column_refs();
    let [c] = columns.into_iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    let c = Expr::Column(c.clone());
    let range = column_range(&c)?;
    let i = input.index_of(&c)?;
    let o = input.lineage[i].as_ref()?;
    Some(Keys::Bins {
        column: format!("{}.{}", o.table, o.column),
        values: bins(g, range, input.plan.schema().field(i).data_type())?,
    })
}

/// `SELECT DISTINCT column FROM table` of a public table.
fn distinct_values(rw: &Rewriter<'_>, table: &str, column: &str) -> Result<LogicalPlan> {
    let source = rw
        .sources
        .get(table)
        .ok_or_else(|| SqlError::input(format!("table {table} was not given")))?;
    LogicalPlanBuilder::scan(table, Arc::clone(source), None)
        .and_then(|b| {
            b.aggregate(
                vec![Expr::Column(Column::new(Some(table), column))],
                Vec::<Expr>::new(),
            )
        })
        .and_then(LogicalPlanBuilder::build)
        .map_err(plan_err)
}

/// The condition `a AND b` (either may be absent) as a flag input of `inputs`; None when both
/// are absent.
fn push_flag(inputs: &mut Vec<(Expr, bool)>, a: Option<Expr>, b: Option<&Expr>) -> Option<usize> {
    let flag = match (a, b.cloned()) {
        (Some(a), Some(b)) => a.and(b),
        (a, b) => a.or(b)?,
    };
    inputs.push((flag, true));
    Some(inputs.len() - 1)
}

/// Whether values of type `t` are equal to SQL exactly when their bytes are, as a unit id's
/// must be (the bounding keys units by their bytes): integers, decimals, text, binary,
/// booleans, dates and times, or a dictionary of those. Not floats (0.0 = -0.0 to SQL), not
/// intervals (one month and 30 days), not nested types (which may hold either).
fn compares_by_bytes(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(_, values) => compares_by_bytes(values),
        DataType::Interval(_) => false,
        t => {
            t.is_integer()
                || t.is_decimal()
                || t.is_temporal()
                || matches!(
                    t,
                    DataType::Null
                        | DataType::Boolean
                        | DataType::Utf8
                        | DataType::LargeUtf8
                        | DataType::Utf8View
                        | DataType::Binary
                        | DataType::LargeBinary
                        | DataType::BinaryView
                        | DataType::FixedSizeBinary(_)
                )
        }
    }
}

/// The contribution rows: the unit, the group values and the inputs, for rows with a unit.
fn contribution_rows(
    input: &Rel,
    group_expr: &[Expr],
    inputs: &[(Expr, bool)],
) -> Result<LogicalPlan> {
    let unit = input.column(input.unit.columns()[0]);
    let unit_type = unit.get_type(input.plan.schema()).map_err(plan_err)?;
    if !compares_by_bytes(&unit_type) {
        return Err(SqlError::refused(
            format!("the privacy unit {unit} ({unit_type})"),
            "a unit id holding floating-point values (or a nested or interval type, which may) \
             is one unit to SQL and two to the bounding when it is 0.0 and -0.0, so one person \
             could count twice; declare the column an integer or text",
        ));
    }
    let mut exprs = vec![unit.clone().alias("__unit")];
    exprs.extend(
        group_expr
            .iter()
            .enumerate()
            .map(|(i, g)| strip_alias(g).clone().alias(format!("__g{i}"))),
    );
    exprs.extend(
        inputs
            .iter()
            .enumerate()
            .map(|(i, (e, _))| e.clone().alias(format!("__x{i}"))),
    );
    let filtered =
        Filter::try_new(unit.is_not_null(), Arc::new(input.plan.clone())).map_err(plan_err)?;
    Ok(LogicalPlan::Projection(
        Projection::try_new(exprs, Arc::new(LogicalPlan::Filter(filtered))).map_err(plan_err)?,
    ))
}

/// An empty table with the schema `output` (an aggregate's released cells or a public side,
/// filled later), and the plan that reads it under `output`'s own (qualified) column names.
pub(crate) fn empty_table(
    rw: &mut Rewriter<'_>,
    what: &str,
    output: &DFSchemaRef,
) -> Result<(Arc<MemTable>, LogicalPlan)> {
    let fields: Vec<Field> = output
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| Field::new(format!("c{i}"), f.data_type().clone(), f.is_nullable()))
        .collect();
    let table =
        Arc::new(MemTable::try_new(Arc::new(Schema::new(fields)), vec![vec![]]).map_err(plan_err)?);
    let name = rw.fresh(what);
    let exprs: Vec<Expr> = (0..output.fields().len())
        .map(|i| {
            let (qualifier, field) = output.qualified_field(i);
            Expr::Column(Column::new(Some(name.as_str()), format!("c{i}")))
                .alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    let plan = LogicalPlanBuilder::scan(
        name.as_str(),
        provider_as_source(Arc::clone(&table) as Arc<dyn datafusion::catalog::TableProvider>),
        None,
    )
    .and_then(|b| b.project(exprs))
    .and_then(LogicalPlanBuilder::build)
    .map_err(plan_err)?;
    Ok((table, plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_type_holding_floats_is_not_taken_to_compare_by_bytes() {
        let dict = |v: DataType| DataType::Dictionary(Box::new(DataType::Int32), Box::new(v));
        let float = Arc::new(Field::new("x", DataType::Float64, true));
        for t in [
            DataType::Int64,
            DataType::UInt8,
            DataType::Utf8,
            DataType::Utf8View,
            DataType::Decimal128(10, 2),
            DataType::Date32,
            dict(DataType::Utf8),
        ] {
            assert!(compares_by_bytes(&t), "{t}");
        }
        for t in [
            DataType::Float64,
            DataType::Float16,
            dict(DataType::Float32),
            DataType::List(float.clone()),
            DataType::Struct(vec![float].into()),
            DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano),
        ] {
            assert!(!compares_by_bytes(&t), "{t}");
        }
    }
}
