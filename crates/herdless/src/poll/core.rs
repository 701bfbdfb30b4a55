//! The shared half of an [`EventPoll`](super::EventPoll): ready list,
//! waiters, and the callback every watched source calls (kernel:
//! `struct eventpoll` and `ep_poll_callback`).
//!
//! The interest list lives in `EventPoll` itself, not here: callbacks hold
//! an `Arc<Core>`, and the interest list holds the registrations that hold
//! the callbacks, so keeping it out of the core is what makes "the poller
//! is dropped" free everything (no reference cycle), whatever order sources
//! and pollers are dropped in.
//!
//! # Why no wakeup is lost (the sleeper count)
//! A callback does not take the waiters' queue lock unless somebody may be
//! sleeping (the kernel's `waitqueue_active` check). That is the
//! store-buffering pattern, with a full fence on both sides:
//! ```text
//!   waiter (wait)                          callback
//!   sleepers += 1                          append item        (list write)
//!   fence(SeqCst)              (F2)        fence(SeqCst)      (F1)
//!   harvest: look at the list              if sleepers > 0: wake_up(1)
//!   (queue, look again, sleep)
//! ```
//! If the callback reads `sleepers == 0`, (F1) precedes (F2) in the
//! single order of SeqCst fences, so the waiter's look (after F2) sees the
//! append (before F1). Otherwise the callback wakes: the wait queue's own
//! rule covers a waiter that has not queued yet (its look after queueing
//! sees the item). An item claimed but not yet appended (a `LockFree` cut,
//! or a callback between claim and append) is appended by the same
//! callback before its fence, so its wake check comes after. The same pair
//! guards `watchers` (outer pollers on `poll_wait`): (F3) in
//! `EventPoll::add`.
//!
//! # Harvest (kernel: `ep_send_events`, `ep_start_scan`, `ep_done_scan`)
//! Under the scan lock (kernel: `ep->mtx`), one harvester at a time:
//! splice the list into the private `front` list, then for each item up to
//! `max`: unqueue it, read the source, report it if ready; re-queue it if
//! level-triggered; disable it if one-shot. Items left over (max reached)
//! stay at the head of `front` for the next harvest. If anything remains
//! queued, wake the next waiter (the cascade the kernel once forgot).

use std::collections::VecDeque;

use super::interest::{Event, Trigger};
use super::item::Item;
use super::ready_list::{Consumer, ReadyList, ReadyListKind};
use crate::lock::SpinParkLock;
use crate::stats::{Counter, SlowCounter};
use crate::sync::{fence, AtomicUsize, Ordering};
use crate::wait_queue::WaitQueue;

/// State only the scan-lock holder touches.
pub(super) struct Scan {
    consumer: Consumer,
    /// Items taken off the list and not yet looked at: still `queued`.
    front: VecDeque<crate::sync::Arc<Item>>,
    requeue: Vec<crate::sync::Arc<Item>>,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) callbacks: Counter,
    pub(super) queued: Counter,
    pub(super) harvests: Counter,
    pub(super) events: Counter,
    pub(super) cascades: SlowCounter,
}

pub(super) struct Core {
    pub(super) ready: ReadyList,
    pub(super) scan: SpinParkLock<Scan>,
    /// Threads in `wait` (exclusive waiters).
    pub(super) waiters: WaitQueue,
    /// Threads between their announcement (F2) and their return from
    /// `wait`: an over-approximation of who may sleep on `waiters`.
    pub(super) sleepers: AtomicUsize,
    /// Outer pollers' callbacks (this poller watched by another).
    pub(super) poll_wait: WaitQueue,
    /// Outer pollers watching this one (maintained by their `add`/`delete`).
    pub(super) watchers: AtomicUsize,
    pub(super) counters: Counters,
}

impl Core {
    pub(super) fn new(kind: ReadyListKind) -> Self {
        let (ready, consumer) = ReadyList::new(kind);
        Core {
            ready,
            scan: SpinParkLock::new(Scan {
                consumer,
                front: VecDeque::new(),
                requeue: Vec::new(),
            }),
            waiters: WaitQueue::new(),
            sleepers: AtomicUsize::new(0),
            poll_wait: WaitQueue::new(),
            watchers: AtomicUsize::new(0),
            counters: Counters::default(),
        }
    }

    /// The wake function of every entry this poller hangs on a source
    /// (kernel: `ep_poll_callback`). Runs on the waker's thread, after the
    /// source's queue lock is dropped; may run once more after the watch
    /// was deleted (the item is disabled then, and the harvest drops it).
    pub(super) fn callback(&self, item: &crate::sync::Arc<Item>) {
        self.counters.callbacks.add(1);
        self.queue(item);
    }

    /// Queues `item` if it is not queued, then wakes a waiter and the
    /// outer pollers if any may be there.
    pub(super) fn queue(&self, item: &crate::sync::Arc<Item>) {
        if !self.ready.push(item) {
            // Already queued: whoever queued it does (or did) the wake
            // check after queueing, or a harvester holds it and looks at it
            // after unqueueing it (item.rs).
            return;
        }
        self.counters.queued.add(1);
        // (F1) pairs with (F2) in `EventPoll::wait` and (F3) in
        // `EventPoll::add`: see the module docs.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fences.
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            self.waiters.wake_up(1);
        }
        if self.watchers.load(Ordering::Relaxed) > 0 {
            self.poll_wait.wake_up(0);
        }
    }

    /// Reports up to `max` ready items into `events`; returns how many.
    pub(super) fn harvest(&self, events: &mut Vec<Event>, max: usize) -> usize {
        let mut scan = self.scan.lock();
        let Scan {
            consumer,
            front,
            requeue,
        } = &mut *scan;
        self.ready.start_scan(consumer, front);
        let mut reported = 0;
        while reported < max {
            let Some(item) = front.pop_front() else {
                break;
            };
            // Before the source is read: item.rs explains the pairing.
            item.unqueue();
            let config = item.config();
            if config.disabled {
                continue;
            }
            let readiness = config.interest.reported_of(item.poll_source());
            if readiness.is_empty() {
                continue;
            }
            events.push(Event {
                token: item.token(),
                readiness,
            });
            reported += 1;
            match config.trigger {
                // Still ready, probably: look again next time (kernel: the
                // item goes back on the ready list). If a callback claimed
                // it meanwhile, it is queued already.
                Trigger::Level => {
                    if item.claim() {
                        requeue.push(item);
                    }
                }
                Trigger::Edge => {}
                Trigger::OneShot => item.disable(),
            }
        }
        let remaining = self.ready.done_scan(consumer, requeue) || !front.is_empty();
        drop(scan);
        self.counters.harvests.add(1);
        self.counters.events.add(reported as u64);
        if remaining {
            // The cascade: events remain for another waiter.
            self.counters.cascades.add(1);
            self.waiters.wake_up(1);
        }
        reported
    }

    /// Whether a harvest would report something now, without consuming
    /// anything (kernel: `ep_read_events_proc` for a nested poller). Items
    /// found not ready leave the list, as a harvest would drop them.
    pub(super) fn has_events(&self) -> bool {
        let mut scan = self.scan.lock();
        let Scan {
            consumer,
            front,
            requeue,
        } = &mut *scan;
        self.ready.start_scan(consumer, front);
        let mut ready = false;
        while let Some(item) = front.pop_front() {
            item.unqueue();
            let config = item.config();
            if config.disabled || config.interest.reported_of(item.poll_source()).is_empty() {
                continue;
            }
            ready = true;
            // Put it back where it was, still queued (unless a callback
            // queued it again meanwhile: then it is on the list).
            if item.claim() {
                front.push_front(item);
            }
            break;
        }
        self.ready.done_scan(consumer, requeue);
        ready
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // No callback can run (they hold the core) and nobody harvests:
        // free the items the list still holds.
        let mut scan = self.scan.lock();
        let Scan { consumer, .. } = &mut *scan;
        self.ready.clear(consumer);
    }
}
