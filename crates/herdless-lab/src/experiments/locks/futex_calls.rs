//! Counts the futex system calls a measurement makes, for every lock family
//! alike (herdless's own counters only see herdless), with the kernel's
//! `syscalls:sys_enter_futex` tracepoint as a perf counter: what
//! `perf stat -e syscalls:sys_enter_futex` counts, but over a window the
//! measurement chooses.
//!
//! The counter follows the calling thread and every thread it spawns
//! *afterwards* (perf's `inherit`), starts disabled, and is enabled and
//! disabled around the window; reading it sums all those threads. A
//! second counter counts only the operations that wake (`FUTEX_WAKE`,
//! `FUTEX_WAKE_BITSET`, `FUTEX_WAKE_OP`, `FUTEX_REQUEUE`,
//! `FUTEX_CMP_REQUEUE`, private or not), through a tracepoint filter.
//!
//! Counting costs: while a syscall tracepoint is in use, every system call
//! on the machine takes the kernel's slow tracing entry path. So the lab
//! counts in a separate, untimed round, never while it times.
//!
//! Unavailable without root (or `perf_event_paranoid` ≤ 1) or without
//! tracefs mounted (`/sys/kernel/tracing`; running `perf stat -e
//! 'syscalls:*' true` once mounts it): [`FutexCalls::open`] then returns
//! `None` and the metric stays blank.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Where the tracepoint's numeric id is published, newest path first.
const TRACEPOINT_ID: [&str; 2] = [
    "/sys/kernel/tracing/events/syscalls/sys_enter_futex/id",
    "/sys/kernel/debug/tracing/events/syscalls/sys_enter_futex/id",
];

/// The futex operations that wake a waiter, with and without
/// `FUTEX_PRIVATE_FLAG` (128): WAKE 1, REQUEUE 3, CMP_REQUEUE 4, WAKE_OP 5,
/// WAKE_BITSET 10.
const WAKE_FILTER: &str = "op == 1 || op == 129 || op == 3 || op == 131 || op == 4 || \
                           op == 132 || op == 5 || op == 133 || op == 10 || op == 138";

const PERF_TYPE_TRACEPOINT: u32 = 2;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_INHERIT: u64 = 1 << 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// `_IOW('$', 6, char *)`.
const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

/// `struct perf_event_attr` up to `config1` (`PERF_ATTR_SIZE_VER0`, 64
/// bytes), which is all a counting tracepoint needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// One perf counter of the futex tracepoint.
struct Counter(OwnedFd);

impl Counter {
    fn open(id: u64, filter: Option<&str>) -> Option<Counter> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            flags: FLAG_DISABLED | FLAG_INHERIT,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid, initialised perf_event_attr of the size
        // it states; pid 0 / cpu -1 (this thread and its future children,
        // any CPU) and group -1 are valid arguments.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
        // SAFETY: a fresh descriptor the kernel just gave us; we own it.
        let counter = Counter(unsafe { OwnedFd::from_raw_fd(fd) });
        if let Some(filter) = filter {
            let text = std::ffi::CString::new(filter).ok()?;
            // SAFETY: a valid perf fd and a NUL-terminated string that
            // outlives the call.
            let rc = unsafe { libc::ioctl(counter.fd(), IOC_SET_FILTER, text.as_ptr()) };
            if rc != 0 {
                return None;
            }
        }
        Some(counter)
    }

    fn fd(&self) -> libc::c_int {
        self.0.as_raw_fd()
    }

    fn ioctl(&self, request: libc::c_ulong) {
        // SAFETY: a valid perf fd; ENABLE/DISABLE take no argument. They
        // apply to the inherited children too. They cannot fail on a valid
        // fd, and a failure would only leave the count short.
        unsafe { libc::ioctl(self.fd(), request, 0) };
    }

    fn read(&self) -> Option<u64> {
        let mut value = [0u8; 8];
        let read = rustix::io::read(&self.0, &mut value).ok()?;
        (read == value.len()).then(|| u64::from_ne_bytes(value))
    }
}

/// Futex system calls counted over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutexCallCounts {
    /// Every futex call.
    pub calls: u64,
    /// Calls that wake (see the module docs).
    pub wakes: u64,
}

/// The two counters, disabled until [`FutexCalls::start`].
pub struct FutexCalls {
    all: Counter,
    wakes: Counter,
}

impl FutexCalls {
    /// Opens both counters for the calling thread and the threads it
    /// spawns from now on; `None` where perf or the tracepoint is not
    /// available.
    pub fn open() -> Option<FutexCalls> {
        let id = TRACEPOINT_ID
            .iter()
            .find_map(|path| std::fs::read_to_string(path).ok())?
            .trim()
            .parse()
            .ok()?;
        Some(FutexCalls {
            all: Counter::open(id, None)?,
            wakes: Counter::open(id, Some(WAKE_FILTER))?,
        })
    }

    /// Starts counting (in every thread spawned since `open`, too).
    pub fn start(&self) {
        self.all.ioctl(IOC_ENABLE);
        self.wakes.ioctl(IOC_ENABLE);
    }

    /// Stops counting and returns the counts since `open`.
    pub fn stop(&self) -> Option<FutexCallCounts> {
        self.all.ioctl(IOC_DISABLE);
        self.wakes.ioctl(IOC_DISABLE);
        Some(FutexCallCounts {
            calls: self.all.read()?,
            wakes: self.wakes.read()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    use rustix::thread::futex;

    /// Yields (`sched_yield`, not a futex) until `phase` reaches `at`.
    fn wait_for(phase: &AtomicU32, at: u32) {
        while phase.load(Ordering::Acquire) < at {
            std::thread::yield_now();
        }
    }

    /// Where the counter can be opened, it counts exactly the futex calls
    /// made inside the window, by a thread spawned after `open`, and the
    /// filter keeps the wakes only.
    #[test]
    fn counts_a_spawned_threads_futex_calls_inside_the_window_only() {
        let Some(counter) = FutexCalls::open() else {
            eprintln!("perf tracepoint unavailable here: nothing to check");
            return;
        };
        let word = AtomicU32::new(0);
        let phase = AtomicU32::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                // Before the window: not counted.
                let _ = futex::wake(&word, futex::Flags::PRIVATE, 1);
                phase.store(1, Ordering::Release);
                wait_for(&phase, 2);
                // Inside: two wakes, and a wait that returns at once (the
                // word is not 1) but is a call all the same.
                let _ = futex::wake(&word, futex::Flags::PRIVATE, 1);
                let _ = futex::wake(&word, futex::Flags::PRIVATE, 1);
                let _ = futex::wait(&word, futex::Flags::PRIVATE, 1, None);
                phase.store(3, Ordering::Release);
                wait_for(&phase, 4);
                // After the window: not counted.
                let _ = futex::wake(&word, futex::Flags::PRIVATE, 1);
            });
            wait_for(&phase, 1);
            counter.start();
            phase.store(2, Ordering::Release);
            wait_for(&phase, 3);
            let counts = counter.stop().unwrap();
            phase.store(4, Ordering::Release);
            assert_eq!(counts, FutexCallCounts { calls: 3, wakes: 2 });
        });
    }
}
