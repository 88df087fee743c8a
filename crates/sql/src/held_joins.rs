//! Joins of private rows with rows held in memory build their table from the held rows.
//!
//! DataFusion's hash join builds its table from its first input, then reads the second, and
//! with an empty table never reads the second. The public side of a join with private rows is
//! computed before the charge and held in memory ([`crate::public_side`]); built from the
//! private rows, the join would read the held rows, all of them, only when some private row
//! passed the query's filter, and its time would tell whether any did. And a memory limit makes
//! DataFusion join with sort-merge joins (its hash join does not spill), which sort each input
//! when they first read it and stop reading one input once the other has run out: the held
//! side would be sorted, its memory taken, only when private rows reach the join, and whether
//! the query fails under the limit would tell whether any did.
//!
//! So a join with one input that reads only tables held in memory (stored public sides,
//! released cells: never private rows, which are read from files) and another that reads files
//! becomes a hash join built from the held input, which it reads in full first, the same for
//! every table. The held rows are already counted against the limit, and the table built on
//! them is reserved in the same memory pool. (A null-aware anti-join, `NOT IN`, has no
//! mirrored form in DataFusion and keeps its order.) Done on the physical plan, after
//! DataFusion's logical optimizer has ordered the joins.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::datasource::memory::{DataSourceExec, MemorySourceConfig};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode, SortMergeJoinExec};
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;

/// The physical optimizer rule (see the module docs); placed after DataFusion's join selection
/// and before its rules that add the sorts and exchanges each operator needs.
#[derive(Debug, Default)]
pub(crate) struct HeldJoins;

impl PhysicalOptimizerRule for HeldJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let joined = if let Some(join) = node.downcast_ref::<HashJoinExec>() {
                match held(join.left(), join.right()) {
                    Some(Side::Second) if !join.null_aware => {
                        Some(join.swap_inputs(*join.partition_mode())?)
                    }
                    _ => None,
                }
            } else if let Some(join) = node.downcast_ref::<SortMergeJoinExec>() {
                match held(join.left(), join.right()) {
                    Some(side) => {
                        let hash = HashJoinExec::try_new(
                            Arc::clone(join.left()),
                            Arc::clone(join.right()),
                            join.on().to_vec(),
                            join.filter().clone(),
                            &join.join_type(),
                            None,
                            PartitionMode::CollectLeft,
                            join.null_equality(),
                            false,
                        )?;
                        Some(match side {
                            Side::First => Arc::new(hash) as Arc<dyn ExecutionPlan>,
                            Side::Second => hash.swap_inputs(PartitionMode::CollectLeft)?,
                        })
                    }
                    None => None,
                }
            } else {
                None
            };
            Ok(match joined {
                Some(plan) => Transformed::yes(plan),
                None => Transformed::no(node),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "dpml_held_joins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// One of a join's two inputs.
enum Side {
    First,
    Second,
}

/// The input of a join that reads only rows held in memory while the other reads files.
fn held(first: &Arc<dyn ExecutionPlan>, second: &Arc<dyn ExecutionPlan>) -> Option<Side> {
    match (held_in_memory(first), held_in_memory(second)) {
        (true, false) => Some(Side::First),
        (false, true) => Some(Side::Second),
        _ => None,
    }
}

/// Whether every row `plan` reads comes from memory (a stored table, constants), none from a
/// file.
fn held_in_memory(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let children = plan.children();
    if children.is_empty() {
        return plan.is::<EmptyExec>()
            || plan.is::<PlaceholderRowExec>()
            || plan
                .downcast_ref::<DataSourceExec>()
                .is_some_and(|d| d.data_source().is::<MemorySourceConfig>());
    }
    children.into_iter().all(held_in_memory)
}

/// DataFusion's physical optimizer rules with [`HeldJoins`] placed after its join selection.
pub(crate) fn rules() -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
    let selection = datafusion::physical_optimizer::join_selection::JoinSelection::new();
    let at = rules
        .iter()
        .position(|r| r.name() == selection.name())
        .map_or(0, |i| i + 1);
    rules.insert(at, Arc::new(HeldJoins));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Limits;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::catalog::MemTable;
    use datafusion::physical_plan::displayable;
    use datafusion::prelude::CsvReadOptions;

    #[test]
    fn joins_with_rows_in_memory_are_hash_joins_built_from_them() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("rows.csv");
        std::fs::write(&csv, "k,v\n1,2\n3,4\n").unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let held = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(vec![1, 2]))],
        )
        .unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        for memory in [None, Some(64 << 20)] {
            let limits = Limits {
                memory,
                spill_dir: None,
            };
            let ctx = crate::engine::session(&limits, false).unwrap();
            let table = MemTable::try_new(Arc::clone(&schema), vec![vec![held.clone()]]).unwrap();
            runtime.block_on(async {
                ctx.register_table("held", Arc::new(table)).unwrap();
                let path = csv.to_str().unwrap();
                ctx.register_csv("rows", path, CsvReadOptions::new())
                    .await
                    .unwrap();
                ctx.register_csv("more", path, CsvReadOptions::new())
                    .await
                    .unwrap();
                let plan = |sql: &'static str| {
                    let ctx = ctx.clone();
                    async move {
                        let df = ctx.sql(sql).await.unwrap();
                        let physical = df.clone().create_physical_plan().await.unwrap();
                        let text = displayable(physical.as_ref()).indent(true).to_string();
                        (text, df.count().await.unwrap())
                    }
                };
                for (sql, rows) in [
                    ("SELECT * FROM rows r JOIN held h ON h.k = r.k", 1),
                    ("SELECT * FROM held h JOIN rows r ON h.k = r.k", 1),
                    ("SELECT * FROM rows r LEFT JOIN held h ON h.k = r.k", 2),
                    (
                        "SELECT * FROM rows r WHERE EXISTS (SELECT 1 FROM held h WHERE h.k = r.k)",
                        1,
                    ),
                    (
                        "SELECT * FROM rows r WHERE NOT EXISTS (SELECT 1 FROM held h WHERE \
                         h.k = r.k)",
                        1,
                    ),
                ] {
                    let (text, n) = plan(sql).await;
                    // The held rows (a memory source) are the hash join's first input.
                    let memory = text.find("partition_sizes").unwrap();
                    let file = text.find("file_groups").unwrap();
                    assert!(
                        text.contains("HashJoinExec") && memory < file,
                        "{memory:?}: {sql}\n{text}"
                    );
                    assert_eq!(n, rows, "{sql}");
                }
                // Two inputs read from files keep DataFusion's choice.
                let (text, n) = plan("SELECT * FROM rows r JOIN more m ON r.k = m.k").await;
                assert_eq!(text.contains("SortMergeJoin"), memory.is_some(), "{text}");
                assert_eq!(n, 2);
            });
        }
    }
}
