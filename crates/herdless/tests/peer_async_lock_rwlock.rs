//! Port of smol-rs/async-lock's `tests/rwlock.rs` (async-lock 3.4.2) onto
//! `herdless::RwSem` and its async forms (`RwSemAsyncExt`): `read().await`
//! is `read_async().await`, `*_blocking()` the blocking calls,
//! `RwLockUpgradableReadGuard::upgrade(g).await` is
//! `RwSem::upgrade_async(g).await`. Upstream's helpers are replaced by
//! equivalents without their crates: `spawn` runs the future on its own
//! thread with `block_on` and hands the result back over a std channel
//! (upstream: flume), `fastrand` is a small xorshift, `future::or` is
//! `futures::future::select`; upstream's `check_yields_when_contended`
//! is `async_common::peer`'s (shared with the mutex port). The `_arc` variants are not ported: herdless
//! has borrowed guards only (docs/PEER_SUITES.md).
#![cfg(not(loom))]
// clippy's `await_holding_lock` takes every `lock_api` guard for a blocking
// one; the guards of herdless's async forms are made to live across
// `.await` (RwSemAsyncExt's docs).
#![allow(clippy::await_holding_lock)]

mod async_common;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread;

use async_common::check_yields_when_contended;
use futures::executor::block_on;
use herdless::*;

/// Runs `f` on its own thread; the returned future resolves to its output.
fn spawn<T: Send + 'static>(
    f: impl Future<Output = T> + Send + 'static,
) -> impl Future<Output = T> {
    let (s, r) = mpsc::sync_channel(1);
    thread::spawn(move || {
        let _ = s.send(block_on(f));
    });
    async move { r.recv().unwrap() }
}

/// Returns `Pending` once, waking itself (upstream: `future::yield_now`).
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// A small xorshift (upstream: `fastrand::u32(..n)`).
fn rand_below(state: &mut u32, n: u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    *state % n
}

#[test]
fn smoke() {
    block_on(async {
        let lock = RwSem::new(());
        drop(lock.read_async().await);
        drop(lock.write_async().await);
        drop((lock.read_async().await, lock.read_async().await));
        drop(lock.write_async().await);
    });
}

#[test]
fn smoke_blocking() {
    let lock = RwSem::new(());
    drop(lock.read());
    drop(lock.write());
    drop((lock.read(), lock.read()));
    let read = lock.read();
    let upgradabe = lock.upgradable_read();
    drop(read);
    drop(RwSemUpgradableReadGuard::upgrade(upgradabe));
    drop(lock.write());
}

#[test]
fn try_write() {
    block_on(async {
        let lock = RwSem::new(0isize);
        let read_guard = lock.read_async().await;
        assert!(lock.try_write().is_none());
        drop(read_guard);
    });
}

#[test]
fn into_inner() {
    let lock = RwSem::new(10);
    assert_eq!(lock.into_inner(), 10);
}

#[test]
fn into_inner_and_drop() {
    struct Counter(Arc<AtomicUsize>);

    impl Drop for Counter {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let cnt = Arc::new(AtomicUsize::new(0));
    let lock = RwSem::new(Counter(cnt.clone()));
    assert_eq!(cnt.load(Ordering::SeqCst), 0);

    {
        let _inner = lock.into_inner();
        assert_eq!(cnt.load(Ordering::SeqCst), 0);
    }

    assert_eq!(cnt.load(Ordering::SeqCst), 1);
}

#[test]
fn get_mut() {
    let mut lock = RwSem::new(10);
    *lock.get_mut() = 20;
    assert_eq!(lock.into_inner(), 20);
}

#[test]
fn contention() {
    const N: u32 = 10;
    const M: usize = 1000;

    let (tx, rx) = mpsc::channel();
    let rw = Arc::new(RwSem::new(()));

    // Spawn N tasks that randomly acquire the lock M times.
    for seed in 0..N {
        let tx = tx.clone();
        let rw = rw.clone();

        let _spawned = spawn(async move {
            let mut rng = 0x9E37_79B9 ^ (seed + 1);
            for _ in 0..M {
                if rand_below(&mut rng, N) == 0 {
                    drop(rw.write_async().await);
                } else {
                    drop(rw.read_async().await);
                }
            }
            tx.send(()).unwrap();
        });
    }

    for _ in 0..N {
        rx.recv().unwrap();
    }
}

#[test]
fn writer_and_readers() {
    let lock = Arc::new(RwSem::new(0i32));
    let (tx, rx) = mpsc::channel();

    // Spawn a writer task.
    let _spawned = spawn({
        let lock = lock.clone();
        async move {
            let mut lock = lock.write_async().await;
            for _ in 0..1000 {
                let tmp = *lock;
                *lock = -1;
                yield_now().await;
                *lock = tmp + 1;
            }
            tx.send(()).unwrap();
        }
    });

    // Readers try to catch the writer in the act.
    let mut readers = Vec::new();
    for _ in 0..5 {
        let lock = lock.clone();
        readers.push(spawn(async move {
            for _ in 0..1000 {
                let lock = lock.read_async().await;
                assert!(*lock >= 0);
            }
        }));
    }

    block_on(async move {
        // Wait for readers to pass their asserts.
        for r in readers {
            r.await;
        }

        // Wait for writer to finish.
        rx.recv().unwrap();
        let lock = lock.read_async().await;
        assert_eq!(*lock, 1000);
    });
}

#[test]
fn upgrade() {
    block_on(async {
        let lock: RwSem<i32> = RwSem::new(0);

        let read_guard = lock.read_async().await;
        let read_guard2 = lock.read_async().await;
        // Should be able to obtain an upgradable lock.
        let upgradable_guard = lock.upgradable_read_async().await;
        // Should be able to obtain a read lock when an upgradable lock is active.
        let read_guard3 = lock.read_async().await;
        assert_eq!(0, *read_guard3);
        drop(read_guard);
        drop(read_guard2);
        drop(read_guard3);

        // Writers should not pass.
        assert!(lock.try_write().is_none());

        let mut write_guard = RwSemUpgradableReadGuard::try_upgrade(upgradable_guard).expect(
            "should be able to upgrade an upgradable lock because there are no more readers",
        );
        *write_guard += 1;
        drop(write_guard);

        let read_guard = lock.read_async().await;
        assert_eq!(1, *read_guard)
    });
}

#[test]
fn not_upgrade() {
    block_on(async {
        let mutex: RwSem<i32> = RwSem::new(0);

        let read_guard = mutex.read_async().await;
        let read_guard2 = mutex.read_async().await;
        // Should be able to obtain an upgradable lock.
        let upgradable_guard = mutex.upgradable_read_async().await;
        // Should be able to obtain a shared lock when an upgradable lock is active.
        let read_guard3 = mutex.read_async().await;
        assert_eq!(0, *read_guard3);
        drop(read_guard);
        drop(read_guard2);
        drop(read_guard3);

        // Drop the upgradable lock.
        drop(upgradable_guard);

        assert_eq!(0, *(mutex.read_async().await));

        // Should be able to acquire a write lock because there are no more readers.
        let mut write_guard = mutex.write_async().await;
        *write_guard += 1;
        drop(write_guard);

        let read_guard = mutex.read_async().await;
        assert_eq!(1, *read_guard)
    });
}

#[test]
fn upgradable_with_concurrent_writer() {
    block_on(async {
        let lock: Arc<RwSem<i32>> = Arc::new(RwSem::new(0));
        let lock2 = lock.clone();

        let upgradable_guard = lock.upgradable_read_async().await;

        // Boxed, not `pin!`ned: `select` must own both futures and drop
        // the loser with the statement, as upstream's `future::or` does (a
        // pinned local would outlive it, granted and never polled again,
        // holding the lock: the case of async-lock #91).
        let writer = Box::pin(async move {
            let mut write_guard = lock2.write_async().await;
            *write_guard = 1;
        });
        let upgrader = Box::pin(async move {
            let mut write_guard = RwSem::upgrade_async(upgradable_guard).await;
            assert_eq!(*write_guard, 0);
            *write_guard = 2;
        });
        // Upstream: `future::or(writer, upgrader)`, the first one polled
        // first; `select` does the same.
        futures::future::select(writer, upgrader).await;

        assert_eq!(2, *(lock.write_async().await));

        let read_guard = lock.read_async().await;
        assert_eq!(2, *read_guard);
    });
}

#[test]
fn yields_when_contended() {
    let rw = RwSem::new(());

    check_yields_when_contended(rw.try_write().unwrap(), rw.read_async());
    check_yields_when_contended(rw.try_write().unwrap(), rw.upgradable_read_async());
    check_yields_when_contended(rw.try_write().unwrap(), rw.write_async());

    check_yields_when_contended(rw.try_read().unwrap(), rw.write_async());

    check_yields_when_contended(rw.try_upgradable_read().unwrap(), rw.write_async());
    check_yields_when_contended(
        rw.try_upgradable_read().unwrap(),
        rw.upgradable_read_async(),
    );

    let upgradable = rw.try_upgradable_read().unwrap();
    check_yields_when_contended(rw.try_read().unwrap(), RwSem::upgrade_async(upgradable));
}

#[test]
fn cancellation() {
    block_on(async {
        let rw = RwSem::new(());

        drop(rw.read_async());

        drop(rw.upgradable_read_async());

        drop(rw.write_async());

        let read = rw.read_async().await;
        drop(read);

        let upgradable_read = rw.upgradable_read_async().await;
        drop(upgradable_read);

        let write = rw.write_async().await;
        drop(write);

        let upgradable_read = rw.upgradable_read_async().await;
        drop(RwSem::upgrade_async(upgradable_read));

        let upgradable_read = rw.upgradable_read_async().await;
        let write = RwSem::upgrade_async(upgradable_read).await;
        drop(write);

        // herdless addition: after every cancellation, the lock is free.
        assert!(rw.try_write().is_some());
    });
}
