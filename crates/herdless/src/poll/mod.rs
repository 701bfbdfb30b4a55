//! Event multiplexing: [`EventPoll`], an epoll-like poller with three
//! ready-list variants, [`EventFd`], and the [`Pollable`] trait every event
//! source implements (seed 003, "epoll: use rwlock in order to reduce
//! ep_poll_callback() contention"; kernel: `fs/eventpoll.c`,
//! `fs/eventfd.c`).
//!
//! # Contract
//! - A source implements [`Pollable`]: it reports its readiness and wakes
//!   its [`WaitQueue`](crate::wait_queue::WaitQueue) after every change.
//!   [`EventPoll::add`] hangs a non-exclusive callback entry there
//!   (`WaitQueue::register_owned`), then checks the source's readiness, so
//!   no event falls between the two.
//! - A callback queues the source's item on the *ready list* (at most once:
//!   a per-item `queued` flag) and wakes one waiter of the poller if one may
//!   sleep, plus any outer poller watching this one.
//! - [`EventPoll::wait`] harvests the ready list (one harvester at a time):
//!   each item is unqueued, then its source is read; ready items are
//!   reported, [`Trigger::Level`] ones re-queued, [`Trigger::OneShot`] ones
//!   disabled until [`EventPoll::modify`]. With nothing to report it sleeps
//!   as an *exclusive* waiter on the poller's own wait queue, under that
//!   queue's consumption contract: a waiter chosen by a wake harvests (also
//!   when its timeout fires after the choice) or passes the wakeup on.
//!   A harvest that leaves events queued wakes the next waiter (cascade).
//! - Pollers nest ([`EventPoll`] is `Pollable`), up to [`MAX_NESTING`]
//!   levels; a loop is refused with [`PollError::Loop`].
//! - The poller keeps each watched source alive until it is deleted or the
//!   poller dropped. Dropping the poller removes every entry from the
//!   sources' queues; a callback already running holds the poller's shared
//!   core alive, so sources and pollers may be dropped in any order.
//!
//! # Ready lists ([`ReadyListKind`])
//! `Spinlock` (before the seed: one lock for callbacks and the harvester),
//! `RwLockSwap` (the seed: callbacks share a read lock and append with an
//! atomic exchange; the harvester takes the write lock; events arriving
//! during a harvest go to an overflow list) and `LockFree` (beyond the
//! seed: MPSC list, no reader-writer lock, so no priority inversion). The
//! ordering arguments are next to the atomics, in `item.rs`,
//! `ready_list/*.rs` and `core.rs`; the loom models are in
//! `tests/loom_poll.rs`.
//!
//! Kernel history this module was tested against (`tests/poll.rs`): lost
//! wakeups on the ctl path, several wakeups hitting one waiter while others
//! slept (selftest epoll60), a waiter that timed out after being chosen
//! swallowing the event (epoll61), no wakeup for events arriving during a
//! harvest, no cascade when events remained.

mod core;
mod epoll;
mod error;
mod eventfd;
mod interest;
mod item;
mod nest;
mod pollable;
mod ready_list;

pub use epoll::{EventPoll, EventPollStats};
pub use error::{EventFdError, PollError};
pub use eventfd::EventFd;
pub use interest::{Event, Readiness, Trigger};
pub use nest::MAX_NESTING;
pub use pollable::Pollable;
pub use ready_list::ReadyListKind;
