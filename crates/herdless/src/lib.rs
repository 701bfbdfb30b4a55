//! # herdless
//!
//! Synchronization for Linux threads and async tasks that never wakes a
//! herd, never wakes a waiter while holding a lock, and never takes a lock
//! when nobody waits: mutexes, condition variables, reader-writer locks,
//! wait queues, a channel and an epoll-like poller, on one futex table;
//! threads and tasks wait in the same FIFO queues.
//!
//! # Which type do I use?
//!
//! | you would reach for | to | use |
//! |---|---|---|
//! | `std::sync::Mutex`, `parking_lot::Mutex` | protect data, one thread at a time | [`Mutex`] (`lock_api` guards, `Send`; `try_lock_for`, `unlock_fair`, `bump`) |
//! | `tokio::sync::Mutex`, `async_lock::Mutex` | the same from async tasks, or from tasks and threads on one lock | [`Mutex`] with [`MutexAsyncExt`] (`lock_async`; the threads' queue, the same guard) |
//! | `std::sync::Condvar`, `parking_lot::Condvar` | sleep until a condition on mutex-protected data holds | [`Condvar`] (no spurious wakeups; exact `notify_one`/`notify_all` results; `notify_all` moves waiters onto the mutex instead of waking them all) |
//! | `std::sync::RwLock`, `parking_lot::RwLock` | many readers or one writer | [`RwLock`], also named [`RwSem`] (FIFO among sleepers, upgradable reads, `downgrade`, timed, fair unlock) |
//! | `tokio::sync::RwLock`, `async_lock::RwLock` | the same from async tasks, or from tasks and threads on one lock | [`RwSem`] with [`RwSemAsyncExt`] (`read_async`, `write_async`, `upgradable_read_async`, `upgrade_async`; the threads' queue) |
//! | `parking_lot_core::park`/`unpark`, a raw `futex(2)` | build your own primitive on a 32-bit word | [`FutexTable`] (`wait`, `wake`, `cmp_requeue` on any `AtomicU32`) |
//! | `std::thread::park`, `crossbeam_utils::sync::Parker` | put one thread to sleep and wake it from another | [`parker::Parker`], [`parker::Unparker`] |
//! | `event_listener::Event`, `tokio::sync::Notify`, Linux's `wait_queue_head_t` | wait for a condition you check yourself, from a thread or a task; wake one or all | [`WaitQueue`] (exclusive waiters with pass-on; poller callbacks; [`wait_event_async`](WaitQueue::wait_event_async), [`wait_event_exclusive_async`](WaitQueue::wait_event_exclusive_async), [`wait_unlocked_async`](WaitQueue::wait_unlocked_async): the async condition wait) |
//! | `crossbeam_channel`, `std::sync::mpsc` with many receivers, `flume`, `async-channel` | a queue read by several threads or tasks | [`Channel`] (each item wakes one reader, thread or task; `recv_async`, `send_async`) |
//! | `mio::Poll`, `epoll(7)`, `eventfd(2)` | wait for readiness on many sources at once | [`EventPoll`] (`wait`, `wait_async`), [`EventFd`], the [`Pollable`] trait |
//! | Firecracker's example page-fault handlers, the `userfaultfd` crate | serve a snapshot's memory lazily | the `herdless-pager` crate and its `herdless-uffd` binary |
//!
//! The locks are [`lock_api`] 0.5 types (the version parking_lot 0.13
//! uses; lock_api 0.4's guards, parking_lot 0.12's, are other types), named
//! as std and parking_lot name theirs: [`Mutex`], [`MutexGuard`],
//! [`MappedMutexGuard`], [`RwLock`], [`RwLockReadGuard`],
//! [`RwLockWriteGuard`], [`RwLockUpgradableReadGuard`],
//! [`MappedRwLockReadGuard`], [`MappedRwLockWriteGuard`].
//!
//! Async: the futures need only `core::task::Waker` (no runtime). A task
//! waits in the same FIFO queue as the threads, is woken once per grant,
//! never spins in `poll`, and a future dropped after it was granted passes
//! the grant on; guards are the blocking calls' `Send` guards, held across
//! `.await` as they are.
//!
//! What herdless does not offer: owned (`Arc`) guards; async timeouts
//! (drop the future); an async `Condvar` (a task's condition wait is
//! [`WaitQueue::wait_unlocked_async`] with the guard); poisoning (a panic while holding a lock releases it, as in
//! parking_lot); recursive or reentrant locks; locks shared between
//! processes; platforms other than Linux.
//!
//! # Examples
//! A condition variable: a consumer sleeps until the list is not empty.
//! ```
//! use std::sync::Arc;
//! use herdless::{Condvar, Mutex};
//!
//! let pair = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
//! let consumer = {
//!     let pair = pair.clone();
//!     std::thread::spawn(move || {
//!         let (jobs, ready) = &*pair;
//!         let mut jobs = jobs.lock();
//!         while jobs.is_empty() {
//!             ready.wait(&mut jobs);
//!         }
//!         jobs.pop()
//!     })
//! };
//! pair.0.lock().push(42);
//! pair.1.notify_one(); // true if a waiter was there to be woken
//! assert_eq!(consumer.join().unwrap(), Some(42));
//! ```
//!
//! A thread and a task on one lock (any runtime; here `futures`'
//! `block_on`):
//! ```
//! use std::sync::Arc;
//! use herdless::*;
//!
//! let table = Arc::new(Mutex::new(Vec::new()));
//! let held = table.lock(); // a thread holds the lock
//! let task = {
//!     let table = table.clone();
//!     async move {
//!         let mut rows = table.lock_async().await; // queued behind the thread
//!         rows.push("from a task");
//!         rows.len() // the guard is Send: it may live across an .await
//!     }
//! };
//! let runner = std::thread::spawn(move || futures::executor::block_on(task));
//! while table.waiters() == 0 {
//!     std::thread::yield_now(); // until the task waits in the lock's queue
//! }
//! drop(held); // the thread's unlock wakes the task
//! assert_eq!(runner.join().unwrap(), 1);
//! assert_eq!(*table.lock(), ["from a task"]);
//! ```
//!
//! A channel read by several threads; each item wakes one reader, and
//! `recv` fails once the channel is closed and drained:
//! ```
//! let jobs = herdless::Channel::new();
//! let total = std::thread::scope(|s| {
//!     let readers: Vec<_> = (0..2)
//!         .map(|_| s.spawn(|| std::iter::from_fn(|| jobs.recv().ok()).sum::<i32>()))
//!         .collect();
//!     for job in 1..=10 {
//!         jobs.send(job).unwrap();
//!     }
//!     jobs.close();
//!     readers.into_iter().map(|r| r.join().unwrap()).sum::<i32>()
//! });
//! assert_eq!(total, 55);
//! ```
//!
//! # How it is built
//! Every waiting thread or task is one waiter record (`util::waiter`,
//! internal: a thread's `Unparker` or a task's `Waker` slot) with one
//! grant, queued on one of three heads: the
//! [`futex`] table's buckets (Mutex, Condvar), a [`rwsem`]'s wait list, or
//! a [`wait_queue`] (Channel, EventPoll, EventFd). Wakers collect the
//! threads to wake under the head's lock and wake them after dropping it.
//! Each component re-creates one Linux kernel scalability patch (the
//! "seeds") and keeps the patch's "before" selectable through
//! [`variants`], so the `herdless-lab` crate measures both in one run;
//! `docs/ARCHITECTURE.md` maps the layers, the seeds and the ordering
//! contracts the code cites.
//!
//! Counters of what happened (wakeups, wasted wakeups, lock acquisitions
//! skipped, ...) are compiled in with the `stats` feature ([`stats`]).

#![warn(missing_docs)]

pub(crate) mod deadline;
pub(crate) mod lock;
pub(crate) mod sync;
pub(crate) mod sys;
pub(crate) mod util;

pub mod channel;
pub mod condvar;
pub mod futex;
pub mod mutex;
pub mod parker;
pub mod poll;
pub mod rwsem;
pub mod stats;
pub mod variants;
pub mod wait_queue;

pub use channel::Channel;
#[cfg(not(loom))]
pub use condvar::Condvar;
pub use condvar::RawCondvar;
pub use futex::{FutexTable, RequeueError, Requeued, WaitError, Woken};
pub use mutex::RawMutex;
#[cfg(not(loom))]
pub use mutex::{MappedMutexGuard, Mutex, MutexAsyncExt, MutexExt, MutexGuard};
pub use poll::{EventFd, EventPoll, Pollable};
pub use rwsem::RawRwSem;
#[cfg(not(loom))]
pub use rwsem::{
    MappedRwLockReadGuard, MappedRwLockWriteGuard, RwLock, RwLockReadGuard,
    RwLockUpgradableReadGuard, RwLockWriteGuard,
};
#[cfg(not(loom))]
pub use rwsem::{
    RwSem, RwSemAsyncExt, RwSemExt, RwSemMappedReadGuard, RwSemMappedWriteGuard, RwSemReadGuard,
    RwSemUpgradableReadGuard, RwSemWriteGuard,
};
pub use wait_queue::{Attempt, WaitQueue};
