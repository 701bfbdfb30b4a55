//! loom models of the reader-writer semaphore.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p herdless --release --test loom_rwsem`.
//! Each model is named after the interleaving it pins and runs on the
//! default configuration without spinning writers' claims
//! (`HERDLESS_RWSEM_TUNING=intent=0`), on the seed's "before" (generic
//! count, wake under the lock), and on the default with claims, as
//! programs run it outside loom (the claim's own models are last). A
//! lost grant shows up as a loom deadlock report; a
//! grant without the happens-before edge as a data race on the protected
//! `UnsafeCell`. Under loom a timed wait sleeps once and then times out, so
//! loom places the timeout anywhere after the waiter has queued.
#![cfg(loom)]

use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use herdless::rwsem::RawRwSem;
use herdless::variants::{Counting, RwSemConfig, WakeTiming};

/// One semaphore set-up a model runs on: a configuration, and whether
/// spinning writers claim a reader-held lock (outside loom the default,
/// `HERDLESS_RWSEM_TUNING=intent=0` turns it off; under loom the claimant
/// spins two rounds).
#[derive(Clone, Copy, Debug)]
struct Variant {
    config: RwSemConfig,
    claims: bool,
}

const VARIANTS: [Variant; 3] = [
    Variant {
        config: RwSemConfig::DEFAULT,
        claims: false,
    },
    Variant {
        config: RwSemConfig::new(Counting::Generic, WakeTiming::WakeUnderLock),
        claims: false,
    },
    Variant {
        config: RwSemConfig::DEFAULT,
        claims: true,
    },
];

/// A long timeout: under loom it fires whenever loom chooses anyway.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Runs `f` on each of `VARIANTS` at the given preemption bound. Set
/// `HERDLESS_LOOM_COUNTING=generic`, `atomic` or `claims` to run one only,
/// e.g. to see which one a mutation breaks.
fn model(bound: usize, f: impl Fn(Variant) + Sync + Send + 'static) {
    let f = std::sync::Arc::new(f);
    let only = std::env::var("HERDLESS_LOOM_COUNTING").ok();
    let wanted = |v: &Variant| match only.as_deref() {
        Some("generic") => v.config.counting == Counting::Generic,
        Some("atomic") => v.config.counting == Counting::AtomicCount && !v.claims,
        Some("claims") => v.claims,
        _ => true,
    };
    for variant in VARIANTS.into_iter().filter(wanted) {
        let f = f.clone();
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(bound);
        builder.check(move || f(variant));
    }
}

/// A semaphore and the data it protects.
struct Guarded {
    sem: RawRwSem,
    data: UnsafeCell<u32>,
}

// SAFETY: `data` is only touched under `sem` (and loom checks that it is).
unsafe impl Sync for Guarded {}
// SAFETY: as above.
unsafe impl Send for Guarded {}

impl Guarded {
    fn new(v: Variant) -> Arc<Self> {
        Arc::new(Guarded {
            sem: if v.claims {
                RawRwSem::with_writer_claims(v.config)
            } else {
                RawRwSem::with_config(v.config)
            },
            data: UnsafeCell::new(0),
        })
    }

    /// Reads the data; the caller holds the lock (shared or exclusive).
    fn get(&self) -> u32 {
        // SAFETY: the caller holds the lock, so no writer runs.
        self.data.with(|p| unsafe { *p })
    }

    /// Bumps the data; the caller holds the lock exclusive.
    fn bump(&self) {
        // SAFETY: the caller holds the lock exclusive.
        self.data.with_mut(|p| unsafe { *p += 1 })
    }

    fn read_once(&self) -> u32 {
        self.sem.read();
        let v = self.get();
        // SAFETY: taken just above.
        unsafe { self.sem.read_unlock() };
        v
    }

    fn write_once(&self) {
        self.sem.write();
        self.bump();
        // SAFETY: taken just above.
        unsafe { self.sem.write_unlock() };
    }

    fn assert_idle(&self) {
        assert!(!self.sem.is_locked());
        assert_eq!(self.sem.waiters(), 0);
    }
}

/// A thread that runs `f` on `g`'s semaphore and data.
fn spawn_on<T: Send + 'static>(
    g: &Arc<Guarded>,
    f: impl FnOnce(&Guarded) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let g = g.clone();
    thread::spawn(move || f(&g))
}

/// "No lost grant": the last reader leaves just as a writer queues. One of
/// them must see the other (their RMWs on the count word are ordered).
#[test]
fn last_reader_leaving_races_a_writer_queueing() {
    model(3, |variant| {
        let g = Guarded::new(variant);
        g.sem.read();
        let writer = spawn_on(&g, Guarded::write_once);
        // SAFETY: taken above.
        unsafe { g.sem.read_unlock() };
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// ARCHITECTURE contract 3: granted readers may see the grant and return (their
/// records gone) before the granter's wakeups run; the writer's data is
/// visible to them through the grant alone.
#[test]
fn granted_readers_may_return_before_their_wakeup() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.write();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                thread::spawn(move || g.read_once())
            })
            .collect();
        g.bump();
        // SAFETY: taken above.
        unsafe { g.sem.write_unlock() };
        for r in readers {
            assert_eq!(r.join().unwrap(), 1, "the writer's value");
        }
        g.assert_idle();
    });
}

/// A grant racing a timeout: the waiter either holds the lock (and the
/// waiter behind it is served after it) or timed out holding nothing (and
/// the waiter behind it is served at once).
#[test]
fn timeout_racing_grant_is_exactly_one_outcome() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.write();
        let timed = thread::spawn({
            let g = g.clone();
            move || match g.sem.write_timeout(TIMEOUT) {
                Ok(()) => {
                    g.bump();
                    // SAFETY: acquired just above.
                    unsafe { g.sem.write_unlock() };
                    true
                }
                Err(_) => false,
            }
        });
        let reader = spawn_on(&g, Guarded::read_once);
        // SAFETY: taken above.
        unsafe { g.sem.write_unlock() };
        let won = timed.join().unwrap();
        let seen = reader.join().unwrap();
        assert!(seen <= u32::from(won));
        assert_eq!(g.read_once(), u32::from(won));
        g.assert_idle();
    });
}

/// ARCHITECTURE contract 11 (a cancelled head): a writer at the head times
/// out while readers hold the lock; the reader queued behind it must be
/// granted then, not at the next release (we only release after it got
/// in).
#[test]
fn cancelled_head_writer_lets_the_reader_behind_it_in() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.read();
        let writer = thread::spawn({
            let g = g.clone();
            move || {
                g.sem
                    .write_timeout(TIMEOUT)
                    .expect_err("a reader holds the lock throughout");
            }
        });
        let reader = spawn_on(&g, Guarded::read_once);
        writer.join().unwrap();
        assert_eq!(reader.join().unwrap(), 0);
        // SAFETY: taken above.
        unsafe { g.sem.read_unlock() };
        g.assert_idle();
    });
}

/// `downgrade` grants a queued reader while the downgrader still holds the
/// lock shared (we join the reader before releasing).
#[test]
fn downgrade_grants_the_queued_reader() {
    model(3, |variant| {
        let g = Guarded::new(variant);
        g.sem.write();
        let reader = spawn_on(&g, Guarded::read_once);
        g.bump();
        // SAFETY: held exclusive; afterwards shared.
        unsafe { g.sem.downgrade() };
        assert_eq!(reader.join().unwrap(), 1);
        // SAFETY: the shared hold left by downgrade.
        unsafe { g.sem.read_unlock() };
        g.assert_idle();
    });
}

/// A thread granted lock A may run on before A's waker unparks it, and
/// queue on lock B: the late unpark from A is then a spurious wakeup during
/// the wait for B, and B's own grant must still reach it.
#[test]
fn granted_while_still_on_another_locks_wake_list() {
    model(3, |variant| {
        let a = Guarded::new(variant);
        let b = Guarded::new(variant);
        a.sem.write();
        b.sem.write();
        let t = thread::spawn({
            let (a, b) = (a.clone(), b.clone());
            move || {
                a.write_once();
                b.write_once();
            }
        });
        // SAFETY: taken above.
        unsafe { a.sem.write_unlock() };
        // SAFETY: taken above.
        unsafe { b.sem.write_unlock() };
        t.join().unwrap();
        assert_eq!((a.read_once(), b.read_once()), (1, 1));
        a.assert_idle();
        b.assert_idle();
    });
}

/// A reader's fast path that finds a writer backs out through the release
/// path; its transient count may make a release see "not the last holder",
/// so the back-out itself must grant.
#[test]
fn reader_backing_out_of_the_fast_path_never_swallows_a_grant() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.write();
        let reader = spawn_on(&g, Guarded::read_once);
        let writer = spawn_on(&g, Guarded::write_once);
        // SAFETY: taken above.
        unsafe { g.sem.write_unlock() };
        let seen = reader.join().unwrap();
        writer.join().unwrap();
        assert!(seen <= 1);
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

// ----- upgradable reads ------------------------------------------------------

impl Guarded {
    /// Takes the upgradable hold, upgrades, bumps, releases.
    fn upgrade_once(&self) {
        self.sem.upgradable_read();
        let before = self.get();
        // SAFETY: held upgradable (taken just above).
        unsafe { self.sem.upgrade() };
        assert_eq!(self.get(), before, "no writer got in between");
        self.bump();
        // SAFETY: the upgrade made the hold exclusive.
        unsafe { self.sem.write_unlock() };
    }

    /// Reads under the upgradable hold.
    fn upgradable_read_once(&self) -> u32 {
        self.sem.upgradable_read();
        let v = self.get();
        // SAFETY: taken just above.
        unsafe { self.sem.upgradable_unlock() };
        v
    }

    /// Spins (yielding to loom) until `n` threads wait.
    fn until_waiters(&self, n: usize) {
        while self.sem.waiters() < n {
            thread::yield_now();
        }
    }

    /// `AtomicCount`: spins until the queued waiter has made its one loom
    /// hand-off request (and so sleeps without a deadline from now on).
    /// That request grants whatever can be granted, so a model whose point
    /// is a release's own grant waits for it first; otherwise a release
    /// that forgot to grant would be rescued by it. Nothing can be granted
    /// while the caller holds the lock, so HANDOFF stays set.
    fn until_handoff_spent(&self) {
        if self.sem.config().counting == Counting::AtomicCount {
            while !self.sem.handoff_requested() {
                thread::yield_now();
            }
        }
    }
}

/// "No lost grant" for the upgrade: the upgrader waits in the upgrade slot
/// just as the last reader leaves. It sets UPGRADING with an RMW, then
/// checks; the reader's release RMW sees UPGRADING or is seen by the
/// check. A reader arriving meanwhile either gets in before the upgrade or
/// after the upgraded writer (never during: loom would report the race).
#[test]
fn upgrade_racing_the_last_readers_release() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.read();
        let upgrader = spawn_on(&g, Guarded::upgrade_once);
        let reader = spawn_on(&g, Guarded::read_once);
        assert_eq!(g.get(), 0, "no writer while we read");
        // SAFETY: taken above.
        unsafe { g.sem.read_unlock() };
        upgrader.join().unwrap();
        assert!(reader.join().unwrap() <= 1);
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// The upgradable hold's release must grant (nudge) a writer sleeping for
/// it: here the writer has queued and spent its hand-off request first.
#[test]
fn upgradable_release_wakes_the_sleeping_writer() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.upgradable_read();
        let writer = spawn_on(&g, Guarded::write_once);
        g.until_waiters(1);
        g.until_handoff_spent();
        // SAFETY: taken above.
        unsafe { g.sem.upgradable_unlock() };
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// "No lost grant" for the upgradable hold: its release races a writer
/// queueing (the writer needs the hold gone).
#[test]
fn upgradable_release_races_a_writer_queueing() {
    model(3, |variant| {
        let g = Guarded::new(variant);
        g.sem.upgradable_read();
        let writer = spawn_on(&g, Guarded::write_once);
        assert_eq!(g.get(), 0, "no writer while we hold it upgradable");
        // SAFETY: taken above.
        unsafe { g.sem.upgradable_unlock() };
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// An upgradable waiter queued with readers behind a writer is granted with
/// them, as one batch (it shares with readers); the writer's data is
/// visible to both through the grant.
#[test]
fn upgradable_waiter_granted_with_a_reader_batch() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.write();
        let upgradable = spawn_on(&g, Guarded::upgradable_read_once);
        let reader = spawn_on(&g, Guarded::read_once);
        g.bump();
        // SAFETY: taken above.
        unsafe { g.sem.write_unlock() };
        assert_eq!(upgradable.join().unwrap(), 1);
        assert_eq!(reader.join().unwrap(), 1);
        g.assert_idle();
    });
}

/// A timed upgrade racing the last reader's release: either it upgraded
/// (and bumped), or it timed out still holding the lock upgradable, and
/// then releases that hold. Both leave the lock idle.
#[test]
fn timed_upgrade_racing_the_readers_release() {
    model(3, |variant| {
        let g = Guarded::new(variant);
        g.sem.read();
        let upgrader = thread::spawn({
            let g = g.clone();
            move || {
                g.sem.upgradable_read();
                // SAFETY: held upgradable.
                match unsafe { g.sem.upgrade_timeout(TIMEOUT) } {
                    Ok(()) => {
                        g.bump();
                        // SAFETY: upgraded just above.
                        unsafe { g.sem.write_unlock() };
                        true
                    }
                    Err(_) => {
                        assert!(g.sem.is_locked() && !g.sem.is_locked_exclusive());
                        // SAFETY: a failed upgrade keeps the upgradable hold.
                        unsafe { g.sem.upgradable_unlock() };
                        false
                    }
                }
            }
        });
        // SAFETY: taken above.
        unsafe { g.sem.read_unlock() };
        let won = upgrader.join().unwrap();
        assert_eq!(g.read_once(), u32::from(won));
        g.assert_idle();
    });
}

/// A cancelled upgrade (the upgrader's timeout fires while a reader holds)
/// lets in the reader that queued behind it, which shares the lock with
/// the upgradable holder again; the cancel must grant it (nobody releases
/// until the reader is in).
#[test]
fn cancelled_upgrade_lets_the_reader_behind_it_in() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.read();
        let upgrader = thread::spawn({
            let g = g.clone();
            move || {
                g.sem.upgradable_read();
                // SAFETY: held upgradable.
                unsafe { g.sem.upgrade_timeout(TIMEOUT) }
                    .expect_err("a reader holds the lock throughout");
                // Returns still holding the lock upgradable.
            }
        });
        let reader = spawn_on(&g, Guarded::read_once);
        upgrader.join().unwrap();
        assert_eq!(reader.join().unwrap(), 0);
        // SAFETY: the upgrader's hold (holds belong to no thread), and ours.
        unsafe {
            g.sem.upgradable_unlock();
            g.sem.read_unlock();
        }
        g.assert_idle();
    });
}

/// An upgradable waiter at the head times out while another upgradable
/// reader holds: a reader queued behind it must be granted then.
#[test]
fn cancelled_upgradable_head_lets_the_reader_behind_it_in() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.upgradable_read();
        let timed = thread::spawn({
            let g = g.clone();
            move || {
                g.sem
                    .upgradable_read_timeout(TIMEOUT)
                    .expect_err("an upgradable reader holds the lock throughout");
            }
        });
        let reader = spawn_on(&g, Guarded::read_once);
        timed.join().unwrap();
        assert_eq!(reader.join().unwrap(), 0);
        // SAFETY: taken above.
        unsafe { g.sem.upgradable_unlock() };
        g.assert_idle();
    });
}

/// `downgrade_to_upgradable` grants a queued reader (asleep, its hand-off
/// request spent) while the downgrader still holds the lock upgradable (we
/// join the reader before releasing).
#[test]
fn downgrade_to_upgradable_grants_the_queued_reader() {
    model(3, |variant| {
        let g = Guarded::new(variant);
        g.sem.write();
        let reader = spawn_on(&g, Guarded::read_once);
        g.until_waiters(1);
        g.until_handoff_spent();
        g.bump();
        // SAFETY: held exclusive; afterwards upgradable.
        unsafe { g.sem.downgrade_to_upgradable() };
        assert_eq!(reader.join().unwrap(), 1);
        // SAFETY: the upgradable hold left by the downgrade.
        unsafe { g.sem.upgradable_unlock() };
        g.assert_idle();
    });
}

/// `downgrade_upgradable` frees the upgradable hold for a queued (asleep,
/// hand-off request spent) upgradable waiter while the downgrader still
/// reads.
#[test]
fn downgrade_upgradable_grants_the_queued_upgradable_waiter() {
    model(3, |variant| {
        let g = Guarded::new(variant);
        g.sem.upgradable_read();
        let waiter = spawn_on(&g, Guarded::upgradable_read_once);
        g.until_waiters(1);
        g.until_handoff_spent();
        // SAFETY: held upgradable; afterwards shared.
        unsafe { g.sem.downgrade_upgradable() };
        assert_eq!(waiter.join().unwrap(), 0);
        // SAFETY: the shared hold left by the downgrade.
        unsafe { g.sem.read_unlock() };
        g.assert_idle();
    });
}

// ----- fair unlock -----------------------------------------------------------

/// A fair unlock hands the lock to the queued writer: a thread trying to
/// take it right after cannot get in ahead of it (no barging), so if it
/// gets the lock at all, the writer has been and gone.
#[test]
fn fair_unlock_hands_the_lock_to_the_queued_writer() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.write();
        let writer = spawn_on(&g, Guarded::write_once);
        g.until_waiters(1);
        // SAFETY: taken above.
        unsafe { g.sem.write_unlock_fair() };
        if g.sem.try_write() {
            assert_eq!(g.get(), 1, "the queued writer went first");
            // SAFETY: taken just above.
            unsafe { g.sem.write_unlock() };
        }
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// Lines up a writer nudged at the head of a free lock (awake, NUDGED set,
/// `AtomicCount`) that has already spent its hand-off request: under loom a
/// waiter's hand-off timer fires once, at its first sleep, and a later
/// request from that same writer would rescue a lost grant (in real time
/// it re-arms, so a lost grant there costs up to `HANDOFF_AFTER` on a lock
/// that could be granted at once, not a hang). A reader queued ahead of the
/// writer is granted by our release and nudges the writer on its own.
/// Returns the writer's thread; the lock is free (or, with `Generic`, the
/// writer's).
fn nudged_writer_with_its_handoff_spent(g: &Arc<Guarded>) -> thread::JoinHandle<()> {
    g.sem.write();
    let reader = spawn_on(g, Guarded::read_once);
    g.until_waiters(1);
    let writer = spawn_on(g, Guarded::write_once);
    g.until_waiters(2);
    // SAFETY: taken above.
    unsafe { g.sem.write_unlock() };
    // 0, or 1 if the writer, woken early, stole the free lock ahead of the
    // reader (`AtomicCount` before any hand-off request): allowed.
    assert!(reader.join().unwrap() <= 1);
    writer
}

/// Regression: a nudged writer (see above) is overtaken by a stealing
/// reader; a hand-off request (a fair unlock of one of two read holds) then
/// keeps the writer from taking the lock itself, and the last read release
/// skips the wait lock because NUDGED is still set. Asking for hand-off
/// must clear NUDGED, or the writer sleeps on a free lock (loom: deadlock).
/// Bound 1: three threads and two spins explode at 2 (145 s), and the
/// interleaving needs none (the writer simply does not run until joined).
#[test]
fn nudged_writer_kept_out_by_handoff_is_still_granted() {
    model(1, |variant| {
        let g = Guarded::new(variant);
        let writer = nudged_writer_with_its_handoff_spent(&g);
        if g.sem.try_read() {
            // A second shared hold, unless the writer has asked for
            // hand-off meanwhile.
            if g.sem.try_read() {
                // SAFETY: taken just above.
                unsafe { g.sem.read_unlock_fair() };
            }
            // SAFETY: the first shared hold.
            unsafe { g.sem.read_unlock() };
        }
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// An upgrade that takes the slot ahead of a nudged writer (see above) must
/// clear NUDGED: the writer is no longer first, and the last reader's
/// release must come to grant the upgrade rather than skip the wait lock.
/// Bound 1, as above (four threads).
#[test]
fn upgrade_overtaking_a_nudged_writer_is_still_granted() {
    model(1, |variant| {
        let g = Guarded::new(variant);
        let writer = nudged_writer_with_its_handoff_spent(&g);
        if g.sem.try_upgradable_read() {
            let reading = g.sem.try_read();
            // The writer, if still queued, stays so: we hold the lock.
            let queued = g.sem.waiters();
            // Holds belong to no thread: this one upgrades ours.
            let upgrader = thread::spawn({
                let g = g.clone();
                move || {
                    // SAFETY: the upgradable hold taken above.
                    unsafe { g.sem.upgrade() };
                    g.bump();
                    // SAFETY: upgraded just above.
                    unsafe { g.sem.write_unlock() };
                }
            });
            if reading {
                g.until_waiters(queued + 1);
                // SAFETY: taken above.
                unsafe { g.sem.read_unlock() };
            }
            upgrader.join().unwrap();
        }
        writer.join().unwrap();
        assert!(g.read_once() >= 1);
        g.assert_idle();
    });
}

/// A writer's claim (`claim.rs`): a writer spins while a reader holds the
/// lock and claims it; a second reader, kept out by the claim, queues and
/// sleeps; the first reader leaves without coming to grant (the claim
/// routes its release). Whether the claimant takes the lock after the
/// drain or gives the claim up first, the sleeping reader must be granted
/// (loom: a deadlock otherwise), and the data race checker sees the
/// writer's bump ordered against both readers.
#[test]
fn a_reader_kept_out_by_a_writers_claim_is_granted() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        g.sem.read();
        let seen = g.get();
        let writer = spawn_on(&g, Guarded::write_once);
        let reader = spawn_on(&g, Guarded::read_once);
        // SAFETY: taken above.
        unsafe { g.sem.read_unlock() };
        assert_eq!(seen, 0);
        assert!(reader.join().unwrap() <= 1);
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// A claim and a hand-off request meet: a queued writer asks for hand-off
/// (its timer fires once under loom) while a spinning writer claims the
/// lock a reader holds. The claimant must give the claim up to the queue's
/// order and grant; both writers get the lock once, and nobody sleeps on a
/// free lock.
#[test]
fn a_claim_gives_way_to_a_handoff_request() {
    model(1, |variant| {
        let g = Guarded::new(variant);
        g.sem.read();
        let first = spawn_on(&g, Guarded::write_once);
        let second = spawn_on(&g, Guarded::write_once);
        // SAFETY: taken above.
        unsafe { g.sem.read_unlock() };
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(g.read_once(), 2);
        g.assert_idle();
    });
}

/// A nudged writer (see above) finds a stealing reader in the lock and
/// claims it. The reader leaves while the claim is set (its release skips
/// the wait lock) just after the writer's last look: the writer gives the
/// claim up and must grant (here: nudge itself) before it sleeps again, or
/// it sleeps on a free lock (loom: deadlock). With claims off the same
/// model checks the plain nudged writer against a stealing reader.
#[test]
fn a_nudged_writer_giving_its_claim_up_still_gets_the_lock() {
    model(2, |variant| {
        let g = Guarded::new(variant);
        let writer = nudged_writer_with_its_handoff_spent(&g);
        if g.sem.try_read() {
            // SAFETY: taken just above.
            unsafe { g.sem.read_unlock() };
        }
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}
