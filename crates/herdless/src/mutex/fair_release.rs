//! The fair releases: [`RawMutex::release_fair`] (lock_api's
//! `unlock_fair`) and `bump`, which hand the lock, still held, to the
//! oldest sleeper so that no running thread barges in ahead of it. The
//! protocol they keep is `raw.rs`'s ("Fairness").

use super::raw::{RawMutex, HANDOFF, LOCKED, PARKED};
use crate::futex::{address, FutexTable, Unparked};
use crate::sync::Ordering;
use crate::util::waiter::GRANTED;

impl RawMutex {
    /// Releases the lock *fairly*: if a thread sleeps on it, the lock is
    /// handed to the oldest sleeper directly and stays held, so no running
    /// thread can barge in ahead of it (the sleeper is woken after the
    /// table's bucket lock is dropped, as every wake is). Examples: [`RawMutex`].
    ///
    /// # Safety
    /// The caller holds the lock.
    pub unsafe fn release_fair(&self) {
        // Relaxed: a parker that sets PARKED after this look is seen by
        // the plain release's `fetch_sub`.
        if self.word().load(Ordering::Relaxed) & PARKED == 0 {
            // SAFETY: the caller holds the lock.
            unsafe { self.release() };
            return;
        }
        self.hand_over_held();
    }

    /// Yields the lock to the oldest sleeper if there is one (fair unlock,
    /// then lock again); with nobody asleep, does nothing.
    ///
    /// # Safety
    /// The caller holds the lock.
    // Called by the lock_api impl only, which loom builds leave out.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) unsafe fn bump(&self) {
        // Relaxed: a hint; a sleeper that arrives just after we looked
        // will get the lock at our next unlock.
        if self.word().load(Ordering::Relaxed) & PARKED != 0 {
            // SAFETY: the caller holds the lock; we take it back before
            // returning.
            unsafe { self.release_fair() };
            self.acquire();
        }
    }

    /// With the lock held by the caller (for itself, or taken back on a
    /// sleeper's behalf), hands it to the oldest sleeper, still held, or
    /// releases it if nobody sleeps. Under the bucket lock, PARKED is
    /// cleared when the last sleeper leaves.
    fn hand_over_held(&self) {
        FutexTable::global().unpark_one(address(self.word()), |found: Unparked| {
            // Under the bucket lock of the word: a parker validates the word
            // under this same lock, so it sees what we store here.
            if found.unparked == 0 {
                // Nobody queued: a plain release that clears PARKED (exact).
                // WAKING and ASKING, if set, are another thread's.
                // Release pairs with the next owner's Acquire.
                self.word().fetch_and(!(LOCKED | PARKED), Ordering::Release);
                return GRANTED;
            }
            if !found.have_more {
                Self::clear_parked(self.word());
            }
            // Still LOCKED: the woken thread owns it (token HANDOFF). The
            // grant (Release) publishes our critical section to it.
            HANDOFF
        });
    }
}
