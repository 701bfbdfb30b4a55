//! Section "mutex throughput", in the shape of parking_lot's own benchmark
//! (`benchmark/src/bin/mutex.rs`): T threads loop for a fixed time, each
//! iteration taking the lock for `inside` rounds of work on the shared
//! value and then doing `outside` rounds on a local one; throughput is the
//! lock acquisitions per second over the interval.
//!
//! The work is parking_lot's: one round is `shared += value; shared *=
//! 1.01; value = shared` (a dependent floating-point add and multiply)
//! inside, the same on a local value outside. The interval is timed by the
//! calling thread, asleep beside the gang, which raises the stop flag the
//! workers read once per iteration (as parking_lot's main thread does);
//! the interval stretches past its length until somebody took the lock
//! (an overloaded machine may not run the workers at all in a smoke run).
//! Every acquisition also bumps a counter under the lock; a total that
//! differs from the iterations the threads counted fails the sample (a
//! broken lock is never a fast one).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::monitor::Monitor;
use super::placement::{CpuTrail, Placement, WorkerRun};
use super::table_stats::table_delta;
use super::Workload;
use crate::harness::gang::gang_with;
use crate::harness::patience::timed_interval;
use crate::harness::{Case, LabError, Sample};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Threads taking the lock.
    pub threads: usize,
    /// Rounds of work inside the lock.
    pub inside: u32,
    /// Rounds of work between acquisitions.
    pub outside: u32,
    /// Length of the timed interval, in milliseconds.
    pub interval_ms: u64,
}

/// What the lock protects.
#[derive(Default)]
pub struct Shared {
    value: f64,
    acquisitions: u64,
}

/// The workload.
pub struct Throughput;

impl Workload for Throughput {
    type Params = Params;
    type Value = Shared;

    fn measure<M: Monitor<Shared>>(case: &Case<Params>) -> Result<Sample, LabError> {
        let p = case.params;
        let monitor = M::boxed(Shared::default())?;
        let monitor = &*monitor;
        let stop = AtomicBool::new(false);
        let before = M::table_stats();
        // Set by a worker after its first acquisition: the timer's sign of
        // progress, read without taking the lock under test.
        let progressed = AtomicBool::new(false);
        // The timer runs alongside the gang on this thread: it sleeps, so it
        // takes no CPU from the workers, its own switches stay out of the
        // counts, and it stretches the interval until somebody took the lock
        // (an overloaded machine may not run the workers at all in a smoke
        // interval).
        let timer = || {
            let took = timed_interval(Duration::from_millis(p.interval_ms), || {
                progressed.load(Ordering::Relaxed)
            });
            stop.store(true, Ordering::Relaxed);
            took
        };
        let work = |_| {
            let (mut value, mut local) = (0.0f64, 0.0f64);
            let mut iterations = 0u64;
            while !stop.load(Ordering::Relaxed) {
                monitor.with(|s| {
                    for _ in 0..p.inside {
                        s.value += value;
                        s.value *= 1.01;
                        value = s.value;
                    }
                    s.acquisitions += 1;
                });
                for _ in 0..p.outside {
                    local += value;
                    local *= 1.01;
                    value = local;
                }
                if iterations == 0 {
                    progressed.store(true, Ordering::Relaxed);
                }
                iterations += 1;
            }
            black_box(value);
            (iterations, CpuTrail::read())
        };
        let (run, interval) = gang_with(p.threads, work, timer)?;
        let table = table_delta(before, M::table_stats());

        let workers: Vec<WorkerRun> = run
            .results
            .iter()
            .zip(&run.per_thread)
            .map(|(&(acquisitions, trail), usage)| WorkerRun {
                acquisitions,
                cpu_micros: usage.cpu_micros,
                trail,
            })
            .collect();
        let total: u64 = workers.iter().map(|w| w.acquisitions).sum();
        let under_lock = monitor.with(|s| s.acquisitions);
        if under_lock != total {
            return Err(LabError::Sample(format!(
                "{total} acquisitions counted by the threads, {under_lock} under the lock: \
                 the lock is broken"
            )));
        }
        if total == 0 {
            return Err(LabError::Sample("no thread took the lock in time".into()));
        }
        let seconds = interval.as_secs_f64();
        let kops = total as f64 / 1e3;
        let mean = total as f64 / p.threads as f64;
        let (slowest_at, slowest) = workers
            .iter()
            .map(|w| w.acquisitions)
            .enumerate()
            .min_by_key(|&(_, count)| count)
            .unwrap_or((0, 0));
        let slowest = slowest as f64;
        // What the slowest thread did instead: its CPU time and its sleeps
        // against the threads' mean (less CPU: it slept or waited for a
        // CPU; as much CPU for fewer acquisitions: it spun in vain).
        let threads = p.threads as f64;
        let own = run.per_thread.get(slowest_at).copied().unwrap_or_default();
        let relative = |own: u64, all: u64| {
            let mean = all as f64 / threads;
            if mean > 0.0 {
                own as f64 / mean
            } else {
                1.0
            }
        };
        let mut sample = Sample::new()
            .with("ops_per_s", total as f64 / seconds)
            .with("slowest_share", slowest / mean)
            .with(
                "slowest_cpu_share",
                relative(own.cpu_micros, run.usage.cpu_micros),
            )
            .with(
                "slowest_sleeps_share",
                relative(own.voluntary_switches, run.usage.voluntary_switches),
            )
            .with(
                "cpu_ns_per_op",
                run.usage.cpu_micros as f64 * 1e3 / total as f64,
            )
            .with("sleeps_per_kop", run.usage.voluntary_switches as f64 / kops)
            .with(
                "preempted_per_kop",
                run.usage.involuntary_switches as f64 / kops,
            );
        if let Some(p) = Placement::of(&workers, slowest_at) {
            sample = sample
                .with("slowest_crowd_share", p.slowest_crowd_share)
                .with("slowest_moves_share", p.slowest_moves_share)
                .with("home_rate_spread", p.home_rate_spread);
        }
        if let Some(t) = table {
            sample = sample
                .with("table_waits_per_kop", t.waits as f64 / kops)
                .with("table_wakeups_per_kop", t.wakeups as f64 / kops)
                .with("idle_wakes_per_kop", t.wakes_skipped as f64 / kops);
        }
        Ok(sample)
    }
}
