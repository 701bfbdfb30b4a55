//! Parking a *task* in the futex table: its waiter record is pinned inside
//! its future ([`TaskPark`]) instead of in a thread's record slot, and is
//! queued, granted, requeued and cancelled in the same bucket list, by the
//! same code, as the threads' records (`park.rs`). The async
//! [`Mutex`](crate::Mutex) (`mutex/lock_async.rs`) is its user.
//!
//! A thread's `park` is one call that sleeps; a task's is three steps that
//! its future takes at its polls and its drop (ARCHITECTURE contract 13):
//!
//! | thread (`FutexTable::park`) | task ([`TaskPark`]) |
//! |---|---|
//! | announce, fence (A), bucket lock, `validate`, queue (tail, or head with `front`) | [`TaskPark::park`]: the same, with the task's waker stored in the record before it is queued |
//! | sleep until granted | [`TaskPark::poll`]: the grant's token, or `None` after the waker is up to date |
//! | timeout: under the lock of the bucket the record is on now (a requeue may have moved it), the grant wins, else leave and run `timed_out(key, was_last)` | [`TaskPark::cancel`] (the future dropped): the same code, `FutexTable::cancel` |
//!
//! # The waker
//! The record's waker slot (`util::sleeper`) is written by the future only
//! before the record is queued or under the lock of the bucket the record
//! is on; an unpark clones it under that lock before it publishes the
//! grant (contract 3). So a poll that does not find the grant and holds a
//! new waker takes the bucket lock (following the record's `bucket` as a
//! cancel does: a requeue may move it), looks at the grant again (final
//! there) and stores the waker: a grant made before cloned the old waker
//! and is seen by that look; one made after clones the new one.
//!
//! # Re-parking
//! A record that was granted is in no list, and its granter no longer
//! touches it (the grant's Release store was its last access): the future
//! may queue it again (a woken mutex waiter that lost the lock goes back to
//! the head of the queue). [`TaskPark::park`] re-arms it and writes its key
//! and bucket afresh.

use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::task::Waker;

use super::calls::Parked;
use super::table::{Event, FutexTable};
use super::waiter::{Keyed, Waiter};
use crate::sync::{fence, Ordering};
use crate::util::sleeper::{Sleeper, WakerSlot};

/// A task's place in a [`FutexTable`]: its waiter record, built at its
/// first park and pinned inside the task's future from then on.
///
/// Invariant: `queued` is true exactly while the record is in a bucket
/// list or was granted and the grant not yet seen by [`poll`](Self::poll)
/// or [`cancel`](Self::cancel). Its owner must not let it be dropped while
/// queued without calling `cancel` first (the owner has bookkeeping to do
/// with the answer); `Drop` takes a queued record out as a backstop.
pub(crate) struct TaskPark {
    table: &'static FutexTable,
    /// Built at the first park (a future that never parks never builds
    /// one); never moved out, dropped in place.
    record: Option<Waiter>,
    queued: bool,
}

impl TaskPark {
    /// No record yet, on `table`.
    pub(crate) const fn new(table: &'static FutexTable) -> Self {
        TaskPark {
            table,
            record: None,
            queued: false,
        }
    }

    /// Whether the record is queued (or granted and the grant not seen).
    pub(crate) fn is_queued(&self) -> bool {
        self.queued
    }

    fn record(&self) -> &Waiter {
        self.record.as_ref().expect("a queued task has its record")
    }

    fn slot(&self) -> &WakerSlot {
        self.record()
            .wake_handle()
            .slot()
            .expect("a task's record has a waker slot")
    }

    /// Queues this task on `key` (at the head of the bucket with `front`)
    /// if `validate()` holds under the bucket lock, with `waker` as the
    /// waker a grant wakes and, with `asks_handoff`, asking the unpark that
    /// dequeues it for the lock itself ([`Unparked::be_fair`]); returns whether it queued (`false`: `validate`
    /// said no, nothing changed). The steps of `FutexTable::park` before
    /// the sleep: announce, fence (A), lock, validate, queue.
    ///
    /// `validate` runs under the bucket lock: it must not use the table.
    ///
    /// # Safety
    /// `self` is pinned: it stays at this address until it is dropped
    /// (the bucket list links to the record inside it), and it is not
    /// queued.
    pub(crate) unsafe fn park(
        &mut self,
        key: usize,
        validate: impl FnOnce() -> bool,
        front: bool,
        asks_handoff: bool,
        waker: &Waker,
    ) -> bool {
        debug_assert!(!self.queued, "a queued task parks again");
        let table = self.table;
        table.counters.add(Event::Waits, 1);
        let index = table.index(key);
        let bucket = &table.buckets[index];
        let record: &Waiter = match &self.record {
            Some(record) => record,
            None => self
                .record
                .insert(Waiter::new(Sleeper::task(), Keyed::new(key, index))),
        };
        // In no list (never queued, or granted: its granter is done with
        // it), so nobody else reads these; the push below, under the
        // bucket lock, publishes them to the bucket's wakers.
        let keyed = record.payload();
        keyed.key.store(key, Ordering::Relaxed);
        keyed.bucket.store(index, Ordering::Relaxed);
        let slot = record
            .wake_handle()
            .slot()
            .expect("a task's record has a waker slot");
        // SAFETY: we own the record and it is in no list.
        unsafe { slot.set(waker) };
        record.wake_handle().set_asks_handoff(asks_handoff);

        // Announce, then fence (A): pairs with fence (B) in `wake`, as in
        // `FutexTable::park`.
        bucket.announce(1);
        fence(Ordering::SeqCst);
        let mut queue = bucket.queue.lock();
        if !validate() {
            drop(queue);
            bucket.withdraw(1);
            return false;
        }
        record.rearm();
        let node = NonNull::from(record);
        // SAFETY: the record is pinned inside `self` (caller contract) and
        // in no list; it leaves the list before `self` is gone: an unpark
        // dequeues it (its grant is the last touch), or `cancel` (from the
        // owner, or our `Drop`) removes it under its bucket lock.
        unsafe {
            if front {
                queue.list.push_front(node);
            } else {
                queue.list.push_back(node);
            }
        }
        drop(queue);
        self.queued = true;
        true
    }

    /// Polls a queued record: the grant's token once an unpark granted it
    /// (the record is then in no list, and no longer queued), or `None`
    /// with `waker` stored as the one a grant will wake (module docs).
    pub(crate) fn poll(&mut self, waker: &Waker) -> Option<NonZeroU32> {
        debug_assert!(self.queued, "polling a task that is not queued");
        if let Some(token) = self.record().granted() {
            self.queued = false;
            return Some(token);
        }
        if self.slot().will_wake(waker) {
            // A grant after our look wakes this very waker.
            return None;
        }
        let keyed = self.record().payload();
        loop {
            // The bucket the record is on now, as in `FutexTable::cancel`:
            // re-checked under the lock, where a requeue would have
            // changed it.
            let index = keyed.bucket.load(Ordering::Relaxed);
            let queue = self.table.buckets[index].queue.lock();
            if keyed.bucket.load(Ordering::Relaxed) != index {
                continue;
            }
            // Under the lock a grant is final.
            if let Some(token) = self.record().granted() {
                drop(queue);
                self.queued = false;
                return Some(token);
            }
            // SAFETY: we own the record and hold the lock of the bucket
            // list it is in.
            unsafe { self.slot().set(waker) };
            drop(queue);
            return None;
        }
    }

    /// Takes a queued record out (its future is dropped), unless an unpark
    /// got to it first: `None` if it left (then `left(key, was_last)` ran
    /// under the bucket lock, with whether it was the last waiter of its
    /// key), or the token of a grant that won (ARCHITECTURE contract 4);
    /// either way it is no longer queued. O(1): one unlink under the lock
    /// of the bucket the record is on.
    pub(crate) fn cancel(&mut self, left: impl FnOnce(usize, bool)) -> Option<NonZeroU32> {
        debug_assert!(self.queued, "cancelling a task that is not queued");
        let token = match self.record().granted() {
            Some(token) => Some(token),
            None => match self.table.cancel(self.record(), left) {
                Parked::Unparked { token, .. } => Some(token),
                Parked::TimedOut => None,
                Parked::Invalid => unreachable!("a queued record cancels or is granted"),
            },
        };
        self.queued = false;
        token
    }
}

impl Drop for TaskPark {
    fn drop(&mut self) {
        if self.queued {
            // The owner cancels first (with its bookkeeping); this only
            // keeps the list from linking to freed memory.
            let _ = self.cancel(|_, _| {});
        }
    }
}

impl std::fmt::Debug for TaskPark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskPark")
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}
