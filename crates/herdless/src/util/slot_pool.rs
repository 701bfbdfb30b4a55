//! Per-thread slots in dense memory that is never freed: where a sleeping
//! thread keeps what its waker touches (its parker's state word, its futex
//! waiter record).
//!
//! Why dense: a waker that wakes N sleepers one at a time touches each
//! sleeper's memory once, cold. When that memory is scattered (a record on
//! each sleeper's stack, a parker in each thread's malloc arena), every
//! touch is also a TLB miss, and on the lab's 2-vCPU VM (nested paging) a
//! cold page costs the waker about 0.5 µs, as much as a third of the
//! `FUTEX_WAKE` itself (lab README, `futex-wake`). Slots carved 64 to a
//! chunk from one allocation share pages, so those misses mostly go away.
//!
//! Why never freed: a slot can be reached after its owner is done with it
//! (a late unpark of a parker slot is harmless, see
//! [`parker`](crate::parker)), so its memory must stay valid forever. A
//! slot given back is handed to the next thread that asks, never returned
//! to the allocator. This is the same bargain as `parking_lot_core`'s
//! futex word in its thread data, minus the `Arc`.
//!
//! The pool's lock is taken when a thread first needs a slot and when it
//! gives it back (thread exit, a dropped `Parker`), never on a wait or wake
//! path.
//!
//! Under `--cfg loom` every pool lives for one model execution
//! (`loom::lazy_static`) and allocates one slot at a time, so loom sees
//! slots recycled between threads exactly as they are outside it.

#[cfg(not(loom))]
use std::sync::{Mutex, PoisonError};

#[cfg(loom)]
use loom::sync::Mutex;

/// Slots allocated together (one 4 KiB page of 64-byte slots).
#[cfg(not(loom))]
const CHUNK: usize = 64;
#[cfg(loom)]
const CHUNK: usize = 1;

/// A free list of `&'static T`, refilled a chunk at a time.
pub(crate) struct SlotPool<T: 'static> {
    free: Mutex<Vec<&'static T>>,
}

impl<T: Sync + 'static> SlotPool<T> {
    /// An empty pool (const: pools are statics).
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        SlotPool {
            free: Mutex::new(Vec::new()),
        }
    }

    /// An empty pool (loom: built by `loom::lazy_static`).
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        SlotPool {
            free: Mutex::new(Vec::new()),
        }
    }

    /// A slot nobody else holds: a recycled one, or one of a fresh chunk
    /// built with `fresh`. The caller resets what a previous holder left
    /// in it.
    pub(crate) fn take(&self, fresh: impl Fn() -> T) -> &'static T {
        let mut free = self.lock();
        if let Some(slot) = free.pop() {
            return slot;
        }
        // Leaked on purpose: slots are never freed (module docs).
        let chunk: &'static [T] = (0..CHUNK).map(|_| fresh()).collect::<Vec<T>>().leak();
        free.extend(chunk[1..].iter().rev());
        &chunk[0]
    }

    /// Gives a slot back for the next [`take`](Self::take). The caller
    /// holds it no longer; others may still reach it (module docs).
    pub(crate) fn give_back(&self, slot: &'static T) {
        self.lock().push(slot);
    }

    #[cfg(not(loom))]
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<&'static T>> {
        // Nothing panics while the lock is held (a failed allocation
        // aborts): a poisoned list is still a valid list.
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(loom)]
    fn lock(&self) -> loom::sync::MutexGuard<'_, Vec<&'static T>> {
        self.free.lock().unwrap()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slots_are_dense_distinct_and_recycled() {
        static POOL: SlotPool<u64> = SlotPool::new();
        let a = POOL.take(|| 7);
        let b = POOL.take(|| 7);
        assert!(!std::ptr::eq(a, b), "two holders never share a slot");
        let distance = (b as *const u64 as usize).abs_diff(a as *const u64 as usize);
        assert_eq!(
            distance,
            std::mem::size_of::<u64>(),
            "one chunk, side by side"
        );
        POOL.give_back(a);
        assert!(
            std::ptr::eq(POOL.take(|| 7), a),
            "a slot given back is reused"
        );
    }
}
