//! One watched source in one poller (kernel: `struct epitem`).

use std::ptr;
use std::ptr::NonNull;

use super::interest::{Readiness, Trigger};
use crate::sync::{Arc, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering, UnsafeCell};
use crate::wait_queue::{Latch, WaitQueue};

/// The link of the intrusive singly-linked lists the ready-list variants
/// use. It is the first field of [`Item`] (`repr(C)`), so a `*mut Link`
/// that is not a list's stub is the `*mut Item` it was made from.
#[repr(C)]
pub(crate) struct Link {
    pub(crate) next: AtomicPtr<Link>,
}

impl Link {
    pub(crate) fn new() -> Self {
        Link {
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

/// `config` bits: the interest in the low bits (`Readiness`), the trigger
/// above, and `DISABLED`.
const EDGE: u32 = 1 << 8;
const ONESHOT: u32 = 1 << 9;
/// Not reported any more: a one-shot item that fired, or a deleted one.
const DISABLED: u32 = 1 << 10;

/// What a callback needs to queue the source and a harvest to report it.
///
/// Who touches what:
/// - `link`: the ready-list variant that holds the item (see each one); an
///   item is in at most one list (ready, overflow, or a harvester's private
///   list) at a time, which `queued` guarantees.
/// - `queued`: `true` from the moment a callback (or a harvest re-queueing
///   a level-triggered item) claims the item until the harvest that takes
///   it clears it, just before reading the source. Only the thread whose
///   swap turned it from `false` to `true` puts the item in a list.
/// - `config`, `token`: written by `add`/`modify`/`delete` under the
///   poller's scan lock, which every harvest holds while it reads them.
///   `DISABLED` is also set by a harvest that reports a one-shot item, under
///   the same lock.
/// - `source`: read and taken (by `retire`) only under the scan lock. A
///   deleted item may stay on the ready list until the next harvest, but
///   the source it watched is released at once.
/// - `latch` (`LockFree` pollers): immutable. The entry on the source's
///   read queue latches while the item is `queued` (a wake then skips it,
///   and skips the queue's lock if nobody else is there), and `unqueue`
///   re-arms it *before* the source is read. See "Latched callback
///   entries" in the `wait_queue` docs for the ordering argument.
#[repr(C)]
pub(crate) struct Item {
    pub(crate) link: Link,
    queued: AtomicBool,
    config: AtomicU32,
    token: AtomicU64,
    source: UnsafeCell<Option<SourceFn>>,
    latch: Option<ItemLatch>,
}

/// Where an item's latched entry lives: the source's read queue and the
/// latch it shares with the entry.
pub(crate) struct ItemLatch {
    /// Points into the watched source, which `source` keeps alive: valid
    /// while the item is not retired (checked under the scan lock).
    queue: NonNull<WaitQueue>,
    latch: Arc<Latch>,
}

/// Reads the watched source's readiness (and keeps the source alive).
pub(crate) type SourceFn = Box<dyn Fn() -> Readiness + Send + Sync>;

// SAFETY: `source` (the one non-`Sync` field) is only accessed under the
// poller's scan lock (see the struct docs); the closure it holds is
// `Send + Sync`. `latch.queue` is a shared reference to a `WaitQueue`
// (`Sync`) used under the same rule. Every other field is atomic.
unsafe impl Sync for Item {}
// SAFETY: as above.
unsafe impl Send for Item {}

/// An item's settings as one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) interest: Readiness,
    pub(crate) trigger: Trigger,
    pub(crate) disabled: bool,
}

impl Config {
    fn encode(self) -> u32 {
        let mut bits = self.interest.bits();
        bits |= match self.trigger {
            Trigger::Level => 0,
            Trigger::Edge => EDGE,
            Trigger::OneShot => ONESHOT,
        };
        if self.disabled {
            bits |= DISABLED;
        }
        bits
    }

    fn decode(bits: u32) -> Config {
        Config {
            interest: Readiness::from_bits_truncate(bits),
            trigger: if bits & EDGE != 0 {
                Trigger::Edge
            } else if bits & ONESHOT != 0 {
                Trigger::OneShot
            } else {
                Trigger::Level
            },
            disabled: bits & DISABLED != 0,
        }
    }
}

impl Item {
    pub(crate) fn new(token: u64, interest: Readiness, trigger: Trigger, source: SourceFn) -> Self {
        let config = Config {
            interest,
            trigger,
            disabled: false,
        };
        Item {
            link: Link::new(),
            queued: AtomicBool::new(false),
            config: AtomicU32::new(config.encode()),
            token: AtomicU64::new(token),
            source: UnsafeCell::new(Some(source)),
            latch: None,
        }
    }

    /// The item with its read-queue entry latched (registered with
    /// `WaitQueue::register_owned_latched` on `queue` with `latch`).
    /// `queue` must live inside the source this item's `SourceFn` keeps
    /// alive (or outlive it).
    pub(crate) fn with_latch(self, queue: &WaitQueue, latch: Arc<Latch>) -> Self {
        Item {
            latch: Some(ItemLatch {
                queue: NonNull::from(queue),
                latch,
            }),
            ..self
        }
    }

    /// Whether the item is queued (the latched entry's `busy` predicate:
    /// called by a wake under the source's queue lock). Relaxed: the queue
    /// lock orders it against `unqueue`'s re-arm, which takes that lock
    /// after clearing the flag (`wait_queue` docs).
    pub(crate) fn is_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed)
    }

    /// Claims the item for queueing: `true` if it was not queued, and the
    /// caller must now put it in a list.
    ///
    /// AcqRel, paired with the swap in [`Item::unqueue`]: every claim and
    /// every unqueue is a read-modify-write of `queued`, so they form one
    /// release sequence. An unqueue that reads `true` from a claim (or from
    /// a later failed claim, a swap too) synchronizes with every claim
    /// before it: the source changes the callbacks' threads made before
    /// claiming are visible to the source read that follows the unqueue.
    /// A claim that reads `false` synchronizes with the unqueue it read.
    pub(crate) fn claim(&self) -> bool {
        !self.queued.swap(true, Ordering::AcqRel)
    }

    /// The harvest that took the item out of the lists gives up its claim,
    /// *before* reading the source (AcqRel: see [`Item::claim`]). A callback
    /// whose claim fails found the item still queued: its event happened
    /// before this swap (the claim precedes it in `queued`'s modification
    /// order and synchronizes with it), so the source read that follows
    /// sees it. A callback that comes later claims the item again and
    /// queues it: no event falls between the two.
    ///
    /// Then it re-arms the latched entry, if any, still before the source
    /// is read (so a wake that skipped the entry, lock-free, is seen by
    /// that read: fence (R) in `WaitQueue::rearm`). Not for a retired item:
    /// its entry is gone, and its source (and queue) may be.
    pub(crate) fn unqueue(&self) {
        let was = self.queued.swap(false, Ordering::AcqRel);
        debug_assert!(was, "only a queued item is harvested");
        if let Some(latch) = &self.latch {
            // SAFETY: under the scan lock, the only place `source` is touched.
            let held = self.source.with(|source| unsafe { (*source).is_some() });
            if held {
                // SAFETY: not retired, so the source that holds the queue is
                // alive (our `SourceFn` holds it) and cannot be released
                // while we hold the scan lock (`retire` takes it).
                unsafe { latch.queue.as_ref() }.rearm(&latch.latch);
            }
        }
    }

    /// The settings (read under the scan lock; Relaxed, the lock orders it).
    pub(crate) fn config(&self) -> Config {
        Config::decode(self.config.load(Ordering::Relaxed))
    }

    /// Replaces the settings and token (under the scan lock).
    pub(crate) fn set(&self, token: u64, interest: Readiness, trigger: Trigger) {
        let config = Config {
            interest,
            trigger,
            disabled: false,
        };
        self.token.store(token, Ordering::Relaxed);
        self.config.store(config.encode(), Ordering::Relaxed);
    }

    /// Stops reporting the item (under the scan lock).
    pub(crate) fn disable(&self) {
        self.config.fetch_or(DISABLED, Ordering::Relaxed);
    }

    /// Disables the item for good and releases its source (under the scan
    /// lock; the caller is `delete` or the poller's drop). Returns the
    /// source so that the caller can drop it after unlocking.
    pub(crate) fn retire(&self) -> Option<SourceFn> {
        self.disable();
        // SAFETY: under the scan lock, the only place `source` is touched.
        self.source.with_mut(|source| unsafe { (*source).take() })
    }

    /// The token (under the scan lock).
    pub(crate) fn token(&self) -> u64 {
        self.token.load(Ordering::Relaxed)
    }

    /// The source's readiness now (under the scan lock); empty once
    /// retired.
    pub(crate) fn poll_source(&self) -> Readiness {
        // SAFETY: under the scan lock, the only place `source` is touched.
        self.source.with(|source| match unsafe { &*source } {
            Some(source) => source(),
            None => Readiness::EMPTY,
        })
    }
}
