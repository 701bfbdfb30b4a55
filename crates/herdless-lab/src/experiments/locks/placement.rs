//! Where the mutex benchmark's threads ran (issue 23): each worker notes
//! its CPU and its migration count once its loop is over (never inside
//! the loop: a look every 256 iterations changed the compiled loop and
//! cost a third of the one-thread row; nor before it, where the `/proc`
//! read, about 14 µs, would fall inside the timed interval), and the
//! sample says whether the slowest thread was crowded onto a CPU, moved
//! more than the others, or ran where acquisitions come slower for every
//! thread (the CPU's place in the machine). The gang's threads are new
//! for every sample, so a thread's migrations are those of its loop and
//! of its few moments before it. The read after the loop counts in the
//! thread's CPU time (`cpu_ns_per_op`), alike for every lock: 64 threads'
//! reads are about 2% of the 64-thread row's CPU on 2 cores, a tenth of
//! that on 16.
//!
//! Why: on 16 cores the slowest thread at 16–32 threads ran 0.80–0.85 of
//! the threads' mean CPU time but took 0.34–0.57 of their acquisitions
//! (README, "On 16 cores"). Crowding would show as less CPU; a thread
//! that spins in vain more than the others as a higher share of its CPU
//! time per acquisition. These counts say which CPUs those were: if the
//! acquisitions per CPU second of the threads that ended on one CPU are
//! far below another CPU's (`home_rate_spread` well under 1), where a
//! thread ran decides its share, not the lock's queue. Their first run
//! on 16 cores (stop 44, README "Stop 44 on 16 cores"): at 8–16 threads
//! the slowest thread had a CPU of its own and the others' CPU time, and
//! the worst CPU's rate was 0.31–0.49 of the best's (std's 0.48–0.56):
//! the races for the lock's line, which some CPUs win more often.

use std::collections::BTreeMap;
use std::fs;

/// Where one worker was: its CPU when its loop ended (its "home": the
/// 20 ms intervals see few moves) and the moves between CPUs the
/// scheduler made since the thread started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTrail {
    home: Option<usize>,
    moves: Option<u64>,
}

impl CpuTrail {
    /// This thread's trail so far; call after the loop.
    pub fn read() -> CpuTrail {
        CpuTrail {
            home: this_cpu(),
            moves: migrations(),
        }
    }

    /// The CPU it ended on; `None` if that could not be read.
    pub fn home(&self) -> Option<usize> {
        self.home
    }

    /// Its moves between CPUs (0 where `/proc` does not count them).
    pub fn moves(&self) -> u64 {
        self.moves.unwrap_or(0)
    }
}

/// The CPU this thread is on: glibc's `sched_getcpu` (the kernel's
/// restartable-sequences area, a load).
fn this_cpu() -> Option<usize> {
    // SAFETY: `sched_getcpu` takes no arguments and touches no memory of
    // ours.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// This thread's migrations between CPUs so far (`se.nr_migrations` in
/// `/proc/thread-self/sched`); `None` where the kernel does not show it.
fn migrations() -> Option<u64> {
    let text = fs::read_to_string("/proc/thread-self/sched").ok()?;
    parse_migrations(&text)
}

fn parse_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == "se.nr_migrations")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// One worker's run: its acquisitions, its CPU time and where it ran.
#[derive(Clone, Copy, Debug)]
pub struct WorkerRun {
    /// Lock acquisitions.
    pub acquisitions: u64,
    /// Its own CPU time, in microseconds.
    pub cpu_micros: u64,
    /// Where it ran.
    pub trail: CpuTrail,
}

/// The placement metrics of one sample, about the worker at `slowest`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// Workers whose loop ended on the slowest worker's home CPU (itself
    /// included), against the mean of the same count over all workers:
    /// above 1, it shared its CPU with more threads than most.
    pub slowest_crowd_share: f64,
    /// Its moves between CPUs against the workers' mean (1 when nobody
    /// moved).
    pub slowest_moves_share: f64,
    /// Acquisitions per CPU second of the workers that ended on the home
    /// CPU where that rate is lowest (not necessarily the slowest
    /// worker's), over the same where it is highest: 1 when every CPU's
    /// threads got the lock as often for their CPU time.
    pub home_rate_spread: f64,
}

impl Placement {
    /// The metrics of `runs` (one per worker) about the worker at
    /// `slowest`; `None` if that worker's CPU is unknown.
    pub fn of(runs: &[WorkerRun], slowest: usize) -> Option<Placement> {
        let own_home = runs.get(slowest)?.trail.home()?;
        // Per home CPU: its threads, their acquisitions and CPU time.
        let mut per_cpu: BTreeMap<usize, (u64, u64, u64)> = BTreeMap::new();
        for run in runs {
            if let Some(home) = run.trail.home() {
                let cpu = per_cpu.entry(home).or_default();
                cpu.0 += 1;
                cpu.1 += run.acquisitions;
                cpu.2 += run.cpu_micros;
            }
        }
        // A thread's crowd is its CPU's thread count: summed over the
        // threads, each CPU counts its count times over.
        let placed: u64 = per_cpu.values().map(|&(threads, _, _)| threads).sum();
        let crowds: u64 = per_cpu
            .values()
            .map(|&(threads, _, _)| threads * threads)
            .sum();
        let mean_crowd = crowds as f64 / placed as f64;
        let own_crowd = per_cpu[&own_home].0 as f64;
        let mean_moves =
            runs.iter().map(|r| r.trail.moves()).sum::<u64>() as f64 / runs.len() as f64;
        let own_moves = runs[slowest].trail.moves() as f64;
        let rates: Vec<f64> = per_cpu
            .values()
            .filter(|&&(_, _, micros)| micros > 0)
            .map(|&(_, acquisitions, micros)| acquisitions as f64 / micros as f64)
            .collect();
        let fastest = rates.iter().copied().fold(0.0, f64::max);
        let slowest_rate = rates.iter().copied().fold(f64::INFINITY, f64::min);
        Some(Placement {
            slowest_crowd_share: own_crowd / mean_crowd,
            slowest_moves_share: if mean_moves > 0.0 {
                own_moves / mean_moves
            } else {
                1.0
            },
            home_rate_spread: if fastest > 0.0 {
                slowest_rate / fastest
            } else {
                1.0
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trail(home: usize, moves: u64) -> CpuTrail {
        CpuTrail {
            home: Some(home),
            moves: Some(moves),
        }
    }

    fn run(acquisitions: u64, cpu_micros: u64, home: usize, moves: u64) -> WorkerRun {
        WorkerRun {
            acquisitions,
            cpu_micros,
            trail: trail(home, moves),
        }
    }

    #[test]
    fn migrations_are_read_from_the_sched_file() {
        let text = "x (1, #threads: 1)\n---\nse.exec_start : 1.5\nse.nr_migrations   :    42\nnr_switches : 7\n";
        assert_eq!(parse_migrations(text), Some(42));
        assert_eq!(parse_migrations("nr_switches : 7\n"), None);
        assert_eq!(parse_migrations("se.nr_migrations : x\n"), None);
    }

    #[test]
    fn this_thread_has_a_trail() {
        let trail = std::thread::spawn(CpuTrail::read).join().unwrap();
        assert!(trail.home().is_some(), "sched_getcpu answers on Linux");
    }

    #[test]
    fn a_crowded_slowest_thread_shows_in_its_crowd_share() {
        // Workers 0 and 1 share CPU 0; 2 and 3 have a CPU each.
        let runs = [
            run(10, 100, 0, 0),
            run(40, 100, 0, 0),
            run(40, 100, 1, 0),
            run(40, 100, 2, 0),
        ];
        let p = Placement::of(&runs, 0).unwrap();
        // Crowds 2, 2, 1, 1: mean 1.5; the slowest's is 2.
        assert!((p.slowest_crowd_share - 2.0 / 1.5).abs() < 1e-9);
        assert_eq!(p.slowest_moves_share, 1.0, "nobody moved");
        // CPU 0: 50 acquisitions in 200 µs; CPUs 1 and 2: 40 in 100.
        assert!((p.home_rate_spread - 0.25 / 0.4).abs() < 1e-9);
    }

    #[test]
    fn a_slowest_thread_that_moves_shows_in_its_moves_share() {
        let runs = [run(10, 100, 0, 3), run(40, 100, 2, 1)];
        let p = Placement::of(&runs, 0).unwrap();
        // Moves 3 and 1: mean 2.
        assert!((p.slowest_moves_share - 1.5).abs() < 1e-9);
        assert_eq!(p.slowest_crowd_share, 1.0);
    }

    #[test]
    fn no_looks_no_placement() {
        let runs = [WorkerRun {
            acquisitions: 1,
            cpu_micros: 1,
            trail: CpuTrail::default(),
        }; 2];
        assert_eq!(Placement::of(&runs, 0), None);
    }
}
