//! The data under the wait lock, and the guard that times how long it is
//! held.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::stats::{HoldClock, Tallies};
use super::waiter::{Kind, Waiter};
use crate::lock::LockGuard;
use crate::util::linked_list::LinkedList;

/// What the wait lock guards.
pub(super) struct WaitList {
    /// Queued threads, oldest first (FIFO).
    pub(super) list: LinkedList<Waiter>,
    /// The upgrade slot: the upgradable holder waiting in `upgrade` for the
    /// readers to drain. It holds the lock already, so it goes before the
    /// whole queue; while it waits nothing else is granted and new readers
    /// queue (with `AtomicCount`, `UPGRADING` is set exactly while the slot
    /// is occupied). At most one: there is one upgradable holder.
    pub(super) upgrader: Option<NonNull<Waiter>>,
    /// [`Counting::Generic`](super::Counting::Generic) only, the kernel's
    /// `sem->activity`: the number of readers holding the lock (the
    /// upgradable holder not included), `-1` while a writer holds it, `0`
    /// when no reader or writer does. Unused (0) with `AtomicCount`.
    pub(super) activity: isize,
    /// `Generic` only: the upgradable reader holds the lock (never while
    /// `activity` is `-1`). Unused (false) with `AtomicCount`.
    pub(super) upgradable: bool,
    /// Event counts (nothing without the `stats` feature).
    pub(super) tallies: Tallies,
}

// SAFETY: the list and the upgrade slot link records pinned on the stacks
// of waiting threads; they are only touched under the wait lock, and every
// record outlives its membership (see `Waiter`). Sending the list head
// between threads is how the lock is used.
unsafe impl Send for WaitList {}

/// What a grant to the head of the queue would hand out, given what the
/// holders allow (the caller checks that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HeadBatch {
    /// The writer at the head.
    Write,
    /// The leading run of shared waiters: `readers` readers, then, if
    /// `upgradable` is `Some(n)`, one upgradable waiter and the `n` readers
    /// after it. A batch holds at most one upgradable waiter and stops at
    /// the first writer. The upgradable part may be granted only if no
    /// upgradable reader holds the lock; `readers` may be 0 (an upgradable
    /// waiter at the head).
    Shared {
        readers: usize,
        upgradable: Option<usize>,
    },
}

impl HeadBatch {
    /// What a grant gives when the upgradable hold is free (`true`) or
    /// taken: (reader holds, the upgradable hold or not, records dequeued).
    /// Zero records: nothing can be granted.
    pub(super) fn take(self, upgradable_free: bool) -> (usize, bool, usize) {
        match self {
            HeadBatch::Write => (0, false, 1),
            HeadBatch::Shared {
                readers,
                upgradable: Some(more),
            } if upgradable_free => (readers + more, true, readers + 1 + more),
            HeadBatch::Shared { readers, .. } => (readers, false, readers),
        }
    }
}

impl WaitList {
    pub(super) const fn new() -> Self {
        WaitList {
            list: LinkedList::new(),
            upgrader: None,
            activity: 0,
            upgradable: false,
            tallies: Tallies::new(),
        }
    }

    /// Whether anyone waits: in the list or in the upgrade slot.
    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty() && self.upgrader.is_none()
    }

    /// Threads waiting: in the list and in the upgrade slot.
    pub(super) fn len(&self) -> usize {
        self.list.len() + usize::from(self.upgrader.is_some())
    }

    /// The batch at the head of the list (the upgrade slot is not looked
    /// at); `None` if the list is empty.
    pub(super) fn head_batch(&self) -> Option<HeadBatch> {
        let mut node = self.list.front()?;
        let mut readers = 0;
        let mut upgradable: Option<usize> = None;
        loop {
            // SAFETY: queued records are live while we hold the wait lock,
            // and `node` was reached through the list.
            match unsafe { *node.as_ref().payload() } {
                Kind::Write if readers == 0 && upgradable.is_none() => {
                    return Some(HeadBatch::Write)
                }
                Kind::Write | Kind::Upgrade => break,
                Kind::Upgradable if upgradable.is_some() => break,
                Kind::Upgradable => upgradable = Some(0),
                Kind::Read => match upgradable.as_mut() {
                    Some(after) => *after += 1,
                    None => readers += 1,
                },
            }
            // SAFETY: as above.
            match unsafe { self.list.next(node) } {
                Some(next) => node = next,
                None => break,
            }
        }
        Some(HeadBatch::Shared {
            readers,
            upgradable,
        })
    }
}

/// The held wait lock: adds the hold time to the tallies when dropped.
pub(super) struct WaitGuard<'a> {
    guard: LockGuard<'a, WaitList>,
    since: HoldClock,
}

impl<'a> WaitGuard<'a> {
    pub(super) fn new(mut guard: LockGuard<'a, WaitList>) -> Self {
        let number = guard.tallies.acquisitions.get();
        guard.tallies.acquisitions.add(1);
        WaitGuard {
            guard,
            since: HoldClock::start(number),
        }
    }
}

impl Deref for WaitGuard<'_> {
    type Target = WaitList;
    fn deref(&self) -> &WaitList {
        &self.guard
    }
}

impl DerefMut for WaitGuard<'_> {
    fn deref_mut(&mut self) -> &mut WaitList {
        &mut self.guard
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        let held = self.since.elapsed_ns();
        self.guard.tallies.hold_ns.add(held);
        // `guard` unlocks when the fields drop, after this.
    }
}
