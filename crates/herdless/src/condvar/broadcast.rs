//! `notify_all` to a free mutex with one system call, the default where
//! the kernel has `futex_waitv` (`HERDLESS_CONDVAR_BROADCAST=0` keeps the
//! cascade instead).
//!
//! The cascade (`cascade.rs`) wakes 64 waiters with 64 `FUTEX_WAKE`s,
//! each on the waiter's own word, a few waiters at a time; std's condvar
//! wakes all of them with one. With the broadcast, every waiter sleeps on
//! its own word *and* on the condvar's `epoch` (`futex_waitv`, Linux
//! 5.16: `Parker::park_deadline_either`). A `notify_all` that finds the
//! mutex free dequeues and grants every waiter under the bucket lock, as
//! ever, then marks each one's parker without waking it
//! (`Unparker::mark`), bumps `epoch` and wakes every sleeper of `epoch`
//! once (`FutexTable::unpark_all_broadcast`). Each waiter is still woken
//! once and counted once; a waiter that queued after the notify and
//! sleeps on `epoch` too returns from its futex wait, finds no grant and
//! sleeps again (a wakeup nobody above the parker sees).
//!
//! Measured (the lab's `locks`, `notify_all` to 64 waiters after the
//! unlock, the time until the last holds the mutex, each pair of runs
//! interleaved, the same binaries): on 16 cores (issue 23, stops 40–41,
//! nine pairs) 0.59–1.48× std's time in the same run (geometric mean
//! 1.02×) against the cascade's 0.86–1.72× (1.17×), one `FUTEX_WAKE` per
//! 64 waiters instead of one per waiter; the run-to-run spread there is
//! ±50% for every lock. On 2 cores, nine pairs: 0.94–1.21× std against
//! 0.99–1.53×. What it costs: a waiter's sleep is a `futex_waitv` on two
//! words, not a `futex_wait` on one. The bounded queue (no `notify_all`)
//! on 2 cores, three pairs: 0.91–1.73× the cascade's items per second;
//! on 16 cores, one pair: 0.77–0.98× (still 1.48–9.6× std).
//!
//! A `notify_all` under a held mutex keeps the cascade (or, on two CPUs,
//! the requeue chain): woken at once, the waiters would only sleep again
//! on the held mutex. Without `futex_waitv` (before Linux 5.16) the
//! broadcast stays off.

use std::ptr::NonNull;

use super::RawCondvar;
use crate::futex::FutexTable;
use crate::sync::{AtomicU32, Ordering};

/// Whether this process's condvars broadcast (module docs): read once.
#[cfg(not(loom))]
pub(super) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("HERDLESS_CONDVAR_BROADCAST").map_or(true, |v| v.trim() != "0")
            && crate::sys::either_supported()
    })
}

impl RawCondvar {
    /// Whether this process's condvars wake every waiter of a free mutex
    /// with one system call on `notify_all` (module docs of
    /// `condvar/broadcast.rs`): the default where the kernel has
    /// `futex_waitv` (Linux 5.16), off with `HERDLESS_CONDVAR_BROADCAST=0`,
    /// then a cascade of wakes, one per waiter. Read once per process; a
    /// measurement that counts system calls asks it. (Under loom: `false`,
    /// each model's condvar says for itself.)
    ///
    /// # Examples
    /// ```
    /// use herdless::RawCondvar;
    ///
    /// let wakes = if RawCondvar::broadcast_enabled() {
    ///     "one FUTEX_WAKE"
    /// } else {
    ///     "a FUTEX_WAKE per waiter"
    /// };
    /// println!("notify_all to a free mutex: {wakes}");
    /// ```
    pub fn broadcast_enabled() -> bool {
        #[cfg(loom)]
        {
            false
        }
        #[cfg(not(loom))]
        {
            enabled()
        }
    }

    /// Whether this condvar's waiters sleep on `epoch` too, and its
    /// `notify_all` to a free mutex broadcasts. Under loom each condvar
    /// says (`RawCondvar::with_broadcast`), so that the models run both
    /// ways.
    pub(super) fn broadcasts(&self) -> bool {
        #[cfg(loom)]
        {
            self.broadcast
        }
        #[cfg(not(loom))]
        {
            enabled()
        }
    }

    /// The word a waiter sleeps on beside its own, if this condvar
    /// broadcasts (`ParkHow::broadcast`: `epoch` lives as long as the
    /// condvar, which outlives its waiters' parks).
    pub(super) fn broadcast_word(&self) -> Option<NonNull<AtomicU32>> {
        self.broadcasts().then(|| NonNull::from(&self.epoch))
    }

    /// `notify_all` by one broadcast (module docs): every waiter queued
    /// now is granted and woken; returns how many.
    pub(super) fn notify_all_broadcast(&self) -> usize {
        FutexTable::global().unpark_all_broadcast(self.key(), &self.epoch, || {
            // Relaxed: under the condvar's bucket lock, which guards
            // `state`; every waiter of the key was dequeued.
            self.state.store(super::NO_WAITERS, Ordering::Relaxed);
        })
    }
}
