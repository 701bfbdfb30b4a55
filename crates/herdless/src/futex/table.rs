//! [`FutexTable`]: wait, wake and requeue on 32-bit words.

use std::pin::pin;
use std::ptr::NonNull;
use std::time::Duration;

use super::bucket::{dequeue_waiters, Bucket};
use super::error::{FutexError, RequeueError, WaitError};
use super::waiter::{Waiter, WOKEN};
use crate::deadline::Deadline;
use crate::parker;
use crate::stats::Counter;
use crate::sync::{fence, AtomicU32, Ordering};
use crate::util::wake_list::WakeList;

/// How [`FutexTable::wake`] decides whether to take the bucket lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WakePolicy {
    /// Always take the bucket lock and scan (seed 004's "before").
    AlwaysLock,
    /// Return at once when the bucket's waiter count is zero: one full fence
    /// and one load, no lock (seed 004's "after"; the default).
    WaiterCount,
}

/// A successful wait: a wake (or requeue-wake) dequeued this waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Woken;

/// What a [`FutexTable::cmp_requeue`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requeued {
    /// Waiters of the source word that were woken.
    pub woken: usize,
    /// Waiters moved to wait on the target word.
    pub requeued: usize,
}

/// Event counts of a table (all zero without the `stats` feature).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutexStats {
    /// Calls to `wait`.
    pub waits: u64,
    /// Calls to `wake`/`wake_all` (with `n > 0`).
    pub wakes: u64,
    /// Wakes that returned without taking the bucket lock.
    pub wakes_skipped: u64,
    /// Bucket-lock acquisitions by wakes.
    pub wake_lock_acquisitions: u64,
    /// Threads woken by wakes and requeues.
    pub wakeups: u64,
    /// Waiters moved by requeues.
    pub requeued: u64,
    /// Bucket-lock acquisitions that found the lock held (all operations).
    pub contended_lock_acquisitions: u64,
}

#[derive(Default)]
struct Counters {
    // One event per path: `wakes` is derived (skipped + lock acquisitions),
    // so a skipped wake pays for exactly one count.
    waits: Counter,
    wakes_skipped: Counter,
    wake_lock_acquisitions: Counter,
    wakeups: Counter,
    requeued: Counter,
}

/// The largest bucket count [`FutexTable::with_buckets`] accepts.
pub const MAX_BUCKETS: usize = 1 << 20;

/// An address-keyed table of wait queues; see the [module docs](super).
///
/// Words are identified by address: a word must not be moved or freed while
/// anyone waits on it (Rust's borrow of the `&AtomicU32` guarantees this for
/// the waiter). Any number of tables may exist; waiters and wakers of a word
/// must use the same table.
///
/// A one-shot flag: the waiter sleeps while the word is 0, the setter stores
/// 1 *then* wakes. A wait that finds the word already changed returns
/// [`WaitError::ValueChanged`] without sleeping, so the waiter loops on the
/// word, not on the result.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use herdless::{FutexTable, WaitError, WakePolicy};
///
/// let table = FutexTable::new(WakePolicy::WaiterCount);
/// let flag = AtomicU32::new(0);
/// // Nobody waits: the wake takes no lock and wakes nobody.
/// assert_eq!(table.wake(&flag, 1), 0);
/// // A zero timeout checks the value and never sleeps.
/// assert_eq!(table.wait(&flag, 0, Some(std::time::Duration::ZERO)), Err(WaitError::TimedOut));
///
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         while flag.load(Ordering::Acquire) == 0 {
///             // Ok(Woken) or Err(ValueChanged): either way, look again.
///             let _ = table.wait(&flag, 0, None);
///         }
///     });
///     flag.store(1, Ordering::Release);
///     table.wake_all(&flag);
/// });
/// assert_eq!(table.wait(&flag, 0, None), Err(WaitError::ValueChanged));
/// assert_eq!(table.total_waiters(), 0);
/// ```
pub struct FutexTable {
    buckets: Box<[Bucket]>,
    mask: usize,
    policy: WakePolicy,
    counters: Counters,
}

impl std::fmt::Debug for FutexTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FutexTable")
            .field("buckets", &self.buckets.len())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

fn address(word: &AtomicU32) -> usize {
    word as *const AtomicU32 as usize
}

fn default_buckets() -> usize {
    if cfg!(loom) {
        return 4;
    }
    // The kernel's sizing: 256 buckets per CPU, rounded up to a power of two.
    let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
    (256 * cpus).next_power_of_two().min(MAX_BUCKETS)
}

impl FutexTable {
    /// A table with the default bucket count (256 per CPU).
    pub fn new(policy: WakePolicy) -> Self {
        Self::build(policy, default_buckets())
    }

    /// A table with `buckets` buckets: a power of two in `1..=MAX_BUCKETS`.
    pub fn with_buckets(policy: WakePolicy, buckets: usize) -> Result<Self, FutexError> {
        if !buckets.is_power_of_two() || buckets > MAX_BUCKETS {
            return Err(FutexError::BucketCount {
                requested: buckets,
                max: MAX_BUCKETS,
            });
        }
        Ok(Self::build(policy, buckets))
    }

    fn build(policy: WakePolicy, buckets: usize) -> Self {
        FutexTable {
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
            mask: buckets - 1,
            policy,
            counters: Counters::default(),
        }
    }

    /// The process-wide table (policy [`WakePolicy::WaiterCount`]) that
    /// herdless's own [`Mutex`](crate::Mutex) and [`Condvar`](crate::Condvar)
    /// use.
    #[cfg(not(loom))]
    pub fn global() -> &'static FutexTable {
        static GLOBAL: std::sync::OnceLock<FutexTable> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(|| FutexTable::new(WakePolicy::WaiterCount))
    }

    /// The process-wide table (loom build: one per model execution).
    #[cfg(loom)]
    pub fn global() -> &'static FutexTable {
        loom::lazy_static! {
            static ref GLOBAL: FutexTable = FutexTable::new(WakePolicy::WaiterCount);
        }
        &GLOBAL
    }

    /// The wake policy chosen at construction.
    pub fn policy(&self) -> WakePolicy {
        self.policy
    }

    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    #[cfg(not(loom))]
    fn index(&self, key: usize) -> usize {
        // Fibonacci hashing of the address; the high bits are the well mixed ones.
        let hash = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (hash >> 32) as usize & self.mask
    }

    /// Under loom the bucket must be a function of the model, not of where
    /// the allocator put a word this execution: use the word's offset bits
    /// (allocations are 16-byte aligned), so neighbouring words in one
    /// allocation land in fixed buckets.
    #[cfg(loom)]
    fn index(&self, key: usize) -> usize {
        (key >> 2) & self.mask
    }

    /// The bucket `word` hashes to (diagnostics and tests).
    pub fn bucket_of(&self, word: &AtomicU32) -> usize {
        self.index(address(word))
    }

    /// Sleeps while `*word == expected`, until a wake dequeues this thread or
    /// `timeout` elapses.
    ///
    /// `None` and `Duration::MAX` wait without a deadline; a zero timeout
    /// checks the value and returns [`WaitError::TimedOut`] without sleeping.
    pub fn wait(
        &self,
        word: &AtomicU32,
        expected: u32,
        timeout: Option<Duration>,
    ) -> Result<Woken, WaitError> {
        self.counters.waits.add(1);
        let key = address(word);
        let index = self.index(key);
        let bucket = &self.buckets[index];

        // Announce, then fence (A): pairs with fence (B) in `wake`.
        bucket.announce(1);
        fence(Ordering::SeqCst);

        let mut queue = bucket.queue.lock();
        // Relaxed suffices: the fences order this load against the waker's
        // store (lock-free wake), and the bucket lock does when the waker
        // locks.
        if word.load(Ordering::Relaxed) != expected {
            drop(queue);
            bucket.withdraw(1);
            return Err(WaitError::ValueChanged);
        }
        if timeout == Some(Duration::ZERO) {
            drop(queue);
            bucket.withdraw(1);
            return Err(WaitError::TimedOut);
        }
        let deadline = Deadline::after(timeout);

        parker::with_current(|parker| {
            let waiter = pin!(Waiter::new(key, index, parker.unparker()));
            let node = NonNull::from(&*waiter);
            // SAFETY: the record is pinned on this stack frame and is not
            // freed before it has left every list: we return only after a
            // waker removed it (state WOKEN, its last touch) or after we
            // removed it ourselves under its bucket lock (`cancel`).
            unsafe { queue.push_back(node) };
            drop(queue);

            loop {
                // Acquire pairs with the Release in `publish_woken`.
                if waiter.state.load(Ordering::Acquire) == WOKEN {
                    return Ok(Woken);
                }
                parker.park_deadline(deadline);
                if waiter.state.load(Ordering::Acquire) != WOKEN && deadline.has_passed() {
                    return self.cancel(&waiter);
                }
            }
        })
    }

    /// Removes a timed-out waiter, unless a wake got to it first.
    fn cancel(&self, waiter: &Waiter) -> Result<Woken, WaitError> {
        loop {
            // The record may move to another bucket (requeue) until we hold
            // the lock of the bucket it is on; re-check under the lock.
            // Relaxed: the lock acquisition orders the re-check after the
            // requeue's store, which was made under this same lock.
            let index = waiter.bucket.load(Ordering::Relaxed);
            let bucket = &self.buckets[index];
            let mut queue = bucket.queue.lock();
            if waiter.bucket.load(Ordering::Relaxed) != index {
                continue;
            }
            // The wake wins a tie (contract 5): it has dequeued us and
            // withdrawn us from the count already.
            if waiter.state.load(Ordering::Acquire) == WOKEN {
                return Ok(Woken);
            }
            // SAFETY: the record is in this bucket's list (not woken, and
            // `bucket` is current under the lock we hold).
            unsafe { queue.remove(NonNull::from(waiter)) };
            drop(queue);
            bucket.withdraw(1);
            return Err(WaitError::TimedOut);
        }
    }

    /// Wakes up to `n` threads waiting on `word`, oldest first, and returns
    /// how many it woke. `n == 0` wakes nobody.
    ///
    /// Store the new value of the word *before* calling `wake`: the ordering
    /// argument in the module docs relies on it.
    pub fn wake(&self, word: &AtomicU32, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let key = address(word);
        let bucket = &self.buckets[self.index(key)];
        if self.policy == WakePolicy::WaiterCount {
            // Fence (B): pairs with fence (A) in `wait`; orders the caller's
            // store to the word before our read of the count.
            fence(Ordering::SeqCst);
            if bucket.waiters.load(Ordering::Relaxed) == 0 {
                self.counters.wakes_skipped.add(1);
                return 0;
            }
        }
        self.counters.wake_lock_acquisitions.add(1);
        let mut wake_list = WakeList::new();
        let mut queue = bucket.queue.lock();
        let woken = dequeue_waiters(&mut queue, bucket, key, n, &mut wake_list);
        drop(queue);
        wake_list.wake_all();
        self.counters.wakeups.add(woken as u64);
        woken
    }

    /// Wakes every thread waiting on `word`.
    pub fn wake_all(&self, word: &AtomicU32) -> usize {
        self.wake(word, usize::MAX)
    }

    /// If `*from == expected`, wakes up to `nr_wake` waiters of `from` and
    /// moves up to `nr_requeue` of the rest to wait on `to`, in FIFO order.
    ///
    /// The comparison is made under the bucket locks, so no waiter can queue
    /// on `from` between the check and the move. A requeued waiter keeps
    /// sleeping until a wake on `to` dequeues it, and then reports
    /// [`Woken`]. Moves nobody and returns an error if the value differs or
    /// if `from` and `to` are the same word.
    pub fn cmp_requeue(
        &self,
        from: &AtomicU32,
        to: &AtomicU32,
        expected: u32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<Requeued, RequeueError> {
        self.cmp_requeue_to(from, address(to), expected, nr_wake, nr_requeue)
    }

    /// `cmp_requeue` with the target given by address only: the target word
    /// is never read, so it need not be borrowed (the condvar requeues onto
    /// a mutex it only knows the address of).
    pub(crate) fn cmp_requeue_to(
        &self,
        from: &AtomicU32,
        to_key: usize,
        expected: u32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<Requeued, RequeueError> {
        let from_key = address(from);
        if from_key == to_key {
            return Err(RequeueError::SameWord);
        }
        let from_index = self.index(from_key);
        let to_index = self.index(to_key);
        let target = &self.buckets[to_index];

        // Contract 2: raise the target's count before anyone moves, and
        // fence, so that a lock-free wake on `to` running concurrently
        // cannot see "nobody" while a waiter is in flight between lists: it
        // either sees this pending count and serialises with us on the
        // target lock, or its fence (B) precedes ours and it ran before the
        // requeue began.
        target.announce(1);
        fence(Ordering::SeqCst);
        let mut wake_list = WakeList::new();
        let result = self.requeue_locked(
            from,
            from_index,
            to_key,
            to_index,
            expected,
            nr_wake,
            nr_requeue,
            &mut wake_list,
        );
        target.withdraw(1);
        wake_list.wake_all();
        if let Ok(done) = result {
            self.counters.wakeups.add(done.woken as u64);
            self.counters.requeued.add(done.requeued as u64);
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn requeue_locked(
        &self,
        from: &AtomicU32,
        from_index: usize,
        to_key: usize,
        to_index: usize,
        expected: u32,
        nr_wake: usize,
        nr_requeue: usize,
        wake_list: &mut WakeList,
    ) -> Result<Requeued, RequeueError> {
        let from_key = address(from);
        let source = &self.buckets[from_index];
        let target = &self.buckets[to_index];
        // Lock order: lower bucket index first.
        let (mut from_queue, mut to_queue) = if from_index == to_index {
            (source.queue.lock(), None)
        } else if from_index < to_index {
            let f = source.queue.lock();
            (f, Some(target.queue.lock()))
        } else {
            let t = target.queue.lock();
            (source.queue.lock(), Some(t))
        };

        let found = from.load(Ordering::Relaxed);
        if found != expected {
            return Err(RequeueError::ValueMismatch { expected, found });
        }
        let woken = dequeue_waiters(&mut from_queue, source, from_key, nr_wake, wake_list);

        let mut requeued = 0;
        let mut cursor = from_queue.front();
        while let Some(node) = cursor {
            if requeued == nr_requeue {
                break;
            }
            // SAFETY: `node` is in the locked source list: live, links ours.
            cursor = unsafe { from_queue.next(node) };
            // SAFETY: as above.
            let waiter = unsafe { node.as_ref() };
            if waiter.key.load(Ordering::Relaxed) != from_key {
                continue;
            }
            waiter.key.store(to_key, Ordering::Relaxed);
            if let Some(to_queue) = to_queue.as_mut() {
                // Count on the target before leaving the source, so the
                // waiter is never counted nowhere.
                target.announce(1);
                // SAFETY: `node` is in the source list; it goes into the
                // target list whose lock we also hold.
                unsafe {
                    from_queue.remove(node);
                    to_queue.push_back(node);
                }
                source.withdraw(1);
                // Written under both locks; a cancelling waiter re-reads it
                // under the lock it took.
                waiter.bucket.store(to_index, Ordering::Relaxed);
            }
            requeued += 1;
        }
        Ok(Requeued { woken, requeued })
    }

    /// The waiter count of the bucket that `word` hashes to (it includes
    /// waiters of other words in the same bucket).
    pub fn waiters(&self, word: &AtomicU32) -> usize {
        self.buckets[self.index(address(word))]
            .waiters
            .load(Ordering::Relaxed)
    }

    /// Threads queued on `word` right now, counted under its bucket lock.
    ///
    /// Unlike [`waiters`](Self::waiters), which counts every thread that has
    /// announced itself on the bucket (including one still on its way to the
    /// value check), this counts only waiters that a wake would find.
    pub fn queued(&self, word: &AtomicU32) -> usize {
        let key = address(word);
        let queue = self.buckets[self.index(key)].queue.lock();
        let mut count = 0;
        let mut cursor = queue.front();
        while let Some(node) = cursor {
            // SAFETY: `node` is in the locked list: live, links ours.
            let waiter = unsafe { node.as_ref() };
            if waiter.key.load(Ordering::Relaxed) == key {
                count += 1;
            }
            // SAFETY: as above.
            cursor = unsafe { queue.next(node) };
        }
        count
    }

    /// The sum of every bucket's waiter count: zero when nobody waits and no
    /// operation is in flight.
    pub fn total_waiters(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| b.waiters.load(Ordering::Relaxed))
            .sum()
    }

    /// Event counts since construction (zeros without the `stats` feature).
    pub fn stats(&self) -> FutexStats {
        let c = &self.counters;
        FutexStats {
            waits: c.waits.sum(),
            wakes: c.wakes_skipped.sum() + c.wake_lock_acquisitions.sum(),
            wakes_skipped: c.wakes_skipped.sum(),
            wake_lock_acquisitions: c.wake_lock_acquisitions.sum(),
            wakeups: c.wakeups.sum(),
            requeued: c.requeued.sum(),
            contended_lock_acquisitions: self
                .buckets
                .iter()
                .map(|b| b.queue.contended_acquisitions())
                .sum(),
        }
    }
}
