//! One queued thread's record (kernel: `struct rwsem_waiter`), pinned on the
//! waiting thread's stack.

use std::ptr::NonNull;

use crate::util::sleeper::{Sleeper, Wakeup};
use crate::util::waiter;
use crate::util::wake_list::{WakeList, WakeSource};

/// What a waiter wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A shared hold.
    Read,
    /// The exclusive hold.
    Write,
    /// The upgradable hold (shared with readers, one at a time).
    Upgradable,
    /// The upgradable holder wants the exclusive hold: it waits in the
    /// upgrade slot, ahead of the queue, for the readers to drain.
    Upgrade,
}

/// A queued thread's or task's record: the shared
/// [`util::waiter::Waiter`](crate::util::waiter::Waiter) woken through a
/// [`Sleeper`] (a thread's `Unparker`, or a task's `Waker` slot that the
/// task's future updates under the wait lock), with what the waiter wants
/// as its payload (immutable). Threads and tasks queue in the same FIFO
/// list and are granted by the same code.
///
/// Its links are touched only under the wait lock, while the record is in
/// the semaphore's wait list (an `Upgrade` record sits in the upgrade slot
/// instead and never uses them). A granter, holding the wait lock and having
/// dequeued the record (or emptied the upgrade slot), grants it
/// ([`Waiter::grant`], the last access: ARCHITECTURE contract 3); once the
/// owner sees the grant it holds the lock and may return, freeing the
/// record.
pub(super) type Waiter = waiter::Waiter<Kind, Sleeper>;

/// The wakeups a grant collects under the wait lock (threads and tasks).
pub(super) type Wakes = WakeList<Wakeup>;

/// Wakes a queued writer (a thread, or a task's waker) *without* granting it the lock (`AtomicCount`
/// without hand-off): it stays queued and, once running, tries to take the
/// lock itself. The caller holds the wait lock.
///
/// # Safety
/// `node` is in the wait list, whose lock the caller holds.
pub(super) unsafe fn nudge(node: NonNull<Waiter>, wakes: &mut Wakes) {
    // SAFETY: a queued record is live while the wait lock is held (its
    // owner leaves the list only under that lock).
    let waiter = unsafe { node.as_ref() };
    // Under the wait lock: the `WakeSource` contract of a task's slot.
    wakes.push(waiter.wake_handle().handle());
}
