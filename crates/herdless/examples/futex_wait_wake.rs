//! Futex wait/wake on a [`FutexTable`]: a start gate and a completion latch.
//!
//! Eight workers sleep on a `gate` word until the main thread opens it with
//! one `wake_all`; each then does its share of work and counts down a
//! `remaining` word, the last one waking the main thread, which sleeps on
//! it. Every wait sits in a loop that re-reads the word: a wait that finds
//! the word already changed returns `ValueChanged` without sleeping, and
//! that is how a thread that arrives late learns it has nothing to wait for.
//!
//! ```sh
//! cargo run --release -p herdless --example futex_wait_wake --features stats
//! ```

use std::error::Error;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;

use herdless::{FutexTable, WaitError, Woken};

const WORKERS: u32 = 8;
const CLOSED: u32 = 0;
const OPEN: u32 = 1;
/// Numbers each worker sums.
const SLICE: u64 = 100_000;

/// Sleeps on `word` until `done` holds for its value, and returns that
/// value. A wait without a timeout ends only when a wake dequeued it or
/// when the word no longer held the value it was given, so the loop
/// re-reads the word and sleeps again only if it is still not done.
fn wait_until(
    table: &FutexTable,
    word: &AtomicU32,
    done: impl Fn(u32) -> bool,
) -> Result<u32, WaitError> {
    loop {
        let value = word.load(Ordering::Acquire);
        if done(value) {
            return Ok(value);
        }
        match table.wait(word, value, None) {
            Ok(Woken) | Err(WaitError::ValueChanged) => {}
            Err(e @ WaitError::TimedOut) => return Err(e),
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let table = FutexTable::new();
    let gate = AtomicU32::new(CLOSED);
    let remaining = AtomicU32::new(WORKERS);
    let total = AtomicU64::new(0);

    let woken_at_the_gate = thread::scope(|s| -> Result<usize, Box<dyn Error>> {
        let workers: Vec<_> = (0..WORKERS)
            .map(|id| {
                let (table, gate, remaining, total) = (&table, &gate, &remaining, &total);
                s.spawn(move || -> Result<(), WaitError> {
                    wait_until(table, gate, |g| g == OPEN)?;
                    // The work: sum this worker's slice of 1..=800_000.
                    let slice = u64::from(id) * SLICE + 1..=u64::from(id + 1) * SLICE;
                    total.fetch_add(slice.sum::<u64>(), Ordering::Relaxed);
                    // Release: the sum above happens-before the main
                    // thread's Acquire load that sees zero.
                    if remaining.fetch_sub(1, Ordering::Release) == 1 {
                        table.wake(remaining, 1);
                    }
                    Ok(())
                })
            })
            .collect();
        // Store the new value first, then wake: the order `wake` relies on.
        gate.store(OPEN, Ordering::Release);
        let woken = table.wake_all(&gate);
        wait_until(&table, &remaining, |left| left == 0)?;
        for worker in workers {
            worker.join().map_err(|_| "a worker panicked")??;
        }
        Ok(woken)
    })?;

    let expected: u64 = (1..=u64::from(WORKERS) * SLICE).sum();
    let sum = total.load(Ordering::Relaxed);
    if sum != expected {
        return Err(format!("workers summed {sum}, expected {expected}").into());
    }
    // Nobody waits on the gate any more: this wake is a fence and a load.
    let woken_late = table.wake_all(&gate);

    println!(
        "{WORKERS} workers summed 1..={}: {sum}",
        u64::from(WORKERS) * SLICE
    );
    println!("wake_all at the gate woke {woken_at_the_gate} sleeping workers (the rest had not slept yet)");
    println!("a wake with nobody waiting woke {woken_late} and took no lock");
    println!("waiters left in the table: {}", table.total_waiters());
    print_stats(&table);
    Ok(())
}

fn print_stats(table: &FutexTable) {
    if cfg!(feature = "stats") {
        let st = table.stats();
        println!(
            "stats: {} waits, {} wakes ({} skipped the lock), {} threads woken",
            st.waits, st.wakes, st.wakes_skipped, st.wakeups
        );
    } else {
        println!("(run with `--features stats` for the table's event counters)");
    }
}
