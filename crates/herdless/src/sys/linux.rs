//! `FUTEX_WAIT`/`FUTEX_WAKE` (private futexes) through rustix, and
//! `futex_waitv` (Linux 5.16) for a wait on two words.

use std::sync::atomic::AtomicU32;
use std::sync::OnceLock;
use std::time::Duration;

use rustix::thread::futex;

use crate::deadline::Deadline;

/// Sleeps while `*word == expected`, at most until `deadline`. May return
/// spuriously; callers re-check their condition.
pub(crate) fn wait(word: &AtomicU32, expected: u32, deadline: Deadline) {
    let timeout = match deadline.remaining() {
        None => None,
        Some(left) if left.is_zero() => return,
        Some(left) => Some(timespec(left)),
    };
    // EAGAIN (value changed), EINTR and ETIMEDOUT are all "return and let the
    // caller look again"; there is no other error for a valid private futex.
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, timeout.as_ref());
}

/// `time` as the kernel's timespec (seconds past `i64::MAX` saturate).
fn timespec(time: Duration) -> rustix::time::Timespec {
    rustix::time::Timespec {
        tv_sec: time.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: time.subsec_nanos().into(),
    }
}

/// Wakes at most one thread sleeping on `word`.
pub(crate) fn wake_one(word: &AtomicU32) {
    // The kernel only hashes the address: a wake on memory that has been
    // freed and reused wakes nobody or causes a spurious wakeup, both allowed.
    let _ = futex::wake(word, futex::Flags::PRIVATE, 1);
}

/// Wakes every thread sleeping on `word`.
pub(crate) fn wake_all(word: &AtomicU32) {
    // As `wake_one`: any address is harmless.
    let _ = futex::wake(word, futex::Flags::PRIVATE, i32::MAX as u32);
}

/// Whether [`wait_either`] works here: `futex_waitv` exists (Linux 5.16
/// and later) and is allowed. Asked once, with a wait whose value does not
/// match: only the answer "value changed" (EAGAIN) counts as yes, so a
/// kernel without the call (ENOSYS) or a filter that refuses it (EPERM,
/// say) leaves the broadcast off rather than spinning on an error.
pub(crate) fn either_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let word = AtomicU32::new(0);
        let waits = [waiting_on(&word, 1)];
        matches!(
            futex::waitv(
                &waits,
                futex::WaitvFlags::empty(),
                None,
                rustix::time::ClockId::Monotonic
            ),
            Err(rustix::io::Errno::AGAIN)
        )
    })
}

/// One word of a `futex_waitv`: private, 32 bits.
fn waiting_on(word: &AtomicU32, expected: u32) -> futex::Wait {
    let mut wait = futex::Wait::new();
    wait.val = expected.into();
    wait.uaddr = futex::WaitPtr::new(word.as_ptr().cast());
    wait.flags = futex::WaitFlags::SIZE_U32 | futex::WaitFlags::PRIVATE;
    wait
}

/// Sleeps while `*word == expected` and `*other == other_expected`, at
/// most until `deadline`: a wake of either word ends it, and so does a
/// change of either value before the sleep (the check and the sleep are
/// atomic with respect to wakes of both words). May return spuriously.
/// Only where [`either_supported`] says so.
pub(crate) fn wait_either(
    word: &AtomicU32,
    expected: u32,
    other: &AtomicU32,
    other_expected: u32,
    deadline: Deadline,
) {
    // `futex_waitv` takes an absolute time on the clock it is given.
    let timeout = match deadline.remaining() {
        None => None,
        Some(left) if left.is_zero() => return,
        Some(left) => {
            let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            // The monotonic clock is never negative.
            let now = Duration::new(now.tv_sec as u64, now.tv_nsec as u32);
            Some(timespec(now.saturating_add(left)))
        }
    };
    let waits = [
        waiting_on(word, expected),
        waiting_on(other, other_expected),
    ];
    // EAGAIN, EINTR and ETIMEDOUT: return and let the caller look again.
    let _ = futex::waitv(
        &waits,
        futex::WaitvFlags::empty(),
        timeout.as_ref(),
        rustix::time::ClockId::Monotonic,
    );
}
