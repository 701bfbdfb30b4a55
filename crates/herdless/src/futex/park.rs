//! The table's one mechanism: park a thread on a key, unpark waiters of a
//! key, move waiters from one key to another.
//!
//! Kernel counterparts: `futex_wait_setup` + `futex_wait_queue`,
//! `futex_wake`, `futex_requeue`. `parking_lot_core` counterparts: `park`,
//! `unpark_one`, `unpark_all`, `unpark_requeue`, whose callback shape this
//! follows: a user's *validate* runs under the bucket lock before queueing
//! (the futex's "is the word still what I expect", or the condvar's "note
//! which mutex I use"), *before_sleep* runs after queueing and unlocking
//! (the condvar releases its mutex there), *timed_out* runs under the
//! bucket lock when a timeout takes the record out, and an unpark's
//! *decide* runs under the bucket lock and chooses the grant's token (a
//! fair unlock hands the lock over there).
//!
//! [`FutexTable::wait`], [`FutexTable::wake`] and
//! [`FutexTable::cmp_requeue`] are these with trivial callbacks; the
//! [`Mutex`](crate::Mutex) and the [`Condvar`](crate::Condvar) use the
//! callbacks. The ordering arguments are in the [module docs](super).

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::ptr::NonNull;

use super::bucket::KeyedCursor;
use super::calls::{ParkHow, Parked, RequeueOp, Unparked};
use super::table::{Event, FutexTable, Requeued, WakePolicy};
use super::waiter::{with_record, Keyed, Waiter};
use crate::parker;
use crate::sync::{fence, AtomicU32, Ordering};
use crate::sys;
use crate::util::sleeper::{Sleeper, Wakeup};
use crate::util::waiter::{Slept, GRANTED};
use crate::util::wake_list::{Wake, WakeList};

/// Cancels a queued record if `before_sleep` unwinds: the record lives on
/// the unwinding frame and must leave the list first (running the
/// caller's `timed_out`, which keeps its bookkeeping true).
struct CancelOnUnwind<'a, F: FnOnce(usize, bool)> {
    table: &'a FutexTable,
    waiter: &'a Waiter,
    timed_out: Option<F>,
}

impl<F: FnOnce(usize, bool)> Drop for CancelOnUnwind<'_, F> {
    fn drop(&mut self) {
        if let Some(timed_out) = self.timed_out.take() {
            // A grant that raced in is dropped with the unwinding wait.
            let _ = self.table.cancel(self.waiter, timed_out);
        }
    }
}

impl FutexTable {
    /// Parks the calling thread on `key` if `validate()` holds.
    ///
    /// 1. Announce on the key's bucket, fence (A), take the bucket lock.
    /// 2. `validate()` under the lock; `false` returns [`Parked::Invalid`].
    ///    With `how.try_only`, a valid park returns [`Parked::TimedOut`]
    ///    without queueing (a zero timeout).
    /// 3. Queue at the tail (the head with `how.front`, or `how.ahead` when
    ///    the bucket allows it), drop the lock, run
    ///    `before_sleep()`.
    /// 4. Sleep until an unpark grants the record ([`Parked::Unparked`]
    ///    with its token), or until `how.deadline`: then, under the lock of the
    ///    bucket the record is on now (a requeue may have moved it), a grant
    ///    that got there first wins (ARCHITECTURE contract 4); otherwise
    ///    the record leaves and `timed_out(key, was_last)` runs under that
    ///    lock, with the key it was on and whether it was the last waiter
    ///    of that key, and [`Parked::TimedOut`] is returned.
    ///
    /// `validate` and `timed_out` run under a bucket lock: they must not
    /// use this table. If `before_sleep` unwinds, the record leaves the
    /// list before the unwinding continues.
    pub(crate) fn park(
        &self,
        key: usize,
        validate: impl FnOnce() -> bool,
        before_sleep: impl FnOnce(),
        timed_out: impl FnOnce(usize, bool),
        how: ParkHow,
    ) -> Parked {
        self.counters.add(Event::Waits, 1);
        let index = self.index(key);
        let bucket = &self.buckets[index];

        // Announce, then fence (A): pairs with fence (B) in `wake`.
        bucket.announce(1);
        fence(Ordering::SeqCst);

        let mut queue = bucket.queue.lock();
        if !validate() {
            drop(queue);
            bucket.withdraw(1);
            return Parked::Invalid;
        }
        if how.try_only {
            drop(queue);
            bucket.withdraw(1);
            return Parked::TimedOut;
        }
        parker::with_current(|parker| {
            let record = Waiter::new(Sleeper::Thread(parker.unparker()), Keyed::new(key, index));
            // In the thread's record slot (dense memory: the waker's walk
            // touches few pages), or on this frame if that is busy.
            with_record(record, |waiter| {
                let node = NonNull::from(waiter);
                // A rare thread asks to go first (`mutex/rare_parker.rs`);
                // into an empty bucket it is first either way.
                let ahead = !how.front && how.ahead && {
                    let first_anyway = queue.list.front().is_none();
                    let passes = queue.may_pass_head(node);
                    let event = if passes || first_anyway {
                        Event::ParkedAhead
                    } else {
                        Event::AheadRefused
                    };
                    self.counters.add(event, 1);
                    passes
                };
                // SAFETY: the record stays at this address until
                // `with_record` returns, and leaves every list before that:
                // we return only after an unpark removed it (its grant is
                // the last touch) or after we removed it ourselves under its
                // bucket lock (`cancel`, also on an unwinding
                // `before_sleep`).
                unsafe {
                    if how.front || ahead {
                        queue.list.push_front(node)
                    } else {
                        queue.list.push_back(node)
                    }
                };
                drop(queue);

                let mut guard = CancelOnUnwind {
                    table: self,
                    waiter,
                    timed_out: Some(timed_out),
                };
                before_sleep();
                let timed_out = guard
                    .timed_out
                    .take()
                    .expect("taken only here or on unwind");
                drop(guard);

                // SAFETY: the caller keeps the word alive for the park
                // (`ParkHow::broadcast`).
                let broadcast = how.broadcast.map(|word| unsafe { word.as_ref() });
                match waiter.sleep_watching(parker, how.deadline, how.watch, broadcast, || {
                    None::<Infallible>
                }) {
                    Slept::Granted(token) => Parked::Unparked {
                        token,
                        // Relaxed: written under a bucket lock before the
                        // grant, whose Release/Acquire orders it before
                        // this read.
                        key: waiter.payload().key.load(Ordering::Relaxed),
                    },
                    Slept::Stopped(never) => match never {},
                    Slept::DeadlinePassed => self.cancel(waiter, timed_out),
                }
            })
        })
    }

    /// Takes a timed-out (or cancelled) waiter out of the bucket it is on,
    /// unless an unpark got to it first.
    pub(super) fn cancel(&self, waiter: &Waiter, timed_out: impl FnOnce(usize, bool)) -> Parked {
        let keyed = waiter.payload();
        loop {
            // The record may move to another bucket (requeue) until we hold
            // the lock of the bucket it is on; re-check under the lock.
            // Relaxed: the lock acquisition orders the re-check after the
            // requeue's store, which was made under this same lock.
            let index = keyed.bucket.load(Ordering::Relaxed);
            let bucket = &self.buckets[index];
            let mut queue = bucket.queue.lock();
            if keyed.bucket.load(Ordering::Relaxed) != index {
                continue;
            }
            let node = NonNull::from(waiter);
            // SAFETY (of the unlink): not granted (checked under the lock
            // by `cancel_locked`), so still in this bucket's list, which we
            // hold locked.
            let kept = waiter.cancel_locked(|| unsafe { queue.unlink(node) });
            if let Some(token) = kept {
                // The wake wins a tie (contract 4): it has dequeued us and
                // withdrawn us from the count already.
                return Parked::Unparked {
                    token,
                    key: keyed.key.load(Ordering::Relaxed),
                };
            }
            // Relaxed: written only under this lock.
            let key = keyed.key.load(Ordering::Relaxed);
            let was_last = !KeyedCursor::new(&mut queue, key).has_more();
            timed_out(key, was_last);
            drop(queue);
            bucket.withdraw(1);
            return Parked::TimedOut;
        }
    }

    /// Whether a wake of a key in bucket `index` may skip the lock: policy
    /// `WaiterCount`, and nobody announced on the bucket. Issues fence (B).
    #[inline]
    pub(super) fn nobody_waits(&self, index: usize) -> bool {
        if self.policy != WakePolicy::WaiterCount {
            return false;
        }
        // Fence (B): pairs with fence (A) in `park`; orders the caller's
        // store to the word before our read of the count.
        fence(Ordering::SeqCst);
        self.buckets[index].waiters.load(Ordering::Relaxed) == 0
    }

    /// Wakes up to `max` waiters of `key`, oldest first, granting
    /// [`GRANTED`]; returns how many. Takes the lock unless the policy's
    /// lock-free check finds nobody.
    pub(crate) fn unpark(&self, key: usize, max: usize) -> usize {
        let index = self.index(key);
        if self.nobody_waits(index) {
            self.counters.add(Event::WakesSkipped, 1);
            return 0;
        }
        self.unpark_locked(index, key, max, || {})
    }

    /// Takes bucket `index`'s lock, dequeues and grants up to `max`
    /// waiters of `key` (oldest first), runs `under_lock` still under the
    /// lock, and wakes them after dropping it; returns how many.
    fn unpark_locked(
        &self,
        index: usize,
        key: usize,
        max: usize,
        under_lock: impl FnOnce(),
    ) -> usize {
        self.unpark_locked_then(index, key, max, under_lock, |wakes| wakes.wake_all())
    }

    /// [`unpark_locked`](Self::unpark_locked), issuing the wakeups with
    /// `issue` once the lock is dropped.
    fn unpark_locked_then(
        &self,
        index: usize,
        key: usize,
        max: usize,
        under_lock: impl FnOnce(),
        issue: impl FnOnce(&mut WakeList<Wakeup>),
    ) -> usize {
        self.counters.add(Event::WakeLockAcquisitions, 1);
        let bucket = &self.buckets[index];
        let mut wakes = WakeList::new();
        let mut queue = bucket.queue.lock();
        let mut cursor = KeyedCursor::new(&mut queue, key);
        let mut woken = 0;
        while woken < max && cursor.next().is_some() {
            let node = cursor.unlink_current();
            // SAFETY: just unlinked under the bucket lock we hold; a queued
            // record has not been granted.
            unsafe { Waiter::grant(node, GRANTED, &mut wakes) };
            woken += 1;
        }
        under_lock();
        drop(queue);
        bucket.withdraw(woken);
        issue(&mut wakes);
        self.counters.add(Event::Wakeups, woken as u64);
        woken
    }

    /// Wakes the oldest waiter of `key`, always under the bucket lock:
    /// `decide` runs under it, after the dequeue, with what was found
    /// (nobody, or one waiter and whether more remain), and returns the
    /// token the waiter is granted.
    pub(crate) fn unpark_one(
        &self,
        key: usize,
        decide: impl FnOnce(Unparked) -> NonZeroU32,
    ) -> Unparked {
        self.counters.add(Event::WakeLockAcquisitions, 1);
        let bucket = &self.buckets[self.index(key)];
        let mut wakes = WakeList::new();
        let mut queue = bucket.queue.lock();
        let mut cursor = KeyedCursor::new(&mut queue, key);
        let result = match cursor.next() {
            None => {
                decide(Unparked::default());
                Unparked::default()
            }
            Some(_) => {
                let node = cursor.unlink_current();
                let have_more = cursor.has_more();
                // SAFETY: just unlinked under the bucket lock we hold, not
                // granted yet: its owner waits for the grant, so the record
                // is alive.
                let asks = unsafe { node.as_ref() }.wake_handle().task_asks_handoff();
                // A task is handed the lock when it asks (it was woken once
                // in vain), and never on the bucket's clock: asking already
                // bounds how long it waits behind running tasks, and the
                // clock read (`Instant::now`, about 30 ns on this VM) was
                // 15% of a lock held across an `.await` (issue 25). A
                // thread's wake looks at the clock as before.
                let be_fair = match asks {
                    Some(asks) => asks,
                    None => queue.due_for_fairness(),
                };
                let result = Unparked {
                    unparked: 1,
                    have_more,
                    be_fair,
                };
                let token = decide(result);
                // SAFETY: just unlinked under the bucket lock we hold; a
                // queued record has not been granted.
                unsafe { Waiter::grant(node, token, &mut wakes) };
                result
            }
        };
        drop(queue);
        bucket.withdraw(result.unparked);
        wakes.wake_all();
        self.counters.add(Event::Wakeups, result.unparked as u64);
        result
    }

    /// Wakes every waiter of `key`, always under the bucket lock, and runs
    /// `under_lock` there once they are dequeued; returns how many.
    pub(crate) fn unpark_all(&self, key: usize, under_lock: impl FnOnce()) -> usize {
        self.unpark_locked(self.index(key), key, usize::MAX, under_lock)
    }

    /// [`unpark_all`](Self::unpark_all) for waiters that park with
    /// `broadcast` ([`ParkHow::broadcast`]): instead of one wake per
    /// thread, each is marked (`Unparker::mark`), then `broadcast` is
    /// bumped and woken once, which wakes every marked thread that sleeps
    /// (`condvar/broadcast.rs`). A task waiter is woken through its waker
    /// as usual. Returns how many were dequeued.
    pub(crate) fn unpark_all_broadcast(
        &self,
        key: usize,
        broadcast: &AtomicU32,
        under_lock: impl FnOnce(),
    ) -> usize {
        self.unpark_locked_then(self.index(key), key, usize::MAX, under_lock, |wakes| {
            let mut asleep = false;
            wakes.drain_with(|wakeup| match wakeup {
                Wakeup::Thread(unparker) => asleep |= unparker.mark(),
                task => task.wake(),
            });
            if asleep {
                // Release: after every mark (`Parker::park_deadline_either`).
                broadcast.fetch_add(1, Ordering::Release);
                sys::wake_all(broadcast);
            }
        })
    }

    /// Under both bucket locks, asks `validate` what to do; if it says
    /// `Some(op)`, wakes up to `op.wake` waiters of `from_key` and moves up
    /// to `op.requeue` of the rest to wait on `to_key`, in FIFO order, then
    /// runs `finish(done, have_more)` still under the locks, with whether
    /// waiters of `from_key` remain. Returns `None` (nobody touched,
    /// `finish` not run) if `validate` said `None`.
    ///
    /// A moved waiter keeps sleeping until an unpark of `to_key` dequeues
    /// it. `from_key != to_key` (the caller checks).
    pub(crate) fn unpark_requeue(
        &self,
        from_key: usize,
        to_key: usize,
        validate: impl FnOnce() -> Option<RequeueOp>,
        finish: impl FnOnce(Requeued, bool),
    ) -> Option<Requeued> {
        debug_assert_ne!(from_key, to_key);
        let from_index = self.index(from_key);
        let to_index = self.index(to_key);
        let target = &self.buckets[to_index];

        // Contract 2: raise the target's count before anyone moves, and
        // fence, so that a lock-free wake on `to_key` running concurrently
        // cannot see "nobody" while a waiter is in flight between lists: it
        // either sees this pending count and serialises with us on the
        // target lock, or its fence (B) precedes ours and it ran before the
        // requeue began.
        target.announce(1);
        fence(Ordering::SeqCst);
        let mut wakes = WakeList::new();
        let result = self.requeue_locked(
            (from_key, from_index),
            (to_key, to_index),
            validate,
            finish,
            &mut wakes,
        );
        target.withdraw(1);
        wakes.wake_all();
        if let Some(done) = result {
            self.counters.add(Event::Requeues, 1);
            self.counters.add(Event::Wakeups, done.woken as u64);
            self.counters.add(Event::Requeued, done.requeued as u64);
        }
        result
    }

    /// `unpark_requeue` once the target is announced: `(key, bucket index)`
    /// of the source and of the target.
    fn requeue_locked(
        &self,
        (from_key, from_index): (usize, usize),
        (to_key, to_index): (usize, usize),
        validate: impl FnOnce() -> Option<RequeueOp>,
        finish: impl FnOnce(Requeued, bool),
        wakes: &mut WakeList<Wakeup>,
    ) -> Option<Requeued> {
        let source = &self.buckets[from_index];
        let target = &self.buckets[to_index];
        // Lock order: lower bucket index first.
        let (mut from_queue, mut to_queue) = if from_index == to_index {
            (source.queue.lock(), None)
        } else if from_index < to_index {
            let f = source.queue.lock();
            (f, Some(target.queue.lock()))
        } else {
            let t = target.queue.lock();
            (source.queue.lock(), Some(t))
        };

        let op = validate()?;
        let mut cursor = KeyedCursor::new(&mut from_queue, from_key);
        let mut woken = 0;
        while woken < op.wake && cursor.next().is_some() {
            let node = cursor.unlink_current();
            // SAFETY: just unlinked under the source lock we hold; a queued
            // record has not been granted.
            unsafe { Waiter::grant(node, GRANTED, wakes) };
            woken += 1;
        }
        source.withdraw(woken);

        let mut requeued = 0;
        while requeued < op.requeue {
            let Some(node) = cursor.next() else {
                break;
            };
            // SAFETY: `node` is in the locked source list: live; shared
            // access to the payload's atomics.
            let keyed = unsafe { node.as_ref() }.payload();
            // Written under the source lock (and the target's, held too);
            // every reader of `key` holds the lock of the bucket it is on.
            keyed.key.store(to_key, Ordering::Relaxed);
            if let Some(to_queue) = to_queue.as_mut() {
                let node = cursor.unlink_current();
                // Count on the target before leaving the source, so the
                // waiter is never counted nowhere.
                target.announce(1);
                // SAFETY: unlinked from the source just now; it goes into
                // the target list, whose lock we also hold, and leaves it
                // as any record does (an unpark, or its own cancel, which
                // follows `bucket` below to this lock).
                unsafe { to_queue.list.push_back(node) };
                source.withdraw(1);
                // Written under both locks; a cancelling waiter re-reads it
                // under the lock it took.
                keyed.bucket.store(to_index, Ordering::Relaxed);
            }
            requeued += 1;
        }
        let done = Requeued { woken, requeued };
        finish(done, cursor.has_more());
        Some(done)
    }
}
