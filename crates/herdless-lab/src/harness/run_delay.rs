//! A thread's own run delay: the time it has spent runnable but not
//! running (on a run queue, waiting for a CPU), from the kernel's
//! scheduler statistics (`/proc/thread-self/schedstat`, its second
//! field, in nanoseconds). Read around a wait, it tells a wait spent
//! asleep (in a lock's queue) from one spent waiting for a CPU after the
//! wake: what a lock's fairness cannot fix, the scheduler's share.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// The calling thread's run-delay counter, kept open (one `pread` per
/// reading).
///
/// ```
/// use herdless_lab::harness::run_delay::RunDelay;
/// if let Some(rd) = RunDelay::of_this_thread() {
///     let before = rd.now().unwrap();
///     std::thread::yield_now();
///     assert!(rd.now().unwrap() >= before);
/// }
/// ```
pub struct RunDelay {
    file: File,
}

impl RunDelay {
    /// The calling thread's counter; `None` where the kernel keeps no
    /// scheduler statistics (no `CONFIG_SCHED_INFO`) or `/proc` is not
    /// there. Read it from this thread only: the file is this thread's.
    pub fn of_this_thread() -> Option<RunDelay> {
        let file = File::open("/proc/thread-self/schedstat").ok()?;
        let rd = RunDelay { file };
        rd.now().map(|_| rd)
    }

    /// Nanoseconds the thread has spent runnable and not running so far.
    pub fn now(&self) -> Option<u64> {
        let mut buf = [0u8; 96];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        parse(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

/// The run delay of a `schedstat` line: "ON_CPU_NS RUN_DELAY_NS SLICES".
fn parse(line: &str) -> Option<u64> {
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_field_is_the_run_delay() {
        assert_eq!(parse("123 4567 8\n"), Some(4567));
        assert_eq!(parse("123\n"), None);
        assert_eq!(parse("a b c"), None);
    }
}
