//! Starting the pager's threads: the handlers (also what `herdless-uffd`
//! starts) and the zapper, which discards again the pages a fill racing a
//! discard may have resurrected (ARCHITECTURE contract 9). A start that
//! fails part-way leaves every started thread in the caller's hands, so
//! the usual shutdown stops it.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use rustix::mm::Advice;

use crate::handler::{self, Buffers, Shared};
use crate::{HandlerMode, PagerError};

/// Starts one handler thread per entry of `shared.per_handler`, pushing
/// each onto `handles`. Buffers are allocated first, so that a lack of
/// memory is an error here and not an abort in a thread. On failure the
/// handlers never started are counted out of `shared.alive`; those
/// started are in `handles`, for the caller's shutdown to stop and join.
/// `already` counts threads the caller started before (for the message).
pub(crate) fn spawn_handlers(
    shared: &Arc<Shared>,
    mode: HandlerMode,
    handles: &mut Vec<JoinHandle<()>>,
    already: usize,
) -> Result<(), PagerError> {
    let n = shared.per_handler.len();
    let mut buffers = Vec::with_capacity(n);
    for _ in 0..n {
        match Buffers::new(shared.scratch_bytes()) {
            Ok(b) => buffers.push(b),
            Err(e) => {
                shared.alive.fetch_sub(n, Ordering::AcqRel);
                return Err(e);
            }
        }
    }
    for (i, bufs) in buffers.into_iter().enumerate() {
        let sh = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name(format!("pager-handler-{i}"))
            .spawn(move || handler::run(&sh, i, mode, bufs));
        match spawned {
            Ok(h) => handles.push(h),
            Err(source) => {
                // Those never started will not count themselves down.
                shared.alive.fetch_sub(n - i, Ordering::AcqRel);
                return Err(PagerError::ThreadSpawn {
                    what: "a handler thread",
                    started: already + i,
                    source,
                });
            }
        }
    }
    Ok(())
}

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
