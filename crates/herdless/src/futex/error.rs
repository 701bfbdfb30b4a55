//! Typed outcomes and errors of futex operations.

use thiserror::Error;

/// Why a [`wait`](super::FutexTable::wait) returned without being woken
/// (see there for an example).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum WaitError {
    /// The word did not hold the expected value when the waiter looked, so
    /// it did not sleep (`EAGAIN` of the kernel's futex).
    #[error("the futex word did not hold the expected value")]
    ValueChanged,
    /// The timeout elapsed before any wake dequeued the waiter.
    #[error("the futex wait timed out")]
    TimedOut,
}

/// Why a [`cmp_requeue`](super::FutexTable::cmp_requeue) moved nobody.
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// use herdless::{FutexTable, RequeueError};
///
/// let (table, a, b) = (FutexTable::new(), AtomicU32::new(1), AtomicU32::new(0));
/// assert_eq!(table.cmp_requeue(&a, &a, 1, 1, 1), Err(RequeueError::SameWord));
/// let err = table.cmp_requeue(&a, &b, 0, 1, 1).unwrap_err();
/// assert_eq!(err.to_string(), "the source futex word holds 1, not the expected 0");
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum RequeueError {
    /// The source word did not hold the expected value (`EAGAIN`).
    #[error("the source futex word holds {found}, not the expected {expected}")]
    ValueMismatch {
        /// The value the caller expected.
        expected: u32,
        /// The value found under the bucket lock.
        found: u32,
    },
    /// Source and target are the same word: a requeue onto itself is
    /// meaningless and refused (`EINVAL`).
    #[error("cannot requeue a futex word onto itself")]
    SameWord,
}

/// Invalid table construction (see
/// [`FutexTable::with_buckets`](super::FutexTable::with_buckets) for an
/// example).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum FutexError {
    /// The bucket count must be a power of two between 1 and 2^20.
    #[error(
        "a futex table needs a power-of-two bucket count between 1 and {max}, not {requested}"
    )]
    BucketCount {
        /// The count asked for.
        requested: usize,
        /// The largest count allowed.
        max: usize,
    },
}
