//! loom models of the reader-writer semaphore.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p herdless --release --test loom_rwsem`.
//! Each model is named after the interleaving it pins and runs on the
//! default configuration and on the seed's "before" (generic count, wake
//! under the lock). A lost grant shows up as a loom deadlock report; a
//! grant without the happens-before edge as a data race on the protected
//! `UnsafeCell`. Under loom a timed wait sleeps once and then times out, so
//! loom places the timeout anywhere after the waiter has queued.
#![cfg(loom)]

use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use herdless::rwsem::{Counting, RawRwSem, RwSemConfig, WakeTiming};

const CONFIGS: [RwSemConfig; 2] = [
    RwSemConfig::DEFAULT,
    RwSemConfig::new(Counting::Generic, WakeTiming::WakeUnderLock),
];

/// A long timeout: under loom it fires whenever loom chooses anyway.
const TIMEOUT: Duration = Duration::from_secs(1);

fn model(bound: usize, f: impl Fn(RwSemConfig) + Sync + Send + 'static) {
    let f = std::sync::Arc::new(f);
    for config in CONFIGS {
        let f = f.clone();
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(bound);
        builder.check(move || f(config));
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
    fn new(config: RwSemConfig) -> Arc<Self> {
        Arc::new(Guarded {
            sem: RawRwSem::with_config(config),
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

/// "No lost grant": the last reader leaves just as a writer queues. One of
/// them must see the other (their RMWs on the count word are ordered).
#[test]
fn last_reader_leaving_races_a_writer_queueing() {
    model(3, |config| {
        let g = Guarded::new(config);
        g.sem.read();
        let writer = thread::spawn({
            let g = g.clone();
            move || g.write_once()
        });
        // SAFETY: taken above.
        unsafe { g.sem.read_unlock() };
        writer.join().unwrap();
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}

/// DESIGN contract 3: granted readers may see the grant and return (their
/// records gone) before the granter's wakeups run; the writer's data is
/// visible to them through the grant alone.
#[test]
fn granted_readers_may_return_before_their_wakeup() {
    model(2, |config| {
        let g = Guarded::new(config);
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
    model(2, |config| {
        let g = Guarded::new(config);
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
        let reader = thread::spawn({
            let g = g.clone();
            move || g.read_once()
        });
        // SAFETY: taken above.
        unsafe { g.sem.write_unlock() };
        let won = timed.join().unwrap();
        let seen = reader.join().unwrap();
        assert!(seen <= u32::from(won));
        assert_eq!(g.read_once(), u32::from(won));
        g.assert_idle();
    });
}

/// DESIGN contract 4: a writer at the head times out while readers hold the
/// lock; the reader queued behind it must be granted then, not at the next
/// release (we only release after it got in).
#[test]
fn cancelled_head_writer_lets_the_reader_behind_it_in() {
    model(2, |config| {
        let g = Guarded::new(config);
        g.sem.read();
        let writer = thread::spawn({
            let g = g.clone();
            move || {
                g.sem
                    .write_timeout(TIMEOUT)
                    .expect_err("a reader holds the lock throughout");
            }
        });
        let reader = thread::spawn({
            let g = g.clone();
            move || g.read_once()
        });
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
    model(3, |config| {
        let g = Guarded::new(config);
        g.sem.write();
        let reader = thread::spawn({
            let g = g.clone();
            move || g.read_once()
        });
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
    model(3, |config| {
        let a = Guarded::new(config);
        let b = Guarded::new(config);
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
    model(2, |config| {
        let g = Guarded::new(config);
        g.sem.write();
        let reader = thread::spawn({
            let g = g.clone();
            move || g.read_once()
        });
        let writer = thread::spawn({
            let g = g.clone();
            move || g.write_once()
        });
        // SAFETY: taken above.
        unsafe { g.sem.write_unlock() };
        let seen = reader.join().unwrap();
        writer.join().unwrap();
        assert!(seen <= 1);
        assert_eq!(g.read_once(), 1);
        g.assert_idle();
    });
}
