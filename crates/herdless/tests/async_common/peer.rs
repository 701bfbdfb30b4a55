//! Upstream test helpers the peer ports share: tokio-test's
//! `assert_ready!` / `assert_pending!` (used with [`super::spawn`], its
//! `task::spawn`) and async-lock's `check_yields_when_contended`
//! (its `tests/common`).

use std::future::Future;
use std::pin::pin;
use std::task::Context;

use super::counting_waker;

/// tokio-test's `assert_ready!`: the poll's value, or a panic if pending.
macro_rules! assert_ready {
    ($e:expr) => {
        match $e {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("pending"),
        }
    };
}

/// tokio-test's `assert_pending!`.
macro_rules! assert_pending {
    ($e:expr) => {
        assert!($e.is_pending(), "ready")
    };
}

/// async-lock's `check_yields_when_contended` (tests/common): the future
/// is pending while the guard is held, woken when it is dropped, then
/// ready.
pub fn check_yields_when_contended<G>(contending_guard: G, acquire_future: impl Future) {
    let (counter, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    let mut acquire_future = pin!(acquire_future);
    assert!(acquire_future.as_mut().poll(&mut cx).is_pending());
    drop(contending_guard);
    assert!(counter.wakes() > 0);
    assert!(acquire_future.poll(&mut cx).is_ready());
}
