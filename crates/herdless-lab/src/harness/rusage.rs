//! Software counters from `getrusage`: context switches, minor faults and
//! CPU time, the machine having no hardware performance counters.
//!
//! Take a [`Usage`] before and after the measured work and subtract:
//! `Usage::thread()` counts the calling thread only (exact for a worker's own
//! loop), `Usage::process()` every thread of the process, including those
//! that have exited.

/// Counters of a thread or of the whole process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Voluntary context switches (the thread blocked).
    pub voluntary_switches: u64,
    /// Involuntary context switches (the thread was preempted).
    pub involuntary_switches: u64,
    /// Minor page faults (no I/O).
    pub minor_faults: u64,
    /// Major page faults (I/O).
    pub major_faults: u64,
    /// User plus system CPU time, in microseconds.
    pub cpu_micros: u64,
}

impl Usage {
    /// The calling thread's counters (`RUSAGE_THREAD`).
    pub fn thread() -> Usage {
        get(libc::RUSAGE_THREAD)
    }

    /// The whole process's counters (`RUSAGE_SELF`).
    pub fn process() -> Usage {
        get(libc::RUSAGE_SELF)
    }

    /// Counts since `earlier` (saturating, as counters never go back).
    pub fn since(&self, earlier: &Usage) -> Usage {
        self.each(earlier, u64::saturating_sub)
    }

    /// Voluntary plus involuntary context switches.
    pub fn ctx_switches(&self) -> u64 {
        self.voluntary_switches + self.involuntary_switches
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Usage) {
        *self = self.each(other, |a, b| a + b);
    }

    /// `f` of these counters and `other`'s, counter by counter.
    fn each(&self, other: &Usage, f: impl Fn(u64, u64) -> u64) -> Usage {
        Usage {
            voluntary_switches: f(self.voluntary_switches, other.voluntary_switches),
            involuntary_switches: f(self.involuntary_switches, other.involuntary_switches),
            minor_faults: f(self.minor_faults, other.minor_faults),
            major_faults: f(self.major_faults, other.major_faults),
            cpu_micros: f(self.cpu_micros, other.cpu_micros),
        }
    }
}

fn get(who: libc::c_int) -> Usage {
    // SAFETY: `rusage` is plain old data, for which all-zero bytes is a valid
    // value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage`; `who` is RUSAGE_SELF or
    // RUSAGE_THREAD, which Linux always accepts, so the call cannot fail
    // (and on failure `ru` stays zeroed, which reads as "no events").
    unsafe { libc::getrusage(who, &mut ru) };
    let count = |v: libc::c_long| u64::try_from(v).unwrap_or(0);
    let micros = |t: libc::timeval| count(t.tv_sec) * 1_000_000 + count(t.tv_usec);
    Usage {
        voluntary_switches: count(ru.ru_nvcsw),
        involuntary_switches: count(ru.ru_nivcsw),
        minor_faults: count(ru.ru_minflt),
        major_faults: count(ru.ru_majflt),
        cpu_micros: micros(ru.ru_utime) + micros(ru.ru_stime),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeping_counts_a_voluntary_switch() {
        let before = Usage::thread();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let delta = Usage::thread().since(&before);
        assert!(delta.voluntary_switches >= 1, "{delta:?}");
    }

    #[test]
    fn touching_fresh_memory_counts_minor_faults() {
        let before = Usage::process();
        let mut v = vec![0u8; 8 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        let delta = Usage::process().since(&before);
        assert!(delta.minor_faults >= 1, "{delta:?}");
    }
}
