//! A gang: T threads released together behind a barrier, each timing its own
//! work, so a variant measures overlapping threads without writing a timing
//! loop of its own.
//!
//! The wall time is from the earliest thread's start to the latest thread's
//! end, which leaves out spawning and joining. Each thread also reads its
//! own `getrusage(RUSAGE_THREAD)` around its work; the gang returns the sum,
//! each thread's own, and what each thread's work returned.

use std::ops::Range;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::rusage::Usage;
use super::LabError;

/// Stack size for lab threads: they run short loops, and some experiments
/// start hundreds of them.
pub const STACK_SIZE: usize = 256 << 10;

/// What a gang run measured.
#[derive(Clone, Debug)]
pub struct GangRun<T = ()> {
    /// Earliest start to latest end of the threads' work.
    pub wall: Duration,
    /// Summed per-thread counters over the work only.
    pub usage: Usage,
    /// Each thread's own counters over its work, by `i` (what a summary
    /// cannot say: which thread slept or ran).
    pub per_thread: Vec<Usage>,
    /// What `work(i)` returned, by `i`.
    pub results: Vec<T>,
}

const WAIT: u8 = 0;
const GO: u8 = 1;
const ABORT: u8 = 2;

/// Runs `work(i)` on `threads` threads (i = 0..threads), started together.
///
/// The start line is a yielding spin on a flag rather than a `Barrier`: a
/// barrier wakes its sleepers one by one, staggering the start, and cannot
/// be abandoned if a spawn fails half-way.
pub fn gang<T: Send, F>(threads: usize, work: F) -> Result<GangRun<T>, LabError>
where
    F: Fn(usize) -> T + Sync,
{
    gang_with(threads, work, || {}).map(|(run, ())| run)
}

/// As [`gang`], and runs `alongside()` on the calling thread once the gang
/// is released, before joining it: a measurement's timer or driver, whose
/// own CPU time and context switches stay out of the gang's `usage` (and
/// whose sleeping takes no CPU from the gang). Returns what it returned
/// too.
pub fn gang_with<T: Send, F, R>(
    threads: usize,
    work: F,
    alongside: impl FnOnce() -> R,
) -> Result<(GangRun<T>, R), LabError>
where
    F: Fn(usize) -> T + Sync,
{
    let ready = AtomicUsize::new(0);
    let state = AtomicU8::new(WAIT);
    let (ready, state, work) = (&ready, &state, &work);
    thread::scope(|s| {
        let spawned = spawn_each(s, "gang", threads, move |i| {
            ready.fetch_add(1, Ordering::Relaxed);
            // Acquire pairs with the Release store of GO/ABORT.
            let go = loop {
                match state.load(Ordering::Acquire) {
                    WAIT => thread::yield_now(),
                    seen => break seen == GO,
                }
            };
            if !go {
                return None;
            }
            let usage = Usage::thread();
            let start = Instant::now();
            let result = work(i);
            let end = Instant::now();
            Some((start, end, Usage::thread().since(&usage), result))
        });
        // The threads started before a failed spawn are told to leave.
        let handles = spawned.inspect_err(|_| state.store(ABORT, Ordering::Release))?;
        while ready.load(Ordering::Relaxed) < threads {
            thread::yield_now();
        }
        state.store(GO, Ordering::Release);
        let beside = alongside();

        let mut usage = Usage::default();
        let (mut first_start, mut last_end) = (None::<Instant>, None::<Instant>);
        let mut results = Vec::with_capacity(threads);
        let mut per_thread = Vec::with_capacity(threads);
        for h in handles {
            let (start, end, u, result) = h
                .join()
                .ok()
                .flatten()
                .ok_or_else(|| LabError::Panicked("a gang thread".into()))?;
            first_start = Some(first_start.map_or(start, |f| f.min(start)));
            last_end = Some(last_end.map_or(end, |l| l.max(end)));
            usage.add(&u);
            per_thread.push(u);
            results.push(result);
        }
        let wall = first_start
            .zip(last_end)
            .map_or(Duration::ZERO, |(s, e)| e.duration_since(s));
        let run = GangRun {
            wall,
            usage,
            per_thread,
            results,
        };
        Ok((run, beside))
    })
}

/// Starts `work(i)` on `n` scoped threads (i = 0..n) named
/// `lab-{name}-{i}`, with the lab's stack size: a measurement's own
/// readers, producers or waiters. An error names the thread that could
/// not start (those started before it run on, and the scope joins them).
pub fn spawn_each<'s, T: Send + 's>(
    s: &'s thread::Scope<'s, '_>,
    name: &str,
    n: usize,
    work: impl Fn(usize) -> T + Send + Sync + Copy + 's,
) -> Result<Vec<thread::ScopedJoinHandle<'s, T>>, LabError> {
    (0..n)
        .map(|i| {
            thread::Builder::new()
                .name(format!("lab-{name}-{i}"))
                .stack_size(STACK_SIZE)
                .spawn_scoped(s, move || work(i))
                .map_err(|e| LabError::os(format!("spawning {name} {i} of {n}"), e))
        })
        .collect()
}

/// Thread `t`'s share of `0..n` among `threads`: equal runs, the last one
/// taking the remainder.
pub fn share(t: usize, threads: usize, n: usize) -> Range<usize> {
    let per = n / threads;
    t * per..if t + 1 == threads { n } else { (t + 1) * per }
}

/// Joins `handles`; a thread that panicked is an error naming it `what`.
pub fn join_each<T>(
    handles: Vec<thread::ScopedJoinHandle<'_, T>>,
    what: &str,
) -> Result<(), LabError> {
    for h in handles {
        h.join().map_err(|_| LabError::Panicked(what.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_thread_runs_once_with_its_index() {
        let seen = AtomicUsize::new(0);
        let run = gang(4, |i| {
            seen.fetch_or(1 << i, Ordering::Relaxed);
            i * 10
        })
        .unwrap();
        assert_eq!(seen.load(Ordering::Relaxed), 0b1111);
        assert_eq!(
            run.results,
            [0, 10, 20, 30],
            "each thread's result, by index"
        );
        assert!(run.wall < Duration::from_secs(5));
    }

    #[test]
    fn what_runs_alongside_is_left_out_of_the_gang_usage() {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (run, ()) = gang_with(
            1,
            |_| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            },
            || {
                // Sleeps (voluntary switches) on the calling thread.
                for _ in 0..5 {
                    thread::sleep(Duration::from_millis(2));
                }
                stop.store(true, Ordering::Relaxed);
            },
        )
        .unwrap();
        // (No bound on `run.wall`: when the gang's thread starts against
        // the sleeps is the scheduler's choice.)
        assert!(run.usage.voluntary_switches < 5, "{:?}", run.usage);
    }

    #[test]
    fn each_threads_own_counts_are_kept_and_sum_to_the_gang_usage() {
        // Thread 1 sleeps five times (voluntary switches); thread 0 does not.
        let run = gang(2, |i| {
            if i == 1 {
                for _ in 0..5 {
                    thread::sleep(Duration::from_millis(1));
                }
            }
        })
        .unwrap();
        assert_eq!(run.per_thread.len(), 2);
        assert!(run.per_thread[1].voluntary_switches >= 5);
        let mut sum = Usage::default();
        run.per_thread.iter().for_each(|u| sum.add(u));
        assert_eq!(sum, run.usage);
    }

    #[test]
    fn shares_are_equal_runs_and_the_last_takes_the_rest() {
        let all: Vec<_> = (0..3).map(|t| share(t, 3, 10)).collect();
        assert_eq!(all, [0..3, 3..6, 6..10]);
    }

    #[test]
    fn wall_time_covers_the_slowest_thread() {
        let run = gang(2, |i| {
            if i == 1 {
                thread::sleep(Duration::from_millis(20));
            }
        })
        .unwrap();
        assert!(run.wall >= Duration::from_millis(20), "{:?}", run.wall);
        assert!(run.usage.voluntary_switches >= 1, "{:?}", run.usage);
    }
}
