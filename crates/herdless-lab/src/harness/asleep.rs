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

/// A thread's state letter (`S`: sleeping) and its context switches
/// (voluntary + involuntary), from `/proc/self/task/<tid>/status`.
fn read_status(tid: i32) -> Result<(char, u64), LabError> {
    let status = procfs::process::Process::myself()
        .and_then(|p| p.task_from_tid(tid)?.status())
        .map_err(|e| {
            LabError::Sample(format!(
                "reading thread {tid}'s status (did it exit before being woken?): {e}"
            ))
        })?;
    let switches = status
        .voluntary_ctxt_switches
        .zip(status.nonvoluntary_ctxt_switches);
    match (status.state.chars().next(), switches) {
        (Some(state), Some((v, n))) => Ok((state, v + n)),
        _ => Err(LabError::Sample(format!(
            "thread {tid}'s status lacks its state or switches"
        ))),
    }
}

/// Waits for each of a measurement's threads to publish its thread id
/// ([`current_tid`]) in its slot (0 until then), within the lab's patience,
/// and returns them.
pub fn collect_tids(slots: &[AtomicI32]) -> Result<Vec<i32>, LabError> {
    slots
        .iter()
        .map(|slot| {
            wait_until(
                || slot.load(Ordering::Acquire) != 0,
                || "waiters starting".into(),
            )?;
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
            let (state, switches) = read_status(*tid)?;
            if state == 'S' {
                settled &= *prev == Some(switches);
                *prev = Some(switches);
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
