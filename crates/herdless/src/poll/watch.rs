//! A poller's watch on one source: the entries it hangs on the source's
//! wait queues, whose callbacks queue the item on the ready list (kernel:
//! the `epitem` and its `eppoll_entry`s, `ep_ptable_queue_proc`).

use std::any::Any;

use super::core::Core;
use super::item::Item;
use super::nest;
use super::pollable::Pollable;
use crate::sync::Arc;
use crate::wait_queue::{Latch, WaitQueue};

/// One watched source (kernel: the `epitem` as the interest list holds it).
pub(super) struct Watch {
    pub(super) item: Arc<Item>,
    /// The entry on the source's `wait_queue()`.
    pub(super) _read: Box<dyn Any + Send + Sync>,
    /// The entry on its `write_wait_queue()`, when that is another queue
    /// and the interest includes writability.
    pub(super) write: Option<Box<dyn Any + Send + Sync>>,
    /// Hangs a new entry on the write queue (for `modify`); `None` when the
    /// source has one queue.
    pub(super) register_write: Option<Box<dyn Fn() -> Box<dyn Any + Send + Sync> + Send + Sync>>,
    /// `Some` when the source is a poller: the edge (this poller's id, the
    /// watched poller's id) recorded in the nesting graph.
    pub(super) nested: Option<(u64, u64)>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some((parent, child)) = self.nested {
            nest::unlink(parent, child);
        }
    }
}

pub(super) fn read_queue<S: Pollable + ?Sized>(source: &S) -> &WaitQueue {
    source.wait_queue()
}

pub(super) fn write_queue<S: Pollable + ?Sized>(source: &S) -> &WaitQueue {
    source.write_wait_queue()
}

pub(super) fn register<S: Pollable + ?Sized + 'static>(
    source: &Arc<S>,
    core: &Arc<Core>,
    item: &Arc<Item>,
    queue: fn(&S) -> &WaitQueue,
) -> Box<dyn Any + Send + Sync> {
    let (core, item) = (core.clone(), item.clone());
    Box::new(WaitQueue::register_owned(
        source.clone(),
        queue,
        move || core.callback(&item),
    ))
}

/// [`register`] for the read queue of a `LockFree` poller: the entry
/// latches while the item is queued (item.rs, `latch`).
pub(super) fn register_latched<S: Pollable + ?Sized + 'static>(
    source: &Arc<S>,
    core: &Arc<Core>,
    item: &Arc<Item>,
    latch: Arc<Latch>,
) -> Box<dyn Any + Send + Sync> {
    let (core, item, busy) = (core.clone(), item.clone(), item.clone());
    Box::new(WaitQueue::register_owned_latched(
        source.clone(),
        read_queue::<S>,
        move || core.callback(&item),
        latch,
        move || busy.is_queued(),
    ))
}

pub(super) fn key<S: ?Sized>(source: &S) -> usize {
    source as *const S as *const () as usize
}
