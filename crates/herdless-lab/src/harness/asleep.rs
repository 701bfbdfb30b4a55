//! Proof that threads are asleep, read from `/proc/self/task/<tid>/status`,
//! instead of sleeping "long enough" and hoping.
//!
//! One sweep reads every thread's `State:` and its context-switch count
//! (`voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches`). A thread is
//! *settled* in a sweep when it is sleeping (`S`) and its count equals the
//! one read in the previous sweep: a thread that ran in between would have
//! switched out again and raised the count. When every thread is settled in
//! the same sweep, every thread was asleep at the instant between the two
//! sweeps, all at once. A thread that sleeps only briefly on the way to its
//! real wait (a contended internal lock) cannot be asleep at that instant
//! together with the thread it waits for, which is running.

use std::sync::atomic::{AtomicI32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::patience::wait_until;
use super::LabError;

/// The calling thread's kernel thread id.
pub fn current_tid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// What one read of a thread's status says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Status {
    state: char,
    switches: u64,
}

fn read_status(tid: i32) -> Result<Status, LabError> {
    let path = format!("/proc/self/task/{tid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        LabError::os(format!("reading {path} (did the thread exit before being woken?)"), e)
    })?;
    parse_status(&text).ok_or_else(|| LabError::Sample(format!("cannot parse {path}")))
}

fn parse_status(text: &str) -> Option<Status> {
    let mut state = None;
    let mut switches = 0u64;
    let mut seen = 0;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "State" => state = value.chars().next(),
            "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches" => {
                switches += value.parse::<u64>().ok()?;
                seen += 1;
            }
            _ => {}
        }
    }
    (seen == 2).then_some(Status { state: state?, switches })
}

/// Waits for each of a measurement's threads to publish its thread id
/// ([`current_tid`]) in its slot (0 until then), within the lab's patience,
/// and returns them.
pub fn collect_tids(slots: &[AtomicI32]) -> Result<Vec<i32>, LabError> {
    slots
        .iter()
        .map(|slot| {
            wait_until(|| slot.load(Ordering::Acquire) != 0, || "waiters starting".into())?;
            Ok(slot.load(Ordering::Acquire))
        })
        .collect()
}

/// Waits until every thread in `tids` is asleep at once (see the module
/// docs), or fails after `timeout`.
pub fn wait_until_asleep(tids: &[i32], timeout: Duration) -> Result<(), LabError> {
    let start = Instant::now();
    let mut previous: Vec<Option<u64>> = vec![None; tids.len()];
    loop {
        let mut settled = true;
        for (tid, prev) in tids.iter().zip(previous.iter_mut()) {
            let status = read_status(*tid)?;
            if status.state == 'S' {
                settled &= *prev == Some(status.switches);
                *prev = Some(status.switches);
            } else {
                settled = false;
                *prev = None;
            }
        }
        if settled {
            return Ok(());
        }
        if start.elapsed() > timeout {
            let awake = previous.iter().filter(|p| p.is_none()).count();
            return Err(LabError::Stuck {
                what: format!("{awake} of {} threads still not asleep", tids.len()),
                after: timeout,
            });
        }
        thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    use std::sync::{Condvar, Mutex};

    #[test]
    fn parses_state_and_both_switch_counts() {
        let text = "Name:\tx\nState:\tS (sleeping)\nTgid:\t1\n\
                    voluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_status(text), Some(Status { state: 'S', switches: 15 }));
        assert_eq!(parse_status("State:\tR (running)\n"), None);
    }

    #[test]
    fn a_thread_blocked_on_a_condvar_is_seen_asleep() {
        let pair = (Mutex::new(false), Condvar::new());
        let tid = AtomicI32::new(0);
        thread::scope(|s| {
            s.spawn(|| {
                tid.store(current_tid(), Ordering::Release);
                let mut go = pair.0.lock().unwrap();
                while !*go {
                    go = pair.1.wait(go).unwrap();
                }
            });
            while tid.load(Ordering::Acquire) == 0 {
                thread::yield_now();
            }
            let tids = [tid.load(Ordering::Acquire)];
            wait_until_asleep(&tids, Duration::from_secs(10)).unwrap();
            *pair.0.lock().unwrap() = true;
            pair.1.notify_all();
        });
    }

    #[test]
    fn a_spinning_thread_is_never_asleep() {
        let stop = AtomicBool::new(false);
        let tid = AtomicI32::new(0);
        thread::scope(|s| {
            s.spawn(|| {
                tid.store(current_tid(), Ordering::Release);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            while tid.load(Ordering::Acquire) == 0 {
                thread::yield_now();
            }
            let tids = [tid.load(Ordering::Acquire)];
            let err = wait_until_asleep(&tids, Duration::from_millis(50)).unwrap_err();
            assert!(matches!(err, LabError::Stuck { .. }), "{err}");
            stop.store(true, Ordering::Relaxed);
        });
    }
}
