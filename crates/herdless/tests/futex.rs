//! Futex table scenarios (real threads). Each test is named after the
//! scenario it pins; none depends on timing to pass.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use herdless::futex::{FutexError, RequeueError, Requeued, WaitError, Woken};
use herdless::variants::WakePolicy;
use herdless::FutexTable;

const POLICIES: [WakePolicy; 2] = [WakePolicy::AlwaysLock, WakePolicy::WaiterCount];

/// Spins (yielding) until `n` threads are queued on `word`, where a wake
/// finds them. (`waiters` would not do: it also counts a waiter that has
/// announced itself but not yet checked the value.)
fn until_waiters(table: &FutexTable, word: &AtomicU32, n: usize) {
    while table.queued(word) < n {
        thread::yield_now();
    }
}

#[test]
fn wake_of_zero_waiters_returns_zero() {
    for policy in POLICIES {
        let table = FutexTable::with_policy(policy);
        let word = AtomicU32::new(0);
        assert_eq!(table.wake(&word, 0), 0);
        assert_eq!(table.wake(&word, 1), 0);
        assert_eq!(table.wake_all(&word), 0);
    }
}

#[test]
fn wake_with_n_zero_wakes_nobody_even_with_waiters() {
    let table = Arc::new(FutexTable::new());
    let word = Arc::new(AtomicU32::new(0));
    let t = {
        let (table, word) = (table.clone(), word.clone());
        thread::spawn(move || table.wait(&word, 0, None))
    };
    until_waiters(&table, &word, 1);
    assert_eq!(table.wake(&word, 0), 0);
    assert_eq!(table.queued(&word), 1, "n = 0 must not dequeue anyone");
    word.store(1, Ordering::Relaxed);
    assert_eq!(table.wake(&word, 1), 1);
    assert_eq!(t.join().unwrap(), Ok(Woken));
}

#[test]
fn wait_on_a_changed_value_returns_value_changed_without_sleeping() {
    for policy in POLICIES {
        let table = FutexTable::with_policy(policy);
        let word = AtomicU32::new(5);
        assert_eq!(table.wait(&word, 4, None), Err(WaitError::ValueChanged));
        assert_eq!(table.total_waiters(), 0);
    }
}

#[test]
fn zero_timeout_times_out_at_once_and_duration_max_waits_for_the_wake() {
    for policy in POLICIES {
        let table = Arc::new(FutexTable::with_policy(policy));
        let word = Arc::new(AtomicU32::new(0));
        assert_eq!(
            table.wait(&word, 0, Some(Duration::ZERO)),
            Err(WaitError::TimedOut)
        );
        let t = {
            let (table, word) = (table.clone(), word.clone());
            thread::spawn(move || table.wait(&word, 0, Some(Duration::MAX)))
        };
        until_waiters(&table, &word, 1);
        word.store(1, Ordering::Relaxed);
        assert_eq!(table.wake(&word, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(Woken));
        assert_eq!(table.total_waiters(), 0);
    }
}

#[test]
fn short_timeout_without_wake_times_out_and_leaves_no_count() {
    for policy in POLICIES {
        let table = FutexTable::with_policy(policy);
        let word = AtomicU32::new(0);
        assert_eq!(
            table.wait(&word, 0, Some(Duration::from_millis(2))),
            Err(WaitError::TimedOut)
        );
        assert_eq!(table.total_waiters(), 0);
    }
}

#[test]
fn waiters_are_woken_one_at_a_time_in_fifo_order() {
    for policy in POLICIES {
        let table = Arc::new(FutexTable::with_policy(policy));
        let word = Arc::new(AtomicU32::new(0));
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for i in 0..8 {
            let (t_table, t_word, order) = (table.clone(), word.clone(), order.clone());
            threads.push(thread::spawn(move || {
                assert_eq!(t_table.wait(&t_word, 0, None), Ok(Woken));
                order.lock().unwrap().push(i);
            }));
            // Queue them in a known order.
            until_waiters(&table, &word, i + 1);
        }
        for i in 0..8 {
            assert_eq!(table.wake(&word, 1), 1);
            // Wait for the woken thread to record itself before the next wake.
            while order.lock().unwrap().len() <= i {
                thread::yield_now();
            }
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
        assert_eq!(table.wake(&word, 1), 0);
    }
}

#[test]
fn wake_all_wakes_every_waiter_and_reports_the_count() {
    for policy in POLICIES {
        let table = Arc::new(FutexTable::with_policy(policy));
        let word = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..40)
            .map(|_| {
                let (table, word) = (table.clone(), word.clone());
                thread::spawn(move || table.wait(&word, 0, None))
            })
            .collect();
        until_waiters(&table, &word, 40);
        word.store(1, Ordering::Relaxed);
        // More than the wake list keeps inline: exercises the spill.
        assert_eq!(table.wake_all(&word), 40);
        for t in threads {
            assert_eq!(t.join().unwrap(), Ok(Woken));
        }
        assert_eq!(table.total_waiters(), 0);
    }
}

/// A timeout racing a wake: every wake that reports a waiter must be matched
/// by a waiter that reports `Woken`, and vice versa (contract 5).
#[test]
fn timeout_racing_wake_conserves_the_wake_count() {
    for policy in POLICIES {
        let table = Arc::new(FutexTable::with_policy(policy));
        let word = Arc::new(AtomicU32::new(0));
        let woken_reported = Arc::new(AtomicUsize::new(0));
        let mut wakes_reported = 0;
        for round in 0..2000u32 {
            word.store(0, Ordering::Relaxed);
            let barrier = Arc::new(Barrier::new(2));
            let t = {
                let (table, word, woken, barrier) = (
                    table.clone(),
                    word.clone(),
                    woken_reported.clone(),
                    barrier.clone(),
                );
                thread::spawn(move || {
                    barrier.wait();
                    let timeout = Duration::from_micros(u64::from(round % 50));
                    match table.wait(&word, 0, Some(timeout)) {
                        Ok(Woken) => {
                            woken.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(WaitError::TimedOut) | Err(WaitError::ValueChanged) => {}
                    }
                })
            };
            barrier.wait();
            for _ in 0..(round % 7) {
                std::hint::spin_loop();
            }
            word.store(1, Ordering::Relaxed);
            wakes_reported += table.wake(&word, 1);
            t.join().unwrap();
        }
        assert_eq!(woken_reported.load(Ordering::Relaxed), wakes_reported);
        assert_eq!(table.total_waiters(), 0);
    }
}

/// Counter hygiene: a million waits that end in `ValueChanged` or
/// `TimedOut`, racing wakes on the same words, leave every count at zero.
#[test]
fn counter_hygiene_after_a_million_failed_waits() {
    for policy in POLICIES {
        let table = Arc::new(FutexTable::with_buckets(policy, 64).unwrap());
        let words: Arc<Vec<AtomicU32>> = Arc::new((0..16).map(|_| AtomicU32::new(0)).collect());
        let threads = 4;
        let per_thread = 1_000_000 / threads / 2;
        let waiters: Vec<_> = (0..threads)
            .map(|t| {
                let (table, words) = (table.clone(), words.clone());
                thread::spawn(move || {
                    for i in 0..per_thread {
                        let word = &words[(i + t) % words.len()];
                        let current = word.load(Ordering::Relaxed);
                        // Expected value wrong: ValueChanged.
                        let r = table.wait(word, current.wrapping_add(1), None);
                        assert_eq!(r, Err(WaitError::ValueChanged));
                        // Zero timeout, or now and then a real sleep that
                        // times out (or is woken by the waker threads).
                        let timeout = if i % 500 == 0 {
                            Duration::from_micros(20)
                        } else {
                            Duration::ZERO
                        };
                        let _ = table.wait(word, current, Some(timeout));
                    }
                })
            })
            .collect();
        let stop = Arc::new(AtomicU32::new(0));
        let waker = {
            let (table, words, stop) = (table.clone(), words.clone(), stop.clone());
            thread::spawn(move || {
                let mut i = 0;
                while stop.load(Ordering::Relaxed) == 0 {
                    table.wake(&words[i % words.len()], 1);
                    i += 1;
                }
            })
        };
        for t in waiters {
            t.join().unwrap();
        }
        stop.store(1, Ordering::Relaxed);
        waker.join().unwrap();
        assert_eq!(table.total_waiters(), 0, "policy {policy:?}");
    }
}

#[test]
fn cmp_requeue_with_a_mismatched_value_moves_nobody() {
    let table = Arc::new(FutexTable::new());
    let from = Arc::new(AtomicU32::new(0));
    let to = AtomicU32::new(0);
    let t = {
        let (table, from) = (table.clone(), from.clone());
        thread::spawn(move || table.wait(&from, 0, None))
    };
    until_waiters(&table, &from, 1);
    assert_eq!(
        table.cmp_requeue(&from, &to, 7, 1, 10),
        Err(RequeueError::ValueMismatch {
            expected: 7,
            found: 0
        })
    );
    assert_eq!(table.queued(&from), 1);
    assert_eq!(
        table.stats().requeues,
        0,
        "a refused requeue is not counted"
    );
    assert_eq!(table.wake(&to, 1), 0, "nobody was moved to the target");
    from.store(1, Ordering::Relaxed);
    assert_eq!(table.wake(&from, 1), 1);
    assert_eq!(t.join().unwrap(), Ok(Woken));
}

#[test]
fn cmp_requeue_from_a_word_to_itself_is_refused() {
    let table = FutexTable::new();
    let word = AtomicU32::new(0);
    assert_eq!(
        table.cmp_requeue(&word, &word, 0, 1, 1),
        Err(RequeueError::SameWord)
    );
    assert_eq!(table.total_waiters(), 0);
}

#[test]
fn cmp_requeue_wakes_some_and_moves_the_rest_to_the_target() {
    for policy in POLICIES {
        let table = Arc::new(FutexTable::with_policy(policy));
        let from = Arc::new(AtomicU32::new(0));
        let to = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..5)
            .map(|_| {
                let (table, from) = (table.clone(), from.clone());
                thread::spawn(move || table.wait(&from, 0, None))
            })
            .collect();
        until_waiters(&table, &from, 5);
        from.store(1, Ordering::Relaxed);
        assert_eq!(
            table.cmp_requeue(&from, &to, 1, 1, 3),
            Ok(Requeued {
                woken: 1,
                requeued: 3
            })
        );
        if cfg!(feature = "stats") {
            let st = table.stats();
            assert_eq!(
                (st.requeues, st.requeued, st.wakeups, st.wakes),
                (1, 3, 1, 0),
                "one requeue that woke one and moved three; no wake call yet"
            );
        }
        // One is left on `from`, three sleep on `to`.
        assert_eq!(table.wake_all(&from), 1);
        assert_eq!(table.wake_all(&to), 3);
        for t in threads {
            assert_eq!(t.join().unwrap(), Ok(Woken));
        }
        assert_eq!(table.total_waiters(), 0);
    }
}

/// A requeued waiter that times out must find its record in the target
/// bucket, remove it, and leave both counts exact.
#[test]
fn timeout_after_requeue_cancels_from_the_target_bucket() {
    // Many buckets so the two words almost surely hash apart; with one
    // bucket, the same-bucket path is exercised instead.
    for buckets in [1024, 1] {
        let table = Arc::new(FutexTable::with_buckets(WakePolicy::WaiterCount, buckets).unwrap());
        let from = Arc::new(AtomicU32::new(0));
        let to = AtomicU32::new(0);
        let t = {
            let (table, from) = (table.clone(), from.clone());
            thread::spawn(move || table.wait(&from, 0, Some(Duration::from_millis(30))))
        };
        until_waiters(&table, &from, 1);
        assert_eq!(
            table.cmp_requeue(&from, &to, 0, 0, 1),
            Ok(Requeued {
                woken: 0,
                requeued: 1
            })
        );
        assert_eq!(t.join().unwrap(), Err(WaitError::TimedOut));
        assert_eq!(table.total_waiters(), 0);
        assert_eq!(table.wake_all(&to), 0);
    }
}

#[test]
fn table_with_a_bad_bucket_count_is_a_typed_error() {
    for bad in [0, 3, 100, (1 << 20) + 1, usize::MAX] {
        assert!(matches!(
            FutexTable::with_buckets(WakePolicy::WaiterCount, bad),
            Err(FutexError::BucketCount { requested, .. }) if requested == bad
        ));
    }
    assert_eq!(
        FutexTable::with_buckets(WakePolicy::AlwaysLock, 1)
            .unwrap()
            .buckets(),
        1
    );
}

/// Many waiters and wakers on a few words: every waiter eventually returns.
#[test]
fn stress_many_waiters_and_wakers_nobody_hangs() {
    for policy in POLICIES {
        let table = Arc::new(FutexTable::with_buckets(policy, 4).unwrap());
        let words: Arc<Vec<AtomicU32>> = Arc::new((0..3).map(|_| AtomicU32::new(0)).collect());
        let waiters: Vec<_> = (0..6)
            .map(|t| {
                let (table, words) = (table.clone(), words.clone());
                thread::spawn(move || {
                    for i in 0..3000 {
                        let word = &words[(i + t) % 3];
                        let v = word.load(Ordering::Acquire);
                        let _ = table.wait(word, v, None);
                    }
                })
            })
            .collect();
        let done = Arc::new(AtomicU32::new(0));
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (table, words, done) = (table.clone(), words.clone(), done.clone());
                thread::spawn(move || {
                    let mut i = 0;
                    while done.load(Ordering::Relaxed) == 0 {
                        let word = &words[i % 3];
                        word.fetch_add(1, Ordering::Release);
                        table.wake(word, 2);
                        i += 1;
                    }
                })
            })
            .collect();
        for t in waiters {
            t.join().unwrap();
        }
        done.store(1, Ordering::Relaxed);
        for t in wakers {
            t.join().unwrap();
        }
        assert_eq!(table.total_waiters(), 0);
    }
}

/// With the `stats` feature, a no-waiter wake under `WaiterCount` is
/// counted as skipped and takes no bucket lock; under `AlwaysLock` it locks.
#[cfg(feature = "stats")]
#[test]
fn stats_count_skipped_wakes_and_lock_acquisitions() {
    let word = AtomicU32::new(0);
    let counting = FutexTable::new();
    let locking = FutexTable::with_policy(WakePolicy::AlwaysLock);
    for _ in 0..10 {
        counting.wake(&word, 1);
        locking.wake(&word, 1);
    }
    let (c, l) = (counting.stats(), locking.stats());
    assert_eq!(
        (c.wakes, c.wakes_skipped, c.wake_lock_acquisitions),
        (10, 10, 0)
    );
    assert_eq!(
        (l.wakes, l.wakes_skipped, l.wake_lock_acquisitions),
        (10, 0, 10)
    );
    assert_eq!(c.wakeups + l.wakeups, 0);
}
