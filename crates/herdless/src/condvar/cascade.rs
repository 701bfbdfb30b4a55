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
//! On two CPUs a `notify_all` under the lock keeps the requeue chain: the
//! waiters need the mutex its caller holds, and woken at once they would
//! only sleep again on it (fan-out 8 there: 1,784 µs against 840 for 64
//! waiters, 1.84 futex wakes per waiter). A `notify_all` that finds the
//! mutex free (after the unlock) cascades, with a fan-out of 8: measured on
//! 2 cores (stop 36, the lab's `notify_all` table, two interleaved rounds),
//! the last of 64 waiters held the mutex after 378 µs, against 945–1,081
//! µs with the chain and std's 268–382 (fan-out 4, 16 and 64: 391–518).
//! Since stop 41 a free mutex's waiters get the broadcast instead where
//! the kernel has `futex_waitv` (`broadcast.rs`): the cascade serves a
//! free mutex only where that is off.
//! Which way it goes is read under the bucket locks, where the condvar
//! knows its mutex; the loom models check both ways and the choice (under
//! loom the two-CPU rule applies, with a fan-out of 1).
//!
//! `HERDLESS_CONDVAR_FANOUT=N` sets the fan-out of every `notify_all`
//! (held mutex or free); 0 turns the cascade off (the requeue chain
//! always).

use crate::sync::{AtomicUsize, Ordering};

/// How `notify_all` wakes: the fan-out of its cascades (0: it never
/// cascades, the requeue chain always), and whether it cascades when the
/// mutex is held too (else only when it finds the mutex free).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FanOut {
    /// Waiters the notifier, and then each woken batch member, wakes.
    pub(super) width: usize,
    /// Whether a `notify_all` under a held mutex cascades too.
    pub(super) when_held: bool,
}

impl FanOut {
    /// The choice for `cpus` CPUs, or `HERDLESS_CONDVAR_FANOUT`'s value
    /// (not under loom, whose choice is fixed: `fan_out`).
    #[cfg_attr(loom, allow(dead_code))]
    fn choose(cpus: usize, forced: Option<usize>) -> FanOut {
        match forced {
            Some(width) => FanOut {
                width,
                when_held: true,
            },
            None if cpus > 2 => FanOut {
                width: 4,
                when_held: true,
            },
            None => FanOut {
                width: 8,
                when_held: false,
            },
        }
    }
}

/// How this process's `notify_all`s wake (module docs). Under loom: the
/// two-CPU choice with a fan-out of 1 (a chain is a cascade's smallest
/// form), so the models check both ways and the choice between them: the
/// requeue onto a held mutex, and the cascade when the mutex is free.
#[cfg(loom)]
pub(super) fn fan_out() -> FanOut {
    FanOut {
        width: 1,
        when_held: false,
    }
}

/// How this process's `notify_all`s wake (module docs).
#[cfg(not(loom))]
pub(super) fn fan_out() -> FanOut {
    static FAN_OUT: std::sync::OnceLock<FanOut> = std::sync::OnceLock::new();
    *FAN_OUT.get_or_init(|| {
        let forced = std::env::var("HERDLESS_CONDVAR_FANOUT")
            .ok()
            .and_then(|v| v.trim().parse().ok());
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        FanOut::choose(cpus, forced)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn two_cpus_cascade_only_to_a_free_mutex_and_more_cpus_always() {
        let two = FanOut::choose(2, None);
        assert!(two.width > 0 && !two.when_held);
        let many = FanOut::choose(16, None);
        assert!(many.width > 0 && many.when_held);
        assert_eq!(FanOut::choose(2, Some(0)).width, 0, "0 turns it off");
        assert!(FanOut::choose(2, Some(3)).when_held);
    }
}
