//! One measurement of `restore`: `herdless-uffd`'s server (the library
//! the binary runs) on a thread of this process, a VMM played by
//! `herdless_pager::vmm` exactly as Firecracker hands over its memory, and
//! the workload touching the working set from T threads.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herdless_pager::restore::{Populate, Restore, RestoreOptions, RestoreSummary};
use herdless_pager::vmm::{GuestMemory, Hugepages, HUGE_PAGE};

use super::workload::{self, Snapshot, PAGE};
use super::{How, Params};
use crate::harness::rusage::Usage;
use crate::harness::scratch::{fd_path, scratch_dir, Memo};
use crate::harness::{gang, Case, LabError, Sample};

/// A working set: runs of pages (first page, length), in touch order.
pub(super) type Runs = Vec<(usize, usize)>;

/// Handler threads: one per workload thread, at most 2 (the CPUs here).
pub(super) fn handlers(threads: usize) -> usize {
    threads.clamp(1, 2)
}

/// A fresh socket path.
pub(super) fn socket_path() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "herdless-lab-restore-{}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fn restore_err(e: herdless_pager::restore::RestoreError) -> LabError {
    LabError::Sample(format!("herdless-uffd: {e}"))
}

/// What one restore measured.
pub(super) struct Restored {
    /// From the handoff to the last thread's last touch.
    pub(super) time: Duration,
    /// From the handler's start (`Restore::bind`: opening the memory and
    /// the traces, reading ahead) to the same last touch: what a restore
    /// costs when the VMM hands off as soon as the handler listens.
    pub(super) from_start: Duration,
    /// CPU time of the whole lab process over that same span: the
    /// handlers, prefetchers, fetchers and host-cache writer, the workload
    /// threads, and (S3 table) the S3 server in this process.
    pub(super) cpu: Duration,
    pub(super) summary: RestoreSummary,
}

/// Restores `snapshot` with `opts` into guest memory of `page`-byte pages
/// (4 KiB, or 2 MiB hugepages: reserved for the rest of the lab's run, so
/// that every repetition after the warm-up finds them as a host with a
/// boot-time pool does; [`LabError::Unavailable`] where they cannot be),
/// the workload touching `runs` from `threads` threads; checks every sum.
pub(super) fn restore(
    snapshot: &Snapshot,
    opts: RestoreOptions,
    page: usize,
    runs: &[(usize, usize)],
    threads: usize,
) -> Result<Restored, LabError> {
    if page == HUGE_PAGE {
        let pages = (snapshot.len / HUGE_PAGE) as u64;
        Hugepages::reserve_until_exit(pages).map_err(|why| {
            LabError::Unavailable(format!("{pages} free 2 MiB hugepages needed: {why}"))
        })?;
    }
    let ((time, from_start, cpu), summary) = serve(opts, |socket, started| {
        let mem = GuestMemory::with_page_sizes(&[(snapshot.len, page)])
            .map_err(|e| LabError::os("guest memory (userfaultfd)", e))?;
        let base = mem.regions()[0].base;
        let shares: Vec<Vec<(usize, usize)>> = (0..threads)
            .map(|t| workload::share(runs, t, threads))
            .collect();
        let cpu0 = Usage::process();
        let t0 = Instant::now();
        let conn = mem
            .handoff(socket)
            .map_err(|e| LabError::os("handoff", e))?;
        let sums = gang(threads, |t| workload::touch(base, &shares[t]))?.results;
        let time = t0.elapsed();
        let from_start = started.elapsed();
        let cpu = Usage::process().since(&cpu0).cpu_micros;
        drop(conn); // the VMM exits: the server returns its summary
        for (t, (share, &got)) in shares.iter().zip(&sums).enumerate() {
            let want = snapshot.sum(share);
            if got != want {
                return Err(LabError::Sample(format!(
                    "thread {t} summed {got:#x}, the snapshot's pages sum to {want:#x}: a page \
                     was served wrong"
                )));
            }
        }
        Ok((time, from_start, Duration::from_micros(cpu)))
    })?;
    Ok(Restored {
        time,
        from_start,
        cpu,
        summary,
    })
}

/// Runs `herdless-uffd`'s server with `opts` on a thread of the lab while
/// `vmm(socket)` plays the VMM (it must hand off and disconnect); its
/// result and the server's summary, which must be clean. `vmm` gets the
/// socket and when the server started (before `Restore::bind`).
pub(super) fn serve<T>(
    mut opts: RestoreOptions,
    vmm: impl FnOnce(&Path, Instant) -> Result<T, LabError>,
) -> Result<(T, RestoreSummary), LabError> {
    opts.quiet = true;
    let started = Instant::now();
    let restore = Restore::bind(opts).map_err(restore_err)?;
    let socket = restore.socket_path().to_path_buf();
    let server = std::thread::Builder::new()
        .name("lab-restore-server".into())
        .spawn(move || restore.run())
        .map_err(|e| LabError::os("spawning the restore server", e))?;
    let outcome = vmm(&socket, started);
    let summary = server
        .join()
        .map_err(|_| LabError::Panicked("the restore server".into()))?
        .map_err(restore_err)?;
    let value = outcome?;
    if !summary.clean() {
        return Err(LabError::Sample(format!(
            "the restore was not clean: {} {:?}",
            summary.line(),
            summary.errors
        )));
    }
    Ok((value, summary))
}

/// The working-set trace of a case, recorded once (a 4 KiB on-demand
/// restore, untimed) and kept open for the lab's lifetime: the path
/// returned is the open file's (`/proc/<lab>/fd/N`), its name unlinked as
/// soon as it was recorded, so that no trace is left behind however the
/// lab ends.
pub(super) fn trace_for(
    snapshot: &Snapshot,
    p: &Params,
    runs: &[(usize, usize)],
) -> Result<PathBuf, LabError> {
    /// (snapshot MiB, working set %, threads) → the trace recorded.
    static TRACES: Memo<(usize, usize, usize), Arc<File>> = Memo::new();
    let key = (p.snapshot_mib, p.working_set_percent, p.threads);
    let trace = TRACES.get(key, || {
        let dir = scratch_dir("trace")?;
        let path = dir.path().join("working-set.trace");
        let mut opts = RestoreOptions::new(socket_path(), &snapshot.path);
        opts.handlers = handlers(p.threads);
        opts.record = Some(path.clone());
        // The trace alone: the first table's `prefetch` reads the local file
        // (the S3 table packs its own copy in the bucket, `s3.rs`).
        opts.pack = false;
        restore(snapshot, opts, PAGE, runs, p.threads)?;
        let file = File::open(&path)
            .map_err(|e| LabError::os(format!("opening the trace {}", path.display()), e))?;
        Ok(Arc::new(file))
        // `dir` goes here, with the trace's name.
    })?;
    Ok(fd_path(&trace))
}

/// Case `p`'s snapshot, its working set (runs of pages) and the trace
/// recorded of it.
pub(super) fn prepare(p: &Params) -> Result<(Arc<Snapshot>, Runs, PathBuf), LabError> {
    let bytes = p.snapshot_mib << 20;
    let snapshot = workload::snapshot(bytes)?;
    let pages = bytes / PAGE;
    let runs = workload::working_set(pages, pages * p.working_set_percent / 100);
    let trace = trace_for(&snapshot, p, &runs)?;
    Ok((snapshot, runs, trace))
}

/// The options restoring case `p`'s `snapshot` from its file with `how`,
/// and the guest's page size.
pub(super) fn local_options(
    how: How,
    snapshot: &Snapshot,
    p: &Params,
    trace: PathBuf,
) -> (RestoreOptions, usize) {
    let mut opts = RestoreOptions::new(socket_path(), &snapshot.path);
    opts.handlers = handlers(p.threads);
    // Every handler has the working set's pages of the memory file mapped
    // before the VMM connects (Firecracker's examples map the whole file;
    // only the pages a variant copies matter, and mapping 256 MiB for each
    // repetition would only cost the lab time). `copy-all` maps it all.
    opts.populate = Populate::Trace(trace.clone());
    let mut page = PAGE;
    match how {
        How::OnDemand { window } => opts.fault_around = window,
        How::Prefetch => {
            opts.prefetch = Some(trace);
            // One per CPU: copying is the kernel's work, on the CPU asking.
            opts.prefetch_threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        }
        How::CopyAll => opts.copy_all = true,
        How::Hugepages => {
            // Each fault copies a whole 2 MiB page: all of its bytes mapped
            // ahead, as Firecracker's examples map the whole file.
            opts.populate = Populate::All;
            page = HUGE_PAGE;
        }
    }
    (opts, page)
}

/// Measures one case with one restore method.
pub(crate) fn measure(how: How, case: &Case<Params>) -> Result<Sample, LabError> {
    let p = case.params;
    let (snapshot, runs, trace) = prepare(&p)?;
    let (opts, page) = local_options(how, &snapshot, &p, trace);
    let r = restore(&snapshot, opts, page, &runs, p.threads)?;
    let s = &r.summary.stats;
    let copied = r.summary.bytes_copied();
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let ws_bytes = (runs.iter().map(|r| r.1).sum::<usize>() * PAGE) as u64;
    Ok(Sample::new()
        .with("time_ms", r.time.as_secs_f64() * 1e3)
        .with("cpu_ms", r.cpu.as_secs_f64() * 1e3)
        .with("demand_faults", s.faults as f64)
        .with("copied_mib", mib(copied))
        .with("unread_mib", mib(copied.saturating_sub(ws_bytes))))
}
