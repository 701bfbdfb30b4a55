//! Hand-driven futures for the async scenario tests: a waker that counts
//! its wakes, and one poll at a time, so a test decides exactly when each
//! future runs (no runtime, no timing); the tokio runtime plumbing of the
//! tests that do run tasks (`runtime`); the upstream helpers the peer
//! ports share (`peer`). Include it with `#[macro_use] mod async_common;`
//! for the peer macros.
// Each test binary uses some of these helpers.
#![allow(dead_code, unused_macros, unused_imports)]

#[macro_use]
mod peer;
mod runtime;

pub use peer::check_yields_when_contended;
pub use runtime::{guard_held_across_an_await, runtime, tasks_and_threads, Gate};

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// A waker that counts how often it was woken.
#[derive(Default)]
pub struct Counting {
    wakes: AtomicUsize,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// A counting waker and its `Waker`.
pub fn counting_waker() -> (Arc<Counting>, Waker) {
    let counter = Arc::new(Counting::default());
    let waker = Waker::from(counter.clone());
    (counter, waker)
}

impl Counting {
    pub fn wakes(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

/// Spins (yielding) until `cond` holds; panics after a minute (a hang
/// detector, not a timing assertion).
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "hung waiting until {what}"
        );
        std::thread::yield_now();
    }
}

/// A future with its own counting waker, polled by hand (tokio-test's
/// `task::spawn`): `is_woken` says whether it was woken since its last poll.
pub struct MockTask<F: Future> {
    fut: Pin<Box<F>>,
    counter: Arc<Counting>,
    waker: Waker,
    seen: usize,
}

/// Wraps `fut` into a [`MockTask`] (not polled yet).
pub fn spawn<F: Future>(fut: F) -> MockTask<F> {
    let (counter, waker) = counting_waker();
    MockTask {
        fut: Box::pin(fut),
        counter,
        waker,
        seen: 0,
    }
}

impl<F: Future> MockTask<F> {
    /// Polls the future once with the task's waker.
    pub fn poll(&mut self) -> Poll<F::Output> {
        self.seen = self.counter.wakes();
        poll_once(self.fut.as_mut(), &self.waker)
    }

    /// Whether the task was woken since its last poll.
    pub fn is_woken(&self) -> bool {
        self.counter.wakes() > self.seen
    }

    /// Polls the future once with another waker (the task's own is
    /// replaced in the future's eyes).
    pub fn poll_with(&mut self, waker: &Waker) -> Poll<F::Output> {
        poll_once(self.fut.as_mut(), waker)
    }
}
