//! `LockFree`: beyond seed 003. An intrusive multi-producer single-consumer
//! list (Vyukov's, with a stub node): callbacks claim the item's `queued`
//! flag and append with one exchange, with no lock at all; the harvester,
//! alone under the poller's scan lock, pops from the other end. There is no
//! reader-writer lock, so no callback can delay the harvester while it is
//! preempted holding a read lock (why the kernel replaced the rwlock with a
//! spinlock in 2025), and no overflow list: appends during a harvest simply
//! land behind the items being taken.
//!
//! ```text
//!   consumer.head -> stub|item -> item -> ... -> item <- tail
//! ```
//! A push is `node.next = null; prev = tail.swap(node); prev.next = node`.
//! Between the exchange and the link the chain is cut: the harvester stops
//! there and reports nothing more. The cut is always healed by the same
//! producer, which then does the poller's wake check (fence, then the
//! sleeper count: `epoll.rs`), so a stopped harvest never strands an item;
//! the loom model `lockless_append_racing_the_drain_*` checks it.

use std::collections::VecDeque;
use std::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use super::take_ref;
use crate::poll::item::{Item, Link};
use crate::sync::{Arc, AtomicPtr, Ordering};

pub(crate) struct LockFreeList {
    /// The newest node (an item, or the stub).
    tail: CachePadded<AtomicPtr<Link>>,
    /// The stub, allocated on its own so its address is stable, held as
    /// a raw pointer (from `Box::leak`, freed in `Drop`): a `Box`
    /// field is asserted unique each time the list moves, which would
    /// invalidate the pointers to the stub that `tail` and the consumer
    /// hold (Miri's Stacked Borrows reported it).
    stub: NonNull<Link>,
}

// SAFETY: the stub is owned by the list and only reached through atomics
// (its `next`) or by the consumer under the scan lock, as the items are;
// `Link` is `Send + Sync`, as a `Box<Link>` field made the list before.
unsafe impl Send for LockFreeList {}
// SAFETY: as above.
unsafe impl Sync for LockFreeList {}

impl Drop for LockFreeList {
    fn drop(&mut self) {
        // SAFETY: from `Box::leak` in `new`, freed only here.
        drop(unsafe { Box::from_raw(self.stub.as_ptr()) });
    }
}

/// The consumer end of a `LockFree` list, kept under the poller's scan lock
/// (null for the other variants).
pub(crate) struct Consumer {
    head: *mut Link,
}

// SAFETY: `head` points into the list it was made with, which is shared;
// the consumer state is only used by the scan-lock holder.
unsafe impl Send for Consumer {}

impl Consumer {
    pub(crate) fn none() -> Self {
        Consumer {
            head: ptr::null_mut(),
        }
    }
}

impl LockFreeList {
    pub(crate) fn new() -> (Self, Consumer) {
        let stub = NonNull::from(Box::leak(Box::new(Link::new())));
        let list = LockFreeList {
            tail: CachePadded::new(AtomicPtr::new(stub.as_ptr())),
            stub,
        };
        (
            list,
            Consumer {
                head: stub.as_ptr(),
            },
        )
    }

    fn stub(&self) -> *mut Link {
        self.stub.as_ptr()
    }

    pub(crate) fn push(&self, item: &Arc<Item>) -> bool {
        if !item.claim() {
            return false;
        }
        // The list's strong reference; `Item` is `repr(C)`, link first.
        let node = Arc::into_raw(item.clone()) as *mut Link;
        // SAFETY: a live item we claimed: in no list.
        unsafe { self.push_node(node) };
        true
    }

    /// # Safety
    /// `node` is the stub or an item the list now owns a reference to, and
    /// is in no list.
    unsafe fn push_node(&self, node: *mut Link) {
        // SAFETY: caller contract: the node is ours until linked.
        let link = unsafe { &(*node).next };
        // Relaxed: published by the Release exchange below.
        link.store(ptr::null_mut(), Ordering::Relaxed);
        // (X) AcqRel. Release: our null `next` (and the item) are visible to
        // the producer that links after us and to the consumer that
        // reaches us. Acquire: the previous node's null store
        // happens-before our link store (L), which therefore cannot be
        // overwritten by it.
        let prev = self.tail.swap(node, Ordering::AcqRel);
        // (L) Release, paired with the consumer's Acquire loads of `next`
        // in `pop`: a consumer that sees our node sees it whole.
        // SAFETY: `prev` is the stub or an item the list holds; the
        // consumer frees a node only after seeing its `next` non-null
        // (which only this store makes it) or when it is the tail (it no
        // longer is: we replaced it).
        unsafe { (*prev).next.store(node, Ordering::Release) };
    }

    /// Pops the oldest node that is fully linked (Vyukov's pop).
    ///
    /// # Safety
    /// `consumer` is this list's, used by one thread at a time.
    unsafe fn pop(&self, consumer: &mut Consumer) -> Option<*mut Item> {
        let stub = self.stub();
        let mut head = consumer.head;
        // SAFETY (every deref below): `head` and the nodes reached from it
        // are the stub or items the list holds, and only we free them.
        // Acquire: pairs with (L).
        let mut next = unsafe { (*head).next.load(Ordering::Acquire) };
        if head == stub {
            if next.is_null() {
                return None;
            }
            consumer.head = next;
            head = next;
            // SAFETY: as above.
            next = unsafe { (*head).next.load(Ordering::Acquire) };
        }
        if !next.is_null() {
            consumer.head = next;
            return Some(head as *mut Item);
        }
        // `head` is the last linked node. If it is not the tail, a producer
        // is between (X) and (L): stop; that producer will wake a waiter.
        // Acquire: pairs with (X).
        if self.tail.load(Ordering::Acquire) != head {
            return None;
        }
        // `head` is the tail: put the stub behind it so it can be taken.
        // SAFETY: the stub is in no list (we passed it).
        unsafe { self.push_node(stub) };
        // SAFETY: as above.
        next = unsafe { (*head).next.load(Ordering::Acquire) };
        if !next.is_null() {
            consumer.head = next;
            return Some(head as *mut Item);
        }
        // A producer got between the tail load and our stub push.
        None
    }

    /// # Safety
    /// As for `pop`.
    pub(crate) unsafe fn start_scan(&self, consumer: &mut Consumer, out: &mut VecDeque<Arc<Item>>) {
        // SAFETY: caller contract.
        while let Some(item) = unsafe { self.pop(consumer) } {
            // SAFETY: the list's reference to a node it no longer links.
            out.push_back(unsafe { take_ref(item) });
        }
    }

    /// Appends the re-queued items; returns whether the consumer can take
    /// something now. An item behind a cut is not counted: its producer
    /// wakes a waiter when it heals the cut.
    ///
    /// # Safety
    /// As for `pop`.
    pub(crate) unsafe fn done_scan(
        &self,
        consumer: &mut Consumer,
        requeue: &mut Vec<Arc<Item>>,
    ) -> bool {
        let requeued = !requeue.is_empty();
        for item in requeue.drain(..) {
            let node = Arc::into_raw(item) as *mut Link;
            // SAFETY: claimed by the caller, in no list; the reference
            // passes to the list.
            unsafe { self.push_node(node) };
        }
        let head = consumer.head;
        // SAFETY: as in `pop`. Acquire: pairs with (L).
        let next = unsafe { (*head).next.load(Ordering::Acquire) };
        // Poppable now: a linked successor, or a last item that is also the
        // tail (`pop` moves the stub behind it). Acquire: pairs with (X).
        requeued
            || !next.is_null()
            || (head != self.stub() && self.tail.load(Ordering::Acquire) == head)
    }
}
