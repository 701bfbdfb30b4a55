//! The ready list: where poll callbacks queue items for the harvester
//! (kernel: `ep->rdllist` and `ep->ovflist`; seed 003, "epoll: use rwlock
//! in order to reduce ep_poll_callback() contention").
//!
//! Three variants, chosen at construction ([`ReadyListKind`]):
//!
//! | variant | callback (producer) | harvester (consumer) |
//! |---|---|---|
//! | `Spinlock` (before) | takes the list lock, claims, appends | takes the lock to splice the list out and again to merge the overflow back |
//! | `RwLockSwap` (seed) | takes the *read* lock, claims, appends at the tail with one exchange | takes the *write* lock to splice and to merge |
//! | `LockFree` (beyond) | claims, appends with one exchange: no lock at all | pops from an MPSC list; no overflow needed |
//!
//! # The protocol every variant follows
//! - An item is queued at most once: a producer first *claims* it
//!   (`Item::claim`, a swap of its `queued` flag) and only the claimer
//!   appends it. In the lock-based variants the claim happens under the
//!   lock the callback takes, as the kernel's `ep_is_linked` check does;
//!   in `LockFree` it is the only synchronization between producers.
//! - A harvest (under the poller's scan lock, one at a time) calls
//!   `start_scan`, which moves every queued item into the harvester's
//!   private list, then takes items from that list, *unqueues* each
//!   (`Item::unqueue`) and only then reads the source: the claim/unqueue
//!   pair ensures an event is either seen by that read or queues the item
//!   again (see `item.rs`).
//! - Between `start_scan` and `done_scan` the lock-based variants send
//!   callbacks to an *overflow* list (the seed's `ovflist`), and
//!   `done_scan` appends the overflow, oldest first, then the items the
//!   harvester re-queues (level-triggered ones it reported).
//! - `done_scan` returns whether items are queued: the caller then wakes
//!   another waiter (the cascade).
//! - The list owns one strong reference per queued item
//!   (`Arc::into_raw` on append, `Arc::from_raw` when taken).

mod lock_free;
mod rwlock;
mod rwlock_swap;
mod spinlock;

use std::collections::VecDeque;

use super::item::Item;
use crate::sync::Arc;

pub(crate) use lock_free::Consumer;

pub(crate) use crate::variants::ReadyListKind;

/// Counts of a ready list (zeros without the `stats` feature).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ListCounts {
    /// Acquisitions of the list lock (callback or harvester side) that
    /// found it held: for `Spinlock` the lock's contended acquisitions, for
    /// `RwLockSwap` reads that found a writer plus writes that waited for
    /// readers; 0 for `LockFree`.
    pub(crate) contended: u64,
    /// Items appended to the overflow list during a harvest.
    pub(crate) overflow_appends: u64,
}

pub(crate) enum ReadyList {
    Spinlock(spinlock::SpinlockList),
    RwLockSwap(rwlock_swap::RwSwapList),
    LockFree(lock_free::LockFreeList),
}

impl ReadyList {
    /// An empty list and the consumer state the scan lock protects.
    pub(crate) fn new(kind: ReadyListKind) -> (Self, Consumer) {
        match kind {
            ReadyListKind::Spinlock => (
                ReadyList::Spinlock(spinlock::SpinlockList::new()),
                Consumer::none(),
            ),
            ReadyListKind::RwLockSwap => (
                ReadyList::RwLockSwap(rwlock_swap::RwSwapList::new()),
                Consumer::none(),
            ),
            ReadyListKind::LockFree => {
                let (list, consumer) = lock_free::LockFreeList::new();
                (ReadyList::LockFree(list), consumer)
            }
        }
    }

    pub(crate) fn kind(&self) -> ReadyListKind {
        match self {
            ReadyList::Spinlock(_) => ReadyListKind::Spinlock,
            ReadyList::RwLockSwap(_) => ReadyListKind::RwLockSwap,
            ReadyList::LockFree(_) => ReadyListKind::LockFree,
        }
    }

    /// The callback path: claims `item` and queues it if it was not queued.
    /// Returns whether this call queued it (whoever queues it does the wake
    /// check afterwards).
    #[inline]
    pub(crate) fn push(&self, item: &Arc<Item>) -> bool {
        match self {
            ReadyList::Spinlock(list) => list.push(item),
            ReadyList::RwLockSwap(list) => list.push(item),
            ReadyList::LockFree(list) => list.push(item),
        }
    }

    /// The harvester (holding the scan lock, which `consumer` lives under):
    /// appends every queued item to `out`, oldest first, and starts sending
    /// callbacks to the overflow list.
    pub(crate) fn start_scan(&self, consumer: &mut Consumer, out: &mut VecDeque<Arc<Item>>) {
        match self {
            ReadyList::Spinlock(list) => list.start_scan(out),
            ReadyList::RwLockSwap(list) => list.start_scan(out),
            // SAFETY: `consumer` came with this list from `new` and is only
            // reachable under the scan lock, which our caller holds.
            ReadyList::LockFree(list) => unsafe { list.start_scan(consumer, out) },
        }
    }

    /// The harvester ends a scan: the overflow (oldest first), then
    /// `requeue` (items the harvester has claimed) join the list. Returns
    /// whether the list holds items.
    pub(crate) fn done_scan(&self, consumer: &mut Consumer, requeue: &mut Vec<Arc<Item>>) -> bool {
        match self {
            ReadyList::Spinlock(list) => list.done_scan(requeue),
            ReadyList::RwLockSwap(list) => list.done_scan(requeue),
            // SAFETY: as in `start_scan`.
            ReadyList::LockFree(list) => unsafe { list.done_scan(consumer, requeue) },
        }
    }

    pub(crate) fn counts(&self) -> ListCounts {
        match self {
            ReadyList::Spinlock(list) => list.counts(),
            ReadyList::RwLockSwap(list) => list.counts(),
            ReadyList::LockFree(_) => ListCounts::default(),
        }
    }

    /// Frees every queued item (the poller is gone, so no scan is under
    /// way and no callback runs: callbacks keep the poller's core alive).
    pub(crate) fn clear(&mut self, consumer: &mut Consumer) {
        let mut out = VecDeque::new();
        self.start_scan(consumer, &mut out);
        self.done_scan(consumer, &mut Vec::new());
        drop(out);
    }
}

/// Turns a list's strong reference back into an `Arc`.
///
/// # Safety
/// `ptr` came from `Arc::into_raw` of an `Arc<Item>` whose reference the
/// list owned, and the list gives it up now (it is no longer linked).
pub(super) unsafe fn take_ref(ptr: *const Item) -> Arc<Item> {
    // SAFETY: caller contract.
    unsafe { Arc::from_raw(ptr) }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::poll::interest::{Readiness, Trigger};
    use loom::thread;

    fn item(token: u64) -> Arc<Item> {
        Arc::new(Item::new(
            token,
            Readiness::READABLE,
            Trigger::Edge,
            Box::new(|| Readiness::READABLE),
        ))
    }

    fn tokens(items: &VecDeque<Arc<Item>>) -> Vec<u64> {
        items.iter().map(|i| i.token()).collect()
    }

    /// Appends racing a scan: one thread appends A then B, another C,
    /// while the consumer splices the list out and merges the overflow
    /// back. Every item comes out exactly once, and A before B (the
    /// overflow is re-queued oldest first). The consumer here plays the
    /// harvest: it unqueues what it took.
    #[test]
    fn appends_racing_a_scan_come_out_once_and_in_order() {
        for kind in ReadyListKind::ALL {
            let mut builder = loom::model::Builder::new();
            builder.preemption_bound = Some(2);
            builder.check(move || {
                let (list, mut consumer) = ReadyList::new(kind);
                let list = Arc::new(list);
                let (a, b, c) = (item(1), item(2), item(3));
                let t1 = {
                    let (list, a, b) = (list.clone(), a.clone(), b.clone());
                    thread::spawn(move || {
                        assert!(list.push(&a));
                        assert!(list.push(&b));
                    })
                };
                let t2 = {
                    let (list, c) = (list.clone(), c.clone());
                    thread::spawn(move || assert!(list.push(&c)))
                };
                let mut got = Vec::new();
                let mut out = VecDeque::new();
                list.start_scan(&mut consumer, &mut out);
                got.extend(tokens(&out));
                for i in out.drain(..) {
                    i.unqueue();
                }
                list.done_scan(&mut consumer, &mut Vec::new());
                t1.join().unwrap();
                t2.join().unwrap();
                list.start_scan(&mut consumer, &mut out);
                got.extend(tokens(&out));
                for i in out.drain(..) {
                    i.unqueue();
                }
                list.done_scan(&mut consumer, &mut Vec::new());
                let pos = |t| got.iter().position(|&x| x == t).unwrap();
                assert!(pos(1) < pos(2), "{kind:?}: FIFO per producer: {got:?}");
                got.sort_unstable();
                assert_eq!(got, [1, 2, 3], "{kind:?}: once each");
                let mut list = Arc::try_unwrap(list).ok().unwrap();
                list.clear(&mut consumer);
            });
        }
    }
}
