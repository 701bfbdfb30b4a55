//! Every primitive that sleeps works inside a `thread_local!` destructor
//! that runs after herdless's own thread-local parker is gone (issue 12,
//! item 1; parking_lot's `test_issue_203`, ported in full in
//! `peer_parking_lot_rwlock.rs`). Before the fix, the first sleep there
//! aborted the whole process: "thread local panicked on drop".
//!
//! Each test spawns a thread that first arms a destructor (registering its
//! thread-local) and only then uses herdless (registering the parker's):
//! thread-local destructors run in reverse order of registration, so the
//! parker is destroyed first and the armed destructor then sleeps on a
//! primitive that another thread releases once it sees the sleeper queued.
//! Waiting for "queued" is observing state, not sleeping for time.
#![cfg(not(loom))]

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use herdless::poll::{Readiness, Trigger};
use herdless::rwsem::{RwSem, RwSemExt};
use herdless::variants::RwSemConfig;
use herdless::{Channel, Condvar, EventFd, EventPoll, FutexTable, Mutex, Pollable, WaitQueue};

/// Runs `body` when the thread exits, after its parker has been destroyed.
struct OnExit(Cell<Option<Box<dyn FnOnce()>>>);

impl Drop for OnExit {
    fn drop(&mut self) {
        if let Some(body) = self.0.take() {
            body();
        }
    }
}

thread_local! {
    static ON_EXIT: OnExit = const { OnExit(Cell::new(None)) };
}

/// A thread whose `thread_local!` destructor runs `body` once herdless's
/// parker is gone. `body` must not panic silently: it sets `done`.
fn sleep_in_a_destructor(
    body: impl FnOnce() + Send + 'static,
) -> (JoinHandle<()>, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let finished = done.clone();
    let thread = std::thread::spawn(move || {
        ON_EXIT.with(|slot| {
            slot.0.set(Some(Box::new(move || {
                body();
                finished.store(true, Ordering::Release);
            })))
        });
        // Registers the parker's thread-local after ours: destroyed first.
        herdless::parker::with_current(|_| ());
    });
    (thread, done)
}

/// Spins (yielding) until `cond` holds: the sleeper has queued.
fn until(cond: impl Fn() -> bool) {
    while !cond() {
        std::thread::yield_now();
    }
}

/// The global futex table is shared by every test in this file that uses
/// the Mutex or Condvar; they take turns so that its waiter count is theirs.
static GLOBAL_TABLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn finish((thread, done): (JoinHandle<()>, Arc<AtomicBool>)) {
    thread.join().expect("the sleeping thread finished");
    assert!(
        done.load(Ordering::Acquire),
        "the destructor ran to its end"
    );
}

#[test]
fn a_contended_mutex_locked_in_a_thread_local_destructor() {
    let _turn = GLOBAL_TABLE.lock().unwrap();
    let m = Arc::new(Mutex::new(0));
    let guard = m.lock();
    let sleeper = sleep_in_a_destructor({
        let m = m.clone();
        move || *m.lock() += 1
    });
    until(|| FutexTable::global().total_waiters() > 0);
    drop(guard);
    finish(sleeper);
    assert_eq!(*m.lock(), 1);
}

#[test]
fn a_condvar_wait_in_a_thread_local_destructor() {
    let _turn = GLOBAL_TABLE.lock().unwrap();
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let sleeper = sleep_in_a_destructor({
        let pair = pair.clone();
        move || {
            let (m, c) = &*pair;
            let mut ready = m.lock();
            while !*ready {
                c.wait(&mut ready);
            }
        }
    });
    until(|| FutexTable::global().total_waiters() > 0);
    *pair.0.lock() = true;
    assert!(pair.1.notify_one(), "the sleeper was waiting");
    finish(sleeper);
}

#[test]
fn a_futex_wait_in_a_thread_local_destructor() {
    let table = Arc::new(FutexTable::new());
    let word = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let sleeper = sleep_in_a_destructor({
        let (table, word) = (table.clone(), word.clone());
        move || {
            while word.load(Ordering::Acquire) == 0 {
                let _ = table.wait(&word, 0, None);
            }
        }
    });
    until(|| table.queued(&word) > 0);
    word.store(1, Ordering::Release);
    assert_eq!(table.wake(&word, 1), 1);
    finish(sleeper);
}

#[test]
fn an_rwsem_of_every_configuration_in_a_thread_local_destructor() {
    for config in RwSemConfig::ALL {
        // parking_lot's test_issue_203: uncontended (Generic sleeps-path
        // code runs even then).
        finish(sleep_in_a_destructor(move || {
            let sem = RwSem::with_config(config, ());
            drop(sem.write());
        }));
        // Contended: a reader holds it until the writer has queued.
        let sem = Arc::new(RwSem::with_config(config, 0));
        let read = sem.read();
        let sleeper = sleep_in_a_destructor({
            let sem = sem.clone();
            move || *sem.write() += 1
        });
        until(|| sem.waiters() > 0);
        drop(read);
        finish(sleeper);
        assert_eq!(*sem.read(), 1, "{config}");
    }
}

#[test]
fn a_wait_queue_wait_in_a_thread_local_destructor() {
    let shared = Arc::new((WaitQueue::new(), AtomicBool::new(false)));
    let sleeper = sleep_in_a_destructor({
        let shared = shared.clone();
        move || {
            let (queue, flag) = &*shared;
            queue.wait_event(|| flag.load(Ordering::Acquire));
        }
    });
    let (queue, flag) = &*shared;
    until(|| !queue.is_empty());
    flag.store(true, Ordering::Release);
    queue.wake_up_all();
    finish(sleeper);
}

#[test]
fn a_channel_recv_in_a_thread_local_destructor() {
    let channel = Arc::new(Channel::new());
    let sleeper = sleep_in_a_destructor({
        let channel = channel.clone();
        move || assert_eq!(channel.recv(), Ok(7))
    });
    until(|| !channel.wait_queue().is_empty());
    channel.send(7).unwrap();
    finish(sleeper);
}

#[test]
fn an_event_poll_wait_in_a_thread_local_destructor() {
    let poll = Arc::new(EventPoll::new());
    let fd = Arc::new(EventFd::new());
    poll.add(fd.clone(), 1, Readiness::READABLE, Trigger::Level)
        .unwrap();
    let sleeper = sleep_in_a_destructor({
        let poll = poll.clone();
        move || {
            let mut events = Vec::new();
            let n = poll.wait(&mut events, 4, Duration::MAX).unwrap();
            assert_eq!(n, 1);
        }
    });
    until(|| poll.waiting() > 0);
    fd.write(1).unwrap();
    finish(sleeper);
    assert!(fd.readiness().contains(Readiness::READABLE));
}
