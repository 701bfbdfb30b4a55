//! CPU placement, for measurements where the scheduler's choice of CPU would
//! otherwise dominate the result (a woken thread preempting its waker).
//!
//! [`Placement::split`] gives the measuring thread the first CPU it may run
//! on and the workers the others; on a one-CPU machine nobody is pinned.
//! [`Pin`] restores the thread's previous mask when dropped.

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

use super::LabError;

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> Result<Vec<usize>, LabError> {
    let set = sched_getaffinity(None).map_err(|e| LabError::os("sched_getaffinity", e.into()))?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// While alive, the calling thread runs only on the CPUs it was pinned to.
#[must_use = "the pin is undone when dropped"]
pub struct Pin {
    previous: CpuSet,
}

impl Pin {
    /// Pins the calling thread to `cpus` (no-op if empty).
    pub fn current_to(cpus: &[usize]) -> Result<Pin, LabError> {
        let previous =
            sched_getaffinity(None).map_err(|e| LabError::os("sched_getaffinity", e.into()))?;
        if !cpus.is_empty() {
            let mut set = CpuSet::new();
            for &c in cpus {
                set.set(c);
            }
            sched_setaffinity(None, &set)
                .map_err(|e| LabError::os("sched_setaffinity", e.into()))?;
        }
        Ok(Pin { previous })
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        // Best effort: the previous mask was valid a moment ago.
        let _ = sched_setaffinity(None, &self.previous);
    }
}

/// Which CPUs the measuring thread and its workers use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// For the thread that drives the measurement (empty: unpinned).
    pub driver: Vec<usize>,
    /// For the worker threads (empty: unpinned).
    pub workers: Vec<usize>,
}

impl Placement {
    /// The driver alone on the first allowed CPU, the workers on the rest;
    /// nobody pinned when only one CPU is allowed.
    pub fn split() -> Result<Placement, LabError> {
        let cpus = allowed_cpus()?;
        Ok(match cpus.split_first() {
            Some((&first, rest)) if !rest.is_empty() => {
                Placement { driver: vec![first], workers: rest.to_vec() }
            }
            _ => Placement { driver: Vec::new(), workers: Vec::new() },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_restricts_the_thread_and_dropping_it_restores_the_mask() {
        let before = allowed_cpus().unwrap();
        let only = [before[0]];
        {
            let _pin = Pin::current_to(&only).unwrap();
            assert_eq!(allowed_cpus().unwrap(), only);
        }
        assert_eq!(allowed_cpus().unwrap(), before);
    }

    #[test]
    fn split_keeps_driver_and_workers_apart() {
        let p = Placement::split().unwrap();
        assert!(p.driver.iter().all(|c| !p.workers.contains(c)));
    }
}
