//! Under a memory limit, joins of private rows with rows held in memory stay hash joins.
//!
//! A memory limit makes DataFusion join with sort-merge joins, which spill (its hash join
//! does not). A sort-merge join sorts each input when it first reads it and stops reading one
//! input once the other has run out. Joined to a public side that dpml computed and stored
//! before the charge (or to released cells), that side would then be sorted, its memory taken
//! and its rows compared only when some private row reaches the join: whether the query fails
//! under the limit, and how long it takes, would tell whether any did.
//!
//! So a sort-merge join whose first input reads only tables held in memory — never private
//! rows, which are read from files — becomes a hash join built from that input. The hash join
//! reads its first input in full before the second, whatever the private rows; the public
//! rows are already held (and counted against the limit), and the table built on them is
//! reserved in the same memory pool. The rewrite puts a stored public side first
//! ([`crate::rewrite`]).

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

/// The physical optimizer rule (see the module docs); placed before DataFusion's rules that
/// add the sorts and exchanges each operator needs.
#[derive(Debug, Default)]
pub(crate) struct HeldJoins;

impl PhysicalOptimizerRule for HeldJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<SortMergeJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            if !held_in_memory(join.left()) {
                return Ok(Transformed::no(node));
            }
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
            Ok(Transformed::yes(Arc::new(hash) as Arc<dyn ExecutionPlan>))
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
    fn under_a_memory_limit_only_joins_with_rows_in_memory_become_hash_joins() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("rows.csv");
        std::fs::write(&csv, "k,v\n1,2\n3,4\n").unwrap();
        let limits = Limits {
            memory: Some(64 << 20),
            spill_dir: None,
        };
        let ctx = crate::engine::session(&limits, false).unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let held = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(vec![1, 2]))],
        )
        .unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            ctx.register_table(
                "held",
                Arc::new(MemTable::try_new(schema, vec![vec![held]]).unwrap()),
            )
            .unwrap();
            let options = CsvReadOptions::new();
            ctx.register_csv("rows", csv.to_str().unwrap(), options.clone())
                .await
                .unwrap();
            ctx.register_csv("more", csv.to_str().unwrap(), options)
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
            let (text, n) = plan("SELECT * FROM held h JOIN rows r ON h.k = r.k").await;
            assert!(
                text.contains("HashJoinExec") && !text.contains("SortMergeJoin"),
                "{text}"
            );
            assert_eq!(n, 1);
            let (text, n) = plan("SELECT * FROM held h RIGHT SEMI JOIN rows r ON h.k = r.k").await;
            assert!(text.contains("HashJoinExec"), "{text}");
            assert_eq!(n, 1);
            let (text, n) = plan("SELECT * FROM rows r JOIN more m ON r.k = m.k").await;
            assert!(text.contains("SortMergeJoin"), "{text}");
            assert_eq!(n, 2);
        });
    }
}
