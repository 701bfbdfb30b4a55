//! [`WaitQueue`]: the queue head, wakes, and the lists under its lock.

use std::ptr::NonNull;
use std::task::Waker;

use super::entry::{Entry, Latch, NotifyHandle};
use crate::lock::SpinParkLock;
use crate::stats::{Counter, SlowCounter};
use crate::sync::{fence, AtomicUsize, Ordering};
use crate::util::linked_list::LinkedList;
use crate::util::waiter::{Waiter, GRANTED};
use crate::util::wake_list::{WakeList, WakeSource};

pub(crate) use crate::variants::WakeMode;

/// Event counts of a queue (all zero without the `stats` feature).
///
/// # Examples
/// ```
/// use herdless::wait_queue::{WaitQueue, WaitQueueStats};
///
/// let queue = WaitQueue::new();
/// let poller = queue.register(|| {});
/// queue.wake_up(1);
/// queue.wake_up(1);
/// drop(poller);
/// queue.wake_up(1); // nobody waits: no wakeup
/// let stats = queue.stats();
/// if herdless::stats::ENABLED {
///     assert_eq!((stats.wakeups, stats.wasted_wakeups, stats.passed_on), (2, 0, 0));
/// } else {
///     assert_eq!(stats, WaitQueueStats::default());
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitQueueStats {
    /// Entries woken: threads unparked and callbacks called, by wakes and
    /// pass-ons.
    pub wakeups: u64,
    /// Woken threads whose next look found nothing to do and went back to
    /// sleep (thundering-herd losers, or a wakeup someone else consumed).
    pub wasted_wakeups: u64,
    /// Wakeups handed on by a chosen exclusive waiter that left without
    /// consuming (ARCHITECTURE contract 6).
    pub passed_on: u64,
    /// Queue-lock acquisitions that found the lock held.
    pub contended_lock_acquisitions: u64,
}

/// `wakeups` and `wasted` are counted on the wake and wait paths the lab
/// times; a pass-on only happens on a slow path.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) wakeups: Counter,
    pub(super) wasted: Counter,
    pub(super) passed_on: SlowCounter,
}

/// The two lists under the queue lock. Non-exclusive entries (sleeping
/// pollers, callbacks) are all woken by every wake, exclusive ones from the
/// front, so keeping them apart makes `wake_up(n)` cost O(non-exclusive + n)
/// instead of a scan past every exclusive sleeper (the kernel gets the same
/// effect by adding non-exclusive entries at the head).
pub(super) struct Lists {
    shared: LinkedList<Entry>,
    exclusive: LinkedList<Entry>,
}

impl Lists {
    fn of(&mut self, entry: &Entry) -> &mut LinkedList<Entry> {
        if entry.exclusive() {
            &mut self.exclusive
        } else {
            &mut self.shared
        }
    }
}

/// A wait-queue head (kernel: `wait_queue_head_t`); see the
/// [module docs](super) for the contract and the ordering argument.
///
/// # Examples
/// A blocking stack of jobs: a consumer waits *exclusively* and its closure
/// tests and takes in one step, under the lock that guards the state; the
/// producer changes the state, then wakes one consumer per job. A callback
/// registered with [`register`](WaitQueue::register) (it must be
/// `'static`) is a non-exclusive entry: every wake calls it.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use herdless::{Attempt, Mutex, WaitQueue};
///
/// let jobs = Mutex::new(Vec::new());
/// let queue = WaitQueue::new();
/// let wakes_seen = Arc::new(AtomicUsize::new(0));
/// let poller = queue.register({
///     let wakes_seen = wakes_seen.clone();
///     move || {
///         wakes_seen.fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// let take = || {
///     queue.wait_event_exclusive(|| match jobs.lock().pop() {
///         Some(job) => Attempt::Done(job),
///         None => Attempt::Wait,
///     })
/// };
/// let total = std::thread::scope(|s| {
///     let consumers: Vec<_> = (0..2).map(|_| s.spawn(take)).collect();
///     for job in [10, 20] {
///         jobs.lock().push(job); // the state first,
///         queue.wake_up(1); // then the wake
///     }
///     consumers.into_iter().map(|c| c.join().unwrap()).sum::<i32>()
/// });
/// assert_eq!(total, 30);
/// assert_eq!(wakes_seen.load(Ordering::Relaxed), 2, "the callback saw both wakes");
/// drop(poller);
/// assert!(queue.is_empty());
/// ```
///
/// See [`wait_event`](WaitQueue::wait_event) for a waiter that only tests
/// a condition, and [`wait_event_async`](WaitQueue::wait_event_async) and
/// its siblings for tasks.
pub struct WaitQueue {
    lists: SpinParkLock<Lists>,
    /// Entries in `lists` (threads and callbacks): raised under the lock by
    /// `enqueue` *before* its fence (E), lowered under the lock by whoever
    /// removes an entry. A wake that reads 0 after its fence (W) skips the
    /// lock: the module docs, "Nobody waits: the lock-free check".
    entries: AtomicUsize,
    mode: WakeMode,
    /// Test hook (see [`WaitQueue::debug_give_up_when_chosen`]).
    give_up_when_chosen: AtomicUsize,
    pub(super) counters: Counters,
}

impl Default for WaitQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WaitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitQueue")
            .field("mode", &self.mode)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl WaitQueue {
    /// An empty queue in [`WakeMode::Exclusive`].
    ///
    /// # Examples
    /// ```
    /// use herdless::{variants::WakeMode, WaitQueue};
    ///
    /// let queue = WaitQueue::new();
    /// assert!(queue.is_empty());
    /// assert_eq!(queue.mode(), WakeMode::Exclusive);
    /// ```
    pub fn new() -> Self {
        Self::with_mode(WakeMode::Exclusive)
    }

    /// An empty queue with the given wake mode.
    ///
    /// # Examples
    /// Two exclusive sleepers and a wake for one unit of work: the default
    /// wakes one, the seed's "before" the whole herd:
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use herdless::{variants::WakeMode, Attempt, WaitQueue};
    ///
    /// for (mode, woken) in [(WakeMode::Exclusive, 1), (WakeMode::WakeAll, 2)] {
    ///     let (queue, closed) = (WaitQueue::with_mode(mode), AtomicBool::new(false));
    ///     let wait = || {
    ///         queue.wait_event_exclusive(|| match closed.load(Ordering::Acquire) {
    ///             true => Attempt::Done(()),
    ///             false => Attempt::Wait,
    ///         })
    ///     };
    ///     std::thread::scope(|s| {
    ///         s.spawn(wait);
    ///         s.spawn(wait);
    ///         while queue.len() < 2 {
    ///             std::thread::yield_now(); // until both are queued
    ///         }
    ///         assert_eq!(queue.wake_up(1), woken);
    ///         closed.store(true, Ordering::Release);
    ///         queue.wake_up_all();
    ///     });
    /// }
    /// ```
    pub fn with_mode(mode: WakeMode) -> Self {
        WaitQueue {
            lists: SpinParkLock::new(Lists {
                shared: LinkedList::new(),
                exclusive: LinkedList::new(),
            }),
            entries: AtomicUsize::new(0),
            mode,
            give_up_when_chosen: AtomicUsize::new(0),
            counters: Counters::default(),
        }
    }

    /// The wake mode chosen at construction.
    ///
    /// # Examples
    /// ```
    /// use herdless::{variants::WakeMode, WaitQueue};
    ///
    /// assert_eq!(WaitQueue::with_mode(WakeMode::WakeAll).mode(), WakeMode::WakeAll);
    /// ```
    pub fn mode(&self) -> WakeMode {
        self.mode
    }

    /// Wakes every non-exclusive entry and at most `nr_exclusive` exclusive
    /// ones, oldest first; returns how many entries it woke (threads and
    /// callbacks).
    ///
    /// `wake_up(0)` wakes only the non-exclusive entries (sleeping pollers
    /// and callbacks). In [`WakeMode::WakeAll`] every entry is non-exclusive,
    /// so any `wake_up` wakes everybody.
    ///
    /// Change the state the waiters test *before* calling `wake_up`; the
    /// lost-wakeup argument in the module docs relies on it. Threads are
    /// unparked and callbacks run after the queue lock is dropped.
    ///
    /// # Examples
    /// One token per wake, taken by one of two sleeping consumers:
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use herdless::{Attempt, WaitQueue};
    ///
    /// let (queue, tokens) = (WaitQueue::new(), AtomicUsize::new(0));
    /// assert_eq!(queue.wake_up(1), 0, "nobody waits: no lock taken");
    /// let take = || {
    ///     queue.wait_event_exclusive(|| {
    ///         match tokens.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)) {
    ///             Ok(_) => Attempt::Done(()),
    ///             Err(_) => Attempt::Wait,
    ///         }
    ///     })
    /// };
    /// std::thread::scope(|s| {
    ///     s.spawn(take);
    ///     s.spawn(take);
    ///     while queue.len() < 2 {
    ///         std::thread::yield_now(); // until both are queued
    ///     }
    ///     tokens.fetch_add(1, Ordering::Release); // the state first,
    ///     assert_eq!(queue.wake_up(1), 1, "one sleeper, not both"); // then the wake
    ///     tokens.fetch_add(1, Ordering::Release);
    ///     queue.wake_up(1);
    /// });
    /// assert_eq!(tokens.load(Ordering::Relaxed), 0, "each consumer took one");
    /// ```
    ///
    /// `wake_up(0)` calls the non-exclusive entries only:
    /// ```
    /// let queue = herdless::WaitQueue::new();
    /// let (_a, _b) = (queue.register(|| {}), queue.register(|| {}));
    /// assert_eq!(queue.wake_up(0), 2);
    /// ```
    pub fn wake_up(&self, nr_exclusive: usize) -> usize {
        // (W) pairs with (E) in `enqueue`: the caller's state change is
        // before this fence, the waiter's look after its own (module docs).
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fences.
        if self.entries.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let mut wake_list = WakeList::new();
        let mut lists = self.lists.lock();
        let mut woken = 0;
        let mut cursor = lists.shared.front();
        while let Some(node) = cursor {
            // SAFETY: `node` is in the locked `shared` list, so it is live
            // and its links are ours. We read `next` before the record can
            // be freed (once granted below).
            cursor = unsafe { lists.shared.next(node) };
            // SAFETY: as above; shared access to immutable fields only.
            let entry = unsafe { node.as_ref() };
            if let Some(latch) = entry.latch() {
                // Relaxed: `latched` is only touched under this lock.
                if latch.latch.latched.load(Ordering::Relaxed) {
                    continue;
                }
                if (latch.busy)() {
                    // The callback would find its work queued: latch the
                    // entry until `rearm` (module docs, "Latched callback
                    // entries"). It stops counting in `entries`.
                    latch.latch.latched.store(true, Ordering::Relaxed);
                    self.count_out(1);
                    continue;
                }
            }
            if entry.is_callback() {
                // Stays queued until its registration is dropped.
                // Under the queue lock (`WakeSource` contract).
                wake_list.push(entry.wake_handle().handle());
            } else {
                // SAFETY: `node` is in `shared`.
                unsafe { lists.shared.remove(node) };
                self.count_out(1);
                // SAFETY: just unlinked under the queue lock we hold; a
                // queued thread entry has not been granted.
                unsafe { Waiter::grant(node, GRANTED, &mut wake_list) };
            }
            woken += 1;
        }
        let taken = dequeue_exclusive(&mut lists, nr_exclusive, &mut wake_list);
        self.count_out(taken);
        woken += taken;
        drop(lists);
        wake_list.wake_all();
        self.counters.wakeups.add(woken as u64);
        woken
    }

    /// Wakes every entry; returns how many.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use herdless::WaitQueue;
    ///
    /// let (queue, done) = (WaitQueue::new(), AtomicBool::new(false));
    /// let _poller = queue.register(|| {});
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         s.spawn(|| queue.wait_event(|| done.load(Ordering::Acquire)));
    ///     }
    ///     while queue.len() < 3 {
    ///         std::thread::yield_now(); // the poller and the two sleepers
    ///     }
    ///     done.store(true, Ordering::Release);
    ///     queue.wake_up_all();
    /// });
    /// assert_eq!(queue.len(), 1, "the sleepers left; the poller stays registered");
    /// ```
    pub fn wake_up_all(&self) -> usize {
        self.wake_up(usize::MAX)
    }

    /// Hands a wakeup on: wakes the oldest exclusive waiter, if any, and
    /// nobody else (non-exclusive entries were woken by the wake being
    /// passed on, and those queued since have looked at the state
    /// themselves).
    pub(super) fn pass_on(&self) {
        self.counters.passed_on.add(1);
        let mut wake_list = WakeList::new();
        let mut lists = self.lists.lock();
        let woken = dequeue_exclusive(&mut lists, 1, &mut wake_list);
        self.count_out(woken);
        drop(lists);
        wake_list.wake_all();
        self.counters.wakeups.add(woken as u64);
    }

    /// Number of queued entries (sleeping threads and registered callbacks).
    /// A snapshot, for diagnostics and tests.
    ///
    /// # Examples
    /// ```
    /// let queue = herdless::WaitQueue::new();
    /// let poller = queue.register(|| {});
    /// assert_eq!(queue.len(), 1);
    /// drop(poller);
    /// assert_eq!(queue.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        let lists = self.lists.lock();
        lists.shared.len() + lists.exclusive.len()
    }

    /// Whether no entry is queued (a snapshot).
    ///
    /// # Examples
    /// ```
    /// let queue = herdless::WaitQueue::new();
    /// assert!(queue.is_empty());
    /// let _poller = queue.register(|| {});
    /// assert!(!queue.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Event counts since construction (zeros without the `stats` feature).
    ///
    /// # Examples
    /// ```
    /// let queue = herdless::WaitQueue::new();
    /// queue.wake_up_all(); // nobody waits
    /// assert_eq!(queue.stats().wakeups, 0);
    /// ```
    /// See [`WaitQueueStats`] for a queue with an entry.
    pub fn stats(&self) -> WaitQueueStats {
        WaitQueueStats {
            wakeups: self.counters.wakeups.sum(),
            wasted_wakeups: self.counters.wasted.sum(),
            passed_on: self.counters.passed_on.sum(),
            contended_lock_acquisitions: self.lists.contended_acquisitions(),
        }
    }

    /// Test hook: the next `times` exclusive waiters *with a finite timeout*
    /// that find themselves chosen by a wake give up at once, as if their
    /// timeout had fired right after the wake picked them and they left
    /// without looking: they report a timeout and pass the wakeup on. It
    /// widens the "chosen, then timed out" window to the whole wait. Not
    /// part of the API.
    #[doc(hidden)]
    pub fn debug_give_up_when_chosen(&self, times: usize) {
        // Relaxed: a test knob that only selects a branch; it orders nothing.
        self.give_up_when_chosen.store(times, Ordering::Relaxed);
    }

    /// Consumes one unit of the test hook, if armed.
    pub(super) fn take_give_up_hook(&self) -> bool {
        // Relaxed: as in `debug_give_up_when_chosen`.
        self.give_up_when_chosen
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    /// `n` entries left the lists (caller holds the queue lock, so a plain
    /// load and store cannot lose an update: every writer holds it).
    /// Relaxed: a wake's lock-free check only needs "not zero while an
    /// entry is queued", and a decrement comes after the removal.
    fn count_out(&self, n: usize) {
        if n > 0 {
            let now = self.entries.load(Ordering::Relaxed);
            self.entries.store(now - n, Ordering::Relaxed);
        }
    }

    /// Queues `node` at the tail of its list, in state `WAITING`.
    ///
    /// # Safety
    /// `node` is live, pinned and in no list, and stays live until it has
    /// been removed again: by [`WaitQueue::remove`], or by a wake (thread
    /// entries) followed by its owner observing the grant.
    pub(super) unsafe fn enqueue(&self, node: NonNull<Entry>) {
        // SAFETY: live (caller contract); shared access.
        let entry = unsafe { node.as_ref() };
        let mut lists = self.lists.lock();
        entry.rearm();
        // SAFETY: caller contract.
        unsafe { lists.of(entry).push_back(node) };
        // Under the lock, as in `count_out`; Relaxed: ordered by (E).
        let n = self.entries.load(Ordering::Relaxed);
        self.entries.store(n + 1, Ordering::Relaxed);
        drop(lists);
        // (E) pairs with (W) in `wake_up`: the caller looks at the state
        // (its condition, a poller's readiness) only after this fence.
        fence(Ordering::SeqCst);
    }

    /// Stores `waker` in a queued task entry's slot, unless a wake has
    /// dequeued the entry; returns whether it is still queued. Under the
    /// queue lock, where wakes take the slot's waker and grant
    /// (`util::sleeper`: the slot's rules).
    ///
    /// # Safety
    /// `entry` is a task entry the caller owns, queued on this queue by
    /// [`WaitQueue::enqueue`] and not removed since by
    /// [`WaitQueue::remove`].
    pub(super) unsafe fn set_task_waker(&self, entry: &Entry, waker: &Waker) -> bool {
        let _lists = self.lists.lock();
        if entry.is_granted() {
            return false;
        }
        let slot = entry.task_slot().expect("a task's entry");
        // SAFETY: we hold the lock of the list the entry is in, and the
        // caller owns the entry.
        unsafe { slot.set(waker) };
        true
    }

    /// Takes `entry` off the queue, unless a wake already did. Returns
    /// `true` if a wake dequeued it (it is then granted: the wake wins).
    ///
    /// # Safety
    /// `entry` was queued on this queue by [`WaitQueue::enqueue`] and not
    /// removed since by this function.
    pub(super) unsafe fn remove(&self, entry: &Entry) -> bool {
        let mut lists = self.lists.lock();
        // A wake dequeues thread entries under this lock, so under it the
        // answer is final (ARCHITECTURE contract 4).
        let woken = entry.cancel_locked(|| {
            // SAFETY: queued here and not granted, so still in its list
            // (caller contract), which we hold locked.
            unsafe { lists.of(entry).remove(NonNull::from(entry)) };
            match entry.latch() {
                // Latched: not counted any more. Unlatch it so that a late
                // `rearm` (the item outliving its registration) counts
                // nothing. Relaxed: under the lock.
                Some(latch) if latch.latch.latched.load(Ordering::Relaxed) => {
                    latch.latch.latched.store(false, Ordering::Relaxed);
                }
                _ => self.count_out(1),
            }
        });
        woken.is_some()
    }

    /// Re-arms the latched entry `latch` belongs to (the poller took its
    /// item off the ready list): the next wake calls its callback again.
    /// Call it *before* looking at the source: (R) is the waiter side of
    /// the lock-free check, as (E) is for `enqueue`. Always takes the lock:
    /// that orders it against a wake deciding to latch (module docs).
    /// A latch whose entry was removed is not latched: nothing happens.
    pub(crate) fn rearm(&self, latch: &Latch) {
        let lists = self.lists.lock();
        // Relaxed: under the lock.
        if latch.latched.load(Ordering::Relaxed) {
            latch.latched.store(false, Ordering::Relaxed);
            let n = self.entries.load(Ordering::Relaxed);
            self.entries.store(n + 1, Ordering::Relaxed);
        }
        drop(lists);
        // (R) pairs with (W) in `wake_up`, as (E) does.
        fence(Ordering::SeqCst);
    }
}

/// Dequeues up to `max` exclusive thread entries, oldest first, onto
/// `wake_list`; returns how many. The caller wakes the list after dropping
/// the lock.
fn dequeue_exclusive(
    lists: &mut Lists,
    max: usize,
    wake_list: &mut WakeList<NotifyHandle>,
) -> usize {
    let mut taken = 0;
    while taken < max {
        let Some(node) = lists.exclusive.pop_front() else {
            break;
        };
        // SAFETY: just unlinked under the queue lock the caller holds; a
        // queued thread entry has not been granted (contract 3: the grant
        // takes the handle, then publishes, as its last touch).
        unsafe { Waiter::grant(node, GRANTED, wake_list) };
        taken += 1;
    }
    taken
}
