//! [`Collective`] over MPI (rsmpi on the system's MPI library): the world communicator of the
//! job, kept per thread because MPI handles may not cross threads (every collective call of
//! dpml is made from the main thread).

use std::cell::RefCell;

use dpml_learn::dpsgd::{Collective, Solo};
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

thread_local! {
    static WORLD: RefCell<Option<MpiComm>> = const { RefCell::new(None) };
}

/// The job's processes.
struct MpiComm {
    world: SimpleCommunicator,
}

/// Initialises MPI and remembers the world; `None` if MPI cannot start.
pub(super) fn init() -> Option<Universe> {
    let universe = mpi::initialize()?;
    let world = universe.world();
    WORLD.with(|w| *w.borrow_mut() = Some(MpiComm { world }));
    Some(universe)
}

/// Runs `f` with the world (or [`Solo`] when MPI is not running).
pub(super) fn with_world<T>(f: impl FnOnce(&dyn Collective) -> T) -> T {
    WORLD.with(|w| match w.borrow().as_ref() {
        Some(c) => f(c),
        None => f(&Solo),
    })
}

/// Every process's `text`, in rank order, on the root; `None` on the others.
pub(super) fn gather_strings(text: String) -> Option<Vec<String>> {
    with_world_comm(|c| {
        let Some(c) = c else {
            return Some(vec![text.clone()]);
        };
        let root = c.world.process_at_rank(0);
        // Fixed-size records: every text padded to the longest.
        let mut longest = [text.len() as u64];
        let mut lens = vec![0u64; c.size()];
        if c.is_root() {
            root.gather_into_root(&longest[..], &mut lens[..]);
            longest[0] = lens.iter().copied().max().unwrap_or(0);
        } else {
            root.gather_into(&longest[..]);
        }
        root.broadcast_into(&mut longest[..]);
        let width = longest[0] as usize;
        let mut mine = text.clone().into_bytes();
        mine.resize(width, b' ');
        if c.is_root() {
            let mut all = vec![0u8; width * c.size()];
            root.gather_into_root(&mine[..], &mut all[..]);
            Some(
                all.chunks(width.max(1))
                    .take(c.size())
                    .map(|b| String::from_utf8_lossy(b).trim_end().to_string())
                    .collect(),
            )
        } else {
            root.gather_into(&mine[..]);
            None
        }
    })
}

fn with_world_comm<T>(f: impl FnOnce(Option<&MpiComm>) -> T) -> T {
    WORLD.with(|w| f(w.borrow().as_ref()))
}

impl MpiComm {
    fn sum_to_root<T: Equivalence + Copy + Default>(&self, values: &mut [T]) {
        let root = self.world.process_at_rank(0);
        if self.is_root() {
            let mut sum = vec![T::default(); values.len()];
            root.reduce_into_root(&values[..], &mut sum[..], SystemOperation::sum());
            values.copy_from_slice(&sum);
        } else {
            root.reduce_into(&values[..], SystemOperation::sum());
        }
    }
}

impl Collective for MpiComm {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn sum_to_root_f32(&self, values: &mut [f32]) {
        self.sum_to_root(values);
    }
    fn sum_to_root_f64(&self, values: &mut [f64]) {
        self.sum_to_root(values);
    }
    fn broadcast_f32(&self, values: &mut [f32]) {
        self.world.process_at_rank(0).broadcast_into(values);
    }
    fn broadcast_u64(&self, values: &mut [u64]) {
        self.world.process_at_rank(0).broadcast_into(values);
    }
    fn gather_u64(&self, value: u64) -> Vec<u64> {
        let root = self.world.process_at_rank(0);
        if self.is_root() {
            let mut all = vec![0u64; self.size()];
            root.gather_into_root(&value, &mut all[..]);
            all
        } else {
            root.gather_into(&value);
            Vec::new()
        }
    }
}
