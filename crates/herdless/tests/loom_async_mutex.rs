//! loom models of tasks on the mutex, beside threads, in one futex bucket
//! list (`mutex/lock_async.rs`, ARCHITECTURE contracts 5 and 13): a thread
//! and a task contending, a woken or handed-over task future dropped, a
//! waker update racing the wake, and a woken task that finds the lock
//! taken and parks again at the head.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p herdless --release --test loom_async_mutex`.
//! Tasks are loom threads polling by hand (`loom_common`). Under loom the
//! table's eventual fairness never fires, so a plain unlock wakes
//! (`GRANTED`) unless the task it dequeues asked for the lock (a task that
//! was woken in vain and parked again): then, as after `release_fair`, it
//! hands the lock over (`HANDOFF`). Both paths are explored
//! deterministically. Each model names the line
//! it pins (its mutation check: break that line, see the model fail).
#![cfg(loom)]

mod loom_common;

use std::pin::pin;

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

use loom_common::{
    block_on, bump_and_release, lock_bump_and_release, model, poll_once, run_task,
    run_task_with_a_new_waker_after_one_poll, task_waker,
};

use herdless::{FutexTable, RawMutex};

/// A thread and a task contend for a mutex the main thread holds: each
/// takes it once; the unlocks wake one sleeper per hand-off whichever of
/// the two sleeps, and nobody is stranded (a loom deadlock) or gets in
/// twice (the count). Mutation check: a task park without `validate_park`
/// (queueing whatever the word says) deadlocks this model.
#[test]
fn a_thread_and_a_task_contending_never_lose_a_wakeup() {
    model(2, || {
        let shared = Arc::new((RawMutex::new(), AtomicU32::new(0)));
        shared.0.acquire();
        let task = thread::spawn({
            let shared = shared.clone();
            move || {
                let (m, count) = &*shared;
                run_task(m.lock_async());
                bump_and_release(m, count, false);
            }
        });
        let other = thread::spawn({
            let shared = shared.clone();
            move || {
                let (m, count) = &*shared;
                lock_bump_and_release(m, count, false);
            }
        });
        let (m, count) = &*shared;
        bump_and_release(m, count, false);
        task.join().unwrap();
        other.join().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 3);
        assert!(!m.is_held());
        assert_eq!(FutexTable::global().total_waiters(), 0);
    });
}

/// A task future queued at the head is dropped while an unlock races to
/// wake it, with a thread asleep behind it. Either it left first (the
/// unlock wakes the thread), or the unlock chose it (it owns WAKING, which
/// keeps every other sleeper asleep) and its drop gives WAKING up and
/// wakes the thread. Mutation check: a drop that ignores a `GRANTED` that
/// won (no `give_up_waking`) deadlocks the thread.
#[test]
fn a_woken_task_future_dropped_passes_waking_on() {
    model(2, || head_task_future_dropped_while_unlocked(false));
}

/// A fair unlock hands the lock, still held, to the task future at the
/// head while the future is dropped, with a thread asleep behind it: the
/// future either left first (the lock goes to the thread) or holds the
/// lock and its drop releases it, which wakes the thread. Mutation check:
/// a drop that ignores a `HANDOFF` that won (no release) deadlocks the
/// thread.
#[test]
fn a_handoff_to_a_dropped_task_future_releases_the_lock_to_the_next_waiter() {
    model(2, || head_task_future_dropped_while_unlocked(true));
}

/// The two models above: a task future queued at the head of a held
/// mutex, a thread asleep behind it, and the future dropped while another
/// thread unlocks (fairly if `fair`).
fn head_task_future_dropped_while_unlocked(fair: bool) {
    let m = Arc::new(RawMutex::new());
    m.acquire();
    let (_, waker) = task_waker();
    let mut fut = Box::pin(m.lock_async());
    assert!(poll_once(fut.as_mut(), &waker).is_pending());
    let sleeper = thread::spawn({
        let m = m.clone();
        move || {
            m.acquire();
            // SAFETY: taken just above.
            unsafe { m.release() };
        }
    });
    let unlocker = thread::spawn({
        let m = m.clone();
        // SAFETY: the hold taken above; holds belong to no thread.
        move || unsafe {
            if fair {
                m.release_fair();
            } else {
                m.release();
            }
        }
    });
    drop(fut);
    unlocker.join().unwrap();
    sleeper.join().unwrap();
    assert!(!m.is_held());
    assert_eq!(FutexTable::global().total_waiters(), 0);
}

/// The task re-polls with a new waker while the unlock wakes it: the wake
/// clones the old waker and the update sees the grant under the bucket
/// lock, or the wake clones the new one. Mutation check: storing the new
/// waker without looking at the grant under the bucket lock deadlocks
/// this model.
#[test]
fn a_task_waker_updated_while_the_unlock_wakes_it_is_never_lost() {
    for fair in [false, true] {
        model(3, move || {
            let m = Arc::new(RawMutex::new());
            m.acquire();
            let task = thread::spawn({
                let m = m.clone();
                move || {
                    run_task_with_a_new_waker_after_one_poll(m.lock_async());
                    // SAFETY: the future returned: we hold the lock.
                    unsafe { m.release() };
                }
            });
            // SAFETY: taken above.
            unsafe {
                if fair {
                    m.release_fair();
                } else {
                    m.release();
                }
            }
            task.join().unwrap();
            assert!(!m.is_held());
            assert_eq!(FutexTable::global().total_waiters(), 0);
        });
    }
}

/// A task queued at the head, a thread asleep behind it: the unlock wakes
/// the task (it owns WAKING), a running thread takes the lock first, and
/// the task's one try finds it held: it parks again at the *head*, giving
/// WAKING back in its validation and asking for the lock, and the taker's
/// unlock hands it the lock (or wakes it, if a thread took the lock in
/// between). The task gets the lock before the thread behind it, and
/// nobody is stranded. Mutation checks: a task that parks again without clearing
/// WAKING deadlocks this model; one that parks again at the tail lets the
/// thread in first (the order assertion).
#[test]
fn a_woken_task_that_finds_the_lock_taken_parks_again_at_the_head() {
    model(2, || {
        let shared = Arc::new((RawMutex::new(), AtomicBool::new(false), AtomicU32::new(0)));
        shared.0.acquire();
        let task = thread::spawn({
            let shared = shared.clone();
            move || {
                let (m, queued, order) = &*shared;
                let (wake, waker) = task_waker();
                let mut fut = pin!(m.lock_async());
                assert!(poll_once(fut.as_mut(), &waker).is_pending());
                queued.store(true, Ordering::Release);
                block_on(fut, &wake, &waker);
                // Bit 0: the task got in; bit 1: the thread did.
                assert_eq!(
                    order.fetch_or(1, Ordering::Relaxed),
                    0,
                    "the task goes first"
                );
                // SAFETY: the future returned: we hold the lock.
                unsafe { m.release() };
            }
        });
        let (m, queued, order) = &*shared;
        while !queued.load(Ordering::Acquire) {
            thread::yield_now();
        }
        let behind = thread::spawn({
            let shared = shared.clone();
            move || {
                let (m, _, order) = &*shared;
                m.acquire();
                order.fetch_or(2, Ordering::Relaxed);
                // SAFETY: taken just above.
                unsafe { m.release() };
            }
        });
        while m.waiters() < 2 {
            thread::yield_now();
        }
        // SAFETY: taken above.
        unsafe { m.release() };
        // A running thread takes the lock ahead of the woken task (or
        // queues, if the task was quicker).
        m.acquire();
        // SAFETY: taken just above.
        unsafe { m.release() };
        task.join().unwrap();
        behind.join().unwrap();
        assert_eq!(order.load(Ordering::Relaxed), 3);
        assert!(!m.is_held());
        assert_eq!(FutexTable::global().total_waiters(), 0);
    });
}
