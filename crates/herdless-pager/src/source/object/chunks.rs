//! The chunks of one object in this process: single flight per chunk.
//!
//! Each chunk has a slot with its own lock and condition variable, so a
//! thread waiting for chunk 3 is woken when chunk 3 arrives and by
//! nothing else (no herd: everyone a slot wakes wants that chunk).
//!
//! # States (each changed only under the slot's lock)
//! ```text
//!   Absent ──queue──▶ Queued ──claim (prefetch task)──▶ Fetching ──complete──▶ Done
//!     │                 │                                  ▲
//!     └──── claim (a reader: demand) ──────────────────────┘
//! ```
//! Exactly one party moves a slot to `Fetching` (whoever holds the lock
//! when it is `Absent` or `Queued`), and that party's fetch — a task on
//! the source's runtime that always ends by calling
//! [`complete`](Chunks::complete), also when it panics — is the only one
//! for that chunk: single flight. A reader that finds `Fetching` waits on
//! the slot's condition variable; `complete` sets the final state and
//! notifies under the lock, so a waiter either saw the final state when it
//! looked or is asleep on the condition variable when it is notified (no
//! lost wakeup: both happen under the lock). `Done` is final, and its
//! outcome (the bytes, or why there are none) is the slot's `OnceLock`,
//! set before: a failed chunk is not fetched again during this restore
//! (its pages are poisoned on access; see `fetch.rs` for the retries
//! before).
//!
//! # Looking without the lock
//! The prefetch asks, for every range it has left, whether its chunk is
//! here ([`settled`](Chunks::settled)) and where its bytes are
//! ([`peek`](Chunks::peek)), many times per arrival: those two read a
//! slot's outcome without its lock: `complete` sets the `OnceLock` before
//! it takes the lock to set `Done` (std's `OnceLock` publishes the value
//! whole to whoever finds it set). A reader that does not find it yet
//! looks again later, or waits under the lock, where `Done` is set after
//! it.
//!
//! # Arrivals
//! Besides each slot's own wake, every fetch that ends is counted once,
//! under one more lock, and wakes whoever waits for *any* arrival (a
//! prefetch that found nothing ready: `restore/prefetch.rs`). The count
//! is raised after the slot's final state is set, and read under the same
//! lock a waiter sleeps under: a waiter that saw count `n` and sleeps is
//! woken by the arrival that makes it `n + 1` (no lost wakeup), and finds
//! that chunk settled when it looks again.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use bytes::Bytes;

/// Why a chunk could not be had (the message, credentials already
/// blanked), shared by every reader of it.
pub(crate) type Failure = Arc<str>;

enum State {
    Absent,
    Queued,
    Fetching,
    /// The outcome is in the slot's `OnceLock`.
    Done,
}

struct Slot {
    state: Mutex<State>,
    done: Condvar,
    /// The fetch's outcome, set once, before the state is `Done` (module
    /// doc).
    outcome: OnceLock<Result<Bytes, Failure>>,
}

impl Slot {
    /// The outcome of a `Done` slot.
    fn outcome(&self) -> Result<Bytes, Failure> {
        match self.outcome.get() {
            Some(Ok(b)) => Ok(b.clone()),
            Some(Err(f)) => Err(Arc::clone(f)),
            // `Done` is set after the outcome, and both are final.
            None => Err("the chunk's fetch ended without an outcome".into()),
        }
    }
}

/// What a reader asking for a chunk must do.
pub(crate) enum Claim {
    /// Here it is.
    Ready(Bytes),
    /// It failed for good.
    Failed(Failure),
    /// The caller now owns the fetch (the slot is `Fetching`): start it,
    /// then [`wait`](Chunks::wait).
    Fetch,
    /// Someone else is fetching it: [`wait`](Chunks::wait).
    Wait,
}

/// Every chunk's slot, and the count of fetches ended (module doc).
pub(crate) struct Chunks {
    slots: Box<[Slot]>,
    arrived: Mutex<u64>,
    any: Condvar,
}

fn lock(slot: &Slot) -> MutexGuard<'_, State> {
    // A panic while holding a slot's lock leaves a state that is still one
    // of the five: carry on with it.
    slot.state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Chunks {
    /// `n` chunks, none here yet.
    pub(crate) fn new(n: usize) -> Self {
        Chunks {
            slots: (0..n)
                .map(|_| Slot {
                    state: Mutex::new(State::Absent),
                    done: Condvar::new(),
                    outcome: OnceLock::new(),
                })
                .collect(),
            arrived: Mutex::new(0),
            any: Condvar::new(),
        }
    }

    /// Chunks in the object.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// A reader's claim on chunk `i` (module doc).
    pub(crate) fn claim(&self, i: usize) -> Claim {
        let slot = &self.slots[i];
        let mut s = lock(slot);
        match &*s {
            State::Done => match slot.outcome() {
                Ok(b) => Claim::Ready(b),
                Err(f) => Claim::Failed(f),
            },
            State::Fetching => Claim::Wait,
            State::Absent | State::Queued => {
                *s = State::Fetching;
                Claim::Fetch
            }
        }
    }

    /// Marks chunk `i` for the prefetch if nobody has asked for it yet;
    /// whether it was.
    pub(crate) fn queue(&self, i: usize) -> bool {
        let mut s = lock(&self.slots[i]);
        if matches!(*s, State::Absent) {
            *s = State::Queued;
            true
        } else {
            false
        }
    }

    /// The prefetch's claim on chunk `i`, queued earlier: whether it now
    /// owns the fetch (a reader may have claimed it first).
    pub(crate) fn claim_queued(&self, i: usize) -> bool {
        let mut s = lock(&self.slots[i]);
        if matches!(*s, State::Queued) {
            *s = State::Fetching;
            true
        } else {
            false
        }
    }

    /// Chunk `i` if it is here, without waiting or locking (module doc).
    pub(crate) fn peek(&self, i: usize) -> Option<&Bytes> {
        self.slots[i].outcome.get()?.as_ref().ok()
    }

    /// Whether chunk `i`'s fetch has ended (here, or failed for good),
    /// without locking (module doc).
    pub(crate) fn settled(&self, i: usize) -> bool {
        self.slots[i].outcome.get().is_some()
    }

    /// Ends the fetch of chunk `i` (called once, by its owner) and wakes
    /// everyone waiting for it.
    pub(crate) fn complete(&self, i: usize, outcome: Result<Bytes, Failure>) {
        let slot = &self.slots[i];
        // Published first, for the readers that do not lock (module doc);
        // `complete` is called once per chunk, so the cell is empty here.
        let _ = slot.outcome.set(outcome);
        let mut s = lock(slot);
        *s = State::Done;
        slot.done.notify_all();
        drop(s);
        let mut n = self.arrived.lock().unwrap_or_else(PoisonError::into_inner);
        *n += 1;
        self.any.notify_all();
    }

    /// Fetches ended so far.
    pub(crate) fn arrivals(&self) -> u64 {
        *self.arrived.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until more than `seen` fetches have ended, or `patience` has
    /// passed; the count then.
    pub(crate) fn wait_arrival(&self, seen: u64, patience: std::time::Duration) -> u64 {
        let n = self.arrived.lock().unwrap_or_else(PoisonError::into_inner);
        let (n, _) = self
            .any
            .wait_timeout_while(n, patience, |n| *n <= seen)
            .unwrap_or_else(PoisonError::into_inner);
        *n
    }

    /// Waits until the fetch of chunk `i` (claimed by the caller or by
    /// someone else) has ended.
    pub(crate) fn wait(&self, i: usize) -> Result<Bytes, Failure> {
        let slot = &self.slots[i];
        let mut s = lock(slot);
        loop {
            match &*s {
                State::Done => return slot.outcome(),
                // Queued or Absent cannot be seen here: the waiter (or
                // someone before it) claimed the slot, and nothing moves
                // it back.
                State::Fetching | State::Queued | State::Absent => {
                    s = slot.done.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_claim_owns_the_fetch_and_every_waiter_gets_its_bytes() {
        let chunks = Arc::new(Chunks::new(4));
        assert!(matches!(chunks.claim(2), Claim::Fetch));
        assert!(matches!(chunks.claim(2), Claim::Wait), "single flight");
        assert!(!chunks.queue(2), "a fetched chunk is not queued");
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let c = Arc::clone(&chunks);
                std::thread::spawn(move || c.wait(2))
            })
            .collect();
        chunks.complete(2, Ok(Bytes::from_static(b"chunk two")));
        for w in waiters {
            assert_eq!(w.join().unwrap().unwrap(), Bytes::from_static(b"chunk two"));
        }
        assert!(matches!(chunks.claim(2), Claim::Ready(_)));
        assert!(chunks.peek(1).is_none());
    }

    #[test]
    fn a_reader_takes_over_a_queued_chunk_and_the_prefetch_then_skips_it() {
        let chunks = Chunks::new(2);
        assert!(chunks.queue(0));
        assert!(matches!(chunks.claim(0), Claim::Fetch), "demand goes first");
        assert!(!chunks.claim_queued(0));
        assert!(chunks.queue(1));
        assert!(chunks.claim_queued(1));
        chunks.complete(1, Err("gone".into()));
        assert!(matches!(chunks.claim(1), Claim::Failed(f) if &*f == "gone"));
    }

    #[test]
    fn every_ended_fetch_is_an_arrival_and_wakes_who_waits_for_one() {
        use std::time::Duration;
        let chunks = Arc::new(Chunks::new(3));
        assert_eq!(chunks.arrivals(), 0);
        assert!(!chunks.settled(0) && chunks.peek(0).is_none());
        let waiter = {
            let c = Arc::clone(&chunks);
            // A lost wakeup would show as this waiting out its minute.
            std::thread::spawn(move || c.wait_arrival(0, Duration::from_secs(60)))
        };
        assert!(matches!(chunks.claim(1), Claim::Fetch));
        chunks.complete(1, Ok(Bytes::from_static(b"one")));
        assert_eq!(waiter.join().unwrap(), 1);
        assert!(chunks.settled(1));
        assert_eq!(chunks.peek(1).map(|b| &b[..]), Some(&b"one"[..]));
        // Past `seen` already: at once, whatever the patience.
        assert_eq!(chunks.wait_arrival(0, Duration::from_secs(3600)), 1);
        assert!(matches!(chunks.claim(2), Claim::Fetch));
        chunks.complete(2, Err("gone".into()));
        assert_eq!(chunks.arrivals(), 2);
        assert!(
            chunks.settled(2) && chunks.peek(2).is_none(),
            "failed: settled, no bytes"
        );
        assert_eq!(
            chunks.wait_arrival(2, Duration::ZERO),
            2,
            "none more: the patience ends it"
        );
    }
}
