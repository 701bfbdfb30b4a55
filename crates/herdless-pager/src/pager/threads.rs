//! The pager's zapper thread, which discards again the pages a fill racing
//! a discard may have resurrected (ARCHITECTURE contract 9). (The handler
//! threads are started by `fault_path.rs`, for `herdless-uffd` too.)

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use rustix::mm::Advice;

use crate::handler::Shared;
use crate::PagerError;

/// Starts the zapper: it `MADV_DONTNEED`s each range `(address, len)`
/// received on `rx` (inside the pager's region) until the sender is
/// dropped.
pub(super) fn spawn_zapper(
    shared: Arc<Shared>,
    rx: mpsc::Receiver<(usize, usize)>,
) -> Result<JoinHandle<()>, PagerError> {
    std::thread::Builder::new()
        .name("pager-zapper".into())
        .spawn(move || {
            for (addr, len) in rx {
                // SAFETY: `addr..addr + len` lies in the region, which
                // stays mapped until this thread is joined (Pager's Drop).
                let r = unsafe { rustix::mm::madvise(addr as *mut _, len, Advice::LinuxDontNeed) };
                // After the madvise (which returned once a handler read its
                // REMOVE): pairs with `settle`'s Acquire.
                shared
                    .counters
                    .rezap_ranges_done
                    .fetch_add(1, Ordering::Release);
                if let Err(e) = r {
                    shared.report(PagerError::syscall("madvise (re-zap)", e));
                }
            }
        })
        .map_err(|source| PagerError::ThreadSpawn {
            what: "the zapper thread",
            started: 0,
            source,
        })
}
