//! Section "wake one at a time", the workload of `perf bench futex wake`
//! and of seed 004's table: N threads asleep on one word, woken one
//! `wake(word, 1)` at a time by the main thread, timed from the first wake
//! call to the return of the one that woke the N-th thread.
//!
//! The clock starts only once every worker is verifiably asleep
//! (`harness::asleep`), not after a guessed sleep. Two things keep the
//! time the waker's own rather than the scheduler's:
//! - the waking thread has a CPU to itself and the workers share the others
//!   (`Placement::split`), so a woken worker never preempts the waker;
//! - a woken worker does not exit while the clock runs but parks on an exit
//!   gate (the kernel futex, the same for every backend): 512 thread exits
//!   unmapping stacks cost the waker TLB-shootdown interrupts and made the
//!   per-wake time 5–10× larger and far noisier on a 2-core VM.
//!
//! Workers are spawned afresh for every repetition and released through the
//! gate at its end.
//!
//! `ran_during_pct` says which of two regimes a repetition was in: the
//! share of woken workers that had already run when the waker made its
//! last wake (the lab README's "Wake one at a time: where the time goes"
//! says what each regime costs).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use rustix::thread::futex;
use serde::Serialize;

use super::backend::Backend;
use super::Measure;
use crate::harness::affinity::{Pin, Placement};
use crate::harness::asleep::{collect_tids, current_tid, wait_until_asleep};
use crate::harness::gang::spawn_each;
use crate::harness::patience::PATIENCE;
use crate::harness::{Case, LabError, Sample};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Sleeping threads to wake.
    pub threads: usize,
}

/// The measurement.
pub struct OneAtATime;

/// Parks a woken worker on the exit gate (the kernel's futex, the same for
/// every backend) until the measurement is over: a thread exiting while the
/// clock runs would disturb the waker (stack unmapping, TLB shootdowns).
fn wait_for_gate(gate: &AtomicU32) {
    while gate.load(Ordering::Acquire) == 0 {
        let _ = futex::wait(gate, futex::Flags::PRIVATE, 0, None);
    }
}

impl Measure for OneAtATime {
    type Params = Params;

    fn measure<B: Backend>(backend: &B, case: &Case<Params>) -> Result<Sample, LabError> {
        let n = case.params.threads;
        let word = AtomicU32::new(0);
        let tids: Vec<AtomicI32> = (0..n).map(|_| AtomicI32::new(0)).collect();
        let gate = AtomicU32::new(0);
        // Woken workers that have returned from their wait.
        let returned = AtomicUsize::new(0);
        let (word, gate, returned) = (&word, &gate, &returned);
        let placement = Placement::split()?;
        let workers = &placement.workers[..];
        let _driver = Pin::current_to(&placement.driver)?;
        thread::scope(|s| {
            // At the end of this closure, before the scope joins, on every
            // path: sets the word to 1 and wakes everybody still waiting on
            // it (on the normal path nobody is), then opens the exit gate,
            // so the workers exit. Each store precedes its wake, as every
            // futex protocol requires.
            let _release = scopeguard::guard((), |()| {
                word.store(1, Ordering::SeqCst);
                backend.wake_all(word);
                gate.store(1, Ordering::SeqCst);
                let _ = futex::wake(gate, futex::Flags::PRIVATE, i32::MAX as u32);
            });
            let slots = &tids;
            spawn_each(s, "waiter", n, move |i| {
                // Unpinned if pinning fails: slower, still correct.
                let _pin = Pin::current_to(workers);
                slots[i].store(current_tid(), Ordering::Release);
                while word.load(Ordering::Acquire) == 0 {
                    if backend.wait(word, 0) {
                        break;
                    }
                }
                // Relaxed: a count read once, after the loop.
                returned.fetch_add(1, Ordering::Relaxed);
                wait_for_gate(gate);
            })?;
            let tids = collect_tids(&tids)?;
            wait_until_asleep(&tids, PATIENCE)?;

            let start = Instant::now();
            let mut woken = 0;
            let mut idle: u32 = 0;
            while woken < n {
                let got = backend.wake_one(word);
                woken += got;
                if got == 0 {
                    idle += 1;
                    if idle.is_multiple_of(1024) && start.elapsed() > PATIENCE {
                        return Err(LabError::Stuck {
                            what: format!("woke {woken} of {n} sleepers"),
                            after: PATIENCE,
                        });
                    }
                }
            }
            let elapsed = start.elapsed().as_secs_f64();
            let ran = returned.load(Ordering::Relaxed);
            Ok(Sample::new()
                .with("per_wake_us", elapsed * 1e6 / n as f64)
                .with("time_ms", elapsed * 1e3)
                .with("ran_during_pct", 100.0 * ran as f64 / n as f64))
        })
    }
}
