//! A spinning writer's claim (`WRITE_INTENT`): a writer that spins for a
//! lock that readers hold keeps new readers out while they drain, then
//! takes the lock, instead of waiting for a moment when the stealing
//! readers happen to be gone. The kernel's rwsem and parking_lot's
//! `RwLock` both let the writer in first this way; without it, measured on
//! 16 cores (issue 23, stop 36), readers kept a reader-held lock from a
//! waiting writer for up to the 4 ms hand-off time, and herdless's
//! `RwSem` ran at 0.81–0.94× parking_lot's at 8–16 threads.
//!
//! The claim is on unless `HERDLESS_RWSEM_TUNING=intent=0` (`tuning.rs`,
//! with what it gained on 16 cores). Its protocol is in the module docs,
//! "A writer's claim".

use crossbeam_utils::Backoff;

use super::count::{
    CLAIM_BLOCKERS, HANDOFF, HOLDERS, READERS, UPGRADABLE, WAITERS, WRITER, WRITE_BLOCKERS,
    WRITE_INTENT,
};
use super::raw::RawRwSem;
use super::tuning::RwSemTuning;
use super::waiter::Kind;
use crate::sync::Ordering;

impl RawRwSem {
    /// Whether this semaphore's spinning writers claim a reader-held lock.
    pub(super) fn writers_claim(&self) -> bool {
        #[cfg(loom)]
        {
            self.claims
        }
        #[cfg(not(loom))]
        {
            RwSemTuning::get().writer_intent
        }
    }

    /// How many rounds an acquirer of `kind` spins. Under loom only a
    /// claiming writer spins, two rounds: enough for the model to
    /// place a claim, a reader blocked by it, the drain and the give-up in
    /// every order, while every other spin stays out of the models (they
    /// would only multiply the interleavings of the same code).
    pub(super) fn spin_rounds(&self, kind: Kind) -> u32 {
        if cfg!(loom) {
            if kind == Kind::Write && self.writers_claim() {
                2
            } else {
                0
            }
        } else {
            RwSemTuning::get().spin_rounds
        }
    }

    /// A writer's bounded spin (`AtomicCount`): takes the lock when no one
    /// holds it; with claims on, claims a lock that only readers hold and
    /// takes it once they are gone. Stops when a hand-off is asked for, or
    /// when `granted()` says a grant arrived (a queued writer's: the lock
    /// is then ours already, and this returns `false`). Never returns with
    /// the claim still set.
    pub(super) fn spin_write(&self, granted: impl Fn() -> bool) -> bool {
        let claims = self.writers_claim();
        let backoff = Backoff::new();
        let mut claimed = false;
        for _ in 0..self.spin_rounds(Kind::Write) {
            pause(&backoff);
            let c = self.count.load(Ordering::Relaxed);
            if claimed {
                // Nobody else sets WRITER or UPGRADABLE while we claim,
                // no grant is made (`grant_locked` grants nothing under a
                // claim), and no reader gets in: the readers only drain.
                // The take below still checks every holder, so a claim
                // lost by a bug would cost its effect, never exclusion.
                debug_assert_eq!(c & (WRITER | UPGRADABLE | WRITE_INTENT), WRITE_INTENT);
                if c & HANDOFF != 0 {
                    // A sleeper asked for the queue's order: let it be.
                    break;
                }
                if c & HOLDERS != 0 {
                    continue;
                }
                // The readers are gone: the lock is ours to take, in the
                // CAS that drops the claim (WAITERS and NUDGED are kept:
                // our release routes on them as any writer's does).
                // Acquire pairs with the Release of every reader that
                // left: their critical sections happen-before ours. A
                // failure is a reader backing out of its fast path, or a
                // flag moving: look again.
                if self
                    .count
                    .compare_exchange(
                        c,
                        (c & !WRITE_INTENT) | WRITER,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            if c & HANDOFF != 0 || granted() {
                return false;
            }
            if c & WRITE_BLOCKERS == 0 {
                if self.try_cas(Kind::Write) {
                    return true;
                }
            } else if claims && c & CLAIM_BLOCKERS == 0 && c & READERS != 0 {
                // Readers alone hold it: claim it. Relaxed: the claim
                // publishes nothing; it only keeps newcomers out, and each
                // of them reads it with an RMW (the readers' fetch_add) or
                // a CAS that fails on it.
                claimed = self
                    .count
                    .compare_exchange(c, c | WRITE_INTENT, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok();
            }
        }
        if claimed {
            self.drop_claim();
        }
        false
    }

    /// Gives a claim up without taking the lock, and grants whoever queued
    /// behind it. A waiter that queued while we claimed found nothing to
    /// grant (`grant_locked` grants nothing under a claim), and a reader
    /// leaving meanwhile skipped the wait lock; both did one RMW on the
    /// word, as this clear is: if theirs came first, `prev` shows WAITERS
    /// and we come to grant; if ours came first, the waiter's own grant
    /// check after its RMW sees the claim gone (the module docs, "A
    /// writer's claim").
    fn drop_claim(&self) {
        let prev = self.count.fetch_and(!WRITE_INTENT, Ordering::Relaxed);
        debug_assert!(prev & WRITE_INTENT != 0, "a claim dropped twice");
        if prev & WAITERS != 0 {
            self.wake_waiters();
        }
    }
}

/// One round of spinning: exponential backoff. Under loom nothing: the
/// spin is two rounds, so it ends without the yield loom otherwise needs to
/// schedule the others, and a yield would let loom run the claimant again
/// only once every other thread is blocked, hiding the claims that end
/// while readers still hold.
fn pause(backoff: &Backoff) {
    #[cfg(loom)]
    let _ = backoff;
    #[cfg(not(loom))]
    backoff.spin();
}
