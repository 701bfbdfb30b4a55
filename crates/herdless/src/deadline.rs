//! Timeouts as absolute deadlines.
//!
//! Every timed operation in herdless takes an `Option<Duration>` and turns it
//! into a [`Deadline`] once, at entry, so that spurious wakeups and retries do
//! not stretch the total wait. `None` and durations too large to add to the
//! clock (`Duration::MAX`) mean "no deadline": they wait forever rather than
//! panic on overflow. A zero duration is a deadline that has already passed:
//! the operation checks its condition once and does not sleep.
//!
//! Under loom there is no clock: a finite deadline always reports "passed".
//! Waiters sleep once before they ask (and a zero timeout is recognised from
//! the `Duration` itself), so loom places the timeout anywhere after the
//! waiter has queued itself.

use std::time::{Duration, Instant};

/// When a timed wait gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// Wait until woken.
    Never,
    /// Give up at this instant.
    At(Instant),
}

impl Deadline {
    /// The deadline `timeout` from now; `None` or an unrepresentable instant
    /// (e.g. `Duration::MAX`) is [`Deadline::Never`].
    pub(crate) fn after(timeout: Option<Duration>) -> Self {
        match timeout.and_then(|t| Instant::now().checked_add(t)) {
            Some(at) => Deadline::At(at),
            None => Deadline::Never,
        }
    }

    /// `true` for [`Deadline::Never`].
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn is_never(self) -> bool {
        matches!(self, Deadline::Never)
    }

    /// Time left, `None` if there is no deadline.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn remaining(self) -> Option<Duration> {
        match self {
            Deadline::Never => None,
            Deadline::At(at) => Some(at.saturating_duration_since(Instant::now())),
        }
    }

    /// Whether a waiter with this deadline must stop waiting now.
    pub(crate) fn has_passed(self) -> bool {
        match self {
            Deadline::Never => false,
            #[cfg(loom)]
            Deadline::At(_) => true,
            #[cfg(not(loom))]
            Deadline::At(at) => Instant::now() >= at,
        }
    }
}
