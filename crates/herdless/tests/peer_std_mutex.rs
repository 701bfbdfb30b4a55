//! Rust std's `Mutex` tests (`library/std/tests/sync/mutex.rs`, rust-lang/rust
//! at 0f76c01b7464), ported to `herdless::Mutex`.
//!
//! Upstream runs most tests twice, through `nonpoison_and_poison_unwrap_test!`
//! (`maybe_unwrap` unwraps a poisoning `LockResult`). herdless's mutex does
//! not poison (as parking_lot's), so each test runs once with plain guards.
//! Tests of poisoning itself are ported as tests of herdless's semantics:
//! a panic while the lock is held releases it and leaves the data as it
//! was. std's `get_cloned`, `set`, `replace` and `with_mut` are not in the
//! `lock_api` 0.5 API herdless exposes: their tests are ported with the
//! guard doing the same job. `docs/PEER_SUITES.md` maps every upstream test.
#![cfg(not(loom))]

use std::fmt::Debug;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::{hint, mem, thread};

use herdless::{MappedMutexGuard, Mutex, MutexGuard};

#[test]
fn smoke() {
    let m = Mutex::new(());
    drop(m.lock());
    drop(m.lock());
}

#[test]
fn lots_and_lots() {
    const J: u32 = 1000;
    const K: u32 = 3;

    let m = Arc::new(Mutex::new(0));

    fn inc(m: &Mutex<u32>) {
        for _ in 0..J {
            *m.lock() += 1;
        }
    }

    let (tx, rx) = channel();
    for _ in 0..K {
        let tx2 = tx.clone();
        let m2 = m.clone();
        thread::spawn(move || {
            inc(&m2);
            tx2.send(()).unwrap();
        });
        let tx2 = tx.clone();
        let m2 = m.clone();
        thread::spawn(move || {
            inc(&m2);
            tx2.send(()).unwrap();
        });
    }

    drop(tx);
    for _ in 0..2 * K {
        rx.recv().unwrap();
    }
    assert_eq!(*m.lock(), J * K * 2);
}

#[test]
fn try_lock() {
    let m = Mutex::new(());
    *m.try_lock().unwrap() = ();
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

#[test]
fn test_into_inner() {
    let m = Mutex::new(NonCopy(10));
    assert_eq!(m.into_inner(), NonCopy(10));
}

#[test]
fn test_into_inner_drop() {
    struct Foo(Arc<AtomicUsize>);
    impl Drop for Foo {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let num_drops = Arc::new(AtomicUsize::new(0));
    let m = Mutex::new(Foo(num_drops.clone()));
    assert_eq!(num_drops.load(Ordering::SeqCst), 0);
    {
        let _inner = m.into_inner();
        assert_eq!(num_drops.load(Ordering::SeqCst), 0);
    }
    assert_eq!(num_drops.load(Ordering::SeqCst), 1);
}

#[test]
fn test_get_mut() {
    let mut m = Mutex::new(NonCopy(10));
    *m.get_mut() = NonCopy(20);
    assert_eq!(m.into_inner(), NonCopy(20));
}

/// std's `Mutex::get_cloned`: the guard's `clone` does the same job.
#[test]
fn test_get_cloned() {
    #[derive(Clone, Eq, PartialEq, Debug)]
    struct Cloneable(i32);

    let m = Mutex::new(Cloneable(10));

    assert_eq!(m.lock().clone(), Cloneable(10));
}

/// std's `Mutex::set`: an assignment through the guard.
#[test]
fn test_set() {
    fn inner<T>(mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = Mutex::new(init());

        assert_eq!(*m.lock(), init());
        *m.lock() = value();
        assert_eq!(*m.lock(), value());
    }

    inner(|| NonCopy(10), || NonCopy(20));
    inner(|| NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
}

/// Old values replaced through the guard (std: `set`) are dropped.
#[test]
fn test_set_drop() {
    struct Foo(Arc<AtomicUsize>);
    impl Drop for Foo {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let num_drops = Arc::new(AtomicUsize::new(0));
    let m = Mutex::new(Foo(num_drops.clone()));
    assert_eq!(num_drops.load(Ordering::SeqCst), 0);

    let different = Foo(Arc::new(AtomicUsize::new(42)));
    *m.lock() = different;
    assert_eq!(num_drops.load(Ordering::SeqCst), 1);
}

/// std's `Mutex::replace`: `mem::replace` through the guard.
#[test]
fn test_replace() {
    fn inner<T>(mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = Mutex::new(init());

        assert_eq!(*m.lock(), init());
        assert_eq!(mem::replace(&mut *m.lock(), value()), init());
        assert_eq!(*m.lock(), value());
    }

    inner(|| NonCopy(10), || NonCopy(20));
    inner(|| NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
}

#[test]
fn test_mutex_arc_nested() {
    // Tests nested mutexes and access to underlying data.
    let arc = Arc::new(Mutex::new(1));
    let arc2 = Arc::new(Mutex::new(arc));
    let (tx, rx) = channel();
    let _t = thread::spawn(move || {
        let lock = arc2.lock();
        let lock2 = lock.lock();
        assert_eq!(*lock2, 1);
        tx.send(()).unwrap();
    });
    rx.recv().unwrap();
}

#[test]
fn test_mutex_unsized() {
    let mutex: &Mutex<[i32]> = &Mutex::new([1, 2, 3]);
    {
        let b = &mut *mutex.lock();
        b[0] = 4;
        b[2] = 5;
    }
    let comp: &[i32] = &[4, 2, 5];
    assert_eq!(&*mutex.lock(), comp);
}

#[test]
fn test_mapping_mapped_guard() {
    let arr = [0; 4];
    let lock = Mutex::new(arr);
    let guard = lock.lock();
    let guard = MutexGuard::map(guard, |arr| &mut arr[..2]);
    let mut guard = MappedMutexGuard::map(guard, |slice| &mut slice[1..]);
    assert_eq!(guard.len(), 1);
    guard[0] = 42;
    drop(guard);
    assert_eq!(*lock.lock(), [0, 42, 0, 0]);
}

#[test]
fn test_panics() {
    let mutex = Mutex::new(42);

    let catch_unwind_result1 = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard1 = mutex.lock();

        panic!("test panic with mutex once");
    }));
    assert!(catch_unwind_result1.is_err());

    let catch_unwind_result2 = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard2 = mutex.lock();

        panic!("test panic with mutex twice");
    }));
    assert!(catch_unwind_result2.is_err());

    let catch_unwind_result3 = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard3 = mutex.lock();

        panic!("test panic with mutex thrice");
    }));
    assert!(catch_unwind_result3.is_err());
}

#[test]
fn test_mutex_arc_access_in_unwind() {
    let arc = Arc::new(Mutex::new(1));
    let arc2 = arc.clone();
    let _ = thread::spawn(move || {
        struct Unwinder {
            i: Arc<Mutex<i32>>,
        }
        impl Drop for Unwinder {
            fn drop(&mut self) {
                *self.i.lock() += 1;
            }
        }
        let _u = Unwinder { i: arc2 };
        panic!();
    })
    .join();
    let lock = arc.lock();
    assert_eq!(*lock, 2);
}

// ----- std's poison tests, as tests of herdless's semantics -------------
// std poisons a mutex whose guard is dropped by a panic; herdless (like
// parking_lot) does not: the unwinding guard releases the lock, and the
// data is whatever the panicking thread left.

/// std `new_poisoned_mutex`: a mutex whose holder panicked.
fn mutex_after_a_panic<T>(value: T) -> Mutex<T> {
    let mutex = Mutex::new(value);

    let catch_unwind_result = panic::catch_unwind(AssertUnwindSafe(|| {
        let _guard = mutex.lock();

        panic!("test panic to poison mutex");
    }));

    assert!(catch_unwind_result.is_err());
    assert!(!mutex.is_locked(), "the unwinding guard released the lock");

    mutex
}

/// std `test_into_inner_poison`: the value comes back, without an error.
#[test]
fn test_into_inner_poison() {
    let m = mutex_after_a_panic(NonCopy(10));
    assert_eq!(m.into_inner(), NonCopy(10));
}

/// std `test_get_cloned_poison`.
#[test]
fn test_get_cloned_poison() {
    #[derive(Clone, Eq, PartialEq, Debug)]
    struct Cloneable(i32);

    let m = mutex_after_a_panic(Cloneable(10));
    assert_eq!(m.lock().clone(), Cloneable(10));
}

/// std `test_get_mut_poison`.
#[test]
fn test_get_mut_poison() {
    let mut m = mutex_after_a_panic(NonCopy(10));
    assert_eq!(*m.get_mut(), NonCopy(10));
}

/// std `test_set_poison`.
#[test]
fn test_set_poison() {
    fn inner<T>(mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = mutex_after_a_panic(init());
        *m.lock() = value();
        assert_eq!(m.into_inner(), value());
    }

    inner(|| NonCopy(10), || NonCopy(20));
    inner(|| NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
}

/// std `test_replace_poison`.
#[test]
fn test_replace_poison() {
    fn inner<T>(mut init: impl FnMut() -> T, mut value: impl FnMut() -> T)
    where
        T: Debug + Eq,
    {
        let m = mutex_after_a_panic(init());
        assert_eq!(mem::replace(&mut *m.lock(), value()), init());
        assert_eq!(m.into_inner(), value());
    }

    inner(|| NonCopy(10), || NonCopy(20));
    inner(|| NonCopyNeedsDrop(10), || NonCopyNeedsDrop(20));
}

/// std `test_mutex_arc_poison`: the thread's assertion fails while it
/// holds the lock; the lock is free and usable afterwards.
#[test]
fn test_mutex_arc_poison() {
    let arc = Arc::new(Mutex::new(1));
    let arc2 = arc.clone();
    let joined = thread::spawn(move || {
        let lock = arc2.lock();
        assert_eq!(*lock, 2); // deliberate assertion failure while holding the lock
    })
    .join();
    assert!(joined.is_err());
    assert_eq!(*arc.lock(), 1);
}

/// std `test_mutex_arc_poison_mapped`.
#[test]
fn test_mutex_arc_poison_mapped() {
    let arc = Arc::new(Mutex::new(1));
    let arc2 = arc.clone();
    let joined = thread::spawn(move || {
        let lock = arc2.lock();
        let lock = MutexGuard::map(lock, |val| val);
        assert_eq!(*lock, 2); // deliberate assertion failure while holding the lock
    })
    .join();
    assert!(joined.is_err());
    assert_eq!(*arc.lock(), 1);
}

/// std `panic_while_mapping_unlocked_poison`: a panic inside a `map` (or
/// `try_map`, lock_api's `filter_map`) closure unlocks the mutex; std also
/// poisons it, herdless does not. (std's mutex is `RefUnwindSafe`,
/// lock_api's is not: the closures are wrapped in `AssertUnwindSafe`.)
#[test]
fn panic_while_mapping_unlocked_poison() {
    let lock = Mutex::new(());

    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let guard = lock.lock();
        let _guard = MutexGuard::map::<(), _>(guard, |_| panic!());
    }));
    assert!(
        lock.try_lock().is_some(),
        "panicking in a MutexGuard::map closure should unlock the mutex"
    );

    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let guard = lock.lock();
        let _guard = MutexGuard::try_map::<(), _>(guard, |_| panic!());
    }));
    assert!(
        lock.try_lock().is_some(),
        "panicking in a MutexGuard::try_map closure should unlock the mutex"
    );

    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let guard = lock.lock();
        let guard = MutexGuard::map::<(), _>(guard, |val| val);
        let _guard = MappedMutexGuard::map::<(), _>(guard, |_| panic!());
    }));
    assert!(
        lock.try_lock().is_some(),
        "panicking in a MappedMutexGuard::map closure should unlock the mutex"
    );

    let _ = panic::catch_unwind(AssertUnwindSafe(|| {
        let guard = lock.lock();
        let guard = MutexGuard::map::<(), _>(guard, |val| val);
        let _guard = MappedMutexGuard::try_map::<(), _>(guard, |_| panic!());
    }));
    assert!(
        lock.try_lock().is_some(),
        "panicking in a MappedMutexGuard::try_map closure should unlock the mutex"
    );
}

/// std's `nonpoison::Mutex::with_mut`: the same through a guard.
#[test]
fn test_mutex_with_mut() {
    let mutex = Mutex::new(2);

    let result = {
        let mut value = mutex.lock();
        *value += 3;
        *value + 5
    };

    assert_eq!(*mutex.lock(), 5);
    assert_eq!(result, 10);
}

#[test]
fn test_mutex_guard_unlocked() {
    let mutex = Mutex::new(1usize);
    let mut guard = mutex.lock();

    assert!(mutex.try_lock().is_none());

    MutexGuard::unlocked(&mut guard, || {
        assert!(mutex.try_lock().is_some());
    });

    assert!(mutex.try_lock().is_none());
}
