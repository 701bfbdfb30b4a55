//! Port of smol-rs/async-lock's `tests/mutex.rs` (async-lock 3.5.0) onto
//! `herdless::Mutex` and `MutexAsyncExt`: `lock().await` is
//! `lock_async().await`, `lock_blocking()` is `lock()`, `try_lock` is
//! lock_api's. Upstream's helpers are replaced by equivalents without
//! their crates: `flume`'s channel by std's (`send_async` by `send`, which
//! never blocks on an unbounded channel; `recv_async` by `recv`),
//! `future::block_on` by `futures::executor::block_on`, the
//! `check_yields_when_contended` helper (upstream `tests/common`) by the
//! same steps with a counting waker (`async_common::peer`, shared with
//! the rwlock port). The `_arc` tests are not ported: herdless has
//! borrowed guards only (docs/PEER_SUITES.md).
#![cfg(not(loom))]
// clippy's `await_holding_lock` takes every `lock_api` guard for a blocking
// one; herdless's mutex guard is made to live across `.await`
// (MutexAsyncExt's docs).
#![allow(clippy::await_holding_lock)]

mod async_common;

use std::sync::{mpsc, Arc};
use std::thread;

use async_common::check_yields_when_contended;
use futures::executor::block_on;
use herdless::*;

#[test]
fn smoke() {
    block_on(async {
        let m = Mutex::new(());
        drop(m.lock_async().await);
        drop(m.lock_async().await);
    })
}

#[test]
fn smoke_blocking() {
    let m = Mutex::new(());
    drop(m.lock());
    drop(m.lock());
}

#[test]
#[allow(clippy::unit_cmp, clippy::let_unit_value)]
fn try_lock() {
    let m = Mutex::new(());
    *m.try_lock().unwrap() = ();
}

#[test]
fn into_inner() {
    let m = Mutex::new(10i32);
    assert_eq!(m.into_inner(), 10);
}

#[test]
fn get_mut() {
    let mut m = Mutex::new(10i32);
    *m.get_mut() = 20;
    assert_eq!(m.into_inner(), 20);
}

#[test]
fn contention() {
    block_on(async {
        let (tx, rx) = mpsc::channel();

        let tx = Arc::new(tx);
        let mutex = Arc::new(Mutex::new(0i32));
        let num_tasks = 100;

        for _ in 0..num_tasks {
            let tx = tx.clone();
            let mutex = mutex.clone();

            thread::spawn(|| {
                block_on(async move {
                    let mut lock = mutex.lock_async().await;
                    *lock += 1;
                    tx.send(()).unwrap();
                    drop(lock);
                })
            });
        }

        for _ in 0..num_tasks {
            rx.recv().unwrap();
        }

        let lock = mutex.lock_async().await;
        assert_eq!(num_tasks, *lock);
    });
}

#[test]
fn yields_when_contended() {
    let m = Mutex::new(());
    check_yields_when_contended(m.try_lock().unwrap(), m.lock_async());
}
