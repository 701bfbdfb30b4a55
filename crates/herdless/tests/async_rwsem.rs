//! `RwSem` from tasks, and from tasks and threads on one lock: the async
//! forms queue in the same FIFO list as the threads. Each scenario runs on
//! all four configurations; futures are polled by hand (one poll at a
//! time, with counting wakers), so no test depends on timing.
#![cfg(not(loom))]
// clippy's `await_holding_lock` takes every `lock_api` guard for a blocking
// one; the guards of herdless's async forms are made to live across
// `.await` (RwSemAsyncExt's docs).
#![allow(clippy::await_holding_lock)]

mod async_common;

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use async_common::{
    counting_waker, guard_held_across_an_await, poll_once, tasks_and_threads, wait_until,
};
use herdless::variants::RwSemConfig;
use herdless::*;

fn each_config(test: impl Fn(RwSemConfig)) {
    for config in RwSemConfig::ALL {
        eprintln!("-- {config}");
        test(config);
    }
}

#[test]
fn a_task_queued_behind_a_thread_writer_is_granted_by_its_release() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let held = sem.write();
        let (counter, waker) = counting_waker();
        let mut fut = pin!(sem.write_async());
        assert!(poll_once(fut.as_mut(), &waker).is_pending());
        assert_eq!(sem.waiters(), 1, "the task waits in the lock's queue");
        drop(held);
        assert_eq!(counter.wakes(), 1, "the release woke the task once");
        match poll_once(fut.as_mut(), &waker) {
            Poll::Ready(mut guard) => *guard += 1,
            Poll::Pending => panic!("woken but not ready"),
        }
        assert_eq!(*sem.read(), 1);
        assert_eq!(sem.waiters(), 0);
    });
}

#[test]
fn a_thread_waits_for_a_write_guard_a_task_holds_across_an_await() {
    each_config(|config| {
        let sem = Arc::new(RwSem::with_config(config, Vec::new()));
        guard_held_across_an_await(
            |gate| {
                let sem = sem.clone();
                async move {
                    let mut guard = sem.write_async().await;
                    guard.push("task");
                    gate.hold().await; // the guard is held across this await
                    guard.push("task again");
                }
            },
            {
                let sem = sem.clone();
                move || sem.write().push("thread")
            },
            || sem.waiters() == 1,
        );
        assert_eq!(*sem.read(), ["task", "task again", "thread"]);
    });
}

#[test]
fn threads_and_tasks_are_granted_in_arrival_order_by_fair_unlocks() {
    each_config(|config| {
        let sem = Arc::new(RwSem::with_config(config, Vec::new()));
        let held = sem.write();
        let (counter_a, waker_a) = counting_waker();
        let mut a = pin!(sem.write_async());
        assert!(poll_once(a.as_mut(), &waker_a).is_pending());
        let b = thread::spawn({
            let sem = sem.clone();
            move || {
                let mut g = sem.write();
                g.push("b");
                RwSemWriteGuard::unlock_fair(g);
            }
        });
        wait_until("the thread queues second", || sem.waiters() == 2);
        let (counter_c, waker_c) = counting_waker();
        let mut c = pin!(sem.write_async());
        assert!(poll_once(c.as_mut(), &waker_c).is_pending());
        assert_eq!(sem.waiters(), 3);
        RwSemWriteGuard::unlock_fair(held);
        assert_eq!(
            (counter_a.wakes(), counter_c.wakes()),
            (1, 0),
            "the head is granted"
        );
        let Poll::Ready(mut g) = poll_once(a.as_mut(), &waker_a) else {
            panic!("a was granted");
        };
        g.push("a");
        RwSemWriteGuard::unlock_fair(g);
        b.join().unwrap();
        assert_eq!(counter_c.wakes(), 1, "b's fair unlock granted c");
        let Poll::Ready(mut g) = poll_once(c.as_mut(), &waker_c) else {
            panic!("c was granted");
        };
        g.push("c");
        drop(g);
        assert_eq!(*sem.read(), ["a", "b", "c"]);
    });
}

#[test]
fn a_granted_future_that_is_dropped_hands_the_lock_to_the_next_waiter() {
    each_config(|config| {
        let sem = Arc::new(RwSem::with_config(config, 0));
        let held = sem.write();
        let (counter, waker) = counting_waker();
        let mut fut = Box::pin(sem.write_async());
        assert!(poll_once(fut.as_mut(), &waker).is_pending());
        let next = thread::spawn({
            let sem = sem.clone();
            move || *sem.write() += 1
        });
        wait_until("the thread queues behind the task", || sem.waiters() == 2);
        RwSemWriteGuard::unlock_fair(held); // grants the task, which never runs
        assert_eq!(counter.wakes(), 1);
        assert_eq!(
            sem.waiters(),
            1,
            "the thread still waits: the task holds the lock"
        );
        drop(fut); // cancelled after its grant: the hold goes on
        next.join().unwrap();
        assert_eq!(*sem.read(), 1);
    });
}

#[test]
fn a_future_dropped_before_its_grant_leaves_the_queue() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let held = sem.write();
        let (counter, waker) = counting_waker();
        let mut readers: Vec<_> = (0..3).map(|_| Box::pin(sem.read_async())).collect();
        for r in &mut readers {
            assert!(poll_once(r.as_mut(), &waker).is_pending());
        }
        assert_eq!(sem.waiters(), 3);
        drop(readers.remove(1)); // from the middle
        assert_eq!(sem.waiters(), 2);
        drop(held);
        assert_eq!(counter.wakes(), 2, "only the two queued readers are woken");
        for r in &mut readers {
            assert!(poll_once(r.as_mut(), &waker).is_ready());
        }
    });
}

#[test]
fn a_cancelled_head_writer_lets_the_readers_behind_it_in() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let reader = sem.read();
        let (_, waker) = counting_waker();
        let mut writer = Box::pin(sem.write_async());
        assert!(poll_once(writer.as_mut(), &waker).is_pending());
        let (counter, reader_waker) = counting_waker();
        let mut queued_reader = pin!(sem.read_async());
        if let Poll::Ready(r) = poll_once(queued_reader.as_mut(), &reader_waker) {
            // AtomicCount without hand-off lets a reader share with a
            // reader; the writer task asked for hand-off, so this is not
            // expected, but a ready reader is still correct.
            panic!("a reader went ahead of a queued writer task: {}", *r);
        }
        drop(writer); // the head leaves: the reader behind it is granted
        assert_eq!(counter.wakes(), 1);
        assert!(poll_once(queued_reader.as_mut(), &reader_waker).is_ready());
        drop(reader);
    });
}

#[test]
fn polling_with_a_new_waker_moves_the_wakeup_to_it() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let held = sem.write();
        let (old, old_waker) = counting_waker();
        let (new, new_waker) = counting_waker();
        let mut fut = pin!(sem.read_async());
        assert!(poll_once(fut.as_mut(), &old_waker).is_pending());
        assert!(poll_once(fut.as_mut(), &new_waker).is_pending());
        drop(held);
        assert_eq!((old.wakes(), new.wakes()), (0, 1));
        assert!(poll_once(fut.as_mut(), &new_waker).is_ready());
    });
}

/// async-lock #91: futures polled out of order. A future does nothing
/// until polled; one polled once and then set aside holds its place and,
/// once granted, its hold, and holds up only those its hold excludes.
#[test]
fn a_future_set_aside_after_one_poll_holds_up_only_what_fifo_hand_off_says() {
    each_config(|config| {
        let sem = Arc::new(RwSem::with_config(config, 0));
        // Created, never polled: no effect at all.
        let never_polled = sem.write_async();
        assert!(
            sem.try_write().is_some(),
            "an unpolled future holds nothing"
        );

        let held = sem.write();
        let (counter, waker) = counting_waker();
        let mut set_aside = Box::pin(sem.read_async());
        assert!(poll_once(set_aside.as_mut(), &waker).is_pending());
        drop(held); // grants the reader future, which is not polled again
        assert_eq!(counter.wakes(), 1);
        // Its shared hold lets other readers in ...
        assert_eq!(*sem.try_read().expect("readers share with it"), 0);
        // ... and keeps writers out until it is dropped.
        let writer = thread::spawn({
            let sem = sem.clone();
            move || *sem.write() += 1
        });
        wait_until("the writer waits", || sem.waiters() == 1);
        drop(set_aside);
        writer.join().unwrap();
        assert_eq!(*sem.read(), 1);
        drop(never_polled);
    });
}

/// async-std #705: a writer task behind a stream of overlapping readers.
/// A task has no hand-off timer, so it asks for hand-off when it finds
/// readers holding: newcomers then queue behind it.
#[test]
fn a_writer_task_is_not_starved_by_overlapping_readers() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let first = sem.read();
        let (counter, waker) = counting_waker();
        let mut writer = pin!(sem.write_async());
        assert!(poll_once(writer.as_mut(), &waker).is_pending());
        assert!(
            sem.try_read().is_none(),
            "a new reader would overlap the first and starve the writer"
        );
        drop(first);
        assert_eq!(counter.wakes(), 1);
        let Poll::Ready(mut w) = poll_once(writer.as_mut(), &waker) else {
            panic!("the last reader's release granted the writer");
        };
        *w += 1;
    });
}

#[test]
fn upgradable_read_async_shares_with_readers_and_excludes_another_upgradable() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 1);
        let (_, waker) = counting_waker();
        let mut u1 = pin!(sem.upgradable_read_async());
        let Poll::Ready(u1) = poll_once(u1.as_mut(), &waker) else {
            panic!("free");
        };
        let mut r = pin!(sem.read_async());
        assert!(
            poll_once(r.as_mut(), &waker).is_ready(),
            "shares with readers"
        );
        let (counter, waker2) = counting_waker();
        let mut u2 = pin!(sem.upgradable_read_async());
        assert!(poll_once(u2.as_mut(), &waker2).is_pending());
        drop(u1);
        assert_eq!(counter.wakes(), 1);
        assert!(poll_once(u2.as_mut(), &waker2).is_ready());
    });
}

#[test]
fn tasks_and_threads_with_cancellations_count_exactly_on_a_multi_threaded_runtime() {
    each_config(|config| {
        let sem = Arc::new(RwSem::with_config(config, 0u64));
        const TASKS: u64 = 8;
        const THREADS: u64 = 2;
        const ROUNDS: u64 = 300;
        tasks_and_threads(
            (TASKS, THREADS, ROUNDS),
            {
                let sem = sem.clone();
                move |i| {
                    let sem = sem.clone();
                    async move {
                        if i % 2 == 0 {
                            // Some tries time out: cancellations at every stage.
                            let lock = sem.write_async();
                            match tokio::time::timeout(Duration::from_micros(50), lock).await {
                                Ok(mut g) => {
                                    *g += 1;
                                    true
                                }
                                Err(_) => false,
                            }
                        } else {
                            let r = sem.read_async().await;
                            let seen = *r;
                            drop(r);
                            let mut g = sem.write_async().await;
                            assert!(*g >= seen);
                            *g += 1;
                            true
                        }
                    }
                }
            },
            {
                let sem = sem.clone();
                move |_, _| {
                    *sem.write() += 1;
                    let _ = *sem.read();
                }
            },
        );
        assert_eq!(*sem.read(), (TASKS + THREADS) * ROUNDS);
        assert_eq!(sem.waiters(), 0, "no record left behind");
    });
}

#[test]
fn the_lock_futures_and_their_guards_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let sem = RwSem::new(1);
    let fut = async {
        let g = sem.write_async().await;
        std::future::ready(()).await;
        drop(g);
    };
    assert_send(&fut);
    assert_send(&sem.read_async());
    assert_send(&sem.upgradable_read_async());
}
