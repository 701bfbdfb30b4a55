//! The marks others put on a mutex word under its bucket lock: the
//! condvar's PARKED before it moves waiters onto the word (ARCHITECTURE
//! contract 5), and the clear of PARKED by whoever removes the word's last
//! sleeper (a timed-out thread, a dropped task future, a waking unlock).
//! The protocol they keep is `raw.rs`'s ("Why no sleeper is left behind").
//! Also the condvar's MONITOR, which no lock guards: a hint for the spin
//! policy (`spin.rs`).

use super::raw::{RawMutex, LOCKED, MONITOR, PARKED};
use crate::sync::{AtomicU32, Ordering};

impl RawMutex {
    /// If the mutex with futex word `word` is held, marks it PARKED so that
    /// its holder's unlock takes the slow path and wakes a sleeper; returns
    /// whether it is held. The condvar calls it under the bucket locks of a
    /// requeue, before it moves waiters onto the word (ARCHITECTURE
    /// contract 5).
    pub(crate) fn mark_parked_if_locked(word: &AtomicU32) -> bool {
        // Relaxed: the holder's unlock is a `fetch_sub` that reads PARKED
        // once we set it, and its wake takes the word's bucket lock, which
        // we hold: it runs after our requeue and finds the waiters. If the
        // unlock came first, we read the lock free and the requeue wakes a
        // waiter instead.
        let mut state = word.load(Ordering::Relaxed);
        loop {
            if state & LOCKED == 0 {
                return false;
            }
            if state & PARKED != 0 {
                return true;
            }
            match word.compare_exchange_weak(
                state,
                state | PARKED,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Whether the mutex with futex word `word` is held, at a glance (no
    /// mark): the condvar's choice between its broadcast and its cascade
    /// (`condvar/broadcast.rs`), which either way wakes every waiter once.
    pub(crate) fn is_locked(word: &AtomicU32) -> bool {
        // Relaxed: a hint; neither answer can lose a waiter.
        word.load(Ordering::Relaxed) & LOCKED != 0
    }

    /// Marks the word PARKED after a condvar moved waiters onto a free
    /// mutex: whoever takes it next unlocks through the slow path and
    /// wakes them. Called under the word's bucket lock.
    pub(crate) fn mark_parked(word: &AtomicU32) {
        // Relaxed: as in `mark_parked_if_locked`.
        word.fetch_or(PARKED, Ordering::Relaxed);
    }

    /// Marks the mutex MONITOR, once: a condvar waits with it. The caller
    /// holds the mutex.
    pub(crate) fn mark_monitor(&self) {
        // Relaxed: MONITOR orders nothing; the protocol never reads it, and
        // every other update of the word keeps it (a `fetch_*` or a CAS
        // from the word as read).
        if self.word().load(Ordering::Relaxed) & MONITOR == 0 {
            self.word().fetch_or(MONITOR, Ordering::Relaxed);
        }
    }

    /// Clears PARKED when the word's last sleeper left; the caller holds
    /// the word's bucket lock.
    pub(crate) fn clear_parked(word: &AtomicU32) {
        // Relaxed: under the bucket lock, as every clear.
        word.fetch_and(!PARKED, Ordering::Relaxed);
    }
}
