//! Queries on an Apache Ballista cluster (`--cluster HOST:PORT`).
//!
//! Only the exact part of a DP aggregate leaves this process: the plan of its contribution
//! rows pre-aggregated per (unit, group) (module `preaggregate`: built-in aggregates only,
//! so stock schedulers and executors run it). The executors return one row of exact state per
//! (unit, group); here, as on one machine, each unit's contributions are bounded (the L0
//! choice uses the run's secret key, which never leaves this process), the groups' totals are
//! added exactly and the noise is drawn once per released cell from dpml's generator.
//! Partial aggregates therefore hold exact state only, and a task the cluster runs twice (an
//! executor was lost and its work redone) changes nothing that is released.
//!
//! The scheduler and the executors read the tables from the paths given here: they must see
//! the same files (one machine, or a shared file system). Tables the cluster cannot read from
//! a path (CSV, read here as a stream that no malformed row can fail) and tables whose rows
//! are their own privacy units (their unit is a keyed hash under the secret key) are refused
//! before the query is charged.

use std::sync::Arc;

use ballista::prelude::SessionContextExt;
use datafusion::common::tree_node::TreeNode;
use datafusion::datasource::listing::ListingTable;
use datafusion::datasource::source_as_provider;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::error::{Result, SqlError, plan_err};

/// A Ballista scheduler and the client session that sends it plans.
pub(crate) struct Cluster {
    address: Arc<str>,
    ctx: SessionContext,
}

impl Cluster {
    /// A client of the scheduler at `address` (`HOST:PORT`). Nothing is sent until a query
    /// runs: an unreachable scheduler is reported then.
    pub(crate) async fn connect(address: &str) -> Result<Self> {
        check_address(address)?;
        let ctx = SessionContext::remote(&format!("df://{address}"))
            .await
            .map_err(|e| SqlError::input(format!("cluster {address}: {}", e.strip_backtrace())))?;
        Ok(Self {
            address: address.into(),
            ctx,
        })
    }

    /// The session settings the plans sent to a cluster are built under: Ballista's executors
    /// read strings as `Utf8`, not as views, and a plan must describe the rows they produce.
    pub(crate) fn configure(config: SessionConfig) -> SessionConfig {
        config
            .set_bool(
                "datafusion.execution.parquet.schema_force_view_types",
                false,
            )
            .set_bool("datafusion.sql_parser.map_string_types_to_utf8view", false)
    }

    /// The distributed physical plan of `plan` and the task context to run it in.
    pub(crate) async fn plan(
        &self,
        plan: &LogicalPlan,
    ) -> Result<(Arc<dyn ExecutionPlan>, Arc<TaskContext>)> {
        let state = self.ctx.state();
        let physical = state.create_physical_plan(plan).await.map_err(plan_err)?;
        Ok((physical, state.task_ctx()))
    }

    /// The scheduler's address.
    pub(crate) fn address(&self) -> Arc<str> {
        Arc::clone(&self.address)
    }

    /// The error of a query the cluster at `address` failed to run. Ballista's own message
    /// shows only as what kind of failure it was (a scheduler out of reach, executors lost):
    /// a task's error can quote a private value.
    pub(crate) fn failed(address: &str, e: &datafusion::error::DataFusionError) -> SqlError {
        let msg = e.to_string();
        let what = if msg.contains("GrpcConnectionError") || msg.contains("onnection refused") {
            "its scheduler or an executor could not be reached".to_string()
        } else if msg.contains("executors were lost") || msg.contains("no executors remain") {
            "every executor was lost while it ran".to_string()
        } else if msg.contains("Shuffle fetch") || msg.contains("FetchFailed") {
            "an executor was lost and its results could not be fetched".to_string()
        } else {
            "a task failed (the cluster's message is withheld: it can quote a private value)"
                .to_string()
        };
        SqlError::Cluster {
            address: address.to_string(),
            what,
            charged: false,
        }
    }

    /// Whether the scheduler accepts a connection: tried before a query is charged, so that a
    /// scheduler that is down or an address typed wrong costs nothing (once the query runs, a
    /// failure is charged: it can depend on the private rows).
    pub(crate) fn reachable(&self) -> Result<()> {
        use std::net::{TcpStream, ToSocketAddrs};
        let unreachable = || SqlError::Cluster {
            address: self.address.to_string(),
            what: "its scheduler could not be reached".to_string(),
            charged: false,
        };
        let addresses = self.address.to_socket_addrs().map_err(|_| unreachable())?;
        for a in addresses {
            if TcpStream::connect_timeout(&a, std::time::Duration::from_secs(10)).is_ok() {
                return Ok(());
            }
        }
        Err(unreachable())
    }
}

/// `HOST:PORT`, with a port number.
fn check_address(address: &str) -> Result<()> {
    let bad = || {
        SqlError::input(format!(
            "cluster address {address:?} is not HOST:PORT (for example localhost:50050)"
        ))
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':'));
    match port.parse::<u16>() {
        Ok(p) if p > 0 && host_ok => Ok(()),
        _ => Err(bad()),
    }
}

/// Refuses a plan a cluster cannot run as dpml means it: every table must be a file the
/// executors read by its path, and no row may need the secret key.
pub(crate) fn check_shippable(plan: &LogicalPlan) -> Result<()> {
    let mut problem = None;
    plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let by_path = source_as_provider(&scan.source)
                .map(|p| p.downcast_ref::<ListingTable>().is_some())
                .unwrap_or(false);
            if !by_path {
                problem = Some(format!(
                    "table {} is not Parquet, which the executors read by its path (a CSV \
                     table is read here, as a stream that no malformed row can fail: convert \
                     it to Parquet)",
                    scan.table_name
                ));
            }
        }
        for e in node.expressions() {
            e.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && f.name() == crate::rowid::ROW_ID_FUNCTION
                {
                    problem = Some(
                        "a table whose rows are their own privacy units (no privacy_unit) is \
                         bounded by a keyed hash of each row under the run's secret key, which \
                         does not leave this process: declare its privacy_unit column"
                            .to_string(),
                    );
                }
                Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
            })?;
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    })
    .map_err(plan_err)?;
    match problem {
        Some(p) => Err(SqlError::refused("a query on a cluster", p)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_host_and_port() {
        for good in [
            "localhost:50050",
            "10.0.0.7:1",
            "[::1]:50050",
            "sched-1.example:9",
        ] {
            assert!(check_address(good).is_ok(), "{good}");
        }
        for bad in [
            "localhost",
            ":50050",
            "host:0",
            "host:99999",
            "host:port",
            "a b:1",
            "",
        ] {
            let e = check_address(bad).unwrap_err().to_string();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }
}
