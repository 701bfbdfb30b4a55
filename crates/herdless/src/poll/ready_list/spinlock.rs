//! `Spinlock`: the ready list before seed 003. Every callback and both
//! halves of a harvest take one lock (kernel: `ep->wq.lock` around
//! `rdllist` and `ovflist`).

use std::collections::VecDeque;

use super::ListCounts;
use crate::lock::SpinParkLock;
use crate::poll::item::Item;
use crate::stats::SlowCounter;
use crate::sync::Arc;

struct Lists {
    ready: VecDeque<Arc<Item>>,
    /// `Some` between `start_scan` and `done_scan`: callbacks append here.
    overflow: Option<Vec<Arc<Item>>>,
}

pub(crate) struct SpinlockList {
    lists: SpinParkLock<Lists>,
    overflow_appends: SlowCounter,
}

impl SpinlockList {
    pub(crate) fn new() -> Self {
        SpinlockList {
            lists: SpinParkLock::new(Lists {
                ready: VecDeque::new(),
                overflow: None,
            }),
            overflow_appends: SlowCounter::new(),
        }
    }

    pub(crate) fn push(&self, item: &Arc<Item>) -> bool {
        let mut lists = self.lists.lock();
        // The claim under the lock, as the kernel tests `ep_is_linked`
        // under it; the flag's own ordering is argued in `item.rs`.
        if !item.claim() {
            return false;
        }
        match &mut lists.overflow {
            Some(overflow) => {
                overflow.push(item.clone());
                self.overflow_appends.add(1);
            }
            None => lists.ready.push_back(item.clone()),
        }
        true
    }

    pub(crate) fn start_scan(&self, out: &mut VecDeque<Arc<Item>>) {
        let mut lists = self.lists.lock();
        out.extend(lists.ready.drain(..));
        lists.overflow.get_or_insert_with(Vec::new);
    }

    pub(crate) fn done_scan(&self, requeue: &mut Vec<Arc<Item>>) -> bool {
        let mut lists = self.lists.lock();
        let lists = &mut *lists;
        if let Some(overflow) = lists.overflow.take() {
            // Appended in arrival order: oldest first.
            lists.ready.extend(overflow);
        }
        lists.ready.extend(requeue.drain(..));
        !lists.ready.is_empty()
    }

    pub(crate) fn counts(&self) -> ListCounts {
        ListCounts {
            contended: self.lists.contended_acquisitions(),
            overflow_appends: self.overflow_appends.sum(),
        }
    }
}
