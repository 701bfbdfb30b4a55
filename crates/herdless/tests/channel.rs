//! Channel scenarios (real threads). Each test is named after the scenario
//! it pins. None depends on timing to pass: threads are lined up by
//! observing the channel's wait queue, and bounded waits are hang detectors
//! only.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use herdless::channel::{Channel, RecvError, RecvTimeoutError, SendError, TryRecvError};
use herdless::variants::WakeMode;
use herdless::wait_queue::TimedOut;

const MODES: [WakeMode; 2] = [WakeMode::WakeAll, WakeMode::Exclusive];
/// Generous bound for anything that must happen; only a hang trips it.
const HANG: Duration = Duration::from_secs(60);
/// A timeout that never fires in a passing test.
const HOUR: Duration = Duration::from_secs(3600);

/// Spins (yielding) until `cond` holds; panics after `HANG`.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG, "hang: waited {HANG:?} for {what}");
        thread::yield_now();
    }
}

fn until_queued<T>(ch: &Channel<T>, n: usize) {
    until("waiters to queue", || ch.wait_queue().len() >= n);
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

/// Until `n` readers are queued *and* every thread in `tids` sleeps.
/// Queued alone is not enough when a test counts wakeups exactly: a reader
/// counts as queued before its own look at the channel right after
/// queueing, and that look may still take the item a send then announces.
/// With every reader asleep, none is inside a look (a thread sleeping on
/// the queue's internal lock needs a running holder).
fn until_asleep<T>(ch: &Channel<T>, tids: &[i32]) {
    until("readers to fall asleep", || {
        ch.wait_queue().len() == tids.len() && tids.iter().all(|&t| is_asleep(t))
    });
}

#[test]
fn send_then_recv_keeps_fifo_order() {
    for mode in MODES {
        let ch = Channel::with_mode(mode);
        assert_eq!(ch.mode(), mode);
        for i in 0..5 {
            ch.send(i).unwrap();
        }
        assert_eq!(ch.len(), 5);
        let got: Vec<_> = (0..5).map(|_| ch.recv().unwrap()).collect();
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert!(ch.is_empty());
    }
    assert_eq!(Channel::<u8>::new().mode(), WakeMode::Exclusive);
}

#[test]
fn try_recv_reports_empty_then_closed_after_draining() {
    let ch = Channel::new();
    assert_eq!(ch.try_recv(), Err(TryRecvError::Empty));
    ch.send(1).unwrap();
    assert!(ch.close());
    assert!(!ch.close(), "closing twice reports it was already closed");
    assert!(ch.is_closed());
    assert_eq!(
        ch.try_recv(),
        Ok(1),
        "items sent before close are delivered"
    );
    assert_eq!(ch.try_recv(), Err(TryRecvError::Closed));
    assert_eq!(ch.recv(), Err(RecvError::Closed));
    assert_eq!(ch.recv_timeout(HOUR), Err(RecvTimeoutError::Closed));
    assert_eq!(ch.wait_readable(HOUR), Ok(()), "closed is readable");
}

#[test]
fn send_after_close_fails_typed_and_returns_the_item() {
    let ch = Channel::new();
    ch.close();
    let item = vec![1, 2, 3];
    let err: SendError<Vec<i32>> = ch.send(item).unwrap_err();
    assert_eq!(err.to_string(), "sending on a closed channel");
    assert_eq!(err.into_inner(), [1, 2, 3]);
    assert!(ch.is_empty());
}

#[test]
fn zero_timeouts_try_once_and_never_queue() {
    for mode in MODES {
        let ch = Channel::with_mode(mode);
        assert_eq!(
            ch.recv_timeout(Duration::ZERO),
            Err(RecvTimeoutError::Timeout)
        );
        assert_eq!(ch.wait_readable(Duration::ZERO), Err(TimedOut));
        ch.send(7).unwrap();
        assert_eq!(ch.wait_readable(Duration::ZERO), Ok(()));
        assert_eq!(ch.recv_timeout(Duration::ZERO), Ok(7));
        assert!(ch.wait_queue().is_empty());
    }
}

#[test]
fn duration_max_timeouts_wait_for_the_item() {
    for mode in MODES {
        let ch = Arc::new(Channel::with_mode(mode));
        // A poller alone first: nobody can take the item from under it.
        let poller = {
            let ch = ch.clone();
            thread::spawn(move || ch.wait_readable(Duration::MAX))
        };
        until_queued(&ch, 1);
        ch.send(8).unwrap();
        assert_eq!(poller.join().unwrap(), Ok(()));
        assert_eq!(ch.try_recv(), Ok(8));
        let reader = {
            let ch = ch.clone();
            thread::spawn(move || ch.recv_timeout(Duration::MAX))
        };
        until_queued(&ch, 1);
        ch.send(9).unwrap();
        assert_eq!(reader.join().unwrap(), Ok(9));
    }
}

#[test]
fn short_timeouts_on_an_empty_channel_time_out() {
    let ch = Channel::<u8>::new();
    let ms = Duration::from_millis(3);
    assert_eq!(ch.recv_timeout(ms), Err(RecvTimeoutError::Timeout));
    assert_eq!(ch.wait_readable(ms), Err(TimedOut));
    assert!(ch.wait_queue().is_empty());
}

/// Seed 000's warning, inverted: pollers are never exclusive, so a poller
/// that is woken and never reads cannot swallow the readiness another
/// poller waits for. The idle poller queues first: were pollers exclusive,
/// the one wakeup would go to it and the reading poller would sleep on.
#[test]
fn pollers_are_never_exclusive_one_that_never_reads_does_not_starve_another() {
    for mode in MODES {
        let ch = Arc::new(Channel::with_mode(mode));
        let idle = {
            let ch = ch.clone();
            // Sees readiness (or the close below), never reads.
            thread::spawn(move || ch.wait_readable(HOUR))
        };
        until_queued(&ch, 1);
        let (tx, rx) = mpsc::channel();
        let reading = {
            let ch = ch.clone();
            thread::spawn(move || {
                ch.wait_readable(HOUR).unwrap();
                tx.send(ch.try_recv()).unwrap();
            })
        };
        until_queued(&ch, 2);
        ch.send("ready").unwrap();
        let got = rx
            .recv_timeout(HANG)
            .expect("the reading poller never saw readiness");
        assert_eq!(got, Ok("ready"));
        reading.join().unwrap();
        // Readiness is level-triggered: the idle poller may have looked
        // after the item was taken and gone back to sleep. The close is
        // readable too, so it returns either way.
        ch.close();
        assert_eq!(idle.join().unwrap(), Ok(()));
        assert!(ch.wait_queue().is_empty());
    }
}

/// Pollers and blocked readers on one channel: every send calls every
/// registered poller callback (non-exclusive) and still reaches a reader;
/// thread pollers come back (here at the latest with the close, since a
/// reader may take an item before a poller looks).
#[test]
fn pollers_mixed_with_blocked_readers_all_see_every_send() {
    for mode in MODES {
        let ch = Arc::new(Channel::with_mode(mode));
        let calls = Arc::new(AtomicUsize::new(0));
        let registrations: Vec<_> = (0..2)
            .map(|_| {
                let calls = calls.clone();
                ch.wait_queue().register(move || {
                    calls.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let ch = ch.clone();
                thread::spawn(move || ch.recv())
            })
            .collect();
        let pollers: Vec<_> = (0..2)
            .map(|_| {
                let ch = ch.clone();
                thread::spawn(move || ch.wait_readable(HOUR))
            })
            .collect();
        until_queued(&ch, 6);
        ch.send(1).unwrap();
        ch.send(2).unwrap();
        // Callbacks run inside `send`, after its queue lock is dropped.
        assert_eq!(calls.load(Ordering::SeqCst), 4, "2 sends x 2 callbacks");
        let mut got: Vec<_> = readers
            .into_iter()
            .map(|r| r.join().unwrap().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, [1, 2]);
        ch.close();
        for p in pollers {
            assert_eq!(p.join().unwrap(), Ok(()));
        }
        drop(registrations);
        assert!(ch.wait_queue().is_empty());
    }
}

#[test]
fn close_with_blocked_readers_and_pending_items_delivers_each_item_once_then_closed() {
    const READERS: usize = 4;
    const ITEMS: usize = 1000;
    for mode in MODES {
        let ch = Arc::new(Channel::with_mode(mode));
        let readers: Vec<_> = (0..READERS)
            .map(|i| {
                let ch = ch.clone();
                thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        let r = if i % 2 == 0 {
                            ch.recv()
                        } else {
                            ch.recv_timeout(HOUR).map_err(|e| match e {
                                RecvTimeoutError::Closed => RecvError::Closed,
                                RecvTimeoutError::Timeout => panic!("an hour passed"),
                            })
                        };
                        match r {
                            Ok(x) => got.push(x),
                            Err(RecvError::Closed) => return got,
                        }
                    }
                })
            })
            .collect();
        until_queued(&ch, READERS);
        for x in 0..ITEMS {
            ch.send(x).unwrap();
        }
        // Close with items still pending and readers still blocked.
        assert!(ch.close());
        let mut all: Vec<_> = readers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..ITEMS).collect::<Vec<_>>(),
            "each item exactly once"
        );
        // Late readers see the close at once.
        assert_eq!(ch.recv(), Err(RecvError::Closed));
        assert!(ch.wait_queue().is_empty());
    }
}

/// ARCHITECTURE contract 6 under stress: N exclusive readers are queued, one item
/// is posted, and the reader the wake picks is made to time out right after
/// being picked (the test hook gives it up without looking). It must pass
/// the wakeup on: the item is received by someone, every iteration. Threads
/// are reused across iterations.
#[test]
fn chosen_reader_that_times_out_right_after_being_picked_never_loses_the_item() {
    const READERS: usize = 3;
    const ITERATIONS: usize = 100_000;
    let ch = Arc::new(Channel::new());
    let gave_up = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (ch, gave_up, tx) = (ch.clone(), gave_up.clone(), tx.clone());
            thread::spawn(move || loop {
                match ch.recv_timeout(HOUR) {
                    Ok(i) => tx.send(i).unwrap(),
                    Err(RecvTimeoutError::Timeout) => {
                        gave_up.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(RecvTimeoutError::Closed) => return,
                }
            })
        })
        .collect();
    for i in 0..ITERATIONS {
        // Every reader queued: the send's wake picks one of them.
        until_queued(&ch, READERS);
        ch.wait_queue().debug_give_up_when_chosen(1);
        ch.send(i).unwrap();
        let got = rx
            .recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("iteration {i}: the item was lost"));
        assert_eq!(got, i);
    }
    ch.close();
    for r in readers {
        r.join().unwrap();
    }
    assert!(ch.is_empty());
    // The hook is consumed unless the send raced a reader's own look right
    // after it queued (then that reader simply took the item); over this
    // many iterations the give-up path must have run.
    let gave_up = gave_up.load(Ordering::Relaxed);
    assert!(gave_up > 0, "the chosen-then-timed-out path never ran");
    eprintln!("chosen readers that gave up: {gave_up} of {ITERATIONS}");
    if herdless::stats::ENABLED {
        let s = ch.stats();
        // Every give-up passed its wakeup on. A few more pass-ons are
        // legitimate: a reader chosen while its own first look (right after
        // queueing) was already taking the item passes the wakeup on too,
        // since it may have taken an older item than the one announced.
        assert!(
            s.passed_on >= gave_up as u64,
            "{} give-ups but only {} pass-ons",
            gave_up,
            s.passed_on
        );
        assert_eq!((s.sent, s.received), (ITERATIONS as u64, ITERATIONS as u64));
    }
}

/// Many senders and readers with short timeouts mixed in (real cancel
/// paths): every item is received exactly once, in both modes.
#[test]
fn many_senders_and_readers_deliver_every_item_exactly_once() {
    const SENDERS: usize = 2;
    const PER_SENDER: usize = 20_000;
    for mode in MODES {
        let ch = Arc::new(Channel::with_mode(mode));
        let readers: Vec<_> = (0..4)
            .map(|i| {
                let ch = ch.clone();
                thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        let r = if i % 2 == 0 {
                            ch.recv().map_err(RecvTimeoutError::from)
                        } else {
                            ch.recv_timeout(Duration::from_micros(20))
                        };
                        match r {
                            Ok(x) => got.push(x),
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Closed) => return got,
                        }
                    }
                })
            })
            .collect();
        let senders: Vec<_> = (0..SENDERS)
            .map(|s| {
                let ch = ch.clone();
                thread::spawn(move || {
                    for k in 0..PER_SENDER {
                        ch.send(s * PER_SENDER + k).unwrap();
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        ch.close();
        let mut all: Vec<_> = readers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..SENDERS * PER_SENDER).collect::<Vec<_>>());
        if herdless::stats::ENABLED {
            let s = ch.stats();
            let n = (SENDERS * PER_SENDER) as u64;
            assert_eq!((s.sent, s.received), (n, n));
        }
    }
}

/// With the `stats` feature: a wake-all send wakes every blocked reader and
/// all but one find nothing; a wake-one send wakes one reader, which finds
/// the item.
#[test]
fn stats_show_the_herd_in_wake_all_mode_and_none_in_exclusive_mode() {
    if !herdless::stats::ENABLED {
        return;
    }
    const READERS: usize = 4;
    for mode in MODES {
        let ch = Arc::new(Channel::with_mode(mode));
        let (tid_tx, tid_rx) = mpsc::channel();
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let (ch, tid_tx) = (ch.clone(), tid_tx.clone());
                thread::spawn(move || {
                    tid_tx
                        .send(rustix::thread::gettid().as_raw_nonzero().get())
                        .unwrap();
                    ch.recv()
                })
            })
            .collect();
        let tids: Vec<i32> = (0..READERS).map(|_| tid_rx.recv().unwrap()).collect();
        until_asleep(&ch, &tids);
        ch.send(0).unwrap();
        // The losers (wake-all) go back to sleep; the winner has left.
        until("the item to be taken", || {
            ch.stats().received == 1 && ch.wait_queue().len() == READERS - 1
        });
        let s = ch.stats();
        match mode {
            WakeMode::WakeAll => assert_eq!(
                (s.wakeups, s.wasted_wakeups),
                (READERS as u64, READERS as u64 - 1)
            ),
            WakeMode::Exclusive => assert_eq!((s.wakeups, s.wasted_wakeups), (1, 0)),
        }
        ch.close();
        let ok = readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .filter(Result::is_ok)
            .count();
        assert_eq!(ok, 1);
    }
}
