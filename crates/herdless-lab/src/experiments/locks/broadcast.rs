//! Section "notify_all to waiters that all need the mutex": N threads wait
//! on one condvar; once `/proc` shows all of them asleep at once, the
//! driver sets the flag they wait for and calls `notify_all`, either while
//! holding the mutex or just after unlocking it. Every waiter must then
//! take the mutex to return from its wait. The time runs from the call to
//! the moment the last waiter holds the mutex.
//!
//! A requeueing condvar (herdless, parking_lot) wakes one waiter and moves
//! the others onto the mutex, so each is woken by the previous one's
//! unlock; a waking one (std, glibc) wakes all and lets them contend.
//!
//! # Counted evidence
//! - `sleeps_per_waiter`: a waiter's voluntary context switches from its
//!   first wait to its return, read with `getrusage(RUSAGE_THREAD)` (the
//!   first is read under the lock just before waiting, so entering the
//!   wait does not count). 1 is the floor: the sleep on the condvar.
//! - `futex_calls_per_waiter`, `futex_wakes_per_waiter`: the futex system
//!   calls of every thread (driver and waiters) from the notify until the
//!   last waiter has unlocked, all of them and the waking ones
//!   (see `futex_calls`). They are counted in a separate round before the
//!   timed one, with the same threads' count, never while timing; blank
//!   where perf's syscall tracepoint is not available. Nothing else in
//!   that window makes futex calls: a waiter that has run parks on a pipe
//!   (`pipe_gate`), and the driver waits for the last one on another.
//! - `table_*` (herdless only, timed round): futex-table waits begun after
//!   the notify (0: nobody slept again on the mutex), threads woken
//!   (dequeued) and threads requeued, per waiter.

use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use serde::Serialize;

use super::futex_calls::{FutexCallCounts, FutexCalls};
use super::monitor::{Cv, Monitor};
use super::pipe_gate::PipeGate;
use super::table_stats::table_delta;
use super::Workload;
use crate::harness::asleep::{collect_tids, current_tid, wait_until_asleep};
use crate::harness::gang::spawn_each;
use crate::harness::patience::PATIENCE;
use crate::harness::{Case, LabError, Sample, Usage};

const GO: Cv = Cv::First;

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Threads waiting on the condvar.
    pub waiters: usize,
    /// Whether the driver notifies while holding the mutex (else just after
    /// unlocking it).
    pub notify_holding_lock: bool,
}

/// The flag the waiters wait for, and how many have run.
#[derive(Default)]
pub struct Flag {
    go: bool,
    ran: usize,
}

/// What one round measured.
struct Round {
    time_ns: u64,
    sleeps: u64,
    calls: Option<FutexCallCounts>,
    table: Option<herdless::futex::FutexStats>,
}

/// The workload.
pub struct Broadcast;

impl Workload for Broadcast {
    type Params = Params;
    type Value = Flag;

    fn measure<M: Monitor<Flag>>(case: &Case<Params>) -> Result<Sample, LabError> {
        let p = case.params;
        // The counted round first; the counter must be opened before the
        // round's threads are spawned, to follow them.
        let counted = match FutexCalls::open() {
            Some(counter) => round::<M>(p, Some(&counter))?.calls,
            None => None,
        };
        let timed = round::<M>(p, None)?;
        let n = p.waiters as f64;
        let mut sample = Sample::new()
            .with("time_us", timed.time_ns as f64 / 1e3)
            .with("sleeps_per_waiter", timed.sleeps as f64 / n);
        if let Some(c) = counted {
            sample = sample
                .with("futex_calls_per_waiter", c.calls as f64 / n)
                .with("futex_wakes_per_waiter", c.wakes as f64 / n);
        }
        if let Some(t) = timed.table {
            sample = sample
                .with("table_waits_per_waiter", t.waits as f64 / n)
                .with("table_wakeups_per_waiter", t.wakeups as f64 / n)
                .with("requeued_per_waiter", t.requeued as f64 / n);
        }
        Ok(sample)
    }
}

/// One broadcast to fresh waiters; counts futex calls if `counter` is given.
fn round<M: Monitor<Flag>>(p: Params, counter: Option<&FutexCalls>) -> Result<Round, LabError> {
    let n = p.waiters;
    let monitor = M::boxed(Flag::default())?;
    let monitor = &*monitor;
    let exit = PipeGate::new()?;
    let all_done = PipeGate::new()?;
    let tids: Vec<AtomicI32> = (0..n).map(|_| AtomicI32::new(0)).collect();
    let finished = AtomicUsize::new(0);
    let sleeps = AtomicU64::new(0);
    let base = Instant::now();
    let last_ran_ns = AtomicU64::new(0);
    let (exit, all_done, finished, sleeps, last_ran_ns) =
        (&exit, &all_done, &finished, &sleeps, &last_ran_ns);
    thread::scope(|s| {
        // On every path, errors included, lets every waiter out: sets the
        // flag, notifies, and opens the exit gate, so the scope can join
        // them. (A failed write would leave waiters blocked and the join
        // hanging; it cannot fail on a pipe we hold both ends of with room
        // to spare.)
        let _release = scopeguard::guard((), |()| {
            monitor.with(|f| f.go = true);
            monitor.notify_all(GO);
            let _ = exit.open(n);
        });
        let slots = &tids;
        spawn_each(s, "waiter", n, move |i| {
            slots[i].store(current_tid(), Ordering::Release);
            let mut first_wait: Option<Usage> = None;
            monitor.wait_then(
                GO,
                |f| {
                    if first_wait.is_none() {
                        first_wait = Some(Usage::thread());
                    }
                    !f.go
                },
                |f| {
                    f.ran += 1;
                    if f.ran == n {
                        let ns = base.elapsed().as_nanos() as u64;
                        last_ran_ns.store(ns, Ordering::Relaxed);
                    }
                },
            );
            if let Some(u) = first_wait {
                let slept = Usage::thread().since(&u).voluntary_switches;
                sleeps.fetch_add(slept, Ordering::Relaxed);
            }
            // AcqRel: the driver, after the last one, sees every
            // waiter's counts and its unlock.
            if finished.fetch_add(1, Ordering::AcqRel) + 1 == n {
                let _ = all_done.open(1);
            }
            let _ = exit.pass();
        })?;
        let tids = collect_tids(&tids)?;
        wait_until_asleep(&tids, PATIENCE)?;
        // Every waiter is asleep, and none holds the mutex: all are in the
        // condvar wait.
        let before = M::table_stats();
        if let Some(c) = counter {
            c.start();
        }
        let start_ns = base.elapsed().as_nanos() as u64;
        if p.notify_holding_lock {
            monitor.with(|f| {
                f.go = true;
                monitor.notify_all(GO);
            });
        } else {
            monitor.with(|f| f.go = true);
            monitor.notify_all(GO);
        }
        all_done.pass_within(PATIENCE)?;
        let calls = counter.and_then(FutexCalls::stop);
        if finished.load(Ordering::Acquire) != n {
            return Err(LabError::Sample("the done gate opened early".into()));
        }
        let table = table_delta(before, M::table_stats());
        Ok(Round {
            time_ns: last_ran_ns.load(Ordering::Relaxed).saturating_sub(start_ns),
            sleeps: sleeps.load(Ordering::Relaxed),
            calls,
            table,
        })
    })
}
