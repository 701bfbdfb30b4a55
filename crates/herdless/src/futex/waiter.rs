//! The futex table's part of a waiter record (kernel: the key and the
//! `lock_ptr` of `futex_q`); the record itself is the shared
//! [`util::waiter::Waiter`](crate::util::waiter::Waiter), woken through a
//! [`Sleeper`]: a parked thread's `Unparker` (the record in the thread's
//! record slot, below), or a task's waker slot (the record pinned in the
//! task's future, `park_async.rs`).

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::pin::pin;
use std::sync::atomic::{compiler_fence, Ordering};

use crate::sync::{thread_local, AtomicUsize};
use crate::util::sleeper::Sleeper;
use crate::util::slot_pool::SlotPool;
use crate::util::waiter;

/// A sleeping thread, or a waiting task, in a futex bucket. Threads and
/// tasks queue in the same FIFO list and are granted by the same unparks;
/// a waker takes the handle (`Unparker` or a clone of the task's `Waker`)
/// under the bucket lock (`util::sleeper`).
pub(super) type Waiter = waiter::Waiter<Keyed, Sleeper>;

/// Which word a record waits on and which bucket holds it.
///
/// Invariants (who writes what, under which lock):
/// - `key`: only under the lock of the bucket the record is on; a requeue
///   changes it (holding both bucket locks) when it moves the record to
///   another word.
/// - `bucket`: the index of the bucket whose list holds the record; written
///   by a requeue while it holds *both* bucket locks, read by the waiter
///   without a lock to find which lock to take (and re-checked under it).
pub(super) struct Keyed {
    pub(super) key: AtomicUsize,
    pub(super) bucket: AtomicUsize,
}

impl Keyed {
    pub(super) fn new(key: usize, bucket: usize) -> Self {
        Keyed {
            key: AtomicUsize::new(key),
            bucket: AtomicUsize::new(bucket),
        }
    }
}

/// Room for one futex waiter record, in a [`SlotPool`]: the calling thread
/// parks with its record here rather than on its stack, so that the
/// records a waker walks sit side by side on a few pages instead of one
/// cold page (one TLB miss) per sleeper. The lab's `futex-wake` measured a
/// cold page at about 0.5 µs of the waker's time per wake on its VM (README,
/// `futex-wake`).
#[repr(align(64))]
pub(super) struct RecordSlot {
    record: std::cell::UnsafeCell<MaybeUninit<Waiter>>,
}

// One record to a 64-byte slot, a page of 64 slots (`SlotPool`): the
// thread-or-task wake handle (`Sleeper`, 24 bytes) keeps the record at
// 64 bytes; a larger record would halve the density the waker's walk
// relies on.
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<RecordSlot>() == 64);

// SAFETY: the record is written and dropped only by the thread holding the
// slot (`ThreadRecord`, below), and while it is in a bucket list it is
// shared exactly as a stack record is (`Waiter` is `Sync`).
unsafe impl Sync for RecordSlot {}

impl RecordSlot {
    fn fresh() -> Self {
        RecordSlot {
            record: std::cell::UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

#[cfg(not(loom))]
static RECORDS: SlotPool<RecordSlot> = SlotPool::new();
#[cfg(loom)]
loom::lazy_static! {
    static ref RECORDS: SlotPool<RecordSlot> = SlotPool::new();
}

/// The calling thread's record slot, taken on its first park and given
/// back when the thread exits.
struct ThreadRecord {
    slot: &'static RecordSlot,
    /// A park is using the slot (only this thread reads or writes it). A
    /// park that finds it set (one nested in a signal handler that
    /// interrupted a park) uses a stack record.
    in_use: Cell<bool>,
}

impl Drop for ThreadRecord {
    fn drop(&mut self) {
        // No park of this thread is running (a thread-local is destroyed
        // between calls, never during one), so no record is in the slot
        // and no list links to it.
        debug_assert!(!self.in_use.get());
        // Under loom, thread-locals are destroyed after the execution's
        // statics (the pool among them): the slot is leaked with the rest
        // of that execution.
        if !cfg!(loom) {
            RECORDS.give_back(self.slot);
        }
    }
}

thread_local! {
    static RECORD: ThreadRecord = ThreadRecord {
        slot: RECORDS.take(RecordSlot::fresh),
        in_use: Cell::new(false),
    };
}

/// Drops the record in the slot and clears `in_use` when the park using
/// the slot returns or unwinds.
struct Release<'a> {
    thread: &'a ThreadRecord,
    place: *mut MaybeUninit<Waiter>,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        // SAFETY: `with_record` wrote the record before building this
        // guard, and it is in no list any more: `f` returns only after the
        // record left its list (granted, or cancelled under the bucket
        // lock), and unwinds only through `park`'s `CancelOnUnwind`, which
        // takes it out first. Dropped once: the flag is cleared next.
        unsafe { (*self.place).assume_init_drop() };
        // The record is gone before a signal handler may take the slot.
        compiler_fence(Ordering::SeqCst);
        self.thread.in_use.set(false);
    }
}

/// Runs `f` with `record` placed in the calling thread's record slot, or
/// pinned on this stack frame if the slot is busy or gone (a park nested
/// in a signal handler that interrupted a park, or one made while the
/// thread's thread-locals are being destroyed). Either way the record
/// stays at one address until `f` returns.
///
/// `f` must not return, nor unwind, while the record is in a list.
pub(super) fn with_record<R>(record: Waiter, f: impl FnOnce(&Waiter) -> R) -> R {
    let mut f = Some(f);
    let mut record = Some(record);
    let in_slot = RECORD.try_with(|thread| {
        if thread.in_use.replace(true) {
            return None;
        }
        // A signal handler that interrupts us from here on must see the
        // flag set before we write the slot.
        compiler_fence(Ordering::SeqCst);
        let place = thread.slot.record.get();
        // SAFETY: `in_use` was clear, so the slot holds no record and no
        // list links to it; only this thread writes it, and the guard
        // drops the record before anyone else may use the slot.
        let waiter: &Waiter = unsafe { (*place).write(record.take().expect("not moved yet")) };
        let _release = Release { thread, place };
        Some((f.take().expect("runs once"))(waiter))
    });
    match in_slot {
        Ok(Some(r)) => r,
        _ => {
            let waiter = pin!(record.take().expect("not placed in the slot"));
            (f.take().expect("not run in the slot"))(&waiter)
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::parker;

    fn record() -> Waiter {
        parker::with_current(|p| Waiter::new(Sleeper::Thread(p.unparker()), Keyed::new(1, 0)))
    }

    /// A thread's parks reuse its slot; a park nested in one (a signal
    /// handler's) gets a record of its own on the stack.
    #[test]
    fn parks_reuse_the_thread_slot_and_nested_parks_get_their_own() {
        let first = with_record(record(), |w| std::ptr::from_ref(w) as usize);
        let again = with_record(record(), |w| std::ptr::from_ref(w) as usize);
        assert_eq!(first, again, "one slot per thread");
        with_record(record(), |outer| {
            let inner = with_record(record(), |w| std::ptr::from_ref(w) as usize);
            assert_ne!(std::ptr::from_ref(outer) as usize, inner);
        });
        assert_eq!(
            first,
            with_record(record(), |w| std::ptr::from_ref(w) as usize)
        );
    }
}
