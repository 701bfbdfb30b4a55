//! One entry of a wait queue (kernel: `wait_queue_entry`): a sleeping thread
//! or a poller's callback.

use std::marker::PhantomPinned;
use std::ptr::NonNull;

use crate::parker::Unparker;
use crate::sync::{Arc, AtomicBool, AtomicU32, Ordering};
use crate::util::linked_list::{Link, Pointers};
use crate::util::wake_list::Wake;

/// Still queued (or never woken).
pub(super) const WAITING: u32 = 0;
/// Dequeued by a waker; the waker no longer touches the record.
const WOKEN: u32 = 1;

/// A poller's wake function: runs on the waker's thread, after the queue
/// lock is dropped.
pub(super) type Callback = Arc<dyn Fn() + Send + Sync>;

/// The entry's wake function (kernel: `wait_queue_entry::func`).
#[derive(Clone)]
pub(super) enum Notify {
    /// Unpark the waiting thread (kernel: `autoremove_wake_function`): the
    /// waker also dequeues the entry and marks it `WOKEN`.
    Thread(Unparker),
    /// Call a poller's function (kernel: `ep_poll_callback`): the entry
    /// stays queued until its registration is dropped.
    Callback(Callback),
}

impl Wake for Notify {
    fn wake(self) {
        match self {
            Notify::Thread(unparker) => unparker.unpark(),
            Notify::Callback(callback) => callback(),
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

/// The record of one waiter, pinned for as long as it is queued: on the
/// waiting thread's stack for a thread, in a `Box` for a registration.
///
/// Invariants (who writes what, under which lock):
/// - `pointers`: only under the queue lock. The record is in the queue's
///   `exclusive` list if `exclusive`, in its `shared` list otherwise.
/// - `exclusive`, `notify`, `latch`: immutable (the latch's flag is not:
///   see [`Latch`]). Wakers clone `notify` under the lock.
/// - `state` (thread entries only; a callback entry stays `WAITING`):
///   set to `WAITING` by the owning thread under the queue lock when it
///   (re)queues the record; set to `WOKEN` by the waker that dequeued it,
///   under the lock, with Release, as its very last access.
pub(super) struct Entry {
    pointers: Pointers<Entry>,
    pub(super) exclusive: bool,
    pub(super) notify: Notify,
    pub(super) state: AtomicU32,
    /// Callback entries registered latched (immutable; see [`Latch`]).
    pub(super) latch: Option<EntryLatch>,
    _pinned: PhantomPinned,
}

impl Entry {
    pub(super) fn new(exclusive: bool, notify: Notify) -> Self {
        Entry {
            pointers: Pointers::new(),
            exclusive,
            notify,
            state: AtomicU32::new(WAITING),
            latch: None,
            _pinned: PhantomPinned,
        }
    }

    /// A callback entry that wakes latch while `busy()` holds.
    pub(super) fn latched(callback: Callback, latch: EntryLatch) -> Self {
        Entry {
            latch: Some(latch),
            ..Entry::new(false, Notify::Callback(callback))
        }
    }

    /// Whether a waker has dequeued this (thread) entry.
    pub(super) fn is_woken(&self) -> bool {
        // Acquire pairs with the Release store in `publish_woken`: the
        // waker's unlinking, and every change the waking thread made before
        // calling `wake_up` (the event), happen-before what we do next.
        self.state.load(Ordering::Acquire) == WOKEN
    }

    /// Whether this entry is a poller's callback (never dequeued by wakes).
    pub(super) fn is_callback(&self) -> bool {
        matches!(self.notify, Notify::Callback(_))
    }
}

/// Tells a dequeued thread entry it was woken. This is the last access to
/// the record: the waiter may return and free it as soon as it sees `WOKEN`.
/// The caller has already cloned the entry's `notify` (DESIGN contract 3).
pub(super) fn publish_woken(node: NonNull<Entry>) {
    // SAFETY: the record is live until its owner observes WOKEN, which can
    // only happen after this store.
    let state = unsafe { &node.as_ref().state };
    // Release pairs with the Acquire in `Entry::is_woken`.
    state.store(WOKEN, Ordering::Release);
}

// SAFETY: the only non-atomic mutable state is `pointers`, read and written
// only under the lock of the queue holding the record; `notify` is
// immutable and itself `Send + Sync` (an `Arc`'d parker or callback).
unsafe impl Sync for Entry {}
// SAFETY: as above; the record is never moved while linked (it is pinned).
unsafe impl Send for Entry {}

// SAFETY: returns the `pointers` field of the node, used by one list only.
unsafe impl Link for Entry {
    unsafe fn pointers(target: NonNull<Self>) -> NonNull<Pointers<Self>> {
        // SAFETY: `target` is live (trait contract); addr_of_mut makes no
        // reference to the whole node, which other threads may be reading.
        unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*target.as_ptr()).pointers)) }
    }
}
