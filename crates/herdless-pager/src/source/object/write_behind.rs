//! The host cache's writes, behind the fetches: a fetched chunk goes to
//! this process's readers at once, and to the host cache (`host_cache.rs`)
//! from the runtime's blocking threads, several at once, so that no reader
//! waits for a chunk's file to be written. The chunk's lock on the host
//! stays held until its file is renamed into place: another process
//! waiting for the chunk finds it whole. (One writer thread for all the
//! chunks, at nice +19, was tried: no faster for one restore, and four
//! restores of one snapshot at once took longer, each waiting for the
//! other's queue of writes to reach the chunk it wanted.)
//!
//! The last clone of the source to go waits for the writes under way (a
//! bounded time, [`WRITES_BEHIND_PATIENCE`]) before it shuts the runtime
//! down, so that the next restore of the object finds them. A write that
//! never runs unlocks as it is dropped: a waiter fetches the chunk itself.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the last clone of a source waits for the writes under way.
pub(crate) const WRITES_BEHIND_PATIENCE: Duration = Duration::from_secs(5);

/// Writes started and not done: counted under the lock, waited for on the
/// condition variable.
#[derive(Default)]
pub(crate) struct Pending {
    count: Mutex<usize>,
    idle: Condvar,
}

/// One write's place in the count, given back when the write is dropped,
/// whether it ran or not.
struct Counted(Arc<Pending>);

impl Drop for Counted {
    fn drop(&mut self) {
        let mut c = self.0.count.lock().unwrap_or_else(PoisonError::into_inner);
        *c = c.saturating_sub(1);
        if *c == 0 {
            self.0.idle.notify_all();
        }
    }
}

impl Pending {
    /// Runs `write` on `handle`'s blocking threads, counted until it is
    /// done (or dropped unrun).
    pub(crate) fn start(
        self: &Arc<Self>,
        handle: &tokio::runtime::Handle,
        write: impl FnOnce() + Send + 'static,
    ) {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        let counted = Counted(Arc::clone(self));
        handle.spawn_blocking(move || {
            let _counted = counted;
            write();
        });
    }

    /// Waits until no write is under way, or `patience` has passed.
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
