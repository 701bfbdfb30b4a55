//! What a poller asks for and what it is told: [`Readiness`] bits, the
//! [`Trigger`] mode and the reported [`Event`] (kernel: `EPOLLIN`,
//! `EPOLLOUT`, `EPOLLHUP`, `EPOLLERR`, `EPOLLET`, `EPOLLONESHOT`,
//! `struct epoll_event`).

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

/// A set of readiness bits: what a source reports as its state, what an
/// interest asks for, and what an [`Event`] says happened.
///
/// ```
/// use herdless::poll::Readiness;
///
/// let interest = Readiness::READABLE | Readiness::WRITABLE;
/// assert!(interest.contains(Readiness::READABLE) && !interest.contains(Readiness::HUP));
/// let state = Readiness::WRITABLE | Readiness::HUP;
/// // Reported: what the interest asks for, plus HUP and ERR always.
/// assert_eq!(Readiness::READABLE.reported_of(state), Readiness::HUP);
/// assert_eq!(format!("{state:?}"), "WRITABLE | HUP");
/// assert_eq!(Readiness::from_bits_truncate(0xff), Readiness::ALL);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Readiness(u32);

impl Readiness {
    /// Nothing.
    pub const EMPTY: Readiness = Readiness(0);
    /// A read would not block (`EPOLLIN`).
    pub const READABLE: Readiness = Readiness(1);
    /// A write would not block (`EPOLLOUT`).
    pub const WRITABLE: Readiness = Readiness(1 << 1);
    /// The source is closed for good (`EPOLLHUP`); always reported, whatever
    /// the interest.
    pub const HUP: Readiness = Readiness(1 << 2);
    /// The source is in an error state (`EPOLLERR`); always reported.
    pub const ERR: Readiness = Readiness(1 << 3);
    /// Every bit a source may report.
    pub const ALL: Readiness = Readiness(0b1111);

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The readiness with these raw bits; unknown bits are dropped.
    pub const fn from_bits_truncate(bits: u32) -> Readiness {
        Readiness(bits & Self::ALL.0)
    }

    /// Whether no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every bit of `other` is set in `self`.
    pub const fn contains(self, other: Readiness) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share a bit.
    pub const fn intersects(self, other: Readiness) -> bool {
        self.0 & other.0 != 0
    }

    /// The bits of a source's state an interest in `self` reports: the
    /// interest's own bits plus [`HUP`](Self::HUP) and [`ERR`](Self::ERR),
    /// which epoll always reports.
    pub const fn reported_of(self, state: Readiness) -> Readiness {
        Readiness(state.0 & (self.0 | Self::HUP.0 | Self::ERR.0))
    }
}

impl BitOr for Readiness {
    type Output = Readiness;
    fn bitor(self, rhs: Readiness) -> Readiness {
        Readiness(self.0 | rhs.0)
    }
}

impl BitOrAssign for Readiness {
    fn bitor_assign(&mut self, rhs: Readiness) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for Readiness {
    type Output = Readiness;
    fn bitand(self, rhs: Readiness) -> Readiness {
        Readiness(self.0 & rhs.0)
    }
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Self::READABLE, "READABLE"),
            (Self::WRITABLE, "WRITABLE"),
            (Self::HUP, "HUP"),
            (Self::ERR, "ERR"),
        ];
        let mut first = true;
        for (bit, name) in names {
            if self.contains(bit) {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("EMPTY")?;
        }
        Ok(())
    }
}

/// When a registered source is reported (epoll's `EPOLLET` and
/// `EPOLLONESHOT`).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use herdless::poll::{EventFd, EventPoll, Readiness, Trigger};
///
/// let (level, edge) = (EventPoll::new(), EventPoll::new());
/// let efd = Arc::new(EventFd::new());
/// level.add(efd.clone(), 0, Readiness::READABLE, Trigger::Level).unwrap();
/// edge.add(efd.clone(), 0, Readiness::READABLE, Trigger::Edge).unwrap();
/// efd.write(1).unwrap();
/// let mut events = Vec::new();
/// for _ in 0..2 {
///     // Still readable: reported by every wait.
///     assert_eq!(level.wait(&mut events, 1, Duration::ZERO), Ok(1));
/// }
/// assert_eq!(edge.wait(&mut events, 1, Duration::ZERO), Ok(1));
/// assert_eq!(edge.wait(&mut events, 1, Duration::ZERO), Ok(0)); // no new event
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// Reported by every [`wait`](super::EventPoll::wait) while the source
    /// is ready (the default, as in epoll).
    #[default]
    Level,
    /// Reported once per wakeup of the source: after it is reported, it is
    /// reported again only when the source signals a new event.
    Edge,
    /// Reported once, then disabled until
    /// [`modify`](super::EventPoll::modify) re-arms it.
    OneShot,
}

/// One ready source, as [`wait`](super::EventPoll::wait) reports it (see
/// [`EventPoll`](super::EventPoll) for an example).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// The token given to [`add`](super::EventPoll::add) (or the last
    /// [`modify`](super::EventPoll::modify)) for this source.
    pub token: u64,
    /// What the source reported, restricted to the interest (plus
    /// [`Readiness::HUP`] and [`Readiness::ERR`]).
    pub readiness: Readiness,
}
