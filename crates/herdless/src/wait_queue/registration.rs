//! Long-lived callback entries: how a poller (a later `EventPoll`) hangs on
//! an event source's queue (kernel: `poll_wait` / `ep_ptable_queue_proc`
//! adding an entry whose function is `ep_poll_callback`).

use std::pin::Pin;
use std::ptr::NonNull;

use super::entry::{entry, latched_entry, Callback, Entry, EntryLatch, Latch, Notify};
use super::queue::WaitQueue;
use crate::sync::Arc;

/// Wraps a closure into the shared callback handle wakers clone.
fn callback(f: impl Fn() + Send + Sync + 'static) -> Callback {
    #[cfg(not(loom))]
    {
        Arc::new(f)
    }
    // loom's `Arc` cannot unsize a closure itself; it adopts a std `Arc`.
    #[cfg(loom)]
    {
        let f: std::sync::Arc<dyn Fn() + Send + Sync> = std::sync::Arc::new(f);
        Arc::from_std(f)
    }
}

fn queued_entry(queue: &WaitQueue, f: impl Fn() + Send + Sync + 'static) -> Pin<Box<Entry>> {
    // Pollers are never exclusive (ARCHITECTURE contract 6).
    enqueue_boxed(queue, entry(false, Notify::Callback(callback(f))))
}

fn enqueue_boxed(queue: &WaitQueue, entry: Entry) -> Pin<Box<Entry>> {
    let entry = Box::pin(entry);
    // SAFETY: the entry is pinned in its box, in no list, and the
    // registration that owns the box removes it from `queue` (and from no
    // other) before dropping the box.
    unsafe { queue.enqueue(NonNull::from(&*entry)) };
    entry
}

impl WaitQueue {
    /// Adds a non-exclusive entry whose wake function is `callback`; it is
    /// removed when the returned [`Registration`] is dropped.
    ///
    /// Every [`wake_up`](Self::wake_up) while the entry is queued calls
    /// `callback` once, on the waking thread, after the queue lock has been
    /// dropped: it may lock, wake other queues, or even this one. Keep it
    /// short: the waker is blocked while it runs. A wake that collected the
    /// entry just before the registration was dropped may still call it
    /// once afterwards (ARCHITECTURE contract 3: expect spurious calls).
    ///
    /// Registering does not look at the source: as with any waiter, the
    /// poller registers first, then checks readiness itself, so that no
    /// event falls between the two.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use herdless::WaitQueue;
    ///
    /// let queue = WaitQueue::new();
    /// let calls = Arc::new(AtomicUsize::new(0));
    /// let registration = queue.register({
    ///     let calls = calls.clone();
    ///     move || {
    ///         calls.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// });
    /// assert_eq!(queue.wake_up(0), 1, "a poller is never exclusive: every wake calls it");
    /// drop(registration);
    /// assert_eq!(queue.wake_up(0), 0);
    /// assert_eq!(calls.load(Ordering::Relaxed), 1);
    /// ```
    pub fn register(&self, callback: impl Fn() + Send + Sync + 'static) -> Registration<'_> {
        Registration {
            queue: self,
            entry: queued_entry(self, callback),
        }
    }

    /// [`register`](Self::register) for a long-lived poller that must not
    /// borrow the source: the registration holds `owner` (for example an
    /// event source shared with `Arc`) and the queue `queue(&owner)`, and
    /// stays valid as long as it is kept. This is what an interest list
    /// stores next to the source it watches.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use herdless::WaitQueue;
    ///
    /// struct Source {
    ///     readers: WaitQueue,
    /// }
    /// let source = Arc::new(Source { readers: WaitQueue::new() });
    /// let calls = Arc::new(AtomicUsize::new(0));
    /// let registration = WaitQueue::register_owned(source.clone(), |s| &s.readers, {
    ///     let calls = calls.clone();
    ///     move || {
    ///         calls.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// });
    /// source.readers.wake_up(1);
    /// assert_eq!(calls.load(Ordering::Relaxed), 1);
    /// assert_eq!(Arc::strong_count(&source), 2, "the registration keeps the source");
    /// drop(registration);
    /// assert!(source.readers.is_empty());
    /// ```
    pub fn register_owned<T>(
        owner: Arc<T>,
        queue: fn(&T) -> &WaitQueue,
        callback: impl Fn() + Send + Sync + 'static,
    ) -> OwnedRegistration<T>
    where
        T: ?Sized + Send + Sync,
    {
        let wait_queue = queue(&*owner);
        let entry = queued_entry(wait_queue, callback);
        OwnedRegistration {
            queue: NonNull::from(wait_queue),
            entry,
            owner,
        }
    }

    /// [`register_owned`](Self::register_owned) with a latch (crate
    /// internal: the poller's `LockFree` items). A wake that finds `busy()`
    /// true, under the queue lock, does not call `callback` but *latches*
    /// the entry: later wakes skip it without calling anything, and skip
    /// the queue lock altogether if no other entry is counted, until
    /// [`rearm`](Self::rearm)`(&latch)`. `busy` must stay true until the
    /// owner of `latch` calls `rearm` (the poller: "the item is queued",
    /// which only the harvest that then re-arms ends), and must be cheap:
    /// it runs under the queue lock.
    pub(crate) fn register_owned_latched<T>(
        owner: Arc<T>,
        queue: fn(&T) -> &WaitQueue,
        callback_fn: impl Fn() + Send + Sync + 'static,
        latch: Arc<Latch>,
        busy: impl Fn() -> bool + Send + Sync + 'static,
    ) -> OwnedRegistration<T>
    where
        T: ?Sized + Send + Sync,
    {
        let wait_queue = queue(&*owner);
        let entry = latched_entry(
            callback(callback_fn),
            EntryLatch {
                latch,
                busy: Box::new(busy),
            },
        );
        let entry = enqueue_boxed(wait_queue, entry);
        OwnedRegistration {
            queue: NonNull::from(wait_queue),
            entry,
            owner,
        }
    }
}

/// A callback entry on a borrowed [`WaitQueue`]; removed on drop.
///
/// # Examples
/// ```
/// let queue = herdless::WaitQueue::new();
/// let registration = queue.register(|| {});
/// assert_eq!(queue.len(), 1);
/// drop(registration);
/// assert!(queue.is_empty());
/// ```
pub struct Registration<'a> {
    queue: &'a WaitQueue,
    entry: Pin<Box<Entry>>,
}

impl Registration<'_> {
    /// The queue this entry is on.
    ///
    /// # Examples
    /// ```
    /// let queue = herdless::WaitQueue::new();
    /// let registration = queue.register(|| {});
    /// assert!(std::ptr::eq(registration.queue(), &queue));
    /// ```
    pub fn queue(&self) -> &WaitQueue {
        self.queue
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        // SAFETY: queued on `self.queue` at construction, removed only here;
        // the box is freed after this, when the field is dropped.
        let woken = unsafe { self.queue.remove(&self.entry) };
        debug_assert!(!woken, "callback entries are never dequeued by wakes");
    }
}

impl std::fmt::Debug for Registration<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration").finish_non_exhaustive()
    }
}

/// A callback entry on the queue of a shared owner; removed on drop. See
/// [`WaitQueue::register_owned`].
///
/// It is `Send` and `Sync` when the owner is, and `'static` when the owner
/// type is: it can be stored anywhere, as an interest list stores it.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use herdless::{wait_queue::OwnedRegistration, WaitQueue};
///
/// let owner = Arc::new(WaitQueue::new());
/// let registration: OwnedRegistration<WaitQueue> = WaitQueue::register_owned(owner, |q| q, || {});
/// let kept = std::thread::spawn(move || registration).join().unwrap();
/// assert_eq!(kept.queue().len(), 1);
/// ```
pub struct OwnedRegistration<T: ?Sized> {
    /// Points into `*owner` (or to a queue that outlives it): valid while
    /// `owner` is held, see `queue()`.
    queue: NonNull<WaitQueue>,
    /// Removed from the queue in `drop`, then freed before `owner` (field
    /// order).
    entry: Pin<Box<Entry>>,
    owner: Arc<T>,
}

// SAFETY: the raw pointer is a shared reference to a `WaitQueue` (which is
// `Sync`) kept alive by `owner`; everything else is `Send`/`Sync` on its
// own when `T` is.
unsafe impl<T: ?Sized + Send + Sync> Send for OwnedRegistration<T> {}
// SAFETY: as above; `&OwnedRegistration` only gives out `&WaitQueue`, `&T`.
unsafe impl<T: ?Sized + Send + Sync> Sync for OwnedRegistration<T> {}

impl<T: ?Sized> OwnedRegistration<T> {
    /// The queue this entry is on.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use herdless::WaitQueue;
    ///
    /// let registration = WaitQueue::register_owned(Arc::new(WaitQueue::new()), |q| q, || {});
    /// assert_eq!(registration.queue().wake_up(0), 1);
    /// ```
    pub fn queue(&self) -> &WaitQueue {
        // SAFETY: the pointer came from `queue(&owner)`, a reference whose
        // lifetime is that of a shared borrow of `*owner`. `owner` is an
        // `Arc` we hold, so `*owner` is alive, never moved, and (with our
        // clone alive) never mutably borrowed: the borrow it came from could
        // have lasted until now, so the reference is still valid.
        unsafe { self.queue.as_ref() }
    }

    /// The owner this registration keeps alive.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use herdless::WaitQueue;
    ///
    /// let owner = Arc::new(WaitQueue::new());
    /// let registration = WaitQueue::register_owned(owner.clone(), |q| q, || {});
    /// assert!(Arc::ptr_eq(registration.owner(), &owner));
    /// ```
    pub fn owner(&self) -> &Arc<T> {
        &self.owner
    }
}

impl<T: ?Sized> Drop for OwnedRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: queued on this queue at construction, removed only here,
        // while `owner` still keeps the queue alive.
        let woken = unsafe { self.queue().remove(&self.entry) };
        debug_assert!(!woken, "callback entries are never dequeued by wakes");
    }
}

impl<T: ?Sized> std::fmt::Debug for OwnedRegistration<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedRegistration").finish_non_exhaustive()
    }
}
