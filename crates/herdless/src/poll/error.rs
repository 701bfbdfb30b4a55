//! Typed errors of the `poll` module.

use thiserror::Error;

/// Why an [`EventPoll`](super::EventPoll) operation was refused. Nothing
/// changed when one of these is returned.
///
/// ```
/// use std::sync::Arc;
/// use herdless::poll::{EventPoll, PollError};
///
/// let poller = Arc::new(EventPoll::new());
/// let to_itself = poller.add(poller.clone(), 0, Default::default(), Default::default());
/// assert_eq!(to_itself, Err(PollError::Loop));
/// assert_eq!(PollError::ZeroMax.to_string(), "max must be at least 1");
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum PollError {
    /// [`add`](super::EventPoll::add) of a source that is already in this
    /// poller's interest list (`EEXIST`).
    #[error("the source is already registered with this poller")]
    AlreadyRegistered,
    /// [`modify`](super::EventPoll::modify) or
    /// [`delete`](super::EventPoll::delete) of a source this poller does not
    /// watch (`ENOENT`).
    #[error("the source is not registered with this poller")]
    NotRegistered,
    /// [`wait`](super::EventPoll::wait) with `max == 0` (`EINVAL`).
    #[error("max must be at least 1")]
    ZeroMax,
    /// Adding a poller to itself, or a poller that (through its own
    /// interest list, at any depth) already watches this one (`ELOOP`).
    #[error("adding this source would make a poller watch itself")]
    Loop,
    /// The nesting of pollers inside pollers would exceed
    /// [`MAX_NESTING`](super::MAX_NESTING) levels (`ELOOP` in epoll too).
    #[error("pollers would be nested more than {limit} deep")]
    TooDeep {
        /// The limit, [`MAX_NESTING`](super::MAX_NESTING).
        limit: usize,
    },
}

/// Why an [`EventFd`](super::EventFd) read or write did not complete (see
/// [`EventFd`](super::EventFd) for an example).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum EventFdError {
    /// A non-blocking read found the counter at zero (`EAGAIN`).
    #[error("the counter is zero")]
    WouldBlock,
    /// A non-blocking write would take the counter past
    /// [`EventFd::MAX`](super::EventFd::MAX); the counter is unchanged
    /// (`EAGAIN` on write: never wrapped).
    #[error("the write would overflow the counter")]
    Overflow,
    /// A write of `u64::MAX`, which no counter can ever hold (`EINVAL`).
    #[error("u64::MAX cannot be added to an eventfd counter")]
    InvalidValue,
    /// A timed read or write gave up.
    #[error("the eventfd operation timed out")]
    TimedOut,
}
