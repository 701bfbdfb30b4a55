//! The chunks of one object in this process: single flight per chunk.
//!
//! Each chunk has a slot with its own lock and condition variable, so a
//! thread waiting for chunk 3 is woken when chunk 3 arrives and by
//! nothing else (no herd: everyone a slot wakes wants that chunk).
//!
//! # States (each changed only under the slot's lock)
//! ```text
//!   Absent ──queue──▶ Queued ──claim (prefetch task)──▶ Fetching ──complete──▶ Ready(bytes)
//!     │                 │                                  ▲            └──────▶ Failed(why)
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
//! lost wakeup: both happen under the lock). `Ready` and `Failed` are
//! final: a failed chunk is not fetched again during this restore (its
//! pages are poisoned on access; see `fetch.rs` for the retries before).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

/// Why a chunk could not be had (the message, credentials already
/// blanked), shared by every reader of it.
pub(crate) type Failure = Arc<str>;

enum State {
    Absent,
    Queued,
    Fetching,
    Ready(Bytes),
    Failed(Failure),
}

struct Slot {
    state: Mutex<State>,
    done: Condvar,
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

/// Every chunk's slot.
pub(crate) struct Chunks {
    slots: Box<[Slot]>,
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
                })
                .collect(),
        }
    }

    /// Chunks in the object.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// A reader's claim on chunk `i` (module doc).
    pub(crate) fn claim(&self, i: usize) -> Claim {
        let mut s = lock(&self.slots[i]);
        match &*s {
            State::Ready(b) => Claim::Ready(b.clone()),
            State::Failed(f) => Claim::Failed(Arc::clone(f)),
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

    /// Chunk `i` if it is here, without waiting.
    pub(crate) fn peek(&self, i: usize) -> Option<Bytes> {
        match &*lock(&self.slots[i]) {
            State::Ready(b) => Some(b.clone()),
            _ => None,
        }
    }

    /// Whether chunk `i`'s fetch has ended (here, or failed for good).
    pub(crate) fn settled(&self, i: usize) -> bool {
        matches!(&*lock(&self.slots[i]), State::Ready(_) | State::Failed(_))
    }

    /// Ends the fetch of chunk `i` (called once, by its owner) and wakes
    /// everyone waiting for it.
    pub(crate) fn complete(&self, i: usize, outcome: Result<Bytes, Failure>) {
        let slot = &self.slots[i];
        let mut s = lock(slot);
        *s = match outcome {
            Ok(b) => State::Ready(b),
            Err(f) => State::Failed(f),
        };
        slot.done.notify_all();
    }

    /// Waits until the fetch of chunk `i` (claimed by the caller or by
    /// someone else) has ended.
    pub(crate) fn wait(&self, i: usize) -> Result<Bytes, Failure> {
        let slot = &self.slots[i];
        let mut s = lock(slot);
        loop {
            match &*s {
                State::Ready(b) => return Ok(b.clone()),
                State::Failed(f) => return Err(Arc::clone(f)),
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
}
