//! # herdless
//!
//! User-space wait/wake primitives that never wake a herd, never wake while
//! holding a lock, and never take a lock when nobody waits. Each component
//! re-creates one Linux kernel scalability patch (a "seed") and keeps the
//! seed's "before" behaviour selectable at construction, so the lab
//! (`herdless-lab`) can measure both in one run.
//!
//! | module | seed | what it is |
//! |---|---|---|
//! | [`parker`] | — | one sleeping thread and a handle that wakes it |
//! | [`futex`] | 004 | address-keyed wait/wake with the waiter-count fast path |
//! | [`mutex`], [`condvar`] | 004 + 001 | `lock_api` mutex and a condvar whose `notify_all` requeues |
//! | [`wait_queue`] | 000 + 001 | wait-queue head: exclusive and non-exclusive entries, poller callbacks, pass-on of unused wakeups |
//! | [`channel`] | 000 | blocking multi-reader queue on a wait queue, wake-all or wake-one |
//! | [`rwsem`] | 001 | FIFO reader-writer semaphore, `lock_api` guards, grants woken after unlock |
//! | [`poll`] | 003 | `EventPoll` (epoll) with spinlock, rwlock + swap and lock-free ready lists; `EventFd`; the `Pollable` trait |
//!
//! See `docs/ARCHITECTURE.md` for the layers and the ordering contracts.

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
pub use mutex::{Mutex, MutexGuard};
pub use poll::{EventFd, EventPoll, Pollable};
pub use rwsem::RawRwSem;
#[cfg(not(loom))]
pub use rwsem::{RwSem, RwSemExt};
pub use wait_queue::{Attempt, WaitQueue};
