//! Serving a handed-over userfaultfd with the pager's handler machinery:
//! the VMM's regions become the handlers' [`Space`], the memory file their
//! source; optional prefetchers (a trace's pages, or everything) beside
//! the handlers; then the wait for the VMM to go away, turning away anyone
//! else who connects, and the summary. A signal (`signals.rs`) ends the
//! wait like the VMM's going would, except that no output is written.

use std::io::Read;
use std::ops::Range;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;

use super::handoff::{self, Peer};
use super::mappings::GuestMapping;
use super::signals::Signals;
use super::summary::{Ending, RestoreSummary};
use super::trace::Trace;
use super::{output, pack, prefetch, Restore, RestoreError};
use crate::handler::{DiscardFence, Plan, Shared};
use crate::pager::fault_path::FaultPath;
use crate::source::GuardedSource;
use crate::space::{Space, Span};
use crate::uffd::Uffd;
use crate::{HandlerMode, PageSource};

/// Pages per `UFFDIO_COPY` when copying everything (`--copy-all`): 16 KiB
/// with 4 KiB pages. A copy holds, for the whole ioctl, something the
/// guest's own page faults in KVM also wait for (measured, not traced: the
/// stall grows with the chunk), so a guest reading memory the copy cannot
/// fill ahead (a range a balloon gave back, answered with zero pages) waits
/// for a chunk on nearly every one of its faults. Measured in the lab's
/// `firecracker` experiment (issue 22), re-reading a ballooned 16 MiB
/// while the copy runs: 38–42 ms in every sample at 4 pages, where
/// Firecracker's `on_demand_handler` takes 36–42 ms; at 8 pages up to
/// 129 ms, at 16 up to 124, at 64 up to 194, at 512 up to 241. The guest's
/// first pass is as fast at 4 pages as at 64 (158–199 ms against
/// 174–209): the ioctl's own cost is small beside the copy of 16 KiB.
const COPY_ALL_CHUNK: usize = 4;

/// How much nicer than the handlers the `--copy-all` thread runs. It
/// copies what nobody has asked for yet, mostly pages the guest will never
/// read, while a vCPU waits on every fault: with the vCPUs, the handler
/// and the copier runnable on fewer CPUs, the scheduler runs the first two
/// first. Measured in the lab's `firecracker` experiment (issue 22: a
/// ballooned range read again during the copy took 145 ms at the
/// handlers' priority, 60 ms at +10, 43 ms at +19; Firecracker's own
/// on-demand handler, 37 ms).
const COPY_ALL_NICE: i32 = 19;

/// A background fill: `ranges` of pages, in runs of `chunk` pages, lane
/// `lane` of `lanes` (`prefetch::run`).
struct Fill {
    name: String,
    ranges: Vec<Range<usize>>,
    chunk: usize,
    lane: usize,
    lanes: usize,
    /// Below the handlers on the CPU ([`COPY_ALL_NICE`]).
    yields_cpu: bool,
}

/// Serves `uffd` over `mappings` from `source` (the memory, behind the
/// prefetch trace's pack if one is used) until the VMM goes away;
/// `--record` packs the recorded pages from `memory`.
pub(super) fn serve(
    restore: &mut Restore,
    conn: UnixStream,
    uffd: Uffd,
    source: Box<dyn PageSource>,
    memory: Arc<dyn PageSource>,
    mappings: &[GuestMapping],
) -> Result<RestoreSummary, RestoreError> {
    let started = Instant::now();
    let opts = &restore.opts;
    let log = restore.log;
    let page = rustix::param::page_size();
    let space = Space::new(
        mappings
            .iter()
            .map(|m| Span {
                base: m.base,
                len: m.size,
                source_offset: m.offset,
                page: m.page_size,
            })
            .collect(),
        restore.file_len,
    );
    let mut page_sizes: Vec<usize> = mappings.iter().map(|m| m.page_size).collect();
    page_sizes.sort_unstable();
    page_sizes.dedup();
    if opts.fault_around > page && page_sizes.iter().any(|&p| p > page) {
        log.line(&format!(
            "note: --fault-around applies to the {page}-byte pages only; regions of larger pages \
             are served one whole page per fault"
        ));
    }
    let pages = space.pages();
    let mut trace_pages = 0;
    let mut trace_unmapped = 0;
    let plan = restore.trace.as_ref().map(|trace| {
        let (ranges, unmapped) = prefetch::plan_of(&space, trace);
        trace_pages = trace.pages();
        trace_unmapped = unmapped;
        if unmapped > 0 {
            log.line(&format!(
                "warning: {unmapped} of the trace's {} pages are in no mapping",
                trace.pages()
            ));
        }
        Plan::new(ranges, pages)
    });
    // The pager's fault path, over the VMM's regions: handlers that poll
    // (the fd is non-blocking, and no doorbell page can be registered in
    // the VMM), fills fenced by reads (no re-zap in another process).
    let path = FaultPath::new(
        uffd,
        space,
        GuardedSource::new(source)?,
        DiscardFence::reads_exclusive(),
    )
    .window(opts.fault_around)
    .handlers(opts.handlers)
    .mode(HandlerMode::Poll)
    .record(opts.record.is_some())
    .plan(plan)
    .prepare()?;
    let shared = Arc::clone(&path.shared);

    let signals = restore.signals.as_ref();
    // The prefetch and the copy of everything start first, from the moment
    // the userfaultfd arrives, beside the handlers: a fault waits for at
    // most the run in flight, never for the copy (a balloon's `REMOVE`s
    // are read by whoever reads first, `prefetch.rs`).
    let mut fills = Vec::new();
    if let Some(plan) = &shared.plan {
        let lanes = opts.prefetch_threads.max(1);
        fills.extend((0..lanes).map(|lane| Fill {
            name: format!("uffd-prefetch-{lane}"),
            ranges: plan.ranges().to_vec(),
            chunk: prefetch::CHUNK_PAGES,
            lane,
            lanes,
            yields_cpu: false,
        }));
    }
    if opts.copy_all {
        fills.push(Fill {
            name: "uffd-copy-all".into(),
            ranges: prefetch::everything(&shared.space),
            chunk: COPY_ALL_CHUNK,
            lane: 0,
            lanes: 1,
            yields_cpu: true,
        });
    }
    let mut prefetchers = Vec::new();
    for fill in fills {
        let sh = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(fill.name.clone())
            .spawn(move || {
                if fill.yields_cpu {
                    lower_this_threads_priority(COPY_ALL_NICE);
                }
                prefetch::run(&sh, &fill.ranges, fill.chunk, fill.lane, fill.lanes)
            });
        match spawned {
            Ok(h) => prefetchers.push(h),
            Err(e) => {
                log.line(&format!(
                    "warning: thread {} not started ({e}); the others and the faults still fill",
                    fill.name
                ));
            }
        }
    }
    let mut handlers = Vec::with_capacity(opts.handlers);
    let ending = match path.start(&mut handlers, 0) {
        Ok(()) => wait_for_the_end(&shared, &conn, restore, signals),
        Err(e) => Err(RestoreError::Pager(e)),
    };
    stop(&shared, handlers, prefetchers);
    let ending = ending?;
    // Stopped by a signal: the restore did not complete, so the outputs
    // keep their old contents (a partial trace would stand for the whole
    // working set on the next restore).
    let write_outputs = !matches!(ending, Ending::Signal(_));

    let stats = shared.counters.snapshot(&shared.per_handler);
    let mut errors: Vec<String> = shared
        .errors
        .lock()
        .map(|mut e| e.drain(..).map(|e| e.to_string()).collect())
        .unwrap_or_default();
    let recorded_pages = if write_outputs {
        write_record(restore, &shared, &*memory, &mut errors)
    } else {
        0
    };
    #[cfg(feature = "object-store")]
    let object = restore.object.as_ref().map(|o| {
        for w in o.warnings() {
            log.line(&format!("warning: {w}"));
        }
        o.stats()
    });
    let pack = restore
        .pack_figures
        .as_ref()
        .map(pack::PackFigures::summary);
    if let Some(c) = restore
        .pack_figures
        .as_ref()
        .and_then(|f| f.counters.as_ref())
    {
        let warnings = c.warnings.lock().map(|w| w.clone()).unwrap_or_default();
        for w in warnings {
            log.line(&format!("warning: {w}"));
        }
    }
    let mut summary = RestoreSummary {
        #[cfg(feature = "object-store")]
        object,
        pack,
        stats,
        ending,
        served_for: started.elapsed(),
        set_up_for: restore.set_up_for,
        handed_off_after: restore.handed_off_after,
        trace_pages,
        trace_unmapped,
        recorded_pages,
        errors,
        page_sizes,
    };
    if let Some(target) = restore.stats_to.take().filter(|_| write_outputs) {
        let text = serde_json::to_string_pretty(&summary.to_json())
            .map_err(std::io::Error::from)
            .and_then(|t| output::write_beside(&target, format!("{t}\n").as_bytes()));
        if let Err(e) = text {
            let msg = format!("cannot write the figures to {}: {e}", target.display());
            log.line(&msg);
            summary.errors.push(msg);
        }
    }
    Ok(summary)
}

/// Makes the calling thread `by` nicer (Linux's nice value is per thread;
/// at most 19). Best effort: a thread that cannot change it runs as it is.
fn lower_this_threads_priority(by: i32) {
    let me = Some(rustix::thread::gettid());
    if let Ok(now) = rustix::process::getpriority_process(me) {
        let _ = rustix::process::setpriority_process(me, (now + by).min(19));
    }
}

/// Tells the handlers and the prefetchers to stop, and joins them.
fn stop(shared: &Shared, handlers: Vec<JoinHandle<()>>, prefetchers: Vec<JoinHandle<()>>) {
    shared.stop_all(false);
    for p in prefetchers {
        let _ = p.join();
    }
    for h in handlers {
        let _ = h.join();
    }
}

/// Writes the working-set trace (`--record`) and, unless `--no-pack`,
/// its pack (`TRACE.pages`, the recorded pages read from `memory`), each
/// beside its target and renamed over it (or with one PUT each): the pack
/// first, so that a trace never stands beside a pack of a later one it
/// does not match (a reader refuses a pack of another trace anyway). The
/// pages written.
fn write_record(
    restore: &mut Restore,
    shared: &Shared,
    memory: &dyn PageSource,
    errors: &mut Vec<String>,
) -> u64 {
    let Some(pages) = shared.record.as_ref() else {
        return 0;
    };
    let pages = pages.lock().map(|p| p.clone()).unwrap_or_default();
    let trace = Trace::from_pages(
        restore.file_len,
        pages
            .iter()
            .map(|&p| (shared.space.source_offset(p), shared.page_size(p) as u64)),
    );
    let log = restore.log;
    let mut fail = |path: &std::path::Path, what: &str, e: String| {
        let msg = format!("cannot write the {what} {}: {e}", path.display());
        log.line(&msg);
        errors.push(msg);
    };
    if let Some(url) = restore.opts.record.clone().filter(|_| restore.opts.pack) {
        #[cfg(feature = "object-store")]
        let etag = restore
            .object
            .as_ref()
            .and_then(|o| o.etag().map(str::to_string));
        #[cfg(not(feature = "object-store"))]
        let etag: Option<String> = None;
        let packed = pack::build(&trace, etag.as_deref(), |off, buf| memory.read_at(off, buf));
        let written = match (packed, &restore.record_pack_to) {
            (Err(e), _) => Err(e.to_string()),
            (Ok(bytes), Some(target)) => {
                output::write_beside(target, &bytes).map_err(|e| e.to_string())
            }
            #[cfg(feature = "object-store")]
            (Ok(bytes), None) if super::memory::is_url(&url) => {
                super::memory::write_object(&pack::path_for(&url), bytes, &restore.opts)
                    .map_err(|e| e.to_string())
            }
            (Ok(_), None) => Ok(()),
        };
        if let Err(e) = written {
            fail(&pack::path_for(&url), "pages file", e);
        }
    }
    let target = restore.record_to.take();
    let written = match (&target, restore.opts.record.as_ref()) {
        (Some(target), _) => output::write_beside(target, trace.to_text().as_bytes())
            .map_err(|e| (target.clone(), e.to_string())),
        // An object URL: one PUT.
        #[cfg(feature = "object-store")]
        (None, Some(url)) if super::memory::is_url(url) => {
            super::memory::write_object(url, trace.to_text().into_bytes(), &restore.opts)
                .map_err(|e| (url.clone(), e.to_string()))
        }
        _ => Ok(()),
    };
    if let Err((path, e)) = written {
        fail(&path, "trace", e);
    }
    trace.pages()
}

/// Waits until the VMM closes its connection (or its memory goes away, or
/// a signal asks to stop), turning away anyone else who connects.
fn wait_for_the_end(
    shared: &Shared,
    conn: &UnixStream,
    restore: &Restore,
    signals: Option<&Signals>,
) -> Result<Ending, RestoreError> {
    let log = restore.log;
    let mut ignored = 0usize;
    loop {
        let mut fds = vec![
            PollFd::new(conn, PollFlags::IN | PollFlags::RDHUP),
            PollFd::new(&restore.listener, PollFlags::IN),
            PollFd::new(&shared.stop, PollFlags::IN),
        ];
        if let Some(s) = signals {
            fds.push(PollFd::new(s, PollFlags::IN));
        }
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => return Err(RestoreError::io("poll", e)),
        }
        let conn_ev = fds[0].revents();
        let listener_ev = fds[1].revents();
        let stop_ev = fds[2].revents();
        let signal_ev = fds.get(3).map(|f| f.revents());
        if stop_ev.contains(PollFlags::IN) {
            return Ok(if shared.gone.load(Ordering::Acquire) {
                Ending::VmmGone
            } else {
                Ending::HandlersFailed
            });
        }
        if signal_ev.is_some_and(|e| e.contains(PollFlags::IN))
            && let Some(signal) = signals.and_then(Signals::take)
        {
            return Ok(Ending::Signal(signal));
        }
        if listener_ev.contains(PollFlags::IN) {
            refuse_second(restore);
        }
        if conn_ev.intersects(PollFlags::IN | PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR) {
            // Firecracker sends nothing after the handoff; read what comes
            // (and drop it) until the end.
            let mut buf = [0u8; 4096];
            match (&*conn).read(&mut buf) {
                Ok(0) => return Ok(Ending::VmmClosed),
                Ok(n) => {
                    if ignored == 0 {
                        log.line("ignoring bytes the VMM sent after the handoff");
                    }
                    ignored += n;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Ok(Ending::VmmClosed),
            }
        }
    }
}

/// Turns away a connection made while serving (the handoff happens once).
fn refuse_second(restore: &Restore) {
    if let Ok((stream, _)) = restore.listener.accept() {
        let who = handoff::peer_of(&stream)
            .map(|p: Peer| p.to_string())
            .unwrap_or_else(|_| "an unknown peer".into());
        restore.log.line(&format!(
            "refused a second connection from {who}: already serving a VMM"
        ));
        drop(stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copier's thread gets nicer, and only it: the thread that
    /// started it (a handler, here the test's) keeps its own value.
    #[test]
    fn the_copy_all_thread_alone_runs_nicer() {
        let here = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let there = std::thread::spawn(|| {
            lower_this_threads_priority(COPY_ALL_NICE);
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(there, (here + COPY_ALL_NICE).min(19));
        let after = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        assert_eq!(after, here);
    }
}
