//! herdless's futex-table counters over one measurement: the difference of
//! two [`FutexStats`] snapshots of the global table that herdless's Mutex
//! and Condvar sleep in (built with the lab's default `stats` feature).
//!
//! What they stand for, per event:
//! - `waits`: calls to `FutexTable::wait`, each normally one sleep (one
//!   `FUTEX_WAIT` on the thread's parker; none if the word changed first
//!   or the wake came before the park).
//! - `wakeups`: threads a wake or a requeue dequeued, each one unpark (one
//!   `FUTEX_WAKE`, unless the thread had not parked yet).
//! - `wakes_skipped`: wakes that found nobody in the bucket and returned
//!   without a lock or a syscall: for the mutex, unlocks that saw the
//!   "sleepers may exist" state when nobody slept.
//! - `requeued`: waiters moved from a condvar to the mutex by
//!   `notify_all`.

use herdless::futex::FutexStats;

/// `after − before` (counters only grow; the snapshots are taken while
/// no thread of the measurement counts), or `None` for a family without counters (the peers)
/// or a build without them.
pub fn table_delta(before: Option<FutexStats>, after: Option<FutexStats>) -> Option<FutexStats> {
    let (b, a) = (before?, after?);
    Some(FutexStats {
        waits: a.waits.saturating_sub(b.waits),
        wakes: a.wakes.saturating_sub(b.wakes),
        wakes_skipped: a.wakes_skipped.saturating_sub(b.wakes_skipped),
        wake_lock_acquisitions: a
            .wake_lock_acquisitions
            .saturating_sub(b.wake_lock_acquisitions),
        wakeups: a.wakeups.saturating_sub(b.wakeups),
        requeues: a.requeues.saturating_sub(b.requeues),
        requeued: a.requeued.saturating_sub(b.requeued),
        contended_lock_acquisitions: a
            .contended_lock_acquisitions
            .saturating_sub(b.contended_lock_acquisitions),
        parked_ahead: a.parked_ahead.saturating_sub(b.parked_ahead),
        ahead_refused: a.ahead_refused.saturating_sub(b.ahead_refused),
    })
}
