//! What the table's one mechanism (`park.rs`) is told and answers: how a
//! park waits and how it ended, what an unpark found, what a requeue was
//! asked to do. Apart from `park.rs` so that `table.rs`, whose `wait`,
//! `wake` and `cmp_requeue` use them, does not import the mechanism that
//! imports it.

use std::num::NonZeroU32;
use std::ptr::NonNull;

use crate::deadline::Deadline;
use crate::sync::AtomicU32;
use crate::util::waiter::SPIN_FOR_GRANT;

/// How a `FutexTable::park` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parked {
    /// An unpark dequeued the waiter and granted it `token`, from `key`
    /// (the key it parked on, or the one a requeue moved it to).
    Unparked {
        /// The grant's token.
        token: NonZeroU32,
        /// The key the waiter was on when it was unparked.
        key: usize,
    },
    /// `validate` said no: the waiter never queued.
    Invalid,
    /// The deadline passed before any unpark dequeued the waiter (or the
    /// park was `try_only`).
    TimedOut,
}

/// What an unpark found, as its `decide` callback sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Unparked {
    /// Waiters dequeued (and about to be granted).
    pub(crate) unparked: usize,
    /// Whether waiters of the key remain queued after them.
    pub(crate) have_more: bool,
    /// Whether a lock should hand itself over fairly this time: for a task
    /// waiter, whether it asked for it (a task woken once in vain,
    /// `mutex/lock_async.rs`); for a thread, whether the bucket's
    /// eventual-fairness period is over (`Queue::due_for_fairness`). Only
    /// set when a waiter was found.
    pub(crate) be_fair: bool,
}

/// What a requeue's `validate` decided, under both bucket locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RequeueOp {
    /// Waiters of the source key to wake first.
    pub(crate) wake: usize,
    /// Waiters of the source key to move to the target key after them.
    pub(crate) requeue: usize,
}

/// How a `FutexTable::park` waits, beyond its key and callbacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParkHow {
    /// When to give up.
    pub(crate) deadline: Deadline,
    /// Check `validate` and return [`Parked::TimedOut`] without queueing
    /// (a zero timeout).
    pub(crate) try_only: bool,
    /// Queue ahead of every waiter of the bucket instead of behind them: a
    /// mutex sleeper that was woken and lost the lock to a running thread
    /// goes back to the head, where it was (FIFO among sleepers is kept).
    pub(crate) front: bool,
    /// Queue at the head as with `front`, unless the bucket's first waiter
    /// went there this way or was passed by one that did (then at the
    /// tail): a mutex's rare sleeper (`mutex/rare_parker.rs`). Bounded:
    /// [`Queue::may_pass_head`](super::bucket::Queue::may_pass_head).
    pub(crate) ahead: bool,
    /// Looks at the grant word before the first sleep (see
    /// `Waiter::sleep_watching`).
    pub(crate) watch: u32,
    /// A word whose bump and wake also end each sleep: a condvar waiter
    /// under the broadcast (`condvar/broadcast.rs`). The caller keeps the
    /// word alive for the whole park.
    pub(crate) broadcast: Option<NonNull<AtomicU32>>,
}

impl ParkHow {
    /// Queue at the tail, watch the grant the default time, give up at
    /// `deadline`.
    pub(crate) fn until(deadline: Deadline) -> Self {
        ParkHow {
            deadline,
            try_only: false,
            front: false,
            ahead: false,
            watch: SPIN_FOR_GRANT,
            broadcast: None,
        }
    }
}
