//! The four implementations of "sleep on a word, wake its sleepers" that
//! `futex-wake` compares, behind one small trait so each workload is written
//! once and monomorphised per backend (no dynamic call on the measured
//! path).

use std::sync::atomic::{AtomicU32, Ordering};

use herdless::variants::WakePolicy;
use herdless::FutexTable;
use parking_lot_core::{ParkResult, DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN};
use rustix::thread::futex;

/// Sleep on a 32-bit word and wake its sleepers.
pub trait Backend: Send + Sync + 'static {
    /// Sleeps while `*word == expected`. `true`: a wake chose this thread;
    /// `false`: it returned without being chosen (value changed, signal),
    /// and the caller re-checks the word.
    fn wait(&self, word: &AtomicU32, expected: u32) -> bool;

    /// Wakes one sleeper of `word`, if any; returns how many it woke.
    fn wake_one(&self, word: &AtomicU32) -> usize;

    /// Wakes every sleeper of `word`.
    fn wake_all(&self, word: &AtomicU32);

    /// Bucket-lock acquisitions by wakes so far, if the backend counts them.
    fn wake_lock_acquisitions(&self) -> Option<u64> {
        None
    }
}

/// herdless's user-space futex table, with the given wake policy.
pub struct Herdless(FutexTable);

impl Herdless {
    /// A fresh table of its own (no other user's waiters in its buckets).
    pub fn new(policy: WakePolicy) -> Self {
        Herdless(FutexTable::with_policy(policy))
    }
}

impl Backend for Herdless {
    fn wait(&self, word: &AtomicU32, expected: u32) -> bool {
        self.0.wait(word, expected, None).is_ok()
    }

    fn wake_one(&self, word: &AtomicU32) -> usize {
        self.0.wake(word, 1)
    }

    fn wake_all(&self, word: &AtomicU32) {
        self.0.wake(word, usize::MAX);
    }

    fn wake_lock_acquisitions(&self) -> Option<u64> {
        herdless::stats::ENABLED.then(|| self.0.stats().wake_lock_acquisitions)
    }
}

/// The kernel's own private futex: `FUTEX_WAIT` / `FUTEX_WAKE`.
pub struct Kernel;

impl Backend for Kernel {
    fn wait(&self, word: &AtomicU32, expected: u32) -> bool {
        // EAGAIN (value changed) and EINTR (signal) are "not chosen": the
        // caller re-checks. Success may in principle be spurious; like
        // `perf bench futex wake`, count it as woken.
        futex::wait(word, futex::Flags::PRIVATE, expected, None).is_ok()
    }

    fn wake_one(&self, word: &AtomicU32) -> usize {
        futex::wake(word, futex::Flags::PRIVATE, 1).unwrap_or(0)
    }

    fn wake_all(&self, word: &AtomicU32) {
        let _ = futex::wake(word, futex::Flags::PRIVATE, i32::MAX as u32);
    }
}

/// `parking_lot_core`'s global parking table, keyed by the word's address.
pub struct ParkingLot;

fn key(word: &AtomicU32) -> usize {
    word as *const AtomicU32 as usize
}

impl Backend for ParkingLot {
    fn wait(&self, word: &AtomicU32, expected: u32) -> bool {
        // SAFETY: the key is the address of a word this experiment owns and
        // parks on for no other purpose. `validate` and `timed_out` neither
        // panic nor call into parking_lot; `before_sleep` does nothing.
        // Relaxed suffices in `validate`: it runs under the bucket lock,
        // which the waker takes after storing to the word.
        let result = unsafe {
            parking_lot_core::park(
                key(word),
                || word.load(Ordering::Relaxed) == expected,
                || {},
                |_, _| {},
                DEFAULT_PARK_TOKEN,
                None,
            )
        };
        matches!(result, ParkResult::Unparked(_))
    }

    fn wake_one(&self, word: &AtomicU32) -> usize {
        // SAFETY: as in `wait`; the callback neither panics nor calls into
        // parking_lot.
        unsafe { parking_lot_core::unpark_one(key(word), |_| DEFAULT_UNPARK_TOKEN) }
            .unparked_threads
    }

    fn wake_all(&self, word: &AtomicU32) {
        // SAFETY: as in `wait`: our own key.
        unsafe { parking_lot_core::unpark_all(key(word), DEFAULT_UNPARK_TOKEN) };
    }
}
