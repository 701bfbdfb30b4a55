//! One queued thread's record (kernel: `struct rwsem_waiter`), pinned on the
//! waiting thread's stack.

use std::ptr::NonNull;

use crate::util::waiter;
use crate::util::wake_list::WakeList;

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

/// A queued thread's record: the shared
/// [`util::waiter::Waiter`](crate::util::waiter::Waiter) with what the
/// thread wants as its payload (immutable).
///
/// Its links are touched only under the wait lock, while the record is in
/// the semaphore's wait list (an `Upgrade` record sits in the upgrade slot
/// instead and never uses them). A granter, holding the wait lock and having
/// dequeued the record (or emptied the upgrade slot), grants it
/// ([`Waiter::grant`], the last access: ARCHITECTURE contract 3); once the
/// owner sees the grant it holds the lock and may return, freeing the
/// record.
pub(super) type Waiter = waiter::Waiter<Kind>;

/// Wakes a queued writer *without* granting it the lock (`AtomicCount`
/// without hand-off): it stays queued and, once running, tries to take the
/// lock itself. The caller holds the wait lock.
///
/// # Safety
/// `node` is in the wait list, whose lock the caller holds.
pub(super) unsafe fn nudge(node: NonNull<Waiter>, wakes: &mut WakeList) {
    // SAFETY: a queued record is live while the wait lock is held (its
    // owner leaves the list only under that lock).
    let waiter = unsafe { node.as_ref() };
    wakes.push(waiter.wake_handle().clone());
}
