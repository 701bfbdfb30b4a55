//! A hash bucket of the futex table (kernel: `futex_hash_bucket`), and the
//! keyed cursor every walk of its list uses.

use std::ptr::NonNull;
#[cfg(not(loom))]
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::waiter::Waiter;
use crate::lock::SpinParkLock;
use crate::sync::{AtomicUsize, Ordering};
use crate::util::linked_list::LinkedList;

/// What a bucket's lock guards.
pub(super) struct Queue {
    /// The bucket's waiters, every key hashed here, in arrival order.
    pub(super) list: LinkedList<Waiter>,
    /// When an unpark of this bucket should next be fair (see
    /// [`Queue::due_for_fairness`]); `None` until the first unpark.
    #[cfg(not(loom))]
    fair_at: Option<Instant>,
    /// The last waiter that went ahead of the others
    /// ([`Queue::may_pass_head`]), and the first waiter it passed, by
    /// address: compared, never followed (0: none).
    passer: usize,
    passed: usize,
}

/// How long an unfair lock on this table may let running threads take it
/// ahead of its sleepers before one unpark is fair (parking_lot's eventual
/// fairness: 0.5 ms on average there).
#[cfg(not(loom))]
const FAIR_AFTER: Duration = Duration::from_micros(500);

impl Queue {
    fn new() -> Self {
        Queue {
            list: LinkedList::new(),
            #[cfg(not(loom))]
            fair_at: None,
            passer: 0,
            passed: 0,
        }
    }

    /// Whether `waiter`, a thread that asks to go ahead of the others
    /// ([`ParkHow::ahead`](super::ParkHow::ahead)), is queued at the head:
    /// yes, unless the bucket is empty (the tail is the head), its first
    /// waiter is a task (threads and tasks keep their arrival order: a
    /// task's wait is bounded by its own request for the lock,
    /// `mutex/lock_async.rs`), or its first waiter is the last one that
    /// went ahead, or the one that waiter passed. So a stream of such
    /// threads cannot keep one waiter from the head of the queue: each
    /// waiter is passed at most once while it is first (again only after a
    /// waiter of another key hashed to this bucket was first in between),
    /// and threads that went ahead keep their order behind the one that
    /// did. The addresses kept are compared, never followed; a stale one
    /// makes a pass less likely ([`Queue::unlink`] says how much, and the
    /// experiment that forgets them).
    pub(super) fn may_pass_head(&mut self, waiter: NonNull<Waiter>) -> bool {
        let Some(head) = self.list.front() else {
            return false;
        };
        // SAFETY: a queued record stays alive while it is in the list, and
        // we hold the bucket lock that guards the list.
        if unsafe { head.as_ref() }
            .wake_handle()
            .task_asks_handoff()
            .is_some()
        {
            return false;
        }
        let head = head.as_ptr() as usize;
        if head == self.passer || head == self.passed {
            return false;
        }
        self.passer = waiter.as_ptr() as usize;
        self.passed = head;
        true
    }

    /// Unlinks `node`. Built with `--cfg herdless_forget_passers` (an
    /// experiment, `scripts/many-cores.sh`'s `CFGS`), it also forgets `node`
    /// as the last waiter that went ahead or was passed
    /// ([`Queue::may_pass_head`]). By default the addresses stay, and a
    /// thread sleeps in the same record slot every time, so a later sleep
    /// of a thread that was passed once is taken for the one already passed
    /// while it is first: a rare thread then queues at the tail
    /// (`tests/mutex_queue_order.rs` shows both). Measured on 2 cores (stop
    /// 41, the lab's mutex table, six interleaved pairs): forgetting cost
    /// 7% of the acquisitions per second at 8 threads (1/0) and 11% at 32
    /// (medians; with `rare=0` no difference: the cost is the rare threads'
    /// extra passes), and gave the occasional locker nothing (three pairs:
    /// p99 20–26 µs against 18–39 beside 1 and 4 hogs), though beside 4
    /// hogs the locker's sleeps queued behind others went from 0–38% of
    /// them (five runs, counters on: `ahead_refused_share`) to none (three
    /// runs): every refusal there was a stale address. Whether it shortens
    /// the occasional locker's p99 beside 32 busy threads on 16 cores
    /// (272–484 µs in six of nine stop-41 runs, where the guard's refusals
    /// would put it behind 16 or so sleepers) is for the next run there.
    ///
    /// # Safety
    /// `node` is linked in this queue's list.
    pub(super) unsafe fn unlink(&mut self, node: NonNull<Waiter>) {
        // SAFETY: the caller's contract.
        unsafe { self.list.remove(node) };
        #[cfg(herdless_forget_passers)]
        {
            let address = node.as_ptr() as usize;
            if self.passer == address {
                self.passer = 0;
            }
            if self.passed == address {
                self.passed = 0;
            }
        }
    }

    /// Whether an unpark that found a waiter should hand the lock over
    /// fairly this time, because the bucket's last fair unpark is
    /// [`FAIR_AFTER`] ago; if so, starts the next period. Under loom there
    /// is no clock: never (loom checks the fair hand-off through
    /// `unlock_fair`).
    pub(super) fn due_for_fairness(&mut self) -> bool {
        #[cfg(not(loom))]
        {
            let now = Instant::now();
            match self.fair_at {
                Some(at) if now < at => false,
                _ => {
                    self.fair_at = Some(now + FAIR_AFTER);
                    true
                }
            }
        }
        #[cfg(loom)]
        false
    }
}

/// `waiters` sits on its own cache line: a no-waiter wake reads it without
/// pulling in the line that waiters and wakers write under the lock.
pub(super) struct Bucket {
    pub(super) waiters: CachePadded<AtomicUsize>,
    pub(super) queue: CachePadded<SpinParkLock<Queue>>,
}

impl Bucket {
    pub(super) fn new() -> Self {
        Bucket {
            waiters: CachePadded::new(AtomicUsize::new(0)),
            queue: CachePadded::new(SpinParkLock::new(Queue::new())),
        }
    }

    /// Announces waiters (raise before locking; see the module docs).
    /// The caller issues fence (A) after it.
    pub(super) fn announce(&self, n: usize) {
        self.waiters.fetch_add(n, Ordering::Relaxed);
    }

    /// Withdraws waiters that left this bucket.
    pub(super) fn withdraw(&self, n: usize) {
        // Relaxed: only increments take part in the store-buffering
        // argument; a decrement removes a waiter that is no longer queued.
        self.waiters.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Walks the waiters of one key in a locked bucket list, oldest first
/// (other keys hashed to the same bucket are skipped). The caller may
/// unlink each waiter it is handed before asking for the next: the cursor
/// has already read the successor.
pub(super) struct KeyedCursor<'q> {
    queue: &'q mut Queue,
    key: usize,
    /// The waiter `next` returned last, while it is still linked.
    current: Option<NonNull<Waiter>>,
    next: Option<NonNull<Waiter>>,
}

impl<'q> KeyedCursor<'q> {
    /// A cursor at the front of `queue`, which the caller holds locked.
    pub(super) fn new(queue: &'q mut Queue, key: usize) -> Self {
        let next = queue.list.front();
        KeyedCursor {
            queue,
            key,
            current: None,
            next,
        }
    }

    /// The next waiter of the key.
    pub(super) fn next(&mut self) -> Option<NonNull<Waiter>> {
        while let Some(node) = self.next {
            // SAFETY: `node` is in the list, which the caller holds locked
            // (the cursor borrows it), so it is live and its links are
            // ours; the successor is read before the caller may unlink it.
            self.next = unsafe { self.queue.list.next(node) };
            // SAFETY: as above; shared access to an atomic of the payload.
            let key = unsafe { node.as_ref() }
                .payload()
                .key
                .load(Ordering::Relaxed);
            // Relaxed: `key` is written only under this bucket's lock.
            if key == self.key {
                self.current = Some(node);
                return Some(node);
            }
        }
        self.current = None;
        None
    }

    /// Unlinks the waiter [`next`](Self::next) returned last and returns
    /// it (the caller then grants it or links it elsewhere).
    pub(super) fn unlink_current(&mut self) -> NonNull<Waiter> {
        let node = self.current.take().expect("unlink_current after next");
        // SAFETY: `next` handed out `node` from this locked list and it has
        // not been unlinked since (`current` is taken once).
        unsafe { self.queue.unlink(node) };
        node
    }

    /// Whether another waiter of the key follows (consumes the cursor).
    pub(super) fn has_more(mut self) -> bool {
        self.next().is_some()
    }
}
