//! [`EventPoll`]: the interest list and the public face of a poller
//! (kernel: `epoll_create`, `epoll_ctl`, `epoll_wait`).

use std::any::Any;
use std::collections::HashMap;
use std::time::Duration;

use super::core::Core;
use super::error::PollError;
use super::interest::{Event, Readiness, Trigger};
use super::item::Item;
use super::nest;
use super::pollable::Pollable;
use super::ready_list::ReadyListKind;
use super::watch::{key, read_queue, register, register_latched, write_queue, Watch};
use crate::lock::SpinParkLock;
use crate::sync::{fence, Arc, Ordering};
use crate::wait_queue::{Attempt, Latch, WaitQueue, WaitQueueStats};

/// Event counts of a poller (all zero without the `stats` feature).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use herdless::poll::{EventFd, EventPoll, EventPollStats, Readiness, Trigger};
///
/// let poller = EventPoll::new();
/// let efd = Arc::new(EventFd::new());
/// poller.add(efd.clone(), 0, Readiness::READABLE, Trigger::Edge).unwrap();
/// efd.write(1).unwrap();
/// let mut events = Vec::new();
/// poller.wait(&mut events, 1, Duration::MAX).unwrap();
/// let stats = poller.stats();
/// if herdless::stats::ENABLED {
///     assert_eq!((stats.callbacks, stats.events), (1, 1));
/// } else {
///     assert_eq!(stats, EventPollStats::default());
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventPollStats {
    /// Callbacks run by watched sources (kernel: `ep_poll_callback` calls).
    pub callbacks: u64,
    /// Callbacks that queued their item (the others found it queued).
    pub queued: u64,
    /// Items queued on the overflow list during a harvest.
    pub overflow_appends: u64,
    /// Ready-list lock acquisitions that found the lock held (callback or
    /// harvester side; see [`ReadyListKind`]); 0 for `LockFree`.
    pub contended_list_lock: u64,
    /// Harvests (looks at the ready list by `wait`).
    pub harvests: u64,
    /// Events reported by `wait`.
    pub events: u64,
    /// Harvests that left events and woke the next waiter.
    pub cascades: u64,
    /// The waiters' queue: wakeups, wasted wakeups, passed-on wakeups and
    /// its own lock contention.
    pub waiters: WaitQueueStats,
}

/// An epoll-like event multiplexer (seed 003): watch many [`Pollable`]
/// sources, wait for any of them to be ready.
///
/// See the [module docs](super) for the contract.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use herdless::poll::{EventFd, EventPoll, Readiness, Trigger};
///
/// let poller = EventPoll::new();
/// let efd = Arc::new(EventFd::new());
/// poller.add(efd.clone(), 7, Readiness::READABLE, Trigger::Edge).unwrap();
/// efd.write(1).unwrap();
/// let mut events = Vec::new();
/// assert_eq!(poller.wait(&mut events, 8, Duration::MAX).unwrap(), 1);
/// assert_eq!(events[0].token, 7);
/// assert_eq!(efd.read(), 1);
/// ```
pub struct EventPoll {
    core: Arc<Core>,
    /// Source address -> watch. The sources are kept alive by their
    /// registrations, so an address cannot be reused while it is a key.
    interest: SpinParkLock<HashMap<usize, Watch>>,
    id: u64,
}

impl Default for EventPoll {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for EventPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventPoll")
            .field("kind", &self.kind())
            .field("watched", &self.len())
            .finish_non_exhaustive()
    }
}

impl EventPoll {
    /// A poller with the default ready list ([`ReadyListKind::LockFree`]);
    /// see [`EventPoll`] for an example.
    pub fn new() -> Self {
        Self::with_kind(ReadyListKind::default())
    }

    /// A poller with the given ready-list variant (the lab compares seed
    /// 003's before and after).
    ///
    /// ```
    /// use herdless::poll::EventPoll;
    /// use herdless::variants::ReadyListKind;
    ///
    /// let seed = EventPoll::with_kind(ReadyListKind::RwLockSwap);
    /// assert_eq!(seed.kind(), ReadyListKind::RwLockSwap);
    /// assert_eq!(EventPoll::new().kind(), ReadyListKind::LockFree);
    /// ```
    pub fn with_kind(kind: ReadyListKind) -> Self {
        EventPoll {
            core: Arc::new(Core::new(kind)),
            interest: SpinParkLock::new(HashMap::new()),
            id: nest::next_id(),
        }
    }

    /// The ready-list variant chosen at construction.
    pub fn kind(&self) -> ReadyListKind {
        self.core.ready.kind()
    }

    /// Starts watching `source`: events matching `interest` (plus
    /// [`Readiness::HUP`] and [`Readiness::ERR`]) are reported with `token`
    /// according to `trigger`. A source already ready is reported by the
    /// next `wait`.
    ///
    /// The poller keeps `source` alive until [`delete`](Self::delete) or
    /// until the poller is dropped.
    ///
    /// # Errors
    /// Nothing changes when `add` fails: [`PollError::AlreadyRegistered`]
    /// when `source` is already watched; for a source that is a poller,
    /// [`PollError::Loop`] (this poller, or one watching it) and
    /// [`PollError::TooDeep`] (more than [`MAX_NESTING`](super::MAX_NESTING)
    /// levels).
    ///
    /// # Examples
    /// A [`Channel`](crate::Channel) and a poller watched by another poller:
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use herdless::poll::{EventPoll, PollError, Readiness, Trigger};
    /// use herdless::Channel;
    ///
    /// let (outer, inner) = (Arc::new(EventPoll::new()), Arc::new(EventPoll::new()));
    /// let jobs = Arc::new(Channel::new());
    /// inner.add(jobs.clone(), 1, Readiness::READABLE, Trigger::Level).unwrap();
    /// outer.add(inner.clone(), 2, Readiness::READABLE, Trigger::Level).unwrap();
    /// let again = inner.add(jobs.clone(), 1, Readiness::READABLE, Trigger::Level);
    /// assert_eq!(again, Err(PollError::AlreadyRegistered));
    /// let circle = inner.add(outer.clone(), 3, Readiness::READABLE, Trigger::Level);
    /// assert_eq!(circle, Err(PollError::Loop));
    ///
    /// jobs.send("job").unwrap();
    /// let mut events = Vec::new();
    /// assert_eq!(outer.wait(&mut events, 4, Duration::MAX), Ok(1));
    /// assert_eq!(events[0].token, 2); // the inner poller has events
    /// ```
    pub fn add<S: Pollable + ?Sized + 'static>(
        &self,
        source: Arc<S>,
        token: u64,
        interest: Readiness,
        trigger: Trigger,
    ) -> Result<(), PollError> {
        let key = key(&*source);
        let mut watches = self.interest.lock();
        if watches.contains_key(&key) {
            return Err(PollError::AlreadyRegistered);
        }
        let nested = match source.as_event_poll() {
            Some(child) => {
                // Our entry on the child's `poll_wait` (registered below,
                // before we read its readiness) is all the child's
                // callbacks need to wake us (core.rs, "The poller's own
                // queue").
                nest::link(self.id, child.id)?;
                Some((self.id, child.id))
            }
            None => None,
        };
        let readable = source.clone();
        let item = Item::new(
            token,
            interest,
            trigger,
            Box::new(move || readable.readiness()),
        );
        // `LockFree` (beyond the seed) latches the read entry while the item
        // is queued, the kernel's "already on the ready list: exit soon"
        // made lock-free; the seed's variants keep `ep_poll_callback`'s
        // shape (a call per event, the check under the list lock).
        let latch = (self.kind() == ReadyListKind::LockFree).then(|| Arc::new(Latch::new()));
        let item = Arc::new(match &latch {
            Some(latch) => item.with_latch(source.wait_queue(), latch.clone()),
            None => item,
        });
        let two_queues = !std::ptr::eq(source.wait_queue(), source.write_wait_queue());
        let read = match latch {
            Some(latch) => register_latched(&source, &self.core, &item, latch),
            None => register(&source, &self.core, &item, read_queue::<S>),
        };
        let register_write = two_queues.then(|| {
            let (source, core, item) = (source.clone(), self.core.clone(), item.clone());
            Box::new(move || register(&source, &core, &item, write_queue::<S>))
                as Box<dyn Fn() -> Box<dyn Any + Send + Sync> + Send + Sync>
        });
        let write = match &register_write {
            Some(register) if interest.contains(Readiness::WRITABLE) => Some(register()),
            _ => None,
        };
        watches.insert(
            key,
            Watch {
                item: item.clone(),
                _read: read,
                write,
                register_write,
                nested,
            },
        );
        // Registered first, looked second: an event before the entry was
        // queued is seen here, one after it calls the callback.
        if !interest.reported_of(source.readiness()).is_empty() {
            self.core.queue(&item);
        }
        Ok(())
    }

    /// Changes the token, interest and trigger of a watched source, and
    /// re-arms a [`Trigger::OneShot`] one. If the source is ready for the
    /// new interest, the next `wait` reports it (epoll's `EPOLL_CTL_MOD`).
    ///
    /// # Errors
    /// [`PollError::NotRegistered`] when `source` is not watched by this
    /// poller.
    ///
    /// # Examples
    /// A one-shot source is reported once, then again only once re-armed:
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use herdless::poll::{EventFd, EventPoll, Readiness, Trigger};
    ///
    /// let poller = EventPoll::new();
    /// let efd = Arc::new(EventFd::new());
    /// poller.add(efd.clone(), 1, Readiness::READABLE, Trigger::OneShot).unwrap();
    /// efd.write(1).unwrap();
    /// let mut events = Vec::new();
    /// assert_eq!(poller.wait(&mut events, 4, Duration::ZERO), Ok(1));
    /// assert_eq!(poller.wait(&mut events, 4, Duration::ZERO), Ok(0)); // disabled
    /// poller.modify(&*efd, 9, Readiness::READABLE, Trigger::OneShot).unwrap();
    /// assert_eq!(poller.wait(&mut events, 4, Duration::ZERO), Ok(1));
    /// assert_eq!(events[0].token, 9);
    /// ```
    pub fn modify<S: Pollable + ?Sized>(
        &self,
        source: &S,
        token: u64,
        interest: Readiness,
        trigger: Trigger,
    ) -> Result<(), PollError> {
        let mut watches = self.interest.lock();
        let watch = watches
            .get_mut(&key(source))
            .ok_or(PollError::NotRegistered)?;
        if let Some(register) = &watch.register_write {
            match (
                interest.contains(Readiness::WRITABLE),
                watch.write.is_some(),
            ) {
                (true, false) => watch.write = Some(register()),
                (false, true) => watch.write = None,
                _ => {}
            }
        }
        {
            // Serialized with harvests (kernel: `ep->mtx`), which read the
            // settings under this lock.
            let _scan = self.core.scan.lock();
            watch.item.set(token, interest, trigger);
        }
        if !interest.reported_of(source.readiness()).is_empty() {
            self.core.queue(&watch.item);
        }
        Ok(())
    }

    /// Stops watching `source`: removes its entries from the source's
    /// queues and releases it. An event already queued for it is not
    /// reported.
    ///
    /// # Errors
    /// [`PollError::NotRegistered`] when `source` is not watched by this
    /// poller.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use herdless::poll::{EventFd, EventPoll, PollError, Readiness, Trigger};
    ///
    /// let poller = EventPoll::new();
    /// let efd = Arc::new(EventFd::new());
    /// poller.add(efd.clone(), 1, Readiness::READABLE, Trigger::Level).unwrap();
    /// assert_eq!(poller.len(), 1);
    /// poller.delete(&*efd).unwrap();
    /// assert!(poller.is_empty());
    /// assert_eq!(poller.delete(&*efd), Err(PollError::NotRegistered));
    /// ```
    pub fn delete<S: Pollable + ?Sized>(&self, source: &S) -> Result<(), PollError> {
        let watch = self
            .interest
            .lock()
            .remove(&key(source))
            .ok_or(PollError::NotRegistered)?;
        let source = {
            let _scan = self.core.scan.lock();
            watch.item.retire()
        };
        // Outside the scan lock: dropping the last reference to a source
        // may drop a poller, which takes its own locks.
        drop(source);
        drop(watch);
        Ok(())
    }

    /// Waits until at least one watched source is ready or `timeout`
    /// passes; fills `events` (cleared first) with at most `max` events and
    /// returns how many: 0 means the timeout passed.
    ///
    /// `Duration::ZERO` looks once and never sleeps; `Duration::MAX` waits
    /// forever. Waiters are exclusive: an event wakes one of them, and a
    /// waiter that leaves events behind wakes the next. A waiter chosen by
    /// a wake whose timeout fires harvests once more before returning 0.
    ///
    /// # Errors
    /// [`PollError::ZeroMax`] when `max == 0` (nothing is harvested).
    ///
    /// # Examples
    /// A consumer thread waits for events from producers:
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use herdless::poll::{EventFd, EventPoll, PollError, Readiness, Trigger};
    ///
    /// let poller = Arc::new(EventPoll::new());
    /// let efds: Vec<_> = (0..2).map(|_| Arc::new(EventFd::new())).collect();
    /// for (token, efd) in efds.iter().enumerate() {
    ///     poller.add(efd.clone(), token as u64, Readiness::READABLE, Trigger::Edge).unwrap();
    /// }
    /// let mut events = Vec::new();
    /// assert_eq!(poller.wait(&mut events, 0, Duration::ZERO), Err(PollError::ZeroMax));
    /// assert_eq!(poller.wait(&mut events, 8, Duration::ZERO), Ok(0)); // nothing yet
    ///
    /// let producer = {
    ///     let efd = efds[1].clone();
    ///     std::thread::spawn(move || efd.write(1).unwrap())
    /// };
    /// assert_eq!(poller.wait(&mut events, 8, Duration::MAX), Ok(1));
    /// assert_eq!(events[0].token, 1);
    /// producer.join().unwrap();
    /// ```
    pub fn wait(
        &self,
        events: &mut Vec<Event>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, PollError> {
        if max == 0 {
            return Err(PollError::ZeroMax);
        }
        events.clear();
        let reported = self.core.harvest(events, max);
        if reported > 0 || timeout.is_zero() {
            return Ok(reported);
        }
        let _sleeper = Sleeper::announce(&self.core);
        let result = self.core.waiters.wait_event_exclusive_timeout(
            || match self.core.harvest(events, max) {
                0 => Attempt::Wait,
                n => Attempt::Done(n),
            },
            timeout,
        );
        Ok(result.unwrap_or(0))
    }

    /// [`wait`](Self::wait) for a task: waits until at least one watched
    /// source is ready, fills `events` (cleared first) with at most `max`
    /// events and returns how many (at least 1).
    ///
    /// The task waits as an exclusive waiter in the same queue as the
    /// threads in [`wait`](Self::wait): an event wakes one of them, thread
    /// or task. There is no timeout: drop the future (a runtime's timeout,
    /// `select!`) to stop waiting; a future dropped after an event chose it
    /// passes the wakeup on to the next waiter.
    ///
    /// # Errors
    /// [`PollError::ZeroMax`] if `max == 0`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use herdless::poll::{EventFd, EventPoll, Readiness, Trigger};
    ///
    /// let poller = EventPoll::new();
    /// let efd = Arc::new(EventFd::new());
    /// poller.add(efd.clone(), 7, Readiness::READABLE, Trigger::Level).unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| efd.write(1).unwrap());
    ///     let mut events = Vec::new();
    ///     let n = futures::executor::block_on(poller.wait_async(&mut events, 8)).unwrap();
    ///     assert_eq!((n, events[0].token), (1, 7));
    /// });
    /// ```
    pub async fn wait_async(
        &self,
        events: &mut Vec<Event>,
        max: usize,
    ) -> Result<usize, PollError> {
        if max == 0 {
            return Err(PollError::ZeroMax);
        }
        events.clear();
        let reported = self.core.harvest(events, max);
        if reported > 0 {
            return Ok(reported);
        }
        // Announced for as long as the future waits (dropped with it).
        let _sleeper = Sleeper::announce(&self.core);
        let reported = self
            .core
            .waiters
            .wait_event_exclusive_async(|| match self.core.harvest(events, max) {
                0 => Attempt::Wait,
                n => Attempt::Done(n),
            })
            .await;
        Ok(reported)
    }

    /// Number of watched sources (see [`delete`](Self::delete) for an
    /// example).
    pub fn len(&self) -> usize {
        self.interest.lock().len()
    }

    /// Whether no source is watched.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Threads blocked in [`wait`](Self::wait) (a snapshot, for tests and
    /// diagnostics).
    pub fn waiting(&self) -> usize {
        self.core.waiters.len()
    }

    /// Event counts since construction (zeros without the `stats` feature;
    /// see [`EventPollStats`] for an example).
    pub fn stats(&self) -> EventPollStats {
        let c = &self.core.counters;
        let list = self.core.ready.counts();
        EventPollStats {
            callbacks: c.callbacks.sum(),
            queued: c.queued.sum(),
            overflow_appends: list.overflow_appends,
            contended_list_lock: list.contended,
            harvests: c.harvests.sum(),
            events: c.events.sum(),
            cascades: c.cascades.sum(),
            waiters: self.core.waiters.stats(),
        }
    }

    /// Test hook: the next `times` waiters with a finite timeout that a
    /// wake chooses give up at once, as if their timeout fired right after
    /// the wake picked them (selftest epoll61's window, made as wide as the
    /// whole wait); they return 0 and pass the wakeup on. Not part of the
    /// API.
    #[doc(hidden)]
    pub fn debug_give_up_when_chosen(&self, times: usize) {
        self.core.waiters.debug_give_up_when_chosen(times);
    }
}

/// A thread counted in `sleepers` for the duration of a blocking wait.
struct Sleeper<'a>(&'a Core);

impl<'a> Sleeper<'a> {
    fn announce(core: &'a Core) -> Self {
        // (F2) pairs with (F1) in `Core::queue` (core.rs module docs).
        core.sleepers.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        Sleeper(core)
    }
}

impl Drop for Sleeper<'_> {
    fn drop(&mut self) {
        // Relaxed: a late decrement only costs a callback a spare wake.
        self.0.sleepers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for EventPoll {
    fn drop(&mut self) {
        // Remove every entry from the sources' queues (and release the
        // sources) before the core can go: a callback already collected by
        // a wake holds the core alive until it returns.
        let watches = std::mem::take(&mut *self.interest.lock());
        let sources: Vec<_> = {
            let _scan = self.core.scan.lock();
            watches.values().map(|w| w.item.retire()).collect()
        };
        drop(sources);
        drop(watches);
    }
}

/// A poller is itself a source: readable while a `wait` would report
/// something. Watching it from another poller nests them; a thread can also
/// sleep on [`wait_queue`](Pollable::wait_queue) until it is readable
/// (`poll(epfd, POLLIN, -1)`), without taking its events:
///
/// ```
/// use std::sync::Arc;
/// use herdless::poll::{EventFd, EventPoll, Pollable, Readiness, Trigger};
///
/// let poller = Arc::new(EventPoll::new());
/// let efd = Arc::new(EventFd::new());
/// poller.add(efd.clone(), 1, Readiness::READABLE, Trigger::Edge).unwrap();
/// let writer = std::thread::spawn(move || efd.write(1).unwrap());
/// poller
///     .wait_queue()
///     .wait_event(|| poller.readiness().contains(Readiness::READABLE));
/// writer.join().unwrap();
/// ```
impl Pollable for EventPoll {
    fn readiness(&self) -> Readiness {
        if self.core.has_events() {
            Readiness::READABLE
        } else {
            Readiness::EMPTY
        }
    }

    fn wait_queue(&self) -> &WaitQueue {
        &self.core.poll_wait
    }

    fn as_event_poll(&self) -> Option<&EventPoll> {
        Some(self)
    }
}
