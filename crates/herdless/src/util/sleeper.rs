//! Who sleeps in a waiter record: a thread (its [`Unparker`]) or a task
//! (its current [`Waker`]), so that threads and tasks wait in the same
//! FIFO list, are granted by the same code, and are woken from the same
//! wake list after the lock is dropped (ARCHITECTURE contract 3).
//!
//! # The task's waker slot
//! A task's record is pinned inside its future. The future's owner may poll
//! it with a different `Waker` each time (a task moved to another worker,
//! `select!` polling it from another task), and a waker must always wake
//! the *latest* one, or the wakeup is lost. The slot is a plain cell, not
//! an atomic waker, because every access to it is ordered by the lock of
//! the list the record is on:
//!
//! | who | does what | when |
//! |---|---|---|
//! | the owner (the future's `poll`) | writes the slot | before the record is queued (no lock: nobody else can see it), or while it is queued, holding the list's lock |
//! | a waker (`Waiter::grant`, the rwsem's nudge) | reads it (clones the `Waker`) | holding the list's lock, with the record queued |
//! | the owner | reads it (`will_wake`, no lock) | any time: the only writer is the owner itself, so its reads never race a write |
//!
//! So the future's poll does: *if the record is granted, done; else if the
//! slot already wakes this task, `Pending` (no lock); else take the lock,
//! look at the grant again (under the lock it is final), store the new
//! waker, unlock, `Pending`*. A grant made before the store cloned the old
//! waker and published the grant, which the look under the lock sees; a
//! grant made after clones the new one. A waker is never lost, and the
//! common re-poll with the same waker takes no lock (tokio's `Notified`
//! and `Acquire` do the same under their waiters' lock).
//!
//! The loom models `a_task_waker_updated_while_granted_is_never_lost` and
//! `a_granted_task_future_dropped_passes_the_grant_on` (`tests/loom_async.rs`)
//! check it with a thread and a task on one list.

use std::task::Waker;

use crate::parker::Unparker;
use crate::sync::{AtomicBool, Ordering, UnsafeCell};
use crate::util::wake_list::{Wake, WakeSource};

/// What wakes a record's owner: a sleeping thread or a waiting task.
pub(crate) enum Sleeper {
    /// A thread asleep in `Waiter::sleep`.
    Thread(Unparker),
    /// A task whose future holds the record, and whether it asks the
    /// unlock that dequeues it to hand it the lock itself (a mutex's task
    /// woken once in vain: `mutex/lock_async.rs`). The flag is written by
    /// the owner before the record is queued and read by wakers under the
    /// list's lock (whose Release/Acquire orders the two); it sits in the
    /// enum's tag padding, so the record stays 64 bytes.
    Task(WakerSlot, AtomicBool),
}

/// The handle a waker takes from a [`Sleeper`] under the list's lock.
pub(crate) enum Wakeup {
    /// Unpark the thread.
    Thread(Unparker),
    /// Wake the task (its waker as it was when the handle was taken).
    Task(Waker),
}

impl Sleeper {
    /// Sets whether a task asks for a hand-off (the `Task` variant's flag);
    /// nothing for a thread. The owner calls it before the record is
    /// queued.
    pub(crate) fn set_asks_handoff(&self, asks: bool) {
        if let Sleeper::Task(_, flag) = self {
            // Relaxed: the push under the list's lock publishes it.
            flag.store(asks, Ordering::Relaxed);
        }
    }

    /// For a task, whether it asks the waker that dequeues it for the lock
    /// itself ([`Sleeper::set_asks_handoff`]); `None` for a thread, which
    /// never asks this way (a woken thread asks through the mutex word's
    /// ASKING while it spins). Read under the list's lock.
    pub(crate) fn task_asks_handoff(&self) -> Option<bool> {
        match self {
            Sleeper::Thread(_) => None,
            // Relaxed: under the list's lock, which the owner's push
            // released after the store.
            Sleeper::Task(_, asks) => Some(asks.load(Ordering::Relaxed)),
        }
    }
}

impl WakeSource for Sleeper {
    type Handle = Wakeup;

    #[inline]
    fn handle(&self) -> Wakeup {
        match self {
            Sleeper::Thread(unparker) => Wakeup::Thread(unparker.clone()),
            // SAFETY: `handle` is called under the lock of the list holding
            // the record (`WakeSource` contract), the lock the slot's owner
            // writes under.
            Sleeper::Task(slot, _) => Wakeup::Task(unsafe { slot.clone_locked() }),
        }
    }
}

impl Wake for Wakeup {
    #[inline]
    fn wake(self) {
        match self {
            Wakeup::Thread(unparker) => unparker.unpark(),
            Wakeup::Task(waker) => waker.wake(),
        }
    }
}

impl Wake for Waker {
    #[inline]
    fn wake(self) {
        Waker::wake(self)
    }
}

impl Sleeper {
    /// A task's sleeper, to be given its real waker before it is queued.
    pub(crate) fn task() -> Self {
        Sleeper::Task(WakerSlot::new(), AtomicBool::new(false))
    }

    /// The task's waker slot; `None` for a thread.
    pub(crate) fn slot(&self) -> Option<&WakerSlot> {
        match self {
            Sleeper::Task(slot, _) => Some(slot),
            Sleeper::Thread(_) => None,
        }
    }
}

/// A task's current waker inside its waiter record (module docs: who
/// writes and reads it, under which lock).
///
/// Empty (`None`, nothing to build or drop) until the owner's first store,
/// which comes before the record is queued: a future that takes its lock
/// at once never touches a waker.
pub(crate) struct WakerSlot {
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: the cell is written only by the record's owner, either before the
// record is visible to anyone or under the list's lock, and read by wakers
// only under that lock (module docs); `Waker` is `Send + Sync`.
unsafe impl Sync for WakerSlot {}
// SAFETY: as above.
unsafe impl Send for WakerSlot {}

impl WakerSlot {
    /// An empty slot (filled before the record is queued).
    fn new() -> Self {
        WakerSlot {
            waker: UnsafeCell::new(None),
        }
    }

    /// Whether the stored waker would wake the same task as `waker`. The
    /// owner calls it without a lock: it is the only writer.
    pub(crate) fn will_wake(&self, waker: &Waker) -> bool {
        // SAFETY: only the owner (our caller) writes the cell; concurrent
        // readers (wakers under the lock) only read.
        self.waker
            .with(|w| unsafe { (*w).as_ref().is_some_and(|w| w.will_wake(waker)) })
    }

    /// Stores `waker` unless the slot already wakes the same task.
    ///
    /// # Safety
    /// Called by the record's owner only, and either before the record is
    /// in any list or holding the lock of the list it is in.
    pub(crate) unsafe fn set(&self, waker: &Waker) {
        if !self.will_wake(waker) {
            // SAFETY: the caller contract excludes every other access but
            // the owner's own (no waker reads the slot without the lock).
            self.waker.with_mut(|w| unsafe {
                match &mut *w {
                    Some(old) => old.clone_from(waker),
                    empty => *empty = Some(waker.clone()),
                }
            });
        }
    }

    /// A clone of the stored waker.
    ///
    /// # Safety
    /// The caller holds the lock of the list the record is in.
    ///
    /// # Panics
    /// If the slot is empty: a queued task record always holds a waker
    /// (stored before it was queued).
    unsafe fn clone_locked(&self) -> Waker {
        // SAFETY: the owner writes only under that lock (or before the
        // record was queued), so no write races this read.
        self.waker.with(|w| unsafe {
            (*w).clone()
                .expect("a queued task's record holds its waker")
        })
    }
}
