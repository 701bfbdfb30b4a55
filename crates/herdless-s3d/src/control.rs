//! What the test (or the lab) changes while the server runs, and what the
//! server counts: the latency added to every request, range GETs answered
//! with a failure, range GETs (or every request of an object) held until
//! released, and every range GET
//! served, by object and first byte.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;

/// One range GET: the object's key (`bucket/key`) and its first byte.
pub type RangeKey = (String, u64);

/// The "first byte" that holds every request of an object (`HEAD`, a
/// whole or a range GET) in [`Control::hold`].
pub(crate) const EVERY_REQUEST: u64 = u64::MAX;

/// Where a request waits before it is served.
#[derive(Default)]
pub(crate) struct Control {
    /// Added to every request before it is served, in nanoseconds.
    latency_ns: AtomicU64,
    /// Range GETs still to answer with `503 Slow Down` (any object).
    fail_next: AtomicU64,
    /// Objects (`bucket/key`) whose every range GET is answered with `503`.
    failing: Mutex<Vec<String>>,
    /// Held ranges: a GET of one waits on the semaphore (no permits) until
    /// it is closed by [`release`](Control::release).
    held: Mutex<HashMap<RangeKey, Arc<Semaphore>>>,
    /// Range GETs that arrived, by range (counted before any delay).
    gets: Mutex<HashMap<RangeKey, u64>>,
    /// Every request that arrived.
    requests: AtomicU64,
}

/// What to do with a request (its latency runs meanwhile).
pub(crate) enum Verdict {
    /// Serve it.
    Serve,
    /// Answer `503 Slow Down` (a retryable failure).
    Fail,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Control {
    pub(crate) fn set_latency(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.latency_ns.store(ns, Relaxed);
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_ns.load(Relaxed))
    }

    pub(crate) fn fail_next(&self, n: u64) {
        self.fail_next.store(n, Relaxed);
    }

    pub(crate) fn fail_object(&self, object: &str, failing: bool) {
        let mut f = lock(&self.failing);
        f.retain(|o| o != object);
        if failing {
            f.push(object.to_string());
        }
    }

    pub(crate) fn hold(&self, range: RangeKey) {
        lock(&self.held)
            .entry(range)
            .or_insert_with(|| Arc::new(Semaphore::new(0)));
    }

    pub(crate) fn release(&self, range: &RangeKey) {
        if let Some(gate) = lock(&self.held).remove(range) {
            // Every GET waiting on it (and none later) goes ahead.
            gate.close();
        }
    }

    pub(crate) fn gets(&self) -> HashMap<RangeKey, u64> {
        lock(&self.gets).clone()
    }

    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }

    pub(crate) fn reset_counts(&self) {
        lock(&self.gets).clear();
        self.requests.store(0, Relaxed);
    }

    /// Counts a request; for a range GET (`range` given) also counts the
    /// range and returns the gate it must pass, if it is held.
    pub(crate) fn arrive(
        &self,
        object: Option<&str>,
        range: Option<&RangeKey>,
    ) -> Option<Arc<Semaphore>> {
        self.requests.fetch_add(1, Relaxed);
        let held = lock(&self.held);
        let every = object.and_then(|o| held.get(&(o.to_string(), EVERY_REQUEST)).cloned());
        let Some(range) = range else {
            return every;
        };
        *lock(&self.gets).entry(range.clone()).or_insert(0) += 1;
        held.get(range).cloned().or(every)
    }

    /// Whether a range GET of `object` is to fail.
    pub(crate) fn verdict(&self, object: &str) -> Verdict {
        let failing = lock(&self.failing).iter().any(|o| o == object);
        let next = self
            .fail_next
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if failing || next {
            Verdict::Fail
        } else {
            Verdict::Serve
        }
    }
}
