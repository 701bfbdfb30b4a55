//! A hash bucket of the futex table (kernel: `futex_hash_bucket`), and the
//! keyed cursor every walk of its list uses.

use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use super::waiter::Waiter;
use crate::lock::SpinParkLock;
use crate::sync::{AtomicUsize, Ordering};
use crate::util::linked_list::LinkedList;

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

    /// Announces waiters (raise before locking; see the module docs).
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

/// Walks the waiters of one key in a locked bucket list, oldest first
/// (other keys hashed to the same bucket are skipped). The caller may
/// unlink each waiter it is handed before asking for the next: the cursor
/// has already read the successor.
pub(super) struct KeyedCursor<'q> {
    queue: &'q mut Queue,
    key: usize,
    /// The waiter `next` returned last, while it is still linked.
    current: Option<NonNull<Waiter>>,
    next: Option<NonNull<Waiter>>,
}

impl<'q> KeyedCursor<'q> {
    /// A cursor at the front of `queue`, which the caller holds locked.
    pub(super) fn new(queue: &'q mut Queue, key: usize) -> Self {
        let next = queue.front();
        KeyedCursor {
            queue,
            key,
            current: None,
            next,
        }
    }

    /// The next waiter of the key.
    pub(super) fn next(&mut self) -> Option<NonNull<Waiter>> {
        while let Some(node) = self.next {
            // SAFETY: `node` is in the list, which the caller holds locked
            // (the cursor borrows it), so it is live and its links are
            // ours; the successor is read before the caller may unlink it.
            self.next = unsafe { self.queue.next(node) };
            // SAFETY: as above; shared access to an atomic of the payload.
            let key = unsafe { node.as_ref() }
                .payload()
                .key
                .load(Ordering::Relaxed);
            // Relaxed: `key` is written only under this bucket's lock.
            if key == self.key {
                self.current = Some(node);
                return Some(node);
            }
        }
        self.current = None;
        None
    }

    /// Unlinks the waiter [`next`](Self::next) returned last and returns
    /// it (the caller then grants it or links it elsewhere).
    pub(super) fn unlink_current(&mut self) -> NonNull<Waiter> {
        let node = self.current.take().expect("unlink_current after next");
        // SAFETY: `next` handed out `node` from this locked list and it has
        // not been unlinked since (`current` is taken once).
        unsafe { self.queue.remove(node) };
        node
    }

    /// Whether another waiter of the key follows (consumes the cursor).
    pub(super) fn has_more(mut self) -> bool {
        self.next().is_some()
    }
}
