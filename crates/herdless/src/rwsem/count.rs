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
/// The upgradable reader holds the lock (at most one; shares with readers,
/// excludes writers and other upgradable readers).
pub(super) const UPGRADABLE: usize = 1 << 5;
/// One reader holds the lock (the reader count starts at bit 6).
pub(super) const READER: usize = 1 << 6;
/// The reader count.
pub(super) const READERS: usize = !(READER - 1);
/// Every bit that says someone holds the lock.
pub(super) const HOLDERS: usize = WRITER | UPGRADABLE | READERS;
/// What keeps a new reader out (fast path and stealing alike).
pub(super) const READ_BLOCKERS: usize = WRITER | HANDOFF | UPGRADING;
/// What keeps a new upgradable reader out.
pub(super) const UPGRADABLE_BLOCKERS: usize = WRITER | UPGRADABLE | HANDOFF;
/// What keeps a new writer out: any holder, or a hand-off request.
pub(super) const WRITE_BLOCKERS: usize = HOLDERS | HANDOFF;
