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
//! callback before its fence, so its wake check comes after.
//!
//! # The poller's own queue (`poll_wait`)
//! Who waits for *this poller* to become readable sleeps on `poll_wait`
//! (what [`Pollable::wait_queue`](super::Pollable::wait_queue) returns):
//! the callback entries of outer pollers watching this one, and threads
//! polling it directly (`poll(epfd, POLLIN, -1)`: `wait_event` on the queue
//! with the poller's readiness as the condition). Every queueing wakes it,
//! as the kernel's `ep_poll_callback` wakes `ep->poll_wait` (through
//! `ep_poll_safewake`) besides `ep->wq`, and the wait queue's own lock-free
//! check decides whether anyone is there (ARCHITECTURE contract 8):
//! ```text
//!   poller of this poller                  callback
//!   enqueue: entries += 1                  append item        (list write)
//!   fence(SeqCst)              (E)         fence(SeqCst)      (F1)
//!   look: readiness() -> has_events()      wake_up: fence(SeqCst) (W)
//!     (reads the list under the scan lock)   if entries > 0: wake them
//! ```
//! (E) and (W) are the store-buffering pair of the wait queue: if the wake
//! reads no entry, (W) precedes (E) and the look sees the append (before
//! (F1), before (W)); otherwise the wake finds the entry and wakes it.
//! This wake used to be gated on a count of outer pollers only, so a thread
//! polling the poller itself was never woken (issue 12; regression tests
//! `a_thread_polling_the_poller_itself_is_woken_by_a_source_event`,
//! `threads_polling_nested_pollers_are_woken_at_every_level`; loom model
//! `callback_racing_a_thread_polling_the_poller_wakes_it`). An outer
//! poller's entry is just one more entry: its `add` registers on
//! `poll_wait` (E) before it reads this poller's readiness.
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
    /// Who waits for this poller to be readable: outer pollers' callbacks
    /// and threads polling it (module docs, "The poller's own queue").
    /// Woken after every queueing; its own entry count (fences (E)/(W))
    /// skips the lock when nobody is there.
    pub(super) poll_wait: WaitQueue,
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

    /// Queues `item` if it is not queued, then wakes a waiter if one may
    /// sleep, and whoever waits for this poller to be readable.
    pub(super) fn queue(&self, item: &crate::sync::Arc<Item>) {
        if !self.ready.push(item) {
            // Already queued: whoever queued it does (or did) both wakes
            // after queueing, or a harvester holds it and looks at it after
            // unqueueing it (item.rs).
            return;
        }
        self.counters.queued.add(1);
        // (F1) pairs with (F2) in `EventPoll::wait`: see the module docs.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fences.
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            self.waiters.wake_up(1);
        }
        // Not gated on anything of ours: every entry on `poll_wait` (an
        // outer poller's callback, a thread polling this poller) was
        // counted before its fence (E) and looks at our list after it;
        // `wake_up`'s fence (W), after our append, is the other half
        // (module docs, "The poller's own queue"). One exclusive waiter per
        // queued item, as any source wakes its queue (kernel:
        // `ep_poll_safewake` -> `wake_up_poll`).
        self.poll_wait.wake_up(1);
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
