//! A condition variable whose `notify_all` requeues instead of waking a herd.
//!
//! Waiters sleep on a sequence word in the [`FutexTable`]. `notify_one`
//! bumps the sequence and wakes one. `notify_all` bumps it and then makes one
//! `cmp_requeue`: it wakes a single waiter and moves all the others onto the
//! mutex word, so they are woken one at a time as the mutex is handed on
//! rather than all at once to fight over it (seed 001's lesson applied to the
//! condvar, as glibc and musl do).
//!
//! Why nobody stalls on the mutex word: every thread that returns from a
//! condvar wait relocks in "contended" state (2), so its unlock wakes the
//! next requeued thread (see [`mutex`](crate::mutex)). The one woken by the
//! requeue starts the chain, and it is woken only after the requeue has
//! moved everyone (wakeups happen after the bucket locks are dropped).
//!
//! A condvar remembers the mutex it is used with. If it is ever used with
//! two different mutexes, `notify_all` falls back to waking everybody, which
//! is always correct: no panic, no lost wakeup.
//!
//! Spurious wakeups: a waiter that read the sequence before a notify but
//! queued after it returns at once, so one `notify_one` can release more
//! than one waiter. The notify methods therefore report `false`/`0` as the
//! `lock_api` contract requires.

use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

use crate::deadline::Deadline;
use crate::futex::{FutexTable, RequeueError};
use crate::mutex::RawMutex;
use crate::sync::{AtomicU32, AtomicUsize, Ordering};

/// No mutex seen yet.
const NO_MUTEX: usize = 0;
/// Used with more than one mutex: never requeue.
const MIXED: usize = usize::MAX;

/// The raw condvar. Use it through [`Condvar`].
#[derive(Debug)]
pub struct RawCondvar {
    seq: AtomicU32,
    mutex: AtomicUsize,
}

/// A condition variable for [`Mutex`](crate::Mutex) guards.
///
/// ```
/// use std::sync::Arc;
/// let pair = Arc::new((herdless::Mutex::new(false), herdless::Condvar::new()));
/// let pair2 = pair.clone();
/// let t = std::thread::spawn(move || {
///     *pair2.0.lock() = true;
///     pair2.1.notify_all();
/// });
/// let mut ready = pair.0.lock();
/// while !*ready {
///     pair.1.wait(&mut ready);
/// }
/// t.join().unwrap();
/// ```
#[cfg(not(loom))]
pub type Condvar = lock_api::Condvar<RawCondvar>;

impl Default for RawCondvar {
    fn default() -> Self {
        Self::new()
    }
}

impl RawCondvar {
    /// A condvar nobody waits on.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        RawCondvar {
            seq: AtomicU32::new(0),
            mutex: AtomicUsize::new(NO_MUTEX),
        }
    }

    /// A condvar nobody waits on.
    #[cfg(loom)]
    pub fn new() -> Self {
        RawCondvar {
            seq: AtomicU32::new(0),
            mutex: AtomicUsize::new(NO_MUTEX),
        }
    }

    /// Unlocks `mutex`, waits for a notification or the timeout, relocks.
    /// Returns `true` if the wait timed out.
    ///
    /// # Safety
    /// The caller holds `mutex`.
    pub unsafe fn wait_raw(&self, mutex: &RawMutex, timeout: Option<Duration>) -> bool {
        let deadline = Deadline::after(timeout);
        self.remember(mutex);
        // Relaxed: we hold the mutex, and a notifier that changed the
        // condition did so under the mutex, so it bumps `seq` after our
        // unlock; the table's wait then sees the new value or is queued
        // before the notifier's wake (the futex contract).
        let seq = self.seq.load(Ordering::Relaxed);
        // SAFETY: the caller holds the mutex.
        unsafe { mutex.release() };
        let timed_out = match FutexTable::global().wait(&self.seq, seq, deadline.remaining()) {
            Ok(_) => false,
            Err(e) => e == crate::futex::WaitError::TimedOut,
        };
        mutex.acquire_contended(Deadline::Never);
        timed_out
    }

    fn remember(&self, mutex: &RawMutex) {
        let address = mutex.word() as *const AtomicU32 as usize;
        match self.mutex.load(Ordering::Relaxed) {
            seen if seen == address || seen == MIXED => {}
            NO_MUTEX => {
                if let Err(seen) = self.mutex.compare_exchange(
                    NO_MUTEX,
                    address,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    if seen != address {
                        self.mutex.store(MIXED, Ordering::Relaxed);
                    }
                }
            }
            _ => self.mutex.store(MIXED, Ordering::Relaxed),
        }
    }

    /// Wakes one waiter.
    pub fn notify_one_raw(&self) -> usize {
        self.seq.fetch_add(1, Ordering::Relaxed);
        FutexTable::global().wake(&self.seq, 1)
    }

    /// Wakes one waiter and requeues the rest onto the mutex. Returns the
    /// number woken plus requeued.
    pub fn notify_all_raw(&self) -> usize {
        let table = FutexTable::global();
        let mut seq = self.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        // Relaxed: the address was stored by a waiter before it queued; a
        // waiter we could requeue is in the table, and the table's locks
        // order its `remember` before our read.
        let mutex = self.mutex.load(Ordering::Relaxed);
        if mutex == NO_MUTEX || mutex == MIXED {
            return table.wake_all(&self.seq);
        }
        loop {
            match table.cmp_requeue_to(&self.seq, mutex, seq, 1, usize::MAX) {
                Ok(done) => return done.woken + done.requeued,
                // A concurrent notify moved the sequence on: requeue
                // whoever waits under the new value.
                Err(RequeueError::ValueMismatch { found, .. }) => seq = found,
                Err(RequeueError::SameWord) => return table.wake_all(&self.seq),
            }
        }
    }
}

// SAFETY: `wait` unlocks the mutex and queues on `seq` atomically with
// respect to notifications (a notify bumps `seq` first, so a waiter that has
// unlocked but not yet queued sees the change), and relocks before
// returning. It cannot panic between unlock and relock.
#[cfg(not(loom))]
unsafe impl lock_api::RawCondvar for RawCondvar {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawCondvar::new();
    type RawMutex = RawMutex;

    unsafe fn wait(&self, mutex: &RawMutex, _guard: &mut lock_api::GuardNoSend) {
        // SAFETY: the caller holds the mutex (trait contract).
        unsafe { self.wait_raw(mutex, None) };
    }

    fn notify_one(&self) -> bool {
        self.notify_one_raw();
        false
    }

    fn notify_all(&self) -> usize {
        self.notify_all_raw();
        0
    }
}

// SAFETY: as for `RawCondvar`; a timed-out wait returns only after its
// deadline (the table reports TimedOut only then).
#[cfg(not(loom))]
unsafe impl lock_api::RawCondvarTimed for RawCondvar {
    fn checked_duration_to_instant(timeout: &Duration) -> Option<Instant> {
        Instant::now().checked_add(*timeout)
    }

    unsafe fn wait_until(
        &self,
        mutex: &RawMutex,
        _guard: &mut lock_api::GuardNoSend,
        deadline: &Instant,
    ) -> bool {
        let timeout = deadline.saturating_duration_since(Instant::now());
        // SAFETY: the caller holds the mutex (trait contract).
        unsafe { self.wait_raw(mutex, Some(timeout)) }
    }
}
