//! The futex table's part of a waiter record (kernel: the key and the
//! `lock_ptr` of `futex_q`); the record itself is the shared
//! [`util::waiter::Waiter`](crate::util::waiter::Waiter).

use crate::sync::AtomicUsize;
use crate::util::waiter;

/// A sleeping thread in a futex bucket.
pub(super) type Waiter = waiter::Waiter<Keyed>;

/// Which word a record waits on and which bucket holds it.
///
/// Invariants (who writes what, under which lock):
/// - `key`: only under the lock of the bucket the record is on; a requeue
///   changes it (holding both bucket locks) when it moves the record to
///   another word.
/// - `bucket`: the index of the bucket whose list holds the record; written
///   by a requeue while it holds *both* bucket locks, read by the waiter
///   without a lock to find which lock to take (and re-checked under it).
pub(super) struct Keyed {
    pub(super) key: AtomicUsize,
    pub(super) bucket: AtomicUsize,
}

impl Keyed {
    pub(super) fn new(key: usize, bucket: usize) -> Self {
        Keyed {
            key: AtomicUsize::new(key),
            bucket: AtomicUsize::new(bucket),
        }
    }
}
