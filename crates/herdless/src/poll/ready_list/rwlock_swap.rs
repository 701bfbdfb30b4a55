//! `RwLockSwap`: seed 003's ready list. Callbacks take the *read* lock, so
//! any number append at once, each claiming a slot at the tail with one
//! atomic exchange (the kernel's `list_add_tail_lockless`); during a
//! harvest they push onto the overflow list instead (`chain_epi_lockless`).
//! The harvester takes the *write* lock, which waits until every appender
//! has finished, to splice the list out and later to merge the overflow
//! back.
//!
//! ```text
//!   head -> A -> B -> C <- tail        (null, null: empty)
//!   overflow -> F -> E -> D -> null    (LIFO; active while `scanning`)
//! ```
//! Every field is written either under the write lock or, by appenders,
//! under the read lock; the harvester reads them only under the write
//! lock. Its Acquire (in `RwLock::write`) pairs with every reader's Release
//! unlock, so under the write lock Relaxed loads see every append whole:
//! this is why the seed needs no barrier in the consumer.

use std::collections::VecDeque;
use std::ptr;

use super::rwlock::RwLock;
use super::{take_ref, ListCounts};
use crate::poll::item::{Item, Link};
use crate::stats::Counter;
use crate::sync::{Arc, AtomicBool, AtomicPtr, Ordering};

pub(crate) struct RwSwapList {
    lock: RwLock,
    /// First item, or null. Set by the appender whose exchange found the
    /// list empty, and by the harvester.
    head: AtomicPtr<Link>,
    /// Last item, or null: every appender exchanges itself in here.
    tail: AtomicPtr<Link>,
    /// Items that arrived during a harvest, newest first.
    overflow: AtomicPtr<Link>,
    /// Written only under the write lock, so stable for a reader.
    scanning: AtomicBool,
    overflow_appends: Counter,
}

// The raw pointers are strong references to items (`Send + Sync`), owned
// by the list; every access follows the locking above.

impl RwSwapList {
    pub(crate) fn new() -> Self {
        RwSwapList {
            lock: RwLock::new(),
            head: AtomicPtr::new(ptr::null_mut()),
            tail: AtomicPtr::new(ptr::null_mut()),
            overflow: AtomicPtr::new(ptr::null_mut()),
            scanning: AtomicBool::new(false),
            overflow_appends: Counter::new(),
        }
    }

    pub(crate) fn push(&self, item: &Arc<Item>) -> bool {
        let _read = self.lock.read();
        if !item.claim() {
            return false;
        }
        // The list's strong reference; the item is `repr(C)` with its link
        // first.
        let node = Arc::into_raw(item.clone()) as *mut Link;
        // SAFETY: `node` is a live item we just claimed: no list holds it,
        // so its link is ours until we publish it.
        let link = unsafe { &(*node).next };
        // Relaxed: stable under the read lock (written under the write lock,
        // whose Release unlock our Acquire read lock paired with).
        if self.scanning.load(Ordering::Relaxed) {
            // AcqRel for symmetry with the tail; the chain is only read by
            // the harvester under the write lock (which orders it).
            let older = self.overflow.swap(node, Ordering::AcqRel);
            link.store(older, Ordering::Relaxed);
            self.overflow_appends.add(1);
        } else {
            // Terminate first: the next appender links after us.
            link.store(ptr::null_mut(), Ordering::Relaxed);
            // AcqRel: Release publishes our null `next` to the appender
            // whose exchange reads our pointer; Acquire makes the previous
            // appender's null store happen-before our link store below, so
            // our link cannot be overwritten by it.
            let prev = self.tail.swap(node, Ordering::AcqRel);
            if prev.is_null() {
                self.head.store(node, Ordering::Relaxed);
            } else {
                // SAFETY: `prev` is an item the list holds a reference to;
                // only the harvester takes items out, under the write lock,
                // which cannot be held while we hold the read lock.
                unsafe { (*prev).next.store(node, Ordering::Relaxed) };
            }
        }
        true
    }

    /// Appends under the write lock (no appender is running).
    fn append_locked(&self, item: Arc<Item>) {
        let node = Arc::into_raw(item) as *mut Link;
        // SAFETY: the item is live and in no list (the caller claimed it or
        // took it off the overflow).
        unsafe { (*node).next.store(ptr::null_mut(), Ordering::Relaxed) };
        let prev = self.tail.swap(node, Ordering::Relaxed);
        if prev.is_null() {
            self.head.store(node, Ordering::Relaxed);
        } else {
            // SAFETY: `prev` is held by the list; we hold the write lock.
            unsafe { (*prev).next.store(node, Ordering::Relaxed) };
        }
    }

    /// Takes the chain starting at `first` (under the write lock, or with
    /// `&mut self`), in chain order.
    ///
    /// # Safety
    /// Every node of the chain is an item the list holds a reference to,
    /// and the caller has unlinked the chain from the list.
    unsafe fn take_chain(mut node: *mut Link, out: &mut impl Extend<Arc<Item>>) {
        while !node.is_null() {
            // SAFETY: a live item of the chain (caller contract).
            let next = unsafe { (*node).next.load(Ordering::Relaxed) };
            // SAFETY: the list's reference, given up now.
            out.extend(Some(unsafe { take_ref(node as *const Item) }));
            node = next;
        }
    }

    pub(crate) fn start_scan(&self, out: &mut VecDeque<Arc<Item>>) {
        let _write = self.lock.write();
        let first = self.head.swap(ptr::null_mut(), Ordering::Relaxed);
        self.tail.store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the whole ready chain, unlinked above, under the write
        // lock: every append is complete and visible.
        unsafe { Self::take_chain(first, out) };
        self.overflow.store(ptr::null_mut(), Ordering::Relaxed);
        self.scanning.store(true, Ordering::Relaxed);
    }

    pub(crate) fn done_scan(&self, requeue: &mut Vec<Arc<Item>>) -> bool {
        let _write = self.lock.write();
        self.scanning.store(false, Ordering::Relaxed);
        let newest = self.overflow.swap(ptr::null_mut(), Ordering::Relaxed);
        let mut overflow = Vec::new();
        // SAFETY: the overflow chain, unlinked above, under the write lock.
        unsafe { Self::take_chain(newest, &mut overflow) };
        // The overflow is newest first: reverse it so events stay FIFO (the
        // seed's "Reverse ->ovflist, events should be in FIFO").
        for item in overflow.into_iter().rev() {
            self.append_locked(item);
        }
        for item in requeue.drain(..) {
            self.append_locked(item);
        }
        !self.head.load(Ordering::Relaxed).is_null()
    }

    pub(crate) fn counts(&self) -> ListCounts {
        ListCounts {
            contended: self.lock.contended_reads() + self.lock.contended_writes(),
            overflow_appends: self.overflow_appends.sum(),
        }
    }
}

impl Drop for RwSwapList {
    fn drop(&mut self) {
        let mut items: Vec<Arc<Item>> = Vec::new();
        let first = self.head.swap(ptr::null_mut(), Ordering::Relaxed);
        let newest = self.overflow.swap(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: `&mut self`: nobody else touches the list; both chains
        // hold the list's references.
        unsafe {
            Self::take_chain(first, &mut items);
            Self::take_chain(newest, &mut items);
        }
    }
}
