//! One sleeping thread: park with an optional deadline, unpark through a
//! handle.
//!
//! Kernel counterpart: `task_struct` with `wake_up_process` and
//! `get_task_struct`. Every wait list in herdless stores an [`Unparker`] for
//! each sleeper, and a waker takes a clone of it *under* the wait-list lock,
//! then calls [`Unparker::unpark`] *after* dropping the lock (the wake list,
//! seed 001). The clone is an `Arc`, so the handle stays valid after the
//! parked thread has returned from its wait, moved on to another wait, or
//! exited: a late unpark is then a spurious wakeup, never a use after free.
//!
//! # Contract
//! - [`Parker::park`] returns after an [`Unparker::unpark`] that happened
//!   after the previous return, or spuriously. Callers loop on their own
//!   condition.
//! - An unpark that comes before the park is not lost: it leaves a token, and
//!   the next park consumes it and returns at once.
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
use crate::sync::{thread_local, Arc, AtomicU32, Ordering};
use crate::sys;

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = u32::MAX;

#[derive(Debug)]
struct Inner {
    state: AtomicU32,
}

/// The sleeping side: owned by one thread.
///
/// Most code uses the calling thread's parker through [`with_current`]; a
/// `Parker` can also be created on its own for a thread you manage.
#[derive(Debug)]
pub struct Parker {
    inner: Arc<Inner>,
    // A parker belongs to the thread that parks on it.
    _not_send: PhantomData<*const ()>,
}

/// The waking side: cheap to clone, `Send + Sync`, valid forever.
#[derive(Clone, Debug)]
pub struct Unparker {
    inner: Arc<Inner>,
}

impl Default for Parker {
    fn default() -> Self {
        Self::new()
    }
}

impl Parker {
    /// A parker with no token.
    pub fn new() -> Self {
        Parker {
            inner: Arc::new(Inner {
                state: AtomicU32::new(EMPTY),
            }),
            _not_send: PhantomData,
        }
    }

    /// A handle that wakes this parker.
    pub fn unparker(&self) -> Unparker {
        Unparker {
            inner: self.inner.clone(),
        }
    }

    /// Sleeps until unparked (or spuriously).
    pub fn park(&self) {
        self.park_deadline(Deadline::Never)
    }

    /// Sleeps until unparked, `timeout` elapses, or spuriously. `None` and
    /// `Duration::MAX` sleep without a deadline; a zero timeout only consumes
    /// a pending token.
    pub fn park_timeout(&self, timeout: Option<Duration>) {
        self.park_deadline(Deadline::after(timeout))
    }

    pub(crate) fn park_deadline(&self, deadline: Deadline) {
        let state = &self.inner.state;
        // NOTIFIED -> EMPTY consumes a token; EMPTY -> PARKED announces sleep.
        // Acquire pairs with the Release swap in `unpark`: what the unparker
        // wrote before unparking (typically a "you are woken" flag) is
        // visible when we return.
        if state.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return;
        }
        loop {
            sys::wait(state, PARKED, deadline);
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
        }
    }
}

impl Unparker {
    /// Wakes the parker, or leaves a token so that its next park returns.
    pub fn unpark(&self) {
        // Release pairs with the Acquire in `park_deadline`.
        if self.inner.state.swap(NOTIFIED, Ordering::Release) == PARKED {
            sys::wake_one(&self.inner.state);
        }
    }

    /// Whether both handles wake the same parker.
    pub fn same_parker(&self, other: &Unparker) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

thread_local! {
    static CURRENT: Parker = Parker::new();
}

/// Runs `f` with the calling thread's own parker.
///
/// Works in every context a thread can run code, including the destructors
/// of `thread_local!` values: once the thread's own parker has been
/// destroyed (or while it is being destroyed), `f` gets a fresh parker
/// created for this call, as `parking_lot_core` does for its `ThreadData`.
/// That is sound because a parker is only ever reached through the
/// `Unparker` clones handed out during the call: wakers hold `Arc`s to it,
/// so it lives as long as anyone may still unpark it.
pub fn with_current<R>(f: impl FnOnce(&Parker) -> R) -> R {
    let mut f = Some(f);
    // `try_with` fails only during or after the destruction of this
    // thread's `CURRENT`; `f` has not run then.
    match CURRENT.try_with(|parker| (f.take().expect("runs once"))(parker)) {
        Ok(r) => r,
        Err(_) => (f.take().expect("not run by the failed access"))(&Parker::new()),
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::AtomicU32;
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
}
