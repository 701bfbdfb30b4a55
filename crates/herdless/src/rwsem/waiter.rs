//! One queued thread's record (kernel: `struct rwsem_waiter`), pinned on the
//! waiting thread's stack.

use std::marker::PhantomPinned;
use std::ptr::NonNull;

use crate::parker::Unparker;
use crate::sync::{AtomicU32, Ordering};
use crate::util::linked_list::{Link, Pointers};
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

/// Queued, not granted.
const WAITING: u32 = 0;
/// The granter made this thread a holder; it no longer touches the record.
const GRANTED: u32 = 1;

/// Invariants (who writes what, under which lock):
/// - `pointers`: only under the wait lock, while the record is in the
///   semaphore's wait list (an `Upgrade` record sits in the upgrade slot
///   instead and never uses them).
/// - `kind`, `unparker`: immutable; the granter clones `unparker` under the
///   wait lock before it publishes the grant.
/// - `state`: `WAITING` from construction until a granter, holding the wait
///   lock and having dequeued the record (or emptied the upgrade slot),
///   stores `GRANTED` (Release) as its
///   last access. The waiter reads it with Acquire, with or without the
///   wait lock; once it reads `GRANTED` it owns the lock and may return,
///   freeing the record (ARCHITECTURE contract 3).
pub(super) struct Waiter {
    pointers: Pointers<Waiter>,
    pub(super) kind: Kind,
    unparker: Unparker,
    state: AtomicU32,
    _pinned: PhantomPinned,
}

impl Waiter {
    pub(super) fn new(kind: Kind, unparker: Unparker) -> Self {
        Waiter {
            pointers: Pointers::new(),
            kind,
            unparker,
            state: AtomicU32::new(WAITING),
            _pinned: PhantomPinned,
        }
    }

    /// Whether a release has granted this waiter the lock.
    pub(super) fn is_granted(&self) -> bool {
        // Acquire pairs with the Release store in `grant`: everything the
        // previous holders did in their critical sections, and the count
        // update that made us a holder, happen-before our critical section.
        self.state.load(Ordering::Acquire) == GRANTED
    }
}

/// Grants the lock to a waiter its caller has just dequeued (or taken out of
/// the upgrade slot), holding the wait lock: takes a strong handle to the
/// sleeper for `wakes`, then publishes the grant, the last access to the
/// record.
///
/// # Safety
/// `node` was in the wait list (or the upgrade slot) until the caller
/// removed it under the wait lock the caller still holds, and has not been
/// granted before.
pub(super) unsafe fn grant(node: NonNull<Waiter>, wakes: &mut WakeList) {
    // SAFETY: the record stays live until its owner sees GRANTED, which is
    // only possible after the store below (caller contract: not granted
    // yet, and the owner cannot leave the list without the wait lock).
    let waiter = unsafe { node.as_ref() };
    // The handle first (the seed's own bug, fixed later with `wake_q`: the
    // 2006 patch read `waiter->task` after the waiter could have returned).
    wakes.push(waiter.unparker.clone());
    // Release pairs with the Acquire in `is_granted`.
    waiter.state.store(GRANTED, Ordering::Release);
}

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
    wakes.push(waiter.unparker.clone());
}

// SAFETY: the only non-atomic mutable state is `pointers`, touched only under
// the wait lock; `kind` is immutable and `unparker` is `Send + Sync`.
unsafe impl Sync for Waiter {}
// SAFETY: as above; the record never moves while linked (it is pinned).
unsafe impl Send for Waiter {}

// SAFETY: returns the `pointers` field of the node, used by one list only.
unsafe impl Link for Waiter {
    unsafe fn pointers(target: NonNull<Self>) -> NonNull<Pointers<Self>> {
        // SAFETY: `target` is live (trait contract); addr_of_mut makes no
        // reference to the whole node, which other threads may be reading.
        unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*target.as_ptr()).pointers)) }
    }
}
