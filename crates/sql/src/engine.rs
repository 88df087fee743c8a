//! A DP SQL engine over a set of tables: parse and plan with DataFusion, rewrite
//! (`rewrite`), calibrate (`calibrate`), read and bound the private rows
//! (`contribute`), release (`release`), charge the ledger, and run the rest
//! of the query on the released cells.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::concat;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::provider_as_source;
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::logical_expr::{AggregateUDF, Expr, LogicalPlan, TableSource};
use datafusion::optimizer::decorrelate_predicate_subquery::DecorrelatePredicateSubquery;
use datafusion::optimizer::eliminate_cross_join::EliminateCrossJoin;
use datafusion::optimizer::eliminate_filter::EliminateFilter;
use datafusion::optimizer::eliminate_join::EliminateJoin;
use datafusion::optimizer::eliminate_limit::EliminateLimit;
use datafusion::optimizer::eliminate_outer_join::EliminateOuterJoin;
use datafusion::optimizer::extract_equijoin_predicate::ExtractEquijoinPredicate;
use datafusion::optimizer::filter_null_join_keys::FilterNullJoinKeys;
use datafusion::optimizer::propagate_empty_relation::PropagateEmptyRelation;
use datafusion::optimizer::push_down_filter::PushDownFilter;
use datafusion::optimizer::replace_distinct_aggregate::ReplaceDistinctWithAggregate;
use datafusion::optimizer::scalar_subquery_to_join::ScalarSubqueryToJoin;
use datafusion::optimizer::simplify_expressions::SimplifyExpressions;
use datafusion::optimizer::{Optimizer, OptimizerRule};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{Statement, TableFactor, Visit, Visitor};
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use dpml_accounting::PrivacyEvent;
use dpml_accounting::ledger::{Ledger, Spend};
use dpml_data::table_decl::TableDecl;
use dpml_mechanisms::DpRng;
use futures::StreamExt;

use crate::aggregate::DpAggregate;
use crate::calibrate::{Calibration, Part, Split, calibrate};
use crate::catalog::Catalog;
use crate::cluster::Cluster;
use crate::contribute::{BoundSpec, Bounder, Totals, merge};
use crate::error::{Result, SqlError, out_of_memory, plan_err};
use crate::explain::Explanation;
use crate::keys::cross_product;
use crate::memory::Limits;
use crate::percentile::Unsimplified;
use crate::preaggregate;
use crate::progress::{Progress, Stage};
use crate::release::{Noise, Released, release};
use crate::result::{DpResult, Report};
use crate::rewrite::{Rewriter, subquery_plan};
use crate::rowid::{KeyedHash, RowId};

/// A query's privacy parameters.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// ε of the whole query.
    pub epsilon: f64,
    /// δ of the whole query (0: pure ε-DP; private group keys need δ > 0).
    pub delta: f64,
    /// How ε is split across the aggregates.
    pub split: Split,
}

/// The SQL text with a leading `EXPLAIN DP` removed, and whether it was there.
pub fn strip_explain(sql: &str) -> (bool, &str) {
    let word = |s: &str| -> (String, usize) {
        let s_trim = skip_comments(s);
        let start = s.len() - s_trim.len();
        // A word ends where a character of a name does not follow (white space, a comment).
        let end = s_trim
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s_trim.len());
        (s_trim[..end].to_ascii_lowercase(), start + end)
    };
    let (first, after_first) = word(sql);
    let (second, after_second) = word(&sql[after_first..]);
    if first == "explain" && second == "dp" {
        (true, sql[after_first + after_second..].trim_start())
    } else {
        (false, sql)
    }
}

/// `s` after its leading white space and SQL comments (`-- …` lines, `/* … */` blocks).
fn skip_comments(s: &str) -> &str {
    let mut rest = s.trim_start();
    loop {
        if let Some(line) = rest.strip_prefix("--") {
            rest = line
                .split_once('\n')
                .map_or("", |(_, after)| after)
                .trim_start();
        } else if rest.starts_with("/*") {
            rest = after_block_comment(rest).trim_start();
        } else {
            return rest;
        }
    }
}

/// `s` (which starts with `/*`) after its block comment, which nests as the SQL parser's do
/// (`/* a /* b */ c */` is one comment); "" when it does not end.
fn after_block_comment(s: &str) -> &str {
    let mut depth = 0usize;
    let mut at = 0;
    while at < s.len() {
        if s[at..].starts_with("/*") {
            depth += 1;
            at += 2;
        } else if s[at..].starts_with("*/") {
            depth -= 1;
            at += 2;
            if depth == 0 {
                return &s[at..];
            }
        } else {
            at += s[at..].chars().next().map_or(1, char::len_utf8);
        }
    }
    ""
}

/// A query prepared for release: the post-processing plan with its placeholders, and the DP
/// aggregates that fill them.
pub(crate) struct Prepared {
    pub outer: LogicalPlan,
    pub aggregates: Vec<DpAggregate>,
    /// The public key columns of each aggregate (None: private keys).
    pub keys: Vec<Option<Vec<ArrayRef>>>,
    pub calibration: Calibration,
    /// The public sides that read released cells, computed once those are released.
    pub pending: Vec<crate::public_side::Pending>,
}

/// A DP SQL engine over a set of tables.
pub struct Engine {
    ctx: SessionContext,
    catalog: Catalog,
    sources: HashMap<String, Arc<dyn TableSource>>,
    runtime: tokio::runtime::Runtime,
    limits: Limits,
    cluster: Option<Cluster>,
    progress: Arc<Progress>,
}

/// The tokio runtime queries run on.
pub(crate) fn query_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| SqlError::internal(format!("cannot start the query runtime: {e}")))
}

/// A DataFusion session under `limits` (memory pool, spill folder, join choice), whose plans
/// a Ballista cluster can run when `for_cluster`.
pub(crate) fn session(limits: &Limits, for_cluster: bool) -> Result<SessionContext> {
    let config = SessionConfig::new()
        .with_information_schema(false)
        // The analyser's own rule set is kept; statistics never answer an aggregate here
        // (DP aggregates are not DataFusion aggregates), but collecting them is not needed.
        .with_collect_statistics(false);
    let config = if for_cluster {
        Cluster::configure(config)
    } else if limits.memory.is_none() {
        // A hash join builds its table once from its first input and every partition of the
        // other reads it as it comes: repartitioning both sides by the join key would copy
        // each row of the probe side (the 6 million line items of TPC-H's Q1 on their way to
        // their orders' customers) once more. Measured: Q1's DP run some 20% faster, and the
        // plain joins of Q3, Q5 and Q10 too. (Under a memory limit joins are sort-merge
        // joins, which need both sides partitioned by the key.)
        config.with_repartition_joins(false)
    } else {
        config
    };
    let state = SessionStateBuilder::new()
        .with_config(limits.configure(config))
        .with_runtime_env(limits.runtime()?)
        .with_default_features()
        .with_physical_optimizer_rules(crate::held_joins::rules())
        .build();
    Ok(SessionContext::new_with_state(state))
}

impl Engine {
    /// An engine over the `given` tables (name, path), declared by `tables` (the schema's
    /// `[tables.NAME]`).
    ///
    /// # Errors
    /// [`SqlError::Input`] for a table that cannot be read, a declaration that does not fit
    /// its table, or a foreign key that does not resolve.
    pub fn new(tables: &BTreeMap<String, TableDecl>, given: &[(String, PathBuf)]) -> Result<Self> {
        Self::with_limits(tables, given, Limits::unlimited())
    }

    /// [`Engine::new`] whose queries run under `limits`: in a memory pool of that size,
    /// spilling to disk (see [`crate::memory`]).
    ///
    /// # Errors
    /// As [`Engine::new`].
    pub fn with_limits(
        tables: &BTreeMap<String, TableDecl>,
        given: &[(String, PathBuf)],
        limits: Limits,
    ) -> Result<Self> {
        Self::build(tables, given, limits, None)
    }

    /// [`Engine::new`] whose private rows are read on the Apache Ballista cluster whose
    /// scheduler is at `address` (`HOST:PORT`); see [`crate::cluster`]. Its scheduler and
    /// executors must read the tables at the same paths.
    ///
    /// # Errors
    /// As [`Engine::new`]; [`SqlError::Input`] for an address that is not `HOST:PORT`.
    pub fn on_cluster(
        tables: &BTreeMap<String, TableDecl>,
        given: &[(String, PathBuf)],
        address: &str,
    ) -> Result<Self> {
        Self::build(tables, given, Limits::unlimited(), Some(address))
    }

    /// [`Engine::with_limits`], or [`Engine::on_cluster`] with a `cluster` address: what a
    /// front's options ask for.
    ///
    /// # Errors
    /// As those; [`SqlError::Input`] for a memory limit together with a cluster (the
    /// executors run under their own memory).
    pub fn open(
        tables: &BTreeMap<String, TableDecl>,
        given: &[(String, PathBuf)],
        limits: Limits,
        cluster: Option<&str>,
    ) -> Result<Self> {
        if cluster.is_some() && limits.memory.is_some() {
            return Err(SqlError::input(
                "--memory-limit cannot be combined with --cluster (the cluster's executors run \
                 under their own memory)",
            ));
        }
        Self::build(tables, given, limits, cluster)
    }

    fn build(
        tables: &BTreeMap<String, TableDecl>,
        given: &[(String, PathBuf)],
        limits: Limits,
        cluster: Option<&str>,
    ) -> Result<Self> {
        let runtime = query_runtime()?;
        let ctx = session(&limits, cluster.is_some())?;
        let cluster = cluster
            .map(|address| runtime.block_on(Cluster::connect(address)))
            .transpose()?;
        // The SQL names dpml accepts that DataFusion spells otherwise: QUANTILE(x, q) is its
        // percentile_cont(x, q) (kept as written: see `percentile`), VARIANCE(x) its var(x)
        // (the sample variance).
        if let Ok(f) = ctx.udaf("percentile_cont") {
            let quantile = Unsimplified(f.as_ref().clone().with_aliases(["quantile"]));
            ctx.register_udaf(AggregateUDF::new_from_impl(quantile));
        }
        if let Ok(f) = ctx.udaf("var") {
            ctx.register_udaf(f.as_ref().clone().with_aliases(["variance"]));
        }
        let mut names: Vec<&String> = given.iter().map(|(n, _)| n).collect();
        names.sort();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(SqlError::input(format!("table {} is given twice", w[0])));
        }
        let mut schemas = Vec::new();
        runtime.block_on(async {
            for (name, path) in given {
                let decl = tables.get(name);
                let private = !decl.is_some_and(|d| d.public);
                let schema = crate::tables::register(&ctx, name, path, decl, private).await?;
                schemas.push((name.clone(), schema));
            }
            Ok::<_, SqlError>(())
        })?;
        let catalog = Catalog::new(tables, &schemas)?;
        let mut sources = HashMap::new();
        for (name, _) in given {
            let provider = runtime
                .block_on(ctx.table_provider(name.as_str()))
                .map_err(plan_err)?;
            sources.insert(name.clone(), provider_as_source(provider));
        }
        Ok(Self {
            ctx,
            catalog,
            sources,
            runtime,
            limits,
            cluster,
            progress: Arc::default(),
        })
    }

    /// The counters of the query this engine runs (or ran last): read them from another
    /// thread to show progress.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// The memory limit, in bytes (None: none).
    pub fn memory_limit(&self) -> Option<u64> {
        self.limits.memory.map(|m| m as u64)
    }

    /// Parses, plans, rewrites and calibrates `sql`; reads only public tables (for the key
    /// sets of their columns).
    pub(crate) fn prepare(&self, sql: &str, request: &Request, key: KeyedHash) -> Result<Prepared> {
        let plan = self.logical_plan(sql)?;
        let row_id = RowId::new(key);
        let mut rw = Rewriter::new(&self.catalog, &self.sources, &row_id, request.delta);
        rw.store_public_sides = self.cluster.is_none();
        let outer = rw.query(&plan)?;
        let aggregates = std::mem::take(&mut rw.aggregates);
        if aggregates.is_empty() {
            return Err(SqlError::refused(
                "a query without an aggregate of private rows",
                "nothing in it is released under differential privacy: as planned, it reads no \
                 private rows (only public tables, or behind a filter that is always false); \
                 run it with any SQL engine",
            ));
        }
        if let Some(cluster) = &self.cluster {
            // Both before the charge: an address typed wrong, or a table the cluster cannot
            // read, costs nothing, and neither depends on the rows.
            cluster.reachable()?;
            for a in &aggregates {
                crate::cluster::check_shippable(&a.rows)?;
            }
        }
        let keys = aggregates
            .iter()
            .map(|a| self.public_keys(a))
            .collect::<Result<Vec<_>>>()?;
        let counts: Vec<Option<usize>> = keys
            .iter()
            .map(|k| k.as_ref().map(|cols| cols.first().map_or(1, |c| c.len())))
            .collect();
        let released: Vec<_> = aggregates
            .iter()
            .zip(&counts)
            .map(|(a, n)| (Arc::clone(&a.released) as Arc<dyn TableProvider>, *n))
            .collect();
        let measured =
            crate::public_side::check(&rw.public_sides, &released, self.memory_limit(), |plan| {
                self.collect(plan)
            })?;
        // Every aggregate reads the private rows again: the work bound holds for the query,
        // all its aggregates together (64 aggregates each at the bound would take 64 times it).
        let mut work = 0usize;
        for a in &aggregates {
            let longest = |table: &Arc<dyn TableProvider>, i: usize| measured.longest(table, i);
            let own = crate::total::composed_text(&a.rows, &longest)
                .map_err(|(construct, reason)| SqlError::refused(construct, reason))?;
            work = work.saturating_add(own);
        }
        crate::public_side::check_work(measured.repeats, work)?;
        let split = by_column(&request.split, &outer, &aggregates)?;
        let calibration = calibrate(&aggregates, &counts, request.epsilon, request.delta, &split)?;
        Ok(Prepared {
            outer,
            aggregates,
            keys,
            calibration,
            pending: measured.pending,
        })
    }

    /// The DataFusion plan of one SELECT statement, analysed (types coerced), with the
    /// rewrites that expose its joins and subqueries and keep its expressions as written.
    fn logical_plan(&self, sql: &str) -> Result<LogicalPlan> {
        let state = self.ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        if let Some(tokens_of) = dialect_from_str(dialect) {
            crate::size::check(sql, tokens_of.as_ref())?;
        }
        let statement = state.sql_to_statement(sql, &dialect).map_err(plan_err)?;
        match &statement {
            DfStatement::Statement(s) if s.visit(&mut TableSample).is_break() => {
                return Err(SqlError::refused(
                    "TABLESAMPLE",
                    "DataFusion reads every row of a sampled table, so the sample would not be \
                     the one asked for; sample the file before, or leave it out",
                ));
            }
            DfStatement::Statement(s) => crate::folding::check(s)?,
            _ => {}
        }
        match &statement {
            DfStatement::Statement(s) if matches!(s.as_ref(), Statement::Query(_)) => {}
            other => {
                return Err(SqlError::refused(
                    first_words(&other.to_string()),
                    "only a SELECT query is answered (no COPY, INSERT, CREATE, SET, EXPLAIN or \
                     other statement)",
                ));
            }
        }
        let plan = self
            .runtime
            .block_on(state.statement_to_plan(statement))
            .map_err(planning_err)?;
        let plan = state
            .analyzer()
            .execute_and_check(plan, state.config_options(), |_, _| {})
            .map_err(planning_err)?;
        crate::in_subquery::check(&plan)?;
        // Not the default optimizer: common-subexpression elimination and projection pushdown
        // would hide aggregate arguments behind generated columns, and distinct-to-group-by
        // would turn COUNT(DISTINCT unit) into two aggregates.
        let rules: Vec<Arc<dyn OptimizerRule + Send + Sync>> = vec![
            Arc::new(SimplifyExpressions::new()),
            Arc::new(ReplaceDistinctWithAggregate::new()),
            Arc::new(EliminateJoin::new()),
            Arc::new(DecorrelatePredicateSubquery::new()),
            Arc::new(ScalarSubqueryToJoin::new()),
            Arc::new(ExtractEquijoinPredicate::new()),
            Arc::new(EliminateFilter::new()),
            Arc::new(EliminateCrossJoin::new()),
            Arc::new(EliminateLimit::new()),
            Arc::new(PropagateEmptyRelation::new()),
            Arc::new(FilterNullJoinKeys::default()),
            Arc::new(EliminateOuterJoin::new()),
            Arc::new(PushDownFilter::new()),
        ];
        let plan = Optimizer::with_rules(rules)
            .optimize(plan, &state, |_, _| {})
            .map_err(planning_err)?;
        let reads_private =
            |p: &LogicalPlan| crate::rewrite::private_table_in(p, &self.sources, &self.catalog);
        refuse_unrunnable(&plan, &|p| reads_private(p).is_some())?;
        refuse_repeated_names(&plan)?;
        Ok(plan)
    }

    /// The public key columns of `agg` (cross product of its groups' key sets), or None.
    fn public_keys(&self, agg: &DpAggregate) -> Result<Option<Vec<ArrayRef>>> {
        if !agg.public_keys() {
            return Ok(None);
        }
        let run_public = |plan: &LogicalPlan| -> Result<ArrayRef> {
            let batches = self.collect(plan.clone())?;
            let schema = plan.schema().inner().clone();
            let arrays: Vec<&dyn datafusion::arrow::array::Array> =
                batches.iter().map(|b| b.column(0).as_ref()).collect();
            if arrays.is_empty() {
                return Ok(datafusion::arrow::array::new_empty_array(
                    schema.field(0).data_type(),
                ));
            }
            concat(&arrays).map_err(SqlError::internal)
        };
        let sets = agg
            .groups
            .iter()
            .map(|g| {
                g.keys
                    .values(&g.data_type, &run_public)?
                    .ok_or_else(|| SqlError::internal("public keys expected"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(cross_product(&sets)?))
    }

    /// Runs a plan over public data (or released cells) to the end.
    fn collect(&self, plan: LogicalPlan) -> Result<Vec<RecordBatch>> {
        // What runs here is computed without noise: the rewrite refuses private rows in it
        // where it finds them, and this guard catches any place it would not.
        if let Some(table) = crate::rewrite::private_table_in(&plan, &self.sources, &self.catalog) {
            return Err(SqlError::refused(
                format!(
                    "a subquery on table {table} in a part of the query computed without noise"
                ),
                "only aggregates in FROM, WHERE … IN and EXISTS are rewritten to DP; aggregate \
                 the private rows in a FROM subquery of their own",
            ));
        }
        let (ctx, limit) = (self.ctx.clone(), self.memory_limit());
        // On a worker thread, where a panic of the engine's (a value too large for arrow,
        // say) ends the task, not the process.
        let task = self.runtime.spawn(async move {
            let df = ctx.execute_logical_plan(plan).await.map_err(plan_err)?;
            df.collect()
                .await
                .map_err(|e| out_of_memory(&e, limit).unwrap_or_else(|| plan_err(e)))
        });
        self.runtime
            .block_on(task)
            .map_err(|e| SqlError::input(format!("the engine failed: {e}")))?
    }

    /// What `sql` would release and cost, without reading a private row.
    ///
    /// # Errors
    /// As [`Engine::run`], except those of reading private rows and of the ledger.
    pub fn explain(&self, sql: &str, request: &Request) -> Result<Explanation> {
        let (_, sql) = strip_explain(sql);
        if strip_explain(sql).0 {
            return Err(SqlError::refused(
                "EXPLAIN DP EXPLAIN DP",
                "the prefix is given twice: give it once",
            ));
        }
        let mut rng = DpRng::from_os()?;
        let prepared = self.prepare(sql, request, KeyedHash::draw(&mut rng))?;
        Ok(Explanation::new(&prepared, &self.catalog))
    }

    /// Answers `sql` under (ε, δ) with noise from `rng`: reads the private rows once, bounds
    /// every unit's contributions, draws the noise once per released cell, charges `ledger`
    /// before anything is returned, and runs the rest of the query on the released cells.
    ///
    /// # Errors
    /// [`SqlError::Refused`] for a construct the rewrite does not accept (before any row is
    /// read); [`SqlError::Input`] for bad tables, parameters or data; [`SqlError::Ledger`]
    /// when the ledger refuses the spend (nothing is returned).
    pub fn run(
        &self,
        sql: &str,
        request: &Request,
        rng: &mut DpRng,
        ledger: Option<&Ledger>,
    ) -> Result<DpResult> {
        self.run_with(sql, request, &mut Noise::new(rng), ledger)
    }

    /// [`Engine::run`] with the noise source given (tests switch it off).
    pub(crate) fn run_with(
        &self,
        sql: &str,
        request: &Request,
        noise: &mut Noise<'_>,
        ledger: Option<&Ledger>,
    ) -> Result<DpResult> {
        if strip_explain(sql).0 {
            return Err(SqlError::refused(
                "EXPLAIN DP",
                "it asks what the query would release and cost, which is not a release: ask \
                 for the explanation (dpml sql --explain, dpml.sql_explain)",
            ));
        }
        self.progress.start();
        // The secret key of the bounding hashes, drawn before any noise.
        let key = KeyedHash::draw(noise.rng());
        let result = self
            .prepare(sql, request, key)
            .and_then(|prepared| self.release_all(sql, &prepared, key, noise, ledger));
        self.progress.set_stage(Stage::Done);
        result
    }

    /// The exact totals, the noise, the charge and the post-processing of a prepared query.
    pub(crate) fn release_all(
        &self,
        sql: &str,
        prepared: &Prepared,
        key: KeyedHash,
        noise: &mut Noise<'_>,
        ledger: Option<&Ledger>,
    ) -> Result<DpResult> {
        // Recorded before the first private row is read, so that a query that would overspend
        // reads none, and a query that fails while reading them (whether it fails can depend
        // on them: a memory limit one unit's rows push it past) has paid for what it told.
        let balance = ledger.map(|l| l.spend(&spend(sql, prepared))).transpose()?;
        let paid = |e: SqlError| match balance {
            Some(_) => e.after_charge(),
            None => e,
        };
        // Aggregate by aggregate, in the order they were found (a subquery's before the query
        // around it): an aggregate's private rows may be joined to cells released before it.
        let mut warnings = Vec::new();
        let mut filled_bytes = 0;
        for i in 0..prepared.aggregates.len() {
            let agg = &prepared.aggregates[i];
            for pending in prepared.pending.iter().filter(|p| {
                p.side.stored.as_ref().is_some_and(|(table, _)| {
                    let table = Arc::clone(table) as Arc<dyn TableProvider>;
                    crate::public_side::scans_any(&agg.rows, &[&table])
                })
            }) {
                crate::public_side::fill(pending, &mut filled_bytes, |plan| self.collect(plan))
                    .map_err(paid)?;
            }
            let totals = self
                .aggregate_totals(prepared, i, key, self.limits.memory.is_some())
                .map_err(paid)?;
            self.progress.set_stage(Stage::Releasing);
            let r: Released = release(
                agg,
                &prepared.calibration.aggregates[i],
                prepared.keys[i].clone(),
                totals,
                agg.released.schema(),
                noise,
            )
            .map_err(paid)?;
            *agg.released.batches[0]
                .try_write()
                .map_err(|_| SqlError::internal("the released table is busy"))? = vec![r.batch];
            warnings.extend(r.warnings);
        }
        self.progress.set_stage(Stage::Finishing);
        let batches = self.collect(prepared.outer.clone()).map_err(paid)?;
        Ok(DpResult::new(
            prepared.outer.schema().inner().clone(),
            batches,
            Report::new(prepared, &self.catalog, warnings, balance),
            noise.draws,
        ))
    }

    /// The exact bounded totals of aggregate `i` of a prepared query (reads its private rows),
    /// pre-aggregated per (unit, group) in DataFusion where the parts allow it and
    /// `pre_aggregate` is set. The bounder's own interning adds up unsorted rows faster than
    /// DataFusion's aggregation can pre-aggregate them; under a memory limit the rows are
    /// sorted by unit (the sort spills), and pre-aggregating first shrinks what is sorted
    /// (tests compare both ways).
    pub(crate) fn aggregate_totals(
        &self,
        prepared: &Prepared,
        i: usize,
        key: KeyedHash,
        pre_aggregate: bool,
    ) -> Result<Totals> {
        let (agg, cal) = (&prepared.aggregates[i], &prepared.calibration.aggregates[i]);
        self.progress.set_stage(Stage::Reading {
            aggregate: i + 1,
            of: prepared.aggregates.len(),
        });
        let parts: Vec<Part> = cal.measures.iter().flat_map(|m| m.parts.clone()).collect();
        let spec = BoundSpec {
            group_types: agg.groups.iter().map(|g| g.data_type.clone()).collect(),
            key_filter: prepared.keys[i]
                .as_ref()
                .map(|k| key_rows(agg, k))
                .transpose()?,
            states: (pre_aggregate && preaggregate::possible(&parts))
                .then(|| preaggregate::state_columns(&parts)),
            parts,
            max_groups: cal.max_groups,
            max_rows: agg.max_rows,
            hash: key,
        };
        self.exact_totals(agg, Arc::new(spec))
    }

    /// Reads `agg`'s contribution rows (pre-aggregated per (unit, group) where `spec` says
    /// so), partitioned by a hash of the unit so that each unit is bounded in one place, and
    /// adds up the bounded contributions per group. Under a memory limit each partition's rows
    /// are sorted by unit first (the sort spills to disk), so that a bounder holds one unit's
    /// state at a time.
    fn exact_totals(&self, agg: &DpAggregate, spec: Arc<BoundSpec>) -> Result<Totals> {
        let tables = agg.tables.iter().cloned().collect::<Vec<_>>().join(", ");
        let partitions = self.ctx.state().config().target_partitions().max(1);
        let rows = match spec.states {
            Some(_) => preaggregate::plan(agg.rows.clone(), agg.groups.len(), &spec.parts)?,
            None => agg.rows.clone(),
        };
        // On a cluster the rows come back as one stream, bounded here as one partition.
        let (physical, task) = match &self.cluster {
            Some(cluster) => self.runtime.block_on(cluster.plan(&rows))?,
            None => {
                let state = self.ctx.state();
                let physical = self
                    .runtime
                    .block_on(state.create_physical_plan(&rows))
                    .map_err(plan_err)?;
                // Under a memory limit the rows are sorted as one stream instead (below):
                // a split's buffers would compete with the sort for the limit.
                let physical = match self.limits.memory {
                    None => split_by_unit(physical, partitions)?,
                    Some(_) => physical,
                };
                (physical, state.task_ctx())
            }
        };
        let unit_type = physical.schema().field(0).data_type().clone();
        let sorted = self.limits.memory.is_some();
        let physical = if sorted {
            sort_by_unit(physical)
        } else {
            physical
        };
        let limit = self.memory_limit();
        let cluster = self.cluster.as_ref().map(Cluster::address);
        let read_err = move |tables: &str, e: &datafusion::error::DataFusionError| match &cluster {
            Some(address) => Cluster::failed(address, e),
            None => out_of_memory(e, limit).unwrap_or_else(|| SqlError::data(tables, e)),
        };
        let run = async {
            let streams = if by_unit(&physical) {
                (0..physical.output_partitioning().partition_count())
                    .map(|i| physical.execute(i, Arc::clone(&task)))
                    .collect::<datafusion::error::Result<Vec<_>>>()
            } else {
                // Units are not known to be split by partition: read them as one stream.
                datafusion::physical_plan::execute_stream(Arc::clone(&physical), Arc::clone(&task))
                    .map(|s| vec![s])
            }
            .map_err(|e| read_err(&tables, &e))?;
            let mut handles = Vec::new();
            for mut stream in streams {
                let spec = Arc::clone(&spec);
                let unit_type = unit_type.clone();
                let tables = tables.clone();
                let pool = Arc::clone(task.memory_pool());
                let read_err = read_err.clone();
                handles.push(tokio::spawn(async move {
                    let mut bounder = Bounder::new(spec, &unit_type, sorted, &pool)?;
                    while let Some(batch) = stream.next().await {
                        bounder.push(&batch.map_err(|e| read_err(&tables, &e))?)?;
                    }
                    bounder.finish()
                }));
            }
            let mut totals = Totals::new();
            for h in handles {
                let part = h
                    .await
                    .map_err(|e| SqlError::internal(format!("a bounding task failed: {e}")))??;
                merge(&mut totals, part)?;
            }
            Ok(totals)
        };
        // The scans' and spills' metrics, read a few times a second while the rows are read.
        let progress = &self.progress;
        let result = crate::progress::watching(
            |stop| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    progress.observe(&physical);
                    std::thread::park_timeout(std::time::Duration::from_millis(200));
                }
            },
            || self.runtime.block_on(run),
        );
        self.progress.finish_plan(&physical);
        result
    }
}

/// An error of the analyser or optimizer; two columns that became one expression named
/// (DataFusion reports only a duplicate field).
fn planning_err(e: datafusion::error::DataFusionError) -> SqlError {
    use datafusion::common::SchemaError;
    use datafusion::error::DataFusionError;
    if let DataFusionError::SchemaError(error, _) = e.find_root()
        && let SchemaError::DuplicateUnqualifiedField { name } = error.as_ref()
    {
        return SqlError::refused(
            format!("two columns that are both {name}"),
            "they are the same expression once simplified (a cast to the type a column already \
             has is dropped): compute it once",
        );
    }
    plan_err(e)
}

/// The plan's rows split into `partitions` streams by a hash of column 0 (the unit), so that
/// each unit is bounded in one place while the streams are bounded in parallel. Added after
/// DataFusion's optimizer, which drops a repartition that no operator above it asks for.
fn split_by_unit(
    plan: Arc<dyn ExecutionPlan>,
    partitions: usize,
) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::repartition::RepartitionExec;
    if by_unit(&plan) {
        return Ok(plan);
    }
    let unit = Arc::new(Column::new(plan.schema().field(0).name(), 0));
    let split = RepartitionExec::try_new(
        plan,
        datafusion::physical_plan::Partitioning::Hash(vec![unit], partitions),
    )
    .map_err(SqlError::internal)?;
    Ok(Arc::new(split))
}

/// The plan's rows sorted by column 0 (the unit) within each partition that it splits by unit
/// (otherwise as one sorted partition).
fn sort_by_unit(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::sorts::sort::SortExec;
    let schema = plan.schema();
    let unit = PhysicalSortExpr::new_default(Arc::new(Column::new(schema.field(0).name(), 0)));
    let ordering = LexOrdering::new([unit]).expect("one sort expression");
    if by_unit(&plan) {
        Arc::new(SortExec::new(ordering, plan).with_preserve_partitioning(true))
    } else {
        Arc::new(SortExec::new(
            ordering,
            Arc::new(CoalescePartitionsExec::new(plan)),
        ))
    }
}

/// Whether the plan's output partitions split the rows by a hash of column 0 (the unit), so
/// that no unit spans two partitions.
fn by_unit(plan: &Arc<dyn ExecutionPlan>) -> bool {
    use datafusion::physical_expr::expressions::Column;
    match plan.output_partitioning() {
        datafusion::physical_plan::Partitioning::Hash(exprs, _) => {
            exprs.len() == 1
                && exprs[0]
                    .downcast_ref::<Column>()
                    .is_some_and(|c| c.index() == 0)
        }
        p => p.partition_count() == 1,
    }
}

/// The row encodings of the public keys (the bounder keeps only rows in these groups).
fn key_rows(agg: &DpAggregate, keys: &[ArrayRef]) -> Result<std::collections::HashSet<Vec<u8>>> {
    if agg.groups.is_empty() {
        return Ok(std::collections::HashSet::from([Vec::new()]));
    }
    let conv = datafusion::arrow::row::RowConverter::new(
        agg.groups
            .iter()
            .map(|g| datafusion::arrow::row::SortField::new(g.data_type.clone()))
            .collect(),
    )
    .map_err(SqlError::internal)?;
    let rows = conv.convert_columns(keys).map_err(SqlError::internal)?;
    Ok(rows.iter().map(|r| r.data().to_vec()).collect())
}

/// What the query costs, as a ledger spend: its aggregates' events composed, on the private
/// tables it reads. Checked before any private row is read and recorded (durably) before
/// anything derived from the noise is returned; over budget, nothing is released.
fn spend(sql: &str, prepared: &Prepared) -> Spend {
    let cal = &prepared.calibration;
    let event = match cal.events.as_slice() {
        [one] => one.clone(),
        many => PrivacyEvent::Composed {
            events: many.to_vec(),
        },
    };
    let tables: std::collections::BTreeSet<&str> = prepared
        .aggregates
        .iter()
        .flat_map(|a| a.tables.iter().map(String::as_str))
        .collect();
    let dataset = tables.into_iter().collect::<Vec<_>>().join("+");
    Spend::of("sql", dataset, event, cal.epsilon, cal.delta)
        .labelled(format!("sql: {}", first_words(sql)))
}

/// The start of a statement, on one line, for labels and messages.
fn first_words(sql: &str) -> String {
    const MAX: usize = 120;
    let one_line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX {
        one_line
    } else {
        format!("{}…", one_line.chars().take(MAX).collect::<String>())
    }
}

/// `split` with each weight keyed by its aggregate's column: a weight names the result's
/// column (`n` in `COUNT(*) AS n`), or the aggregate as DataFusion names it.
fn by_column(split: &Split, outer: &LogicalPlan, aggregates: &[DpAggregate]) -> Result<Split> {
    let names = crate::result::final_names(outer);
    let columns: Vec<(&str, &str)> = aggregates
        .iter()
        .flat_map(|a| &a.measures)
        .map(|m| {
            let shown = names.get(&m.column).unwrap_or(&m.column);
            (m.column.as_str(), shown.as_str())
        })
        .collect();
    let mut weights = BTreeMap::new();
    for (name, w) in &split.weights {
        if !(w.is_finite() && *w > 0.0) {
            return Err(SqlError::input(format!(
                "the weight of {name} must be finite and > 0, got {w}"
            )));
        }
        let Some((column, _)) = columns
            .iter()
            .find(|(column, shown)| shown == name || column == name)
        else {
            let shown: Vec<&str> = columns.iter().map(|(_, s)| *s).collect();
            return Err(SqlError::input(format!(
                "a weight is given for {name}, which is not an aggregate of the query (its \
                 aggregates: {})",
                shown.join(", ")
            )));
        };
        // Weights are kept by the aggregate's own column: two aggregates of one name (the same
        // COUNT(*) in two subqueries) would both take it, silently.
        if columns.iter().filter(|(c, _)| c == column).count() > 1 {
            return Err(SqlError::input(format!(
                "a weight is given for {name}, but the query has several aggregates computed as \
                 {column}, which a weight cannot tell apart: give them even weights, or compute \
                 them in one SELECT under names of their own"
            )));
        }
        weights.insert(column.to_string(), *w);
    }
    Ok(Split { weights })
}

/// Finds a `TABLESAMPLE` anywhere in a statement.
struct TableSample;

impl Visitor for TableSample {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match factor {
            TableFactor::Table {
                sample: Some(_), ..
            }
            | TableFactor::Derived {
                sample: Some(_), ..
            } => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    }
}

/// Refuses what DataFusion plans but cannot run, anywhere in the plan and its subqueries: a
/// subquery its optimizer could not turn into a join (its physical planner runs none; one
/// over private rows is left to the rewriter, which says why it mixes units or reads them
/// without noise), a reference to an outer query's column left after decorrelation (a
/// `LATERAL` subquery in FROM), a parameter (`$1`: nothing binds it). Found out after the
/// charge, it would charge a query that never could run.
fn refuse_unrunnable(
    plan: &LogicalPlan,
    reads_private: &dyn Fn(&LogicalPlan) -> bool,
) -> Result<()> {
    let mut found = None;
    plan.apply_with_subqueries(|node| {
        for e in node.expressions() {
            e.apply(|e| {
                found = match e {
                    e if subquery_plan(e).is_some_and(reads_private) => None,
                    e if subquery_plan(e).is_some() => Some(SqlError::refused(
                        "a subquery DataFusion cannot turn into a join",
                        "DataFusion runs a subquery only once its optimizer has made it a join, \
                         and it could not here: write it as a join (… JOIN (SELECT …) p ON …, or \
                         IN (SELECT …) in WHERE)",
                    )),
                    Expr::OuterReferenceColumn(_, c) => Some(SqlError::refused(
                        format!("a reference to the outer query's column {c}"),
                        "DataFusion cannot run a subquery in FROM that refers to the query \
                         around it (LATERAL): join the tables instead",
                    )),
                    Expr::Placeholder(p) => Some(SqlError::refused(
                        &p.id,
                        "a query parameter: nothing binds it to a value; write the value",
                    )),
                    _ => None,
                };
                Ok(stop_once(&found))
            })?;
        }
        Ok(stop_once(&found))
    })
    .map_err(plan_err)?;
    found.map_or(Ok(()), Err)
}

/// Stops a walk once it has found what it looked for.
fn stop_once<T>(found: &Option<T>) -> TreeNodeRecursion {
    if found.is_some() {
        TreeNodeRecursion::Stop
    } else {
        TreeNodeRecursion::Continue
    }
}

/// Refuses a result with two columns of one name (`a.n, b.n`): rows are released as
/// name → value, where one would hide the other.
fn refuse_repeated_names(plan: &LogicalPlan) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for field in plan.schema().fields() {
        if !seen.insert(field.name()) {
            return Err(SqlError::refused(
                format!("two result columns named {}", field.name()),
                "each released column is named once: name them apart with AS",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_dp_is_stripped() {
        assert_eq!(strip_explain("EXPLAIN DP SELECT 1"), (true, "SELECT 1"));
        assert!(strip_explain("  explain  dp\nSELECT 1").0);
        assert_eq!(
            strip_explain("EXPLAIN SELECT 1"),
            (false, "EXPLAIN SELECT 1")
        );
        assert_eq!(strip_explain("SELECT 1"), (false, "SELECT 1"));
        // After comments (a query file's header).
        assert_eq!(
            strip_explain("-- q.sql\n/* a */ EXPLAIN /* b */ DP SELECT 1"),
            (true, "SELECT 1")
        );
        assert!(!strip_explain("-- only a comment").0);
        // Block comments nest, as the parser's do: the prefix here is inside one.
        assert!(!strip_explain("/* a /* b */ EXPLAIN DP */ SELECT 1").0);
        assert_eq!(
            strip_explain("/* a /* b */ c */ EXPLAIN DP SELECT 1"),
            (true, "SELECT 1")
        );
        assert!(!strip_explain("/* /* unclosed */ EXPLAIN DP SELECT 1").0);
        // A comment touching a word ends it, as white space does.
        assert_eq!(
            strip_explain("EXPLAIN DP/**/SELECT 1"),
            (true, "/**/SELECT 1")
        );
        assert!(strip_explain("explain/* a */dp SELECT 1").0);
        assert!(!strip_explain("EXPLAINDP SELECT 1").0);
        assert!(!strip_explain("EXPLAIN DPX SELECT 1").0);
    }
}
