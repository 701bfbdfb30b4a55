//! Waiting for another thread of a measurement without hanging the lab.
//!
//! Variants often have to wait for their own threads (to start, to queue, to
//! take an item) outside the timed part or between timed steps. They do it
//! here: yield until the condition holds, and give up with
//! [`LabError::Stuck`] after a patience, so a lost wakeup in the code under
//! test shows up as a failed measurement instead of a hung run.

use std::thread;
use std::time::{Duration, Instant};

use super::LabError;

/// How long a measurement may go without progress before it is stuck.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Yields until `done()` holds, or fails with `Stuck` (saying `what()`)
/// after [`PATIENCE`]. The clock is read only every 256 polls.
pub fn wait_until(
    mut done: impl FnMut() -> bool,
    what: impl Fn() -> String,
) -> Result<(), LabError> {
    let start = Instant::now();
    let mut polls: u32 = 0;
    while !done() {
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(256) && start.elapsed() > PATIENCE {
            return Err(LabError::Stuck { what: what(), after: PATIENCE });
        }
        thread::yield_now();
    }
    Ok(())
}

/// How often [`timed_interval`] looks for progress after the interval.
const PROGRESS_POLL: Duration = Duration::from_millis(1);

/// The timer of a throughput measurement: sleeps for `interval` (taking
/// no CPU from the workers), then, if `progressed()` does not hold yet
/// (nothing went through: an overloaded machine may not have run the
/// workers at all in a short interval), keeps sleeping in 1 ms steps
/// until it does or [`PATIENCE`] has passed. Returns the time it took:
/// the interval the measurement divides by, so a stretched interval
/// lowers the rate instead of failing the sample.
pub fn timed_interval(interval: Duration, mut progressed: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    thread::sleep(interval);
    while !progressed() && start.elapsed() < interval + PATIENCE {
        thread::sleep(PROGRESS_POLL);
    }
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_stretches_until_something_went_through() {
        let mut looks = 0;
        let took = timed_interval(Duration::from_millis(2), || {
            looks += 1;
            looks >= 4
        });
        // Slept the interval, then three 1 ms steps before progress.
        assert_eq!(looks, 4);
        assert!(took >= Duration::from_millis(5), "{took:?}");
        let took = timed_interval(Duration::from_millis(2), || true);
        assert!(took >= Duration::from_millis(2), "{took:?}");
    }

    #[test]
    fn returns_at_once_when_the_condition_holds() {
        let mut calls = 0;
        wait_until(
            || {
                calls += 1;
                calls >= 3
            },
            || "never".into(),
        )
        .unwrap();
        assert_eq!(calls, 3);
    }
}
