//! `notify_all` on many CPUs: a wake cascade instead of a requeue chain.
//!
//! Moving every waiter onto the mutex (wait morphing) wakes each of them
//! exactly once, but one after another: each is woken by the previous
//! one's unlock, so the last runs N wake latencies after the notify. On 16
//! cores (issue 23) that was 1.35–1.6 ms for 64 waiters, 20–25 µs a step,
//! against 112–139 µs for std's condvar, whose single `FUTEX_WAKE` wakes
//! them all at once and lets them contend.
//!
//! The cascade keeps "each waiter woken once" and gets the parallelism:
//! `notify_all` moves the waiters onto a *batch key* of their own (an odd
//! number: never the address of a 32-bit word), wakes [`fan_out`] of them,
//! and every waiter woken off a batch key wakes `fan_out` more before it
//! takes its mutex. After k rounds `fan_out^k` waiters are awake. Only the
//! waiters queued at the notify are in the batch, so nobody is woken who
//! was not notified, and the counts stay exact. A waiter that times out in
//! the batch leaves it (it was notified: it returns as such); the others
//! are still woken, since every woken waiter wakes on while any remain.
//!
//! On two CPUs the requeue chain stays (64 runnable waiters would only
//! fight over two CPUs); `HERDLESS_CONDVAR_FANOUT` overrides the choice
//! (0: requeue).

use crate::sync::{AtomicUsize, Ordering};

/// Waiters a woken batch member wakes in turn (0: no cascade, requeue).
/// Under loom: 1, so the models check the cascade (a chain is its
/// smallest form).
#[cfg(loom)]
pub(super) fn fan_out() -> usize {
    1
}

/// Waiters a woken batch member wakes in turn (0: no cascade, requeue).
#[cfg(not(loom))]
pub(super) fn fan_out() -> usize {
    static FAN_OUT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FAN_OUT.get_or_init(|| {
        if let Some(n) = std::env::var("HERDLESS_CONDVAR_FANOUT")
            .ok()
            .and_then(|v| v.trim().parse().ok())
        {
            return n;
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus > 2 {
            4
        } else {
            0
        }
    })
}

/// A key no futex word has and no other batch has at the same time.
pub(super) fn batch_key() -> usize {
    #[cfg(not(loom))]
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    #[cfg(loom)]
    loom::lazy_static! {
        static ref NEXT: AtomicUsize = AtomicUsize::new(0);
    }
    // Relaxed: only uniqueness matters. After 2^63 broadcasts a key comes
    // round again; by then its batch has long been woken.
    (NEXT.fetch_add(1, Ordering::Relaxed) << 1) | 1
}

/// Whether `key` is a batch key (futex words are 4-aligned).
pub(super) fn is_batch(key: usize) -> bool {
    key & 1 == 1
}
