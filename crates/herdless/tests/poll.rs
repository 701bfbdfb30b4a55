//! EventPoll and EventFd scenarios (real threads), each run against the
//! three ready-list variants. Names say the scenario; the kernel selftest a
//! scenario ports is named in its doc. None depends on timing to pass:
//! threads are lined up by the poller's own counts and `/proc` sleep
//! states, and bounded waits are hang detectors only.
#![cfg(not(loom))]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use herdless::channel::Channel;
use herdless::poll::{
    Event, EventFd, EventFdError, EventPoll, PollError, Pollable, Readiness, Trigger, MAX_NESTING,
};
use herdless::variants::ReadyListKind;
use herdless::Attempt;

const KINDS: [ReadyListKind; 3] = ReadyListKind::ALL;
/// Generous bound for anything that must happen; only a hang trips it.
const HANG: Duration = Duration::from_secs(60);
const R: Readiness = Readiness::READABLE;

/// Spins (yielding) until `cond` holds; panics after `HANG`.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG, "hang: waited {HANG:?} for {what}");
        thread::yield_now();
    }
}

fn gettid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// Whether thread `tid` of this process is asleep in the kernel (state S).
fn is_asleep(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state == 'S')
        })
        .unwrap_or(false)
}

/// Until `tids.len()` threads are queued in `poller.wait` and all sleep.
fn until_waiting(poller: &EventPoll, tids: &[i32]) {
    until("waiters to fall asleep", || {
        poller.waiting() == tids.len() && tids.iter().all(|&t| is_asleep(t))
    });
}

/// Spawns `n` threads that each call `wait(max)` once with `timeout` and
/// send back what they got; returns their tids once they are all asleep.
fn spawn_waiters(
    poller: &Arc<EventPoll>,
    n: usize,
    max: usize,
) -> (Vec<i32>, mpsc::Receiver<Vec<Event>>) {
    let (tx, rx) = mpsc::channel();
    let (tid_tx, tid_rx) = mpsc::channel();
    for _ in 0..n {
        let (poller, tx, tid_tx) = (poller.clone(), tx.clone(), tid_tx.clone());
        thread::spawn(move || {
            tid_tx.send(gettid()).unwrap();
            let mut events = Vec::new();
            let got = poller.wait(&mut events, max, Duration::MAX).unwrap();
            assert_eq!(got, events.len());
            tx.send(events).unwrap();
        });
    }
    let tids: Vec<i32> = (0..n).map(|_| tid_rx.recv().unwrap()).collect();
    until_waiting(poller, &tids);
    (tids, rx)
}

fn poll_now(poller: &EventPoll) -> Vec<Event> {
    let mut events = Vec::new();
    poller.wait(&mut events, 64, Duration::ZERO).unwrap();
    events
}

// ---------------------------------------------------------------- EventFd

#[test]
fn eventfd_write_adds_and_read_returns_and_resets() {
    let efd = EventFd::new();
    assert_eq!(efd.try_read(), Err(EventFdError::WouldBlock));
    efd.write(2).unwrap();
    efd.try_write(3).unwrap();
    assert_eq!(efd.value(), 5);
    assert_eq!(efd.readiness(), Readiness::READABLE | Readiness::WRITABLE);
    assert_eq!(efd.read(), 5);
    assert_eq!(efd.value(), 0);
    assert_eq!(efd.readiness(), Readiness::WRITABLE);
    assert_eq!(
        efd.read_timeout(Duration::ZERO),
        Err(EventFdError::TimedOut)
    );
}

#[test]
fn eventfd_semaphore_mode_reads_one_at_a_time() {
    let efd = EventFd::semaphore();
    assert!(efd.is_semaphore());
    efd.write(3).unwrap();
    assert_eq!([efd.read(), efd.read(), efd.read()], [1, 1, 1]);
    assert_eq!(efd.try_read(), Err(EventFdError::WouldBlock));
}

#[test]
fn eventfd_overflow_is_a_typed_error_and_never_wraps() {
    let efd = EventFd::with_initial(EventFd::MAX - 1, false);
    efd.try_write(1).unwrap();
    assert_eq!(efd.value(), EventFd::MAX);
    assert_eq!(efd.readiness(), Readiness::READABLE, "full: not writable");
    assert_eq!(efd.try_write(1), Err(EventFdError::Overflow));
    assert_eq!(efd.try_write(u64::MAX), Err(EventFdError::InvalidValue));
    assert_eq!(efd.write(u64::MAX), Err(EventFdError::InvalidValue));
    assert_eq!(
        efd.write_timeout(1, Duration::ZERO),
        Err(EventFdError::TimedOut)
    );
    assert_eq!(efd.value(), EventFd::MAX, "unchanged by the failed writes");
    assert_eq!(
        EventFd::with_initial(u64::MAX, false).value(),
        EventFd::MAX,
        "initial value clamped"
    );
}

#[test]
fn eventfd_blocked_reader_wakes_on_write_and_blocked_writer_on_read() {
    let efd = Arc::new(EventFd::new());
    let (tid_tx, tid_rx) = mpsc::channel();
    let reader = {
        let (efd, tid_tx) = (efd.clone(), tid_tx.clone());
        thread::spawn(move || {
            tid_tx.send(gettid()).unwrap();
            efd.read_timeout(Duration::MAX)
        })
    };
    let tid = tid_rx.recv().unwrap();
    until("the reader to sleep", || {
        efd.read_wait_queue().len() == 1 && is_asleep(tid)
    });
    efd.write(7).unwrap();
    assert_eq!(reader.join().unwrap(), Ok(7));

    // Full counter: a writer blocks until a read makes room.
    efd.write(EventFd::MAX).unwrap();
    let writer = {
        let (efd, tid_tx) = (efd.clone(), tid_tx.clone());
        thread::spawn(move || {
            tid_tx.send(gettid()).unwrap();
            efd.write(5)
        })
    };
    let tid = tid_rx.recv().unwrap();
    until("the writer to sleep", || {
        efd.write_wait_queue().len() == 1 && is_asleep(tid)
    });
    assert_eq!(efd.read(), EventFd::MAX);
    writer.join().unwrap().unwrap();
    assert_eq!(efd.read(), 5);
}

// ------------------------------------------------------------- triggers

#[test]
fn level_triggered_source_is_reported_while_ready() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        assert_eq!(poller.kind(), kind);
        let efd = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::Level).unwrap();
        assert!(poll_now(&poller).is_empty(), "{kind:?}");
        efd.write(1).unwrap();
        let expect = vec![Event {
            token: 1,
            readiness: R,
        }];
        assert_eq!(poll_now(&poller), expect, "{kind:?}");
        assert_eq!(poll_now(&poller), expect, "{kind:?}: still ready");
        efd.read();
        assert!(poll_now(&poller).is_empty(), "{kind:?}: drained");
    }
}

#[test]
fn edge_triggered_source_is_reported_once_per_event() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        let efd = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        efd.write(1).unwrap();
        assert_eq!(poll_now(&poller).len(), 1, "{kind:?}");
        assert!(poll_now(&poller).is_empty(), "{kind:?}: no new edge");
        efd.write(1).unwrap();
        assert_eq!(poll_now(&poller).len(), 1, "{kind:?}: a new edge");
    }
}

/// `LockFree` latches the source's entry while the item is queued (writes
/// then skip the callback); every harvest re-arms it, also for an item the
/// harvest drops (a disabled one-shot), and deleting a latched watch leaves
/// the source's queue empty. Run on every variant: behaviour is the same.
#[test]
fn writes_while_the_item_is_queued_latch_and_every_harvest_rearms() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        let efd = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        for _ in 0..3 {
            efd.write(1).unwrap(); // queues, then latches
            efd.write(1).unwrap();
            efd.write(1).unwrap();
            assert_eq!(poll_now(&poller).len(), 1, "{kind:?}");
            assert_eq!(efd.read(), 3, "{kind:?}");
            assert!(poll_now(&poller).is_empty(), "{kind:?}: no new edge");
        }
        // One-shot: fires, is disabled; writes queue and latch it again; the
        // harvest that drops it re-arms; `modify` reports it once more.
        poller.modify(&*efd, 2, R, Trigger::OneShot).unwrap();
        efd.write(1).unwrap();
        assert_eq!(poll_now(&poller).len(), 1, "{kind:?}");
        efd.write(1).unwrap();
        efd.write(1).unwrap();
        assert!(poll_now(&poller).is_empty(), "{kind:?}: disabled");
        efd.write(1).unwrap();
        assert!(poll_now(&poller).is_empty(), "{kind:?}: still disabled");
        poller.modify(&*efd, 3, R, Trigger::Edge).unwrap();
        assert_eq!(poll_now(&poller).len(), 1, "{kind:?}: modify re-arms");
        assert_eq!(efd.read(), 4, "{kind:?}");
        efd.write(1).unwrap();
        assert_eq!(poll_now(&poller).len(), 1, "{kind:?}: edge after re-arm");
        // Delete while latched: the entry goes, nothing is reported.
        efd.write(1).unwrap();
        efd.write(1).unwrap();
        poller.delete(&*efd).unwrap();
        assert!(efd.read_wait_queue().is_empty(), "{kind:?}");
        efd.write(1).unwrap();
        assert!(poll_now(&poller).is_empty(), "{kind:?}");
    }
}

#[test]
fn one_shot_source_is_reported_once_until_modify_rearms_it() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        let efd = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::OneShot).unwrap();
        efd.write(1).unwrap();
        assert_eq!(poll_now(&poller).len(), 1, "{kind:?}");
        efd.write(1).unwrap();
        assert!(poll_now(&poller).is_empty(), "{kind:?}: disabled");
        poller.modify(&*efd, 2, R, Trigger::OneShot).unwrap();
        assert_eq!(
            poll_now(&poller),
            [Event {
                token: 2,
                readiness: R
            }],
            "{kind:?}: re-armed with the new token"
        );
    }
}

#[test]
fn interest_filters_readiness_and_writability_is_watched_on_its_own_queue() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        let efd = Arc::new(EventFd::with_initial(EventFd::MAX, false));
        poller
            .add(efd.clone(), 1, Readiness::WRITABLE, Trigger::Edge)
            .unwrap();
        assert!(
            poll_now(&poller).is_empty(),
            "{kind:?}: full, readable only"
        );
        assert_eq!(efd.read(), EventFd::MAX);
        assert_eq!(
            poll_now(&poller),
            [Event {
                token: 1,
                readiness: Readiness::WRITABLE
            }],
            "{kind:?}: the read made room"
        );
        // Switch to readability: the write queue's entry goes away.
        poller.modify(&*efd, 1, R, Trigger::Edge).unwrap();
        assert_eq!(efd.write_wait_queue().len(), 0, "{kind:?}");
        efd.write(1).unwrap();
        assert_eq!(poll_now(&poller)[0].readiness, R, "{kind:?}");
    }
}

#[test]
fn channel_is_pollable_readable_on_send_and_hup_on_close() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        let ch = Arc::new(Channel::new());
        poller.add(ch.clone(), 9, R, Trigger::Edge).unwrap();
        assert!(poll_now(&poller).is_empty());
        ch.send(1).unwrap();
        assert_eq!(poll_now(&poller)[0].readiness, R, "{kind:?}");
        assert_eq!(ch.try_recv(), Ok(1));
        ch.close();
        assert_eq!(
            poll_now(&poller)[0].readiness,
            R | Readiness::HUP,
            "{kind:?}"
        );
    }
}

// ------------------------------------------------------------ bad input

#[test]
fn bad_input_gets_typed_errors() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        let efd = Arc::new(EventFd::new());
        let other = EventFd::new();
        poller.add(efd.clone(), 1, R, Trigger::Level).unwrap();
        assert_eq!(
            poller.add(efd.clone(), 2, R, Trigger::Edge),
            Err(PollError::AlreadyRegistered)
        );
        assert_eq!(
            poller.modify(&other, 1, R, Trigger::Level),
            Err(PollError::NotRegistered)
        );
        assert_eq!(poller.delete(&other), Err(PollError::NotRegistered));
        let mut events = Vec::new();
        assert_eq!(
            poller.wait(&mut events, 0, Duration::MAX),
            Err(PollError::ZeroMax)
        );
        assert_eq!(poller.wait(&mut events, 1, Duration::ZERO), Ok(0));
        poller.delete(&*efd).unwrap();
        assert_eq!(poller.delete(&*efd), Err(PollError::NotRegistered));
        assert!(poller.is_empty());
        // Re-adding after delete is fine.
        poller.add(efd.clone(), 3, R, Trigger::Level).unwrap();
        assert_eq!(poller.len(), 1);
    }
}

#[test]
fn a_short_timeout_returns_zero_and_duration_max_waits_for_the_event() {
    for kind in KINDS {
        let poller = Arc::new(EventPoll::with_kind(kind));
        let efd = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        let mut events = vec![Event {
            token: 99,
            readiness: R,
        }];
        assert_eq!(poller.wait(&mut events, 4, Duration::from_millis(1)), Ok(0));
        assert!(events.is_empty(), "events is cleared");
        let (_, rx) = spawn_waiters(&poller, 1, 4);
        efd.write(1).unwrap();
        assert_eq!(rx.recv_timeout(HANG).unwrap().len(), 1, "{kind:?}");
    }
}

#[test]
fn adding_a_poller_to_itself_or_making_a_loop_is_refused() {
    let a = Arc::new(EventPoll::new());
    let b = Arc::new(EventPoll::with_kind(ReadyListKind::Spinlock));
    assert_eq!(a.add(a.clone(), 0, R, Trigger::Level), Err(PollError::Loop));
    a.add(b.clone(), 0, R, Trigger::Level).unwrap();
    assert_eq!(b.add(a.clone(), 0, R, Trigger::Level), Err(PollError::Loop));
    let c = Arc::new(EventPoll::new());
    b.add(c.clone(), 0, R, Trigger::Level).unwrap();
    assert_eq!(c.add(a.clone(), 0, R, Trigger::Level), Err(PollError::Loop));
    // Deleting the edge makes the former loop legal.
    a.delete(&*b).unwrap();
    c.add(a.clone(), 0, R, Trigger::Level).unwrap();
    assert!(Arc::strong_count(&a) > 1, "held by c");
    drop(c);
    drop(b);
    assert_eq!(Arc::strong_count(&a), 1, "released with c");
}

#[test]
fn nesting_past_the_depth_limit_is_refused() {
    // A chain p0 <- p1 <- ... : p[i+1] watches p[i].
    let pollers: Vec<Arc<EventPoll>> = (0..MAX_NESTING + 2)
        .map(|_| Arc::new(EventPoll::new()))
        .collect();
    for i in 0..MAX_NESTING {
        pollers[i + 1]
            .add(pollers[i].clone(), i as u64, R, Trigger::Level)
            .unwrap();
    }
    let err = pollers[MAX_NESTING + 1].add(pollers[MAX_NESTING].clone(), 0, R, Trigger::Level);
    assert_eq!(err, Err(PollError::TooDeep { limit: MAX_NESTING }));
    // Also from below: a new poller under the bottom of the chain.
    let bottom = Arc::new(EventPoll::new());
    assert_eq!(
        pollers[0].add(bottom, 0, R, Trigger::Level),
        Err(PollError::TooDeep { limit: MAX_NESTING })
    );
}

#[test]
fn nested_poller_reports_its_readiness_to_the_outer_one() {
    for kind in KINDS {
        let outer = Arc::new(EventPoll::with_kind(kind));
        let inner = Arc::new(EventPoll::with_kind(kind));
        let efd = Arc::new(EventFd::new());
        inner.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        outer.add(inner.clone(), 2, R, Trigger::Level).unwrap();
        assert!(poll_now(&outer).is_empty(), "{kind:?}");
        // An outer waiter asleep is woken through the inner poller.
        let (_, rx) = spawn_waiters(&outer, 1, 4);
        efd.write(1).unwrap();
        let got = rx.recv_timeout(HANG).unwrap();
        assert_eq!(got[0].token, 2, "{kind:?}");
        // The inner event was not consumed by the outer look.
        assert_eq!(poll_now(&inner)[0].token, 1, "{kind:?}");
        assert!(poll_now(&outer).is_empty(), "{kind:?}: inner drained");
    }
}

// ------------------------------------------- the poller's own readiness

/// Spawns a thread that sleeps on `poller.wait_queue()` until the poller is
/// readable (`poll(epfd, POLLIN, -1)`), exclusively or not; returns the
/// receiver of its wakeup once it is queued and asleep. `entries` is how
/// many entries the queue holds besides the thread (outer pollers).
fn spawn_poller_poll(
    poller: &Arc<EventPoll>,
    exclusive: bool,
    entries: usize,
) -> (thread::JoinHandle<()>, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    let (tid_tx, tid_rx) = mpsc::channel();
    let handle = {
        let poller = poller.clone();
        thread::spawn(move || {
            tid_tx.send(gettid()).unwrap();
            let readable = || poller.readiness().contains(R);
            if exclusive {
                poller.wait_queue().wait_event_exclusive(|| {
                    if readable() {
                        Attempt::Done(())
                    } else {
                        Attempt::Wait
                    }
                });
            } else {
                poller.wait_queue().wait_event(readable);
            }
            tx.send(()).unwrap();
        })
    };
    let tid = tid_rx.recv().unwrap();
    until("the poll to fall asleep", || {
        poller.wait_queue().len() == entries + 1 && is_asleep(tid)
    });
    (handle, rx)
}

/// Issue 12 (selftest epoll13, 15, 16, 29, 30, 41, 43, 45, 47, 55-58): a
/// thread blocked on the poller's own queue, waiting for the poller to be
/// readable, is woken by an event on a watched source, with no outer poller
/// watching this one. It used to be woken only when an outer poller was
/// there (the wake of `poll_wait` was gated on the outer pollers' count).
#[test]
fn a_thread_polling_the_poller_itself_is_woken_by_a_source_event() {
    for kind in KINDS {
        for trigger in [Trigger::Level, Trigger::Edge] {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let efd = Arc::new(EventFd::new());
            poller.add(efd.clone(), 1, R, trigger).unwrap();
            let (handle, rx) = spawn_poller_poll(&poller, false, 0);
            efd.write(1).unwrap();
            rx.recv_timeout(HANG)
                .unwrap_or_else(|_| panic!("{kind:?} {trigger:?}: the poll was never woken"));
            handle.join().unwrap();
            // Polling consumed nothing: the event is still reported.
            assert_eq!(poll_now(&poller)[0].token, 1, "{kind:?} {trigger:?}");
        }
    }
}

/// Issue 12, nested (selftest epoll41-48, 55-58): a thread polling the
/// *outer* poller is woken by an event two levels down, and a thread polling
/// the inner one is woken alongside the outer poller's callback.
#[test]
fn threads_polling_nested_pollers_are_woken_at_every_level() {
    for kind in KINDS {
        let outer = Arc::new(EventPoll::with_kind(kind));
        let inner = Arc::new(EventPoll::with_kind(kind));
        let efd = Arc::new(EventFd::new());
        inner.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        outer.add(inner.clone(), 2, R, Trigger::Edge).unwrap();
        let (outer_poll, outer_rx) = spawn_poller_poll(&outer, false, 0);
        // The inner queue also holds the outer poller's callback.
        let (inner_poll, inner_rx) = spawn_poller_poll(&inner, false, 1);
        efd.write(1).unwrap();
        outer_rx
            .recv_timeout(HANG)
            .expect("the outer poll was never woken");
        inner_rx
            .recv_timeout(HANG)
            .expect("the inner poll was never woken");
        outer_poll.join().unwrap();
        inner_poll.join().unwrap();
        assert_eq!(poll_now(&outer)[0].token, 2, "{kind:?}");
    }
}

/// The poller wakes its own queue as any source does: every non-exclusive
/// entry and one exclusive waiter per queued event (kernel:
/// `ep_poll_safewake`, `wake_up_poll` with one exclusive). An exclusive
/// waiter on the poller's queue is woken, not only pollers.
#[test]
fn an_exclusive_waiter_on_the_pollers_queue_is_woken_by_a_source_event() {
    for kind in KINDS {
        let poller = Arc::new(EventPoll::with_kind(kind));
        let efd = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        let (handle, rx) = spawn_poller_poll(&poller, true, 0);
        efd.write(1).unwrap();
        rx.recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("{kind:?}: the exclusive waiter was never woken"));
        handle.join().unwrap();
    }
}

// ------------------------------------------------------ kernel history

/// Selftest epoll60: N waiters blocked (max = 1), N sources fired at once
/// from N threads: every waiter returns, each with a different source.
#[test]
fn epoll60_n_waiters_n_sources_fired_at_once_all_return() {
    const N: usize = 6;
    for kind in KINDS {
        for _round in 0..10 {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let efds: Vec<Arc<EventFd>> = (0..N).map(|_| Arc::new(EventFd::new())).collect();
            for (i, efd) in efds.iter().enumerate() {
                poller.add(efd.clone(), i as u64, R, Trigger::Edge).unwrap();
            }
            let (_, rx) = spawn_waiters(&poller, N, 1);
            let go = Arc::new(Barrier::new(N));
            let firers: Vec<_> = efds
                .iter()
                .map(|efd| {
                    let (efd, go) = (efd.clone(), go.clone());
                    thread::spawn(move || {
                        go.wait();
                        efd.write(1).unwrap();
                    })
                })
                .collect();
            let mut tokens = BTreeSet::new();
            for _ in 0..N {
                let events = rx.recv_timeout(HANG).expect("a waiter hung");
                assert_eq!(events.len(), 1, "{kind:?}: max = 1");
                assert!(tokens.insert(events[0].token), "{kind:?}: reported twice");
            }
            assert_eq!(tokens.len(), N);
            for f in firers {
                f.join().unwrap();
            }
        }
    }
}

/// Selftest epoll61: an edge-triggered source fired around the moment one
/// waiter's short timeout expires while a second waits forever: the event
/// is always reported by one of them (the second never hangs). Half the
/// rounds use the hook that makes the timed waiter give up right after a
/// wake chose it (it must pass the wakeup on).
#[test]
fn epoll61_chosen_waiter_timing_out_never_strands_the_patient_one() {
    const ROUNDS: usize = 10_000;
    for kind in KINDS {
        let poller = Arc::new(EventPoll::with_kind(kind));
        let efd = Arc::new(EventFd::new());
        let stop = Arc::new(EventFd::new());
        poller.add(efd.clone(), 1, R, Trigger::Edge).unwrap();
        poller.add(stop.clone(), 2, R, Trigger::Level).unwrap();
        let delivered = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(2));
        let end = Arc::new(Barrier::new(2));
        // Takes the edge if `events` has it; returns whether it saw stop.
        let take = |events: &[Event], efd: &EventFd, delivered: &AtomicUsize| {
            let mut stop = false;
            for e in events {
                match e.token {
                    1 => {
                        assert_eq!(efd.try_read(), Ok(1));
                        delivered.fetch_add(1, Ordering::SeqCst);
                    }
                    _ => stop = true,
                }
            }
            stop
        };
        let patient = {
            let (poller, efd, delivered) = (poller.clone(), efd.clone(), delivered.clone());
            thread::spawn(move || {
                let mut events = Vec::new();
                loop {
                    poller.wait(&mut events, 4, Duration::MAX).unwrap();
                    if take(&events, &efd, &delivered) {
                        return;
                    }
                }
            })
        };
        let hasty = {
            let (poller, efd, delivered) = (poller.clone(), efd.clone(), delivered.clone());
            let (done, start, end) = (done.clone(), start.clone(), end.clone());
            thread::spawn(move || {
                let mut events = Vec::new();
                loop {
                    start.wait();
                    if done.load(Ordering::SeqCst) {
                        return;
                    }
                    poller
                        .wait(&mut events, 4, Duration::from_micros(20))
                        .unwrap();
                    take(&events, &efd, &delivered);
                    end.wait();
                }
            })
        };
        for round in 0..ROUNDS {
            poller.debug_give_up_when_chosen(round % 2);
            start.wait();
            efd.write(1).unwrap();
            until("the edge to be delivered", || {
                delivered.load(Ordering::SeqCst) == round + 1
            });
            end.wait();
        }
        done.store(true, Ordering::SeqCst);
        start.wait();
        stop.write(1).unwrap();
        hasty.join().unwrap();
        patient.join().unwrap();
        assert_eq!(delivered.load(Ordering::SeqCst), ROUNDS, "{kind:?}");
    }
}

/// The ctl path (kernel: lost wakeups in `ep_insert`/`ep_modify`): a source
/// that is already ready when it is added, or re-armed by `modify`, wakes a
/// waiter that is already asleep.
#[test]
fn add_or_modify_of_a_ready_source_wakes_a_blocked_waiter() {
    for kind in KINDS {
        let poller = Arc::new(EventPoll::with_kind(kind));
        let efd = Arc::new(EventFd::new());
        efd.write(1).unwrap();
        let (_, rx) = spawn_waiters(&poller, 1, 4);
        poller.add(efd.clone(), 5, R, Trigger::OneShot).unwrap();
        assert_eq!(rx.recv_timeout(HANG).unwrap()[0].token, 5, "{kind:?}: add");
        // Disabled now; the waiter sleeps until modify re-arms it.
        let (_, rx) = spawn_waiters(&poller, 1, 4);
        poller.modify(&*efd, 6, R, Trigger::Edge).unwrap();
        assert_eq!(
            rx.recv_timeout(HANG).unwrap()[0].token,
            6,
            "{kind:?}: modify"
        );
    }
}

/// Two waiters asleep, two events, `max = 1`: both wake (the kernel once
/// woke the same waiter twice, or woke one and did not cascade).
#[test]
fn two_waiters_two_events_max_one_both_wake() {
    for kind in KINDS {
        for _round in 0..20 {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let a = Arc::new(EventFd::new());
            let b = Arc::new(EventFd::new());
            poller.add(a.clone(), 1, R, Trigger::Edge).unwrap();
            poller.add(b.clone(), 2, R, Trigger::Edge).unwrap();
            let (_, rx) = spawn_waiters(&poller, 2, 1);
            a.write(1).unwrap();
            b.write(1).unwrap();
            let x = rx.recv_timeout(HANG).expect("first waiter hung");
            let y = rx.recv_timeout(HANG).expect("second waiter hung");
            let tokens: BTreeSet<u64> = [x[0].token, y[0].token].into();
            assert_eq!(tokens, [1, 2].into(), "{kind:?}");
        }
    }
}

/// Level-triggered events left behind by a `max = 1` harvest cascade to the
/// next waiter, and an event arriving while others are harvested still
/// wakes somebody: many producers, two waiters, every unit delivered.
#[test]
fn every_event_is_delivered_under_concurrent_callbacks_and_harvests() {
    const PRODUCERS: usize = 4;
    const WRITES: u64 = 2_000;
    for kind in KINDS {
        for trigger in [Trigger::Edge, Trigger::Level] {
            let poller = Arc::new(EventPoll::with_kind(kind));
            let efds: Vec<Arc<EventFd>> =
                (0..PRODUCERS).map(|_| Arc::new(EventFd::new())).collect();
            for (i, efd) in efds.iter().enumerate() {
                poller.add(efd.clone(), i as u64, R, trigger).unwrap();
            }
            let total = PRODUCERS as u64 * WRITES;
            let received = Arc::new(AtomicU64::new(0));
            let consumers: Vec<_> = (0..2)
                .map(|_| {
                    let (poller, efds, received) = (poller.clone(), efds.clone(), received.clone());
                    thread::spawn(move || {
                        let mut events = Vec::new();
                        while received.load(Ordering::SeqCst) < total {
                            poller
                                .wait(&mut events, 1, Duration::from_millis(50))
                                .unwrap();
                            for e in &events {
                                if let Ok(n) = efds[e.token as usize].try_read() {
                                    received.fetch_add(n, Ordering::SeqCst);
                                }
                            }
                        }
                    })
                })
                .collect();
            let producers: Vec<_> = efds
                .iter()
                .map(|efd| {
                    let efd = efd.clone();
                    thread::spawn(move || {
                        for _ in 0..WRITES {
                            efd.write(1).unwrap();
                        }
                    })
                })
                .collect();
            for p in producers {
                p.join().unwrap();
            }
            until("every unit to be received", || {
                received.load(Ordering::SeqCst) == total
            });
            for c in consumers {
                c.join().unwrap();
            }
            let stats = poller.stats();
            if herdless::stats::ENABLED {
                assert!(stats.callbacks >= stats.queued, "{kind:?}");
            }
        }
    }
}

// ---------------------------------------------------------- lifetimes

#[test]
fn dropping_the_poller_first_removes_every_entry_and_releases_the_sources() {
    for kind in KINDS {
        let poller = EventPoll::with_kind(kind);
        let efd = Arc::new(EventFd::new());
        let ch = Arc::new(Channel::<u8>::new());
        poller
            .add(efd.clone(), 1, R | Readiness::WRITABLE, Trigger::Level)
            .unwrap();
        poller.add(ch.clone(), 2, R, Trigger::Edge).unwrap();
        efd.write(1).unwrap(); // queued on the ready list
        assert_eq!(efd.read_wait_queue().len(), 1);
        assert_eq!(efd.write_wait_queue().len(), 1);
        assert!(Arc::strong_count(&efd) > 1, "{kind:?}: held by the poller");
        drop(poller);
        assert_eq!(
            efd.read_wait_queue().len(),
            0,
            "{kind:?}: no dangling entry"
        );
        assert_eq!(efd.write_wait_queue().len(), 0);
        assert!(ch.wait_queue().is_empty());
        assert_eq!(Arc::strong_count(&efd), 1, "{kind:?}: no leak");
        assert_eq!(Arc::strong_count(&ch), 1, "{kind:?}: no leak");
        efd.write(1).unwrap(); // nobody to call back
        ch.send(1).unwrap();
    }
}

#[test]
fn dropping_the_sources_first_is_safe_and_nested_pollers_are_freed() {
    for kind in KINDS {
        let outer = EventPoll::with_kind(kind);
        let inner = Arc::new(EventPoll::with_kind(kind));
        let efd = Arc::new(EventFd::new());
        inner.add(efd.clone(), 1, R, Trigger::Level).unwrap();
        outer.add(inner.clone(), 2, R, Trigger::Level).unwrap();
        efd.write(1).unwrap();
        let weak_efd = Arc::downgrade(&efd);
        let weak_inner = Arc::downgrade(&inner);
        drop(efd);
        drop(inner);
        assert_eq!(poll_now(&outer)[0].token, 2, "{kind:?}");
        drop(outer);
        assert!(weak_inner.upgrade().is_none(), "{kind:?}: inner freed");
        assert!(weak_efd.upgrade().is_none(), "{kind:?}: source freed");
    }
}

#[test]
fn wait_from_many_threads_while_sources_are_added_and_deleted() {
    for kind in KINDS {
        let poller = Arc::new(EventPoll::with_kind(kind));
        let stop = Arc::new(AtomicBool::new(false));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (poller, stop) = (poller.clone(), stop.clone());
                thread::spawn(move || {
                    let mut events = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        poller
                            .wait(&mut events, 8, Duration::from_millis(1))
                            .unwrap();
                    }
                })
            })
            .collect();
        for i in 0..300u64 {
            let efd = Arc::new(EventFd::new());
            poller.add(efd.clone(), i, R, Trigger::Level).unwrap();
            efd.write(1).unwrap();
            poller.delete(&*efd).unwrap();
            efd.write(1).unwrap();
            assert_eq!(Arc::strong_count(&efd), 1, "{kind:?}: released on delete");
        }
        stop.store(true, Ordering::SeqCst);
        for w in waiters {
            w.join().unwrap();
        }
    }
}
