//! `FUTEX_WAIT`/`FUTEX_WAKE` (private futexes) through rustix.

use std::sync::atomic::AtomicU32;

use rustix::thread::futex;

use crate::deadline::Deadline;

/// Sleeps while `*word == expected`, at most until `deadline`. May return
/// spuriously; callers re-check their condition.
pub(crate) fn wait(word: &AtomicU32, expected: u32, deadline: Deadline) {
    let timeout = match deadline.remaining() {
        None => None,
        Some(left) if left.is_zero() => return,
        Some(left) => Some(rustix::time::Timespec {
            tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: left.subsec_nanos().into(),
        }),
    };
    // EAGAIN (value changed), EINTR and ETIMEDOUT are all "return and let the
    // caller look again"; there is no other error for a valid private futex.
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, timeout.as_ref());
}

/// Wakes at most one thread sleeping on `word`.
pub(crate) fn wake_one(word: &AtomicU32) {
    // The kernel only hashes the address: a wake on memory that has been
    // freed and reused wakes nobody or causes a spurious wakeup, both allowed.
    let _ = futex::wake(word, futex::Flags::PRIVATE, 1);
}
