//! Section "wake with no waiters", the path seed 004 optimises: T threads
//! each call `wake(word, 1)` K times while nobody waits, either all on one
//! shared word or each on its own word on its own cache line.
//!
//! `ns_per_wake` is the wall time of the whole gang divided by the calls per
//! thread: with T threads overlapping perfectly it stays at the cost of one
//! call; where they serialise (a shared lock) it grows with T; with more
//! threads than cores it grows with T / cores whatever the backend.
//! `sleeps` counts the wakers' voluntary context switches: a waker that
//! blocked on a contended bucket lock (preemptions are left out, they only
//! say that T exceeds the cores).

use std::hint::black_box;
use std::sync::atomic::AtomicU32;

use serde::Serialize;

use super::backend::Backend;
use super::Measure;
use crate::harness::{gang, Case, LabError, Sample};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Waking threads.
    pub threads: usize,
    /// One word for all threads (`true`) or one word per thread.
    pub shared: bool,
    /// `wake` calls per thread.
    pub calls: usize,
}

/// A futex word alone on its cache line (128 bytes: adjacent-line
/// prefetching pairs 64-byte lines on x86).
#[repr(align(128))]
struct Padded(AtomicU32);

/// The measurement.
pub struct NoWaiters;

impl Measure for NoWaiters {
    type Params = Params;

    fn measure<B: Backend>(backend: &B, case: &Case<Params>) -> Result<Sample, LabError> {
        let Params {
            threads,
            shared,
            calls,
        } = case.params;
        let words: Vec<Padded> = (0..threads).map(|_| Padded(AtomicU32::new(0))).collect();
        let locks_before = backend.wake_lock_acquisitions();
        let run = gang(threads, |i| {
            let word = &words[if shared { 0 } else { i }].0;
            for _ in 0..calls {
                black_box(backend.wake_one(black_box(word)));
            }
        })?;
        let mut sample = Sample::new()
            .with("ns_per_wake", run.wall.as_nanos() as f64 / calls as f64)
            .with("sleeps", run.usage.voluntary_switches as f64);
        if let (Some(before), Some(after)) = (locks_before, backend.wake_lock_acquisitions()) {
            let wakes = (threads * calls) as f64;
            sample = sample.with(
                "lock_acquisitions_per_wake",
                (after - before) as f64 / wakes,
            );
        }
        Ok(sample)
    }
}
