//! The reader-writer lock of the `RwLockSwap` ready list (internal; kernel:
//! `rwlock_t`, here `ep->lock`).
//!
//! Readers are the poll callbacks: many at once, each holding the lock for
//! an exchange and a store. The writer is the harvester splicing the list
//! out: one at a time (callers hold the poller's scan lock, and writers
//! also serialize on `gate`). It is writer-preferring: once a writer has
//! announced itself, new readers wait, so a stream of callbacks cannot
//! starve the consumer (qrwlock gives the kernel the same guarantee, which
//! the seed relies on).
//!
//! ```text
//!   state:  bit 31 WRITER (a writer holds the lock or waits for readers
//!                          to drain: no new reader may enter)
//!           bits 0..31     readers inside (or backing out)
//!   gate:   a SpinParkLock the writer holds for its whole critical
//!           section; a reader that finds WRITER set waits on it, then
//!           retries (spin briefly, then sleep: the lock's own futex word)
//!   drained: futex word the writer sleeps on while readers drain; the
//!           last reader out stores 1 and wakes it
//! ```

use crossbeam_utils::Backoff;

use crate::deadline::Deadline;
use crate::lock::SpinParkLock;
use crate::stats::SlowCounter;
use crate::sync::{AtomicU32, Ordering};
use crate::sys;

const WRITER: u32 = 1 << 31;
const READERS: u32 = WRITER - 1;

pub(crate) struct RwLock {
    state: AtomicU32,
    gate: SpinParkLock<()>,
    drained: AtomicU32,
    /// Read acquisitions that found a writer (and had to back out and wait).
    contended_reads: SlowCounter,
    /// Write acquisitions that found readers inside (and had to wait).
    contended_writes: SlowCounter,
}

impl RwLock {
    pub(crate) fn new() -> Self {
        RwLock {
            state: AtomicU32::new(0),
            gate: SpinParkLock::new(()),
            drained: AtomicU32::new(0),
            contended_reads: SlowCounter::new(),
            contended_writes: SlowCounter::new(),
        }
    }

    /// Takes the lock shared. One locked add when no writer is around.
    #[inline]
    pub(crate) fn read(&self) -> ReadGuard<'_> {
        loop {
            // Acquire pairs with the Release in `WriteGuard::drop`: what the
            // last writer did (the splice) is visible inside.
            let state = self.state.fetch_add(1, Ordering::Acquire);
            if state & WRITER == 0 {
                return ReadGuard { lock: self };
            }
            self.read_contended();
        }
    }

    #[cold]
    fn read_contended(&self) {
        self.contended_reads.add(1);
        // Back out: we are not inside. We may be the last one the writer
        // waits for.
        self.read_release();
        // The writer holds the gate until it unlocks: waiting for the gate
        // is waiting for the writer (spin, then sleep on the gate's word).
        drop(self.gate.lock());
    }

    fn read_release(&self) {
        // Release pairs with the writer's Acquire on `state`: our list
        // writes happen-before its splice. Acquire: if a writer is waiting,
        // its reset of `drained` happens-before our store of 1 below (see
        // `wait_for_readers`). Both are free on x86 (one locked add).
        let state = self.state.fetch_sub(1, Ordering::AcqRel);
        if state == WRITER | 1 {
            // The last reader out while a writer waits (the writer set
            // WRITER after our increment, else we would not count). The
            // wake cannot be lost: see `wait_for_readers`; the futex checks
            // `drained == 0` and sleeps atomically with respect to the wake.
            self.drained.store(1, Ordering::Release);
            sys::wake_one(&self.drained);
        }
    }

    /// Takes the lock exclusively: waits for the readers inside to leave.
    pub(crate) fn write(&self) -> WriteGuard<'_> {
        let gate = self.gate.lock();
        // AcqRel: Acquire pairs with the readers' Release decrements (the
        // fetch_or reads the last one, and every decrement is an RMW, so in
        // the release sequence of the earlier ones): every list write made
        // under the read lock is visible to us. Release: see
        // `wait_for_readers`.
        let state = self.state.fetch_or(WRITER, Ordering::AcqRel);
        debug_assert!(state & WRITER == 0, "writers are serialized by the gate");
        if state & READERS != 0 {
            self.contended_writes.add(1);
            self.wait_for_readers();
        }
        WriteGuard {
            lock: self,
            _gate: gate,
        }
    }

    #[cold]
    fn wait_for_readers(&self) {
        let backoff = Backoff::new();
        loop {
            if !cfg!(loom) && !backoff.is_completed() {
                backoff.snooze();
                // Acquire: as in `write`.
                if self.state.load(Ordering::Acquire) & READERS == 0 {
                    return;
                }
                continue;
            }
            // Sleep. Reset the word, *then* read `state` with an RMW (it
            // reads the latest value). If readers are still inside, the
            // decrement that empties the lock comes after our RMW in
            // `state`'s order and, Acquire reading our Release (the
            // decrements extend its release sequence), happens-after our
            // reset: its store of 1 is the later one, so the futex sees it
            // or its wake finds us asleep. Earlier signals may be wiped by
            // the reset; the RMW saw their decrements, so nothing is lost.
            self.drained.store(0, Ordering::Relaxed);
            if self.state.fetch_or(WRITER, Ordering::AcqRel) & READERS == 0 {
                return;
            }
            sys::wait(&self.drained, 0, Deadline::Never);
        }
    }

    /// Read acquisitions that found a writer (0 without `stats`).
    pub(crate) fn contended_reads(&self) -> u64 {
        self.contended_reads.sum()
    }

    /// Write acquisitions that waited for readers (0 without `stats`).
    pub(crate) fn contended_writes(&self) -> u64 {
        self.contended_writes.sum()
    }
}

pub(crate) struct ReadGuard<'a> {
    lock: &'a RwLock,
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.lock.read_release();
    }
}

pub(crate) struct WriteGuard<'a> {
    lock: &'a RwLock,
    _gate: crate::lock::LockGuard<'a, ()>,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        // Release pairs with the readers' Acquire increments. The gate is
        // dropped after this (field order), letting waiting readers retry.
        self.lock.state.fetch_and(!WRITER, Ordering::Release);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, UnsafeCell};
    use loom::thread;

    struct Shared {
        lock: RwLock,
        value: UnsafeCell<u32>,
    }
    // SAFETY: `value` is accessed only under `lock` (reads shared, the
    // write exclusive), which is what loom's cell checks.
    unsafe impl Sync for Shared {}

    /// Readers and the writer exclude each other, and a writer waiting for
    /// readers (or readers waiting for the writer) is always woken.
    #[test]
    fn writer_excludes_readers_and_nobody_is_stranded() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let shared = Arc::new(Shared {
                lock: RwLock::new(),
                value: UnsafeCell::new(0),
            });
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let shared = shared.clone();
                    thread::spawn(move || {
                        let _g = shared.lock.read();
                        // SAFETY: shared access under the read lock.
                        shared.value.with(|v| unsafe { *v })
                    })
                })
                .collect();
            {
                let _g = shared.lock.write();
                // SAFETY: exclusive access under the write lock.
                shared.value.with_mut(|v| unsafe { *v = 1 });
            }
            for r in readers {
                let seen = r.join().unwrap();
                assert!(seen <= 1);
            }
        });
    }
}
