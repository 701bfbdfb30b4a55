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
//!   sleep, plus the poller's own queue: every outer poller watching this
//!   one and every thread polling it.
//! - [`EventPoll::wait`] harvests the ready list (one harvester at a time):
//!   each item is unqueued, then its source is read; ready items are
//!   reported, [`Trigger::Level`] ones re-queued, [`Trigger::OneShot`] ones
//!   disabled until [`EventPoll::modify`]. With nothing to report it sleeps
//!   as an *exclusive* waiter on the poller's own wait queue, under that
//!   queue's consumption contract: a waiter chosen by a wake harvests (also
//!   when its timeout fires after the choice) or passes the wakeup on.
//!   A harvest that leaves events queued wakes the next waiter (cascade).
//! - Pollers nest ([`EventPoll`] is `Pollable`), up to [`MAX_NESTING`]
//!   levels; a loop is refused with [`PollError::Loop`]. A thread can also
//!   wait for a poller to be readable without taking its events (epoll's
//!   `poll(epfd, POLLIN, -1)`): `wait_event` on
//!   [`Pollable::wait_queue`] with [`Pollable::readiness`] as the
//!   condition.
//! - The poller keeps each watched source alive until it is deleted or the
//!   poller dropped. Dropping the poller removes every entry from the
//!   sources' queues; a callback already running holds the poller's shared
//!   core alive, so sources and pollers may be dropped in any order.
//!
//! # Ready lists ([`ReadyListKind`](crate::variants::ReadyListKind))
//! `Spinlock` (before the seed: one lock for callbacks and the harvester),
//! `RwLockSwap` (the seed: callbacks share a read lock and append with an
//! atomic exchange; the harvester takes the write lock; events arriving
//! during a harvest go to an overflow list) and `LockFree` (beyond the
//! seed: MPSC list, no reader-writer lock, so no priority inversion). The
//! ordering arguments are next to the atomics, in `item.rs`,
//! `ready_list/*.rs` and `core.rs`; the loom models are in
//! `tests/loom_poll.rs`.
//!
//! `LockFree` pollers also *latch* their entry on the source's read queue
//! while the item is queued: the kernel's `ep_poll_callback` returns early
//! for an item already on the ready list, and here the wake that finds it
//! so marks the entry, so that later writes skip the callback and, with
//! nobody else on the queue, the queue's lock (one fence and one load).
//! The harvest re-arms the entry before reading the source (`item.rs`;
//! ordering argument in the `wait_queue` docs, "Latched callback
//! entries"). `Spinlock` and `RwLockSwap` keep the kernel's shape, a
//! callback per event, so the lab compares the seed's two lists as the
//! seed did.
//!
//! Measured (`herdless-lab epoll`, 2 cores; the lab README has the table):
//! `LockFree` delivers 8–12× the events/ms of the kernel's epoll+eventfd
//! at every T from 1 to 32, almost all of it from the latch (3–70 of 1000
//! writes run a callback). `RwLockSwap` is 1.0–1.2× `Spinlock`, not the
//! seed's 1.5–2.2×: with 2 cores only 80–180 of 1000 callbacks find the
//! spinlock held, and an uncontended read lock costs what the spinlock
//! does.
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
mod watch;

pub use epoll::{EventPoll, EventPollStats};
pub use error::{EventFdError, PollError};
pub use eventfd::EventFd;
pub use interest::{Event, Readiness, Trigger};
pub use nest::MAX_NESTING;
pub use pollable::Pollable;
