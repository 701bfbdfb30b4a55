//! An address-keyed futex table in user space, with the waiter-count fast
//! path of seed 004 ("futex: Avoid taking hb lock if nothing to wakeup").
//!
//! READ this before changing anything here.
//!
//! # Contract
//! [`FutexTable::wait`] sleeps while a 32-bit word holds an expected value;
//! [`FutexTable::wake`] wakes up to `n` sleepers of a word, in FIFO order;
//! [`FutexTable::cmp_requeue`] wakes some and moves the rest to another word.
//! A wait never returns spuriously: it reports [`Woken`] only if a wake (or
//! requeue) dequeued it, [`WaitError::ValueChanged`] if the word did not hold
//! the expected value, and [`WaitError::TimedOut`] if the timeout fired first.
//! A timeout that fires after a wake dequeued the waiter reports `Woken`: the
//! wake wins, and the wake's count stays true (ARCHITECTURE contract 4).
//!
//! # Layout
//! The table is an array of cache-padded buckets, hashed by the word's
//! address:
//! ```text
//!   Bucket { waiters: AtomicUsize   (own cache line)
//!            queue:   SpinParkLock<FIFO of Waiter records> }
//! ```
//! `waiters` counts every thread that has announced itself on the bucket and
//! not yet left it: it is raised *before* the bucket lock is taken (so a
//! waker cannot miss a waiter that is still spinning for the lock) and
//! lowered by whoever removes the waiter: the waker that dequeues it, the
//! requeue that moves it to another bucket (which raises the target first),
//! or the waiter itself on `ValueChanged` or timeout. It is exact whenever no
//! operation is in flight; the tests check it returns to zero.
//!
//! # Why a wake may skip the lock (policy [`WakePolicy::WaiterCount`](crate::variants::WakePolicy::WaiterCount))
//! Without the lock, the waker needs a different argument that it cannot
//! miss a waiter that is about to sleep. It is the store-buffering litmus
//! test, with a full fence on each side:
//! ```text
//!   waiter (wait)                      waker (user code, then wake)
//!   waiters += 1                       *word = new
//!   fence(SeqCst)   (A) <-- pairs --> fence(SeqCst)   (B)
//!   lock(bucket)                       if waiters == 0: return
//!   if *word != expected: bail         lock(bucket), dequeue, unlock
//!   enqueue; unlock; sleep             wake the dequeued threads
//! ```
//! With X = waiters and Y = *word, both initially 0:
//! ```text
//!   w[X]=1; fence; r[Y]          w[Y]=1; fence; r[X]
//! ```
//! The two SeqCst fences are ordered one way or the other. If (A) comes
//! first, the waker's read of X sees the increment (or a later value, and
//! later values keep it: only removals of *other* waiters follow), so it
//! takes the lock and finds the waiter queued, or sees it as "not yet
//! queued" and then the waiter, who locks after it, reads the new word. If
//! (B) comes first, the waiter's read of Y sees the new value and it bails
//! out. `x == 0 && y == 0` is impossible: the waiter cannot both miss the
//! change of the word and be missed by the wake. The loom test
//! `store_buffering_waiter_and_waker_never_both_miss` checks exactly this.
//!
//! With [`WakePolicy::AlwaysLock`](crate::variants::WakePolicy::AlwaysLock) (the seed's "before"), wake takes the
//! bucket lock every time and the lock alone serialises the two sides.
//!
//! # Wakeups after unlock
//! Waiters are dequeued under the bucket lock onto a wake list; the threads
//! are woken after the lock is dropped (see `util::wake_list`). Granting a
//! waiter (the shared `util::waiter` record) is the last touch of its
//! record (ARCHITECTURE contracts 3 and 4).
//!
//! # One mechanism, several users
//! `park.rs` is the table's core, in parking_lot_core's shape: park with a
//! `validate` under the bucket lock and a `before_sleep` after queueing;
//! unpark one (with a `decide` under the lock choosing the grant's token),
//! unpark all, and requeue (with a `validate` choosing how many to wake and
//! move). [`FutexTable::wait`], [`FutexTable::wake`] and
//! [`FutexTable::cmp_requeue`] are those with trivial callbacks;
//! [`Mutex`](crate::Mutex) and [`Condvar`](crate::Condvar) use the
//! callbacks (ARCHITECTURE contract 5). `park_async.rs` is the same park
//! for a task, whose record is pinned in its future: a bucket's list holds
//! threads and tasks in one FIFO (the async Mutex, contract 13).

mod bucket;
mod calls;
mod error;
mod park;
mod park_async;
mod table;
mod waiter;

pub(crate) use calls::{ParkHow, Parked, RequeueOp, Unparked};
pub use error::{FutexError, RequeueError, WaitError};
pub(crate) use park_async::TaskPark;
pub(crate) use table::address;
pub use table::{FutexStats, FutexTable, Requeued, Woken};
