//! One sleeping thread: park with an optional deadline, unpark through a
//! handle.
//!
//! Kernel counterpart: `task_struct` with `wake_up_process` and
//! `get_task_struct`. Every wait list in herdless stores an [`Unparker`] for
//! each sleeper, and a waker takes a copy of it *under* the wait-list lock,
//! then calls [`Unparker::unpark`] *after* dropping the lock (the wake list,
//! seed 001). The handle stays valid after the parked thread has returned
//! from its wait, moved on to another wait, or exited: a late unpark is then
//! a spurious wakeup, never a use after free.
//!
//! # Where the state word lives
//! In a 64-byte slot of a slot pool (`util::slot_pool`), memory that
//! is never freed and is shared out densely (64 slots to a page). A parker
//! takes a slot when it is created and gives it back when it is dropped; the
//! next parker created (on any thread) may get the same slot. An
//! [`Unparker`] is the slot's address and the *generation* the slot had when
//! its parker took it, so:
//! - copying a handle is free (it used to be an `Arc` clone, a locked RMW on
//!   the sleeper's line under the wait-list lock, and a second one for the
//!   drop, on the line the woken thread was writing at that moment);
//! - the word a waker swaps and passes to `FUTEX_WAKE` is never freed memory,
//!   whenever the unpark runs;
//! - an unpark through a handle whose parker was dropped does nothing when it
//!   sees the generation moved on, and is at worst a spurious wakeup of the
//!   slot's next parker when it races with the recycling (every park
//!   tolerates those: see the contract).
//!
//! The lab's `futex-wake` measured the waker's side of waking 32 sleepers one
//! at a time: a wake whose handles and records sit on scattered pages pays
//! about 0.5 µs per cold page on the lab VM; see its README section.
//!
//! # Contract
//! - [`Parker::park`] returns after an [`Unparker::unpark`] that happened
//!   after the previous return, or spuriously. Callers loop on their own
//!   condition.
//! - An unpark that comes before the park is not lost: it leaves a token, and
//!   the next park consumes it and returns at once.
//! - An unpark through a handle of a dropped parker wakes nobody, or causes
//!   one spurious return of some other parker's park.
//!
//! # State word
//! ```text
//!   EMPTY    (0)  no token, not parked
//!   NOTIFIED (1)  a token is waiting to be consumed      set by unpark
//!   PARKED  (-1)  the owner sleeps (or is about to)       set by park
//! ```
//! Only the owning thread moves the state to `PARKED` or back to `EMPTY`;
//! only unparkers move it to `NOTIFIED`.

use std::marker::PhantomData;
use std::time::Duration;

use crate::deadline::Deadline;
use crate::sync::{thread_local, AtomicU32, AtomicUsize, Ordering};
use crate::sys;
use crate::util::slot_pool::SlotPool;

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = u32::MAX;

/// A parker's state, one per cache line (module docs).
#[derive(Debug)]
#[repr(align(64))]
struct Slot {
    state: AtomicU32,
    /// Moves on each time a parker gives the slot back; handles carry the
    /// value their parker took the slot with.
    generation: AtomicUsize,
}

impl Slot {
    fn fresh() -> Self {
        Slot {
            state: AtomicU32::new(EMPTY),
            generation: AtomicUsize::new(0),
        }
    }
}

#[cfg(not(loom))]
static SLOTS: SlotPool<Slot> = SlotPool::new();
#[cfg(loom)]
loom::lazy_static! {
    static ref SLOTS: SlotPool<Slot> = SlotPool::new();
}

/// The sleeping side: owned by one thread.
///
/// Most code uses the calling thread's parker through [`with_current`]; a
/// `Parker` can also be created on its own for a thread you manage.
///
/// # Examples
/// A thread sleeps until another one has set a flag; it loops on the flag,
/// since a park may return spuriously:
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use herdless::parker::Parker;
///
/// let parker = Parker::new();
/// let unparker = parker.unparker();
/// let done = Arc::new(AtomicBool::new(false));
/// let setter = {
///     let done = done.clone();
///     std::thread::spawn(move || {
///         done.store(true, Ordering::Release);
///         unparker.unpark(); // wakes the parker, or leaves it a token
///     })
/// };
/// while !done.load(Ordering::Acquire) {
///     parker.park();
/// }
/// setter.join().unwrap();
/// ```
#[derive(Debug)]
pub struct Parker {
    slot: &'static Slot,
    generation: usize,
    // A parker belongs to the thread that parks on it.
    _not_send: PhantomData<*const ()>,
}

/// The waking side: free to clone (two words, no reference count),
/// `Send + Sync`, valid forever.
///
/// # Examples
/// An unpark before the park is not lost: it leaves a token the next park
/// consumes, and an unpark through a handle of a dropped parker is
/// harmless.
/// ```
/// use herdless::parker::Parker;
///
/// let parker = Parker::new();
/// let unparker = parker.unparker();
/// unparker.unpark();
/// parker.park(); // returns at once: the token was waiting
/// drop(parker);
/// unparker.unpark(); // wakes nobody
/// ```
#[derive(Clone, Debug)]
pub struct Unparker {
    slot: &'static Slot,
    generation: usize,
}

impl Default for Parker {
    fn default() -> Self {
        Self::new()
    }
}

impl Parker {
    /// A parker with no token (see [`Parker`] for an example).
    pub fn new() -> Self {
        let slot = SLOTS.take(Slot::fresh);
        // We hold the slot alone now (the pool's lock ordered us after the
        // previous holder's `drop`); only late unparks of earlier parkers
        // may still write `state`, and a token they leave is a spurious
        // wakeup the contract allows. Relaxed: no other thread reads either
        // store to learn anything but "which parker is this".
        slot.state.store(EMPTY, Ordering::Relaxed);
        let generation = slot.generation.load(Ordering::Relaxed);
        Parker {
            slot,
            generation,
            _not_send: PhantomData,
        }
    }

    /// A handle that wakes this parker; every call gives an equal one.
    ///
    /// ```
    /// let parker = herdless::parker::Parker::new();
    /// assert!(parker.unparker().same_parker(&parker.unparker()));
    /// ```
    pub fn unparker(&self) -> Unparker {
        Unparker {
            slot: self.slot,
            generation: self.generation,
        }
    }

    /// Sleeps until unparked (or spuriously: callers loop on their own
    /// condition); an unpark that came first returns it at once. See
    /// [`Parker`] for an example.
    pub fn park(&self) {
        self.park_deadline(Deadline::Never)
    }

    /// Sleeps until unparked, `timeout` elapses, or spuriously. `None` and
    /// `Duration::MAX` sleep without a deadline; a zero timeout only consumes
    /// a pending token.
    ///
    /// ```
    /// use std::time::Duration;
    /// use herdless::parker::Parker;
    ///
    /// let parker = Parker::new();
    /// // Nobody unparks: returns after about 5 ms (or spuriously).
    /// parker.park_timeout(Some(Duration::from_millis(5)));
    /// parker.unparker().unpark();
    /// parker.park_timeout(Some(Duration::ZERO)); // consumes the token
    /// ```
    pub fn park_timeout(&self, timeout: Option<Duration>) {
        self.park_deadline(Deadline::after(timeout))
    }

    pub(crate) fn park_deadline(&self, deadline: Deadline) {
        self.park_until(deadline, None)
    }

    /// [`park_deadline`](Self::park_deadline) that also returns when
    /// `broadcast` changes or is woken (`sys::wait_either`): the condvar's
    /// broadcast (`condvar/broadcast.rs`), whose notifier marks its
    /// waiters with [`Unparker::mark`] instead of waking each, then bumps
    /// `broadcast` and wakes every sleeper of it with one system call.
    ///
    /// No mark is missed: the notifier marks (`swap`, Release) before it
    /// bumps `broadcast` (an RMW, Release) and wakes it, and this loop
    /// reads `broadcast` (Acquire) before each wait. The kernel checks and
    /// queues on the two words one after the other, each under its own
    /// hash-bucket lock (`futex_wait_multiple_setup`), so a mark may land
    /// after the check of our own word, unseen; but then the bump comes
    /// after it too. A wait that checks `broadcast` after the bump sees a
    /// new value and returns, and the next look at our word (the CAS
    /// below, after this loop's Acquire load of the bumped value, or the
    /// next wait's check) finds the mark. A wait that checked `broadcast`
    /// before the bump is queued on it when the bump's wake comes, and is
    /// woken. Without the bump the first case would sleep on. Loom checks
    /// the notifier's side (`tests/loom_futex.rs`, the broadcast models:
    /// without the mark or the wake they deadlock); its model of the
    /// two-word wait checks both words at once.
    pub(crate) fn park_deadline_either(&self, deadline: Deadline, broadcast: &AtomicU32) {
        self.park_until(deadline, Some(broadcast))
    }

    /// `park_deadline`, on `broadcast` too if given.
    fn park_until(&self, deadline: Deadline, broadcast: Option<&AtomicU32>) {
        let state = &self.slot.state;
        // NOTIFIED -> EMPTY consumes a token; EMPTY -> PARKED announces sleep.
        // Acquire pairs with the Release swap in `unpark` (or `mark`): what
        // the unparker wrote before unparking (typically a "you are woken"
        // flag) is visible when we return.
        if state.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return;
        }
        loop {
            match broadcast {
                None => sys::wait(state, PARKED, deadline),
                Some(word) => {
                    // Read before each wait, for the argument above.
                    let seen = word.load(Ordering::Acquire);
                    sys::wait_either(state, PARKED, word, seen, deadline);
                }
            }
            // Acquire: as above.
            if state
                .compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            if deadline.has_passed() {
                // Leave PARKED. If a token raced in, we consume it: returning
                // is exactly what it asked for.
                state.swap(EMPTY, Ordering::Acquire);
                return;
            }
            // Still PARKED: a spurious return, or (with `broadcast`) a
            // broadcast that did not mark us (we queued after it, or it was
            // another wait's). Wait again.
        }
    }
}

impl Drop for Parker {
    fn drop(&mut self) {
        // Relaxed: the count only tells late handles that this parker is
        // gone (`unpark`); the pool's lock orders it before the next
        // holder's load in `Parker::new`.
        self.slot.generation.fetch_add(1, Ordering::Relaxed);
        SLOTS.give_back(self.slot);
    }
}

impl Unparker {
    /// Wakes the parker, or leaves a token so that its next park returns.
    /// Never blocks, and wakes nobody when the parker was dropped (see
    /// [`Unparker`] for an example).
    pub fn unpark(&self) {
        if self.mark() {
            // `slot` is never freed: the word stays valid for the syscall
            // even if the parker returned and was dropped meanwhile.
            sys::wake_one(&self.slot.state);
        }
    }

    /// Leaves the parker a token as [`unpark`](Self::unpark) does, without
    /// waking it: returns whether it was asleep (or about to sleep). Then
    /// `unpark` wakes it through its own word; the condvar's broadcast
    /// (`condvar/broadcast.rs`) owes it a wake through the word it sleeps
    /// on beside its own, which `park_deadline_either` was given (bump
    /// it, then wake all of it). A parker in a plain park must be woken
    /// through its own word, or it sleeps on.
    #[inline]
    pub(crate) fn mark(&self) -> bool {
        let slot = self.slot;
        // Relaxed: this check never skips an unpark that someone waits
        // for. The generation changes only when the parker is dropped, and
        // a parker cannot be dropped while its owner is parked on it or is
        // about to park waiting for this unpark. The value we read is at
        // least the one the parker took the slot with: whoever handed us
        // this handle (a wait list, under its lock) got it after
        // `Parker::new`. A stale pass is a spurious token (module docs).
        if slot.generation.load(Ordering::Relaxed) != self.generation {
            return false;
        }
        // Release pairs with the Acquire in `park_until`.
        slot.state.swap(NOTIFIED, Ordering::Release) == PARKED
    }

    /// Whether both handles wake the same parker.
    ///
    /// ```
    /// use herdless::parker::Parker;
    ///
    /// let (a, b) = (Parker::new(), Parker::new());
    /// assert!(a.unparker().same_parker(&a.unparker()));
    /// assert!(!a.unparker().same_parker(&b.unparker()));
    /// ```
    pub fn same_parker(&self, other: &Unparker) -> bool {
        std::ptr::eq(self.slot, other.slot) && self.generation == other.generation
    }
}

/// A thread's own parker, held by its thread-local.
struct ThreadParker(Option<Parker>);

impl Drop for ThreadParker {
    fn drop(&mut self) {
        // Under loom, thread-locals are destroyed after the execution's
        // statics (the slot pool among them): the slot is leaked there,
        // with the rest of that execution. Outside loom the parker is
        // dropped and its slot given back.
        if cfg!(loom) {
            std::mem::forget(self.0.take());
        }
    }
}

thread_local! {
    static CURRENT: ThreadParker = ThreadParker(Some(Parker::new()));
}

/// Runs `f` with the calling thread's own parker.
///
/// Works in every context a thread can run code, including the destructors
/// of `thread_local!` values: once the thread's own parker has been
/// destroyed (or while it is being destroyed), `f` gets a fresh parker
/// created for this call, as `parking_lot_core` does for its `ThreadData`.
/// That is sound because a parker's state word is never freed: an unpark
/// through a handle handed out during the call that comes after it is
/// harmless (module docs).
///
/// # Examples
/// A thread hands its own unparker to a waker, then sleeps until woken:
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::{mpsc, Arc};
/// use herdless::parker;
///
/// let done = Arc::new(AtomicBool::new(false));
/// let (handles, handle) = mpsc::channel();
/// let waker = {
///     let done = done.clone();
///     std::thread::spawn(move || {
///         let unparker: parker::Unparker = handle.recv().unwrap();
///         done.store(true, Ordering::Release);
///         unparker.unpark();
///     })
/// };
/// parker::with_current(|me| {
///     handles.send(me.unparker()).unwrap();
///     while !done.load(Ordering::Acquire) {
///         me.park();
///     }
/// });
/// waker.join().unwrap();
/// ```
pub fn with_current<R>(f: impl FnOnce(&Parker) -> R) -> R {
    let mut f = Some(f);
    // `try_with` fails only during or after the destruction of this
    // thread's `CURRENT`; `f` has not run then.
    let current = |thread: &ThreadParker| {
        let parker = thread.0.as_ref().expect("taken only by the destructor");
        (f.take().expect("runs once"))(parker)
    };
    match CURRENT.try_with(current) {
        Ok(r) => r,
        Err(_) => (f.take().expect("not run by the failed access"))(&Parker::new()),
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, AtomicU32};
    use loom::thread;

    /// An unpark before, during or after the park is never lost: the parked
    /// thread always returns (loom reports a deadlock otherwise).
    #[test]
    fn unpark_racing_park_is_never_lost() {
        loom::model(|| {
            let flag = Arc::new(AtomicU32::new(0));
            let (tx, rx) = loom::sync::mpsc::channel();
            let waiter = {
                let flag = flag.clone();
                thread::spawn(move || {
                    with_current(|p| {
                        tx.send(p.unparker()).unwrap();
                        while flag.load(Ordering::Acquire) == 0 {
                            p.park();
                        }
                    })
                })
            };
            let unparker = rx.recv().unwrap();
            flag.store(1, Ordering::Release);
            unparker.unpark();
            waiter.join().unwrap();
        });
    }

    /// The handle outlives the parked thread: unparking after it exited is
    /// harmless.
    #[test]
    fn unpark_after_the_thread_exited_is_harmless() {
        loom::model(|| {
            let handle = thread::spawn(|| with_current(|p| p.unparker()))
                .join()
                .unwrap();
            handle.unpark();
            handle.unpark();
        });
    }

    /// A handle of a dropped parker whose slot went to a new parker: its
    /// unpark, racing the new parker's park and its real unpark, never
    /// makes the real one lost (the generation check skips only unparks
    /// of dropped parkers), and the two handles are never the same parker.
    /// Mutations checked: `unpark` skipping when the generation *matches*
    /// deadlocks here; `drop` not moving the generation fails
    /// `same_parker`.
    #[test]
    fn a_recycled_slot_never_loses_the_new_parkers_unpark() {
        loom::model(|| {
            let stale = {
                let first = Parker::new();
                first.unparker()
            };
            let flag = Arc::new(AtomicU32::new(0));
            let (tx, rx) = loom::sync::mpsc::channel();
            let waiter = {
                let flag = flag.clone();
                thread::spawn(move || {
                    let parker = Parker::new();
                    tx.send(parker.unparker()).unwrap();
                    while flag.load(Ordering::Acquire) == 0 {
                        parker.park();
                    }
                })
            };
            let late = {
                let stale = stale.clone();
                thread::spawn(move || stale.unpark())
            };
            let unparker = rx.recv().unwrap();
            assert!(
                !unparker.same_parker(&stale),
                "a dropped parker's handle is not the new parker's"
            );
            flag.store(1, Ordering::Release);
            unparker.unpark();
            waiter.join().unwrap();
            late.join().unwrap();
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The broadcast's two sides (`condvar/broadcast.rs`): a mark before
    /// the park leaves a token it returns on at once; a mark while it
    /// sleeps owes a wake, which only the bump and wake of the broadcast
    /// word give (the sleeper's 10 s deadline is a guard against a hang,
    /// not a measurement: the test fails if it is reached).
    #[test]
    fn a_marked_parker_is_woken_through_the_broadcast_word() {
        if !sys::either_supported() {
            eprintln!("SKIPPED: no futex_waitv here (it needs Linux 5.16)");
            return;
        }
        let broadcast = AtomicU32::new(0);
        let parker = Parker::new();
        assert!(!parker.unparker().mark(), "not asleep: no wake owed");
        parker.park_deadline_either(Deadline::Never, &broadcast);

        let (handles, handle) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let sleeper = s.spawn(|| {
                let parker = Parker::new();
                handles.send(parker.unparker()).unwrap();
                let deadline = Deadline::after(Some(Duration::from_secs(10)));
                parker.park_deadline_either(deadline, &broadcast);
                deadline.has_passed()
            });
            let unparker: Unparker = handle.recv().unwrap();
            while unparker.slot.state.load(Ordering::Acquire) != PARKED {
                std::thread::yield_now();
            }
            assert!(unparker.mark(), "asleep: a wake is owed");
            broadcast.fetch_add(1, Ordering::Release);
            sys::wake_all(&broadcast);
            assert!(!sleeper.join().unwrap(), "woken by the broadcast word");
        });
    }
}
