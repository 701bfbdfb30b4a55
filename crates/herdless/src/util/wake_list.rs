//! The wake list: collect under the lock, wake after unlock (seed 001).
//!
//! A waker that dequeues sleepers under a wait-list lock pushes a handle for
//! each onto a `WakeList`, drops the lock, then calls [`WakeList::wake_all`].
//! Woken threads therefore never run straight into the lock their waker still
//! holds, and the lock's hold time does not include syscalls.
//!
//! Rules for the code that fills it (ARCHITECTURE contract 3):
//! 1. Take the handle (an [`Unparker`] copy: the address of the sleeper's
//!    parker slot, never freed) *before* publishing the grant / "woken"
//!    flag to the waiter.
//! 2. Publishing the grant is the last touch of the waiter's record: the
//!    waiter may see it, return and free the record at once, before the wake.
//! 3. The wake itself may find the thread already running, or busy in some
//!    other wait: that is a spurious wakeup there, which every wait loop
//!    tolerates.
//!
//! The first [`INLINE`] handles live inline; larger batches spill to the heap
//! so that one critical section can always finish its work. Dropping a list
//! that still holds handles wakes them, so no wakeup is lost on any path.

use std::mem::MaybeUninit;

use crate::parker::Unparker;

/// Handles kept without allocating.
pub(crate) const INLINE: usize = 32;

/// Something that can be woken once.
pub(crate) trait Wake {
    fn wake(self);
}

impl Wake for Unparker {
    fn wake(self) {
        self.unpark()
    }
}

/// What a waiter record keeps to wake its owner, and gives out as a
/// [`Wake`] handle to a waker holding the list's lock (rule 1 above): an
/// [`Unparker`] gives a copy of itself; a record that may belong to a task
/// keeps a slot its owner updates and gives out a clone of the task's
/// current `Waker` (`util::sleeper`).
pub(crate) trait WakeSource {
    /// The handle a waker pushes onto its [`WakeList`].
    type Handle: Wake;
    /// Takes a handle. Called under the lock of the list holding the
    /// record (the only lock under which the source may change).
    fn handle(&self) -> Self::Handle;
}

impl WakeSource for Unparker {
    type Handle = Unparker;
    #[inline]
    fn handle(&self) -> Unparker {
        self.clone()
    }
}

/// Wakeups deferred until after a lock is dropped.
///
/// Slots `inline[woken..len]` are initialised (pushed, not yet woken); the
/// rest are not. Nothing is written on construction: a wake that collects
/// one handle touches one slot, not the whole array (this list is built on
/// every wake, including the poll callback's hot path).
pub(crate) struct WakeList<W: Wake = Unparker> {
    inline: [MaybeUninit<W>; INLINE],
    len: usize,
    woken: usize,
    spill: Vec<W>,
}

impl<W: Wake> WakeList<W> {
    pub(crate) fn new() -> Self {
        WakeList {
            inline: [const { MaybeUninit::uninit() }; INLINE],
            len: 0,
            woken: 0,
            spill: Vec::new(),
        }
    }

    /// Defers a wakeup.
    #[inline]
    pub(crate) fn push(&mut self, waker: W) {
        if self.len < INLINE {
            self.inline[self.len].write(waker);
            self.len += 1;
        } else {
            self.spill.push(waker);
        }
    }

    /// Number of deferred wakeups (the tests check the bookkeeping).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.len - self.woken + self.spill.len()
    }

    /// Issues every deferred wakeup, in the order they were pushed. Call it
    /// after dropping the lock the waiters were dequeued under.
    pub(crate) fn wake_all(&mut self) {
        self.drain_with(W::wake);
    }

    /// Hands every deferred wakeup to `f` instead of issuing it, in the
    /// order they were pushed (the condvar's broadcast marks its threads
    /// and wakes them with one system call: `condvar/broadcast.rs`). Call
    /// it after dropping the lock, as [`wake_all`](Self::wake_all).
    #[inline]
    pub(crate) fn drain_with(&mut self, mut f: impl FnMut(W)) {
        while self.woken < self.len {
            let slot = &self.inline[self.woken];
            // Advance first: if `f` panics, `drop` goes on from the next
            // slot and never reads this one again.
            self.woken += 1;
            // SAFETY: slots `woken..len` are initialised (struct docs), and
            // this one is read once: `woken` has moved past it.
            f(unsafe { slot.assume_init_read() });
        }
        self.len = 0;
        self.woken = 0;
        if !self.spill.is_empty() {
            for w in self.spill.drain(..) {
                f(w);
            }
        }
    }
}

impl<W: Wake> Drop for WakeList<W> {
    fn drop(&mut self) {
        self.wake_all();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    struct Probe(u32, Rc<RefCell<Vec<u32>>>);
    impl Wake for Probe {
        fn wake(self) {
            self.1.borrow_mut().push(self.0);
        }
    }

    #[test]
    fn wakes_in_push_order_across_the_spill() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut list = WakeList::new();
        let n = INLINE as u32 + 5;
        for i in 0..n {
            list.push(Probe(i, log.clone()));
        }
        assert_eq!(list.len(), n as usize);
        assert!(log.borrow().is_empty(), "nothing is woken before wake_all");
        list.wake_all();
        assert_eq!(*log.borrow(), (0..n).collect::<Vec<_>>());
        assert_eq!(list.len(), 0);
    }

    #[test]
    fn drop_wakes_what_is_left() {
        let log = Rc::new(RefCell::new(Vec::new()));
        {
            let mut list = WakeList::new();
            list.push(Probe(7, log.clone()));
        }
        assert_eq!(*log.borrow(), [7]);
    }
}
