//! The DP rewrite of a query's logical plan: an allow-list walk that carries each row's privacy
//! unit up from the scans, refuses what it cannot bound, and cuts the plan at each aggregate
//! of private rows (a *DP aggregate*) into the rows that aggregate reads (contribution rows:
//! unit, group values, aggregate inputs) and a placeholder table the released cells fill.
//!
//! # How the unit is carried
//! Every relation in the private part knows, for each of its rows, which unit the row belongs
//! to ([`Unit`]): the id is in some of its columns, or it is *pending*: the row holds a foreign
//! key to a table whose rows carry the unit (lineitem's `l_orderkey` → orders). A join along
//! that foreign key resolves it for free (the query joins orders anyway); otherwise the rewrite
//! joins the foreign key's target in just before the aggregate. Projections keep the unit
//! column (appended when the query drops it), filters and aliases pass it through.
//!
//! # What is refused, and why
//! - A join of two private relations that does not equate their units (directly or along the
//!   declared foreign key): one output row could mix two units' rows.
//! - An outer join that keeps public rows for which no private row matches, and a semi-join
//!   that filters public rows by private ones: whether a public row appears depends on private
//!   rows, and no unit owns it.
//! - A window (`OVER`), a `LIMIT`, a `UNION` or an `UNNEST` on private rows, a subquery on
//!   private rows left inside an expression, volatile functions (`random()`) on private rows,
//!   and any statement but a query.
//! - Private rows reaching the result without an aggregate.
//!
//! An aggregate grouped by the unit (or by a foreign key that carries it) is a per-unit
//! transformation: each output row is computed from one unit's rows, so its result is still
//! private rows of that unit (TPC-H Q13's per-customer order count).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, JoinType, ScalarValue};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{
    Expr, Filter, Join, LogicalPlan, LogicalPlanBuilder, Projection, SubqueryAlias,
    TableScanBuilder, TableSource, when,
};

use crate::aggregate::DpAggregate;
use crate::aggregate::empty_table;
use crate::catalog::{Catalog, UnitSource};
use crate::error::{Result, SqlError, plan_err};
use crate::public_side::PublicSide;
use crate::rowid::RowId;

/// Where a relation's rows get their privacy unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Public rows, no unit.
    Public,
    /// The unit's id is in each of these output columns (equal on every row).
    Columns(Vec<usize>),
    /// The unit is that of the row of `table` whose `key` equals each of the `fks` columns.
    Pending {
        fks: Vec<usize>,
        table: String,
        key: String,
    },
}

impl Unit {
    fn is_private(&self) -> bool {
        !matches!(self, Unit::Public)
    }

    /// The columns that hold the unit's id or the foreign key to it.
    pub(crate) fn columns(&self) -> &[usize] {
        match self {
            Unit::Public => &[],
            Unit::Columns(c) => c,
            Unit::Pending { fks, .. } => fks,
        }
    }

    fn with_columns(&self, columns: Vec<usize>) -> Unit {
        match self {
            Unit::Public => Unit::Public,
            Unit::Columns(_) => Unit::Columns(columns),
            Unit::Pending { table, key, .. } => Unit::Pending {
                fks: columns,
                table: table.clone(),
                key: key.clone(),
            },
        }
    }
}

/// A base-table column that an output column copies unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub table: String,
    pub column: String,
}

/// A rewritten relation and what the rewrite knows about it.
#[derive(Debug, Clone)]
pub(crate) struct Rel {
    pub plan: LogicalPlan,
    pub unit: Unit,
    /// Per output column, the base column it copies (None for computed columns).
    pub lineage: Vec<Option<Origin>>,
    /// The private tables read.
    pub tables: BTreeSet<String>,
    /// At most this many rows per unit (known after an aggregate grouped by the unit alone).
    pub rows_per_unit: Option<u64>,
    /// Base columns with at most one row per value here: targets of declared foreign keys
    /// (unique by the schema's declaration), as long as no join has repeated their rows.
    pub unique: Vec<Origin>,
}

/// Each column of a scan of `table` as its own origin.
fn origins(table: &str, schema: &datafusion::common::DFSchema) -> Vec<Option<Origin>> {
    schema
        .fields()
        .iter()
        .map(|f| {
            Some(Origin {
                table: table.to_string(),
                column: f.name().clone(),
            })
        })
        .collect()
}

impl Rel {
    fn public(plan: LogicalPlan) -> Rel {
        let n = plan.schema().fields().len();
        Rel {
            plan,
            unit: Unit::Public,
            lineage: vec![None; n],
            tables: BTreeSet::new(),
            rows_per_unit: None,
            unique: Vec::new(),
        }
    }

    /// The output column at `i`, as an expression.
    pub(crate) fn column(&self, i: usize) -> Expr {
        Expr::Column(Column::from(self.plan.schema().qualified_field(i)))
    }

    /// The index of `expr` in the output when it is a plain column (through aliases).
    pub(crate) fn index_of(&self, expr: &Expr) -> Option<usize> {
        match expr {
            Expr::Column(c) => self.plan.schema().index_of_column(c).ok(),
            Expr::Alias(a) => self.index_of(&a.expr),
            _ => None,
        }
    }
}

/// The rewrite of one query.
pub(crate) struct Rewriter<'a> {
    pub catalog: &'a Catalog,
    /// Every table given, by name (for the foreign-key joins the rewrite adds).
    pub sources: &'a HashMap<String, Arc<dyn TableSource>>,
    /// The row-id function of tables whose rows are their own units.
    pub row_id: &'a RowId,
    /// δ > 0: private group keys may be released by a noisy threshold.
    pub delta: f64,
    /// The DP aggregates found, in the order their placeholders were made.
    pub aggregates: Vec<DpAggregate>,
    /// The public relations joined to private rows (measured before the charge).
    pub public_sides: Vec<PublicSide>,
    /// Whether the private rows are joined to a stored copy of each public side, computed in
    /// full before any private row is read (false on a cluster, whose executors read tables
    /// by their paths).
    pub store_public_sides: bool,
    names: usize,
}

impl<'a> Rewriter<'a> {
    pub(crate) fn new(
        catalog: &'a Catalog,
        sources: &'a HashMap<String, Arc<dyn TableSource>>,
        row_id: &'a RowId,
        delta: f64,
    ) -> Self {
        Self {
            catalog,
            sources,
            row_id,
            delta,
            aggregates: Vec::new(),
            public_sides: Vec::new(),
            store_public_sides: true,
            names: 0,
        }
    }

    /// A name no query uses.
    pub(crate) fn fresh(&mut self, what: &str) -> String {
        self.names += 1;
        format!("__dpml_{what}_{}", self.names)
    }

    /// The whole query: its result must be public (private rows only leave through DP
    /// aggregates).
    pub(crate) fn query(&mut self, plan: &LogicalPlan) -> Result<LogicalPlan> {
        let rel = self.rewrite(plan)?;
        if rel.unit.is_private() {
            return Err(SqlError::refused(
                format!(
                    "SELECT of private rows of {}",
                    rel.tables.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
                "only aggregates (COUNT, SUM, AVG, …) of private rows are released; the query \
                 returns rows",
            ));
        }
        // Every private scan is now inside a DP aggregate's contribution rows: one left in the
        // plan that runs on the released cells (a subquery inside an expression, which the
        // walk above does not enter) would be read without noise.
        if let Some(table) = self.private_table_in(&rel.plan) {
            return Err(SqlError::refused(
                format!("a subquery on table {table} inside an expression"),
                "only aggregates in FROM, WHERE … IN and EXISTS are rewritten to DP; this \
                 subquery would read the private rows without noise: aggregate in FROM \
                 instead (SELECT n FROM (SELECT COUNT(*) AS n FROM …) t)",
            ));
        }
        Ok(rel.plan)
    }

    /// The first table that `plan` reads, subqueries included, that is given and not public.
    fn private_table_in(&self, plan: &LogicalPlan) -> Option<String> {
        private_table_in(plan, self.sources, self.catalog)
    }

    /// Rewrites `plan`, returning it with what is known of its rows.
    pub(crate) fn rewrite(&mut self, plan: &LogicalPlan) -> Result<Rel> {
        match plan {
            LogicalPlan::TableScan(scan) => self.scan(scan),
            LogicalPlan::Projection(p) => self.projection(p),
            LogicalPlan::Filter(f) => {
                let input = self.rewrite(&f.input)?;
                if input.unit.is_private() {
                    check_private_exprs(
                        std::slice::from_ref(&f.predicate),
                        f.input.schema(),
                        "WHERE",
                        self,
                    )?;
                }
                let plan = LogicalPlan::Filter(
                    Filter::try_new(f.predicate.clone(), Arc::new(input.plan.clone()))
                        .map_err(plan_err)?,
                );
                Ok(Rel { plan, ..input })
            }
            LogicalPlan::SubqueryAlias(a) => {
                let input = self.rewrite(&a.input)?;
                let plan = LogicalPlan::SubqueryAlias(
                    SubqueryAlias::try_new(Arc::new(input.plan.clone()), a.alias.clone())
                        .map_err(plan_err)?,
                );
                Ok(Rel { plan, ..input })
            }
            LogicalPlan::Sort(s) => {
                let input = self.rewrite(&s.input)?;
                if input.unit.is_private() && s.fetch.is_some() {
                    return Err(refuse_rows("ORDER BY … LIMIT", &input));
                }
                if input.unit.is_private() {
                    let keys: Vec<Expr> = s.expr.iter().map(|k| k.expr.clone()).collect();
                    check_private_exprs(&keys, s.input.schema(), "ORDER BY", self)?;
                }
                let plan = with_inputs(plan, vec![input.plan.clone()])?;
                Ok(Rel { plan, ..input })
            }
            LogicalPlan::Repartition(_) => {
                let input = self.rewrite(&plan.inputs()[0].clone())?;
                let plan = with_inputs(plan, vec![input.plan.clone()])?;
                Ok(Rel { plan, ..input })
            }
            LogicalPlan::Limit(l) => {
                let input = self.rewrite(&l.input)?;
                if input.unit.is_private() {
                    return Err(refuse_rows("LIMIT", &input));
                }
                Ok(Rel::public(with_inputs(plan, vec![input.plan])?))
            }
            LogicalPlan::Join(j) => self.join(j),
            LogicalPlan::Aggregate(a) => {
                let input = self.rewrite(&a.input)?;
                if !input.unit.is_private() {
                    return Ok(Rel::public(with_inputs(plan, vec![input.plan])?));
                }
                check_private_exprs(&a.group_expr, a.input.schema(), "GROUP BY", self)?;
                check_private_exprs(&a.aggr_expr, a.input.schema(), "an aggregate", self)?;
                match per_unit(&input, &a.group_expr) {
                    Some(positions) => self.per_unit_aggregate(plan, input, positions, a),
                    None => {
                        let input = self.attach_unit(input)?;
                        let placeholder = DpAggregate::build(self, input, a)?;
                        Ok(Rel::public(placeholder))
                    }
                }
            }
            LogicalPlan::Window(w) => {
                let input = self.rewrite(&w.input)?;
                if input.unit.is_private() {
                    let construct = w
                        .window_expr
                        .first()
                        .map_or_else(|| "OVER (…)".to_string(), |e| e.to_string());
                    return Err(SqlError::refused(
                        construct,
                        "a window function (OVER …) on private rows releases a value per row, \
                         each from other units' rows; aggregate with GROUP BY instead",
                    ));
                }
                Ok(Rel::public(with_inputs(plan, vec![input.plan])?))
            }
            LogicalPlan::Values(_) | LogicalPlan::EmptyRelation(_) => Ok(Rel::public(plan.clone())),
            // Its recursive term reads a work table no schema declares, whichever tables the
            // static term reads.
            LogicalPlan::RecursiveQuery(_) => Err(SqlError::refused(
                "WITH RECURSIVE",
                "dpml does not answer recursive queries: how many rows the recursion makes \
                 would depend on the rows it reads, and no unit owns the rows it adds",
            )),
            LogicalPlan::Union(_)
            | LogicalPlan::Distinct(_)
            | LogicalPlan::Unnest(_)
            | LogicalPlan::Subquery(_) => {
                let inputs = plan
                    .inputs()
                    .into_iter()
                    .map(|p| self.rewrite(p))
                    .collect::<Result<Vec<_>>>()?;
                if let Some(private) = inputs.iter().find(|r| r.unit.is_private()) {
                    let what = match plan {
                        LogicalPlan::Union(_) => "UNION",
                        LogicalPlan::Distinct(_) => "DISTINCT",
                        LogicalPlan::Unnest(_) => "UNNEST",
                        _ => "a subquery",
                    };
                    return Err(refuse_rows(what, private));
                }
                Ok(Rel::public(with_inputs(
                    plan,
                    inputs.into_iter().map(|r| r.plan).collect(),
                )?))
            }
            other => Err(SqlError::refused(
                other.display().to_string(),
                "only SELECT queries are answered (no COPY, INSERT, CREATE, SET or EXPLAIN \
                 statements)",
            )),
        }
    }

    /// A table scan: public, or private with its unit column, its foreign key to the unit, or
    /// a row id.
    fn scan(&mut self, scan: &datafusion::logical_expr::TableScan) -> Result<Rel> {
        let name = scan.table_name.table().to_string();
        let info = self.catalog.table(&name)?;
        if info.decl.public {
            // A public table's columns keep their origin: grouping by one releases the
            // table's own values as keys.
            // Checked too: a public value beyond its precision, met by one unit's rows in
            // decimal arithmetic, would fail the query for that unit alone.
            let mut rel = Rel::public(decimals_within_precision(LogicalPlan::TableScan(
                scan.clone(),
            ))?);
            rel.lineage = origins(&name, rel.plan.schema());
            rel.unique = self.referenced(&rel.lineage);
            return Ok(rel);
        }
        if scan.fetch.is_some() {
            return Err(SqlError::refused(
                format!("LIMIT on table {name}"),
                "it picks private rows by their order in the file",
            ));
        }
        let source_schema = scan.source.schema();
        // Filters pushed into the scan run on its rows as a Filter would.
        if !scan.filters.is_empty() {
            let schema =
                DFSchema::try_from_qualified_schema(scan.table_name.clone(), &source_schema)
                    .map_err(plan_err)?;
            check_private_exprs(&scan.filters, &schema, "WHERE", self)?;
        }
        let needed = match &info.unit {
            UnitSource::Column(c) | UnitSource::Via { column: c, .. } => {
                Some(source_schema.index_of(c).map_err(|_| {
                    SqlError::input(format!("table {name} has no column {c} (its privacy unit)"))
                })?)
            }
            UnitSource::Row | UnitSource::Public => None,
        };
        // A scan that reads only some columns (a pushed-down projection) reads the unit's too.
        let plan = match (&scan.projection, needed) {
            (Some(p), Some(i)) if !p.contains(&i) => {
                let mut p = p.clone();
                p.push(i);
                LogicalPlan::TableScan(
                    TableScanBuilder::new(scan.table_name.clone(), Arc::clone(&scan.source))
                        .with_projection(Some(p))
                        .with_filters(scan.filters.clone())
                        .build()
                        .map_err(plan_err)?,
                )
            }
            _ => LogicalPlan::TableScan(scan.clone()),
        };
        let plan = decimals_within_precision(plan)?;
        let schema = plan.schema().clone();
        let lineage = origins(&name, &schema);
        let index = |c: &str| {
            schema.index_of_column_by_name(None, c).ok_or_else(|| {
                SqlError::internal(format!("column {c} of {name} lost from its scan"))
            })
        };
        let unique = self.referenced(&lineage);
        let mut rel = Rel {
            plan,
            unit: Unit::Public,
            lineage,
            tables: BTreeSet::from([name.clone()]),
            rows_per_unit: None,
            unique,
        };
        rel.unit = match &info.unit {
            UnitSource::Column(c) => Unit::Columns(vec![index(c)?]),
            UnitSource::Via { column, table, key } => Unit::Pending {
                fks: vec![index(column)?],
                table: table.clone(),
                key: key.clone(),
            },
            UnitSource::Row => {
                let id = self.row_id.expr(&rel.plan)?;
                let alias = self.fresh("row");
                rel = append(rel, id.alias(alias), None)?;
                Unit::Columns(vec![rel.lineage.len() - 1])
            }
            UnitSource::Public => Unit::Public,
        };
        Ok(rel)
    }

    fn projection(&mut self, p: &Projection) -> Result<Rel> {
        let input = self.rewrite(&p.input)?;
        let mut exprs = p.expr.clone();
        if !input.unit.is_private() {
            let plan = LogicalPlan::Projection(
                Projection::try_new(exprs, Arc::new(input.plan)).map_err(plan_err)?,
            );
            return Ok(Rel::public(plan));
        }
        check_private_exprs(&exprs, p.input.schema(), "SELECT", self)?;
        let mut lineage: Vec<Option<Origin>> = exprs
            .iter()
            .map(|e| input.index_of(e).and_then(|i| input.lineage[i].clone()))
            .collect();
        // The unit's columns that the projection keeps, and the first one appended if none.
        let mut kept: Vec<usize> = Vec::new();
        for (out, e) in exprs.iter().enumerate() {
            if input
                .index_of(e)
                .is_some_and(|i| input.unit.columns().contains(&i))
            {
                kept.push(out);
            }
        }
        if kept.is_empty() {
            let first = input.unit.columns()[0];
            let alias = self.fresh("unit");
            exprs.push(input.column(first).alias(alias));
            lineage.push(input.lineage[first].clone());
            kept.push(exprs.len() - 1);
        }
        let unit = input.unit.with_columns(kept);
        let plan = LogicalPlan::Projection(
            Projection::try_new(exprs, Arc::new(input.plan)).map_err(plan_err)?,
        );
        Ok(Rel {
            plan,
            unit,
            lineage,
            tables: input.tables,
            rows_per_unit: input.rows_per_unit,
            unique: input.unique,
        })
    }

    fn join(&mut self, j: &Join) -> Result<Rel> {
        let left = self.rewrite(&j.left)?;
        let right = self.rewrite(&j.right)?;
        let construct = || {
            let on: Vec<String> = j.on.iter().map(|(l, r)| format!("{l} = {r}")).collect();
            format!(
                "{} JOIN of {} and {} ON {}",
                j.join_type,
                describe(&left),
                describe(&right),
                if on.is_empty() {
                    "(no equality)".to_string()
                } else {
                    on.join(" AND ")
                }
            )
        };
        let (lp, rp) = (left.unit.is_private(), right.unit.is_private());
        // The equalities between a column of each side, and whether each side has at most one
        // row per value of its join columns (then the join repeats no row of the other side).
        let pairs: Vec<(usize, usize)> =
            j.on.iter()
                .filter_map(|(l, r)| Some((left.index_of(l)?, right.index_of(r)?)))
                .collect();
        let one_left = self.at_most_one_match(&left, pairs.iter().map(|p| p.0));
        let one_right = self.at_most_one_match(&right, pairs.iter().map(|p| p.1));
        // The join keys are computed on each side's rows.
        let (left_keys, right_keys): (Vec<Expr>, Vec<Expr>) = j.on.iter().cloned().unzip();
        if lp {
            check_private_exprs(&left_keys, j.left.schema(), "a join key", self)?;
        }
        if rp {
            check_private_exprs(&right_keys, j.right.schema(), "a join key", self)?;
        }
        use JoinType::*;
        let offset = left.lineage.len();
        let shift = |u: &Unit| u.with_columns(u.columns().iter().map(|c| c + offset).collect());
        // The plans the join reads (a public side's stored copy in place of its plan).
        let (mut left_plan, mut right_plan) = (left.plan.clone(), right.plan.clone());
        let unit = match (lp, rp) {
            (false, false) => Unit::Public,
            (true, false) | (false, true) => {
                // Rows of the private side are kept or dropped by public rows only; the public
                // side's rows must not depend on whether private rows match them.
                let private_left = lp;
                let keeps_public = match j.join_type {
                    Inner => false,
                    Left | LeftSemi | LeftAnti | LeftMark => !private_left,
                    Right | RightSemi | RightAnti | RightMark => private_left,
                    Full => true,
                };
                if keeps_public {
                    return Err(SqlError::refused(
                        construct(),
                        "the result keeps or filters rows of a public table by whether private \
                         rows match them, and those rows belong to no unit",
                    ));
                }
                // How often the public side can repeat each private row, and what it
                // computes, are measured on its rows before the charge (see
                // [`crate::public_side`]).
                let (public, public_keys, public_schema) = match private_left {
                    true => (&right, &right_keys, j.right.schema()),
                    false => (&left, &left_keys, j.left.schema()),
                };
                // The public side is computed before the charge, in full: a subquery inside
                // one of its expressions (which the walk above does not enter) must not read
                // private rows.
                if let Some(table) = self.private_table_in(&public.plan) {
                    return Err(SqlError::refused(
                        format!("a subquery on table {table} inside a public side of a join"),
                        "the public side is computed in full, without noise, so this subquery \
                         would read the private rows as they are; aggregate them in a FROM \
                         subquery of their own (… JOIN (SELECT …, COUNT(*) AS n FROM … GROUP BY …) \
                         c ON …)",
                    ));
                }
                // The join computes its keys itself, on the public rows it reads only when
                // private rows reach it: they must be the stored side's own columns.
                if let Some(key) = public_keys.iter().find(|k| !is_column(k, public_schema)) {
                    return Err(SqlError::refused(
                        format!("the join key {key} computed on public rows"),
                        "the join computes it only when private rows reach the join, so \
                         whether it fails, and its time, would tell whether any did; compute \
                         it as a column of the public subquery (JOIN (SELECT f(x) AS k …) p ON \
                         p.k = …, or IN (SELECT f(x) …))",
                    ));
                }
                // A condition beside the keys is evaluated on each pair of matching rows, so a
                // semi- or anti-join with one pairs a private row with its public matches
                // as an inner join repeats it.
                let repeats =
                    matches!(j.join_type, Inner | Left | Right | Full) || j.filter.is_some();
                let stored = match self.store_public_sides {
                    true => Some(empty_table(self, "public", public.plan.schema())?),
                    false => None,
                };
                if let Some((_, reads)) = &stored {
                    match private_left {
                        true => right_plan = reads.clone(),
                        false => left_plan = reads.clone(),
                    }
                }
                self.public_sides.push(PublicSide {
                    plan: public.plan.clone(),
                    stored,
                    keys: repeats.then(|| public_keys.clone()),
                    computed: (0..public.lineage.len())
                        .filter(|&i| public.lineage[i].is_none())
                        .collect(),
                });
                match (private_left, j.join_type) {
                    (true, _) => left.unit.clone(),
                    (false, RightSemi | RightAnti | RightMark) => right.unit.clone(),
                    (false, _) => shift(&right.unit),
                }
            }
            (true, true) => {
                let link = linked(&left, &right, &pairs);
                let multiplies = !matches!(
                    j.join_type,
                    LeftSemi | LeftAnti | LeftMark | RightSemi | RightAnti | RightMark
                );
                // A foreign key resolved against a side whose key is no longer unique (the
                // referenced table joined to rows that repeat it) multiplies as much.
                if matches!(link, Some(Link::Same | Link::Resolves { .. }))
                    && multiplies
                    && !one_left
                    && !one_right
                {
                    return Err(SqlError::refused(
                        construct(),
                        "neither side has at most one row per join key, so a unit with r rows \
                         on each side gets r × r rows, before any bound applies (k such joins: \
                         r to the k); join a per-unit subquery (GROUP BY the unit) or along a \
                         declared foreign key, or test with EXISTS",
                    ));
                }
                match link {
                    Some(link) => match (j.join_type, link) {
                        (Inner, Link::Resolves { right_unit }) => shift(&right_unit),
                        // Both sides' columns hold the same unit on every output row.
                        (Inner, Link::Same)
                            if left.unit.with_columns(vec![])
                                == right.unit.with_columns(vec![]) =>
                        {
                            let mut both = left.unit.columns().to_vec();
                            both.extend(shift(&right.unit).columns());
                            left.unit.with_columns(both)
                        }
                        (Inner | Left | LeftSemi | LeftAnti | LeftMark, _) => left.unit.clone(),
                        (Right, _) => shift(&right.unit),
                        (RightSemi | RightAnti | RightMark, _) => right.unit.clone(),
                        (Full, _) => {
                            return Err(SqlError::refused(
                                construct(),
                                "a FULL JOIN of private tables pads rows of either side with \
                                 NULL, and the padded rows lose their unit",
                            ));
                        }
                    },
                    None => {
                        return Err(SqlError::refused(
                            construct(),
                            "it does not join on the privacy unit or along the declared foreign \
                             key that carries it, so one output row could combine rows of two \
                             units (declare the foreign key, or join on the unit)",
                        ));
                    }
                }
            }
        };
        if let (true, Some(f)) = (lp || rp, &j.filter) {
            // Typed in both inputs' columns: a semi-join's own schema has one side's only.
            let both = j.left.schema().join(j.right.schema()).map_err(plan_err)?;
            check_private_exprs(std::slice::from_ref(f), &both, "a join condition", self)?;
        }
        let plan = LogicalPlan::Join(
            Join::try_new(
                Arc::new(left_plan),
                Arc::new(right_plan),
                j.on.clone(),
                j.filter.clone(),
                j.join_type,
                j.join_constraint,
                j.null_equality,
                j.null_aware,
            )
            .map_err(plan_err)?,
        );
        let n = plan.schema().fields().len();
        let pad = |l: &[Option<Origin>]| -> Vec<Option<Origin>> {
            l.iter()
                .cloned()
                .chain(std::iter::repeat(None))
                .take(n)
                .collect()
        };
        let lineage: Vec<Option<Origin>> = match j.join_type {
            RightSemi | RightAnti | RightMark => pad(&right.lineage),
            LeftSemi | LeftAnti | LeftMark => pad(&left.lineage),
            _ => left
                .lineage
                .iter()
                .chain(right.lineage.iter())
                .cloned()
                .chain(std::iter::repeat(None))
                .take(n)
                .collect(),
        };
        let mut tables = left.tables;
        tables.extend(right.tables);
        // A side's rows stay one per value where each meets at most one row of the other.
        let unique = match j.join_type {
            LeftSemi | LeftAnti | LeftMark => left.unique,
            RightSemi | RightAnti | RightMark => right.unique,
            _ => {
                let mut unique = if one_right { left.unique } else { Vec::new() };
                if one_left {
                    unique.extend(right.unique);
                }
                unique
            }
        };
        Ok(Rel {
            plan,
            unit,
            lineage,
            tables,
            rows_per_unit: None,
            unique,
        })
    }

    /// An aggregate grouped by the unit: per-unit rows, still private.
    fn per_unit_aggregate(
        &mut self,
        plan: &LogicalPlan,
        input: Rel,
        positions: Vec<usize>,
        a: &datafusion::logical_expr::Aggregate,
    ) -> Result<Rel> {
        for e in &a.aggr_expr {
            if let Some((construct, reason)) = crate::total::per_unit_failure(e, a.input.schema()) {
                return Err(SqlError::refused(construct, reason));
            }
        }
        // Grouped by a foreign key that reaches the unit through another table (line items by
        // order), a unit has a row per key it holds, not one; only a key that is the unit's
        // own id (orders by customer) makes one.
        let holds_unit = match &input.unit {
            Unit::Pending { table, key, .. } => self
                .catalog
                .table(table)
                .is_ok_and(|t| matches!(&t.unit, UnitSource::Column(c) if c == key)),
            _ => true,
        };
        let rows_per_unit = (holds_unit && a.group_expr.len() == positions.len()).then_some(1);
        let lineage: Vec<Option<Origin>> = a
            .group_expr
            .iter()
            .map(|e| input.index_of(e).and_then(|i| input.lineage[i].clone()))
            .chain(std::iter::repeat_n(None, a.aggr_expr.len()))
            .collect();
        let unit = input.unit.with_columns(positions);
        let plan = with_inputs(plan, vec![input.plan])?;
        Ok(Rel {
            plan,
            unit,
            lineage,
            tables: input.tables,
            rows_per_unit,
            unique: Vec::new(),
        })
    }

    /// `rel` with its unit in a column: a pending foreign key is joined to the table it
    /// references (recursively, to the table that holds the unit).
    pub(crate) fn attach_unit(&mut self, rel: Rel) -> Result<Rel> {
        let Unit::Pending { fks, table, key } = &rel.unit else {
            return Ok(rel);
        };
        let (map, map_key, map_unit) = self.unit_map(table, key, 0)?;
        let fk = rel.column(fks[0]);
        let width = rel.lineage.len();
        let plan = join_unit_map(rel.plan, map, fk, map_key)?;
        let mut lineage = rel.lineage;
        lineage.resize(plan.schema().fields().len(), None);
        Ok(Rel {
            plan,
            unit: Unit::Columns(vec![width + map_unit]),
            lineage,
            tables: rel.tables,
            rows_per_unit: rel.rows_per_unit,
            // Joined to unique keys: no row is repeated.
            unique: rel.unique,
        })
    }

    /// A relation of (key, unit) for `table`'s rows: its unit column, or recursively the
    /// unit of the table its own foreign key references. Returns the plan, the key column as
    /// an expression and the unit's index in the plan's output.
    fn unit_map(
        &mut self,
        table: &str,
        key: &str,
        depth: usize,
    ) -> Result<(LogicalPlan, Expr, usize)> {
        let info = self.catalog.table(table)?;
        let source = self.sources.get(table).ok_or_else(|| {
            SqlError::input(format!(
                "the privacy unit is reached through table {table}, which was not given (add \
                 --table {table}=PATH)"
            ))
        })?;
        let scan = LogicalPlanBuilder::scan(table, Arc::clone(source), None)
            .and_then(LogicalPlanBuilder::build)
            .map_err(plan_err)?;
        let key_col = Expr::Column(Column::new(Some(table), key));
        let (plan, unit) = match info.unit.clone() {
            UnitSource::Column(c) => (scan, Expr::Column(Column::new(Some(table), c))),
            UnitSource::Row => {
                let id = self.row_id.expr(&scan)?;
                (scan, id)
            }
            UnitSource::Via {
                column,
                table: next,
                key: next_key,
            } if depth < 16 => {
                let (map, map_key, map_unit) = self.unit_map(&next, &next_key, depth + 1)?;
                let fk = Expr::Column(Column::new(Some(table), column));
                let joined = join_unit_map(scan, map, fk, map_key)?;
                let unit = Expr::Column(Column::from(
                    joined
                        .schema()
                        .qualified_field(joined.schema().fields().len() - 2 + map_unit),
                ));
                (joined, unit)
            }
            _ => {
                return Err(SqlError::input(format!(
                    "table {table} carries no privacy unit"
                )));
            }
        };
        let alias = self.fresh("units");
        let (k, u) = (self.fresh("key"), self.fresh("unit"));
        let plan = LogicalPlanBuilder::from(plan)
            .project(vec![key_col.alias(&k), unit.alias(&u)])
            .and_then(|b| b.filter(Expr::Column(Column::from_name(&u)).is_not_null()))
            .and_then(|b| b.alias(alias.as_str()))
            .and_then(LogicalPlanBuilder::build)
            .map_err(plan_err)?;
        let key_expr = Expr::Column(Column::new(Some(alias.as_str()), k));
        Ok((plan, key_expr, 1))
    }
}

/// The first table that `plan` reads, subqueries included, that is among `given` and not
/// public (the released cells' placeholders are not given).
pub(crate) fn private_table_in<T>(
    plan: &LogicalPlan,
    given: &HashMap<String, T>,
    catalog: &Catalog,
) -> Option<String> {
    let mut private = None;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && given.contains_key(scan.table_name.table())
            && !catalog.is_public(scan.table_name.table())
        {
            private = Some(scan.table_name.table().to_string());
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    private
}

/// Whether `e` is a column, or one widened by a cast that cannot fail.
fn is_column(e: &Expr, schema: &datafusion::common::DFSchema) -> bool {
    match e {
        Expr::Column(_) => true,
        Expr::Cast(c) => is_column(&c.expr, schema) && crate::total::failure(e, schema).is_none(),
        // TRY_CAST can fail too: arrow formats a date out of chrono's range as an error.
        Expr::TryCast(c) => {
            is_column(&c.expr, schema) && crate::total::failure(e, schema).is_none()
        }
        _ => false,
    }
}

/// `rows JOIN map ON fk = key`, its columns in that order: the rows' and then the map's. The
/// map (one row per key) is the join's first input, the side DataFusion's hash join builds
/// its table from, so that the rows, often many more (line items to orders), stream past it.
fn join_unit_map(rows: LogicalPlan, map: LogicalPlan, fk: Expr, key: Expr) -> Result<LogicalPlan> {
    let (n_rows, n_map) = (rows.schema().fields().len(), map.schema().fields().len());
    let joined = LogicalPlanBuilder::from(map)
        .join_on(rows, JoinType::Inner, vec![key.eq(fk)])
        .and_then(LogicalPlanBuilder::build)
        .map_err(plan_err)?;
    let columns: Vec<Expr> = (n_map..n_map + n_rows)
        .chain(0..n_map)
        .map(|i| Expr::Column(Column::from(joined.schema().qualified_field(i))))
        .collect();
    LogicalPlanBuilder::from(joined)
        .project(columns)
        .and_then(LogicalPlanBuilder::build)
        .map_err(plan_err)
}

/// How two private relations' units are tied by the join's equalities.
enum Link {
    /// Their units are the same column values (or the same foreign key).
    Same,
    /// The left's pending foreign key meets the referenced table's key on the right, whose
    /// rows carry this unit: an inner join resolves the left's unit.
    Resolves { right_unit: Unit },
}

impl Rewriter<'_> {
    /// Whether each row of the other side of a join meets at most one row of `rel` on the
    /// join columns `on`: `rel` has one row per unit and is joined on its unit, or one of
    /// the columns is unique in `rel` (see [`Rel::unique`]).
    fn at_most_one_match(&self, rel: &Rel, mut on: impl Iterator<Item = usize>) -> bool {
        on.any(|i| {
            (rel.rows_per_unit == Some(1) && rel.unit.columns().contains(&i))
                || rel.lineage[i]
                    .as_ref()
                    .is_some_and(|o| rel.unique.contains(o))
        })
    }

    /// The columns of `lineage` that a declared foreign key references.
    fn referenced(&self, lineage: &[Option<Origin>]) -> Vec<Origin> {
        lineage
            .iter()
            .flatten()
            .filter(|o| self.catalog.is_referenced(&o.table, &o.column))
            .cloned()
            .collect()
    }
}

/// Whether the equi-join `pairs` (left index, right index) tie every output row to one unit.
fn linked(left: &Rel, right: &Rel, pairs: &[(usize, usize)]) -> Option<Link> {
    let on = |l: &[usize], r: &[usize]| pairs.iter().any(|(a, b)| l.contains(a) && r.contains(b));
    let references = |rel: &Rel, i: usize, table: &str, key: &str| {
        rel.lineage[i]
            .as_ref()
            .is_some_and(|o| o.table == table && o.column == key)
    };
    match (&left.unit, &right.unit) {
        (Unit::Columns(a), Unit::Columns(b)) => on(a, b).then_some(Link::Same),
        (
            Unit::Pending {
                fks: a,
                table: t,
                key: k,
            },
            Unit::Pending {
                fks: b,
                table: t2,
                key: k2,
            },
        ) => (t == t2 && k == k2 && on(a, b)).then_some(Link::Same),
        (Unit::Pending { fks, table, key }, Unit::Columns(_)) => pairs
            .iter()
            .any(|(a, b)| fks.contains(a) && references(right, *b, table, key))
            .then(|| Link::Resolves {
                right_unit: right.unit.clone(),
            }),
        (Unit::Columns(_), Unit::Pending { fks, table, key }) => pairs
            .iter()
            .any(|(a, b)| fks.contains(b) && references(left, *a, table, key))
            .then_some(Link::Same),
        _ => None,
    }
}

/// A table's scan with each decimal column read as NULL where its value has more digits than
/// the column's precision, as a CSV value that does not parse is read as NULL.
///
/// Parquet does not enforce a decimal's precision (a `DECIMAL(20, 0)` is stored in 9 bytes,
/// room for 22 digits), and the arithmetic that [`crate::total`] lets run on private rows is
/// total only on values within it: on one beyond, the query would fail for the unit that holds
/// it. Filters pushed into the scan move above the check, so that they see checked values too.
fn decimals_within_precision(plan: LogicalPlan) -> Result<LogicalPlan> {
    let LogicalPlan::TableScan(scan) = &plan else {
        return Ok(plan);
    };
    let schema = plan.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| precision_and_scale(f.data_type()).is_some())
    {
        return Ok(plan);
    }
    let exprs = schema
        .iter()
        .map(|(qualifier, field)| {
            let column = Expr::Column(Column::from((qualifier, field)));
            let Some((precision, scale)) = precision_and_scale(field.data_type()) else {
                return Ok(column);
            };
            // The largest value of `precision` digits at `scale`, as text cast to the type.
            let digits = |n: i32, d: char| std::iter::repeat_n(d, n.max(0) as usize);
            let text: String = if scale > 0 {
                let whole: String = digits(precision - scale, '9').collect();
                let whole = if whole.is_empty() { "0".into() } else { whole };
                format!(
                    "{whole}.{}",
                    digits(scale.min(precision), '9').collect::<String>()
                )
            } else {
                digits(precision, '9').chain(digits(-scale, '0')).collect()
            };
            let max = ScalarValue::Utf8(Some(text))
                .cast_to(field.data_type())
                .map_err(plan_err)?;
            let min = ScalarValue::Utf8(Some(format!("-{max}")))
                .cast_to(field.data_type())
                .map_err(plan_err)?;
            when(
                column
                    .clone()
                    .between(Expr::Literal(min, None), Expr::Literal(max, None)),
                column,
            )
            .end()
            .map(|e| e.alias_qualified(qualifier.cloned(), field.name()))
            .map_err(plan_err)
        })
        .collect::<Result<Vec<_>>>()?;
    let unfiltered = TableScanBuilder::new(scan.table_name.clone(), Arc::clone(&scan.source))
        .with_projection(scan.projection.clone())
        .build()
        .map_err(plan_err)?;
    let mut builder = LogicalPlanBuilder::from(LogicalPlan::TableScan(unfiltered))
        .project(exprs)
        .map_err(plan_err)?;
    if let Some(filter) = conjunction(scan.filters.clone()) {
        builder = builder.filter(filter).map_err(plan_err)?;
    }
    builder.build().map_err(plan_err)
}

/// A decimal type's precision and scale (None for any other type).
fn precision_and_scale(t: &DataType) -> Option<(i32, i32)> {
    match t {
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => Some((i32::from(*p), i32::from(*s))),
        _ => None,
    }
}

/// The output positions of the unit's columns when `group_expr` groups by the unit (or by the
/// foreign key that carries it); None when it does not.
fn per_unit(input: &Rel, group_expr: &[Expr]) -> Option<Vec<usize>> {
    let positions: Vec<usize> = group_expr
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            input
                .index_of(e)
                .is_some_and(|i| input.unit.columns().contains(&i))
        })
        .map(|(p, _)| p)
        .collect();
    (!positions.is_empty()).then_some(positions)
}

/// `plan` with new inputs (same expressions).
pub(crate) fn with_inputs(plan: &LogicalPlan, inputs: Vec<LogicalPlan>) -> Result<LogicalPlan> {
    plan.with_new_exprs(plan.expressions(), inputs)
        .map_err(plan_err)
}

/// `rel` with one more computed column.
fn append(rel: Rel, expr: Expr, origin: Option<Origin>) -> Result<Rel> {
    let mut exprs: Vec<Expr> = (0..rel.lineage.len()).map(|i| rel.column(i)).collect();
    exprs.push(expr);
    let Rel {
        plan,
        unit,
        mut lineage,
        tables,
        rows_per_unit,
        unique,
    } = rel;
    let plan =
        LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(plan)).map_err(plan_err)?);
    lineage.push(origin);
    Ok(Rel {
        plan,
        unit,
        lineage,
        tables,
        rows_per_unit,
        unique,
    })
}

fn describe(rel: &Rel) -> String {
    if rel.tables.is_empty() {
        "public rows".into()
    } else {
        rel.tables.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

fn refuse_rows(construct: &str, rel: &Rel) -> SqlError {
    SqlError::refused(
        format!("{construct} on private rows of {}", describe(rel)),
        "it selects or reshapes private rows by their order or position, not by a bounded \
         per-unit rule; aggregate them instead",
    )
}

/// Expressions on private rows (typed in `schema`): no volatile function (its value would not
/// be a function of the unit's rows: `random()`), no subquery left inside an expression, and
/// nothing that can fail on a row's value ([`crate::total`]).
fn check_private_exprs(
    exprs: &[Expr],
    schema: &DFSchema,
    place: &str,
    rw: &Rewriter<'_>,
) -> Result<()> {
    for e in exprs {
        let mut bad: Option<SqlError> = None;
        e.apply(|node| {
            let refusal = match node {
                Expr::ScalarFunction(f) if node.is_volatile_node() => Some(SqlError::refused(
                    format!("{}() in {place}", f.func.name()),
                    "a volatile function on private rows: its value is not a function of one \
                     unit's rows (dpml draws all randomness itself, once per released cell)",
                )),
                Expr::WindowFunction(w) => Some(SqlError::refused(
                    format!("{} OVER (…)", w.fun),
                    "a window function on private rows releases a value per row",
                )),
                node => match subquery_plan(node) {
                    Some(sub) => subquery_refusal(sub, place, rw),
                    None => crate::total::failure(node, schema).map(|(construct, reason)| {
                        SqlError::refused(format!("{construct} in {place}"), reason)
                    }),
                },
            };
            if refusal.is_some() {
                bad = refusal;
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .map_err(plan_err)?;
        if let Some(e) = bad {
            return Err(e);
        }
    }
    Ok(())
}

/// The plan of a subquery expression (scalar, `IN` or `EXISTS`); `None` for any other.
pub(crate) fn subquery_plan(e: &Expr) -> Option<&LogicalPlan> {
    match e {
        Expr::ScalarSubquery(s) => Some(s.subquery.as_ref()),
        Expr::InSubquery(s) => Some(s.subquery.subquery.as_ref()),
        Expr::Exists(s) => Some(s.subquery.subquery.as_ref()),
        _ => None,
    }
}

/// A subquery left inside an expression over private rows (DataFusion could not turn it into
/// a join): refused. On private tables it mixes units; on public ones it would run only when
/// private rows reach it (it is not computed and stored beforehand as a joined public side
/// is), so its failure or its time would tell whether any did, and DataFusion cannot run
/// some such subqueries at all (`IN` in an aggregate's argument), which it would find out
/// after the charge.
fn subquery_refusal(plan: &LogicalPlan, place: &str, rw: &Rewriter<'_>) -> Option<SqlError> {
    Some(match rw.private_table_in(plan) {
        Some(t) => SqlError::refused(
            format!("a subquery on table {t} in {place}"),
            "a subquery over private rows inside an expression on private rows mixes units \
             (each row's value would depend on other units' rows); write it as a join along \
             the unit, an IN (…) on the unit's foreign key, or its own DP aggregate in FROM",
        ),
        None => SqlError::refused(
            format!("a subquery in {place}"),
            "a subquery left inside an expression on private rows would run only when private \
             rows reach it, so whether it fails, and its time, would tell whether any did; join \
             its rows instead (… JOIN (SELECT …) p ON …, or IN (SELECT …) in WHERE)",
        ),
    })
}
