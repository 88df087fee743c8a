//! What a running query is doing, for a front to show: its stage, the rows its scans have
//! read and the bytes its operators have spilled to disk. The engine updates these counters
//! as it goes (the scans' and spills' figures are DataFusion's own metrics, read a few times a
//! second); a front reads them from another thread and draws them as it likes. No terminal
//! code here.
//!
//! The counters describe the work, not the answer: they are not released and not noisy. A
//! front shows them to the person running the query, as it shows the time a query takes.

use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use datafusion::physical_plan::ExecutionPlan;

/// Runs `f` while `watch` runs on a thread of its own, given a flag that turns true once `f`
/// has returned or panicked; `watch` must then return soon (its thread is unparked). A panic
/// of `f` still stops the watcher, or the scope would wait for it for ever, and is resumed.
pub fn watching<T>(watch: impl FnOnce(&AtomicBool) + Send, f: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let watcher = scope.spawn(|| watch(&stop));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        stop.store(true, Ordering::Relaxed);
        watcher.thread().unpark();
        result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The stage of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stage {
    /// Not started.
    #[default]
    Idle,
    /// Parsing, planning, rewriting, calibrating (public tables only) and charging the ledger.
    Planning,
    /// Reading and bounding the private rows of aggregate `aggregate` (1-based) of `of`.
    Reading {
        /// Which aggregate.
        aggregate: usize,
        /// How many.
        of: usize,
    },
    /// Drawing the noise (the ledger was charged before the first private row was read).
    Releasing,
    /// Running the rest of the query on the released cells.
    Finishing,
    /// Finished (answered or failed).
    Done,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Idle => f.write_str("idle"),
            Stage::Planning => f.write_str("planning"),
            Stage::Reading { aggregate, of } if *of > 1 => {
                write!(f, "reading private rows (aggregate {aggregate} of {of})")
            }
            Stage::Reading { .. } => f.write_str("reading private rows"),
            Stage::Releasing => f.write_str("releasing"),
            Stage::Finishing => f.write_str("finishing"),
            Stage::Done => f.write_str("done"),
        }
    }
}

/// The counters of the query an engine runs (see the module docs).
#[derive(Debug, Default)]
pub struct Progress {
    stage: Mutex<Stage>,
    /// Rows read by the scans of finished aggregates.
    rows_done: AtomicU64,
    /// Rows read by the scans of the aggregate being read.
    rows_now: AtomicU64,
    spilled_done: AtomicU64,
    spilled_now: AtomicU64,
    spills_done: AtomicU64,
    spills_now: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The stage.
    pub stage: Stage,
    /// Rows read from the tables by the scans of private rows so far.
    pub rows_scanned: u64,
    /// Bytes spilled to disk so far.
    pub spilled_bytes: u64,
    /// Spill files written so far.
    pub spill_count: u64,
}

impl Progress {
    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        let sum = |a: &AtomicU64, b: &AtomicU64| {
            a.load(Ordering::Relaxed)
                .saturating_add(b.load(Ordering::Relaxed))
        };
        Snapshot {
            stage: self.stage.lock().map(|s| *s).unwrap_or_default(),
            rows_scanned: sum(&self.rows_done, &self.rows_now),
            spilled_bytes: sum(&self.spilled_done, &self.spilled_now),
            spill_count: sum(&self.spills_done, &self.spills_now),
        }
    }

    /// A new query starts: every counter back to 0.
    pub(crate) fn start(&self) {
        for c in [
            &self.rows_done,
            &self.rows_now,
            &self.spilled_done,
            &self.spilled_now,
            &self.spills_done,
            &self.spills_now,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.set_stage(Stage::Planning);
    }

    pub(crate) fn set_stage(&self, stage: Stage) {
        if let Ok(mut s) = self.stage.lock() {
            *s = stage;
        }
    }

    /// Reads the scans' and spills' metrics of `plan`, the plan being executed.
    pub(crate) fn observe(&self, plan: &Arc<dyn ExecutionPlan>) {
        let m = PlanMetrics::of(plan);
        self.rows_now.store(m.rows_scanned, Ordering::Relaxed);
        self.spilled_now.store(m.spilled_bytes, Ordering::Relaxed);
        self.spills_now.store(m.spill_count, Ordering::Relaxed);
    }

    /// The plan being executed has finished: its figures move to the done totals.
    pub(crate) fn finish_plan(&self, plan: &Arc<dyn ExecutionPlan>) {
        let m = PlanMetrics::of(plan);
        for (done, now, value) in [
            (&self.rows_done, &self.rows_now, m.rows_scanned),
            (&self.spilled_done, &self.spilled_now, m.spilled_bytes),
            (&self.spills_done, &self.spills_now, m.spill_count),
        ] {
            done.fetch_add(value, Ordering::Relaxed);
            now.store(0, Ordering::Relaxed);
        }
    }
}

/// The metrics of a physical plan, added up over its operators.
#[derive(Debug, Default)]
struct PlanMetrics {
    rows_scanned: u64,
    spilled_bytes: u64,
    spill_count: u64,
}

impl PlanMetrics {
    fn of(plan: &Arc<dyn ExecutionPlan>) -> Self {
        let mut m = PlanMetrics::default();
        m.add(plan.as_ref());
        m
    }

    fn add(&mut self, plan: &dyn ExecutionPlan) {
        if let Some(metrics) = plan.metrics() {
            // The leaves are the scans: their output is the rows read.
            if plan.children().is_empty() {
                self.rows_scanned += metrics.output_rows().unwrap_or(0) as u64;
            }
            self.spilled_bytes += metrics.spilled_bytes().unwrap_or(0) as u64;
            self.spill_count += metrics.spill_count().unwrap_or(0) as u64;
        }
        for child in plan.children() {
            self.add(child.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic of the watched work stops the watcher and reaches the caller: no hang.
    #[test]
    fn a_panic_stops_the_watcher_and_is_resumed() {
        let watcher_ended = AtomicBool::new(false);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            watching(
                |stop| {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::park_timeout(std::time::Duration::from_millis(50));
                    }
                    watcher_ended.store(true, Ordering::Relaxed);
                },
                || -> u32 { panic!("the work failed") },
            )
        }));
        assert!(result.is_err());
        assert!(watcher_ended.load(Ordering::Relaxed));
        assert_eq!(watching(|_| {}, || 7), 7);
    }
}
