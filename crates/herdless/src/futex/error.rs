//! Typed outcomes and errors of futex operations.

use thiserror::Error;

/// Why a [`wait`](super::FutexTable::wait) returned without being woken.
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

/// Invalid table construction.
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
