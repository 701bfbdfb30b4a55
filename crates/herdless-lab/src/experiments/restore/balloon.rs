//! Section "re-read ballooned memory" of `restore` (issue 22 §4): a guest
//! gets back B MiB its balloon took and reads them again. Served by
//! `herdless-uffd` (the discarded range is known to read zeros: a fault
//! there maps zeros over the discarded run of its 2 MiB window), against
//! the kernel serving memory nobody registered with a userfaultfd (what a
//! VMM gets once its handler unregisters the removed ranges, as
//! Firecracker's `on_demand_handler` does: a fault per 4 KiB page, each
//! mapping the zero page).
//!
//! `herdless-uffd`: a 2·B MiB snapshot restored on demand, its first B MiB
//! read once by one thread (untimed: one fault per page), then discarded
//! (`MADV_DONTNEED`, which returns once the handler has read the `REMOVE`),
//! then read again, every word, timed. `kernel`: B MiB of anonymous
//! memory written, discarded and read again the same way. Metrics:
//! `time_ms` (the re-read), `minor_faults` (the reading thread's, from
//! `getrusage`), `uffd_faults` (fault messages `herdless-uffd` served
//! during the re-read).

use std::time::Instant;

use herdless_pager::restore::{Populate, RestoreOptions};
use herdless_pager::vmm::GuestMemory;
use serde::Serialize;

use super::run::{serve, socket_path};
use super::workload::{self, PAGE};
use crate::harness::{Case, LabError, Sample, Usage};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BalloonParams {
    /// MiB the balloon takes and the guest reads again.
    pub ballooned_mib: usize,
}

/// Who serves the re-read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Server {
    /// `herdless-uffd`'s library.
    HerdlessUffd,
    /// The kernel: memory no userfaultfd covers.
    Kernel,
}

/// Reads every word of `pages` pages at `base` on this thread, timed
/// (`time_ms`, and the thread's `minor_faults`); fails unless they all
/// read zeros.
fn re_read(base: usize, pages: usize) -> Result<Sample, LabError> {
    let before = Usage::thread();
    let t0 = Instant::now();
    let sum = workload::touch(base, &[(0, pages)]);
    let time_ms = t0.elapsed().as_secs_f64() * 1e3;
    let minor_faults = Usage::thread().since(&before).minor_faults;
    if sum != 0 {
        return Err(LabError::Sample(format!(
            "ballooned memory read back {sum:#x}, not zeros"
        )));
    }
    Ok(Sample::new()
        .with("time_ms", time_ms)
        .with("minor_faults", minor_faults as f64))
}

/// Measures one case with one server.
pub(crate) fn measure(server: Server, case: &Case<BalloonParams>) -> Result<Sample, LabError> {
    let bytes = case.params.ballooned_mib << 20;
    let pages = bytes / PAGE;
    match server {
        Server::Kernel => {
            let mut memory =
                memmap2::MmapMut::map_anon(bytes).map_err(|e| LabError::os("mmap", e))?;
            memory.fill(0x5a);
            // SAFETY: private anonymous memory of our own, which then reads
            // as zeros; no reference into it is held across the call.
            unsafe { memory.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) }
                .map_err(|e| LabError::os("madvise", e))?;
            re_read(memory.as_ptr() as usize, pages)
        }
        Server::HerdlessUffd => {
            let snapshot = workload::snapshot(2 * bytes)?;
            let mut opts = RestoreOptions::new(socket_path(), &snapshot.path);
            opts.populate = Populate::All;
            let (r, summary) = serve(opts, |socket, _| {
                let mem = GuestMemory::new(&[snapshot.len])
                    .map_err(|e| LabError::os("guest memory (userfaultfd)", e))?;
                let base = mem.regions()[0].base;
                let conn = mem
                    .handoff(socket)
                    .map_err(|e| LabError::os("handoff", e))?;
                // The guest had these pages (one fault each), then the
                // balloon took them.
                let sum = workload::touch(base, &[(0, pages)]);
                if sum != snapshot.sum(&[(0, pages)]) {
                    return Err(LabError::Sample("a page was served wrong".into()));
                }
                mem.discard(base, bytes)
                    .map_err(|e| LabError::os("madvise (the balloon)", e))?;
                let r = re_read(base, pages);
                drop(conn);
                r
            })?;
            // One fault per page on the first read (one thread, no
            // fault-around); the rest were the re-read's.
            let uffd_faults = summary.stats.faults.saturating_sub(pages as u64);
            Ok(r.with("uffd_faults", uffd_faults as f64))
        }
    }
}
