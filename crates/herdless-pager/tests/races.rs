//! Races: concurrent faults on one page, fault-around racing demand faults
//! and a background populater, discards while handlers are busy, and the
//! last owner dropping the pager while others were faulting.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use herdless_pager::{HandlerMode, MemSource, Pager};

#[test]
fn many_threads_faulting_one_page_get_it_filled_once() {
    const THREADS: usize = 8;
    let src = pattern(64 * PAGE, 4);
    for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
        let Some(pager) = build(
            Pager::builder(64 * PAGE)
                .source(MemSource::new(src.clone()))
                .fault_around(PAGE)
                .handlers(3)
                .mode(mode),
        ) else {
            return;
        };
        for p in 0..8 {
            let gate = Barrier::new(THREADS);
            thread::scope(|s| {
                for _ in 0..THREADS {
                    s.spawn(|| {
                        gate.wait();
                        check_page(&pager, p, |i| src[i]);
                    });
                }
            });
        }
        pager.settle();
        let st = pager.stats();
        assert_eq!(st.pages_on_demand, 8, "one fill per page: {st:?}");
        assert_eq!(st.faults, st.per_handler_faults.iter().sum::<u64>());
    }
}

#[test]
fn fault_around_racing_demand_faults_in_one_window_fills_each_page_once() {
    const THREADS: usize = 6;
    let len = 256 * PAGE;
    let src = pattern(len, 5);
    for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
        let Some(pager) = build(
            Pager::builder(len)
                .source(MemSource::new(src.clone()))
                .fault_around(16 * PAGE)
                .handlers(3)
                .mode(mode),
        ) else {
            return;
        };
        let gate = Barrier::new(THREADS + 1);
        thread::scope(|s| {
            for t in 0..THREADS {
                let (pager, src, gate) = (&pager, &src, &gate);
                s.spawn(move || {
                    gate.wait();
                    // Every thread walks every window, each from a different
                    // page of it: demand faults and fault-around collide.
                    for w in 0..len / (16 * PAGE) {
                        check_page(pager, w * 16 + (t * 5) % 16, |i| src[i]);
                    }
                });
            }
            // A background copier racing them (post-copy push).
            let (pager, gate) = (&pager, &gate);
            s.spawn(move || {
                gate.wait();
                pager.populate(0, len).unwrap();
            });
        });
        for p in 0..len / PAGE {
            check_page(&pager, p, |i| src[i]);
        }
        pager.settle();
        let st = pager.stats();
        assert_eq!(st.pages_installed(), (len / PAGE) as u64, "{st:?}");
        assert!(pager.take_errors().is_empty());
    }
}

#[test]
fn discards_while_handlers_are_busy_read_back_as_zeros_and_are_never_resurrected() {
    const READERS: usize = 3;
    let len = 512 * PAGE;
    let src = pattern(len, 6);
    for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
        let Some(pager) = build(
            Pager::builder(len)
                .source(MemSource::new(src.clone()))
                .fault_around(16 * PAGE)
                .handlers(2)
                .mode(mode),
        ) else {
            return;
        };
        // Discarded: pages 3..7 of every 16-page window (inside windows, so
        // fault-around is tempted by them).
        let discarded = |p: usize| (3..7).contains(&(p % 16));
        thread::scope(|s| {
            for t in 0..READERS {
                let pager = &pager;
                s.spawn(move || {
                    let mut order: Vec<usize> = (0..len / PAGE).collect();
                    Rng(t as u64 + 11).shuffle(&mut order);
                    let mut buf = [0u8; 8];
                    for p in order {
                        pager.read(p * PAGE + 8 * t, &mut buf).unwrap();
                    }
                });
            }
            let pager = &pager;
            s.spawn(move || {
                for w in 0..len / (16 * PAGE) {
                    pager.discard((w * 16 + 3) * PAGE, 4 * PAGE).unwrap();
                }
            });
        });
        pager.settle();
        for p in 0..len / PAGE {
            if discarded(p) {
                check_page(&pager, p, |_| 0);
            } else {
                check_page(&pager, p, |i| src[i]);
            }
        }
        pager.settle();
        let st = pager.stats();
        assert!(st.discard_events >= (len / (16 * PAGE)) as u64, "{st:?}");
        assert!(pager.take_errors().is_empty());
    }
}

#[test]
fn fault_around_never_takes_a_page_discarded_before_it_was_ever_filled() {
    let len = 64 * PAGE;
    let src = pattern(len, 7);
    let Some(pager) = build(
        Pager::builder(len)
            .source(MemSource::new(src.clone()))
            .fault_around(16 * PAGE),
    ) else {
        return;
    };
    pager.discard(5 * PAGE, 3 * PAGE).unwrap();
    pager.settle();
    check_page(&pager, 0, |i| src[i]); // fills the window around page 0
    pager.settle();
    let st = pager.stats();
    assert_eq!(st.pages_fault_around, 15 - 3, "{st:?}");
    for p in 0..16 {
        if (5..8).contains(&p) {
            check_page(&pager, p, |_| 0);
        } else {
            check_page(&pager, p, |i| src[i]);
        }
    }
    // Filled, discarded, faulted again: zeros, and its window stays as is.
    pager.discard(0, PAGE).unwrap();
    pager.settle();
    check_page(&pager, 0, |_| 0);
    check_page(&pager, 1, |i| src[i]);
}

#[test]
fn the_last_owner_drops_the_pager_after_the_others_faulted_and_nothing_hangs() {
    const THREADS: usize = 4;
    let len = 128 * PAGE;
    let src = Arc::new(pattern(len, 8));
    for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
        let Some(pager) = build(
            Pager::builder(len)
                .source(MemSource::new(src.to_vec()))
                .handlers(2)
                .mode(mode),
        ) else {
            return;
        };
        let pager = Arc::new(pager);
        let gate = Arc::new(Barrier::new(THREADS + 1));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (pager, src, gate) = (Arc::clone(&pager), Arc::clone(&src), Arc::clone(&gate));
                thread::spawn(move || {
                    gate.wait();
                    for p in (t..len / PAGE).step_by(THREADS) {
                        check_page(&pager, p, |i| src[i]);
                    }
                    // One of these drops is the last: Drop runs here, on a
                    // faulting thread, once its own faults are done.
                })
            })
            .collect();
        gate.wait();
        drop(pager); // the main thread lets go while the others fault
        for h in handles {
            h.join().unwrap();
        }
    }
}
