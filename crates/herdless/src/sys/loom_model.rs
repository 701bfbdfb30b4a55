//! A loom model of the futex contract: one process-wide loom `Mutex` +
//! `Condvar`. A waiter checks the word under the mutex and sleeps on the
//! condvar; a waker takes the mutex before notifying, so the check-then-sleep
//! is atomic with respect to wakes, exactly as the kernel's bucket lock makes
//! it. Every wake notifies everybody: spurious wakeups are part of the
//! contract, and loom explores them.
//!
//! A wait with a finite deadline does not sleep: it yields and returns, which
//! models a timeout that fires at the earliest possible moment. Loom then
//! explores every placement of the racing wake around it.

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::{Condvar, Mutex};

use crate::deadline::Deadline;

loom::lazy_static! {
    static ref SLEEP: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
}

pub(crate) fn wait(word: &AtomicU32, expected: u32, deadline: Deadline) {
    sleep_while(deadline, || word.load(Ordering::Relaxed) == expected)
}

/// Sleeps while `holds()`, checked under the model's lock.
fn sleep_while(deadline: Deadline, holds: impl Fn() -> bool) {
    if !deadline.is_never() {
        loom::thread::yield_now();
        return;
    }
    let (lock, cond) = &*SLEEP;
    let guard = lock.lock().unwrap();
    if holds() {
        drop(cond.wait(guard).unwrap());
    }
}

pub(crate) fn wake_one(_word: &AtomicU32) {
    let (lock, cond) = &*SLEEP;
    let _guard = lock.lock().unwrap();
    cond.notify_all();
}

/// The model of `futex_waitv` on two words: sleeps while both hold their
/// expected values, checked under the model's one lock.
pub(crate) fn wait_either(
    word: &AtomicU32,
    expected: u32,
    other: &AtomicU32,
    other_expected: u32,
    deadline: Deadline,
) {
    sleep_while(deadline, || {
        word.load(Ordering::Relaxed) == expected && other.load(Ordering::Relaxed) == other_expected
    })
}

/// Every sleeper of `word` (the model wakes everybody anyway).
pub(crate) fn wake_all(word: &AtomicU32) {
    wake_one(word)
}
