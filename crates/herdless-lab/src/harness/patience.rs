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
        if polls % 256 == 0 && start.elapsed() > PATIENCE {
            return Err(LabError::Stuck {
                what: what(),
                after: PATIENCE,
            });
        }
        thread::yield_now();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
