//! loom models of the wait queue and the channel.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p herdless --release --test loom_wait_queue`.
//! Each model is named after the interleaving it pins. A lost wakeup shows
//! up as a loom deadlock report (every thread blocked). Under loom a timed
//! wait sleeps once and then times out, so loom places the timeout anywhere
//! after the waiter has queued itself.
#![cfg(loom)]

mod loom_common;

use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use herdless::channel::{Channel, RecvError};
use herdless::variants::WakeMode;
use herdless::wait_queue::{Attempt, TimedOut, WaitQueue};
use loom_common::model;

/// Items consumed by exclusive waiters. The counter is read with a plain
/// Relaxed load before the CAS, so a waiter that is not ordered after the
/// poster by the queue lock may read a stale zero: the queue's ordering is
/// what the model checks, not the counter's.
struct Items(AtomicUsize);

impl Items {
    fn new(n: usize) -> Self {
        Items(AtomicUsize::new(n))
    }

    fn take(&self) -> Attempt<()> {
        loop {
            let n = self.0.load(Ordering::Relaxed);
            if n == 0 {
                return Attempt::Wait;
            }
            if self
                .0
                .compare_exchange(n, n - 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return Attempt::Done(());
            }
        }
    }

    fn post(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn left(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// The classic lost wakeup: the waker sets the flag and wakes while the
/// waiter is between its check and its sleep. A Relaxed flag is enough: a
/// wake that finds the waiter counted is ordered by the queue lock, and
/// one that finds the queue empty skips the lock, which the fences (E) in
/// `enqueue` and (W) in `wake_up` make safe (module docs, "Nobody waits").
/// Mutation check: without either fence this model deadlocks.
#[test]
fn wake_racing_wait_event_registration_is_never_lost() {
    for (mode, exclusive) in [
        (WakeMode::Exclusive, false),
        (WakeMode::Exclusive, true),
        (WakeMode::WakeAll, true),
    ] {
        model(3, move || {
            let q = Arc::new(WaitQueue::with_mode(mode));
            let flag = Arc::new(AtomicUsize::new(0));
            let waiter = {
                let (q, flag) = (q.clone(), flag.clone());
                thread::spawn(move || {
                    let set = || flag.load(Ordering::Relaxed) == 1;
                    if exclusive {
                        q.wait_event_exclusive(|| match set() {
                            true => Attempt::Done(()),
                            false => Attempt::Wait,
                        });
                    } else {
                        q.wait_event(set);
                    }
                })
            };
            flag.store(1, Ordering::Relaxed);
            q.wake_up(1);
            waiter.join().unwrap();
            assert!(q.is_empty());
        });
    }
}

/// ARCHITECTURE contracts 6 and 4: one item, one exclusive wake, and the chosen
/// waiter's timeout firing anywhere around the choice. Either the timed
/// waiter consumes the item (the wake wins), or the untimed one gets it;
/// with the hook, a chosen timed waiter gives up without looking and must
/// pass the wakeup on. Never both miss it: the untimed waiter would sleep
/// forever (loom: deadlock).
#[test]
fn chosen_exclusive_waiter_timing_out_consumes_or_passes_the_wakeup_on() {
    for give_up in [false, true] {
        model(2, move || {
            let q = Arc::new(WaitQueue::new());
            let items = Arc::new(Items::new(0));
            if give_up {
                q.debug_give_up_when_chosen(1);
            }
            let timed = {
                let (q, items) = (q.clone(), items.clone());
                thread::spawn(move || {
                    q.wait_event_exclusive_timeout(|| items.take(), Duration::from_secs(1))
                })
            };
            let patient = {
                let (q, items) = (q.clone(), items.clone());
                thread::spawn(move || q.wait_event_exclusive(|| items.take()))
            };
            items.post();
            q.wake_up(1);
            let mut posted = 1;
            if timed.join().unwrap().is_ok() {
                // The timed waiter took the only item: give the other its own.
                items.post();
                q.wake_up(1);
                posted += 1;
            }
            patient.join().unwrap();
            assert_eq!(items.left(), 0, "{posted} posted, all consumed");
            assert!(q.is_empty());
        });
    }
}

/// A waiter whose first look (right after queueing) took an item that no
/// wake announced to it, while a wake chose it for a newer item: it must
/// pass that wakeup on, or the other waiter sleeps next to the newer item.
#[test]
fn a_waiter_chosen_while_its_first_look_took_an_older_item_passes_the_wakeup_on() {
    model(2, || {
        let q = Arc::new(WaitQueue::new());
        let items = Arc::new(Items::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (q, items) = (q.clone(), items.clone());
                thread::spawn(move || q.wait_event_exclusive(|| items.take()))
            })
            .collect();
        for _ in 0..2 {
            items.post();
            q.wake_up(1);
        }
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(items.left(), 0);
        assert!(q.is_empty());
    });
}

/// ARCHITECTURE contract 4 on its own: a timed waiter that a wake dequeued
/// reports the wake (it takes the item), and one that reports a timeout was
/// not chosen (the item is still there).
#[test]
fn a_timeout_racing_the_wake_reports_the_wake() {
    model(3, || {
        let q = Arc::new(WaitQueue::new());
        let items = Arc::new(Items::new(0));
        let waiter = {
            let (q, items) = (q.clone(), items.clone());
            thread::spawn(move || {
                q.wait_event_exclusive_timeout(|| items.take(), Duration::from_secs(1))
            })
        };
        items.post();
        let woke = q.wake_up(1);
        let result = waiter.join().unwrap();
        if woke == 1 {
            assert_eq!(result, Ok(()), "dequeued by the wake, so the wake wins");
        }
        if result == Err(TimedOut) {
            assert_eq!(items.left(), 1);
        }
        assert!(q.is_empty());
    });
}

/// A poller (non-exclusive, never consumes), a reader (exclusive) and a
/// registered callback on one queue, in both modes: one `wake_up(1)` after
/// the state change serves them all.
#[test]
fn mixed_exclusive_and_non_exclusive_waiters_are_all_served() {
    for mode in [WakeMode::Exclusive, WakeMode::WakeAll] {
        model(2, move || {
            let q = Arc::new(WaitQueue::with_mode(mode));
            let items = Arc::new(Items::new(0));
            let sent = Arc::new(AtomicUsize::new(0));
            let calls = Arc::new(AtomicUsize::new(0));
            let registration = {
                let calls = calls.clone();
                q.register(move || {
                    calls.fetch_add(1, Ordering::Relaxed);
                })
            };
            let poller = {
                let (q, sent) = (q.clone(), sent.clone());
                thread::spawn(move || q.wait_event(|| sent.load(Ordering::Relaxed) == 1))
            };
            let reader = {
                let (q, items) = (q.clone(), items.clone());
                thread::spawn(move || q.wait_event_exclusive(|| items.take()))
            };
            items.post();
            sent.store(1, Ordering::Relaxed);
            let woke = q.wake_up(1);
            assert!(woke >= 1, "at least the callback");
            assert_eq!(calls.load(Ordering::Relaxed), 1);
            poller.join().unwrap();
            reader.join().unwrap();
            drop(registration);
            assert_eq!(items.left(), 0);
            assert!(q.is_empty());
        });
    }
}

/// Dropping a registration while a wake is collecting or calling its
/// callback: no use after free, and the callback runs at most once.
#[test]
fn dropping_a_registration_during_a_wake_is_safe() {
    model(3, || {
        let q = Arc::new(WaitQueue::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let registration = {
            let calls = calls.clone();
            q.register(move || {
                calls.fetch_add(1, Ordering::Relaxed);
            })
        };
        let waker = {
            let q = q.clone();
            thread::spawn(move || q.wake_up(0))
        };
        drop(registration);
        let woke = waker.join().unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), woke);
        assert!(woke <= 1);
        assert!(q.is_empty());
    });
}

/// Close with two blocked readers and an item sent just before: the item
/// is delivered exactly once, and both readers then see `Closed`.
#[test]
fn close_with_blocked_readers_and_a_pending_item_delivers_it_once_then_closes() {
    model(2, || {
        let ch = Arc::new(Channel::new());
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let ch = ch.clone();
                thread::spawn(move || {
                    let mut got = 0;
                    loop {
                        match ch.recv() {
                            Ok(()) => got += 1,
                            Err(RecvError::Closed) => return got,
                        }
                    }
                })
            })
            .collect();
        ch.send(()).unwrap();
        assert!(ch.close());
        let got: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert_eq!(got, 1);
        assert!(ch.send(()).is_err());
    });
}
