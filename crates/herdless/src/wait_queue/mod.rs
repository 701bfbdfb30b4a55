//! An explicit wait-queue head with exclusive and non-exclusive entries
//! (kernel: `wait_queue_head_t`; seed 000, "userfaultfd: switch to exclusive
//! wakeup for blocking reads").
//!
//! READ this before changing anything here.
//!
//! # Contract
//! A [`WaitQueue`] holds entries, each exclusive or not, each with a wake
//! function: a sleeping thread's (unpark it) or a poller's callback
//! ([`WaitQueue::register`]). [`WaitQueue::wake_up`]`(nr_exclusive)` wakes
//! every non-exclusive entry and at most `nr_exclusive` exclusive ones,
//! oldest first; `wake_up(0)` wakes only the non-exclusive ones;
//! [`WaitQueue::wake_up_all`] wakes everybody. Blocking readers wait
//! exclusively ([`WaitQueue::wait_event_exclusive`]); pollers never do
//! ([`WaitQueue::wait_event`], callbacks): a poller that is woken need not
//! read, so making it exclusive would let it swallow a wakeup a reader
//! needed (ARCHITECTURE contract 6).
//!
//! [`WakeMode::WakeAll`](crate::variants::WakeMode::WakeAll) (the seed's "before") treats every waiter as
//! non-exclusive: every wake wakes the whole herd. [`WakeMode::Exclusive`](crate::variants::WakeMode::Exclusive)
//! (the "after", default) wakes one reader per unit of work.
//!
//! Thread entries are dequeued by the wake that wakes them (kernel:
//! `autoremove_wake_function`) and re-queued at the tail if the waiter has
//! to sleep again. Callback entries stay queued until their registration is
//! dropped. Wakes collect unpark handles and callbacks under the queue lock
//! and run them after dropping it (seed 001, `util::wake_list`).
//!
//! # Why no wakeup is lost
//! The waiter queues itself, *then* tests the condition, *then* sleeps; the
//! waker changes the state, *then* calls `wake_up`. Both take the queue
//! lock, which orders them:
//! ```text
//!   waiter                              waker
//!   lock; enqueue(me); unlock   (Q)     state = new
//!   if cond(): leave, return            lock; dequeue; unlock   (W)
//!   sleep until granted                 unpark the dequeued
//! ```
//! Either (Q) precedes (W): the wake finds the entry and dequeues it, and
//! its grant store (Release, paired with the waiter's Acquire load) ends
//! the sleep, however late the unpark runs. Or (W) precedes (Q): then
//! `state = new` happens-before the waker's unlock, which happens-before
//! the waiter's lock, so `cond()` sees the new state and the waiter does
//! not sleep. "The waiter misses the state and the wake misses the waiter"
//! is impossible.
//!
//! # Nobody waits: the lock-free check (ARCHITECTURE contract 8)
//! `wake_up` on a queue with no entry at all (no sleeper, no poller
//! registered: an `EventFd` nobody polls, the writers' queue of a consumer
//! that only reads) skips the lock. The queue counts its entries
//! (`entries`, changed only under the lock), and the two sides are the
//! store-buffering litmus test of `futex`, with a full fence on each:
//! ```text
//!   waiter / registration (enqueue)        waker (wake_up)
//!   lock; link; entries += 1; unlock        state = new   (the caller)
//!   fence(SeqCst)                 (E)       fence(SeqCst)             (W)
//!   look at the state (cond(),              if entries == 0: return
//!     a poller's readiness)                 lock; dequeue ... (as above)
//! ```
//! The two fences are ordered one way or the other. If (E) comes first, the
//! waker's load (after W) sees the increment (before E), or a later value
//! that still counts the entry (only its removal takes it back, and a
//! removed entry was woken or left on its own), and it takes the lock: the
//! argument above applies. If (W) comes first, the waiter's look (after E)
//! sees the new state and it does not sleep (a poller queues its item). So
//! "the waker sees no entry and the waiter misses the state" is impossible;
//! `loom_wait_queue.rs` checks it
//! (`wake_racing_wait_event_registration_is_never_lost` deadlocks without
//! either fence).
//!
//! # Latched callback entries (crate internal: `LockFree` pollers)
//! A poller's callback for a source whose item is already on its ready
//! list has nothing to do (kernel: `ep_poll_callback` returns early when
//! the item is linked). An entry registered with
//! `register_owned_latched(.., latch, busy)` lets a wake skip it, and then
//! skip the lock, for as long as that holds:
//! - *Latch*: a wake, under the queue lock, finds the entry's `busy()`
//!   true (the item is queued). It does not call the callback; it marks the
//!   entry latched and takes it out of `entries`. Later wakes skip a
//!   latched entry under the lock, and skip the lock itself when `entries`
//!   is zero (the check above).
//! - *Re-arm*: the poller's harvest takes the item off its list (`busy()`
//!   becomes false), then calls `WaitQueue::rearm`: under the lock,
//!   unlatch and count the entry again; then the fence (R); then it reads
//!   the source.
//!
//! Why no event is lost. A wake that latches read `busy()` under the lock:
//! the item was queued, so a harvest will take it off, re-arm under the
//! lock (after the latching wake's critical section: had it come before,
//! the wake would have read the cleared flag), then read the source: the
//! waker's state change, made before its lock, is visible. A wake that
//! skips the lock read `entries` after its fence (W); the harvest raised it
//! before (R) and reads the source after (R): the same store-buffering pair
//! as (E)/(W), so either the wake counts the entry (takes the lock and
//! calls the callback, which queues the item) or the harvest's read sees
//! the new state. `rearm` always takes the lock, so a wake deciding to
//! latch cannot act on a `busy()` it read before the harvest cleared it.
//! Removing a latched entry unlatches it (a late `rearm` then does
//! nothing). `loom_poll.rs`:
//! `a_write_skipping_a_latched_entry_is_seen_by_the_rearming_harvest`
//! deadlocks without (R) or (W).
//!
//! # The consumption contract (ARCHITECTURE contract 6; why the seed was refused)
//! An exclusive wake is a promise: "one waiter is now awake to handle this
//! event". A waiter chosen by it must *consume the event or pass the wakeup
//! on* to the next exclusive waiter, including when it times out, is
//! cancelled, panics, or took something else than the event it was woken
//! for. Otherwise the event sits unhandled while other readers sleep.
//!
//! The API makes the waiter say what it did. The closure given to
//! [`wait_event_exclusive`](WaitQueue::wait_event_exclusive) *tests and
//! consumes in one step* (under the lock that guards the state) and returns
//! an [`Attempt`]:
//! - [`Attempt::Done`]: consumed (or saw a final state all waiters see,
//!   such as "closed and empty"): the wakeup is used up.
//! - [`Attempt::PassOn`]: leaving without consuming (cancelled): if this
//!   waiter was chosen, the queue wakes the next exclusive waiter.
//! - [`Attempt::Wait`]: nothing there: keep (or go back to) sleeping. A
//!   chosen waiter that finds nothing holds no promise any more: someone
//!   else consumed the event.
//!
//! The queue then keeps the promise on every path:
//! - *Timeout after being chosen*: the wake wins (ARCHITECTURE contract 4); the
//!   waiter attempts once more and returns its result. `TimedOut` means the
//!   attempt found nothing, so nothing is lost.
//! - *Chosen while its first attempt (right after queueing) was already
//!   succeeding*: that attempt may have taken an older item than the one
//!   the wake announced, so the wakeup is passed on.
//! - *`PassOn`, a panic in the closure*, or the test hook
//!   [`WaitQueue::debug_give_up_when_chosen`] (a chosen waiter that gives up
//!   without looking): passed on, from one `Drop` that runs on every exit.
//!
//! Why a closure and not a guard the caller must `consume()`: a guard
//! separates "the condition holds" from "I took it", and between the two
//! another thread can take the item; the caller then has to know to pass
//! on, and forgetting either call is silent. With the closure the test and
//! the take are one critical section of the caller's own lock, and the
//! return type forces the caller to state the outcome.
//!
//! What the queue cannot know: a waker announces units of work with
//! `wake_up(n)`, one exclusive wakeup per unit. If one attempt consumes only
//! part of what a single wakeup announced (a batch posted with one
//! `wake_up(1)`), the caller must `wake_up` for the rest itself (the
//! kernel's pipe does the same: `wake_next_reader`). [`Channel`] wakes once
//! per item, so each attempt consumes exactly one announced unit.
//!
//! [`Channel`]: crate::channel::Channel

mod entry;
mod queue;
mod registration;
mod wait;
mod wait_async;

pub(crate) use entry::Latch;
pub use queue::{WaitQueue, WaitQueueStats};
pub use registration::{OwnedRegistration, Registration};
pub use wait::{Attempt, TimedOut};
pub use wait_async::{WaitEvent, WaitEventExclusive, WaitUnlocked};
