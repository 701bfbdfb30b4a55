//! Mutex and condvar scenarios on real threads.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use herdless::{Condvar, Mutex};

/// 8+ threads increment a shared counter, some through timed locks that may
/// give up; the counter equals the number of successful critical sections,
/// and no two threads were ever inside at once.
#[test]
fn mutex_counter_under_eight_threads_with_timeouts_mixed_in() {
    let threads = 10;
    let iterations = 20_000;
    let m = Arc::new(Mutex::new((0u64, 0u32)));
    let successes = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (m, successes) = (m.clone(), successes.clone());
            thread::spawn(move || {
                for i in 0..iterations {
                    let guard = match (t + i) % 4 {
                        0 => m.try_lock_for(Duration::from_micros(5)),
                        1 => m.try_lock_for(Duration::ZERO),
                        2 => m.try_lock_for(Duration::MAX),
                        _ => Some(m.lock()),
                    };
                    if let Some(mut g) = guard {
                        // `inside` detects two owners at once.
                        g.1 += 1;
                        assert_eq!(g.1, 1, "two threads inside the mutex");
                        g.0 += 1;
                        g.1 -= 1;
                        successes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = m.lock().0;
    assert_eq!(total as usize, successes.load(Ordering::Relaxed));
    assert!(
        total >= (threads * iterations / 2) as u64,
        "untimed locks always succeed"
    );
    assert!(!m.is_locked());
}

#[test]
fn try_lock_fails_while_held_and_succeeds_after() {
    let m = Mutex::new(());
    let g = m.lock();
    assert!(m.try_lock().is_none());
    assert!(m.try_lock_for(Duration::ZERO).is_none());
    assert!(m.try_lock_for(Duration::from_millis(1)).is_none());
    drop(g);
    assert!(m.try_lock().is_some());
}

/// Port of the LTP `pthread_cond_broadcast/4-1` idea: N waiters block on a
/// condition, one broadcast releases them all; repeated many times.
#[test]
fn condvar_broadcast_wakes_every_waiter_every_round() {
    broadcast_rounds(Notify::HoldingTheLock);
}

/// The same with the broadcast after the unlock, when the mutex is free
/// (on two CPUs the wake cascade, not the requeue chain, `condvar/cascade.rs`).
#[test]
fn condvar_broadcast_after_the_unlock_wakes_every_waiter_and_counts_them() {
    broadcast_rounds(Notify::AfterTheUnlock);
}

/// Where the broadcaster calls `notify_all`.
#[derive(Clone, Copy, PartialEq)]
enum Notify {
    HoldingTheLock,
    AfterTheUnlock,
}

/// 12 waiters, 300 rounds: each round every waiter counts itself and
/// waits; the broadcaster waits for all of them, advances the round and
/// broadcasts (`notify`). Every waiter is woken every round, and the count
/// `notify_all` returns is every waiter.
fn broadcast_rounds(notify: Notify) {
    let waiters = 12;
    let rounds = 300;
    let state = Arc::new((Mutex::new((0u32, 0usize)), Condvar::new(), Condvar::new()));
    let handles: Vec<_> = (0..waiters)
        .map(|_| {
            let state = state.clone();
            thread::spawn(move || {
                let (m, go, parked) = &*state;
                for round in 1..=rounds {
                    let mut g = m.lock();
                    g.1 += 1;
                    parked.notify_one();
                    while g.0 < round {
                        go.wait(&mut g);
                    }
                }
            })
        })
        .collect();
    let (m, go, parked) = &*state;
    for round in 1..=rounds {
        let mut g = m.lock();
        while g.1 < waiters {
            parked.wait(&mut g);
        }
        g.1 = 0;
        g.0 = round;
        // Every waiter is inside `wait`: it counted itself under the lock,
        // which only `wait` gave back.
        // Kept across the broadcast, or dropped here (unlocked) before it.
        let guard = (notify == Notify::HoldingTheLock).then_some(g);
        assert_eq!(go.notify_all(), waiters, "round {round}");
        drop(guard);
    }
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn condvar_notify_one_wakes_a_waiter() {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let p = pair.clone();
    let t = thread::spawn(move || {
        let mut ready = p.0.lock();
        while !*ready {
            p.1.wait(&mut ready);
        }
    });
    *pair.0.lock() = true;
    // Keep notifying until the waiter is gone: it may not have waited yet.
    while !t.is_finished() {
        pair.1.notify_one();
        thread::yield_now();
    }
    t.join().unwrap();
}

#[test]
fn condvar_timed_waits_zero_short_and_max() {
    let m = Mutex::new(());
    let c = Condvar::new();
    let mut g = m.lock();
    assert!(c.wait_for(&mut g, Duration::ZERO).timed_out());
    assert!(c.wait_for(&mut g, Duration::from_millis(2)).timed_out());
    // Duration::MAX is no deadline: it waits for the notify.
    let shared = Arc::new((Mutex::new(false), Condvar::new()));
    let s = shared.clone();
    let t = thread::spawn(move || {
        let mut done = s.0.lock();
        while !*done {
            assert!(!s.1.wait_for(&mut done, Duration::MAX).timed_out());
        }
    });
    *shared.0.lock() = true;
    while !t.is_finished() {
        shared.1.notify_all();
        thread::yield_now();
    }
    t.join().unwrap();
    drop(g);
}

/// A condvar used with two mutexes must neither panic nor lose a wakeup:
/// `notify_all` falls back to waking everybody.
#[test]
fn condvar_used_with_two_mutexes_still_wakes_everyone() {
    let shared = Arc::new((Mutex::new(false), Mutex::new(false), Condvar::new()));
    let barrier = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..2)
        .map(|which| {
            let (shared, barrier) = (shared.clone(), barrier.clone());
            thread::spawn(move || {
                let (a, b, c) = &*shared;
                let m = if which == 0 { a } else { b };
                let mut g = m.lock();
                barrier.wait();
                while !*g {
                    c.wait(&mut g);
                }
            })
        })
        .collect();
    barrier.wait();
    *shared.0.lock() = true;
    *shared.1.lock() = true;
    while handles.iter().any(|h| !h.is_finished()) {
        shared.2.notify_all();
        thread::yield_now();
    }
    for h in handles {
        h.join().unwrap();
    }
}

/// Producer/consumer on a bounded buffer with both condvars: every item
/// arrives exactly once. Consumers stop when the buffer is empty and every
/// producer has said it is done.
#[test]
fn condvar_bounded_buffer_delivers_every_item_once() {
    struct Buffer {
        items: Vec<u64>,
        producers_left: usize,
    }
    let cap = 4;
    let producers = 3;
    let per_producer = 5000u64;
    let state = Arc::new((
        Mutex::new(Buffer {
            items: Vec::new(),
            producers_left: producers as usize,
        }),
        Condvar::new(),
        Condvar::new(),
    ));
    let prods: Vec<_> = (0..producers)
        .map(|p| {
            let state = state.clone();
            thread::spawn(move || {
                let (m, not_full, not_empty) = &*state;
                for i in 0..per_producer {
                    let mut g = m.lock();
                    while g.items.len() == cap {
                        not_full.wait(&mut g);
                    }
                    g.items.push(p * per_producer + i);
                    not_empty.notify_one();
                }
                m.lock().producers_left -= 1;
                not_empty.notify_all();
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let state = state.clone();
            thread::spawn(move || {
                let (m, not_full, not_empty) = &*state;
                let mut got = Vec::new();
                let mut g = m.lock();
                loop {
                    if let Some(item) = g.items.pop() {
                        got.push(item);
                        not_full.notify_all();
                    } else if g.producers_left == 0 {
                        return got;
                    } else {
                        not_empty.wait(&mut g);
                    }
                }
            })
        })
        .collect();
    for p in prods {
        p.join().unwrap();
    }
    let mut all: Vec<u64> = consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..producers * per_producer).collect::<Vec<_>>());
}
