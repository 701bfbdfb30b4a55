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
    if !deadline.is_never() {
        loom::thread::yield_now();
        return;
    }
    let (lock, cond) = &*SLEEP;
    let guard = lock.lock().unwrap();
    if word.load(Ordering::Relaxed) == expected {
        drop(cond.wait(guard).unwrap());
    }
}

pub(crate) fn wake_one(_word: &AtomicU32) {
    let (lock, cond) = &*SLEEP;
    let _guard = lock.lock().unwrap();
    cond.notify_all();
}
