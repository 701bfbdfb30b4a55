//! Wait-queue scenarios (real threads). Each test is named after the
//! scenario it pins. None depends on timing to pass: threads are lined up by
//! observing the queue, and bounded waits are hang detectors only.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use herdless::variants::WakeMode;
use herdless::wait_queue::{Attempt, TimedOut, WaitQueue};

const MODES: [WakeMode; 2] = [WakeMode::WakeAll, WakeMode::Exclusive];
/// Generous bound for anything that must happen; only a hang trips it.
const HANG: Duration = Duration::from_secs(60);

/// Spins (yielding) until `cond` holds; panics after `HANG`.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG, "hang: waited {HANG:?} for {what}");
        thread::yield_now();
    }
}

/// Units of work that exclusive waiters consume, and a count of attempts so
/// a test can tell when a waiter has looked and gone to sleep.
#[derive(Default)]
struct Tokens {
    available: AtomicUsize,
    attempts: AtomicUsize,
}

impl Tokens {
    fn attempt(&self) -> Attempt<()> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        match self
            .available
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        {
            Ok(_) => Attempt::Done(()),
            Err(_) => Attempt::Wait,
        }
    }

    fn post(&self, n: usize) {
        self.available.fetch_add(n, Ordering::SeqCst);
    }
}

/// Each blocked waiter attempts twice before sleeping (before queueing and
/// after); waits until `n` waiters have done both.
fn until_asleep(tokens: &Tokens, queue: &WaitQueue, n: usize) {
    until("waiters to look and sleep", || {
        tokens.attempts.load(Ordering::SeqCst) >= 2 * n && queue.len() >= n
    });
}

#[test]
fn wake_up_on_an_empty_queue_wakes_nobody() {
    for mode in MODES {
        let q = WaitQueue::with_mode(mode);
        assert_eq!(q.wake_up(0), 0);
        assert_eq!(q.wake_up(1), 0);
        assert_eq!(q.wake_up_all(), 0);
        assert!(q.is_empty());
        assert_eq!(q.mode(), mode);
    }
    assert_eq!(WaitQueue::new().mode(), WakeMode::Exclusive);
}

#[test]
fn wake_up_zero_wakes_only_non_exclusive_waiters() {
    let q = Arc::new(WaitQueue::new());
    let tokens = Arc::new(Tokens::default());
    let flag = Arc::new(AtomicBool::new(false));
    let reader = {
        let (q, tokens) = (q.clone(), tokens.clone());
        thread::spawn(move || q.wait_event_exclusive(|| tokens.attempt()))
    };
    until_asleep(&tokens, &q, 1);
    let poller = {
        let (q, flag) = (q.clone(), flag.clone());
        thread::spawn(move || q.wait_event(|| flag.load(Ordering::SeqCst)))
    };
    until("the poller to queue", || q.len() == 2);
    flag.store(true, Ordering::SeqCst);
    assert_eq!(q.wake_up(0), 1, "only the poller");
    poller.join().unwrap();
    assert_eq!(q.len(), 1, "the exclusive reader is still queued");
    tokens.post(1);
    assert_eq!(q.wake_up(1), 1);
    reader.join().unwrap();
    assert!(q.is_empty());
}

#[test]
fn exclusive_waiters_are_woken_one_at_a_time_in_fifo_order() {
    let q = Arc::new(WaitQueue::new());
    let tokens = Arc::new(Tokens::default());
    let (tx, rx) = mpsc::channel();
    let mut threads = Vec::new();
    for id in 0..5 {
        let (q2, tokens2, tx) = (q.clone(), tokens.clone(), tx.clone());
        threads.push(thread::spawn(move || {
            q2.wait_event_exclusive(|| tokens2.attempt());
            tx.send(id).unwrap();
        }));
        // Queue them in a known order.
        until_asleep(&tokens, &q, id + 1);
    }
    for expected in 0..5 {
        tokens.post(1);
        assert_eq!(q.wake_up(1), 1);
        assert_eq!(rx.recv_timeout(HANG).expect("hang"), expected);
    }
    for t in threads {
        t.join().unwrap();
    }
    assert!(q.is_empty());
}

#[test]
fn wake_up_all_wakes_every_waiter_of_both_kinds() {
    for mode in MODES {
        let q = Arc::new(WaitQueue::with_mode(mode));
        let flag = Arc::new(AtomicBool::new(false));
        // More than the wake list keeps inline: exercises the spill.
        let threads: Vec<_> = (0..40)
            .map(|i| {
                let (q, flag) = (q.clone(), flag.clone());
                thread::spawn(move || {
                    if i % 2 == 0 {
                        q.wait_event(|| flag.load(Ordering::SeqCst));
                    } else {
                        q.wait_event_exclusive(|| {
                            if flag.load(Ordering::SeqCst) {
                                Attempt::Done(())
                            } else {
                                Attempt::Wait
                            }
                        });
                    }
                })
            })
            .collect();
        until("40 waiters", || q.len() == 40);
        flag.store(true, Ordering::SeqCst);
        assert_eq!(q.wake_up_all(), 40);
        for t in threads {
            t.join().unwrap();
        }
        assert!(q.is_empty());
    }
}

#[test]
fn wake_all_mode_wakes_every_exclusive_waiter_and_the_losers_sleep_again() {
    let q = Arc::new(WaitQueue::with_mode(WakeMode::WakeAll));
    let tokens = Arc::new(Tokens::default());
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (q, tokens) = (q.clone(), tokens.clone());
            thread::spawn(move || q.wait_event_exclusive(|| tokens.attempt()))
        })
        .collect();
    until_asleep(&tokens, &q, 3);
    tokens.post(1);
    assert_eq!(q.wake_up(1), 3, "the herd: all three are woken");
    // One takes the token; the two losers look (wasted) and queue again.
    until("the losers to sleep again", || {
        // 2 looks each before sleeping, 1 each after the wake, and 1 more
        // by each loser after it queued again.
        tokens.attempts.load(Ordering::SeqCst) >= 6 + 3 + 2 && q.len() == 2
    });
    tokens.post(2);
    assert_eq!(q.wake_up(1), 2);
    for t in threads {
        t.join().unwrap();
    }
    if herdless::stats::ENABLED {
        let s = q.stats();
        assert_eq!(s.wakeups, 5);
        assert_eq!(s.wasted_wakeups, 2);
        assert_eq!(s.passed_on, 0);
    }
}

#[test]
fn zero_timeout_checks_once_and_never_queues() {
    for mode in MODES {
        let q = WaitQueue::with_mode(mode);
        let mut calls = 0;
        let r = q.wait_event_timeout(
            || {
                calls += 1;
                false
            },
            Duration::ZERO,
        );
        assert_eq!((r, calls), (Err(TimedOut), 1));
        let mut calls = 0;
        let r = q.wait_event_exclusive_timeout(
            || {
                calls += 1;
                Attempt::<()>::Wait
            },
            Duration::ZERO,
        );
        assert_eq!((r, calls), (Err(TimedOut), 1));
        assert_eq!(q.wait_event_timeout(|| true, Duration::ZERO), Ok(()));
        assert_eq!(
            q.wait_event_exclusive_timeout(|| Attempt::Done(7), Duration::ZERO),
            Ok(7)
        );
        assert!(q.is_empty());
        assert_eq!(q.stats().wakeups, 0);
    }
}

#[test]
fn duration_max_waits_forever_until_woken() {
    for exclusive in [false, true] {
        let q = Arc::new(WaitQueue::new());
        let flag = Arc::new(AtomicBool::new(false));
        let t = {
            let (q, flag) = (q.clone(), flag.clone());
            thread::spawn(move || {
                if exclusive {
                    q.wait_event_exclusive_timeout(
                        || match flag.load(Ordering::SeqCst) {
                            true => Attempt::Done(()),
                            false => Attempt::Wait,
                        },
                        Duration::MAX,
                    )
                } else {
                    q.wait_event_timeout(|| flag.load(Ordering::SeqCst), Duration::MAX)
                }
            })
        };
        until("the waiter to queue", || q.len() == 1);
        flag.store(true, Ordering::SeqCst);
        assert_eq!(q.wake_up(1), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    }
}

#[test]
fn short_timeout_without_a_wake_times_out_and_leaves_the_queue() {
    let q = WaitQueue::new();
    let ms = Duration::from_millis(3);
    assert_eq!(q.wait_event_timeout(|| false, ms), Err(TimedOut));
    assert_eq!(
        q.wait_event_exclusive_timeout(|| Attempt::<()>::Wait, ms),
        Err(TimedOut)
    );
    assert!(q.is_empty());
    assert_eq!(q.wake_up_all(), 0);
}

#[test]
fn a_waiter_that_passes_on_wakes_the_next_exclusive_waiter() {
    let q = Arc::new(WaitQueue::new());
    let tokens = Arc::new(Tokens::default());
    let cancelled = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let first = {
        let (q, tokens, cancelled, tx) = (q.clone(), tokens.clone(), cancelled.clone(), tx.clone());
        thread::spawn(move || {
            let r = q.wait_event_exclusive(|| {
                if cancelled.load(Ordering::SeqCst) {
                    // Cancelled: leave without taking the token.
                    return Attempt::PassOn("cancelled");
                }
                match tokens.attempt() {
                    Attempt::Done(()) => Attempt::Done("took"),
                    _ => Attempt::Wait,
                }
            });
            tx.send(("first", r)).unwrap();
        })
    };
    until_asleep(&tokens, &q, 1);
    let second = {
        let (q, tokens) = (q.clone(), tokens.clone());
        thread::spawn(move || {
            q.wait_event_exclusive(|| tokens.attempt());
            tx.send(("second", "took")).unwrap();
        })
    };
    until_asleep(&tokens, &q, 2);
    cancelled.store(true, Ordering::SeqCst);
    tokens.post(1);
    assert_eq!(q.wake_up(1), 1, "chooses the first (oldest) waiter");
    let mut got = vec![
        rx.recv_timeout(HANG).expect("hang"),
        rx.recv_timeout(HANG)
            .expect("lost wakeup: nobody took the token"),
    ];
    got.sort();
    assert_eq!(got, [("first", "cancelled"), ("second", "took")]);
    first.join().unwrap();
    second.join().unwrap();
    if herdless::stats::ENABLED {
        assert_eq!(q.stats().passed_on, 1);
    }
}

#[test]
fn a_chosen_waiter_whose_attempt_panics_passes_the_wakeup_on() {
    let q = Arc::new(WaitQueue::new());
    let tokens = Arc::new(Tokens::default());
    let (tx, rx) = mpsc::channel();
    let doomed = {
        let (q, tokens) = (q.clone(), tokens.clone());
        thread::spawn(move || {
            let mut calls = 0;
            q.wait_event_exclusive(|| {
                calls += 1;
                // 1: before queueing, 2: after queueing, 3: after the wake.
                assert!(calls < 3, "attempt panics right after being chosen");
                tokens.attempt()
            })
        })
    };
    until_asleep(&tokens, &q, 1);
    let heir = {
        let (q, tokens) = (q.clone(), tokens.clone());
        thread::spawn(move || {
            q.wait_event_exclusive(|| tokens.attempt());
            tx.send(()).unwrap();
        })
    };
    until_asleep(&tokens, &q, 2);
    tokens.post(1);
    assert_eq!(q.wake_up(1), 1);
    assert!(doomed.join().is_err(), "the chosen waiter panicked");
    rx.recv_timeout(HANG)
        .expect("lost wakeup: the panic swallowed it");
    heir.join().unwrap();
    assert!(q.is_empty());
}

#[test]
fn a_chosen_waiter_that_gives_up_passes_the_wakeup_on() {
    let q = Arc::new(WaitQueue::new());
    let tokens = Arc::new(Tokens::default());
    let (tx, rx) = mpsc::channel();
    let quitter = {
        let (q, tokens) = (q.clone(), tokens.clone());
        thread::spawn(move || {
            q.wait_event_exclusive_timeout(|| tokens.attempt(), Duration::from_secs(3600))
        })
    };
    until_asleep(&tokens, &q, 1);
    let heir = {
        let (q, tokens) = (q.clone(), tokens.clone());
        thread::spawn(move || {
            q.wait_event_exclusive(|| tokens.attempt());
            tx.send(()).unwrap();
        })
    };
    until_asleep(&tokens, &q, 2);
    q.debug_give_up_when_chosen(1);
    tokens.post(1);
    assert_eq!(q.wake_up(1), 1);
    assert_eq!(quitter.join().unwrap(), Err(TimedOut));
    rx.recv_timeout(HANG).expect("lost wakeup");
    heir.join().unwrap();
    assert_eq!(tokens.available.load(Ordering::SeqCst), 0);
}

#[test]
fn a_callback_is_called_by_every_wake_and_removed_on_drop() {
    for mode in MODES {
        let q = WaitQueue::with_mode(mode);
        let calls = Arc::new(AtomicUsize::new(0));
        let registration = {
            let calls = calls.clone();
            q.register(move || {
                calls.fetch_add(1, Ordering::SeqCst);
            })
        };
        assert_eq!(q.len(), 1);
        assert_eq!(q.wake_up(0), 1, "callbacks are non-exclusive");
        assert_eq!(q.wake_up(1), 1);
        assert_eq!(q.wake_up_all(), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert!(std::ptr::eq(registration.queue(), &q));
        drop(registration);
        assert!(q.is_empty());
        assert_eq!(q.wake_up_all(), 0);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}

#[test]
fn callbacks_run_after_the_queue_lock_is_released() {
    let q = Arc::new(WaitQueue::new());
    let seen = Arc::new(AtomicUsize::new(0));
    let registration = {
        let (q2, seen) = (q.clone(), seen.clone());
        // `len` takes the queue lock: this would deadlock under it.
        q.register(move || {
            seen.store(q2.len(), Ordering::SeqCst);
        })
    };
    assert_eq!(q.wake_up(1), 1);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    drop(registration);
}

trait Source: Send + Sync {
    fn queue(&self) -> &WaitQueue;
}

struct Pipe {
    readers: WaitQueue,
}

impl Source for Pipe {
    fn queue(&self) -> &WaitQueue {
        &self.readers
    }
}

#[test]
fn an_owned_registration_keeps_its_source_alive_until_dropped() {
    let pipe: Arc<dyn Source> = Arc::new(Pipe {
        readers: WaitQueue::new(),
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let registration = {
        let calls = calls.clone();
        WaitQueue::register_owned(
            pipe.clone(),
            |s| s.queue(),
            move || {
                calls.fetch_add(1, Ordering::SeqCst);
            },
        )
    };
    let weak = Arc::downgrade(&pipe);
    drop(pipe);
    // The registration alone keeps the source, and its queue, alive.
    assert_eq!(registration.queue().len(), 1);
    assert_eq!(registration.owner().queue().wake_up(1), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Storable and movable across threads, like an interest-list item.
    let registration = thread::spawn(move || registration).join().unwrap();
    drop(registration);
    assert!(
        weak.upgrade().is_none(),
        "dropping the registration frees the source"
    );
}

#[test]
fn a_woken_waiter_that_finds_nothing_counts_a_wasted_wakeup_and_sleeps_again() {
    let q = Arc::new(WaitQueue::new());
    let tokens = Arc::new(Tokens::default());
    let t = {
        let (q, tokens) = (q.clone(), tokens.clone());
        thread::spawn(move || q.wait_event_exclusive(|| tokens.attempt()))
    };
    until_asleep(&tokens, &q, 1);
    // A wake with nothing behind it: the waiter looks, finds nothing, and
    // queues again (a wasted wakeup, not a return).
    assert_eq!(q.wake_up(1), 1);
    until("the waiter to sleep again", || {
        tokens.attempts.load(Ordering::SeqCst) >= 4 && q.len() == 1
    });
    tokens.post(1);
    assert_eq!(q.wake_up(1), 1);
    t.join().unwrap();
    if herdless::stats::ENABLED {
        let s = q.stats();
        assert_eq!((s.wakeups, s.wasted_wakeups, s.passed_on), (2, 1, 0));
    }
}

/// Many waiters of both kinds, many wakers, short timeouts mixed in: every
/// token is consumed exactly once and nobody is left behind.
#[test]
fn mixed_waiters_with_timeouts_consume_every_token_exactly_once() {
    for mode in MODES {
        let q = Arc::new(WaitQueue::with_mode(mode));
        let tokens = Arc::new(Tokens::default());
        let consumed = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        const TOKENS: usize = 20_000;
        let readers: Vec<_> = (0..4)
            .map(|i| {
                let (q, tokens, consumed, done) =
                    (q.clone(), tokens.clone(), consumed.clone(), done.clone());
                thread::spawn(move || loop {
                    let attempt = || {
                        if done.load(Ordering::SeqCst) {
                            return Attempt::Done(false);
                        }
                        match tokens.attempt() {
                            Attempt::Done(()) => Attempt::Done(true),
                            _ => Attempt::Wait,
                        }
                    };
                    let took = if i % 2 == 0 {
                        q.wait_event_exclusive_timeout(attempt, Duration::from_micros(50))
                    } else {
                        Ok(q.wait_event_exclusive(attempt))
                    };
                    match took {
                        Ok(true) => {
                            consumed.fetch_add(1, Ordering::SeqCst);
                            // The poller's condition changed: wake pollers only.
                            q.wake_up(0);
                        }
                        Ok(false) => return,
                        Err(TimedOut) => {}
                    }
                })
            })
            .collect();
        let poller = {
            let (q, consumed) = (q.clone(), consumed.clone());
            thread::spawn(move || {
                q.wait_event(|| consumed.load(Ordering::SeqCst) >= TOKENS);
            })
        };
        for _ in 0..TOKENS {
            tokens.post(1);
            q.wake_up(1);
        }
        until("every token consumed", || {
            consumed.load(Ordering::SeqCst) == TOKENS
        });
        poller.join().unwrap();
        done.store(true, Ordering::SeqCst);
        q.wake_up_all();
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(tokens.available.load(Ordering::SeqCst), 0);
        assert!(q.is_empty());
    }
}
