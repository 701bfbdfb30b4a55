//! One entry of a wait queue (kernel: `wait_queue_entry`): a sleeping thread
//! or a poller's callback.

use crate::sync::{Arc, AtomicBool};
use crate::util::sleeper::{Sleeper, Wakeup};
use crate::util::waiter::Waiter;
use crate::util::wake_list::{Wake, WakeSource};

/// A poller's wake function: runs on the waker's thread, after the queue
/// lock is dropped.
pub(super) type Callback = Arc<dyn Fn() + Send + Sync>;

/// The entry's wake function (kernel: `wait_queue_entry::func`).
pub(super) enum Notify {
    /// Unpark the waiting thread or wake the waiting task (kernel:
    /// `autoremove_wake_function`): the waker also dequeues the entry and
    /// grants it (`Waiter::grant`). A task's waker slot is updated by its
    /// future under the queue lock (`util::sleeper`).
    Sleeper(Sleeper),
    /// Call a poller's function (kernel: `ep_poll_callback`): the entry
    /// stays queued until its registration is dropped.
    Callback(Callback),
}

/// What a wake takes from an entry under the queue lock and runs after
/// dropping it.
pub(super) enum NotifyHandle {
    /// Unpark the thread, or wake the task.
    Sleeper(Wakeup),
    /// Call the poller's function.
    Callback(Callback),
}

impl WakeSource for Notify {
    type Handle = NotifyHandle;

    #[inline]
    fn handle(&self) -> NotifyHandle {
        match self {
            Notify::Sleeper(sleeper) => NotifyHandle::Sleeper(sleeper.handle()),
            Notify::Callback(callback) => NotifyHandle::Callback(callback.clone()),
        }
    }
}

impl Wake for NotifyHandle {
    fn wake(self) {
        match self {
            NotifyHandle::Sleeper(wakeup) => wakeup.wake(),
            NotifyHandle::Callback(callback) => callback(),
        }
    }
}

/// The latch of a callback entry registered with
/// [`WaitQueue::register_owned_latched`](super::WaitQueue::register_owned_latched):
/// shared by the entry and the poller's item, so that the item can re-arm
/// the entry without reaching the (possibly freed) registration.
///
/// `latched` is read and written only under the lock of the queue the entry
/// is on (Relaxed: the lock orders it). Set by a wake that found the entry's
/// `busy` predicate true (the poller's item already queued: calling the
/// callback would do nothing); cleared by
/// [`WaitQueue::rearm`](super::WaitQueue::rearm) and by the entry's
/// removal. A latched entry is
/// not counted in the queue's `entries`, so a wake that finds only latched
/// entries skips the lock (module docs, "Latched callback entries").
pub(crate) struct Latch {
    pub(super) latched: AtomicBool,
}

impl Latch {
    pub(crate) fn new() -> Self {
        Latch {
            latched: AtomicBool::new(false),
        }
    }
}

/// A latched entry's half: its shared latch and the predicate a wake calls,
/// under the queue lock, to decide whether to latch instead of calling.
pub(super) struct EntryLatch {
    pub(super) latch: Arc<Latch>,
    pub(super) busy: Box<dyn Fn() -> bool + Send + Sync>,
}

/// An entry's part of the shared waiter record.
///
/// Immutable once built (the latch's flag is not: see [`Latch`]).
pub(super) struct EntryKind {
    /// Exclusive entries are in the queue's `exclusive` list and woken at
    /// most `nr_exclusive` at a time; the others in its `shared` list.
    pub(super) exclusive: bool,
    /// Callback entries registered latched.
    pub(super) latch: Option<EntryLatch>,
}

/// The record of one waiter (the shared
/// [`util::waiter::Waiter`](crate::util::waiter::Waiter)), pinned for as
/// long as it is queued: on the waiting thread's stack for a thread, in a
/// `Box` for a registration. Its links are touched only under the queue
/// lock. A thread entry is granted by the wake that dequeues it; a callback
/// entry is never granted (it stays `WAITING` and queued until its
/// registration is dropped).
pub(super) type Entry = Waiter<EntryKind, Notify>;

/// A thread or task entry, or a callback entry.
pub(super) fn entry(exclusive: bool, notify: Notify) -> Entry {
    Waiter::new(
        notify,
        EntryKind {
            exclusive,
            latch: None,
        },
    )
}

/// A callback entry that wakes latch while `busy()` holds.
pub(super) fn latched_entry(callback: Callback, latch: EntryLatch) -> Entry {
    Waiter::new(
        Notify::Callback(callback),
        EntryKind {
            exclusive: false,
            latch: Some(latch),
        },
    )
}

impl Waiter<EntryKind, Notify> {
    /// Whether the entry waits exclusively.
    pub(super) fn exclusive(&self) -> bool {
        self.payload().exclusive
    }

    /// The entry's latch, if it was registered latched.
    pub(super) fn latch(&self) -> Option<&EntryLatch> {
        self.payload().latch.as_ref()
    }

    /// Whether this entry is a poller's callback (never dequeued by wakes).
    pub(super) fn is_callback(&self) -> bool {
        matches!(self.wake_handle(), Notify::Callback(_))
    }

    /// The waiting task's waker slot; `None` for a thread or a callback.
    pub(super) fn task_slot(&self) -> Option<&crate::util::sleeper::WakerSlot> {
        match self.wake_handle() {
            Notify::Sleeper(sleeper) => sleeper.slot(),
            Notify::Callback(_) => None,
        }
    }
}
