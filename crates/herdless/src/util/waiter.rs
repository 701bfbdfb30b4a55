//! The waiter record every wait list in herdless queues, with its one grant
//! and its one sleep loop.
//!
//! Kernel counterparts: `futex_q`, `rwsem_waiter` and `wait_queue_entry`
//! are three records with the same protocol, and here they are one type:
//! [`Waiter<P, W>`] carries the list links, the grant word, what wakes its
//! owner (`W`: an [`Unparker`]; a [`Sleeper`](crate::util::sleeper::Sleeper),
//! a thread's `Unparker` or a task's `Waker` slot; or the wait queue's
//! `Notify`, which may also be a poller's callback) and a per-user payload `P` (the
//! futex key and bucket, the rwsem's read/write kind, the wait queue's
//! exclusive flag). `parking_lot_core` has the same shape: one
//! `ThreadData`, one `park`, under several queue heads.
//!
//! # The protocol (ARCHITECTURE contracts 3 and 4)
//! ```text
//!   waiter (owner of the record)            waker (holds the list's lock)
//!   lock; push_back(record); unlock          lock
//!   sleep(): park until granted              unlink(record)
//!                                            grant(record, token):
//!                                              wakes.push(record.wake.handle())
//!                                              state.store(token, Release)  <- last touch
//!                                            unlock
//!                                            wakes.wake_all()   (after unlock)
//! ```
//! - **Grant first, wake after unlock.** [`Waiter::grant`] clones the wake
//!   handle onto a [`WakeList`] *before* it publishes the grant, and the
//!   Release store of the token is its last access to the record: the
//!   owner may see it (Acquire), return and free the record at once, before
//!   the unpark runs. The unpark then goes to a parker whose state word is
//!   never freed (a [`parker`](crate::parker) slot), and is at worst a
//!   spurious wakeup of a later wait, which every sleep loop tolerates.
//! - **The wake wins a tie.** A sleeper whose deadline passes takes the lock
//!   of the list its record is on and calls [`Waiter::cancel_locked`]: if a
//!   grant got there first it keeps the grant (and reports it), otherwise it
//!   unlinks itself. Under the lock the answer is final, because grants are
//!   only published under it.
//! - **A grant carries a token** (a non-zero `u32`): the futex table tells
//!   a mutex waiter whether the lock was handed to it (fair unlock) or it
//!   was only woken; the other users grant [`GRANTED`].
//!
//! The loom model `grant_racing_the_deadline_is_never_lost` at the end of
//! this file checks the protocol on its own; the futex, rwsem and wait
//! queue models check it in place.

use std::marker::PhantomPinned;
use std::num::NonZeroU32;
use std::ptr::NonNull;

use crate::deadline::Deadline;
use crate::parker::{Parker, Unparker};
use crate::sync::{AtomicU32, Ordering};
use crate::util::linked_list::{Link, Pointers};
use crate::util::wake_list::{WakeList, WakeSource};

/// The state of a record that is queued (or was never granted).
const WAITING: u32 = 0;

/// Looks at the grant word (each followed by a spin-loop hint, about 27 ns
/// on the lab's machine) before a waiter parks: about the time a running
/// notifier or unlocker on another CPU needs to get to it.
pub(crate) const SPIN_FOR_GRANT: u32 = 400;

/// The plain grant token: "you were woken" (futex), "you hold the lock"
/// (rwsem), "you were chosen" (wait queue).
pub(crate) const GRANTED: NonZeroU32 = NonZeroU32::MIN;

/// One waiter, pinned for as long as it is in a list: on the waiting
/// thread's stack, in its thread's futex record slot (dense memory, see
/// `futex::waiter`), or (wait-queue callbacks) in a `Box`.
///
/// Invariants (who writes what, under which lock):
/// - `pointers`: only under the lock of the list holding the record.
/// - `state`: [`WAITING`] when queued (set by the owner, under the lock,
///   before the record is visible to a waker: [`Waiter::rearm`]); a waker
///   that unlinked it under the lock stores the grant token with Release as
///   its very last access. The owner reads it with Acquire, with or without
///   the lock.
/// - `wake`: wakers take a handle from it under the lock
///   ([`WakeSource::handle`]). An [`Unparker`] is immutable; a task's waker
///   slot (`util::sleeper`) is written only by the record's owner, under
///   the lock, while the record is queued (or with no lock before it is).
/// - `payload`: the user's; it states its own rules (atomics, or immutable).
pub(crate) struct Waiter<P, W = Unparker> {
    pointers: Pointers<Waiter<P, W>>,
    state: AtomicU32,
    wake: W,
    payload: P,
    _pinned: PhantomPinned,
}

/// How a [`Waiter::sleep`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slept<R> {
    /// A waker granted the record, with this token.
    Granted(NonZeroU32),
    /// The caller's `on_wakeup` hook ended the sleep with this value; the
    /// record may still be queued.
    Stopped(R),
    /// The deadline passed and no grant was seen: the caller takes the
    /// list's lock and calls [`Waiter::cancel_locked`], where a grant may
    /// still win.
    DeadlinePassed,
}

impl<P, W: WakeSource> Waiter<P, W> {
    /// A record not in any list, in state `WAITING`.
    pub(crate) fn new(wake: W, payload: P) -> Self {
        Waiter {
            pointers: Pointers::new(),
            state: AtomicU32::new(WAITING),
            wake,
            payload,
            _pinned: PhantomPinned,
        }
    }

    /// The user's part of the record.
    pub(crate) fn payload(&self) -> &P {
        &self.payload
    }

    /// The handle that wakes the record's owner.
    pub(crate) fn wake_handle(&self) -> &W {
        &self.wake
    }

    /// The grant token, if a waker has granted this record.
    #[inline]
    pub(crate) fn granted(&self) -> Option<NonZeroU32> {
        // Acquire pairs with the Release store in `grant`: the waker's
        // unlinking, and everything the waking thread did before it
        // granted (the store to a futex word, the holders' critical
        // sections of a lock, a new item), happen-before what we do next.
        NonZeroU32::new(self.state.load(Ordering::Acquire))
    }

    /// Whether a waker has granted this record.
    #[inline]
    pub(crate) fn is_granted(&self) -> bool {
        self.granted().is_some()
    }

    /// Marks the record `WAITING` again before its owner queues it once
    /// more (a wait queue re-queues a woken entry that must sleep again).
    /// Call it holding the list's lock, before the push.
    pub(crate) fn rearm(&self) {
        // Relaxed: written by the owner under the lock, before the record is
        // visible to any waker; wakers never read it. The owner's later
        // Acquire loads see this value or a waker's grant (coherence).
        self.state.store(WAITING, Ordering::Relaxed);
    }

    /// Grants the record with `token`: takes its wake handle onto `wakes`,
    /// then publishes the grant, the last access to the record.
    ///
    /// # Safety
    /// The caller holds the lock of the list the record was in, has just
    /// unlinked it under that lock, and the record has not been granted
    /// since it was queued.
    pub(crate) unsafe fn grant(
        node: NonNull<Self>,
        token: NonZeroU32,
        wakes: &mut WakeList<W::Handle>,
    ) {
        // SAFETY: the record stays live until its owner sees the grant,
        // which is only possible after the store below (caller contract:
        // not granted yet, and the owner cannot leave the list without the
        // lock the caller holds).
        let waiter = unsafe { node.as_ref() };
        // The handle first: after the store the record may be gone (the
        // seed-001 bug that the kernel's `wake_q` fixed: reading
        // `waiter->task` after the waiter could have returned).
        wakes.push(waiter.wake.handle());
        // Release pairs with the Acquire in `granted`.
        waiter.state.store(token.get(), Ordering::Release);
    }

    /// Parks the calling thread until the record is granted or `deadline`
    /// passes. After every return from `park` that found no grant (an
    /// unpark without a grant, such as the rwsem's nudge, a timer, or a
    /// spurious wakeup), `on_wakeup` may end the sleep with a value.
    ///
    /// `parker` must be the parker whose `Unparker` the record's wake
    /// handle holds.
    pub(crate) fn sleep<R>(
        &self,
        parker: &Parker,
        deadline: Deadline,
        on_wakeup: impl FnMut() -> Option<R>,
    ) -> Slept<R> {
        self.sleep_watching(parker, deadline, SPIN_FOR_GRANT, None, on_wakeup)
    }

    /// [`sleep`](Self::sleep), watching the grant word `watch` times
    /// (instead of the default) before the first park: a mutex sleeper,
    /// whose grant waits for an unlock that may be far off, watches less
    /// than a condvar or queue waiter, whose grant a running peer is about
    /// to give. With `broadcast`, each park also ends when that word is
    /// bumped and woken (`Parker::park_deadline_either`): a condvar waiter
    /// under the broadcast (`condvar/broadcast.rs`).
    pub(crate) fn sleep_watching<R>(
        &self,
        parker: &Parker,
        deadline: Deadline,
        watch: u32,
        broadcast: Option<&AtomicU32>,
        mut on_wakeup: impl FnMut() -> Option<R>,
    ) -> Slept<R> {
        if let Some(token) = self.spin_for_grant(watch) {
            return Slept::Granted(token);
        }
        loop {
            if let Some(token) = self.granted() {
                return Slept::Granted(token);
            }
            match broadcast {
                Some(word) => parker.park_deadline_either(deadline, word),
                None => parker.park_deadline(deadline),
            }
            if let Some(token) = self.granted() {
                return Slept::Granted(token);
            }
            if let Some(r) = on_wakeup() {
                return Slept::Stopped(r);
            }
            if deadline.has_passed() {
                return Slept::DeadlinePassed;
            }
        }
    }

    /// Watches the grant word for a moment before the first park: a grant
    /// that arrives meanwhile costs neither side a system call (the
    /// waker's unpark finds the parker not parked and only leaves a
    /// token). This is what std's condvar gets from its sequence counter
    /// (a notify between its unlock and its `FUTEX_WAIT` makes the wait
    /// return at once), without its spurious wakeups; the lab's `locks`
    /// experiment measured std sleeping 1.2 times per 1k items against
    /// herdless's 35 on a 1-producer, 1-consumer queue of 64 before this.
    /// Only loads of the record's own word: nothing is written that a waker
    /// or another waiter reads.
    fn spin_for_grant(&self, watch: u32) -> Option<NonZeroU32> {
        if cfg!(loom) {
            return None;
        }
        for _ in 0..watch {
            if let Some(token) = self.granted() {
                return Some(token);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Leaves the list on a timeout or a cancellation, unless a grant won
    /// the race: returns the grant's token if one did (the record is then
    /// already unlinked), or unlinks the record with `unlink` and returns
    /// `None`.
    ///
    /// Call it holding the lock of the list the record is on: grants are
    /// published only under that lock, so the answer is final
    /// (ARCHITECTURE contract 4).
    pub(crate) fn cancel_locked(&self, unlink: impl FnOnce()) -> Option<NonZeroU32> {
        match self.granted() {
            Some(token) => Some(token),
            None => {
                unlink();
                None
            }
        }
    }
}

// SAFETY: the only non-atomic mutable state is `pointers`, read and written
// only under the lock of the list holding the record; `wake` is immutable
// and shared (it must be `Sync`), and `payload` is shared as the user
// declares (it must be `Sync`).
unsafe impl<P: Sync, W: Sync> Sync for Waiter<P, W> {}
// SAFETY: as above; the record is never moved while linked (it is pinned).
unsafe impl<P: Send, W: Send> Send for Waiter<P, W> {}

// SAFETY: returns the `pointers` field of the node, used by one list only.
unsafe impl<P, W> Link for Waiter<P, W> {
    unsafe fn pointers(target: NonNull<Self>) -> NonNull<Pointers<Self>> {
        // SAFETY: `target` is live (trait contract); addr_of_mut makes no
        // reference to the whole node, which other threads may be reading.
        unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*target.as_ptr()).pointers)) }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use std::pin::pin;

    use loom::thread;

    use super::*;
    use crate::lock::SpinParkLock;
    use crate::parker;
    use crate::sync::{Arc, AtomicBool};
    use crate::util::linked_list::LinkedList;

    type List = LinkedList<Waiter<()>>;

    struct Shared {
        list: SpinParkLock<List>,
        /// Set by the waiter once its record is queued.
        queued: AtomicBool,
    }

    /// Grants the head of the list, if any, and wakes it after unlocking.
    fn grant_head(shared: &Shared) -> bool {
        let mut wakes = WakeList::new();
        let mut list = shared.list.lock();
        let granted = match list.pop_front() {
            // SAFETY: just unlinked under the lock we hold; queued records
            // are never granted twice.
            Some(node) => unsafe {
                Waiter::grant(node, GRANTED, &mut wakes);
                true
            },
            None => false,
        };
        drop(list);
        wakes.wake_all();
        granted
    }

    /// One waiter queues and sleeps, with or without a deadline; a granter
    /// grants the head once it sees the waiter queued. Whatever the
    /// interleaving: an untimed waiter always returns granted (no lost
    /// grant); a timed one either keeps the grant or leaves the list before
    /// any grant, and the granter's answer agrees with the waiter's (the
    /// wake wins a tie, and a grant is never half-given).
    #[test]
    fn grant_racing_the_deadline_is_never_lost() {
        for timed in [false, true] {
            let mut builder = loom::model::Builder::new();
            builder.preemption_bound = Some(3);
            builder.check(move || {
                let shared = Arc::new(Shared {
                    list: SpinParkLock::new(LinkedList::new()),
                    queued: AtomicBool::new(false),
                });
                let waiter = {
                    let shared = shared.clone();
                    thread::spawn(move || {
                        parker::with_current(|parker| {
                            let record = pin!(Waiter::new(parker.unparker(), ()));
                            let node = NonNull::from(&*record);
                            {
                                let mut list = shared.list.lock();
                                record.rearm();
                                // SAFETY: pinned on this frame, in no list;
                                // it leaves before the frame ends (granted,
                                // or unlinked by `cancel_locked` below).
                                unsafe { list.push_back(node) };
                            }
                            shared.queued.store(true, Ordering::Release);
                            let deadline = if timed {
                                Deadline::after(Some(std::time::Duration::from_secs(1)))
                            } else {
                                Deadline::Never
                            };
                            match record.sleep(parker, deadline, || None::<()>) {
                                Slept::Granted(token) => token == GRANTED,
                                Slept::Stopped(()) => unreachable!("the hook never stops"),
                                Slept::DeadlinePassed => {
                                    let mut list = shared.list.lock();
                                    // SAFETY: not granted (checked under the
                                    // lock), so still in this list.
                                    let kept = record
                                        .cancel_locked(|| unsafe { list.remove(node) })
                                        .is_some();
                                    assert!(timed, "an untimed sleep has no deadline");
                                    kept
                                }
                            }
                        })
                    })
                };
                while !shared.queued.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                let granted = grant_head(&shared);
                let waiter_got_it = waiter.join().unwrap();
                assert_eq!(granted, waiter_got_it, "a grant is kept exactly when given");
                if !timed {
                    assert!(waiter_got_it, "an untimed waiter is always granted");
                }
                assert!(shared.list.lock().is_empty());
            });
        }
    }
}
