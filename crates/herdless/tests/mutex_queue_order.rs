//! The order in which a mutex's sleepers get the lock: first come, first
//! served, except that a thread which rarely sleeps goes ahead of the
//! others, and at most one at a time does (`mutex/rare_parker.rs`).
//!
//! One test in its own process: the futex table's buckets are shared by
//! every mutex of the process, and this test reads their queue order.
#![cfg(not(loom))]

use std::thread;

use herdless::{Mutex, MutexExt, MutexGuard};

/// Three fresh threads (none has slept on a mutex before, so each sleeps
/// rarely) queue on a held mutex one after the other. The second goes
/// ahead of the first; the third may not pass the second, which went
/// ahead itself, and queues at the tail. Fair unlocks then hand the lock
/// down the queue: 2, 1, 3. (First come, first served would give 1, 2, 3;
/// every rare thread at the head, 3, 2, 1.)
#[test]
fn a_rare_sleeper_goes_ahead_but_does_not_pass_one_that_went_ahead() {
    if let Ok(tuning) = std::env::var("HERDLESS_MUTEX_TUNING") {
        println!("skipped: HERDLESS_MUTEX_TUNING={tuning:?} may change the queue order");
        return;
    }
    let order = Mutex::new(Vec::new());
    let held = order.lock();
    thread::scope(|s| {
        for id in 1..=3 {
            s.spawn({
                let order = &order;
                move || {
                    let mut guard = order.lock();
                    guard.push(id);
                    MutexGuard::unlock_fair(guard);
                }
            });
            while order.waiters() < id {
                thread::yield_now(); // until the thread sleeps on the lock
            }
        }
        MutexGuard::unlock_fair(held);
    });
    assert_eq!(order.into_inner(), vec![2, 1, 3]);
}
