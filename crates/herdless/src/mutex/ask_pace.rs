//! How often a thread may ask for a mutex when every thread may
//! (`spin_ask.rs`, `SpinAsk::Paced`): at most once per `ask_gap` per thread.
//! An experiment for the slowest busy thread's share on many CPUs (issue
//! 23), off by default.
//!
//! Every thread asking (`SpinAsk::Every`) gave the slowest of 16–32 busy
//! threads a larger share on 16 cores but cut the acquisitions per second
//! to a third (stop 44): with a thread asking at nearly every unlock, every
//! acquisition was a hand-off to another CPU. Paced, each thread still
//! gets the lock handed to it (and, on a short critical section, a run of
//! acquisitions from there) at least once per gap while it loses the
//! races, but the hand-offs number at most one per gap per thread: 32
//! threads with a 50 µs gap, at most 640,000 a second, against the 20–30
//! million acquisitions a second of the busy rows. Measured on 16 cores
//! (stop 45), that was still too many: the busy rows fell to 0.73–0.77×,
//! and rare threads asking alone (the default) gave the occasional locker
//! a shorter tail at no cost (`spin.rs` has both).
//!
//! The clock is read only where the thread would otherwise park: once its
//! spin budget is spent with nobody else asking.

use std::time::Duration;

#[cfg(not(loom))]
use std::cell::Cell;
#[cfg(not(loom))]
use std::time::Instant;

#[cfg(not(loom))]
std::thread_local! {
    /// When this thread last asked for a mutex (any mutex).
    static LAST_ASK: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Whether this thread may ask now: it has not asked within `gap`. A `true`
/// answer is recorded as an ask (whether or not the caller's request then
/// goes through). Under loom always `true`: the models explore the protocol,
/// not the pacing.
pub(super) fn may_ask_now(gap: Duration) -> bool {
    #[cfg(loom)]
    {
        let _ = gap;
        true
    }
    #[cfg(not(loom))]
    {
        let now = Instant::now();
        LAST_ASK.with(|last| {
            if last
                .get()
                .is_some_and(|then| now.duration_since(then) < gap)
            {
                return false;
            }
            last.set(Some(now));
            true
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_asks_once_per_gap() {
        std::thread::spawn(|| {
            let hour = Duration::from_secs(3600);
            assert!(may_ask_now(hour), "a thread's first ask");
            assert!(!may_ask_now(hour), "within the gap");
            assert!(may_ask_now(Duration::ZERO), "a zero gap never holds back");
        })
        .join()
        .unwrap();
    }
}
