//! What a restore did: the one line `herdless-uffd` prints when the VMM
//! goes away, and the same figures (and more) as JSON for `--stats-json`.

use std::time::Duration;

use serde_json::json;

use crate::PagerStats;

/// Why serving ended.
///
/// # Examples
/// ```
/// # use herdless_pager::restore::{Restore, RestoreOptions};
/// # use herdless_pager::vmm::GuestMemory;
/// # let Ok(vm) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
/// # let dir = std::env::temp_dir().join(format!("herdless-doc-{}-{}", std::process::id(), line!()));
/// # std::fs::create_dir_all(&dir)?;
/// # std::fs::write(dir.join("vm.mem"), vec![7u8; 1 << 20])?;
/// # let mut opts = RestoreOptions::new(dir.join("sock"), dir.join("vm.mem"));
/// # opts.quiet = true;
/// # let restore = Restore::bind(opts)?;
/// # let serving = std::thread::spawn(move || restore.run());
/// # let conn = vm.handoff(&dir.join("sock"))?;
/// # let mut b = [0u8; 1];
/// # vm.read(vm.regions()[0].base, &mut b)?;
/// # drop(conn);
/// # let summary = serving.join().unwrap()?;
/// # std::fs::remove_dir_all(&dir)?;
/// // `summary`: a restore of a 1 MiB guest that read one byte, then exited.
/// use herdless_pager::restore::Ending;
/// assert_eq!(summary.ending, Ending::VmmClosed);
/// assert_eq!(summary.ending.to_string(), "the VMM closed the connection");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The VMM closed its connection (it exited, or closed the socket).
    VmmClosed,
    /// A fill failed with `ESRCH` (or `ENOSPC`): the VMM's memory is gone.
    VmmGone,
    /// `SIGINT` or `SIGTERM` (its number), once serving had begun (with
    /// [`stop_on_signals`](super::RestoreOptions::stop_on_signals)): no
    /// output was written.
    Signal(i32),
    /// The handlers stopped on an error they cannot serve past (reported
    /// in the summary's errors); the VMM's next faults would hang.
    HandlersFailed,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::VmmClosed => f.write_str("the VMM closed the connection"),
            Ending::VmmGone => f.write_str("the VMM's memory went away"),
            Ending::Signal(s) => write!(f, "stopped by signal {s}"),
            Ending::HandlersFailed => f.write_str("the handlers failed"),
        }
    }
}

/// The figures of one restore ([`Restore::run`](super::Restore::run)).
///
/// # Examples
/// ```
/// # use herdless_pager::restore::{Restore, RestoreOptions};
/// # use herdless_pager::vmm::GuestMemory;
/// # let Ok(vm) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
/// # let dir = std::env::temp_dir().join(format!("herdless-doc-{}-{}", std::process::id(), line!()));
/// # std::fs::create_dir_all(&dir)?;
/// # std::fs::write(dir.join("vm.mem"), vec![7u8; 1 << 20])?;
/// # let mut opts = RestoreOptions::new(dir.join("sock"), dir.join("vm.mem"));
/// # opts.quiet = true;
/// # let restore = Restore::bind(opts)?;
/// # let serving = std::thread::spawn(move || restore.run());
/// # let conn = vm.handoff(&dir.join("sock"))?;
/// # let mut b = [0u8; 1];
/// # vm.read(vm.regions()[0].base, &mut b)?;
/// # drop(conn);
/// # let summary = serving.join().unwrap()?;
/// # std::fs::remove_dir_all(&dir)?;
/// // `summary`: a restore of a 1 MiB guest that read one byte, then exited.
/// assert_eq!(summary.stats.faults, 1);
/// assert_eq!(summary.page_sizes, [rustix::param::page_size()]);
/// assert!(summary.errors.is_empty() && summary.recorded_pages == 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct RestoreSummary {
    /// The pager's counters.
    pub stats: PagerStats,
    /// Why serving ended.
    pub ending: Ending,
    /// From the handoff to the end.
    pub served_for: Duration,
    /// From the start of [`Restore::bind`](super::Restore::bind) until it
    /// listened: opening the memory and the traces (from an object store,
    /// their round trips, made at once) and reading ahead (a file's pages;
    /// an object's chunks only start to come).
    pub set_up_for: Duration,
    /// From listening until the VMM's handoff message arrived: the VMM's
    /// own start-up (a Firecracker: its process, its API, the snapshot's
    /// state loaded and guest memory made), during which an object's
    /// chunks were already being fetched.
    pub handed_off_after: Duration,
    /// Pages of the prefetch trace (0 without `--prefetch`).
    pub trace_pages: u64,
    /// Of those, pages no mapping holds (a trace of another layout).
    pub trace_unmapped: u64,
    /// Pages written to the `--record` trace (0 if none was written).
    pub recorded_pages: u64,
    /// Errors reported while serving (source reads, faults outside every
    /// mapping, failed system calls), as text.
    pub errors: Vec<String>,
    /// The page sizes served, in bytes, smallest first (the host's, and
    /// 2 MiB for hugetlbfs regions).
    pub page_sizes: Vec<usize>,
    /// What the object source did, when serving an object URL.
    #[cfg(feature = "object-store")]
    pub object: Option<crate::object::ObjectStats>,
    /// What the prefetch trace's pack did, or why it was not used (`None`:
    /// no `--prefetch`, or packs turned off).
    pub pack: Option<super::pack::PackSummary>,
}

impl RestoreSummary {
    /// Pages copied from the memory file, all causes (of whatever size:
    /// see [`bytes_copied`](Self::bytes_copied)).
    ///
    /// # Examples
    /// ```
    /// # use herdless_pager::restore::{Restore, RestoreOptions};
    /// # use herdless_pager::vmm::GuestMemory;
    /// # let Ok(vm) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// # let dir = std::env::temp_dir().join(format!("herdless-doc-{}-{}", std::process::id(), line!()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # std::fs::write(dir.join("vm.mem"), vec![7u8; 1 << 20])?;
    /// # let mut opts = RestoreOptions::new(dir.join("sock"), dir.join("vm.mem"));
    /// # opts.quiet = true;
    /// # let restore = Restore::bind(opts)?;
    /// # let serving = std::thread::spawn(move || restore.run());
    /// # let conn = vm.handoff(&dir.join("sock"))?;
    /// # let mut b = [0u8; 1];
    /// # vm.read(vm.regions()[0].base, &mut b)?;
    /// # drop(conn);
    /// # let summary = serving.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// // `summary`: a restore of a 1 MiB guest that read one byte, then exited.
    /// assert_eq!(summary.pages_copied(), 1); // fault-around is off by default
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pages_copied(&self) -> u64 {
        self.stats.pages_installed()
    }

    /// Bytes copied from the memory file, all causes.
    ///
    /// # Examples
    /// ```
    /// # use herdless_pager::restore::{Restore, RestoreOptions};
    /// # use herdless_pager::vmm::GuestMemory;
    /// # let Ok(vm) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// # let dir = std::env::temp_dir().join(format!("herdless-doc-{}-{}", std::process::id(), line!()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # std::fs::write(dir.join("vm.mem"), vec![7u8; 1 << 20])?;
    /// # let mut opts = RestoreOptions::new(dir.join("sock"), dir.join("vm.mem"));
    /// # opts.quiet = true;
    /// # let restore = Restore::bind(opts)?;
    /// # let serving = std::thread::spawn(move || restore.run());
    /// # let conn = vm.handoff(&dir.join("sock"))?;
    /// # let mut b = [0u8; 1];
    /// # vm.read(vm.regions()[0].base, &mut b)?;
    /// # drop(conn);
    /// # let summary = serving.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// // `summary`: a restore of a 1 MiB guest that read one byte, then exited.
    /// assert_eq!(summary.bytes_copied(), rustix::param::page_size() as u64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes_copied(&self) -> u64 {
        self.stats.bytes_installed
    }

    /// Whether every fault was served from the memory file or with zeros
    /// where they were due (no poison, no error): `herdless-uffd` exits 0
    /// then, 3 otherwise.
    ///
    /// # Examples
    /// ```
    /// # use herdless_pager::restore::{Restore, RestoreOptions};
    /// # use herdless_pager::vmm::GuestMemory;
    /// # let Ok(vm) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// # let dir = std::env::temp_dir().join(format!("herdless-doc-{}-{}", std::process::id(), line!()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # std::fs::write(dir.join("vm.mem"), vec![7u8; 1 << 20])?;
    /// # let mut opts = RestoreOptions::new(dir.join("sock"), dir.join("vm.mem"));
    /// # opts.quiet = true;
    /// # let restore = Restore::bind(opts)?;
    /// # let serving = std::thread::spawn(move || restore.run());
    /// # let conn = vm.handoff(&dir.join("sock"))?;
    /// # let mut b = [0u8; 1];
    /// # vm.read(vm.regions()[0].base, &mut b)?;
    /// # drop(conn);
    /// # let summary = serving.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// // `summary`: a restore of a 1 MiB guest that read one byte, then exited.
    /// assert!(summary.clean());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clean(&self) -> bool {
        self.errors.is_empty() && self.stats.poisoned_pages == 0 && self.stats.unmapped_faults == 0
    }

    /// The one-line summary `herdless-uffd` prints.
    ///
    /// # Examples
    /// ```
    /// # use herdless_pager::restore::{Restore, RestoreOptions};
    /// # use herdless_pager::vmm::GuestMemory;
    /// # let Ok(vm) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// # let dir = std::env::temp_dir().join(format!("herdless-doc-{}-{}", std::process::id(), line!()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # std::fs::write(dir.join("vm.mem"), vec![7u8; 1 << 20])?;
    /// # let mut opts = RestoreOptions::new(dir.join("sock"), dir.join("vm.mem"));
    /// # opts.quiet = true;
    /// # let restore = Restore::bind(opts)?;
    /// # let serving = std::thread::spawn(move || restore.run());
    /// # let conn = vm.handoff(&dir.join("sock"))?;
    /// # let mut b = [0u8; 1];
    /// # vm.read(vm.regions()[0].base, &mut b)?;
    /// # drop(conn);
    /// # let summary = serving.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// // `summary`: a restore of a 1 MiB guest that read one byte, then exited.
    /// let line = summary.line();
    /// assert!(line.starts_with("herdless-uffd: 1 faults served, 1 pages copied"), "{line}");
    /// assert!(line.contains("the VMM closed the connection after"), "{line}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn line(&self) -> String {
        let s = &self.stats;
        let us = |d: Duration| d.as_micros();
        #[cfg(feature = "object-store")]
        let object = self.object.as_ref().map(object_part).unwrap_or_default();
        #[cfg(not(feature = "object-store"))]
        let object = String::new();
        let pack = self
            .pack
            .as_ref()
            .map(|p| format!("{}; ", p.line()))
            .unwrap_or_default();
        format!(
            "herdless-uffd: {} faults served, {} pages copied ({:.1} MiB; {} on demand, {} \
             fault-around, {} prefetched), {} zeroed, {} discarded, {} poisoned; fault latency \
             p50 {}us p99 {}us; {}{}set up in {:.1} ms, handed off {:.1} ms later; {} errors; \
             {} after {:.1} s",
            s.faults,
            self.pages_copied(),
            self.bytes_copied() as f64 / f64::from(1 << 20),
            s.pages_on_demand,
            s.pages_fault_around,
            s.pages_prefetched + s.pages_populated,
            s.zero_pages,
            s.pages_discarded,
            s.poisoned_pages,
            us(s.latency.p50),
            us(s.latency.p99),
            object,
            pack,
            self.set_up_for.as_secs_f64() * 1e3,
            self.handed_off_after.as_secs_f64() * 1e3,
            self.errors.len(),
            self.ending,
            self.served_for.as_secs_f64()
        )
    }

    /// Everything, as JSON (`--stats-json`).
    ///
    /// # Examples
    /// ```
    /// # use herdless_pager::restore::{Restore, RestoreOptions};
    /// # use herdless_pager::vmm::GuestMemory;
    /// # let Ok(vm) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// # let dir = std::env::temp_dir().join(format!("herdless-doc-{}-{}", std::process::id(), line!()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # std::fs::write(dir.join("vm.mem"), vec![7u8; 1 << 20])?;
    /// # let mut opts = RestoreOptions::new(dir.join("sock"), dir.join("vm.mem"));
    /// # opts.quiet = true;
    /// # let restore = Restore::bind(opts)?;
    /// # let serving = std::thread::spawn(move || restore.run());
    /// # let conn = vm.handoff(&dir.join("sock"))?;
    /// # let mut b = [0u8; 1];
    /// # vm.read(vm.regions()[0].base, &mut b)?;
    /// # drop(conn);
    /// # let summary = serving.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// // `summary`: a restore of a 1 MiB guest that read one byte, then exited.
    /// let json = summary.to_json();
    /// assert_eq!(json["faults"], 1);
    /// assert_eq!(json["pages_copied"], 1);
    /// assert_eq!(json["ending"], "the VMM closed the connection");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let s = &self.stats;
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        json!({
            "ending": self.ending.to_string(),
            "served_for_s": self.served_for.as_secs_f64(),
            "set_up_for_s": self.set_up_for.as_secs_f64(),
            "handed_off_after_s": self.handed_off_after.as_secs_f64(),
            "page_size": self.page_sizes.first().copied().unwrap_or(0),
            "page_sizes": self.page_sizes,
            "faults": s.faults,
            "duplicate_faults": s.duplicate_faults,
            "pages_copied": self.pages_copied(),
            "bytes_copied": self.bytes_copied(),
            "pages_on_demand": s.pages_on_demand,
            "pages_fault_around": s.pages_fault_around,
            "pages_prefetched": s.pages_prefetched + s.pages_populated,
            "zero_pages": s.zero_pages,
            "discard_events": s.discard_events,
            "pages_discarded": s.pages_discarded,
            "poisoned_pages": s.poisoned_pages,
            "source_errors": s.source_errors,
            "unmapped_faults": s.unmapped_faults,
            "fills_unmapped": s.fills_unmapped,
            "eexist": s.eexist,
            "eagain_partial": s.eagain_partial,
            "eagain_retry": s.eagain_retry,
            "copier_reads": s.copier_reads,
            "prefetch_passes": s.prefetch_passes,
            "per_handler_faults": s.per_handler_faults,
            "latency_ns": {
                "count": s.latency.count,
                "mean": ns(s.latency.mean),
                "p50": ns(s.latency.p50),
                "p99": ns(s.latency.p99),
                "max": ns(s.latency.max),
            },
            "trace_pages": self.trace_pages,
            "trace_unmapped": self.trace_unmapped,
            "recorded_pages": self.recorded_pages,
            "errors": self.errors,
            "object": self.object_json(),
            "pack": self.pack.as_ref().map(super::pack::PackSummary::to_json),
        })
    }

    #[cfg(feature = "object-store")]
    fn object_json(&self) -> serde_json::Value {
        self.object
            .as_ref()
            .map_or(serde_json::Value::Null, object_json)
    }

    #[cfg(not(feature = "object-store"))]
    fn object_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// The object source's part of the one line (ends with "; ").
#[cfg(feature = "object-store")]
fn object_part(o: &crate::object::ObjectStats) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!(
        "object: {} fetches ({:.1} MiB, {} retried, {} chunks failed), {} host cache hits, {} \
         process hits, fetch p50 {:.1}ms p99 {:.1}ms, {} chunk waits (p99 {:.1}ms); ",
        o.fetches,
        o.fetched_bytes as f64 / f64::from(1 << 20),
        o.fetch_retries,
        o.chunks_failed,
        o.host_hits,
        o.process_hits,
        ms(o.fetch_latency.p50),
        ms(o.fetch_latency.p99),
        o.chunk_waits,
        ms(o.wait_latency.p99),
    )
}

/// The object source's figures as JSON.
#[cfg(feature = "object-store")]
fn object_json(o: &crate::object::ObjectStats) -> serde_json::Value {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let lat = |l: &crate::Latency| {
        json!({
            "count": l.count,
            "mean": ns(l.mean),
            "p50": ns(l.p50),
            "p99": ns(l.p99),
            "max": ns(l.max),
        })
    };
    json!({
        "chunk_size": o.chunk_size,
        "chunks": o.chunks,
        "fetches": o.fetches,
        "prefetch_fetches": o.prefetch_fetches,
        "fetched_bytes": o.fetched_bytes,
        "fetch_failures": o.fetch_failures,
        "fetch_retries": o.fetch_retries,
        "chunks_failed": o.chunks_failed,
        "process_hits": o.process_hits,
        "host_hits": o.host_hits,
        "host_lock_waits": o.host_lock_waits,
        "host_lock_timeouts": o.host_lock_timeouts,
        "chunk_waits": o.chunk_waits,
        "cache_write_errors": o.cache_write_errors,
        "cache_evictions": o.cache_evictions,
        "fetch_latency_ns": lat(&o.fetch_latency),
        "wait_latency_ns": lat(&o.wait_latency),
    })
}
