//! The `AtomicCount` state word's bits (the layout and the state table are
//! in the module docs, "The count word").

/// A writer holds the lock.
pub(super) const WRITER: usize = 1;
/// Someone waits: the wait list is not empty, or the upgradable holder
/// waits in the upgrade slot. Set and cleared only under the wait lock.
pub(super) const WAITERS: usize = 1 << 1;
/// No stealing: the lock goes to the queue in order. Set under the wait
/// lock by a waiter that has waited longer than
/// [`HANDOFF_AFTER`](super::HANDOFF_AFTER), or by a fair unlock that finds
/// waiters; cleared by the next grant, or when the last waiter leaves.
pub(super) const HANDOFF: usize = 1 << 2;
/// The writer at the head was nudged and has not gone back to sleep: a
/// release need not come to wake it. Set under the wait lock by the nudge;
/// cleared by that writer (before its last try ahead of sleeping), by its
/// leaving, by any grant, and by an upgrader taking the slot ahead of it.
pub(super) const NUDGED: usize = 1 << 3;
/// The upgradable holder waits in the upgrade slot for the readers to
/// drain: new readers stay out (so the upgrade is not starved), and the
/// last reader to leave comes to grant it. Set and cleared only under the
/// wait lock, exactly while the slot is occupied; implies `UPGRADABLE`.
pub(super) const UPGRADING: usize = 1 << 4;
/// A writer spinning for a lock that only readers hold has claimed it:
/// new readers and upgradable readers stay out while the readers drain,
/// other writers stay out too, and the claimant alone takes the lock once
/// the readers are gone (parking_lot's and the kernel's writer-first
/// spinning). Set by a CAS only while readers alone hold the lock and no
/// hand-off or upgrade is pending (so never beside WRITER or UPGRADABLE);
/// cleared by its claimant, in the CAS that makes it the writer or when
/// it stops spinning, never by anyone else. Not with
/// `HERDLESS_RWSEM_TUNING=intent=0` (`tuning.rs`); see the module docs,
/// "A writer's claim".
pub(super) const WRITE_INTENT: usize = 1 << 5;
/// The upgradable reader holds the lock (at most one; shares with readers,
/// excludes writers and other upgradable readers).
pub(super) const UPGRADABLE: usize = 1 << 6;
/// One reader holds the lock (the reader count starts at bit 7).
pub(super) const READER: usize = 1 << 7;
/// The reader count.
pub(super) const READERS: usize = !(READER - 1);
/// Every bit that says someone holds the lock.
pub(super) const HOLDERS: usize = WRITER | UPGRADABLE | READERS;
/// What keeps a new reader out (fast path and stealing alike).
pub(super) const READ_BLOCKERS: usize = WRITER | HANDOFF | UPGRADING | WRITE_INTENT;
/// What keeps a new upgradable reader out.
pub(super) const UPGRADABLE_BLOCKERS: usize = WRITER | UPGRADABLE | HANDOFF | WRITE_INTENT;
/// What keeps a new writer out: any holder, a hand-off request, or another
/// writer's claim.
pub(super) const WRITE_BLOCKERS: usize = HOLDERS | HANDOFF | WRITE_INTENT;
/// What a spinning writer may claim beside: readers only, no hand-off or
/// upgrade pending, no other claim (WAITERS and NUDGED may be set).
pub(super) const CLAIM_BLOCKERS: usize = WRITER | UPGRADABLE | HANDOFF | UPGRADING | WRITE_INTENT;
