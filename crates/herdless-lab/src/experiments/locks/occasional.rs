//! Section "an occasional locker beside busy ones" (issue 23's fairness
//! check): `hogs` threads take the lock in parking_lot's 1/0 loop while
//! one more thread takes it once per millisecond and times each wait, from
//! the call to `lock` until it holds the lock. A lock that buys throughput
//! by letting running threads barge forever shows here as a long tail.
//!
//! Metrics: the occasional locker's wait, p99 (primary), p50 and the
//! longest, in µs, over `interval_ms` (about one acquisition per ms); and
//! the hogs' acquisitions per second, to show what the tail was traded
//! for; and `tail_run_delay_share`: of the waits at or past the p99, the
//! share the thread spent runnable but not running (its run delay from
//! the kernel's scheduler statistics, read around each wait): a wait for a
//! CPU after the wake, which no lock can shorten, against one asleep in
//! the queue; and `hog_run_delay_share`: the share of the interval the
//! hogs spent runnable but not running, summed over the hogs (a woken hog
//! that waits for a CPU holds up the wakes behind it: README, "On 16
//! cores"). (Where the kernel keeps no such statistics, both are left
//! out.) And, for herdless with counters on, `ahead_refused_share`: of
//! the sleeps that asked to go first (the occasional locker's, as a rare
//! thread: `mutex/rare_parker.rs`), the share the futex table queued at
//! the tail instead. Every acquisition bumps a counter under the lock,
//! checked against the threads' own counts (a broken lock is never a
//! fast one).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::monitor::Monitor;
use super::table_stats::table_delta;
use super::Workload;
use crate::harness::gang::gang_with;
use crate::harness::run_delay::RunDelay;
use crate::harness::{Case, LabError, Sample};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Threads taking the lock back to back.
    pub hogs: usize,
    /// How long the occasional locker keeps coming back, in milliseconds.
    pub interval_ms: u64,
}

/// What the lock protects.
#[derive(Default)]
pub struct Shared {
    value: u64,
    acquisitions: u64,
}

/// The workload.
pub struct Occasional;

/// The `q`-quantile of sorted `waits` (nearest rank).
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl Workload for Occasional {
    type Params = Params;
    type Value = Shared;

    fn measure<M: Monitor<Shared>>(case: &Case<Params>) -> Result<Sample, LabError> {
        let p = case.params;
        let monitor = M::boxed(Shared::default())?;
        let monitor = &*monitor;
        let stop = AtomicBool::new(false);
        let before = M::table_stats();
        let mut waits_ns: Vec<u64> = Vec::with_capacity(p.interval_ms as usize + 1);
        // (wait, run delay around it) per acquisition, where the kernel
        // keeps the occasional thread's run delay.
        let mut delays: Vec<(u64, u64)> = Vec::with_capacity(p.interval_ms as usize + 1);
        // The occasional locker runs beside the gang on this thread; the
        // hogs stop when it is done.
        let occasional = || {
            let start = Instant::now();
            let end = start + Duration::from_millis(p.interval_ms);
            let mut next = start;
            let run_delay = RunDelay::of_this_thread();
            while Instant::now() < end {
                next += Duration::from_millis(1);
                let delay_before = run_delay.as_ref().and_then(RunDelay::now);
                let asked = Instant::now();
                let mut waited = 0;
                monitor.with(|s| {
                    waited = asked.elapsed().as_nanos() as u64;
                    s.acquisitions += 1;
                });
                waits_ns.push(waited);
                let delay_after = run_delay.as_ref().and_then(RunDelay::now);
                if let (Some(a), Some(b)) = (delay_before, delay_after) {
                    delays.push((waited, b.saturating_sub(a)));
                }
                if let Some(rest) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(rest);
                }
            }
            let took = start.elapsed();
            stop.store(true, Ordering::Relaxed);
            took
        };
        let hog = |_: usize| {
            let run_delay = RunDelay::of_this_thread();
            let delay_before = run_delay.as_ref().and_then(RunDelay::now);
            let mut value = 0u64;
            let mut iterations = 0u64;
            while !stop.load(Ordering::Relaxed) {
                monitor.with(|s| {
                    s.value = s.value.wrapping_add(value | 1);
                    value = s.value;
                    s.acquisitions += 1;
                });
                iterations += 1;
            }
            black_box(value);
            let delay_after = run_delay.as_ref().and_then(RunDelay::now);
            let delay = match (delay_before, delay_after) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            };
            (iterations, delay)
        };
        let (run, hog_time) = gang_with(p.hogs, hog, occasional)?;
        let table = table_delta(before, M::table_stats());
        let hog_ops: u64 = run.results.iter().map(|(ops, _)| ops).sum();
        // The hogs' run delay, where every hog could read its own.
        let hog_delay: Option<u64> = run.results.iter().map(|(_, delay)| *delay).sum();

        let under_lock = monitor.with(|s| s.acquisitions);
        let counted = hog_ops + waits_ns.len() as u64;
        if under_lock != counted {
            return Err(LabError::Sample(format!(
                "{counted} acquisitions counted by the threads, {under_lock} under the lock: \
                 the lock is broken"
            )));
        }
        if waits_ns.is_empty() {
            return Err(LabError::Sample("the occasional locker never ran".into()));
        }
        waits_ns.sort_unstable();
        let us = |ns: u64| ns as f64 / 1e3;
        let p99 = quantile(&waits_ns, 0.99);
        let sample = Sample::new()
            .with("p99_wait_us", us(p99))
            .with("p50_wait_us", us(quantile(&waits_ns, 0.5)))
            .with("max_wait_us", us(*waits_ns.last().expect("not empty")))
            .with("hog_ops_per_s", hog_ops as f64 / hog_time.as_secs_f64());
        // Of the sleeps that asked to go first (the occasional locker's,
        // `mutex/rare_parker.rs`), the share queued at the tail instead
        // (herdless with counters on).
        let sample = match table.map(|t| (t.parked_ahead, t.ahead_refused)) {
            Some((ahead, refused)) if ahead + refused > 0 => sample.with(
                "ahead_refused_share",
                refused as f64 / (ahead + refused) as f64,
            ),
            _ => sample,
        };
        let sample = match hog_delay {
            Some(delay) => sample.with(
                "hog_run_delay_share",
                (delay as f64 / (p.hogs as f64 * hog_time.as_nanos() as f64)).min(1.0),
            ),
            None => sample,
        };
        // Of the waits at or past the p99, the share spent runnable and
        // not running (a CPU's wait, after the wake), not asleep.
        let tail: Vec<&(u64, u64)> = delays.iter().filter(|(w, _)| *w >= p99).collect();
        let tail_wait: u64 = tail.iter().map(|(w, _)| w).sum();
        let tail_delay: u64 = tail.iter().map(|(_, d)| d).sum();
        Ok(if tail_wait > 0 {
            sample.with(
                "tail_run_delay_share",
                (tail_delay as f64 / tail_wait as f64).min(1.0),
            )
        } else {
            sample
        })
    }
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&[7], 0.99), 7);
    }
}
