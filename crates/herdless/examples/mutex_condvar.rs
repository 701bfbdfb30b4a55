//! [`Mutex`] and [`Condvar`]: a bounded job queue with a shutdown.
//!
//! A producer pushes jobs into a queue of at most `CAPACITY` items; four
//! workers take them. Each condvar carries one condition ("not empty" for
//! the workers, "not full" and "all idle" for the producer) and is waited on
//! in a loop that re-checks it. At the end the producer waits until every
//! worker is idle, sets `closed` and calls `notify_all`: herdless's condvar
//! wakes one worker and requeues the others onto the mutex word, so they
//! take the lock one by one instead of all waking to fight over it (the
//! `requeued` counter shows how many were moved; 0 when the workers had
//! not gone to sleep yet).
//!
//! ```sh
//! cargo run --release -p herdless --example mutex_condvar --features stats
//! ```

use std::collections::VecDeque;
use std::error::Error;
use std::thread;

use herdless::{Condvar, FutexTable, Mutex};

const JOBS: u64 = 20_000;
const CAPACITY: usize = 64;
const WORKERS: usize = 4;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<u64>,
    closed: bool,
    /// Workers waiting on `not_empty`.
    idle: usize,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    not_empty: Condvar,
    not_full: Condvar,
    all_idle: Condvar,
}

/// A worker: takes jobs until the queue is closed and drained; returns how
/// many it did and the sum of their results.
fn worker(shared: &Shared) -> (u64, u64) {
    let (mut done, mut sum) = (0, 0);
    loop {
        let mut queue = shared.queue.lock();
        while queue.jobs.is_empty() && !queue.closed {
            queue.idle += 1;
            if queue.idle == WORKERS {
                shared.all_idle.notify_one();
            }
            shared.not_empty.wait(&mut queue);
            queue.idle -= 1;
        }
        let Some(job) = queue.jobs.pop_front() else {
            return (done, sum); // closed and drained
        };
        drop(queue);
        shared.not_full.notify_one();
        done += 1;
        sum += job * job;
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let shared = Shared::default();
    let per_worker = thread::scope(|s| -> Result<Vec<(u64, u64)>, Box<dyn Error>> {
        let workers: Vec<_> = (0..WORKERS).map(|_| s.spawn(|| worker(&shared))).collect();
        for job in 1..=JOBS {
            let mut queue = shared.queue.lock();
            while queue.jobs.len() == CAPACITY {
                shared.not_full.wait(&mut queue);
            }
            queue.jobs.push_back(job);
            drop(queue);
            shared.not_empty.notify_one();
        }
        let mut queue = shared.queue.lock();
        while !(queue.jobs.is_empty() && queue.idle == WORKERS) {
            shared.all_idle.wait(&mut queue);
        }
        queue.closed = true;
        drop(queue);
        shared.not_empty.notify_all();
        workers
            .into_iter()
            .map(|w| w.join().map_err(|_| "a worker panicked".into()))
            .collect()
    })?;

    let done: u64 = per_worker.iter().map(|&(n, _)| n).sum();
    let sum: u64 = per_worker.iter().map(|&(_, s)| s).sum();
    let expected = JOBS * (JOBS + 1) * (2 * JOBS + 1) / 6;
    if done != JOBS || sum != expected {
        return Err(
            format!("{done} jobs summing to {sum}; expected {JOBS} summing to {expected}").into(),
        );
    }
    let split: Vec<u64> = per_worker.iter().map(|&(n, _)| n).collect();
    println!("{WORKERS} workers did {done} jobs (split {split:?}), sum of squares {sum}");

    // Mutex and Condvar sleep on the process-wide futex table.
    if cfg!(feature = "stats") {
        let st = FutexTable::global().stats();
        println!(
            "futex table: {} waits, {} wakes ({} skipped the lock: nobody waited), \
             {} requeue operations (condvar notifications), {} threads woken by both, {} requeued onto the mutex",
            st.waits, st.wakes, st.wakes_skipped, st.requeues, st.wakeups, st.requeued
        );
    } else {
        println!("(run with `--features stats` for the futex table's event counters)");
    }
    Ok(())
}
