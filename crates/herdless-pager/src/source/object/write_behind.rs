//! The host cache's writes, behind the fetches: a fetched chunk goes to
//! this process's readers at once, and to the host cache (`host_cache.rs`)
//! from one thread of the source's own, so that no reader waits for a
//! chunk's file to be written. The chunk's lock on the host stays held
//! until its file is renamed into place: another process waiting for the
//! chunk finds it whole.
//!
//! One thread, in order, at the handlers' priority. Measured in the lab
//! (2 cores, 20 ms per GET, 3 interleaved runs each): against writes on
//! the runtime's blocking threads, several at once, one writer took the
//! pack prefetch from 103–119 ms to 84–97, the prefetch without a pack
//! (all 256 MiB written) from 688–946 ms to 420–665, and four restores at
//! once from 1162–1317 ms to 903–1358: the writes take one CPU at most,
//! not the restore's. At nice +19 it was no faster (within the runs'
//! spread), and on a busy host it could keep the other restores waiting
//! on its locks.
//!
//! The last clone of the source to go waits for the writes queued (a
//! bounded time, [`WRITES_BEHIND_PATIENCE`]), so that the next restore of
//! the object finds them. A write that never runs (the thread could not be
//! started) unlocks as it is dropped: a waiter fetches the chunk itself.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the last clone of a source waits for the writes still queued.
pub(crate) const WRITES_BEHIND_PATIENCE: Duration = Duration::from_secs(5);

/// A write, with whatever it holds (the chunk's bytes and its lock).
type Write = Box<dyn FnOnce() + Send>;

/// The writer thread's queue, and how many writes are not done yet.
pub(crate) struct WriteBehind {
    /// Started on the first write; `None` before (and if it failed).
    queue: Mutex<Option<Sender<Write>>>,
    pending: Arc<Pending>,
}

/// Writes queued and not done: counted under the lock, waited for on the
/// condition variable.
#[derive(Default)]
pub(crate) struct Pending {
    count: Mutex<usize>,
    idle: Condvar,
}

impl Pending {
    fn add(&self, n: isize) {
        let mut c = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        *c = c.saturating_add_signed(n);
        if *c == 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until no write is pending, or `patience` has passed.
    pub(crate) fn wait_idle(&self, patience: Duration) {
        let deadline = Instant::now() + patience;
        let mut c = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *c > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            c = self
                .idle
                .wait_timeout(c, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl WriteBehind {
    pub(crate) fn new() -> Self {
        WriteBehind {
            queue: Mutex::new(None),
            pending: Arc::default(),
        }
    }

    /// What the last clone of the source waits on.
    pub(crate) fn pending(&self) -> Arc<Pending> {
        Arc::clone(&self.pending)
    }

    /// Queues `write` for the writer thread (started now if it is not
    /// running); runs it here if no thread can be started.
    pub(crate) fn queue(&self, write: Write) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if q.is_none() {
            *q = self.start();
        }
        self.pending.add(1);
        let refused = match q.as_ref() {
            Some(tx) => tx.send(write).err().map(|e| e.0),
            None => Some(write),
        };
        drop(q);
        if let Some(write) = refused {
            write();
            self.pending.add(-1);
        }
    }

    /// The writer thread: it runs the writes in order, and ends when the
    /// source (which holds the queue's sender) is gone.
    fn start(&self) -> Option<Sender<Write>> {
        let (tx, rx) = mpsc::channel::<Write>();
        let pending = Arc::clone(&self.pending);
        std::thread::Builder::new()
            .name("herdless-cache".into())
            .spawn(move || {
                for write in rx {
                    // A write that panics is a chunk not cached, and the
                    // thread goes on with the next.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(write));
                    pending.add(-1);
                }
            })
            .ok()
            .map(|_| tx)
    }
}
