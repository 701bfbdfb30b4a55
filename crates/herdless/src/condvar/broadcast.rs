//! `notify_all` to a free mutex with one system call: an experiment for
//! many CPUs (`HERDLESS_CONDVAR_BROADCAST=1`, off by default).
//!
//! The cascade (`cascade.rs`) wakes 64 waiters with 64 `FUTEX_WAKE`s,
//! each on the waiter's own word, a few waiters at a time; std's condvar
//! wakes all of them with one. On 16 cores (issue 23, stop 40) the cascade
//! got the last of 64 waiters holding the mutex 0.92–1.88× as late as
//! std; on 2 cores 1.0–1.2×. With the broadcast, every waiter sleeps on
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
        std::env::var("HERDLESS_CONDVAR_BROADCAST").is_ok_and(|v| v.trim() == "1")
            && crate::sys::either_supported()
    })
}

impl RawCondvar {
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
