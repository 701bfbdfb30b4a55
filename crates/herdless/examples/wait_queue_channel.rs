//! [`WaitQueue`] and [`Channel`]: exclusive wakeups against the herd.
//!
//! Part 1 builds a counting semaphore from a `WaitQueue` and a mutex: an
//! acquirer waits *exclusively* and its closure tests and takes a permit in
//! one step ([`Attempt::Done`]), so each release wakes exactly one thread.
//! (A wakeup is "wasted" when a running thread took the permit before the
//! woken one looked: permits are not handed off, as with most locks.)
//!
//! Part 2 runs the same requests through a `Channel` twice: four workers
//! block in `recv`, a client sends a request and waits for its reply before
//! sending the next, so every request finds the workers asleep. With
//! [`WakeMode::WakeAll`] (seed 000's "before") every send wakes every
//! reader and all but one find nothing; with [`WakeMode::Exclusive`] a send
//! wakes one reader. The channel's counters show the difference.
//!
//! ```sh
//! cargo run --release -p herdless --example wait_queue_channel --features stats
//! ```

use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use herdless::variants::WakeMode;
use herdless::{Attempt, Channel, Mutex, WaitQueue};

/// A counting semaphore: permits under a mutex, acquirers on a wait queue.
struct Semaphore {
    permits: Mutex<usize>,
    queue: WaitQueue,
}

impl Semaphore {
    fn acquire(&self) {
        self.queue.wait_event_exclusive(|| {
            let mut permits = self.permits.lock();
            if *permits == 0 {
                return Attempt::Wait;
            }
            *permits -= 1;
            Attempt::Done(())
        });
    }

    fn release(&self) {
        *self.permits.lock() += 1; // change the state first, then wake
        self.queue.wake_up(1);
    }
}

fn semaphore() -> Result<(), Box<dyn Error>> {
    let sem = Semaphore {
        permits: Mutex::new(2),
        queue: WaitQueue::new(),
    };
    let (inside, most_inside) = (AtomicUsize::new(0), AtomicUsize::new(0));
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..200 {
                    sem.acquire();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most_inside.fetch_max(now, Ordering::SeqCst);
                    thread::yield_now(); // stands in for work that blocks (I/O)
                    inside.fetch_sub(1, Ordering::SeqCst);
                    sem.release();
                }
            });
        }
    });
    let most = most_inside.load(Ordering::SeqCst);
    if most > 2 {
        return Err(format!("{most} threads held a permit at once; the limit is 2").into());
    }
    let st = sem.queue.stats();
    println!("semaphore: 8 threads x 200 acquisitions of 2 permits, at most {most} inside at once");
    println!(
        "  wait queue: {} wakeups, {} wasted",
        st.wakeups, st.wasted_wakeups
    );
    Ok(())
}

/// Four workers serve `requests` requests, one at a time, and reply.
fn channel(mode: WakeMode, requests: u64) -> Result<(), Box<dyn Error>> {
    let (requests_ch, replies) = (Channel::with_mode(mode), Channel::new());
    let sum = thread::scope(|s| -> Result<u64, Box<dyn Error>> {
        for _ in 0..4 {
            s.spawn(|| {
                // `recv` fails once the channel is closed and drained.
                while let Ok(n) = requests_ch.recv() {
                    if replies.send(n * 2).is_err() {
                        return;
                    }
                }
            });
        }
        let served = (1..=requests).try_fold(0, |sum, n| -> Result<u64, Box<dyn Error>> {
            requests_ch.send(n)?;
            Ok(sum + replies.recv()?)
        });
        // On success and on error alike: the workers see `Closed` and return.
        requests_ch.close();
        served
    })?;
    if sum != requests * (requests + 1) {
        return Err(format!("{mode:?}: replies summed to {sum}").into());
    }
    let st = requests_ch.stats();
    println!(
        "channel {:<10} {} requests, 4 workers: {:>5} wakeups, {:>5} wasted",
        format!("{mode:?}:"),
        st.received,
        st.wakeups,
        st.wasted_wakeups
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    if !cfg!(feature = "stats") {
        println!("(run with `--features stats` for the wakeup counters; they read 0 here)");
    }
    semaphore()?;
    channel(WakeMode::WakeAll, 2_000)?;
    channel(WakeMode::Exclusive, 2_000)?;
    Ok(())
}
