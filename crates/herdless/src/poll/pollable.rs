//! [`Pollable`]: what every event source implements so that an
//! [`EventPoll`] can watch it (kernel: `file_operations::poll` and the
//! `poll_table` callback that hangs an entry on the file's wait queue).

use super::interest::Readiness;
use super::EventPoll;
use crate::channel::Channel;
use crate::wait_queue::WaitQueue;

/// An event source: it reports its current readiness and wakes its
/// [`WaitQueue`] whenever that readiness may have changed.
///
/// # Contract
/// - [`readiness`](Self::readiness) is a snapshot of the state, taken under
///   whatever lock guards it; it never blocks for long and never calls back
///   into a poller.
/// - Every change that can make the source readable, hung up or in error
///   happens *before* a `wake_up` of [`wait_queue`](Self::wait_queue); every
///   change that can make it writable happens before a `wake_up` of
///   [`write_wait_queue`](Self::write_wait_queue) (the same queue unless the
///   source keeps two). Any `wake_up(n)` will do: pollers hang
///   non-exclusive callback entries there ([`WaitQueue::register_owned`]),
///   which every wake calls.
/// - A poller registers its entry first and reads `readiness` second, so an
///   event can never fall between the two (the wait queue's lost-wakeup
///   rule).
///
/// Two queues let a source keep readers and writers apart (as
/// [`EventFd`](super::EventFd) does), so that a consumer's reads do not call
/// every read-interest poller back, which is what the kernel achieves by
/// passing a key to the wake function.
///
/// # Examples
/// A source of your own: a flag that becomes readable once raised.
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use herdless::poll::{EventPoll, Pollable, Readiness, Trigger};
/// use herdless::WaitQueue;
///
/// #[derive(Default)]
/// struct Flag {
///     raised: AtomicBool,
///     queue: WaitQueue,
/// }
///
/// impl Flag {
///     fn raise(&self) {
///         self.raised.store(true, Ordering::Release); // the change first,
///         self.queue.wake_up_all(); // then the wake
///     }
/// }
///
/// impl Pollable for Flag {
///     fn readiness(&self) -> Readiness {
///         match self.raised.load(Ordering::Acquire) {
///             true => Readiness::READABLE,
///             false => Readiness::EMPTY,
///         }
///     }
///     fn wait_queue(&self) -> &WaitQueue {
///         &self.queue
///     }
/// }
///
/// let flag = Arc::new(Flag::default());
/// let poller = EventPoll::new();
/// poller.add(flag.clone(), 1, Readiness::READABLE, Trigger::Level).unwrap();
/// let mut events = Vec::new();
/// assert_eq!(poller.wait(&mut events, 4, Duration::ZERO), Ok(0));
/// flag.raise();
/// assert_eq!(poller.wait(&mut events, 4, Duration::MAX), Ok(1));
/// assert_eq!(events[0].readiness, Readiness::READABLE);
/// ```
pub trait Pollable: Send + Sync {
    /// The source's readiness now.
    fn readiness(&self) -> Readiness;

    /// The queue woken when the source may have become readable, hung up or
    /// failed.
    fn wait_queue(&self) -> &WaitQueue;

    /// The queue woken when the source may have become writable; by default
    /// [`wait_queue`](Self::wait_queue).
    fn write_wait_queue(&self) -> &WaitQueue {
        self.wait_queue()
    }

    /// `Some` if this source is itself a poller (used for loop detection and
    /// the nesting limit); `None` for every other source.
    fn as_event_poll(&self) -> Option<&EventPoll> {
        None
    }
}

/// A [`Channel`] is readable when an item is queued or it is closed (then
/// also [`Readiness::HUP`]), and writable while it is open (it is
/// unbounded). `send` and `close` wake its queue, which is all a poller
/// needs.
impl<T: Send> Pollable for Channel<T> {
    fn readiness(&self) -> Readiness {
        let closed = self.is_closed();
        let mut readiness = Readiness::EMPTY;
        if !self.is_empty() || closed {
            readiness |= Readiness::READABLE;
        }
        if closed {
            readiness |= Readiness::HUP;
        } else {
            readiness |= Readiness::WRITABLE;
        }
        readiness
    }

    fn wait_queue(&self) -> &WaitQueue {
        Channel::wait_queue(self)
    }
}
