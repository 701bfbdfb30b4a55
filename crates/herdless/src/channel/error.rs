//! Typed errors of [`Channel`](super::Channel) operations.

use thiserror::Error;

/// [`send`](super::Channel::send) on a closed channel; the item is handed
/// back.
///
/// ```
/// let ch = herdless::Channel::new();
/// ch.close();
/// let err = ch.send(String::from("late")).unwrap_err();
/// assert_eq!(err.to_string(), "sending on a closed channel");
/// assert_eq!(err.into_inner(), "late");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendError<T>(pub T);

impl<T> SendError<T> {
    /// The item that was not sent.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendError").finish_non_exhaustive()
    }
}

impl<T> std::fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sending on a closed channel")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Why [`recv`](super::Channel::recv) returned no item.
///
/// ```
/// use herdless::channel::{Channel, RecvError};
///
/// let ch = Channel::<u8>::new();
/// ch.close();
/// assert_eq!(ch.recv(), Err(RecvError::Closed));
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum RecvError {
    /// The channel is closed and every item sent before the close has been
    /// received.
    #[error("the channel is closed and drained")]
    Closed,
}

/// Why [`try_recv`](super::Channel::try_recv) returned no item.
///
/// ```
/// use herdless::channel::{Channel, TryRecvError};
///
/// let ch = Channel::<u8>::new();
/// assert_eq!(ch.try_recv(), Err(TryRecvError::Empty));
/// ch.close();
/// assert_eq!(ch.try_recv(), Err(TryRecvError::Closed));
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum TryRecvError {
    /// No item is queued right now.
    #[error("the channel is empty")]
    Empty,
    /// The channel is closed and drained.
    #[error("the channel is closed and drained")]
    Closed,
}

/// Why [`recv_timeout`](super::Channel::recv_timeout) returned no item.
///
/// ```
/// use std::time::Duration;
/// use herdless::channel::{Channel, RecvTimeoutError};
///
/// let ch = Channel::<u8>::new();
/// assert_eq!(ch.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
/// ch.close();
/// assert_eq!(ch.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Closed));
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum RecvTimeoutError {
    /// The timeout elapsed with no item for this reader.
    #[error("timed out waiting on the channel")]
    Timeout,
    /// The channel is closed and drained.
    #[error("the channel is closed and drained")]
    Closed,
}

impl From<RecvError> for TryRecvError {
    fn from(RecvError::Closed: RecvError) -> Self {
        TryRecvError::Closed
    }
}

impl From<RecvError> for RecvTimeoutError {
    fn from(RecvError::Closed: RecvError) -> Self {
        RecvTimeoutError::Closed
    }
}
