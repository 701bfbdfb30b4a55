//! Per-page state shared by every handler thread (and by
//! [`Pager::populate`](crate::Pager::populate) callers): one `AtomicU64` per
//! page, so that two threads never install the same page from the source and
//! fault-around never touches a page it does not own.
//!
//! # The word
//! ```text
//!  63                                   2 1 0
//! +--------------------------------------+---+
//! |  stamp (PRESENT only)                |kind|
//! +--------------------------------------+---+
//! ```
//! | kind | meaning | set by | left by |
//! |---|---|---|---|
//! | `MISSING` | not installed from the source by us | start; an owner giving a claim back; `REMOVE` in minor mode | `claim` (CAS) |
//! | `INSTALLING` | claimed: exactly one thread is filling it | `claim` (CAS from `MISSING`) | its owner (`publish`/`release`, CAS), or `discard` (swap) |
//! | `PRESENT` | filled from the source; `stamp` = the `reads` ticket counter sampled just after the fill | `publish` (CAS from `INSTALLING`) | `discard` (swap) |
//! | `DISCARDED` | the program dropped it: it reads as zeros from now on and is never filled from the source again | `discard` (swap) | never (missing mode) |
//!
//! Only the owner of a claim leaves `INSTALLING` by CAS; `discard` may take
//! the page away from it at any time, which the owner sees as a failed CAS
//! (see `handler/discard.rs` for what it then does). All operations are `AcqRel`/
//! `Acquire`: the state itself carries no data the threads exchange (page
//! contents go through the kernel), so the orderings only need each page's
//! word to be coherent; the ticket argument that gives `stamp` its meaning is
//! in `handler/discard.rs`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Not installed from the source.
pub(crate) const MISSING: u64 = 0;
/// Claimed by one installer.
pub(crate) const INSTALLING: u64 = 1;
/// Installed from the source (stamp in the upper bits).
pub(crate) const PRESENT: u64 = 2;
/// Discarded by the program: zeros from now on.
pub(crate) const DISCARDED: u64 = 3;

const KIND: u64 = 3;

/// The kind of a state word.
pub(crate) fn kind(word: u64) -> u64 {
    word & KIND
}

/// The stamp of a `PRESENT` word.
pub(crate) fn stamp(word: u64) -> u64 {
    word >> 2
}

/// One state word per page.
pub(crate) struct PageStates {
    words: Box<[AtomicU64]>,
}

impl PageStates {
    /// `pages` pages, all `MISSING`.
    pub(crate) fn new(pages: usize) -> Self {
        PageStates {
            words: (0..pages).map(|_| AtomicU64::new(MISSING)).collect(),
        }
    }

    /// The current word of `page`.
    pub(crate) fn load(&self, page: usize) -> u64 {
        self.words[page].load(Ordering::Acquire)
    }

    /// Whether `page` is `MISSING` (nobody filled or discarded it).
    pub(crate) fn is_missing(&self, page: usize) -> bool {
        kind(self.load(page)) == MISSING
    }

    /// `MISSING → INSTALLING`: the caller becomes the page's only installer.
    /// False if the page is in any other state.
    pub(crate) fn claim(&self, page: usize) -> bool {
        self.words[page]
            .compare_exchange(MISSING, INSTALLING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// `INSTALLING → PRESENT(stamp)`, by the owner after the page was filled.
    /// False if a discard took the page meanwhile (it is then `DISCARDED`,
    /// or `MISSING` in minor mode).
    pub(crate) fn publish(&self, page: usize, stamp: u64) -> bool {
        self.words[page]
            .compare_exchange(
                INSTALLING,
                (stamp << 2) | PRESENT,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// `INSTALLING → MISSING`, by the owner that did not fill the page. A
    /// failure means a discard took the page, which is then not the owner's
    /// business any more.
    pub(crate) fn release(&self, page: usize) {
        let _ = self.words[page].compare_exchange(
            INSTALLING,
            MISSING,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Any state → `to` (`DISCARDED`, or `MISSING` in minor mode), for a
    /// `REMOVE` event; returns the previous word.
    pub(crate) fn discard(&self, page: usize, to: u64) -> u64 {
        self.words[page].swap(to, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_claim_wins_and_a_discard_defeats_the_owner() {
        let s = PageStates::new(2);
        assert!(s.claim(0));
        assert!(!s.claim(0), "a second claim on an INSTALLING page");
        assert_eq!(s.discard(0, DISCARDED), INSTALLING);
        assert!(!s.publish(0, 7), "the owner lost the page to the discard");
        s.release(0);
        assert_eq!(s.load(0), DISCARDED, "release does not undo a discard");
        assert!(!s.claim(0), "a discarded page is never claimed again");

        assert!(s.claim(1));
        assert!(s.publish(1, 5));
        assert_eq!(kind(s.load(1)), PRESENT);
        assert_eq!(stamp(s.load(1)), 5);
    }
}
