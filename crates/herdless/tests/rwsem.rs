//! Reader-writer semaphore scenarios (real threads), each run on all four
//! configurations. Tests are named after the scenario they pin. None
//! depends on timing to pass: threads are lined up by observing the wait
//! list, and bounded waits are hang detectors only.
#![cfg(not(loom))]

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use herdless::rwsem::{
    RawRwSem, RwSem, RwSemExt, RwSemReadGuard, RwSemUpgradableReadGuard, RwSemWriteGuard,
};
use herdless::variants::{Counting, RwSemConfig};
use herdless::wait_queue::TimedOut;

/// Generous bound for anything that must happen; only a hang trips it.
const HANG: Duration = Duration::from_secs(60);

/// Spins (yielding) until `cond` holds. After `HANG` it fails the whole
/// test binary at once: a panic here would leave threads blocked on a lock
/// the panicking thread holds, and the scope would hang instead of failing.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > HANG {
            // Not `eprintln!`: the test harness captures that, and we exit.
            let _ = writeln!(std::io::stderr(), "hang: waited {HANG:?} for {what}");
            std::process::exit(101);
        }
        thread::yield_now();
    }
}

fn until_waiters<T>(sem: &RwSem<T>, n: usize) {
    until(&format!("{n} waiters"), || sem.waiters() == n);
}

fn each_config(test: impl Fn(RwSemConfig)) {
    for config in RwSemConfig::ALL {
        eprintln!("-- {config}");
        test(config);
    }
}

#[test]
fn readers_share_and_writers_exclude() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 5);
        let a = sem.read();
        let b = sem.try_read().expect("readers share");
        assert!(sem.try_write().is_none(), "a writer is excluded by readers");
        assert!(sem.is_locked() && !sem.is_locked_exclusive());
        drop((a, b));
        let w = sem.try_write().expect("free");
        assert!(sem.is_locked_exclusive());
        assert!(sem.try_read().is_none(), "a reader is excluded by a writer");
        assert!(
            sem.try_write().is_none(),
            "a writer is excluded by a writer"
        );
        drop(w);
        assert!(!sem.is_locked());
        assert_eq!(sem.config(), config);
    });
}

/// The default is the seed's "after": atomic count, wake after unlock.
#[test]
fn default_configuration_is_atomic_count_waking_after_unlock() {
    let sem = RwSem::new(());
    assert_eq!(sem.config(), RwSemConfig::DEFAULT);
    assert_eq!(RwSemConfig::DEFAULT, RwSemConfig::default());
}

/// Queue order is arrival order: a writer queued before a reader gets the
/// lock first, and the reader only after the writer has left.
#[test]
fn waiters_are_served_in_arrival_order() {
    each_config(|config| {
        let sem = RwSem::with_config(config, Vec::new());
        let held = sem.write();
        thread::scope(|s| {
            s.spawn(|| sem.write().push("writer"));
            until_waiters(&sem, 1);
            s.spawn(|| {
                let r = sem.read();
                assert_eq!(*r, ["writer"], "the reader came after the writer");
            });
            until_waiters(&sem, 2);
            // A newcomer may not overtake the queue, even as a reader when
            // only... nobody but us holds: try_read fails while they wait.
            drop(held);
        });
        assert_eq!(*sem.read(), ["writer"]);
    });
}

/// A queued writer is not starved by readers that keep the lock shared:
/// `Generic` queues every newcomer behind it at once (strict FIFO);
/// `AtomicCount` lets running readers join for a while, until the writer
/// has waited long enough to ask for hand-off, and then queues them too.
#[test]
fn a_queued_writer_is_not_starved_by_new_readers() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let first = sem.read();
        thread::scope(|s| {
            s.spawn(|| *sem.write() += 1);
            until_waiters(&sem, 1);
            match config.counting {
                Counting::Generic => {
                    assert!(sem.try_read().is_none(), "no reader passes a queued writer");
                }
                Counting::AtomicCount => {
                    until("the writer to ask for hand-off", || sem.handoff_requested())
                }
            }
            assert_eq!(
                sem.read_timeout(Duration::ZERO).err(),
                Some(TimedOut),
                "nor with a zero timeout"
            );
            drop(first);
        });
        assert_eq!(*sem.read(), 1);
    });
}

/// One release grants the whole leading batch of readers, up to the first
/// queued writer: R1, R2 run together while W3 still waits.
#[test]
fn a_release_grants_the_leading_batch_of_readers() {
    each_config(|config| {
        let sem = RwSem::with_config(config, ());
        let inside = AtomicUsize::new(0);
        let go = AtomicBool::new(false);
        let held = sem.write();
        thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let _r = sem.read();
                    inside.fetch_add(1, Ordering::SeqCst);
                    until("the test to let readers go", || go.load(Ordering::SeqCst));
                });
            }
            until_waiters(&sem, 2);
            s.spawn(|| drop(sem.write()));
            until_waiters(&sem, 3);
            let before = sem.stats();
            drop(held);
            until("both readers inside at once", || {
                inside.load(Ordering::SeqCst) == 2
            });
            assert_eq!(sem.waiters(), 1, "the writer still waits");
            if herdless::stats::ENABLED {
                assert_eq!(sem.stats().wakeups - before.wakeups, 2, "one wake each");
            }
            go.store(true, Ordering::SeqCst);
        });
        assert!(!sem.is_locked());
    });
}

/// `downgrade` keeps the lock (no writer gets in) and grants the readers
/// queued at the head; a writer queued behind them keeps waiting.
#[test]
fn downgrade_grants_queued_readers_and_keeps_writers_out() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let readers_in = AtomicUsize::new(0);
        let mut w = sem.write();
        *w = 7;
        thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let r = sem.read();
                    assert_eq!(*r, 7, "the downgraded writer's value");
                    readers_in.fetch_add(1, Ordering::SeqCst);
                });
            }
            until_waiters(&sem, 2);
            s.spawn(|| *sem.write() = 8);
            until_waiters(&sem, 3);
            let r = RwSemWriteGuard::downgrade(w);
            until("both queued readers granted", || {
                readers_in.load(Ordering::SeqCst) == 2
            });
            assert_eq!(*r, 7);
            assert_eq!(sem.waiters(), 1, "the writer waits for our read hold");
            assert!(!sem.is_locked_exclusive());
            drop(r);
        });
        assert_eq!(*sem.read(), 8);
    });
}

/// ARCHITECTURE contract 11 (a cancelled head), the scenario: W1,
/// R1, R2 queued behind a held write lock; W1 times out; R1 and R2 both
/// acquire once the lock is released. Variant with readers holding: W1 at the head held R1 and R2
/// back although the lock was shared (for `AtomicCount`, once W1 asked for
/// hand-off); its timeout must grant them at once.
#[test]
fn cancelling_the_head_writer_lets_the_readers_behind_it_in() {
    each_config(|config| {
        for held_by_reader in [false, true] {
            // W1's timeout bounds how long the scenario has to line up; if
            // a slow machine lets it expire first, the round is run again.
            let mut lined_up = false;
            for attempt in 0..20 {
                lined_up = cancel_head_round(config, held_by_reader, 100 << attempt.min(4));
                if lined_up {
                    break;
                }
            }
            assert!(lined_up, "W1, R1, R2 never got queued together");
        }
    });
}

/// One round of the scenario above; `false` if W1 timed out before R1 and
/// R2 were queued behind it.
fn cancel_head_round(config: RwSemConfig, held_by_reader: bool, timeout_ms: u64) -> bool {
    let sem = RwSem::with_config(config, ());
    let readers_in = AtomicUsize::new(0);
    let (rd, wr) = if held_by_reader {
        (Some(sem.read()), None)
    } else {
        (None, Some(sem.write()))
    };
    let release = AtomicBool::new(false);
    let lined_up = thread::scope(|s| {
        let w1 = s.spawn(|| {
            sem.write_timeout(Duration::from_millis(timeout_ms))
                .map(drop)
        });
        until("W1 queued", || sem.waiters() == 1 || w1.is_finished());
        if held_by_reader && config.counting == Counting::AtomicCount {
            // Readers join a reader-held lock until W1 asks for hand-off.
            until("W1 to ask for hand-off", || {
                sem.handoff_requested() || w1.is_finished()
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                let _r = sem.read();
                readers_in.fetch_add(1, Ordering::SeqCst);
                until("release", || release.load(Ordering::SeqCst));
            });
        }
        until("R1 and R2 queued", || {
            sem.waiters() == 3 || w1.is_finished()
        });
        let lined_up = sem.waiters() == 3;
        assert_eq!(w1.join().unwrap(), Err(TimedOut), "the lock stayed held");
        if held_by_reader {
            until("R1 and R2 granted beside the holding reader", || {
                readers_in.load(Ordering::SeqCst) == 2
            });
        } else {
            if lined_up {
                assert_eq!(sem.waiters(), 2, "readers wait for the writer");
            }
            drop(wr);
            until("R1 and R2 granted", || {
                readers_in.load(Ordering::SeqCst) == 2
            });
        }
        release.store(true, Ordering::SeqCst);
        lined_up
    });
    drop(rd);
    assert!(!sem.is_locked());
    assert_eq!(sem.waiters(), 0);
    lined_up
}

/// A grant racing a timeout: exactly one of "acquired and holds the lock"
/// or "timed out with nothing held", and in both cases the waiter queued
/// behind is served. Repeated with the release placed around the deadline.
#[test]
fn grant_racing_timeout_is_exactly_one_outcome() {
    each_config(|config| {
        let mut outcomes = [0usize; 2];
        for i in 0..300u32 {
            let sem = RwSem::with_config(config, 0u32);
            let timeout = Duration::from_micros(1_000 + u64::from(i % 7) * 100);
            let started = Mutex::new(None);
            let mut held = Some(sem.write());
            thread::scope(|s| {
                let w1 = s.spawn(|| {
                    *started.lock().unwrap() = Some(Instant::now());
                    match sem.write_timeout(timeout) {
                        Ok(mut g) => {
                            assert!(sem.is_locked_exclusive(), "the winner holds it");
                            *g += 1;
                            true
                        }
                        Err(TimedOut) => false,
                    }
                });
                until("W1 queued (or already given up)", || {
                    sem.waiters() == 1 || w1.is_finished()
                });
                let w2 = s.spawn(|| *sem.write() += 10);
                // W2 queues behind W1, unless W1 has already given up.
                until("W2 queued", || {
                    let n = sem.waiters();
                    n == 2 || (w1.is_finished() && n == 1)
                });
                // Release around W1's deadline: from 150 us before to 150 us
                // after it.
                let release_at = started.lock().unwrap().unwrap() + timeout
                    - Duration::from_micros(150)
                    + Duration::from_micros(u64::from(i % 5) * 75);
                while Instant::now() < release_at {
                    std::hint::spin_loop();
                }
                held.take();
                let won = w1.join().unwrap();
                w2.join().unwrap();
                outcomes[usize::from(won)] += 1;
                assert_eq!(*sem.read(), if won { 11 } else { 10 });
            });
            assert!(!sem.is_locked());
            assert_eq!(sem.waiters(), 0);
        }
        eprintln!("   timed out {}, granted {}", outcomes[0], outcomes[1]);
    });
}

/// Readers check an invariant writers break and restore inside their
/// critical sections, across plain, timed, try, fair, downgraded and
/// upgradable holds and upgrades: a reader inside with a writer, or two
/// writers together, would see it broken, and an upgradable holder checks
/// that nobody wrote between its read and its upgrade. Every thread's every
/// operation is accounted for at the end.
#[test]
fn stress_readers_never_see_a_writer_half_done() {
    const THREADS: usize = 4;
    const OPS: usize = 200_000;
    each_config(|config| {
        let sem = RwSem::with_config(config, (0u64, 0u64));
        let writes = AtomicUsize::new(0);
        let upgrades = AtomicUsize::new(0);
        let start = Instant::now();
        thread::scope(|s| {
            for t in 0..THREADS {
                let (sem, writes, upgrades) = (&sem, &writes, &upgrades);
                s.spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                    let (mut mine, mut upgraded) = (0, 0);
                    let write = |g: &mut (u64, u64)| {
                        g.0 += 1;
                        std::hint::black_box(&mut *g);
                        g.1 += 1;
                    };
                    for _ in 0..OPS {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let check = |g: &(u64, u64)| assert_eq!(g.0, g.1, "torn under {config}");
                        let timeout = Duration::from_micros(rng % 20);
                        match rng % 100 {
                            0..=77 => check(&sem.read()),
                            78..=79 => {
                                if let Some(g) = sem.try_read() {
                                    check(&g)
                                }
                            }
                            80..=81 => {
                                if let Ok(g) = sem.read_timeout(timeout) {
                                    check(&g)
                                }
                            }
                            82..=83 => {
                                let g = sem.upgradable_read();
                                check(&g);
                                if rng.is_multiple_of(2) {
                                    RwSemUpgradableReadGuard::unlock_fair(g);
                                }
                            }
                            84..=85 => {
                                let g = sem.upgradable_read();
                                let seen = *g;
                                let mut w = RwSemUpgradableReadGuard::upgrade(g);
                                assert_eq!(*w, seen, "a writer got in before the upgrade");
                                write(&mut w);
                                (mine, upgraded) = (mine + 1, upgraded + 1);
                                let u = RwSemWriteGuard::downgrade_to_upgradable(w);
                                check(&u);
                                check(&RwSemUpgradableReadGuard::downgrade(u));
                            }
                            86 => {
                                if let Ok(g) = sem.upgradable_read_timeout(timeout) {
                                    let seen = *g;
                                    match RwSemUpgradableReadGuard::try_upgrade_for(g, timeout) {
                                        Ok(mut w) => {
                                            assert_eq!(
                                                *w, seen,
                                                "a writer got in before the upgrade"
                                            );
                                            write(&mut w);
                                            (mine, upgraded) = (mine + 1, upgraded + 1);
                                        }
                                        Err(g) => assert_eq!(*g, seen, "a writer got in beside us"),
                                    }
                                }
                            }
                            87 => {
                                if let Some(mut g) = sem.try_upgradable_read() {
                                    let seen = *g;
                                    if g.try_with_upgraded(|w| write(w)).is_some() {
                                        (mine, upgraded) = (mine + 1, upgraded + 1);
                                    } else {
                                        g.with_upgraded(|w| {
                                            assert_eq!(
                                                *w, seen,
                                                "a writer got in before the upgrade"
                                            );
                                            write(w)
                                        });
                                        (mine, upgraded) = (mine + 1, upgraded + 1);
                                    }
                                    check(&g);
                                }
                            }
                            88..=91 => {
                                if let Ok(mut g) = sem.write_timeout(timeout) {
                                    write(&mut g);
                                    mine += 1;
                                }
                            }
                            92..=94 => {
                                let mut g = sem.write();
                                write(&mut g);
                                mine += 1;
                                let r: RwSemReadGuard<'_, _> = RwSemWriteGuard::downgrade(g);
                                check(&r);
                                if rng.is_multiple_of(2) {
                                    RwSemReadGuard::unlock_fair(r);
                                }
                            }
                            95..=96 => {
                                let mut g = sem.write();
                                write(&mut g);
                                mine += 1;
                                RwSemWriteGuard::unlock_fair(g);
                            }
                            _ => {
                                let mut g = sem.write();
                                write(&mut g);
                                mine += 1;
                            }
                        }
                    }
                    writes.fetch_add(mine, Ordering::SeqCst);
                    upgrades.fetch_add(upgraded, Ordering::SeqCst);
                });
            }
        });
        let total = writes.load(Ordering::SeqCst) as u64;
        assert_eq!(*sem.read(), (total, total));
        assert!(!sem.is_locked());
        assert_eq!(sem.waiters(), 0);
        eprintln!(
            "   {} ops in {:?}, {total} writes, {} by upgrade",
            THREADS * OPS,
            start.elapsed(),
            upgrades.load(Ordering::SeqCst)
        );
    });
}

/// Zero tries once and never queues; `Duration::MAX` waits without limit
/// (and does not overflow the clock).
#[test]
fn zero_and_max_timeouts() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        assert!(
            sem.read_timeout(Duration::ZERO).is_ok(),
            "free: zero succeeds"
        );
        assert!(sem.write_timeout(Duration::ZERO).is_ok());
        let before = sem.stats();
        let held = sem.write();
        assert_eq!(sem.read_timeout(Duration::ZERO).err(), Some(TimedOut));
        assert_eq!(sem.write_timeout(Duration::ZERO).err(), Some(TimedOut));
        assert_eq!(sem.stats().waits, before.waits, "zero never queues");
        let holder = Mutex::new(Some(held));
        thread::scope(|s| {
            let t = s.spawn(|| *sem.write_timeout(Duration::MAX).unwrap() += 1);
            until_waiters(&sem, 1);
            holder.lock().unwrap().take();
            t.join().unwrap();
            let t = s.spawn(|| *sem.read_timeout(Duration::MAX).unwrap());
            assert_eq!(t.join().unwrap(), 1);
        });
        let deadline = Instant::now() + HANG;
        assert!(sem.try_write_until(deadline).is_some());
    });
}

/// A grant publishes the writer's data: what a writer wrote before the
/// release is what the granted readers see (Release/Acquire through the
/// grant, not only through the fast paths).
#[test]
fn granted_readers_see_the_releasing_writers_data() {
    each_config(|config| {
        for round in 0..200u64 {
            let sem = RwSem::with_config(config, [0u64; 8]);
            let mut w = sem.write();
            thread::scope(|s| {
                let readers: Vec<_> = (0..3).map(|_| s.spawn(|| *sem.read())).collect();
                until_waiters(&sem, 3);
                *w = [round + 1; 8];
                drop(w);
                for r in readers {
                    assert_eq!(r.join().unwrap(), [round + 1; 8]);
                }
            });
        }
    });
}

// ----- upgradable reads ----------------------------------------------------

/// The upgradable hold shares with readers and excludes writers and other
/// upgradable readers; readers and an upgradable reader are excluded by a
/// writer.
#[test]
fn upgradable_read_shares_with_readers_and_excludes_writers_and_upgradables() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 1);
        let u = sem.upgradable_read();
        let r = sem
            .try_read()
            .expect("a reader shares with the upgradable hold");
        assert!(sem.try_write().is_none(), "a writer is excluded");
        assert!(sem.try_upgradable_read().is_none(), "one upgradable hold");
        assert_eq!(
            sem.upgradable_read_timeout(Duration::ZERO).err(),
            Some(TimedOut)
        );
        assert!(sem.is_locked() && !sem.is_locked_exclusive());
        drop(u);
        let u = sem
            .try_upgradable_read()
            .expect("free again beside the reader");
        drop((r, u));
        assert!(!sem.is_locked());
        let w = sem.write();
        assert!(sem.try_upgradable_read().is_none(), "excluded by a writer");
        drop(w);
        let u = sem.try_upgradable_read().expect("free");
        let w = RwSemUpgradableReadGuard::try_upgrade(u).expect("no reader: upgrades at once");
        assert!(sem.is_locked_exclusive());
        drop(w);
        assert!(!sem.is_locked());
    });
}

/// `upgrade` waits for the readers to leave and keeps new readers out
/// meanwhile (they queue behind it, so it is not starved); it goes before
/// a writer that queued earlier, since it holds the lock already; and no
/// writer gets in between the upgradable hold and the exclusive one.
#[test]
fn upgrade_waits_for_readers_keeps_new_readers_out_and_goes_before_queued_writers() {
    each_config(|config| {
        let sem = RwSem::with_config(config, Vec::new());
        let reader = sem.read();
        let upgradable = sem.upgradable_read();
        let order = Mutex::new(Vec::new());
        thread::scope(|s| {
            s.spawn(|| {
                sem.write().push("writer");
                order.lock().unwrap().push("writer");
            });
            until_waiters(&sem, 1);
            let upgrader = s.spawn(|| {
                let mut w = RwSemUpgradableReadGuard::upgrade(upgradable);
                assert!(w.is_empty(), "nobody wrote between the holds");
                w.push("upgrade");
                order.lock().unwrap().push("upgrade");
            });
            until_waiters(&sem, 2);
            assert!(
                sem.try_read().is_none(),
                "new readers stay out of a pending upgrade"
            );
            assert_eq!(sem.read_timeout(Duration::ZERO).err(), Some(TimedOut));
            let late_reader = s.spawn(|| sem.read().clone());
            until_waiters(&sem, 3);
            assert!(!upgrader.is_finished(), "a reader still holds");
            drop(reader);
            until("the upgrade", || upgrader.is_finished());
            upgrader.join().unwrap();
            let seen = late_reader.join().unwrap();
            assert_eq!(seen[0], "upgrade", "the late reader came after the upgrade");
        });
        assert_eq!(*order.lock().unwrap(), ["upgrade", "writer"]);
        assert_eq!(*sem.read(), ["upgrade", "writer"]);
    });
}

/// `try_upgrade` fails while a reader holds and keeps the upgradable hold;
/// once the reader leaves it succeeds.
#[test]
fn try_upgrade_keeps_the_upgradable_hold_while_readers_hold() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let r = sem.read();
        let u = sem.upgradable_read();
        let u = RwSemUpgradableReadGuard::try_upgrade(u).expect_err("a reader holds");
        assert!(sem.try_upgradable_read().is_none(), "still held upgradable");
        assert!(sem.try_write().is_none());
        let u = RwSemUpgradableReadGuard::try_upgrade_for(u, Duration::ZERO)
            .expect_err("zero tries once");
        assert_eq!(sem.waiters(), 0, "a zero timeout never queues");
        drop(r);
        let mut w = RwSemUpgradableReadGuard::try_upgrade(u).expect("no reader now");
        *w += 1;
        drop(w);
        assert_eq!(*sem.read(), 1);
    });
}

/// A timed upgrade that gives up keeps the upgradable hold, and the readers
/// that queued behind it (kept out by the pending upgrade) are let in at
/// once, beside the upgradable holder and the reader that blocked it.
#[test]
fn cancelled_upgrade_keeps_the_upgradable_hold_and_lets_queued_readers_in() {
    each_config(|config| {
        let mut lined_up = false;
        for attempt in 0..20 {
            lined_up = cancelled_upgrade_round(config, 100 << attempt.min(4));
            if lined_up {
                break;
            }
        }
        assert!(
            lined_up,
            "the upgrade and the late reader never queued together"
        );
    });
}

/// One round of the scenario above; `false` if the upgrade timed out before
/// the late reader queued behind it.
fn cancelled_upgrade_round(config: RwSemConfig, timeout_ms: u64) -> bool {
    let sem = RwSem::with_config(config, 5);
    let reader = sem.read();
    let late_in = AtomicBool::new(false);
    let release = AtomicBool::new(false);
    let lined_up = thread::scope(|s| {
        let upgrader = s.spawn(|| {
            let u = sem.upgradable_read();
            let u = RwSemUpgradableReadGuard::try_upgrade_for(u, Duration::from_millis(timeout_ms))
                .expect_err("a reader holds throughout");
            assert_eq!(*u, 5, "still held upgradable");
            until("the late reader in", || late_in.load(Ordering::SeqCst));
            assert!(
                sem.try_write().is_none(),
                "the upgradable hold excludes writers"
            );
            drop(u);
        });
        until("the upgrade queued", || {
            sem.waiters() == 1 || upgrader.is_finished()
        });
        let late = s.spawn(|| {
            let r = sem.read();
            late_in.store(true, Ordering::SeqCst);
            until("release", || release.load(Ordering::SeqCst));
            *r
        });
        until("the late reader queued", || {
            sem.waiters() == 2 || late_in.load(Ordering::SeqCst)
        });
        let lined_up = sem.waiters() == 2;
        until("the late reader in", || late_in.load(Ordering::SeqCst));
        release.store(true, Ordering::SeqCst);
        assert_eq!(late.join().unwrap(), 5);
        upgrader.join().unwrap();
        lined_up
    });
    drop(reader);
    assert!(!sem.is_locked());
    assert_eq!(sem.waiters(), 0);
    lined_up
}

/// Zero timeouts try once and never queue; `Duration::MAX` waits without
/// limit, for the upgradable hold and for the upgrade.
#[test]
fn zero_and_max_timeouts_for_upgradable_reads_and_upgrades() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        drop(
            sem.upgradable_read_timeout(Duration::ZERO)
                .expect("free: zero succeeds"),
        );
        let w = sem.write();
        assert_eq!(
            sem.upgradable_read_timeout(Duration::ZERO).err(),
            Some(TimedOut)
        );
        assert!(sem.try_upgradable_read_for(Duration::ZERO).is_none());
        assert!(sem.try_upgradable_read_until(Instant::now()).is_none());
        assert_eq!(sem.waiters(), 0, "zero never queues");
        let holder = Mutex::new(Some(w));
        thread::scope(|s| {
            let t = s.spawn(|| *sem.upgradable_read_timeout(Duration::MAX).unwrap());
            until_waiters(&sem, 1);
            holder.lock().unwrap().take();
            assert_eq!(t.join().unwrap(), 0);
        });
        let reader = Mutex::new(Some(sem.read()));
        thread::scope(|s| {
            let t = s.spawn(|| {
                let u = sem.upgradable_read();
                let u = RwSemUpgradableReadGuard::try_upgrade_until(u, Instant::now())
                    .expect_err("a reader holds; the deadline has passed");
                let mut w =
                    RwSemUpgradableReadGuard::try_upgrade_for(u, Duration::MAX).expect("no limit");
                *w += 1;
            });
            until_waiters(&sem, 1);
            reader.lock().unwrap().take();
            t.join().unwrap();
        });
        let u = sem
            .try_upgradable_read_until(Instant::now() + HANG)
            .expect("free");
        assert_eq!(*u, 1);
    });
}

/// An upgradable waiter queued among readers is granted with them as one
/// batch (it shares with readers); the batch stops at a second upgradable
/// waiter, and the readers behind that one wait their turn (FIFO).
#[test]
fn an_upgradable_waiter_is_granted_with_its_reader_batch_and_a_second_one_ends_it() {
    each_config(|config| {
        let sem = RwSem::with_config(config, ());
        let inside = AtomicUsize::new(0);
        let go = [AtomicBool::new(false), AtomicBool::new(false)];
        let held = sem.write();
        thread::scope(|s| {
            // Queue, in this order: R, U1, R, U2, R.
            let enter = |upgradable: bool, gate: usize| {
                let (inside, go, sem) = (&inside, &go, &sem);
                move || {
                    let _hold = if upgradable {
                        (None, Some(sem.upgradable_read()))
                    } else {
                        (Some(sem.read()), None)
                    };
                    inside.fetch_add(1, Ordering::SeqCst);
                    until("the test to let them go", || {
                        go[gate].load(Ordering::SeqCst)
                    });
                }
            };
            for (n, (upgradable, gate)) in
                [(false, 0), (true, 0), (false, 0), (true, 1), (false, 1)]
                    .into_iter()
                    .enumerate()
            {
                s.spawn(enter(upgradable, gate));
                until_waiters(&sem, n + 1);
            }
            drop(held);
            until("R, U1, R inside together", || {
                inside.load(Ordering::SeqCst) == 3
            });
            assert_eq!(sem.waiters(), 2, "U2 and the reader behind it wait");
            assert!(sem.try_upgradable_read().is_none());
            go[0].store(true, Ordering::SeqCst);
            until("U2 and the last reader inside", || {
                inside.load(Ordering::SeqCst) == 5
            });
            go[1].store(true, Ordering::SeqCst);
        });
        assert!(!sem.is_locked());
        assert_eq!(sem.waiters(), 0);
    });
}

/// `downgrade_to_upgradable` keeps writers out and grants the queued
/// readers; `with_upgraded` writes and comes back to the upgradable hold
/// without a writer getting in; `downgrade` of the upgradable guard frees
/// the upgradable hold for a queued upgradable waiter.
#[test]
fn downgrades_and_with_upgraded_keep_writers_out() {
    each_config(|config| {
        let sem = RwSem::with_config(config, 0);
        let readers_in = AtomicUsize::new(0);
        let mut w = sem.write();
        *w = 7;
        thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let r = sem.read();
                    assert!(*r >= 7, "the downgraded writer's value or later");
                    readers_in.fetch_add(1, Ordering::SeqCst);
                });
            }
            until_waiters(&sem, 2);
            s.spawn(|| *sem.write() = 100);
            until_waiters(&sem, 3);
            let mut u = RwSemWriteGuard::downgrade_to_upgradable(w);
            until("both queued readers granted", || {
                readers_in.load(Ordering::SeqCst) == 2
            });
            assert_eq!(*u, 7);
            assert_eq!(sem.waiters(), 1, "the writer waits for our upgradable hold");
            u.with_upgraded(|v| *v += 1);
            assert_eq!(*u, 8, "no writer between the upgrade and the way back");
            assert_eq!(u.try_with_upgraded(|v| *v), Some(8));
            let other = s.spawn(|| *sem.upgradable_read());
            until_waiters(&sem, 2);
            let r = RwSemUpgradableReadGuard::downgrade(u);
            // The writer queued first: FIFO keeps the upgradable waiter behind
            // it, and both wait for our read hold.
            assert_eq!(*r, 8);
            drop(r);
            assert_eq!(other.join().unwrap(), 100, "after the writer");
        });
        assert_eq!(*sem.read(), 100);
    });
}

// ----- fair unlock -----------------------------------------------------------

/// A fair unlock hands the lock to the queued writer before anyone else can
/// take it, for every hold; `bump` lets the queued writer in and takes the
/// lock back after it.
#[test]
fn fair_unlock_and_bump_hand_the_lock_to_the_queued_writer() {
    each_config(|config| {
        for hold in ["write", "read", "upgradable"] {
            let sem = RwSem::with_config(config, 0);
            enum Held<'a> {
                W(RwSemWriteGuard<'a, i32>),
                R(RwSemReadGuard<'a, i32>),
                U(RwSemUpgradableReadGuard<'a, i32>),
            }
            let held = match hold {
                "write" => Held::W(sem.write()),
                "read" => Held::R(sem.read()),
                _ => Held::U(sem.upgradable_read()),
            };
            thread::scope(|s| {
                s.spawn(|| *sem.write() += 1);
                until_waiters(&sem, 1);
                match held {
                    Held::W(g) => RwSemWriteGuard::unlock_fair(g),
                    Held::R(g) => RwSemReadGuard::unlock_fair(g),
                    Held::U(g) => RwSemUpgradableReadGuard::unlock_fair(g),
                }
                // No barging: the writer was handed the lock; we get in
                // only after it has been and gone.
                if let Some(g) = sem.try_read() {
                    assert_eq!(*g, 1, "{hold}: a reader got in ahead of the writer");
                }
                if let Some(g) = sem.try_write() {
                    assert_eq!(*g, 1, "{hold}: a writer got in ahead of the queued one");
                }
            });
            assert_eq!(*sem.read(), 1);
        }
        let sem = RwSem::with_config(config, 0);
        let mut w = sem.write();
        thread::scope(|s| {
            s.spawn(|| *sem.write() += 1);
            until_waiters(&sem, 1);
            RwSemWriteGuard::bump(&mut w);
            assert_eq!(*w, 1, "the queued writer ran during the bump");
            *w += 1;
        });
        drop(w);
        assert_eq!(*sem.read(), 2);
    });
}

// ----- unwinding ---------------------------------------------------------------

/// Found by the std port (`panic_while_mapping_*`): the raw semaphore was
/// not `RefUnwindSafe` (the wait lock's `UnsafeCell`), unlike parking_lot's
/// raw lock. A `&RawRwSem` now crosses `catch_unwind` as is, and a panic
/// while it is held, released by a drop guard during unwinding, leaves it
/// usable.
#[test]
fn raw_rwsem_crosses_catch_unwind_and_a_panic_while_held_leaves_it_usable() {
    fn unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>(_: &T) {}
    each_config(|config| {
        let raw = RawRwSem::with_config(config);
        unwind_safe(&raw);
        unwind_safe(&&raw);
        let outcome = std::panic::catch_unwind(|| {
            struct Release<'a>(&'a RawRwSem);
            impl Drop for Release<'_> {
                fn drop(&mut self) {
                    // SAFETY: taken just before this guard was made.
                    unsafe { self.0.upgradable_unlock() }
                }
            }
            raw.upgradable_read();
            let _release = Release(&raw);
            panic!("a panic while holding the lock upgradable");
        });
        assert!(outcome.is_err());
        assert!(!raw.is_locked());
        assert!(raw.try_write());
        // SAFETY: taken just above.
        unsafe { raw.write_unlock() };
        assert_eq!(raw.waiters(), 0);
    });
}
