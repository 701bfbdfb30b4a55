//! The handler threads (seed 000): each waits for messages on the
//! userfaultfd (`BlockingRead`: in `read`, woken one per message; `Poll`:
//! in `poll` with the stop eventfd, then a non-blocking `read`), reads every
//! pending message in one `read`, applies the `REMOVE` events first, then
//! serves each fault; and stops at a doorbell fault or the stop eventfd.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Instant;

use linux_raw_sys::general as uapi;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;

use super::Shared;
use crate::uffd::{Msg, MSG_SIZE};
use crate::{HandlerMode, PagerError};

/// Messages read per `read` call.
const BATCH: usize = 64;

/// A handler thread's buffers, allocated before it starts (so that a
/// failure is an error of the builder, not an abort in the thread).
pub(crate) struct Buffers {
    msgs: Vec<u8>,
    scratch: Vec<u8>,
}

impl Buffers {
    /// Buffers for a handler filling runs of up to `scratch` bytes.
    pub(crate) fn new(scratch: usize) -> Result<Self, PagerError> {
        let zeroed = |len: usize| -> Result<Vec<u8>, PagerError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|_| {
                PagerError::syscall(
                    "allocating a handler's buffers",
                    std::io::Error::from(std::io::ErrorKind::OutOfMemory),
                )
            })?;
            v.resize(len, 0);
            Ok(v)
        };
        Ok(Buffers {
            msgs: zeroed(MSG_SIZE * BATCH)?,
            scratch: zeroed(scratch)?,
        })
    }
}

impl Shared {
    /// Applies the `REMOVE` events of a batch, under the read's guard
    /// (ARCHITECTURE contract 9: before any fault of the batch is served,
    /// and, with [`DiscardFence::ReadsExclusive`](super::DiscardFence),
    /// before any fill runs again).
    fn apply_removes(&self, msgs: &[Msg], ticket: u64) {
        for m in msgs {
            if let Msg::Remove { start, end } = *m {
                self.on_remove(start, end, ticket);
            }
        }
    }

    /// Serves the faults of a batch; true if it held a doorbell (this
    /// handler then exits).
    fn serve_faults(&self, idx: usize, msgs: &[Msg], scratch: &mut [u8]) -> bool {
        let mut exit = false;
        for m in msgs {
            let Msg::PageFault { address, tid, .. } = *m else {
                continue;
            };
            let (db, db_len) = self.doorbell;
            if address >= db && address < db + db_len {
                // Shutdown (BlockingRead): leave the count before the wake
                // below, which the toucher waits for and then reads `alive`
                // (the kernel's wake orders the two).
                self.alive.fetch_sub(1, Ordering::AcqRel);
                let _ = self.uffd.zeropage(address & !(self.page - 1), self.page);
                exit = true;
                continue;
            }
            let t0 = Instant::now();
            let c = &self.counters;
            c.add(&c.faults, 1);
            // (A copier serving a batch it read has no handler index.)
            if let Some(count) = self.per_handler.get(idx) {
                count.fetch_add(1, Ordering::Relaxed);
            }
            // A source that may wait long (an object store) is waited for
            // before the fill guard: a fill holding it keeps every handler
            // from reading the userfaultfd (contract 9's fence).
            if let Some(page) = self.space.page_of(address)
                && self.space.has_source(page)
                && self.states.is_missing(page)
            {
                self.source
                    .wait_ready(self.space.source_offset(page), self.page);
            }
            // Claims and fills only under the fence's fill guard (contract 9).
            let _fill = self.fence.before_fill();
            let Some(page) = self.space.page_of(address) else {
                self.on_unmapped_fault(address);
                continue;
            };
            if tid != 0
                && let Some(h) = self
                    .handler_tids
                    .iter()
                    .position(|t| t.load(Ordering::Acquire) == tid)
            {
                c.add(&c.handler_self_faults, 1);
                let region = self.space.region_of(page);
                self.report(PagerError::HandlerTouchedRegion {
                    handler: h,
                    offset: address - region.base,
                });
            }
            // A panic here is a bug in the pager (a source's panics are
            // caught where it is called): the fault is still answered, the
            // claims were given back by their guards, and the handler goes
            // on serving.
            let served = catch_unwind(AssertUnwindSafe(|| {
                self.on_fault(page, scratch);
                c.record_latency(t0.elapsed());
                if self.window_of(page) > 1 && self.space.has_source(page) {
                    self.fault_around(page, scratch);
                }
                self.fill_ahead(page, scratch);
            }));
            if served.is_err() {
                self.report(PagerError::HandlerPanicked(idx));
                self.answer_after_panic(page);
            }
        }
        exit
    }

    /// For a copier a pending event deferred (`background.rs`): reads the
    /// pending messages without waiting, applies their `REMOVE`s under the
    /// read guard and serves their faults, as a handler's turn does; the
    /// messages read (0: none was pending, or a handler took them first).
    pub(crate) fn serve_pending(&self, bufs: &mut Buffers) -> usize {
        let mut fds = [PollFd::new(&self.uffd, PollFlags::IN)];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if !matches!(poll(&mut fds, Some(&zero)), Ok(1..)) {
            return 0;
        }
        let guard = self.fence.before_read();
        // Non-blocking in `herdless-uffd`; after the poll above a blocking
        // fd may still wait if a handler took the messages meanwhile, so
        // only a non-blocking one is read here.
        let n = match rustix::fs::fcntl_getfl(&self.uffd) {
            Ok(f) if f.contains(rustix::fs::OFlags::NONBLOCK) => {
                match self.uffd.read(&mut bufs.msgs) {
                    Ok(n) => n,
                    Err(_) => return 0, // EAGAIN: a handler took them; EINTR
                }
            }
            _ => return 0,
        };
        self.busy.fetch_add(1, Ordering::AcqRel);
        let c = &self.counters;
        c.add(&c.copier_reads, 1);
        let batch: Vec<Msg> = bufs.msgs[..n]
            .chunks_exact(MSG_SIZE)
            .map(Msg::parse)
            .collect();
        self.apply_removes(&batch, guard.ticket);
        drop(guard);
        self.serve_faults(usize::MAX, &batch, &mut bufs.scratch);
        self.busy.fetch_sub(1, Ordering::Release);
        batch.len()
    }
}

/// A handler thread's body: serve until stopped.
pub(crate) fn run(sh: &Shared, idx: usize, mode: HandlerMode, bufs: Buffers) {
    let result = catch_unwind(AssertUnwindSafe(|| serve_loop(sh, idx, mode, bufs)));
    if result.is_err() {
        sh.report(PagerError::HandlerPanicked(idx));
        sh.alive.fetch_sub(1, Ordering::AcqRel);
    }
}

fn serve_loop(sh: &Shared, idx: usize, mode: HandlerMode, bufs: Buffers) {
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    sh.handler_tids[idx].store(tid, Ordering::Release);
    let Buffers {
        mut msgs,
        mut scratch,
    } = bufs;
    let mut stopping = false;
    loop {
        if mode == HandlerMode::Poll && !stopping {
            let mut fds = [
                PollFd::new(&sh.uffd, PollFlags::IN),
                PollFd::new(&sh.stop, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => {
                    sh.report(PagerError::syscall("poll", e));
                    return leave_on_error(sh);
                }
            }
            // Stop: serve what is still queued (non-blocking), then leave.
            stopping = fds[1].revents().contains(PollFlags::IN);
            if fds[0].revents().contains(PollFlags::ERR) {
                // Only an uninitialised userfaultfd polls as an error.
                sh.report(PagerError::syscall(
                    "poll(userfaultfd)",
                    std::io::Error::from_raw_os_error(Errno::INVAL.raw_os_error()),
                ));
                return leave_on_error(sh);
            }
        }
        // (T), and with `ReadsExclusive` the read lock: see `discard.rs`.
        let guard = sh.fence.before_read();
        let n = match sh.uffd.read(&mut msgs) {
            Ok(n) => {
                sh.busy.fetch_add(1, Ordering::AcqRel);
                n
            }
            Err(e) if e.raw_os_error() == Some(Errno::INTR.raw_os_error()) => continue,
            // Poll mode: another handler took the messages (or none left
            // while stopping).
            Err(e) if e.raw_os_error() == Some(Errno::AGAIN.raw_os_error()) => {
                if stopping {
                    break;
                }
                continue;
            }
            Err(e) => {
                sh.report(PagerError::syscall("read(userfaultfd)", e));
                return leave_on_error(sh);
            }
        };
        let batch: Vec<Msg> = msgs[..n].chunks_exact(MSG_SIZE).map(Msg::parse).collect();
        sh.apply_removes(&batch, guard.ticket);
        drop(guard);
        let exit = sh.serve_faults(idx, &batch, &mut scratch);
        sh.busy.fetch_sub(1, Ordering::Release);
        if exit {
            return; // `alive` already counted down at the doorbell
        }
    }
    sh.alive.fetch_sub(1, Ordering::AcqRel);
}

/// A handler leaving on an error it cannot serve past: if it was the last
/// one, everything stops (whoever polls `stop` learns that nobody serves
/// faults any more).
fn leave_on_error(sh: &Shared) {
    if sh.alive.fetch_sub(1, Ordering::AcqRel) == 1 {
        sh.stop_all(false);
    }
}

/// The feature bits the pager asks for.
pub(crate) fn wanted_features(minor: bool) -> u64 {
    let mut f =
        uapi::UFFD_FEATURE_EVENT_REMOVE | uapi::UFFD_FEATURE_THREAD_ID | uapi::UFFD_FEATURE_POISON;
    if minor {
        f |= uapi::UFFD_FEATURE_MINOR_SHMEM;
    }
    u64::from(f)
}
