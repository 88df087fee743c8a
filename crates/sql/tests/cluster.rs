//! On an Apache Ballista cluster: a scheduler and two executors on localhost, in this process
//! (each on its own thread and runtime, so that one can be killed as a crash would: its
//! runtime dropped, its sockets closed, no goodbye to the scheduler). A seeded query gives the
//! same table as on one machine; a query whose executors are lost fails by name and charges
//! nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::serde::BallistaCodec;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use dpml_accounting::ledger::{Budget, Ledger};
use dpml_mechanisms::DpRng;
use dpml_sql::{Engine, SqlError};

mod common;
use common::{query, request, tpch};

/// One cluster node: a thread with its own tokio runtime; killing it drops the runtime.
struct Node {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Node {
    fn spawn<F, Fut>(name: &str, make: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("a runtime");
                rt.block_on(async move {
                    tokio::select! {
                        _ = make() => {}
                        _ = rx => {}
                    }
                });
                rt.shutdown_background();
            })
            .expect("a thread");
        Node {
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    fn kill(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A scheduler on a free localhost port that notices a silent executor within seconds and
/// fails the jobs of a cluster left without executors at once.
fn start_scheduler() -> (Node, u16) {
    let (port_tx, port_rx) = std::sync::mpsc::channel::<u16>();
    let node = Node::spawn("ballista-scheduler", move || async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut config = SchedulerConfig::default()
            .with_scheduler_policy(TaskSchedulingPolicy::PullStaged)
            .with_hostname("localhost")
            .with_port(port)
            .with_no_executors_grace_period_seconds(0);
        config.executor_timeout_seconds = 2;
        config.expire_dead_executor_interval_seconds = 1;
        let cluster = BallistaCluster::new_from_config(&config).await.unwrap();
        let scheduler =
            create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
                .await
                .unwrap();
        port_tx.send(port).unwrap();
        start_grpc_service_with_listener(listener, scheduler)
            .await
            .unwrap();
    });
    let port = port_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the scheduler started");
    (node, port)
}

/// An executor with `vcores` task slots that polls the scheduler at `port` for work.
fn start_executor(port: u16, vcores: usize) -> Node {
    Node::spawn("ballista-executor", move || async move {
        let url = format!("http://127.0.0.1:{port}");
        let client = loop {
            match SchedulerGrpcClient::connect(url.clone()).await {
                Ok(c) => break c,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        ballista_executor::new_standalone_executor(client, vcores, BallistaCodec::default())
            .await
            .unwrap();
        std::future::pending::<()>().await;
    })
}

/// Runs `f` on a thread of its own, failing the test when it takes longer than `limit`
/// (a cluster that never answers must not hang the suite).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("no answer within {limit:?}"))
}

#[test]
fn two_executors_give_the_seeded_single_machine_answer() {
    let common::Tpch {
        dir: _dir,
        tables,
        schema,
    } = tpch();
    let (_scheduler, port) = start_scheduler();
    let _executors = [start_executor(port, 1), start_executor(port, 1)];
    let one_machine = Engine::new(&schema.tables, &tables).unwrap();
    let address = format!("127.0.0.1:{port}");
    let cluster = Arc::new(Engine::on_cluster(&schema.tables, &tables, &address).unwrap());
    // Public keys through a foreign key, private keys, joins of four tables.
    for name in ["q1", "q1_private_keys", "q3", "orderpriority_histogram"] {
        let sql = query(name);
        let here = one_machine
            .run(sql, &request(), &mut DpRng::seeded(11), None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let engine = Arc::clone(&cluster);
        let there = within(Duration::from_secs(120), move || {
            engine
                .run(sql, &request(), &mut DpRng::seeded(11), None)
                .map(|r| r.rows_json().unwrap())
        })
        .unwrap_or_else(|e| panic!("{name} on the cluster: {e}"));
        assert!(
            here.rows_json()
                .unwrap()
                .as_array()
                .is_some_and(|r| !r.is_empty()),
            "{name}: nothing released"
        );
        assert_eq!(
            here.rows_json().unwrap(),
            there,
            "{name}: the cluster's seeded answer differs"
        );
    }
}

#[test]
fn losing_the_executors_fails_the_query_by_name_and_is_charged() {
    let common::Tpch {
        dir,
        tables,
        schema,
    } = tpch();
    let (_scheduler, port) = start_scheduler();
    let mut executor = start_executor(port, 1);
    let address = format!("127.0.0.1:{port}");
    let engine = Engine::on_cluster(&schema.tables, &tables, &address).unwrap();
    // The executor is up and registered: a first query runs.
    let ledger_path = dir.path().join("ledger");
    let ledger = Ledger::open(&ledger_path, Budget::new(10.0, 1e-3).unwrap()).unwrap();
    let sql = query("q1");
    engine
        .run(sql, &request(), &mut DpRng::seeded(3), Some(&ledger))
        .unwrap();
    let spent = ledger.balance().unwrap();
    assert_eq!(spent.entries, 1);
    // Killed as a crash: the scheduler still counts on it when the next query's tasks are
    // handed out, and learns of the loss only when its heartbeats stop.
    executor.kill();
    let e = within(Duration::from_secs(120), move || {
        engine
            .run(sql, &request(), &mut DpRng::seeded(3), Some(&ledger))
            .unwrap_err()
    });
    match &e {
        SqlError::Cluster {
            address: a,
            what,
            charged,
        } => {
            assert_eq!(a, &address);
            assert!(what.contains("executor") && *charged, "{e}");
        }
        other => panic!("not the cluster's error: {other}"),
    }
    assert!(!e.is_input(), "{e}");
    // Charged: the scheduler was up, so the query was sent, and whether a task fails can
    // depend on the private rows it reads.
    let ledger = Ledger::open(&ledger_path, Budget::new(10.0, 1e-3).unwrap()).unwrap();
    let after = ledger.balance().unwrap();
    assert_eq!(after.entries, 2, "the failed query was not charged");
    assert!(after.spent_epsilon > spent.spent_epsilon);
}
