//! The order in which a mutex's sleepers get the lock: first come, first
//! served, except that a thread which rarely sleeps goes ahead of the
//! others, and at most one at a time does (`mutex/rare_parker.rs`).
//!
//! Tests in a process of their own, one at a time (`SERIAL`): the futex
//! table's buckets are shared by every mutex of the process, and these
//! tests read their queue order.
#![cfg(not(loom))]

use std::sync::mpsc;
use std::thread;

use herdless::{Mutex, MutexExt, MutexGuard};

/// One test at a time: they share the table's buckets.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The test's turn (`SERIAL`), or `None` (printed) where a tuning
/// variable may change the queue order.
fn serialized() -> Option<std::sync::MutexGuard<'static, ()>> {
    if let Ok(tuning) = std::env::var("HERDLESS_MUTEX_TUNING") {
        println!("skipped: HERDLESS_MUTEX_TUNING={tuning:?} may change the queue order");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Yields until `waiters` threads sleep on `lock`.
fn until_sleeping<T>(lock: &Mutex<T>, waiters: usize) {
    while lock.waiters() < waiters {
        thread::yield_now();
    }
}

/// Takes `order` as a queued thread does, records `id`, and hands the
/// lock to the next sleeper (a fair unlock): the order of the ids is the
/// queue's.
fn served<T>(order: &Mutex<Vec<T>>, id: T) {
    let mut guard = order.lock();
    guard.push(id);
    MutexGuard::unlock_fair(guard);
}

/// Three fresh threads (none has slept on a mutex before, so each sleeps
/// rarely) queue on a held mutex one after the other. The second goes
/// ahead of the first; the third may not pass the second, which went
/// ahead itself, and queues at the tail. Fair unlocks then hand the lock
/// down the queue: 2, 1, 3. (First come, first served would give 1, 2, 3;
/// every rare thread at the head, 3, 2, 1.)
#[test]
fn a_rare_sleeper_goes_ahead_but_does_not_pass_one_that_went_ahead() {
    let Some(_serial) = serialized() else {
        return;
    };
    let order = Mutex::new(Vec::new());
    let held = order.lock();
    thread::scope(|s| {
        for id in 1..=3 {
            let order_ref = &order;
            s.spawn(move || served(order_ref, id));
            until_sleeping(&order, id);
        }
        MutexGuard::unlock_fair(held);
    });
    assert_eq!(order.into_inner(), vec![2, 1, 3]);
}

/// What a rare thread finds when the first sleeper is a thread that was
/// passed on an earlier sleep. Thread `a` sleeps first, fresh thread `b`
/// goes ahead of it, both are served; then `a` sleeps on the lock again,
/// in the same record slot (the same address), and is first, and fresh
/// thread `c` arrives. By default the bucket still holds `a`'s address as
/// the waiter already passed and takes the new sleep for it: `c` queues
/// at the tail (b, a, a again, c). Built with `--cfg
/// herdless_forget_passers` (`futex::bucket::Queue::unlink`, an
/// experiment) the bucket forgot `a` when it was served, and `c` goes
/// ahead of the new sleep (b, a, c, a again).
#[test]
fn a_rare_thread_meets_a_first_sleeper_that_was_passed_before() {
    let Some(_serial) = serialized() else {
        return;
    };
    let order = Mutex::new(Vec::new());
    let held = order.lock();
    let (again, again_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let take = |name: &'static str| served(&order, name);
        s.spawn(move || {
            take("a");
            again_rx.recv().expect("the test sends once");
            take("a again");
        });
        until_sleeping(&order, 1);
        s.spawn(move || take("b"));
        until_sleeping(&order, 2);
        MutexGuard::unlock_fair(held);
        // Until both were served, then hold the lock again.
        let held = loop {
            let guard = order.lock();
            if guard.len() == 2 {
                break guard;
            }
            drop(guard);
            thread::yield_now();
        };
        again.send(()).expect("`a` waits for it");
        until_sleeping(&order, 1);
        s.spawn(move || take("c"));
        until_sleeping(&order, 2);
        MutexGuard::unlock_fair(held);
    });
    let expected = if cfg!(herdless_forget_passers) {
        ["b", "a", "c", "a again"]
    } else {
        ["b", "a", "a again", "c"]
    };
    assert_eq!(order.into_inner(), expected);
}
