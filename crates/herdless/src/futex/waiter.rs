//! The record of one sleeping thread in a futex bucket (kernel: `futex_q`).

use std::marker::PhantomPinned;
use std::ptr::NonNull;

use crate::parker::Unparker;
use crate::sync::{AtomicU32, AtomicUsize};
use crate::util::linked_list::{Link, Pointers};

/// Still queued.
pub(super) const WAITING: u32 = 0;
/// Dequeued by a waker; the waker no longer touches the record.
pub(super) const WOKEN: u32 = 1;

/// Lives on the waiting thread's stack, pinned, while queued.
///
/// Invariants (who writes what, under which lock):
/// - `pointers`, `key`: only under the lock of the bucket the record is on.
///   `key` changes when a requeue moves the record to another word.
/// - `bucket`: the index of the bucket whose list holds the record; written
///   by requeue while it holds *both* bucket locks, read by the waiter
///   without a lock to find which lock to take (and re-checked under it).
/// - `state`: `WAITING` until a waker dequeues the record under the bucket
///   lock and stores `WOKEN` with Release as its very last access.
/// - `unparker`: immutable; wakers clone it before storing `WOKEN`.
pub(super) struct Waiter {
    pointers: Pointers<Waiter>,
    pub(super) key: AtomicUsize,
    pub(super) bucket: AtomicUsize,
    pub(super) state: AtomicU32,
    pub(super) unparker: Unparker,
    _pinned: PhantomPinned,
}

impl Waiter {
    pub(super) fn new(key: usize, bucket: usize, unparker: Unparker) -> Self {
        Waiter {
            pointers: Pointers::new(),
            key: AtomicUsize::new(key),
            bucket: AtomicUsize::new(bucket),
            state: AtomicU32::new(WAITING),
            unparker,
            _pinned: PhantomPinned,
        }
    }
}

// SAFETY: the only non-atomic mutable state is `pointers`, which is read
// and written only under the lock of the bucket list holding the record.
unsafe impl Sync for Waiter {}
// SAFETY: as above; the record is never moved while linked (it is pinned).
unsafe impl Send for Waiter {}

// SAFETY: returns the `pointers` field of the node, used by one list only.
unsafe impl Link for Waiter {
    unsafe fn pointers(target: NonNull<Self>) -> NonNull<Pointers<Self>> {
        // SAFETY: `target` is live (trait contract); addr_of_mut makes no
        // reference to the whole node, which other threads may be reading.
        unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*target.as_ptr()).pointers)) }
    }
}
