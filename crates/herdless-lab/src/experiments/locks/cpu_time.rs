//! CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), user and
//! system together: what a thread spent running, whoever else shared the
//! machine. Per operation it separates a lock that costs more CPU (spins,
//! syscalls) from one that waits more, and it moves much less than wall
//! time when other processes load the machine.

/// Nanoseconds of CPU the calling thread has used so far.
pub fn thread_cpu_ns() -> u64 {
    // SAFETY: `timespec` is plain old data, for which all-zero bytes is a
    // valid value.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a writable timespec. The call cannot fail
    // with these arguments; on failure `ts` stays zero, read as "no time".
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs * 1_000_000_000 + nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_advances_the_clock_and_sleeping_does_not() {
        // Spin until 2 ms of CPU time have been used: the clock advances
        // while the thread runs (however often it is preempted).
        let start = thread_cpu_ns();
        let patience = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while thread_cpu_ns() - start < 2_000_000 {
            assert!(std::time::Instant::now() < patience, "the clock does not advance");
            std::hint::spin_loop();
        }
        let before_sleep = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let slept = thread_cpu_ns() - before_sleep;
        assert!(slept < 5_000_000, "{slept} ns of CPU while asleep for 20 ms");
    }
}
