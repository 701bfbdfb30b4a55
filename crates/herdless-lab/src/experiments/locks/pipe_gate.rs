//! A gate threads sleep on without a futex: a blocking `read(2)` of one byte
//! from a pipe, opened by writing bytes into it.
//!
//! The broadcast section counts the futex calls of a lock's wake-up; its
//! own bookkeeping (a waiter parking after it ran, the driver waiting for
//! the last one) must not add any, so it waits here instead of on a
//! futex, a `Barrier` or a thread join.

use std::fs::File;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::pipe::{pipe_with, PipeFlags};

use crate::harness::LabError;

/// Both ends of a pipe.
pub struct PipeGate {
    read: File,
    write: File,
}

impl PipeGate {
    /// A closed gate.
    pub fn new() -> Result<PipeGate, LabError> {
        let (read, write) =
            pipe_with(PipeFlags::CLOEXEC).map_err(|e| LabError::os("pipe2", e.into()))?;
        Ok(PipeGate {
            read: File::from(read),
            write: File::from(write),
        })
    }

    /// Lets `n` passes through (`n` bytes; a pipe holds at least 4 KiB
    /// before a writer would block, more than any caller here passes).
    pub fn open(&self, n: usize) -> Result<(), LabError> {
        (&self.write)
            .write_all(&vec![0u8; n])
            .map_err(|e| LabError::os("writing to the gate's pipe", e))
    }

    /// Sleeps until one pass is available, or fails as stuck after
    /// `patience`; then takes it.
    pub fn pass_within(&self, patience: Duration) -> Result<(), LabError> {
        let deadline = Instant::now() + patience;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // A wait too long for a timespec has no timeout.
            let timeout = Timespec::try_from(left).ok();
            let mut fds = [PollFd::new(&self.read, PollFlags::IN)];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(1..) => return self.pass(),
                Ok(0) => {
                    return Err(LabError::Stuck {
                        what: "waiting at a pipe gate".into(),
                        after: patience,
                    })
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(LabError::os("poll on the gate's pipe", e.into())),
            }
        }
    }

    /// Sleeps until one pass is available and takes it.
    pub fn pass(&self) -> Result<(), LabError> {
        let mut byte = [0u8; 1];
        (&self.read)
            .read_exact(&mut byte)
            .map_err(|e| LabError::os("reading the gate's pipe", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pass_takes_one_byte_and_blocked_threads_pass_when_opened() {
        let gate = PipeGate::new().unwrap();
        gate.open(1).unwrap();
        gate.pass().unwrap();
        std::thread::scope(|s| {
            let waiters: Vec<_> = (0..3).map(|_| s.spawn(|| gate.pass())).collect();
            gate.open(3).unwrap();
            for w in waiters {
                w.join().unwrap().unwrap();
            }
        });
    }

    #[test]
    fn a_closed_gate_is_stuck_after_the_patience_and_an_open_one_passes() {
        let gate = PipeGate::new().unwrap();
        let err = gate.pass_within(Duration::from_millis(20)).unwrap_err();
        assert!(matches!(err, LabError::Stuck { .. }), "{err}");
        gate.open(1).unwrap();
        gate.pass_within(Duration::from_millis(20)).unwrap();
    }
}
