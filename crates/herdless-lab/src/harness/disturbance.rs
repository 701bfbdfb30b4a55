//! Noticing a disturbed machine: how much CPU time other processes and the
//! hypervisor took while the lab measured, and the load average around the
//! run.
//!
//! The runner reads the machine's CPU time counters (`/proc/stat`: busy,
//! idle and steal time of every CPU) and this process's own CPU time
//! (`getrusage`) between measurements, and sums the differences per row of
//! a table ([`Tally`]). What the machine spent beyond the lab's own time is
//! other processes' ([`Disturbance::others`]); steal time is CPU time the
//! hypervisor gave to other guests ([`Disturbance::steal`]). Both are shares
//! of the machine's capacity over the window (CPUs × wall time), so 0.5 on a
//! 2-core machine is one core's worth taken away.
//!
//! The load average (`/proc/loadavg`) is read before and after the run: it
//! counts the lab's own threads while it measures, so it says how busy the
//! machine was when the run started rather than what disturbed a row.
//!
//! `/proc/stat` counts in clock ticks (10 ms): a window shorter than
//! [`MIN_CPU_SECONDS`] of capacity is too coarse to judge and gets no
//! disturbance.

use std::time::Instant;

use procfs::{Current, CurrentSI};
use serde::{Deserialize, Serialize};

use super::rusage::Usage;

/// The share of the machine's CPU time (others + steal) from which a
/// window counts as disturbed.
pub const DISTURBED: f64 = 0.2;

/// The least capacity (CPU-seconds: CPUs × wall seconds) a window must
/// span for its shares to mean something at a 10 ms tick.
pub const MIN_CPU_SECONDS: f64 = 0.5;

/// How much of the machine was taken from the lab over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Disturbance {
    /// Share (0–1) of the machine's CPU time other processes used.
    pub others: f64,
    /// Share (0–1) of the machine's CPU time the hypervisor stole.
    pub steal: f64,
    /// Wall-clock seconds the window spans.
    pub seconds: f64,
}

impl Disturbance {
    /// Whether others and steal together took [`DISTURBED`] or more.
    pub fn is_disturbed(&self) -> bool {
        self.others + self.steal >= DISTURBED
    }

    /// `others 35%, steal 2% of the CPU time`.
    pub fn describe(&self) -> String {
        format!(
            "others {:.0}%, steal {:.0}% of the CPU time",
            self.others * 100.0,
            self.steal * 100.0
        )
    }
}

/// The 1-, 5- and 15-minute load averages.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadAverage {
    /// Over the last minute.
    pub one: f64,
    /// Over the last five minutes.
    pub five: f64,
    /// Over the last fifteen minutes.
    pub fifteen: f64,
}

impl LoadAverage {
    /// This machine's, from `/proc/loadavg`; `None` where unreadable.
    pub fn now() -> Option<LoadAverage> {
        let l = procfs::LoadAverage::current().ok()?;
        let (one, five, fifteen) = (l.one.into(), l.five.into(), l.fifteen.into());
        Some(LoadAverage { one, five, fifteen })
    }

    /// Whether the machine was busy: a 1-minute load of half the cores or
    /// more (two compilers on a 2-core machine).
    pub fn is_busy(&self, cores: usize) -> bool {
        self.one >= cores as f64 / 2.0
    }
}

/// How busy the machine was around and during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    /// The load average just before measuring started.
    pub load_at_start: Option<LoadAverage>,
    /// The load average when measuring ended (includes the lab's own
    /// threads of the last minutes).
    pub load_at_end: Option<LoadAverage>,
    /// Over the whole run.
    pub disturbance: Option<Disturbance>,
}

impl Conditions {
    /// `load average 0.52 at the start; over the run others 3%, steal 0%
    /// of the CPU time` (the load marked ` (busy)` when it is for
    /// `busy_of` cores); `None` when neither was read.
    pub fn describe(&self, busy_of: Option<usize>) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(load) = self.load_at_start {
            let busy = busy_of.is_some_and(|cores| load.is_busy(cores));
            let mark = if busy { " (busy)" } else { "" };
            parts.push(format!("load average {:.2} at the start{mark}", load.one));
        }
        if let Some(d) = self.disturbance {
            parts.push(format!("over the run {}", d.describe()));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// CPU time counters at one instant.
#[derive(Clone, Copy, Debug)]
pub struct CpuTimes {
    /// Seconds every CPU spent in any state (capacity elapsed).
    total: f64,
    /// Seconds every CPU spent running something (user, nice, system,
    /// irq, softirq).
    busy: f64,
    /// Seconds stolen by the hypervisor.
    steal: f64,
    /// This process's user + system seconds, exited threads included.
    own: f64,
    /// When read.
    at: Instant,
}

impl CpuTimes {
    /// The counters now; `None` where `/proc/stat` is unreadable. Of its
    /// aggregate `cpu` line: user nice system idle iowait irq softirq
    /// steal (guest time is already inside user and nice).
    pub fn now() -> Option<CpuTimes> {
        let t = procfs::KernelStats::current().ok()?.total;
        let (irq, softirq, steal) = (
            t.irq.unwrap_or(0),
            t.softirq.unwrap_or(0),
            t.steal.unwrap_or(0),
        );
        let busy = t.user + t.nice + t.system + irq + softirq;
        let hz = procfs::ticks_per_second() as f64;
        Some(CpuTimes {
            total: (busy + t.idle + t.iowait.unwrap_or(0) + steal) as f64 / hz,
            busy: busy as f64 / hz,
            steal: steal as f64 / hz,
            own: Usage::process().cpu_micros as f64 * 1e-6,
            at: Instant::now(),
        })
    }
}

/// Sums of CPU time over one or more windows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    total: f64,
    others: f64,
    steal: f64,
    seconds: f64,
}

impl Tally {
    /// Adds the window from `before` to `after`.
    pub fn add(&mut self, before: &CpuTimes, after: &CpuTimes) {
        let busy = (after.busy - before.busy).max(0.0);
        let own = (after.own - before.own).max(0.0);
        self.merge(&Tally {
            total: (after.total - before.total).max(0.0),
            others: (busy - own).max(0.0),
            steal: (after.steal - before.steal).max(0.0),
            seconds: after.at.duration_since(before.at).as_secs_f64(),
        });
    }

    /// Adds another tally's windows.
    pub fn merge(&mut self, other: &Tally) {
        self.total += other.total;
        self.others += other.others;
        self.steal += other.steal;
        self.seconds += other.seconds;
    }

    /// The shares over the windows summed; `None` when they span less than
    /// [`MIN_CPU_SECONDS`] of capacity.
    pub fn disturbance(&self) -> Option<Disturbance> {
        (self.total >= MIN_CPU_SECONDS).then(|| Disturbance {
            others: (self.others / self.total).min(1.0),
            steal: (self.steal / self.total).min(1.0),
            seconds: self.seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_average_is_read_and_judged_busy_from_half_the_cores() {
        let l = LoadAverage::now().expect("/proc/loadavg is readable");
        assert!(l.one >= 0.0 && l.five >= 0.0 && l.fifteen >= 0.0);
        let busy = LoadAverage { one: 1.0, ..l };
        assert!(busy.is_busy(2) && !busy.is_busy(16));
    }

    fn at(total: f64, busy: f64, steal: f64, own: f64, start: Instant) -> CpuTimes {
        CpuTimes {
            total,
            busy,
            steal,
            own,
            at: start,
        }
    }

    #[test]
    fn others_are_the_busy_time_the_lab_did_not_spend() {
        let t0 = Instant::now();
        let mut tally = Tally::default();
        // 2 CPU-seconds of capacity: 1.5 busy, of which the lab 1.0; 0.1 stolen.
        tally.add(&at(0.0, 0.0, 0.0, 0.0, t0), &at(2.0, 1.5, 0.1, 1.0, t0));
        let d = tally.disturbance().unwrap();
        assert!((d.others - 0.25).abs() < 1e-9 && (d.steal - 0.05).abs() < 1e-9);
        assert!(d.is_disturbed());
        // The lab's own time may exceed the machine's coarser ticks: never
        // a negative share.
        let mut quiet = Tally::default();
        quiet.add(&at(0.0, 0.0, 0.0, 0.0, t0), &at(1.0, 0.5, 0.0, 0.6, t0));
        assert_eq!(quiet.disturbance().unwrap().others, 0.0);
        assert!(!quiet.disturbance().unwrap().is_disturbed());
    }

    #[test]
    fn a_window_too_short_for_the_tick_is_not_judged() {
        let t0 = Instant::now();
        let mut tally = Tally::default();
        tally.add(&at(0.0, 0.0, 0.0, 0.0, t0), &at(0.1, 0.1, 0.0, 0.0, t0));
        assert_eq!(tally.disturbance(), None);
        let mut more = tally;
        for _ in 0..5 {
            more.merge(&tally);
        }
        assert!(more.disturbance().is_some(), "0.6 CPU-seconds in all");
    }

    #[test]
    fn this_machine_has_cpu_counters() {
        let a = CpuTimes::now().expect("/proc/stat is readable");
        let b = CpuTimes::now().unwrap();
        assert!(b.total >= a.total && b.own >= a.own);
    }
}
