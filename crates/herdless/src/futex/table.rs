//! [`FutexTable`]: wait, wake and requeue on 32-bit words.

use std::time::Duration;

use super::bucket::{Bucket, KeyedCursor};
use super::calls::{ParkHow, Parked, RequeueOp};
use super::error::{FutexError, RequeueError, WaitError};
use crate::deadline::Deadline;
use crate::stats::CounterSet;
use crate::sync::{AtomicU32, Ordering};

pub(crate) use crate::variants::WakePolicy;

/// A successful wait: a wake (or requeue-wake) dequeued this waiter.
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// use herdless::{FutexTable, Woken};
///
/// let (table, word) = (FutexTable::new(), AtomicU32::new(0));
/// std::thread::scope(|s| {
///     let waiter = s.spawn(|| table.wait(&word, 0, None));
///     while table.queued(&word) == 0 {
///         std::thread::yield_now(); // until the waiter sleeps
///     }
///     assert_eq!(table.wake(&word, 1), 1);
///     assert_eq!(waiter.join().unwrap(), Ok(Woken));
/// });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Woken;

/// What a [`FutexTable::cmp_requeue`] did (see there for an example).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requeued {
    /// Waiters of the source word that were woken.
    pub woken: usize,
    /// Waiters moved to wait on the target word.
    pub requeued: usize,
}

/// Event counts of a table (all zero without the `stats` feature).
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// use herdless::FutexTable;
///
/// let (table, word) = (FutexTable::new(), AtomicU32::new(0));
/// table.wake(&word, 1); // nobody waits: no lock taken
/// let stats = table.stats();
/// if herdless::stats::ENABLED {
///     assert_eq!((stats.wakes, stats.wakes_skipped, stats.wakeups), (1, 1, 0));
/// } else {
///     assert_eq!(stats, herdless::futex::FutexStats::default());
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutexStats {
    /// Calls to `wait`.
    pub waits: u64,
    /// Wake operations: `wake`/`wake_all` (with `n > 0`) and the unlock /
    /// notify paths of the locks built on the table that wake without
    /// moving anyone. Requeues are counted in `requeues`, not here.
    pub wakes: u64,
    /// Wakes that returned without taking the bucket lock.
    pub wakes_skipped: u64,
    /// Bucket-lock acquisitions by wakes.
    pub wake_lock_acquisitions: u64,
    /// Threads woken by wakes and requeues.
    pub wakeups: u64,
    /// Requeue operations that went ahead: `cmp_requeue` calls whose word
    /// still held the expected value, and Condvar notifications that found
    /// a waiter (each wakes it, or moves it onto the mutex it will need).
    /// Each took the bucket locks once. Their woken threads are in
    /// `wakeups`, their moved ones in `requeued`. A `notify_all` that finds
    /// its mutex free on two CPUs counts two: its look at the mutex (which
    /// moves nobody), then the move of its wake cascade.
    pub requeues: u64,
    /// Waiters moved by requeues.
    pub requeued: u64,
    /// Bucket-lock acquisitions that found the lock held (all operations).
    pub contended_lock_acquisitions: u64,
    /// Threads that asked to sleep ahead of the others (a mutex's rare
    /// thread, `mutex/rare_parker.rs`) and were queued first (ahead of the
    /// bucket's sleepers, or into an empty bucket).
    pub parked_ahead: u64,
    /// Threads that asked to sleep ahead and were queued behind others:
    /// the head went ahead itself, was passed already, or is a task.
    pub ahead_refused: u64,
}

/// What the table counts, each an index into [`Counters`] (the last one
/// sizes it). One event per
/// path: `wakes` is derived (skipped + lock acquisitions), so a skipped
/// wake pays for exactly one count.
#[derive(Clone, Copy, Debug)]
pub(super) enum Event {
    Waits,
    WakesSkipped,
    WakeLockAcquisitions,
    Wakeups,
    Requeues,
    Requeued,
    ParkedAhead,
    AheadRefused,
}

/// The table's event counts: side by side in one line per thread
/// (`stats.rs`, `CounterSet`), where eight counters were eight lines.
#[derive(Default)]
pub(super) struct Counters(CounterSet<{ Event::AheadRefused as usize + 1 }>);

impl Counters {
    #[inline]
    pub(super) fn add(&self, event: Event, n: u64) {
        self.0.add(event as usize, n);
    }

    fn sum(&self, event: Event) -> u64 {
        self.0.sum(event as usize)
    }
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
/// use herdless::{FutexTable, WaitError};
///
/// let table = FutexTable::new();
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
    pub(super) buckets: Box<[Bucket]>,
    mask: usize,
    pub(super) policy: WakePolicy,
    pub(super) counters: Counters,
}

impl std::fmt::Debug for FutexTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FutexTable")
            .field("buckets", &self.buckets.len())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

pub(crate) fn address(word: &AtomicU32) -> usize {
    word as *const AtomicU32 as usize
}

impl Default for FutexTable {
    fn default() -> Self {
        Self::new()
    }
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
    /// A table with the default bucket count (256 per CPU) and the
    /// waiter-count fast path ([`WakePolicy::WaiterCount`]). See
    /// [`FutexTable`] for an example.
    pub fn new() -> Self {
        Self::with_policy(WakePolicy::WaiterCount)
    }

    /// A table with the default bucket count and the given wake policy (the
    /// lab compares [`WakePolicy::AlwaysLock`], seed 004's "before").
    ///
    /// ```
    /// use herdless::variants::WakePolicy;
    /// use herdless::FutexTable;
    ///
    /// let before = FutexTable::with_policy(WakePolicy::AlwaysLock);
    /// assert_eq!(before.policy(), WakePolicy::AlwaysLock);
    /// assert_eq!(before.buckets(), FutexTable::new().buckets());
    /// ```
    pub fn with_policy(policy: WakePolicy) -> Self {
        Self::build(policy, default_buckets())
    }

    /// A table with `buckets` buckets: a power of two in `1..=MAX_BUCKETS`
    /// (2^20).
    ///
    /// # Errors
    /// [`FutexError::BucketCount`] when `buckets` is not a power of two or
    /// exceeds `MAX_BUCKETS`.
    ///
    /// # Examples
    /// ```
    /// use herdless::futex::{FutexError, FutexTable};
    /// use herdless::variants::WakePolicy;
    ///
    /// let one = FutexTable::with_buckets(WakePolicy::WaiterCount, 1).unwrap();
    /// assert_eq!(one.buckets(), 1); // every word shares one queue
    /// let err = FutexTable::with_buckets(WakePolicy::WaiterCount, 3).unwrap_err();
    /// assert!(matches!(err, FutexError::BucketCount { requested: 3, .. }));
    /// ```
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
    ///
    /// ```
    /// use herdless::FutexTable;
    ///
    /// assert!(std::ptr::eq(FutexTable::global(), FutexTable::global()));
    /// ```
    #[cfg(not(loom))]
    pub fn global() -> &'static FutexTable {
        static GLOBAL: std::sync::OnceLock<FutexTable> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(FutexTable::new)
    }

    /// The process-wide table (loom build: one per model execution).
    #[cfg(loom)]
    pub fn global() -> &'static FutexTable {
        loom::lazy_static! {
            static ref GLOBAL: FutexTable = FutexTable::new();
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
    pub(super) fn index(&self, key: usize) -> usize {
        // Fibonacci hashing of the address; the high bits are the well mixed ones.
        let hash = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (hash >> 32) as usize & self.mask
    }

    /// Under loom the bucket must be a function of the model, not of where
    /// the allocator put a word this execution: use the word's offset bits
    /// (allocations are 16-byte aligned), so neighbouring words in one
    /// allocation land in fixed buckets.
    #[cfg(loom)]
    pub(super) fn index(&self, key: usize) -> usize {
        (key >> 2) & self.mask
    }

    /// The bucket `word` hashes to (diagnostics and tests), below
    /// [`buckets`](Self::buckets).
    ///
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// let table = herdless::FutexTable::new();
    /// let word = AtomicU32::new(0);
    /// assert!(table.bucket_of(&word) < table.buckets());
    /// ```
    pub fn bucket_of(&self, word: &AtomicU32) -> usize {
        self.index(address(word))
    }

    /// Sleeps while `*word == expected`, until a wake dequeues this thread or
    /// `timeout` elapses.
    ///
    /// `None` and `Duration::MAX` wait without a deadline; a zero timeout
    /// checks the value and returns [`WaitError::TimedOut`] without sleeping.
    /// Returns `Ok(`[`Woken`]`)` when a wake or a requeue-wake dequeued this
    /// thread; callers loop on their word, since the value may have changed
    /// again since (see [`FutexTable`] for that loop).
    ///
    /// # Errors
    /// [`WaitError::ValueChanged`] when `*word != expected` at the check (the
    /// thread did not sleep), [`WaitError::TimedOut`] when `timeout` passed
    /// first.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// use std::time::Duration;
    /// use herdless::{FutexTable, WaitError};
    ///
    /// let (table, word) = (FutexTable::new(), AtomicU32::new(7));
    /// assert_eq!(table.wait(&word, 6, None), Err(WaitError::ValueChanged));
    /// let nobody_wakes = Some(Duration::from_millis(1));
    /// assert_eq!(table.wait(&word, 7, nobody_wakes), Err(WaitError::TimedOut));
    /// ```
    pub fn wait(
        &self,
        word: &AtomicU32,
        expected: u32,
        timeout: Option<Duration>,
    ) -> Result<Woken, WaitError> {
        // Relaxed suffices for the load: the fences order it against the
        // waker's store (lock-free wake), and the bucket lock does when the
        // waker locks.
        let parked = self.park(
            address(word),
            || word.load(Ordering::Relaxed) == expected,
            || {},
            |_, _| {},
            ParkHow {
                try_only: timeout == Some(Duration::ZERO),
                ..ParkHow::until(Deadline::after(timeout))
            },
        );
        match parked {
            Parked::Unparked { .. } => Ok(Woken),
            Parked::Invalid => Err(WaitError::ValueChanged),
            Parked::TimedOut => Err(WaitError::TimedOut),
        }
    }

    /// Wakes up to `n` threads waiting on `word`, oldest first, and returns
    /// how many it woke. `n == 0` wakes nobody.
    ///
    /// Store the new value of the word *before* calling `wake`: the ordering
    /// argument in the module docs relies on it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use herdless::FutexTable;
    ///
    /// let (table, word) = (FutexTable::new(), AtomicU32::new(0));
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         s.spawn(|| {
    ///             while word.load(Ordering::Acquire) == 0 {
    ///                 let _ = table.wait(&word, 0, None);
    ///             }
    ///         });
    ///     }
    ///     while table.queued(&word) < 2 {
    ///         std::thread::yield_now(); // until both sleep
    ///     }
    ///     word.store(1, Ordering::Release); // the new value first
    ///     assert_eq!(table.wake(&word, 1), 1, "the oldest sleeper");
    ///     assert_eq!(table.wake(&word, 5), 1, "only one was left");
    /// });
    /// ```
    pub fn wake(&self, word: &AtomicU32, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        self.unpark(address(word), n)
    }

    /// Wakes every thread waiting on `word`; returns how many it woke (see
    /// [`FutexTable`] for an example).
    pub fn wake_all(&self, word: &AtomicU32) -> usize {
        self.wake(word, usize::MAX)
    }

    /// If `*from == expected`, wakes up to `nr_wake` waiters of `from` and
    /// moves up to `nr_requeue` of the rest to wait on `to`, in FIFO order.
    ///
    /// The comparison is made under the bucket locks, so no waiter can queue
    /// on `from` between the check and the move. A requeued waiter keeps
    /// sleeping until a wake on `to` dequeues it, and then reports
    /// [`Woken`].
    ///
    /// # Errors
    /// Moves nobody and returns [`RequeueError::ValueMismatch`] when
    /// `*from != expected`, [`RequeueError::SameWord`] when `from` and `to`
    /// are the same word.
    ///
    /// # Examples
    /// A condition variable's broadcast: wake one waiter and move the other
    /// onto the lock word, instead of waking both to fight over the lock.
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use herdless::{FutexTable, RequeueError, Requeued};
    ///
    /// let table = FutexTable::new();
    /// let (cond, lock) = (AtomicU32::new(0), AtomicU32::new(0));
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         s.spawn(|| {
    ///             while cond.load(Ordering::Acquire) == 0 {
    ///                 let _ = table.wait(&cond, 0, None);
    ///             }
    ///         });
    ///     }
    ///     while table.queued(&cond) < 2 {
    ///         std::thread::yield_now();
    ///     }
    ///     let err = table.cmp_requeue(&cond, &lock, 5, 1, 1).unwrap_err();
    ///     assert_eq!(err, RequeueError::ValueMismatch { expected: 5, found: 0 });
    ///     cond.store(1, Ordering::Release);
    ///     let done = table.cmp_requeue(&cond, &lock, 1, 1, usize::MAX).unwrap();
    ///     assert_eq!(done, Requeued { woken: 1, requeued: 1 });
    ///     assert_eq!(table.queued(&lock), 1); // sleeps on the lock word now
    ///     assert_eq!(table.wake(&lock, 1), 1);
    /// });
    /// ```
    pub fn cmp_requeue(
        &self,
        from: &AtomicU32,
        to: &AtomicU32,
        expected: u32,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<Requeued, RequeueError> {
        let (from_key, to_key) = (address(from), address(to));
        if from_key == to_key {
            return Err(RequeueError::SameWord);
        }
        let mut found = expected;
        let done = self.unpark_requeue(
            from_key,
            to_key,
            || {
                found = from.load(Ordering::Relaxed);
                (found == expected).then_some(RequeueOp {
                    wake: nr_wake,
                    requeue: nr_requeue,
                })
            },
            |_, _| {},
        );
        done.ok_or(RequeueError::ValueMismatch { expected, found })
    }

    /// The waiter count of the bucket that `word` hashes to (it includes
    /// waiters of other words in the same bucket).
    ///
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// let table = herdless::FutexTable::new();
    /// assert_eq!(table.waiters(&AtomicU32::new(0)), 0);
    /// ```
    pub fn waiters(&self, word: &AtomicU32) -> usize {
        self.buckets[self.index(address(word))]
            .waiters
            .load(Ordering::Relaxed)
    }

    /// Threads queued on `word` right now, counted under its bucket lock.
    ///
    /// Unlike [`waiters`](Self::waiters), which counts every thread that has
    /// announced itself on the bucket (including one still on its way to the
    /// value check), this counts only waiters that a wake would find. See [`wake`](Self::wake)
    /// for an example.
    pub fn queued(&self, word: &AtomicU32) -> usize {
        let key = address(word);
        let mut queue = self.buckets[self.index(key)].queue.lock();
        let mut cursor = KeyedCursor::new(&mut queue, key);
        let mut count = 0;
        while cursor.next().is_some() {
            count += 1;
        }
        count
    }

    /// The sum of every bucket's waiter count: zero when nobody waits and no
    /// operation is in flight (see [`FutexTable`] for an example).
    pub fn total_waiters(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| b.waiters.load(Ordering::Relaxed))
            .sum()
    }

    /// Event counts since construction (zeros without the `stats` feature;
    /// see [`FutexStats`] for an example).
    pub fn stats(&self) -> FutexStats {
        let c = &self.counters;
        FutexStats {
            waits: c.sum(Event::Waits),
            wakes: c.sum(Event::WakesSkipped) + c.sum(Event::WakeLockAcquisitions),
            wakes_skipped: c.sum(Event::WakesSkipped),
            wake_lock_acquisitions: c.sum(Event::WakeLockAcquisitions),
            wakeups: c.sum(Event::Wakeups),
            requeues: c.sum(Event::Requeues),
            requeued: c.sum(Event::Requeued),
            contended_lock_acquisitions: self
                .buckets
                .iter()
                .map(|b| b.queue.contended_acquisitions())
                .sum(),
            parked_ahead: c.sum(Event::ParkedAhead),
            ahead_refused: c.sum(Event::AheadRefused),
        }
    }
}
