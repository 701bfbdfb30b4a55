//! Section "bounded queue": the textbook blocking queue on one mutex and two
//! condvars, as users write it. P producers push and C consumers pop for a
//! fixed time; a producer waits on "not full" while the queue holds
//! `capacity` items, a consumer on "not empty" while it is empty; each
//! side calls `notify_one` on the other's condvar after every push or pop,
//! just after unlocking, or (rows marked "notify locked") just before,
//! still holding the lock: both are common, and they differ in whether the
//! woken thread finds the lock free. Capacity 1 with one producer and one consumer is a
//! ping-pong: every item needs a wake-up.
//!
//! An extra, sleeping thread of the gang times the interval (stretched until
//! at least one item went through: an overloaded machine may not run the
//! workers at all in a smoke run), then closes the queue under the lock and
//! notifies everybody; consumers drain what is
//! left. Throughput counts the items popped before the close. Every item
//! pushed must be popped by the end, or the sample fails (a lost item is a
//! broken lock or condvar). A worker still running [`PATIENCE`] after the
//! close is a lost wakeup: the sample fails as stuck, after the timer has
//! notified again until everybody left, so the run goes on.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::monitor::{Cv, Monitor};
use super::table_stats::table_delta;
use super::Workload;
use crate::harness::gang::gang_with;
use crate::harness::patience::{timed_interval, PATIENCE};
use crate::harness::{Case, LabError, Sample};

const NOT_EMPTY: Cv = Cv::First;
const NOT_FULL: Cv = Cv::Second;

/// How often the timer looks whether everybody left after the close.
const DRAIN_POLL: Duration = Duration::from_micros(200);

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Producer threads.
    pub producers: usize,
    /// Consumer threads.
    pub consumers: usize,
    /// Items the queue holds at most.
    pub capacity: usize,
    /// Whether each side notifies while still holding the lock (else
    /// just after unlocking it).
    pub notify_under_lock: bool,
    /// Length of the timed interval, in milliseconds.
    pub interval_ms: u64,
}

/// The queue and its bookkeeping, all under the lock.
pub struct Queue {
    items: VecDeque<u64>,
    capacity: usize,
    closed: bool,
    pushed: u64,
    popped: u64,
    /// Items popped before the close: the throughput's numerator.
    popped_in_time: u64,
}

/// The workload.
pub struct BoundedQueue;

impl Workload for BoundedQueue {
    type Params = Params;
    type Value = Queue;

    fn measure<M: Monitor<Queue>>(case: &Case<Params>) -> Result<Sample, LabError> {
        let p = case.params;
        let monitor = M::boxed(Queue {
            items: VecDeque::with_capacity(p.capacity),
            capacity: p.capacity,
            closed: false,
            pushed: 0,
            popped: 0,
            popped_in_time: 0,
        })?;
        let monitor = &*monitor;
        let workers = p.producers + p.consumers;
        let left = AtomicUsize::new(0);
        let stuck = AtomicU64::new(0);
        let before = M::table_stats();
        // Set by a consumer after its first item: the timer's sign of
        // progress, read without taking the lock under test.
        let progressed = AtomicBool::new(false);
        // The timer runs alongside the gang on this thread (its sleeps stay
        // out of the workers' counts). At least one item must go through
        // before the close (an overloaded machine may not run the workers
        // at all in a smoke interval): the interval stretches until one has.
        let timer = || {
            let took = timed_interval(Duration::from_millis(p.interval_ms), || {
                progressed.load(Ordering::Relaxed)
            });
            monitor.with(|q| q.closed = true);
            monitor.notify_all(NOT_EMPTY);
            monitor.notify_all(NOT_FULL);
            let closed = Instant::now();
            while left.load(Ordering::Acquire) < workers {
                if closed.elapsed() > PATIENCE {
                    // A lost wakeup: record it, and unblock the
                    // stranded thread so the gang can end.
                    stuck.store(1, Ordering::Relaxed);
                    monitor.notify_all(NOT_EMPTY);
                    monitor.notify_all(NOT_FULL);
                }
                std::thread::sleep(DRAIN_POLL);
            }
            took
        };
        let work = |i: usize| {
            let mut waits = 0;
            if i < p.producers {
                let mut next = 0u64;
                loop {
                    let (pushed, w) = monitor.wait_then(
                        NOT_FULL,
                        |q| q.items.len() >= q.capacity && !q.closed,
                        |q| {
                            if q.closed {
                                return false;
                            }
                            q.items.push_back(next);
                            q.pushed += 1;
                            if p.notify_under_lock {
                                monitor.notify_one(NOT_EMPTY);
                            }
                            true
                        },
                    );
                    waits += w;
                    if !pushed {
                        break;
                    }
                    next += 1;
                    if !p.notify_under_lock {
                        monitor.notify_one(NOT_EMPTY);
                    }
                }
            } else {
                let mut popped_one = false;
                loop {
                    let (item, w) = monitor.wait_then(
                        NOT_EMPTY,
                        |q| q.items.is_empty() && !q.closed,
                        |q| {
                            let item = q.items.pop_front();
                            if item.is_some() {
                                q.popped += 1;
                                if !q.closed {
                                    q.popped_in_time += 1;
                                }
                                if p.notify_under_lock {
                                    monitor.notify_one(NOT_FULL);
                                }
                            }
                            item
                        },
                    );
                    waits += w;
                    if item.is_none() {
                        break;
                    }
                    if !popped_one {
                        // Once per consumer: no shared line in the loop.
                        progressed.store(true, Ordering::Relaxed);
                        popped_one = true;
                    }
                    if !p.notify_under_lock {
                        monitor.notify_one(NOT_FULL);
                    }
                }
            }
            // Release: the timer's Acquire load sees every worker done.
            left.fetch_add(1, Ordering::Release);
            waits
        };
        let (run, interval) = gang_with(workers, work, timer)?;
        let table = table_delta(before, M::table_stats());

        if stuck.load(Ordering::Relaxed) != 0 {
            return Err(LabError::Stuck {
                what: "a worker of the closed queue (a lost wakeup)".into(),
                after: PATIENCE,
            });
        }
        let (pushed, popped, in_time, left_over) =
            monitor.with(|q| (q.pushed, q.popped, q.popped_in_time, q.items.len()));
        if pushed != popped || left_over != 0 {
            return Err(LabError::Sample(format!(
                "{pushed} items pushed, {popped} popped, {left_over} left: the queue lost items"
            )));
        }
        if in_time == 0 {
            return Err(LabError::Sample("no item went through in time".into()));
        }
        let seconds = interval.as_secs_f64();
        let kitems = in_time as f64 / 1e3;
        let mut sample = Sample::new()
            .with("items_per_s", in_time as f64 / seconds)
            .with(
                "cpu_ns_per_item",
                run.usage.cpu_micros as f64 * 1e3 / in_time as f64,
            )
            .with(
                "cond_waits_per_kitem",
                run.results.iter().sum::<u64>() as f64 / kitems,
            )
            .with(
                "sleeps_per_kitem",
                run.usage.voluntary_switches as f64 / kitems,
            )
            .with(
                "preempted_per_kitem",
                run.usage.involuntary_switches as f64 / kitems,
            );
        if let Some(t) = table {
            sample = sample
                .with("table_waits_per_kitem", t.waits as f64 / kitems)
                .with("table_wakeups_per_kitem", t.wakeups as f64 / kitems);
        }
        Ok(sample)
    }
}
