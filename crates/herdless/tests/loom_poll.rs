//! loom models of the poller: callbacks racing the harvest and the wait.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p herdless --release --test loom_poll`.
//! Each model runs against the three ready-list variants and is named after
//! the interleaving it pins. A lost wakeup shows up as a loom deadlock (every
//! thread blocked); a lost or duplicated item as a failed assertion. Under
//! loom a timed wait sleeps once and then times out, so loom places the
//! timeout anywhere after the waiter has queued itself.
#![cfg(loom)]

mod loom_common;

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;

use herdless::poll::{Event, EventFd, EventPoll, Pollable, Readiness, Trigger};
use herdless::variants::ReadyListKind;
use loom_common::model;

const R: Readiness = Readiness::READABLE;

fn tokens(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.token).collect()
}

/// The classic lost wakeup, on the poller: the source fires while the
/// waiter is between its first look and its sleep (sleeper count, fences
/// (F1)/(F2), the wait queue's registration). The waiter must return.
#[test]
fn callback_racing_wait_registration_is_never_lost() {
    for kind in ReadyListKind::ALL {
        model(2, move || {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let efd = Arc::new(EventFd::new());
            poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
            let producer = {
                let efd = efd.clone();
                thread::spawn(move || efd.try_write(1).unwrap())
            };
            let mut events = Vec::new();
            assert_eq!(poller.wait(&mut events, 4, Duration::MAX), Ok(1));
            assert_eq!(tokens(&events), [1]);
            producer.join().unwrap();
        });
    }
}

/// Two sources append while the consumer drains (the seed's lockless
/// append, the overflow list, the `LockFree` cut): each event is reported
/// exactly once, and none is left without a wakeup (the blocking wait
/// would deadlock).
#[test]
fn lockless_append_racing_the_drain_loses_and_duplicates_nothing() {
    for kind in ReadyListKind::ALL {
        model(2, move || {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let a = Arc::new(EventFd::new());
            let b = Arc::new(EventFd::new());
            poller.add(a.clone(), 1, R, Trigger::Edge).unwrap();
            poller.add(b.clone(), 2, R, Trigger::Edge).unwrap();
            let producers: Vec<_> = [a, b]
                .into_iter()
                .map(|efd| thread::spawn(move || efd.try_write(1).unwrap()))
                .collect();
            let mut seen = Vec::new();
            let mut events = Vec::new();
            // A drain racing the appends, then block for whatever is left.
            poller.wait(&mut events, 4, Duration::ZERO).unwrap();
            seen.extend(tokens(&events));
            while seen.len() < 2 {
                poller.wait(&mut events, 4, Duration::MAX).unwrap();
                seen.extend(tokens(&events));
            }
            for p in producers {
                p.join().unwrap();
            }
            seen.sort_unstable();
            assert_eq!(seen, [1, 2], "each edge reported once");
            assert_eq!(poller.wait(&mut events, 4, Duration::ZERO), Ok(0));
        });
    }
}

/// Selftest epoll61 and ARCHITECTURE contract 4: one edge, a timed waiter and a
/// patient one. The timed waiter's timeout may fire anywhere around the
/// wake that chooses it; with the hook, a chosen timed waiter gives up
/// without looking. Either way the event is reported by somebody: the timed
/// waiter harvests (then stops the patient one with a second source) or
/// passes the wakeup on. If it swallowed it, the patient waiter would
/// sleep forever (loom: deadlock).
#[test]
fn chosen_waiter_timing_out_harvests_or_passes_the_wake_on() {
    for kind in ReadyListKind::ALL {
        for give_up in [false, true] {
            model(1, move || {
                let poller = Arc::new(EventPoll::with_kind(kind));
                let efd = Arc::new(EventFd::new());
                let stop = Arc::new(EventFd::new());
                poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
                poller.add(stop.clone(), 2, R, Trigger::Edge).unwrap();
                if give_up {
                    poller.debug_give_up_when_chosen(1);
                }
                let timed = {
                    let (poller, stop) = (poller.clone(), stop.clone());
                    thread::spawn(move || {
                        let mut events = Vec::new();
                        poller.wait(&mut events, 4, Duration::from_secs(1)).unwrap();
                        if tokens(&events).contains(&1) {
                            stop.try_write(1).unwrap();
                        }
                        tokens(&events)
                    })
                };
                let patient = {
                    let poller = poller.clone();
                    thread::spawn(move || {
                        let mut events = Vec::new();
                        poller.wait(&mut events, 4, Duration::MAX).unwrap();
                        tokens(&events)
                    })
                };
                efd.try_write(1).unwrap();
                let t = timed.join().unwrap();
                let p = patient.join().unwrap();
                let ones = t.iter().chain(&p).filter(|&&x| x == 1).count();
                assert_eq!(ones, 1, "the edge is reported exactly once");
            });
        }
    }
}

/// An edge that arrives while the harvest holds the item (taken off the
/// list, not yet looked at): the callback finds it still queued and does
/// nothing, so the harvest must unqueue it *before* reading the source.
/// The consumer drains the counter before each wait, so a harvest may find
/// the source empty just as the second write lands; if that write's edge
/// were lost the consumer would wait forever (loom: deadlock). Mutation
/// check: moving `item.unqueue()` after the source read in
/// `Core::harvest` makes this model deadlock.
#[test]
fn edge_arriving_during_the_harvest_is_not_lost() {
    for kind in ReadyListKind::ALL {
        model(2, move || {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let efd = Arc::new(EventFd::new());
            poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
            // The first edge queues the item before the race starts.
            efd.try_write(1).unwrap();
            let producer = {
                let efd = efd.clone();
                thread::spawn(move || efd.try_write(1).unwrap())
            };
            let mut events = Vec::new();
            let mut total = 0;
            loop {
                total += efd.try_read().unwrap_or(0);
                if total == 2 {
                    break;
                }
                poller.wait(&mut events, 4, Duration::MAX).unwrap();
            }
            producer.join().unwrap();
        });
    }
}

/// `LockFree` latches the source's callback entry while the item is queued:
/// a write then skips the source's queue lock when nobody else is there.
/// Here the first write queues the item and the second latches the entry;
/// the consumer drains the counter, and its harvest (which re-arms the
/// entry) races the third write. Either that write sees the entry re-armed
/// and calls the callback, or the harvest's source read sees it: never
/// neither (the consumer would sleep forever: loom deadlock). Mutation
/// check: without the fence (R) in `WaitQueue::rearm`, or (W) in
/// `WaitQueue::wake_up`, this model deadlocks.
#[test]
fn a_write_skipping_a_latched_entry_is_seen_by_the_rearming_harvest() {
    model(2, || {
        let poller = Arc::new(EventPoll::with_kind(ReadyListKind::LockFree));
        let efd = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        efd.try_write(1).unwrap(); // queues the item
        efd.try_write(1).unwrap(); // finds it queued: latches the entry
        let producer = {
            let efd = efd.clone();
            thread::spawn(move || efd.try_write(1).unwrap())
        };
        let mut events = Vec::new();
        let mut total = 0;
        loop {
            total += efd.try_read().unwrap_or(0);
            if total == 3 {
                break;
            }
            poller.wait(&mut events, 4, Duration::MAX).unwrap();
        }
        producer.join().unwrap();
    });
}

/// Issue 12: a thread polling the poller itself (`poll(epfd, POLLIN, -1)`:
/// `wait_event` on its own queue until it is readable) races the source's
/// write. Either its look (after the fence (E) of its enqueue) sees the
/// queued item, or the callback's wake of `poll_wait` (fence (W), after the
/// append) sees its entry and wakes it. Mutation check: the code before
/// the fix (that wake gated on a count of outer pollers) deadlocks this
/// model on every ready list, and so does removing the wake.
#[test]
fn callback_racing_a_thread_polling_the_poller_wakes_it() {
    for kind in ReadyListKind::ALL {
        model(2, move || {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let efd = Arc::new(EventFd::new());
            poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
            let producer = {
                let efd = efd.clone();
                thread::spawn(move || efd.try_write(1).unwrap())
            };
            poller
                .wait_queue()
                .wait_event(|| poller.readiness().contains(R));
            producer.join().unwrap();
            // Polling took nothing: the event is still there to harvest.
            let mut events = Vec::new();
            assert_eq!(poller.wait(&mut events, 4, Duration::ZERO), Ok(1));
        });
    }
}

/// An outer poller starts watching an inner one while the inner one's
/// source fires: the outer `add` registers on the inner `poll_wait` (fence
/// (E)) before it reads the inner readiness, the inner callback appends
/// before its wake of `poll_wait` (fence (W)), so the outer poller either
/// sees the inner one ready at `add` or is called back; its waiter then
/// returns. (This replaced a count of outer pollers with its own fence.)
/// Mutation check: without the wake of `poll_wait` in `Core::queue` this
/// model deadlocks on every ready list.
#[test]
fn source_event_racing_an_outer_pollers_add_reaches_the_outer_waiter() {
    for kind in ReadyListKind::ALL {
        model(2, move || {
            let outer = EventPoll::with_kind(kind);
            let inner = Arc::new(EventPoll::with_kind(kind));
            let efd = Arc::new(EventFd::new());
            inner.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
            let producer = {
                let efd = efd.clone();
                thread::spawn(move || efd.try_write(1).unwrap())
            };
            outer.add(inner.clone(), 2, R, Trigger::Edge).unwrap();
            let mut events = Vec::new();
            assert_eq!(outer.wait(&mut events, 4, Duration::MAX), Ok(1));
            assert_eq!(tokens(&events), [2]);
            producer.join().unwrap();
        });
    }
}
