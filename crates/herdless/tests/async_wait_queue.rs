//! `WaitQueue`, `Channel` and `EventPoll` from tasks, and from tasks and
//! threads on one queue: task entries wait in the same FIFO lists as
//! thread entries and are chosen by the same exclusive wake-one. Futures
//! are polled by hand (counting wakers), so no test depends on timing.
#![cfg(not(loom))]
// clippy's `await_holding_lock` takes every `lock_api` guard for a blocking
// one; the guards of herdless's async forms are made to live across
// `.await` (RwSemAsyncExt's docs).
#![allow(clippy::await_holding_lock)]

mod async_common;

use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread;
use std::time::Duration;

use async_common::{counting_waker, poll_once, runtime, wait_until};
use herdless::channel::RecvError;
use herdless::poll::{EventFd, EventPoll, Readiness, Trigger};
use herdless::variants::WakeMode;
use herdless::{Attempt, Channel, WaitQueue};

/// A stack of jobs and the queue its consumers wait on.
struct Jobs {
    jobs: Mutex<Vec<u32>>,
    queue: WaitQueue,
}

impl Jobs {
    fn new() -> Self {
        Jobs {
            jobs: Mutex::new(Vec::new()),
            queue: WaitQueue::new(),
        }
    }

    fn take(&self) -> Attempt<u32> {
        match self.jobs.lock().unwrap().pop() {
            Some(job) => Attempt::Done(job),
            None => Attempt::Wait,
        }
    }

    fn post(&self, job: u32) {
        self.jobs.lock().unwrap().push(job);
        self.queue.wake_up(1);
    }
}

/// A consumer thread on `jobs`, and a wait until it sleeps: queued, and
/// past the look it makes right after queueing (which could otherwise
/// take a job posted meanwhile, ahead of an older waiter). After that it
/// looks again only when a wake chooses it.
fn sleeping_consumer(jobs: &Arc<Jobs>, queued_before: usize) -> thread::JoinHandle<u32> {
    let looks = Arc::new(AtomicUsize::new(0));
    let handle = thread::spawn({
        let (jobs, looks) = (jobs.clone(), looks.clone());
        move || {
            jobs.queue.wait_event_exclusive(|| {
                looks.fetch_add(1, Ordering::SeqCst);
                jobs.take()
            })
        }
    });
    wait_until("the thread sleeps", || {
        looks.load(Ordering::SeqCst) >= 2 && jobs.queue.len() == queued_before + 1
    });
    handle
}

#[test]
fn each_wake_chooses_the_oldest_waiter_thread_or_task() {
    let jobs = Arc::new(Jobs::new());
    let (first, waker_a) = counting_waker();
    let mut a = pin!(jobs.queue.wait_event_exclusive_async(|| jobs.take()));
    assert!(poll_once(a.as_mut(), &waker_a).is_pending());
    let thread = sleeping_consumer(&jobs, 1);
    let (third, waker_c) = counting_waker();
    let mut c = pin!(jobs.queue.wait_event_exclusive_async(|| jobs.take()));
    assert!(poll_once(c.as_mut(), &waker_c).is_pending());

    jobs.post(1);
    assert_eq!(
        (first.wakes(), third.wakes()),
        (1, 0),
        "one wake, the oldest"
    );
    assert_eq!(poll_once(a.as_mut(), &waker_a), Poll::Ready(1));
    jobs.post(2);
    assert_eq!(thread.join().unwrap(), 2, "the thread was next");
    assert_eq!(third.wakes(), 0);
    jobs.post(3);
    assert_eq!(third.wakes(), 1);
    assert_eq!(poll_once(c.as_mut(), &waker_c), Poll::Ready(3));
    assert!(jobs.queue.is_empty());
}

#[test]
fn a_chosen_future_that_is_dropped_passes_its_wakeup_on() {
    let jobs = Arc::new(Jobs::new());
    let (chosen, waker) = counting_waker();
    let mut fut = Box::pin(jobs.queue.wait_event_exclusive_async(|| jobs.take()));
    assert!(poll_once(fut.as_mut(), &waker).is_pending());
    let thread = sleeping_consumer(&jobs, 1);
    jobs.post(7); // chooses the future, which never runs again
    assert_eq!(chosen.wakes(), 1);
    assert_eq!(jobs.queue.len(), 1, "the thread still sleeps");
    drop(fut); // cancelled after the choice: the wakeup goes on
    assert_eq!(thread.join().unwrap(), 7, "the item was not stranded");
    assert_eq!(
        jobs.queue.stats().passed_on,
        u64::from(cfg!(feature = "stats"))
    );
}

#[test]
fn a_future_dropped_before_a_wake_leaves_the_queue() {
    let jobs = Jobs::new();
    let (counter, waker) = counting_waker();
    let mut futs: Vec<_> = (0..3)
        .map(|_| Box::pin(jobs.queue.wait_event_exclusive_async(|| jobs.take())))
        .collect();
    for f in &mut futs {
        assert!(poll_once(f.as_mut(), &waker).is_pending());
    }
    assert_eq!(jobs.queue.len(), 3);
    drop(futs.remove(0));
    assert_eq!(jobs.queue.len(), 2);
    jobs.post(1);
    assert_eq!(counter.wakes(), 1);
    assert_eq!(poll_once(futs[0].as_mut(), &waker), Poll::Ready(1));
}

#[test]
fn polling_with_a_new_waker_moves_the_wakeup_to_it() {
    let jobs = Jobs::new();
    let (old, old_waker) = counting_waker();
    let (new, new_waker) = counting_waker();
    let mut fut = pin!(jobs.queue.wait_event_exclusive_async(|| jobs.take()));
    assert!(poll_once(fut.as_mut(), &old_waker).is_pending());
    assert!(poll_once(fut.as_mut(), &new_waker).is_pending());
    jobs.post(5);
    assert_eq!((old.wakes(), new.wakes()), (0, 1));
    assert_eq!(poll_once(fut.as_mut(), &new_waker), Poll::Ready(5));
}

/// async-lock #91's shape on a queue: a chosen future that is neither
/// polled nor dropped keeps the one wakeup it was chosen for, and nothing
/// else: the next event chooses the next waiter.
#[test]
fn a_chosen_future_set_aside_holds_up_only_its_own_event() {
    let jobs = Arc::new(Jobs::new());
    let (_, waker) = counting_waker();
    let mut set_aside = pin!(jobs.queue.wait_event_exclusive_async(|| jobs.take()));
    assert!(poll_once(set_aside.as_mut(), &waker).is_pending());
    let thread = sleeping_consumer(&jobs, 1);
    jobs.post(1); // chooses the future
    jobs.post(2); // chooses the thread, which takes an item
    let got = thread.join().unwrap();
    assert!(got == 1 || got == 2);
    assert_eq!(
        jobs.jobs.lock().unwrap().len(),
        1,
        "the future's event waits for it"
    );
    assert!(matches!(poll_once(set_aside.as_mut(), &waker), Poll::Ready(x) if x + got == 3));
}

#[test]
fn wait_event_async_is_woken_by_every_wake_and_rechecks() {
    let queue = WaitQueue::new();
    let flag = AtomicUsize::new(0);
    let (counter, waker) = counting_waker();
    let mut fut = pin!(queue.wait_event_async(|| flag.load(Ordering::Acquire) == 2));
    assert!(poll_once(fut.as_mut(), &waker).is_pending());
    flag.store(1, Ordering::Release);
    queue.wake_up(0); // non-exclusive entries are woken by any wake
    assert_eq!(counter.wakes(), 1);
    assert!(
        poll_once(fut.as_mut(), &waker).is_pending(),
        "condition still false"
    );
    assert_eq!(queue.len(), 1, "queued again");
    flag.store(2, Ordering::Release);
    queue.wake_up(0);
    assert_eq!(poll_once(fut.as_mut(), &waker), Poll::Ready(()));
    assert!(queue.is_empty());
}

#[test]
fn channel_tasks_and_threads_each_item_delivered_once_despite_cancellations() {
    for mode in [WakeMode::Exclusive, WakeMode::WakeAll] {
        let ch = Arc::new(Channel::with_mode(mode));
        let rt = runtime();
        const ITEMS: u64 = 4000;
        let got = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let ch = ch.clone();
                let got = got.clone();
                rt.spawn(async move {
                    loop {
                        let item = if i % 2 == 0 {
                            match tokio::time::timeout(Duration::from_micros(30), ch.recv_async())
                                .await
                            {
                                Ok(item) => item,
                                Err(_) => continue, // cancelled: try again
                            }
                        } else {
                            ch.recv_async().await
                        };
                        match item {
                            Ok(x) => got.lock().unwrap().push(x),
                            Err(RecvError::Closed) => return,
                        }
                    }
                })
            })
            .collect();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let ch = ch.clone();
                let got = got.clone();
                thread::spawn(move || {
                    while let Ok(x) = ch.recv() {
                        got.lock().unwrap().push(x);
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let ch = ch.clone();
                rt.spawn(async move {
                    for i in 0..ITEMS / 2 {
                        ch.send_async(p * ITEMS + i).await.unwrap();
                        if i % 64 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            rt.block_on(p).unwrap();
        }
        wait_until("every item is taken", || ch.is_empty());
        ch.close();
        for t in tasks {
            rt.block_on(t).unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        let mut got = std::mem::take(&mut *got.lock().unwrap());
        got.sort_unstable();
        let mut want: Vec<u64> = (0..2)
            .flat_map(|p| (0..ITEMS / 2).map(move |i| p * ITEMS + i))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want, "{mode:?}: every item exactly once");
        assert!(ch.wait_queue().is_empty());
    }
}

#[test]
fn event_poll_wait_async_reports_a_ready_source_to_one_waiter() {
    let poller = Arc::new(EventPoll::new());
    let efd = Arc::new(EventFd::new());
    poller
        .add(efd.clone(), 1, Readiness::READABLE, Trigger::Edge)
        .unwrap();
    let (counter, waker) = counting_waker();
    let mut events = Vec::new();
    {
        let mut fut = pin!(poller.wait_async(&mut events, 4));
        assert!(poll_once(fut.as_mut(), &waker).is_pending());
        assert_eq!(poller.waiting(), 1);
        efd.write(1).unwrap();
        assert_eq!(counter.wakes(), 1);
        assert_eq!(poll_once(fut.as_mut(), &waker), Poll::Ready(Ok(1)));
    }
    assert_eq!(events[0].token, 1);
    assert_eq!(poller.waiting(), 0);
}

#[test]
fn the_queue_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let ch: Channel<u32> = Channel::new();
    assert_send(&ch.recv_async());
    assert_send(&ch.send_async(1));
    let poller = EventPoll::new();
    let mut events = Vec::new();
    assert_send(&poller.wait_async(&mut events, 1));
    let queue = WaitQueue::new();
    assert_send(&queue.wait_event_async(|| true));
}

/// The async condition wait: tasks queue, then unlock, then wait; a
/// producer changes the state under the lock, then wakes one. With many
/// items racing the consumers' unlock-and-wait, every item is consumed
/// (a notify lost between the unlock and the wait would hang a consumer).
#[test]
fn wait_unlocked_async_never_misses_a_notify_between_unlock_and_wait() {
    use herdless::{RwSem, RwSemAsyncExt};
    struct Shared {
        jobs: RwSem<(Vec<u32>, bool)>,
        posted: WaitQueue,
    }
    let shared = Arc::new(Shared {
        jobs: RwSem::new((Vec::new(), false)),
        posted: WaitQueue::new(),
    });
    let rt = runtime();
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let shared = shared.clone();
            rt.spawn(async move {
                let mut taken = 0u64;
                loop {
                    let mut jobs = shared.jobs.write_async().await;
                    while jobs.0.is_empty() && !jobs.1 {
                        shared.posted.wait_unlocked_async(jobs).await;
                        jobs = shared.jobs.write_async().await;
                    }
                    match jobs.0.pop() {
                        Some(_) => taken += 1,
                        None => return taken, // closed and drained
                    }
                }
            })
        })
        .collect();
    // A thread waiter on the same queue, as a blocked consumer thread.
    let thread_consumer = thread::spawn({
        let shared = shared.clone();
        move || {
            let mut taken = 0u64;
            loop {
                let got = shared.posted.wait_event_exclusive(|| {
                    let mut jobs = shared.jobs.write();
                    match jobs.0.pop() {
                        Some(_) => Attempt::Done(true),
                        None if jobs.1 => Attempt::Done(false),
                        None => Attempt::Wait,
                    }
                });
                if !got {
                    return taken;
                }
                taken += 1;
            }
        }
    });
    const ITEMS: u64 = 5000;
    for i in 0..ITEMS {
        shared.jobs.write().0.push(i as u32);
        shared.posted.wake_up(1);
    }
    shared.jobs.write().1 = true;
    shared.posted.wake_up_all();
    let mut total = thread_consumer.join().unwrap();
    for c in consumers {
        total += rt.block_on(c).unwrap();
    }
    assert_eq!(total, ITEMS);
}
