//! [`EventFd`]: a 64-bit event counter with blocking and non-blocking reads
//! and writes, and [`Pollable`] (kernel: `fs/eventfd.c`; the event source of
//! seed 003's benchmark).
//!
//! # Contract
//! - `write(n)` adds `n` to the counter. The counter never exceeds
//!   [`EventFd::MAX`] (`u64::MAX - 1`) and is never wrapped: a write that
//!   does not fit blocks until a read makes room ([`EventFd::write`]) or
//!   fails with [`EventFdError::Overflow`] ([`EventFd::try_write`]).
//!   `u64::MAX` itself is [`EventFdError::InvalidValue`].
//! - `read()` returns the counter and resets it to zero, or in semaphore
//!   mode returns 1 and decrements it; it blocks while the counter is zero
//!   ([`EventFd::read`]) or fails with [`EventFdError::WouldBlock`]
//!   ([`EventFd::try_read`]).
//!
//! Blocked readers wait exclusively on the readers' queue and blocked
//! writers on the writers' queue, each under the wait queue's consumption
//! contract: a write of `n` wakes one reader (`n` in semaphore mode), a
//! read wakes the blocked writers. Pollers hang on the readers' queue for
//! readability and on the writers' queue for writability
//! ([`Pollable::write_wait_queue`]), so a consumer's reads do not call
//! read-interest pollers back.

use std::time::Duration;

use super::error::EventFdError;
use super::interest::Readiness;
use super::pollable::Pollable;
use crate::sync::{AtomicU64, Ordering};
use crate::wait_queue::{Attempt, TimedOut, WaitQueue};

/// A counter that threads signal with `write` and consume with `read`.
///
/// ```
/// use herdless::poll::{EventFd, EventFdError};
///
/// let efd = EventFd::new();
/// efd.write(2).unwrap();
/// efd.write(3).unwrap();
/// assert_eq!(efd.read(), 5);
/// assert_eq!(efd.try_read(), Err(EventFdError::WouldBlock));
/// assert_eq!(efd.try_write(u64::MAX), Err(EventFdError::InvalidValue));
/// ```
pub struct EventFd {
    /// The counter. Changed only by compare-exchange (reads and writes);
    /// see `take` and `add` for the orderings.
    count: AtomicU64,
    semaphore: bool,
    /// Blocked readers (exclusive) and readability pollers.
    readers: WaitQueue,
    /// Blocked writers (exclusive) and writability pollers.
    writers: WaitQueue,
}

impl Default for EventFd {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for EventFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFd")
            .field("value", &self.value())
            .field("semaphore", &self.semaphore)
            .finish_non_exhaustive()
    }
}

impl EventFd {
    /// The largest value the counter can hold (`0xffff_ffff_ffff_fffe`).
    pub const MAX: u64 = u64::MAX - 1;

    /// A counter at zero whose reads return and reset the whole value (see
    /// [`EventFd`] for an example).
    pub fn new() -> Self {
        Self::with_initial(0, false)
    }

    /// A counter at zero whose reads return 1 and decrement it
    /// (`EFD_SEMAPHORE`): a write of `n` lets `n` reads through.
    ///
    /// ```
    /// use herdless::poll::EventFd;
    ///
    /// let permits = EventFd::semaphore();
    /// assert!(permits.is_semaphore());
    /// permits.write(2).unwrap();
    /// assert_eq!((permits.read(), permits.read()), (1, 1));
    /// assert_eq!(permits.value(), 0);
    /// ```
    pub fn semaphore() -> Self {
        Self::with_initial(0, true)
    }

    /// A counter starting at `initial` (clamped to [`MAX`](Self::MAX)), in
    /// semaphore mode or not.
    ///
    /// ```
    /// use herdless::poll::EventFd;
    ///
    /// assert_eq!(EventFd::with_initial(3, false).value(), 3);
    /// assert_eq!(EventFd::with_initial(u64::MAX, false).value(), EventFd::MAX);
    /// ```
    pub fn with_initial(initial: u64, semaphore: bool) -> Self {
        EventFd {
            count: AtomicU64::new(initial.min(Self::MAX)),
            semaphore,
            readers: WaitQueue::new(),
            writers: WaitQueue::new(),
        }
    }

    /// Whether reads are in semaphore mode.
    pub fn is_semaphore(&self) -> bool {
        self.semaphore
    }

    /// The counter now (a snapshot).
    pub fn value(&self) -> u64 {
        // Relaxed: a diagnostic snapshot that orders nothing.
        self.count.load(Ordering::Relaxed)
    }

    /// Takes the value (or 1 in semaphore mode) if it is not zero.
    fn take(&self) -> Option<u64> {
        // Relaxed first look: the compare-exchange below re-reads it.
        let mut current = self.count.load(Ordering::Relaxed);
        loop {
            if current == 0 {
                return None;
            }
            let new = if self.semaphore { current - 1 } else { 0 };
            // AcqRel: Acquire pairs with the Release of the writes whose
            // value we take (what a writer did before signalling is visible
            // to the reader, as with a kernel eventfd); Release publishes
            // the room we make to the writer that takes it.
            match self.count.compare_exchange_weak(
                current,
                new,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(current - new),
                Err(now) => current = now,
            }
        }
    }

    /// Adds `n` if it fits under [`MAX`](Self::MAX).
    fn add(&self, n: u64) -> Result<(), EventFdError> {
        if n == u64::MAX {
            return Err(EventFdError::InvalidValue);
        }
        let mut current = self.count.load(Ordering::Relaxed);
        loop {
            if Self::MAX - current < n {
                return Err(EventFdError::Overflow);
            }
            // AcqRel: mirror of `take`.
            match self.count.compare_exchange_weak(
                current,
                current + n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => current = now,
            }
        }
    }

    /// After a successful write of `n`: the counter changed before the
    /// wake (the wait queue's lost-wakeup rule). One reader takes the whole
    /// value; in semaphore mode `n` readers can each take one.
    fn wake_readers(&self, n: u64) {
        let readers = if self.semaphore {
            usize::try_from(n).unwrap_or(usize::MAX)
        } else {
            1
        };
        self.readers.wake_up(readers);
    }

    /// After a successful read: room was made, every blocked writer may fit
    /// (each one chosen either writes or finds no room and stops holding
    /// the wakeup), and writability pollers are called.
    fn wake_writers(&self) {
        self.writers.wake_up_all();
    }

    /// Reads without blocking: the value (reset to zero), or 1 in semaphore
    /// mode. See [`EventFd`] for an example.
    ///
    /// # Errors
    /// [`EventFdError::WouldBlock`] when the counter is zero.
    pub fn try_read(&self) -> Result<u64, EventFdError> {
        let value = self.take().ok_or(EventFdError::WouldBlock)?;
        self.wake_writers();
        Ok(value)
    }

    fn read_attempt(&self) -> Attempt<u64> {
        match self.try_read() {
            Ok(value) => Attempt::Done(value),
            Err(_) => Attempt::Wait,
        }
    }

    /// Blocks, as an exclusive waiter, until the counter is not zero, then
    /// reads it (see [`try_read`](Self::try_read)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use herdless::poll::EventFd;
    ///
    /// let done = Arc::new(EventFd::new());
    /// let worker = {
    ///     let done = done.clone();
    ///     std::thread::spawn(move || done.write(1).unwrap())
    /// };
    /// assert_eq!(done.read(), 1); // sleeps until the worker signals
    /// worker.join().unwrap();
    /// ```
    pub fn read(&self) -> u64 {
        self.readers.wait_event_exclusive(|| self.read_attempt())
    }

    /// [`read`](Self::read) for at most `timeout` (`Duration::ZERO`: one
    /// try; `Duration::MAX`: forever).
    ///
    /// # Errors
    /// [`EventFdError::TimedOut`] when the counter stayed zero for
    /// `timeout`.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::poll::{EventFd, EventFdError};
    ///
    /// let efd = EventFd::new();
    /// assert_eq!(efd.read_timeout(Duration::from_millis(1)), Err(EventFdError::TimedOut));
    /// efd.write(4).unwrap();
    /// assert_eq!(efd.read_timeout(Duration::ZERO), Ok(4));
    /// ```
    pub fn read_timeout(&self, timeout: Duration) -> Result<u64, EventFdError> {
        self.readers
            .wait_event_exclusive_timeout(|| self.read_attempt(), timeout)
            .map_err(|TimedOut| EventFdError::TimedOut)
    }

    /// Adds `n` without blocking and wakes a blocked reader (`n` of them in
    /// semaphore mode).
    ///
    /// # Errors
    /// [`EventFdError::Overflow`] (counter unchanged) when the sum would
    /// exceed [`MAX`](Self::MAX), [`EventFdError::InvalidValue`] for
    /// `n == u64::MAX`.
    ///
    /// # Examples
    /// ```
    /// use herdless::poll::{EventFd, EventFdError};
    ///
    /// let efd = EventFd::with_initial(EventFd::MAX - 1, false);
    /// assert_eq!(efd.try_write(2), Err(EventFdError::Overflow));
    /// assert_eq!(efd.try_write(1), Ok(()));
    /// assert_eq!(efd.value(), EventFd::MAX);
    /// ```
    pub fn try_write(&self, n: u64) -> Result<(), EventFdError> {
        self.add(n)?;
        self.wake_readers(n);
        Ok(())
    }

    fn write_attempt(&self, n: u64) -> Attempt<Result<(), EventFdError>> {
        match self.try_write(n) {
            Err(EventFdError::Overflow) => Attempt::Wait,
            result => Attempt::Done(result),
        }
    }

    /// Adds `n`, blocking (as an exclusive waiter) while it does not fit
    /// (until a read makes room).
    ///
    /// # Errors
    /// [`EventFdError::InvalidValue`] for `n == u64::MAX`, which never fits.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use herdless::poll::{EventFd, EventFdError};
    ///
    /// let efd = Arc::new(EventFd::with_initial(EventFd::MAX, false));
    /// let writer = {
    ///     let efd = efd.clone();
    ///     std::thread::spawn(move || efd.write(1)) // full: waits for a read
    /// };
    /// assert_eq!(efd.read(), EventFd::MAX);
    /// writer.join().unwrap().unwrap();
    /// assert_eq!(efd.read(), 1);
    /// assert_eq!(efd.write(u64::MAX), Err(EventFdError::InvalidValue));
    /// ```
    pub fn write(&self, n: u64) -> Result<(), EventFdError> {
        if n == u64::MAX {
            return Err(EventFdError::InvalidValue);
        }
        self.writers.wait_event_exclusive(|| self.write_attempt(n))
    }

    /// [`write`](Self::write) for at most `timeout`.
    ///
    /// # Errors
    /// [`EventFdError::TimedOut`] when `n` did not fit for `timeout`,
    /// [`EventFdError::InvalidValue`] for `n == u64::MAX`.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::poll::{EventFd, EventFdError};
    ///
    /// let full = EventFd::with_initial(EventFd::MAX, false);
    /// assert_eq!(full.write_timeout(1, Duration::from_millis(1)), Err(EventFdError::TimedOut));
    /// ```
    pub fn write_timeout(&self, n: u64, timeout: Duration) -> Result<(), EventFdError> {
        if n == u64::MAX {
            return Err(EventFdError::InvalidValue);
        }
        self.writers
            .wait_event_exclusive_timeout(|| self.write_attempt(n), timeout)
            .map_err(|TimedOut| EventFdError::TimedOut)?
    }

    /// The queue blocked readers and readability pollers wait on (what
    /// [`Pollable::wait_queue`] returns).
    ///
    /// ```
    /// use herdless::poll::{EventFd, Pollable};
    ///
    /// let efd = EventFd::new();
    /// assert!(std::ptr::eq(efd.read_wait_queue(), efd.wait_queue()));
    /// assert!(!std::ptr::eq(efd.wait_queue(), efd.write_wait_queue()));
    /// ```
    pub fn read_wait_queue(&self) -> &WaitQueue {
        &self.readers
    }
}

impl Pollable for EventFd {
    fn readiness(&self) -> Readiness {
        // Acquire: as in `take`: a poller that sees the value also sees
        // what the writer did before writing it.
        let value = self.count.load(Ordering::Acquire);
        let mut readiness = Readiness::EMPTY;
        if value > 0 {
            readiness |= Readiness::READABLE;
        }
        if value < Self::MAX {
            readiness |= Readiness::WRITABLE;
        }
        readiness
    }

    fn wait_queue(&self) -> &WaitQueue {
        &self.readers
    }

    fn write_wait_queue(&self) -> &WaitQueue {
        &self.writers
    }
}
