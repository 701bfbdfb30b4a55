//! The data under the wait lock, and the guard that times how long it is
//! held.

use std::ops::{Deref, DerefMut};

use super::stats::{HoldClock, Tallies};
use super::waiter::{Kind, Waiter};
use crate::lock::LockGuard;
use crate::util::linked_list::LinkedList;

/// What the wait lock guards.
pub(super) struct WaitList {
    /// Queued threads, oldest first (FIFO).
    pub(super) list: LinkedList<Waiter>,
    /// [`Counting::Generic`](super::Counting::Generic) only, the kernel's
    /// `sem->activity`: the number of readers holding the lock, `-1` while
    /// a writer holds it, `0` when free. Unused (0) with `AtomicCount`.
    pub(super) activity: isize,
    /// Event counts (nothing without the `stats` feature).
    pub(super) tallies: Tallies,
}

// SAFETY: the list links records pinned on the stacks of waiting threads;
// it is only touched under the wait lock, and every record outlives its
// membership (see `Waiter`). Sending the list head between threads is how
// the lock is used.
unsafe impl Send for WaitList {}

impl WaitList {
    pub(super) const fn new() -> Self {
        WaitList {
            list: LinkedList::new(),
            activity: 0,
            tallies: Tallies::new(),
        }
    }

    /// How many waiters a grant to the head would wake: the whole leading
    /// batch of readers, or one writer; 0 if nobody waits.
    pub(super) fn head_batch(&self) -> Option<(Kind, usize)> {
        let head = self.list.front()?;
        // SAFETY: queued records are live while we hold the wait lock.
        let kind = unsafe { head.as_ref().kind };
        if kind == Kind::Write {
            return Some((kind, 1));
        }
        let mut readers = 1;
        let mut node = head;
        // SAFETY: as above, for each node reached through the list.
        while let Some(next) = unsafe { self.list.next(node) } {
            // SAFETY: as above.
            if unsafe { next.as_ref().kind } != Kind::Read {
                break;
            }
            readers += 1;
            node = next;
        }
        Some((kind, readers))
    }
}

/// The held wait lock: adds the hold time to the tallies when dropped.
pub(super) struct WaitGuard<'a> {
    guard: LockGuard<'a, WaitList>,
    since: HoldClock,
}

impl<'a> WaitGuard<'a> {
    pub(super) fn new(mut guard: LockGuard<'a, WaitList>) -> Self {
        guard.tallies.acquisitions.add(1);
        WaitGuard {
            guard,
            since: HoldClock::start(),
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
