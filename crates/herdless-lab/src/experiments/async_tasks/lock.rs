//! Section "lock throughput": T tasks on a multi-threaded runtime each take
//! one lock `ops` times, with one round of parking_lot's benchmark work
//! inside (a dependent floating-point add and multiply on the shared
//! value) and `outside` rounds on a local value between acquisitions. In
//! the rows marked "held", each task also yields to the runtime while it
//! holds the lock (a guard held across an `.await`, what async locks are
//! for): the other tasks then find it taken, queue, and are handed it
//! (the contended path); in the others the lock is held for nanoseconds
//! and rarely found taken (the fast path).
//! Throughput is acquisitions per second from the first spawn to the last
//! task's end; every acquisition also bumps a count under the lock, and a
//! total that differs from T × ops fails the sample.
//!
//! The locks: herdless's `Mutex::lock_async` (tasks in the futex table's
//! queue beside the threads), `tokio::sync::Mutex` and `async_lock::Mutex`;
//! and `RwSem::write_async`, the exclusive hold of the rwsem's queue (the
//! stand-in measured before the async `Mutex`, kept for comparison).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use herdless::{Mutex, MutexAsyncExt, RwSem, RwSemAsyncExt};
use serde::Serialize;

use smol::future::yield_now;

use super::runtime::{run_tasks, Counted, Runtime};
use crate::harness::{Case, LabError, Sample};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// The runtime the tasks run on.
    pub runtime: Runtime,
    /// Tasks taking the lock.
    pub tasks: usize,
    /// Acquisitions per task.
    pub ops: u64,
    /// Rounds of work between acquisitions.
    pub outside: u32,
    /// Whether a task yields to the runtime while holding the lock.
    pub held_across_yield: bool,
}

/// What the lock protects.
#[derive(Default)]
pub struct Shared {
    value: f64,
    acquisitions: u64,
}

impl Shared {
    fn work(&mut self) {
        self.value += 1.0;
        self.value *= 1.01;
        self.acquisitions += 1;
    }
}

/// Rounds of work on a local value, outside the lock.
fn outside(rounds: u32, local: &mut f64) {
    for _ in 0..rounds {
        *local = black_box(*local + 1.0) * 1.01;
    }
}

/// The async locks measured: each names how its task takes the lock.
#[derive(Clone, Copy, Debug)]
pub enum AsyncMutex {
    /// herdless `Mutex::lock_async`.
    Herdless,
    /// herdless `RwSem::write_async` (the exclusive hold of an rwsem).
    HerdlessRwSem,
    /// `tokio::sync::Mutex`.
    Tokio,
    /// `async_lock::Mutex`.
    AsyncLock,
}

/// Measures `case` once with `lock`.
// clippy's `await_holding_lock` takes every `lock_api` guard for a
// blocking one; herdless's `lock_async` and `write_async` guards are made
// to be held across an `.await` (the "held" rows do exactly that).
#[allow(clippy::await_holding_lock)]
pub fn measure(lock: AsyncMutex, case: &Case<Params>) -> Result<Sample, LabError> {
    let p = case.params;
    let polls = Arc::new(AtomicU64::new(0));
    let moves = Arc::new(AtomicU64::new(0));
    // One macro body for the three locks: the loop is the same code, only
    // the lock type and its acquire call differ.
    macro_rules! run {
        ($lock:expr, $acquire:ident) => {{
            let lock = Arc::new($lock);
            let tasks = (0..p.tasks)
                .map(|_| {
                    let lock = lock.clone();
                    Counted::new(
                        async move {
                            let mut local = 0.0;
                            for _ in 0..p.ops {
                                let mut guard = lock.$acquire().await;
                                guard.work();
                                if p.held_across_yield {
                                    yield_now().await;
                                }
                                drop(guard);
                                outside(p.outside, &mut local);
                            }
                            black_box(local);
                        },
                        polls.clone(),
                    )
                    .with_moves(moves.clone())
                })
                .collect();
            let run = run_tasks(p.runtime, tasks)?;
            // Every task ended: the lock is free at once.
            let total = smol::block_on(lock.$acquire()).acquisitions;
            (run, total)
        }};
    }
    let (run, total) = match lock {
        AsyncMutex::Herdless => run!(Mutex::new(Shared::default()), lock_async),
        AsyncMutex::HerdlessRwSem => run!(RwSem::new(Shared::default()), write_async),
        AsyncMutex::Tokio => run!(tokio::sync::Mutex::new(Shared::default()), lock),
        AsyncMutex::AsyncLock => run!(async_lock::Mutex::new(Shared::default()), lock),
    };
    let ops = p.tasks as u64 * p.ops;
    if total != ops {
        return Err(LabError::Sample(format!(
            "{total} acquisitions counted under the lock, {ops} made"
        )));
    }
    let wakeups = polls.load(Ordering::Relaxed).saturating_sub(p.tasks as u64);
    let n = ops as f64;
    Ok(Sample::new()
        .with("ops_per_s", n / run.elapsed.as_secs_f64())
        .with("wakeups_per_op", wakeups as f64 / n)
        .with("moves_per_op", moves.load(Ordering::Relaxed) as f64 / n)
        .with("worker_sleeps_per_op", run.sleeps_per(n))
        .with("cpu_ns_per_op", run.cpu_ns_per(n))
        .with("time_ms", run.elapsed.as_secs_f64() * 1e3))
}
