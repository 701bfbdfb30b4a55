//! `Mutex` from tasks, and from tasks and threads on one lock: `lock_async`
//! queues in the futex table's list for the mutex beside the threads.
//! Futures are polled by hand (one poll at a time, with counting wakers),
//! so no test depends on timing. Where an unlock may either wake the head
//! (`GRANTED`) or hand it the lock (the bucket's eventual-fairness period
//! was over: `HANDOFF`), a test checks what each outcome must do; the loom
//! models (`tests/loom_async.rs`) check both deterministically.
#![cfg(not(loom))]
// clippy's `await_holding_lock` takes every `lock_api` guard for a blocking
// one; herdless's mutex guard is made to live across `.await`
// (MutexAsyncExt's docs).
#![allow(clippy::await_holding_lock)]

mod async_common;

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use async_common::{
    counting_waker, guard_held_across_an_await, poll_once, runtime, tasks_and_threads, wait_until,
};
use herdless::*;

#[test]
fn a_task_queued_behind_a_thread_holder_is_woken_by_its_unlock() {
    let m = Mutex::new(0);
    let held = m.lock();
    let (counter, waker) = counting_waker();
    let mut fut = pin!(m.lock_async());
    assert!(poll_once(fut.as_mut(), &waker).is_pending());
    assert_eq!(m.waiters(), 1, "the task waits in the mutex's queue");
    drop(held);
    assert_eq!(counter.wakes(), 1, "the unlock woke the task once");
    assert_eq!(m.waiters(), 0);
    match poll_once(fut.as_mut(), &waker) {
        Poll::Ready(mut guard) => *guard += 1,
        Poll::Pending => panic!("woken, and nobody else took the lock"),
    }
    assert_eq!(*m.lock(), 1);
}

#[test]
fn a_thread_waits_for_a_guard_a_task_holds_across_an_await() {
    let m = Arc::new(Mutex::new(Vec::new()));
    guard_held_across_an_await(
        |gate| {
            let m = m.clone();
            async move {
                let mut guard = m.lock_async().await;
                guard.push("task");
                gate.hold().await; // the guard is held across this await
                guard.push("task again");
            }
        },
        {
            let m = m.clone();
            move || m.lock().push("thread")
        },
        || m.waiters() == 1,
    );
    assert_eq!(*m.lock(), ["task", "task again", "thread"]);
}

#[test]
fn a_guard_locked_on_one_thread_is_unlocked_on_another() {
    fn assert_send<T: Send>(_: &T) {}
    let m = Mutex::new(0);
    let guard = m.lock();
    assert_send(&guard);
    let (counter, waker) = counting_waker();
    let mut fut = pin!(m.lock_async());
    assert!(poll_once(fut.as_mut(), &waker).is_pending());
    thread::scope(|s| s.spawn(move || drop(guard)).join().unwrap());
    assert_eq!(
        counter.wakes(),
        1,
        "the unlock on the other thread woke the task"
    );
    let Poll::Ready(mut guard) = poll_once(fut.as_mut(), &waker) else {
        panic!("the lock is free");
    };
    *guard += 1;
    drop(guard);
    assert_eq!(*m.lock(), 1);
}

#[test]
fn threads_and_tasks_are_handed_the_lock_in_arrival_order_by_fair_unlocks() {
    let m = Arc::new(Mutex::new(Vec::new()));
    let held = m.lock();
    let (counter_a, waker_a) = counting_waker();
    let mut a = pin!(m.lock_async());
    assert!(poll_once(a.as_mut(), &waker_a).is_pending());
    let b = thread::spawn({
        let m = m.clone();
        move || {
            let mut g = m.lock();
            g.push("b");
            MutexGuard::unlock_fair(g);
        }
    });
    wait_until("the thread queues second", || m.waiters() == 2);
    let (counter_c, waker_c) = counting_waker();
    let mut c = pin!(m.lock_async());
    assert!(poll_once(c.as_mut(), &waker_c).is_pending());
    assert_eq!(m.waiters(), 3);
    MutexGuard::unlock_fair(held);
    assert_eq!(
        (counter_a.wakes(), counter_c.wakes()),
        (1, 0),
        "the head is handed the lock"
    );
    assert!(m.is_locked(), "handed over still held");
    let Poll::Ready(mut g) = poll_once(a.as_mut(), &waker_a) else {
        panic!("a was handed the lock");
    };
    g.push("a");
    MutexGuard::unlock_fair(g);
    b.join().unwrap();
    assert_eq!(counter_c.wakes(), 1, "b's fair unlock handed c the lock");
    let Poll::Ready(mut g) = poll_once(c.as_mut(), &waker_c) else {
        panic!("c was handed the lock");
    };
    g.push("c");
    drop(g);
    assert_eq!(*m.lock(), ["a", "b", "c"]);
    assert_eq!(m.waiters(), 0);
}

/// A woken task that finds the lock taken by a running thread goes back
/// to the head of the queue (ahead of the thread asleep behind it), and
/// the taker's unlock wakes it again.
#[test]
fn a_woken_task_that_finds_the_lock_taken_parks_again_at_the_head() {
    let m = Arc::new(Mutex::new(Vec::new()));
    let held = m.lock();
    let (counter, waker) = counting_waker();
    let mut task = pin!(m.lock_async());
    assert!(poll_once(task.as_mut(), &waker).is_pending());
    let sleeper = thread::spawn({
        let m = m.clone();
        move || m.lock().push("thread")
    });
    wait_until("the thread sleeps behind the task", || m.waiters() == 2);
    drop(held);
    assert_eq!(counter.wakes(), 1);
    assert_eq!(m.waiters(), 1, "only the head was woken");
    match m.try_lock() {
        None => {
            // The unlock handed the task the lock (eventual fairness):
            // held for it, and its next poll returns it.
            let Poll::Ready(mut g) = poll_once(task.as_mut(), &waker) else {
                panic!("handed the lock, but not ready");
            };
            g.push("task");
        }
        Some(mut barger) => {
            // Woken, and the lock taken by a running thread first: the
            // task's one try fails and it parks again, at the head.
            assert!(poll_once(task.as_mut(), &waker).is_pending());
            assert_eq!(m.waiters(), 2, "queued again, ahead of the thread");
            barger.push("barger");
            drop(barger);
            assert_eq!(counter.wakes(), 2, "the taker's unlock woke the task again");
            let Poll::Ready(mut g) = poll_once(task.as_mut(), &waker) else {
                panic!("woken again, and the lock free");
            };
            g.push("task");
        }
    }
    sleeper.join().unwrap();
    let order = m.lock().clone();
    assert_eq!(&order[order.len() - 2..], ["task", "thread"]);
}

/// A woken (or handed-over) future dropped before it ran passes what it
/// was given on: the thread asleep behind it gets the lock. `unlock_fair`
/// makes it a hand-off; a plain unlock is a wake (or, once per fairness
/// period, a hand-off too).
#[test]
fn a_future_dropped_after_an_unlock_chose_it_passes_the_lock_on() {
    for fair in [false, true] {
        let m = Arc::new(Mutex::new(0));
        let held = m.lock();
        let (counter, waker) = counting_waker();
        let mut fut = Box::pin(m.lock_async());
        assert!(poll_once(fut.as_mut(), &waker).is_pending());
        let next = thread::spawn({
            let m = m.clone();
            move || *m.lock() += 1
        });
        wait_until("the thread sleeps behind the task", || m.waiters() == 2);
        if fair {
            MutexGuard::unlock_fair(held);
            assert!(m.is_locked(), "handed to the task, still held");
        } else {
            drop(held);
        }
        assert_eq!(counter.wakes(), 1);
        assert_eq!(m.waiters(), 1, "the thread still sleeps behind the task");
        drop(fut); // cancelled after the unlock chose it
        next.join().unwrap();
        assert_eq!(*m.lock(), 1);
        assert_eq!(m.waiters(), 0);
    }
}

#[test]
fn a_future_dropped_before_it_was_woken_leaves_the_queue() {
    let m = Mutex::new(0);
    let held = m.lock();
    let (counters, wakers): (Vec<_>, Vec<_>) = (0..3).map(|_| counting_waker()).unzip();
    let mut futs: Vec<_> = (0..3).map(|_| Box::pin(m.lock_async())).collect();
    for (f, w) in futs.iter_mut().zip(&wakers) {
        assert!(poll_once(f.as_mut(), w).is_pending());
    }
    assert_eq!(m.waiters(), 3);
    drop(futs.remove(1)); // from the middle
    assert_eq!(m.waiters(), 2);
    drop(held);
    assert_eq!(
        counters.iter().map(|c| c.wakes()).collect::<Vec<_>>(),
        [1, 0, 0],
        "one wake, to the head"
    );
    let Poll::Ready(g) = poll_once(futs[0].as_mut(), &wakers[0]) else {
        panic!("the head was woken onto a free lock");
    };
    drop(g);
    assert_eq!(counters[2].wakes(), 1, "its unlock woke the last one");
    assert!(poll_once(futs[1].as_mut(), &wakers[2]).is_ready());
    assert_eq!(m.waiters(), 0);

    // The last sleeper leaving clears PARKED: the next unlock is a plain
    // one, and a later waiter is still woken by its holder's unlock.
    let held = m.lock();
    let mut gone = Box::pin(m.lock_async());
    assert!(poll_once(gone.as_mut(), &wakers[0]).is_pending());
    drop(gone);
    assert_eq!(m.waiters(), 0);
    drop(held);
    let held = m.lock();
    let mut fut = pin!(m.lock_async());
    assert!(poll_once(fut.as_mut(), &wakers[1]).is_pending());
    drop(held);
    assert_eq!(counters[1].wakes(), 1);
    assert!(poll_once(fut.as_mut(), &wakers[1]).is_ready());
}

#[test]
fn polling_with_a_new_waker_moves_the_wakeup_to_it() {
    let m = Mutex::new(0);
    let held = m.lock();
    let (old, old_waker) = counting_waker();
    let (new, new_waker) = counting_waker();
    let mut fut = pin!(m.lock_async());
    assert!(poll_once(fut.as_mut(), &old_waker).is_pending());
    assert!(poll_once(fut.as_mut(), &new_waker).is_pending());
    drop(held);
    assert_eq!((old.wakes(), new.wakes()), (0, 1));
    assert!(poll_once(fut.as_mut(), &new_waker).is_ready());
}

/// async-lock #91: futures polled out of order. A future does nothing
/// until polled; one polled once and then set aside holds its place and,
/// once an unlock chose it, holds back the sleepers queued behind it (a
/// wake), or the lock (a hand-off), until it is polled or dropped, and
/// nothing else.
#[test]
fn a_future_set_aside_after_one_poll_holds_up_only_what_fifo_hand_off_says() {
    let m = Arc::new(Mutex::new(0));
    // Created, never polled: no effect at all.
    let never_polled = m.lock_async();
    assert!(m.try_lock().is_some(), "an unpolled future holds nothing");

    let held = m.lock();
    let (counter, waker) = counting_waker();
    let mut set_aside = Box::pin(m.lock_async());
    assert!(poll_once(set_aside.as_mut(), &waker).is_pending());
    let behind = thread::spawn({
        let m = m.clone();
        move || *m.lock() += 1
    });
    wait_until("a thread sleeps behind the future", || m.waiters() == 2);
    drop(held); // chooses the future, which is not polled again
    assert_eq!(counter.wakes(), 1);
    if let Some(mut g) = m.try_lock() {
        // A wake: the lock stays free for running threads and tasks ...
        *g += 10;
        drop(g);
        let (_, other) = counting_waker();
        let mut running = pin!(m.lock_async());
        let Poll::Ready(mut g) = poll_once(running.as_mut(), &other) else {
            panic!("a running task takes the free lock");
        };
        *g += 10;
        drop(g);
        // ... and the sleeper behind the chosen future stays asleep.
        assert_eq!(m.waiters(), 1, "the thread behind it is held back");
    } else {
        // A hand-off: the future holds the lock until polled or dropped.
        assert_eq!(m.waiters(), 1, "the thread behind it waits for the lock");
    }
    drop(set_aside); // passes the wake (or the lock) on
    behind.join().unwrap();
    let total = *m.lock();
    assert!(total == 1 || total == 21, "{total}");
    assert_eq!(m.waiters(), 0);
    drop(never_polled);
}

/// The async condition wait: `WaitQueue::wait_unlocked_async` takes the
/// mutex guard, queues the task, then unlocks; a notifier that changes the
/// state under the mutex and then wakes cannot slip in between.
#[test]
fn a_task_waits_for_a_condition_under_the_mutex_with_wait_unlocked_async() {
    struct Shared {
        jobs: Mutex<Vec<u32>>,
        posted: WaitQueue,
    }
    let shared = Arc::new(Shared {
        jobs: Mutex::new(Vec::new()),
        posted: WaitQueue::new(),
    });
    let rt = runtime();
    const JOBS: u32 = 200;
    let consumer = rt.spawn({
        let shared = shared.clone();
        async move {
            let mut sum = 0;
            for _ in 0..JOBS {
                let mut jobs = shared.jobs.lock_async().await;
                while jobs.is_empty() {
                    shared.posted.wait_unlocked_async(jobs).await;
                    jobs = shared.jobs.lock_async().await;
                }
                sum += jobs.pop().unwrap();
            }
            sum
        }
    });
    for job in 1..=JOBS {
        shared.jobs.lock().push(job);
        shared.posted.wake_up(1);
    }
    assert_eq!(rt.block_on(consumer).unwrap(), JOBS * (JOBS + 1) / 2);
}

#[test]
#[cfg_attr(miri, ignore = "2,400 lock rounds on a runtime: hours under Miri")]
fn tasks_and_threads_with_cancellations_count_exactly_on_a_multi_threaded_runtime() {
    let m = Arc::new(Mutex::new(0u64));
    const TASKS: u64 = 8;
    const THREADS: u64 = 2;
    const ROUNDS: u64 = 300;
    tasks_and_threads(
        (TASKS, THREADS, ROUNDS),
        {
            let m = m.clone();
            move |i| {
                let m = m.clone();
                async move {
                    if i % 2 == 0 {
                        // Some tries time out: cancellations at every stage.
                        let lock = m.lock_async();
                        match tokio::time::timeout(Duration::from_micros(50), lock).await {
                            Ok(mut g) => {
                                *g += 1;
                                true
                            }
                            Err(_) => false,
                        }
                    } else {
                        let mut g = m.lock_async().await;
                        let seen = *g;
                        tokio::task::yield_now().await; // held across an await
                        assert_eq!(*g, seen, "nobody else got in");
                        *g += 1;
                        true
                    }
                }
            }
        },
        {
            let m = m.clone();
            move |i, r| {
                let mut g = m.lock();
                *g += 1;
                if (r + i) % 7 == 0 {
                    MutexGuard::unlock_fair(g);
                }
            }
        },
    );
    assert_eq!(*m.lock(), (TASKS + THREADS) * ROUNDS);
    assert_eq!(m.waiters(), 0, "no record left behind");
}

#[test]
fn the_lock_future_and_its_guard_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let m = Mutex::new(1);
    let fut = async {
        let g = m.lock_async().await;
        std::future::ready(()).await;
        drop(g);
    };
    assert_send(&fut);
    assert_send(&m.lock_async());
    assert_send(&m.lock());
}
