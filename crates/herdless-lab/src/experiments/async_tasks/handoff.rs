//! Section "cancelled waiters": the lock is held; K waiter futures queue
//! for it (each polled once), then one more, the survivor, whose waker
//! records the moment it is woken. The holder releases the lock, which
//! hands it to (or wakes) the first waiter; the K waiters are then dropped,
//! oldest first, without being polled again: each was granted (or woken)
//! in turn and must pass that on. The time from the release to the
//! survivor's wake is the hand-off latency over K cancellations; a survivor
//! never woken (a stranded queue) fails the sample. Counted: how many times
//! the survivor's waker was called per round (1: no spare wakes). Everything runs on the
//! calling thread: the figure is the locks' own bookkeeping, not a
//! scheduler's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::Instant;

use herdless::{MutexAsyncExt, RwSem, RwSemAsyncExt};
use serde::Serialize;

use crate::harness::{Case, LabError, Sample};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Waiters cancelled ahead of the survivor.
    pub cancelled: usize,
    /// Rounds per sample (the latency is their mean).
    pub rounds: u32,
}

/// Records when it was first woken, and how many times.
#[derive(Default)]
struct WokenAt(Mutex<(Option<Instant>, u32)>);

impl Wake for WokenAt {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let mut woken = self.0.lock().unwrap_or_else(|e| e.into_inner());
        woken.0.get_or_insert_with(Instant::now);
        woken.1 += 1;
    }
}

/// The locks measured (the same as the throughput section's).
pub use super::lock::AsyncMutex;

fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>, waker: &Waker) -> bool {
    fut.poll(&mut Context::from_waker(waker)).is_pending()
}

/// Measures `case` once with `lock`.
pub fn measure(lock: AsyncMutex, case: &Case<Params>) -> Result<Sample, LabError> {
    let p = case.params;
    let noop = Waker::noop();
    let mut total_ns = 0u128;
    let mut survivor_wakes = 0u64;
    for _ in 0..p.rounds {
        let woken = Arc::new(WokenAt::default());
        let survivor_waker = Waker::from(woken.clone());
        // One body for the four locks; `$l => $try` takes the lock if it
        // is free, as an `Option`.
        macro_rules! round {
            ($lock:expr, $l:ident => $try:expr, $acquire:ident) => {{
                let lock = $lock;
                let $l = &lock;
                let held = $try.ok_or_else(|| LabError::Sample("lock busy".into()))?;
                let mut waiters: Vec<Pin<Box<_>>> = (0..p.cancelled)
                    .map(|_| Box::pin(lock.$acquire()))
                    .collect();
                for w in &mut waiters {
                    if !poll_once(w.as_mut(), noop) {
                        return Err(LabError::Sample("a waiter got a held lock".into()));
                    }
                }
                let mut survivor = Box::pin(lock.$acquire());
                if !poll_once(survivor.as_mut(), &survivor_waker) {
                    return Err(LabError::Sample("the survivor got a held lock".into()));
                }
                let start = Instant::now();
                drop(held);
                drop(waiters); // oldest first (Vec drops in order)
                let (at, wakes) = *woken.0.lock().unwrap_or_else(|e| e.into_inner());
                survivor_wakes += u64::from(wakes);
                let Some(at) = at else {
                    return Err(LabError::Sample(format!(
                        "stranded: the survivor behind {} cancelled waiters was never woken",
                        p.cancelled
                    )));
                };
                if poll_once(survivor.as_mut(), &survivor_waker) {
                    return Err(LabError::Sample("woken, but the lock not free".into()));
                }
                at.duration_since(start).as_nanos()
            }};
        }
        total_ns += match lock {
            AsyncMutex::Herdless => {
                round!(herdless::Mutex::new(0u64), l => l.try_lock(), lock_async)
            }
            AsyncMutex::HerdlessRwSem => round!(RwSem::new(0u64), l => l.try_write(), write_async),
            AsyncMutex::Tokio => {
                round!(tokio::sync::Mutex::new(0u64), l => l.try_lock().ok(), lock)
            }
            AsyncMutex::AsyncLock => round!(async_lock::Mutex::new(0u64), l => l.try_lock(), lock),
        };
    }
    let rounds = f64::from(p.rounds);
    Ok(Sample::new()
        .with("handoff_ns", total_ns as f64 / rounds)
        .with("survivor_wakes", survivor_wakes as f64 / rounds))
}
