//! Rust std's `library/std/tests/sync/rwlock.rs`, ported to
//! `herdless::rwsem`.
//!
//! Upstream: github.com/rust-lang/rust at 0f76c01 (the file as of the
//! `nonpoison` locks; an earlier copy at 44aa5a9 lacks only the two
//! `*_guard_unlocked` tests). Every test runs on the four `RwSem`
//! configurations. std generates each body twice, as `nonpoison_<name>` and
//! `poison_<name>`; herdless has no poisoning, so the pair is one test here,
//! named after the pair. std's poison tests are ported as tests of
//! herdless's semantics (a panic while holding the lock releases it and
//! poisons nothing), with the difference stated; `try_write`'s `WouldBlock`
//! / `TryLockError` is lock_api's `None`. Not ported: the two guard
//! covariance tests (lock_api 0.5's guards are invariant in `T`: they hold
//! `&RwLock<R, T>`, whose `UnsafeCell<T>` is invariant; a property of
//! lock_api's types that herdless cannot change). `docs/PEER_SUITES.md`
//! has the table.
#![cfg(not(loom))]

use std::fmt::Debug;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::{Duration, Instant};
use std::{hint, mem, thread};

use herdless::rwsem::RwSemExt;
use herdless::variants::RwSemConfig;
use herdless::{
    MappedRwLockReadGuard, MappedRwLockWriteGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

/// Generous bound for anything that must happen; only a hang trips it.
const HANG: Duration = Duration::from_secs(60);

fn each_config(test: impl Fn(RwSemConfig)) {
    for config in RwSemConfig::ALL {
        eprintln!("-- {config}");
        test(config);
    }
}

/// Spins (yielding) until `cond` holds; after `HANG`, fails the whole test
/// binary at once (a panic could leave threads blocked on a held lock).
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > HANG {
            let _ = writeln!(std::io::stderr(), "hang: waited {HANG:?} for {what}");
            std::process::exit(101);
        }
        thread::yield_now();
    }
}

/// Upstream's `crate::common::test_rng()` (a seeded `rand` generator):
/// herdless does not depend on `rand`; a xorshift gives the same mean.
struct TestRng(u64);

impl TestRng {
    fn new(seed: u64) -> Self {
        TestRng(0x9E37_79B9_7F4A_7C15 ^ seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1)
    }

    /// `true` with probability `1 / n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0.is_multiple_of(n)
    }
}

#[derive(Eq, PartialEq, Debug)]
struct NonCopy(i32);

#[derive(Eq, PartialEq, Debug)]
struct NonCopyNeedsDrop(i32);

impl Drop for NonCopyNeedsDrop {
    fn drop(&mut self) {
        hint::black_box(());
    }
}

#[test]
fn test_needs_drop() {
    assert!(!mem::needs_drop::<NonCopy>());
    assert!(mem::needs_drop::<NonCopyNeedsDrop>());
}

/// A lock whose writer panicked: std's `new_poisoned_rwlock`. herdless does
/// not poison; the guard's drop during unwinding released the lock.
fn rwlock_after_a_writer_panicked<T>(config: RwSemConfig, value: T) -> RwLock<T> {
    let lock = RwLock::with_config(config, value);

    let catch_unwind_result = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard = lock.write();

        panic!("test panic to poison RwLock");
    }));

    assert!(catch_unwind_result.is_err());
    assert!(!lock.is_locked(), "unwinding released the write lock");

    lock
}

// ----- std's `nonpoison_and_poison_unwrap_test!` pairs ------------------------

/// `nonpoison_smoke` / `poison_smoke`.
#[test]
fn smoke() {
    each_config(|config| {
        let l = RwLock::with_config(config, ());
        drop(l.read());
        drop(l.write());
        drop((l.read(), l.read()));
        drop(l.write());
    });
}

/// `nonpoison_frob` / `poison_frob`.
#[test]
fn frob() {
    const N: u32 = 10;
    const M: usize = 1000;
    each_config(|config| {
        let r = Arc::new(RwLock::with_config(config, ()));

        let (tx, rx) = channel::<()>();
        for t in 0..N {
            let tx = tx.clone();
            let r = r.clone();
            thread::spawn(move || {
                let mut rng = TestRng::new(u64::from(t));
                for _ in 0..M {
                    if rng.one_in(u64::from(N)) {
                        drop(r.write());
                    } else {
                        drop(r.read());
                    }
                }
                drop(tx);
            });
        }
        drop(tx);
        let _ = rx.recv();
    });
}

/// `nonpoison_test_rw_arc` / `poison_test_rw_arc`.
#[test]
fn test_rw_arc() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 0));
        let arc2 = arc.clone();
        let (tx, rx) = channel();

        thread::spawn(move || {
            let mut lock = arc2.write();
            for _ in 0..10 {
                let tmp = *lock;
                *lock = -1;
                thread::yield_now();
                *lock = tmp + 1;
            }
            tx.send(()).unwrap();
        });

        // Readers try to catch the writer in the act
        let mut children = Vec::new();
        for _ in 0..5 {
            let arc3 = arc.clone();
            children.push(thread::spawn(move || {
                let lock = arc3.read();
                assert!(*lock >= 0);
            }));
        }

        // Wait for children to pass their asserts
        for r in children {
            assert!(r.join().is_ok());
        }

        // Wait for writer to finish
        rx.recv().unwrap();
        let lock = arc.read();
        assert_eq!(*lock, 10);
    });
}

/// `nonpoison_test_rw_arc_access_in_unwind` / `poison_...`.
#[test]
fn test_rw_arc_access_in_unwind() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _ = thread::spawn(move || {
            struct Unwinder {
                i: Arc<RwLock<isize>>,
            }
            impl Drop for Unwinder {
                fn drop(&mut self) {
                    let mut lock = self.i.write();
                    *lock += 1;
                }
            }
            let _u = Unwinder { i: arc2 };
            panic!();
        })
        .join();
        let lock = arc.read();
        assert_eq!(*lock, 2);
    });
}

/// `nonpoison_test_rwlock_unsized` / `poison_...`.
#[test]
fn test_rwlock_unsized() {
    each_config(|config| {
        let rw: &RwLock<[i32]> = &RwLock::with_config(config, [1, 2, 3]);
        {
            let b = &mut *rw.write();
            b[0] = 4;
            b[2] = 5;
        }
        let comp: &[i32] = &[4, 2, 5];
        assert_eq!(&*rw.read(), comp);
    });
}

/// `nonpoison_test_into_inner` / `poison_...`.
#[test]
fn test_into_inner() {
    each_config(|config| {
        let m = RwLock::with_config(config, NonCopy(10));
        assert_eq!(m.into_inner(), NonCopy(10));
    });
}

/// `nonpoison_test_into_inner_drop` / `poison_...`.
#[test]
fn test_into_inner_drop() {
    each_config(|config| {
        struct Foo(Arc<AtomicUsize>);
        impl Drop for Foo {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }

        let num_drops = Arc::new(AtomicUsize::new(0));
        let m = RwLock::with_config(config, Foo(num_drops.clone()));
        assert_eq!(num_drops.load(Ordering::SeqCst), 0);
        {
            let _inner = m.into_inner();
            assert_eq!(num_drops.load(Ordering::SeqCst), 0);
        }
        assert_eq!(num_drops.load(Ordering::SeqCst), 1);
    });
}

/// `nonpoison_test_get_cloned` / `poison_...`. lock_api has no
/// `get_cloned`; its equivalent is `read().clone()`.
#[test]
fn test_get_cloned() {
    each_config(|config| {
        #[derive(Clone, Eq, PartialEq, Debug)]
        struct Cloneable(i32);

        let m = RwLock::with_config(config, Cloneable(10));

        assert_eq!(m.read().clone(), Cloneable(10));
    });
}

/// `nonpoison_test_get_mut` / `poison_...`.
#[test]
fn test_get_mut() {
    each_config(|config| {
        let mut m = RwLock::with_config(config, NonCopy(10));
        *m.get_mut() = NonCopy(20);
        assert_eq!(m.into_inner(), NonCopy(20));
    });
}

/// `nonpoison_test_set` / `poison_...`. lock_api has no `set`; its
/// equivalent is an assignment through the write guard.
#[test]
fn test_set() {
    fn inner<T>(config: RwSemConfig, mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = RwLock::with_config(config, init());

        assert_eq!(*m.read(), init());
        *m.write() = value();
        assert_eq!(*m.read(), value());
    }

    each_config(|config| {
        inner(config, || NonCopy(10), || NonCopy(20));
        inner(config, || NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
    });
}

/// `nonpoison_test_replace` / `poison_...`. lock_api has no `replace`; its
/// equivalent is `mem::replace` through the write guard.
#[test]
fn test_replace() {
    fn inner<T>(config: RwSemConfig, mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = RwLock::with_config(config, init());

        assert_eq!(*m.read(), init());
        assert_eq!(mem::replace(&mut *m.write(), value()), init());
        assert_eq!(*m.read(), value());
    }

    each_config(|config| {
        inner(config, || NonCopy(10), || NonCopy(20));
        inner(config, || NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
    });
}

/// `nonpoison_test_downgrade_basic` / `poison_...`.
#[test]
fn test_downgrade_basic() {
    each_config(|config| {
        let r = RwLock::with_config(config, ());

        let write_guard = r.write();
        let _read_guard = RwLockWriteGuard::downgrade(write_guard);
    });
}

/// `nonpoison_test_downgrade_observe` / `poison_...`.
#[test]
fn test_downgrade_observe() {
    // Inspired by the test `test_rwlock_downgrade` from:
    // https://github.com/Amanieu/parking_lot/blob/master/src/rwlock.rs

    const W: usize = 20;
    const N: usize = 100;

    each_config(|config| {
        // This test spawns `W` writer threads, where each will increment a counter `N` times,
        // ensuring that the value they wrote has not changed after downgrading.

        let rw = Arc::new(RwLock::with_config(config, 0));

        // Spawn the writers that will do `W * N` operations and checks.
        let handles: Vec<_> = (0..W)
            .map(|_| {
                let rw = rw.clone();
                thread::spawn(move || {
                    for _ in 0..N {
                        // Increment the counter.
                        let mut write_guard = rw.write();
                        *write_guard += 1;
                        let cur_val = *write_guard;

                        // Downgrade the lock to read mode, where the value protected cannot be
                        // modified.
                        let read_guard = RwLockWriteGuard::downgrade(write_guard);
                        assert_eq!(cur_val, *read_guard);
                    }
                })
            })
            .collect();

        for handle in handles {
            handle.join().unwrap();
        }

        assert_eq!(*rw.read(), W * N);
    });
}

/// `nonpoison_test_downgrade_atomic` / `poison_...`. Upstream sleeps 42 ms
/// so that the evil writers go to sleep ("not strictly necessary"); here we
/// wait until all of them are queued, which is what the sleep hoped for.
#[test]
fn test_downgrade_atomic() {
    const NEW_VALUE: i32 = -1;

    // `W` is the number of evil writer threads.
    const W: usize = 20;

    each_config(|config| {
        // This test checks that `downgrade` is atomic, meaning as soon as a write lock has been
        // downgraded, the lock must be in read mode and no other threads can take the write lock to
        // modify the protected value.

        let rwlock = Arc::new(RwLock::with_config(config, 0));

        // Spawns many evil writer threads that will try and write to the locked value before the
        // initial writer (who has the exclusive lock) can read after it downgrades.
        // If the `RwLock` behaves correctly, then the initial writer should read the value it wrote
        // itself as no other thread should be able to mutate the protected value.

        // Put the lock in write mode, causing all future threads trying to access this go to sleep.
        let mut main_write_guard = rwlock.write();

        // Spawn all of the evil writer threads. They will each increment the protected value by 1.
        let handles: Vec<_> = (0..W)
            .map(|_| {
                let rwlock = rwlock.clone();
                thread::spawn(move || {
                    // Will go to sleep since the main thread initially has the write lock.
                    let mut evil_guard = rwlock.write();
                    *evil_guard += 1;
                })
            })
            .collect();

        // Wait until the evil threads are asleep.
        until("the evil writers queued", || rwlock.waiters() == W);

        // Once everyone is asleep, set the value to `NEW_VALUE`.
        *main_write_guard = NEW_VALUE;

        // Atomically downgrade the write guard into a read guard.
        let main_read_guard = RwLockWriteGuard::downgrade(main_write_guard);

        // If the above is not atomic, then it would be possible for an evil thread to get in front
        // of this read and change the value to be non-negative.
        assert_eq!(*main_read_guard, NEW_VALUE, "`downgrade` was not atomic");

        // Drop the main read guard and allow the evil writer threads to start incrementing.
        drop(main_read_guard);

        for handle in handles {
            handle.join().unwrap();
        }

        let final_check = rwlock.read();
        assert_eq!(*final_check, W as i32 + NEW_VALUE);
    });
}

/// `nonpoison_test_mapping_mapped_guard` / `poison_...`.
#[test]
fn test_mapping_mapped_guard() {
    each_config(|config| {
        let arr = [0; 4];
        let mut lock = RwLock::with_config(config, arr);
        let guard = lock.write();
        let guard = RwLockWriteGuard::map(guard, |arr| &mut arr[..2]);
        let mut guard = MappedRwLockWriteGuard::map(guard, |slice| &mut slice[1..]);
        assert_eq!(guard.len(), 1);
        guard[0] = 42;
        drop(guard);
        assert_eq!(*lock.get_mut(), [0, 42, 0, 0]);

        let guard = lock.read();
        let guard = RwLockReadGuard::map(guard, |arr| &arr[..2]);
        let guard = MappedRwLockReadGuard::map(guard, |slice| &slice[1..]);
        assert_eq!(*guard, [42]);
        drop(guard);
        assert_eq!(*lock.get_mut(), [0, 42, 0, 0]);
    });
}

/// `nonpoison_test_rwlock_try_write` and `poison_test_rwlock_try_write`:
/// std returns `Err(WouldBlock)` / `Err(TryLockError::WouldBlock)`; lock_api
/// returns `None`.
#[test]
fn test_rwlock_try_write() {
    each_config(|config| {
        let lock = RwLock::with_config(config, 0isize);
        let read_guard = lock.read();

        let write_result = lock.try_write();
        assert!(
            write_result.is_none(),
            "try_write should not succeed while read_guard is in scope"
        );

        drop(read_guard);
        let mapped_read_guard = RwLockReadGuard::map(lock.read(), |_| &());

        let write_result = lock.try_write();
        assert!(
            write_result.is_none(),
            "try_write should not succeed while mapped_read_guard is in scope"
        );

        drop(mapped_read_guard);
    });
}

// ----- std's poison tests, as herdless's no-poison semantics -----------------

/// `test_into_inner_poison`: std returns `Err(PoisonError)` holding the
/// value; herdless does not poison, so `into_inner` returns it.
#[test]
fn test_into_inner_poison() {
    each_config(|config| {
        let m = rwlock_after_a_writer_panicked(config, NonCopy(10));

        assert_eq!(m.into_inner(), NonCopy(10));
    });
}

/// `test_get_cloned_poison`: std's `get_cloned` fails on a poisoned lock;
/// herdless's equivalent (`read().clone()`) reads the value.
#[test]
fn test_get_cloned_poison() {
    each_config(|config| {
        #[derive(Clone, Eq, PartialEq, Debug)]
        struct Cloneable(i32);

        let m = rwlock_after_a_writer_panicked(config, Cloneable(10));

        assert_eq!(m.read().clone(), Cloneable(10));
    });
}

/// `test_get_mut_poison`: std returns `Err(PoisonError)`; herdless gives
/// the value.
#[test]
fn test_get_mut_poison() {
    each_config(|config| {
        let mut m = rwlock_after_a_writer_panicked(config, NonCopy(10));

        assert_eq!(*m.get_mut(), NonCopy(10));
    });
}

/// `test_set_poison`: std's `set` refuses a poisoned lock and hands the new
/// value back; herdless stores it.
#[test]
fn test_set_poison() {
    fn inner<T>(config: RwSemConfig, mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = rwlock_after_a_writer_panicked(config, init());

        *m.write() = value();
        assert_eq!(m.into_inner(), value());
    }

    each_config(|config| {
        inner(config, || NonCopy(10), || NonCopy(20));
        inner(config, || NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
    });
}

/// `test_replace_poison`: std's `replace` refuses a poisoned lock; herdless
/// replaces and returns the old value.
#[test]
fn test_replace_poison() {
    fn inner<T>(config: RwSemConfig, mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = rwlock_after_a_writer_panicked(config, init());

        assert_eq!(mem::replace(&mut *m.write(), value()), init());
        assert_eq!(m.into_inner(), value());
    }

    each_config(|config| {
        inner(config, || NonCopy(10), || NonCopy(20));
        inner(config, || NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
    });
}

/// `test_rw_arc_poison_wr`: std's `read` after a writer panicked is `Err`;
/// herdless's succeeds with the value unchanged.
#[test]
fn test_rw_arc_poison_wr() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let _lock = arc2.write();
            panic!();
        })
        .join();
        assert_eq!(*arc.read(), 1);
    });
}

/// `test_rw_arc_poison_mapped_w_r`: as above, the writer holding a mapped
/// guard.
#[test]
fn test_rw_arc_poison_mapped_w_r() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let lock = arc2.write();
            let _lock = RwLockWriteGuard::map(lock, |val| val);
            panic!();
        })
        .join();
        assert_eq!(*arc.read(), 1);
    });
}

/// `test_rw_arc_poison_ww`: std's `write` after a writer panicked is `Err`
/// and `is_poisoned()` holds; herdless's succeeds (it has no
/// `is_poisoned`).
#[test]
fn test_rw_arc_poison_ww() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let _lock = arc2.write();
            panic!();
        })
        .join();
        assert_eq!(*arc.write(), 1);
    });
}

/// `test_rw_arc_poison_mapped_w_w`: as above, with a mapped guard.
#[test]
fn test_rw_arc_poison_mapped_w_w() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let lock = arc2.write();
            let _lock = RwLockWriteGuard::map(lock, |val| val);
            panic!();
        })
        .join();
        assert_eq!(*arc.write(), 1);
    });
}

#[test]
fn test_rw_arc_no_poison_rr() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let _lock = arc2.read();
            panic!();
        })
        .join();
        let lock = arc.read();
        assert_eq!(*lock, 1);
    });
}

#[test]
fn test_rw_arc_no_poison_mapped_r_r() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let lock = arc2.read();
            let _lock = RwLockReadGuard::map(lock, |val| val);
            panic!();
        })
        .join();
        let lock = arc.read();
        assert_eq!(*lock, 1);
    });
}

#[test]
fn test_rw_arc_no_poison_rw() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let _lock = arc2.read();
            panic!()
        })
        .join();
        let lock = arc.write();
        assert_eq!(*lock, 1);
    });
}

#[test]
fn test_rw_arc_no_poison_mapped_r_w() {
    each_config(|config| {
        let arc = Arc::new(RwLock::with_config(config, 1));
        let arc2 = arc.clone();
        let _: Result<(), _> = thread::spawn(move || {
            let lock = arc2.read();
            let _lock = RwLockReadGuard::map(lock, |val| val);
            panic!();
        })
        .join();
        let lock = arc.write();
        assert_eq!(*lock, 1);
    });
}

/// std's `filter_map` is lock_api's `try_map`; a panic in either closure
/// must release the read lock (and poisons nothing, in both). std's
/// `RwLock` is `RefUnwindSafe`; lock_api's is not (its `UnsafeCell<T>`), so
/// the closures are wrapped in `AssertUnwindSafe`.
#[test]
fn panic_while_mapping_read_unlocked_no_poison() {
    each_config(|config| {
        let lock = RwLock::with_config(config, ());

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.read();
            let _guard = RwLockReadGuard::map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a RwLockReadGuard::map closure should release the read lock"
        );

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.read();
            let _guard = RwLockReadGuard::try_map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a RwLockReadGuard::filter_map closure should release the read lock"
        );

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.read();
            let guard = RwLockReadGuard::map::<(), _>(guard, |val| val);
            let _guard = MappedRwLockReadGuard::map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a MappedRwLockReadGuard::map closure should release the read lock"
        );

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.read();
            let guard = RwLockReadGuard::map::<(), _>(guard, |val| val);
            let _guard = MappedRwLockReadGuard::try_map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a MappedRwLockReadGuard::filter_map closure should release the read lock"
        );
    });
}

/// std: a panic in a write guard's `map` / `filter_map` closure releases the
/// lock *and poisons it* (`try_write` is `Err(Poisoned)`). herdless does
/// not poison: the lock is released and `try_write` succeeds.
/// (`AssertUnwindSafe` as above.)
#[test]
fn panic_while_mapping_write_unlocked_poison() {
    each_config(|config| {
        let lock = RwLock::with_config(config, ());

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.write();
            let _guard = RwLockWriteGuard::map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a RwLockWriteGuard::map closure should release the write lock"
        );

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.write();
            let _guard = RwLockWriteGuard::try_map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a RwLockWriteGuard::filter_map closure should release the write lock"
        );

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.write();
            let guard = RwLockWriteGuard::map::<(), _>(guard, |val| val);
            let _guard = MappedRwLockWriteGuard::map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a MappedRwLockWriteGuard::map closure should release the write lock"
        );

        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            let guard = lock.write();
            let guard = RwLockWriteGuard::map::<(), _>(guard, |val| val);
            let _guard = MappedRwLockWriteGuard::try_map::<(), _>(guard, |_| panic!());
        }));

        assert!(
            lock.try_write().is_some(),
            "panicking in a MappedRwLockWriteGuard::filter_map closure should release the write lock"
        );
    });
}

/// std's `nonpoison::RwLock::with`; lock_api has no `with`: the closure
/// runs on the read guard.
#[test]
fn test_rwlock_with() {
    each_config(|config| {
        let rwlock = RwLock::with_config(config, 2);
        let with = |f: &dyn Fn(&i32) -> i32| f(&rwlock.read());
        let result = with(&|value| *value + 3);

        assert_eq!(result, 5);
    });
}

/// std's `nonpoison::RwLock::with_mut`; the closure runs on the write
/// guard.
#[test]
fn test_rwlock_with_mut() {
    each_config(|config| {
        let rwlock = RwLock::with_config(config, 2);

        let with_mut = |f: &dyn Fn(&mut i32) -> i32| f(&mut rwlock.write());
        let result = with_mut(&|value| {
            *value += 3;

            *value + 5
        });

        assert_eq!(*rwlock.read(), 5);
        assert_eq!(result, 10);
    });
}

// ----- std's non-poison tests ----------------------------------------------

/// Upstream calls `RwLockWriteGuard::unlocked` on a *read* guard (the
/// `nonpoison` module's `unlocked` is generic over both); lock_api's is
/// `RwLockReadGuard::unlocked`. `TryLockResult::Err` / `Ok` are `None` /
/// `Some`.
#[test]
fn test_read_guard_unlocked() {
    each_config(|config| {
        let rw_lock = RwLock::with_config(config, 1usize);
        let mut read_guard = rw_lock.read();

        assert!(rw_lock.try_write().is_none());

        RwLockReadGuard::unlocked(&mut read_guard, || {
            assert!(rw_lock.try_write().is_some());
        });

        assert!(rw_lock.try_write().is_none());
    });
}

#[test]
fn test_write_guard_unlocked() {
    each_config(|config| {
        let rw_lock = RwLock::with_config(config, 1usize);
        let mut write_guard = rw_lock.write();

        assert!(rw_lock.try_write().is_none());

        RwLockWriteGuard::unlocked(&mut write_guard, || {
            assert!(rw_lock.try_write().is_some());
        });

        assert!(rw_lock.try_write().is_none());
    });
}
