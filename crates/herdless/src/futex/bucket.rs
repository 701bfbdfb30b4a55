//! A hash bucket of the futex table (kernel: `futex_hash_bucket`).

use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use super::waiter::{Waiter, WOKEN};
use crate::lock::{LockGuard, SpinParkLock};
use crate::sync::{AtomicUsize, Ordering};
use crate::util::linked_list::LinkedList;
use crate::util::wake_list::WakeList;

pub(super) type Queue = LinkedList<Waiter>;

/// `waiters` sits on its own cache line: a no-waiter wake reads it without
/// pulling in the line that waiters and wakers write under the lock.
pub(super) struct Bucket {
    pub(super) waiters: CachePadded<AtomicUsize>,
    pub(super) queue: CachePadded<SpinParkLock<Queue>>,
}

impl Bucket {
    pub(super) fn new() -> Self {
        Bucket {
            waiters: CachePadded::new(AtomicUsize::new(0)),
            queue: CachePadded::new(SpinParkLock::new(LinkedList::new())),
        }
    }

    /// Announces a waiter (raise before locking; see the module docs).
    /// The caller issues fence (A) after it.
    pub(super) fn announce(&self, n: usize) {
        self.waiters.fetch_add(n, Ordering::Relaxed);
    }

    /// Withdraws waiters that left this bucket.
    pub(super) fn withdraw(&self, n: usize) {
        // Relaxed: only increments take part in the store-buffering
        // argument; a decrement removes a waiter that is no longer queued.
        self.waiters.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Dequeues, in FIFO order, up to `max` waiters of `key` from the locked
/// `queue` onto `wake_list`, withdrawing them from `bucket`'s count.
/// Returns how many were dequeued. The caller wakes `wake_list` after
/// dropping the lock.
pub(super) fn dequeue_waiters(
    queue: &mut LockGuard<'_, Queue>,
    bucket: &Bucket,
    key: usize,
    max: usize,
    wake_list: &mut WakeList,
) -> usize {
    let mut taken = 0;
    let mut cursor = queue.front();
    while let Some(node) = cursor {
        if taken == max {
            break;
        }
        // SAFETY: `node` is in `queue`, which we hold locked, so it is live
        // and its links are ours. We read `next` before `node` can be freed.
        cursor = unsafe { queue.next(node) };
        // SAFETY: as above; only shared access, to atomics and the unparker.
        let waiter = unsafe { node.as_ref() };
        if waiter.key.load(Ordering::Relaxed) != key {
            continue;
        }
        // SAFETY: `node` is in `queue`.
        unsafe { queue.remove(node) };
        bucket.withdraw(1);
        wake_list.push(waiter.unparker.clone());
        publish_woken(node);
        taken += 1;
    }
    taken
}

/// Tells a dequeued waiter it was woken. This is the last access to the
/// record: the waiter may return and free it as soon as it sees `WOKEN`.
pub(super) fn publish_woken(node: NonNull<Waiter>) {
    // SAFETY: the record is live until the waiter observes WOKEN, which can
    // only happen after this store.
    let state = unsafe { &node.as_ref().state };
    // Release pairs with the waiter's Acquire load of `state`: our unlinking
    // and everything the waking thread did before (e.g. its store to the
    // futex word) happen-before the waiter's return.
    state.store(WOKEN, Ordering::Release);
}
