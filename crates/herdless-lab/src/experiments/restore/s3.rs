//! `restore` from an object store (issue 24): the same snapshot and
//! working set as the first table, served by `herdless-uffd` from
//! `s3://` through its chunk cache, from an S3 server in this process
//! (`herdless-s3d`: s3s over s3s-fs, the objects on tmpfs, on 127.0.0.1)
//! whose answers start 0, 5 or 20 ms after their requests arrive (a
//! round trip, the server's own work done within it, as a remote store's
//! is). Rows: that latency; 4 workload threads, 4 handler threads.
//! Variants:
//! - `local-prefetch`: the first table's `prefetch`, from the local file;
//! - `s3-prefetch` (after): the recorded working set prefetched from its
//!   pack (`TRACE.pages` beside the trace in the bucket: the working set's
//!   pages in trace order, fetched in 2 MiB range GETs, 16 at once, from
//!   when the handler starts), demand faults first; a cold host cache. The
//!   trace and its pack are put in the bucket as `herdless-uffd --record
//!   s3://…` writes them (the pack bound to the memory object by its ETag);
//! - `s3-prefetch-no-pack`: the same with `--no-pack`: the memory's chunks
//!   holding the working set, in trace order (with a working set scattered
//!   over every chunk, the whole object);
//! - `s3-on-demand`: faults only, 2 MiB chunks (a fault waits for its
//!   chunk; the next faults in it find it here);
//! - `s3-on-demand-4k` (before): faults only, 4 KiB range GETs (one GET
//!   per page); run on every 16th run of the working set and its time
//!   multiplied by 16 (a page's GET shares nothing with another's: the
//!   time is proportional to the pages, and the whole working set would
//!   take minutes per repetition at 20 ms; its `gets` and `fetched_mib`
//!   are multiplied by 16 too);
//! - `s3-prefetch-4x`: four restores of the object at once (one workload
//!   thread each), sharing one cold host cache, with `--no-pack` (every
//!   chunk of the memory is wanted: the sharing shows on all of them).
//!
//! Timed, as in the first table, from the handoff until every thread has
//! touched its share; the handler's `HEAD` of the object comes before (a
//! restore is refused before it listens when the object is missing). The
//! chunks of the trace start to be fetched when the handler starts,
//! without waiting: here the VMM connects right after.
//!
//! Metrics besides `time_ms`: `cpu_ms`, as in the first table (here it
//! counts the S3 server's CPU too: it runs in this process; four restores
//! at once overlap, so `s3-prefetch-4x` has none); `gets`, range GETs the
//! server answered (of
//! the memory and the pack); `gets_per_chunk`, of those, per distinct
//! chunk (1: each fetched once on the host, however many restores);
//! `fetched_mib`, bytes the restores fetched; `host_hits`, chunks they
//! read from the host cache instead. Targets at 20 ms:
//! `s3-prefetch/local-prefetch` ≤ 2; `s3-on-demand-4k/s3-on-demand` ≥ 10;
//! and at every latency four restores fetch no more GETs per chunk than
//! one (`s3-prefetch-4x/s3-prefetch-no-pack` on `gets_per_chunk` ≤ 1).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use herdless_pager::object::{ObjectOptions, ObjectSource};
use herdless_pager::restore::{pack, RestoreOptions, RestoreSummary, Trace};
use herdless_s3d::{Credentials, S3Server};
use serde::Serialize;

use super::run::{self, socket_path};
use super::workload::{Snapshot, PAGE};
use crate::harness::scratch::{self, scratch_dir, Memo};
use crate::harness::{gang, Case, LabError, Metric, PerSuite, Ratio, Role, Sample, Section};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// The first table's row: snapshot, working set, threads.
    #[serde(flatten)]
    pub restore: super::Params,
    /// Round trip added to every request, in milliseconds.
    pub latency_ms: u64,
}

/// How a variant restores.
#[derive(Clone, Copy, Debug)]
enum How {
    LocalPrefetch,
    Prefetch { pack: bool },
    OnDemand { chunk: u64, sample: usize },
    PrefetchFour,
}

const BUCKET: &str = "lab";
/// Chunk size of the chunked variants (herdless-uffd's default).
const CHUNK: u64 = herdless_pager::object::DEFAULT_CHUNK_SIZE;
/// One run in this many of the working set for `s3-on-demand-4k`.
const SAMPLE_4K: usize = 16;

fn cases(snapshot_mib: usize, latencies: &[u64]) -> Vec<Case<Params>> {
    let restore = super::Params {
        snapshot_mib,
        working_set_percent: 10,
        threads: 4,
    };
    Case::list(latencies, |latency_ms| {
        (
            format!("{latency_ms} ms"),
            Params {
                restore,
                latency_ms,
            },
        )
    })
}

/// The section.
pub(super) fn section() -> Section<Params> {
    Section::new(
        "restore from S3, 10% working set, 4 threads (targets at 20 ms: s3-prefetch ≤ 2× \
         local-prefetch; 4k/chunks on demand ≥ 10; 4 restores: each chunk fetched once)",
        "latency",
        PerSuite {
            smoke: cases(16, &[0, 5]),
            quick: cases(256, &[0, 5, 20]),
            full: cases(256, &[0, 5, 20]),
        },
    )
    .metric(Metric::lower("time_ms", "ms"))
    .metric(Metric::lower("cpu_ms", "ms of CPU, whole process"))
    .metric(Metric::lower("gets", "GETs"))
    .metric(Metric::lower("gets_per_chunk", "GETs"))
    .metric(Metric::lower("fetched_mib", "MiB"))
    .metric(Metric::higher("host_hits", "chunks"))
    .evidence(&[
        "cpu_ms",
        "gets",
        "gets_per_chunk",
        "fetched_mib",
        "host_hits",
    ])
    .variants(
        measure,
        [
            ("local-prefetch", Role::Peer, How::LocalPrefetch),
            ("s3-prefetch", Role::After, How::Prefetch { pack: true }),
            (
                "s3-prefetch-no-pack",
                Role::Peer,
                How::Prefetch { pack: false },
            ),
            (
                "s3-on-demand",
                Role::Peer,
                How::OnDemand {
                    chunk: CHUNK,
                    sample: 1,
                },
            ),
            (
                "s3-on-demand-4k",
                Role::Before,
                How::OnDemand {
                    chunk: PAGE as u64,
                    sample: SAMPLE_4K,
                },
            ),
            ("s3-prefetch-4x", Role::Peer, How::PrefetchFour),
        ],
    )
    .ratio(
        Ratio::of("s3-prefetch", "local-prefetch")
            .at_most(2.0)
            .at_case("20 ms"),
    )
    .ratio(
        Ratio::of("s3-on-demand-4k", "s3-on-demand")
            .at_least(10.0)
            .at_case("20 ms"),
    )
    .ratio(Ratio::of("s3-prefetch-no-pack", "s3-prefetch").at_case("20 ms"))
    .ratio(
        Ratio::of("s3-prefetch-4x", "s3-prefetch-no-pack")
            .on_metric("gets_per_chunk")
            .at_most(1.0),
    )
}

/// The lab's S3 server and the snapshots it holds (key by size), and
/// the traces it holds with their packs (key by local trace).
struct Store {
    server: S3Server,
    keys: HashMap<usize, String>,
    traces: HashMap<PathBuf, String>,
}

/// The server's directory, removed when the lab exits.
static ROOT: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_root() {
    if let Some(root) = ROOT.get() {
        let _ = std::fs::remove_dir_all(root);
    }
}

/// The server (started once) holding `snapshot` as an object; its URL.
fn store_with(snapshot: &Snapshot) -> Result<(Arc<Mutex<Store>>, String), LabError> {
    static STORE: Memo<(), Arc<Mutex<Store>>> = Memo::new();
    let store = STORE.get((), || {
        let root = scratch::tmpfs_dir().join(format!("herdless-lab-s3-{}", std::process::id()));
        std::fs::create_dir_all(root.join(BUCKET))
            .map_err(|e| LabError::os("creating the S3 server's directory", e))?;
        if ROOT.set(root.clone()).is_ok() {
            // SAFETY: registers a plain extern "C" function without
            // arguments, as atexit requires.
            unsafe { libc::atexit(remove_root) };
        }
        let server = S3Server::start(&root, Credentials::new("AKLAB", "lab-secret-key"))
            .map_err(|e| LabError::os("starting the S3 server", e))?;
        Ok(Arc::new(Mutex::new(Store {
            server,
            keys: HashMap::new(),
            traces: HashMap::new(),
        })))
    })?;
    let mut s = store
        .lock()
        .map_err(|_| LabError::Panicked("the S3 server".into()))?;
    let key = match s.keys.get(&snapshot.len) {
        Some(k) => k.clone(),
        None => {
            let key = format!("snapshot-{}m", snapshot.len >> 20);
            let bytes = std::fs::read(&snapshot.path)
                .map_err(|e| LabError::os("reading the snapshot", e))?;
            s.server
                .put(BUCKET, &key, bytes)
                .map_err(|e| LabError::os("storing the snapshot in S3", e))?;
            s.keys.insert(snapshot.len, key.clone());
            key
        }
    };
    drop(s);
    Ok((store, format!("s3://{BUCKET}/{key}")))
}

/// The URL of the trace at `local` in the bucket, beside the memory at
/// `url`, with its pack, both stored as `herdless-uffd --record s3://…`
/// writes them (the pack packed from the snapshot's bytes, bound to the
/// memory object by the ETag the handler sees: `pack::build`); stored
/// once.
fn trace_in_store(
    store: &mut Store,
    snapshot: &Snapshot,
    local: &Path,
    url: &str,
) -> Result<String, LabError> {
    if let Some(t) = store.traces.get(local) {
        return Ok(t.clone());
    }
    let key = format!("{}.trace", url.rsplit('/').next().unwrap_or_default());
    let trace = Trace::read(local).map_err(|e| LabError::Sample(e.to_string()))?;
    let opts = s3_options(&store.server, url, CHUNK, Path::new("/nonexistent"));
    let etag = ObjectSource::open(
        url,
        &ObjectOptions {
            cache_dir: None,
            ..opts.object
        },
    )
    .map_err(|e| LabError::Sample(format!("the memory object: {e}")))?
    .etag()
    .map(str::to_string);
    let memory =
        std::fs::read(&snapshot.path).map_err(|e| LabError::os("reading the snapshot", e))?;
    let packed = pack::build(&trace, etag.as_deref(), |off, buf| {
        let off = off as usize;
        buf.copy_from_slice(&memory[off..off + buf.len()]);
        Ok(())
    })
    .map_err(|e| LabError::os("packing the trace", e))?;
    let put = |k: &str, bytes: Vec<u8>| {
        store
            .server
            .put(BUCKET, k, bytes)
            .map_err(|e| LabError::os("storing the trace in S3", e))
    };
    put(&format!("{key}.pages"), packed)?;
    put(&key, trace.to_text().into_bytes())?;
    let t = format!("s3://{BUCKET}/{key}");
    store.traces.insert(local.to_path_buf(), t.clone());
    Ok(t)
}

/// Restore options for `url` through the lab's server.
fn s3_options(server: &S3Server, url: &str, chunk: u64, cache: &Path) -> RestoreOptions {
    let mut opts = RestoreOptions::new(socket_path(), url);
    // The server's `AWS_*` variables, as object_store's keys.
    let config = server.env().into_iter();
    let config = config.map(|(k, v)| (k.to_ascii_lowercase(), v)).collect();
    opts.object = ObjectOptions {
        chunk_size: chunk,
        cache_dir: Some(cache.to_path_buf()),
        store_config: config,
        ..ObjectOptions::default()
    };
    opts
}

/// Measures one case with one restore method.
fn measure(how: How, case: &Case<Params>) -> Result<Sample, LabError> {
    let (p, latency_ms) = (case.params.restore, case.params.latency_ms);
    // The working set recorded once (the first table's trace).
    let (snapshot, runs, trace) = run::prepare(&p)?;
    if let How::LocalPrefetch = how {
        let (mut opts, page) = run::local_options(super::How::Prefetch, &snapshot, &p, trace);
        opts.pack = false;
        let r = run::restore(&snapshot, opts, page, &runs, p.threads)?;
        return Ok(Sample::new()
            .with("time_ms", r.time.as_secs_f64() * 1e3)
            .with("cpu_ms", r.cpu.as_secs_f64() * 1e3));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (store, url) = store_with(&snapshot)?;
    let mut store = store
        .lock()
        .map_err(|_| LabError::Panicked("the S3 server".into()))?;
    let s3_trace = trace_in_store(&mut store, &snapshot, &trace, &url)?;
    let server = &store.server;
    server.set_latency(Duration::from_millis(latency_ms));
    server.reset_counts();
    let cache = scratch_dir("s3-cache")?;
    let cache = cache.path();
    // (time, CPU time, the restores' figures, what the sample stands for)
    type Measured = (Duration, Option<Duration>, Vec<RestoreSummary>, u32);
    let result = (|| -> Result<Measured, LabError> {
        match how {
            How::LocalPrefetch => unreachable!("measured above"),
            How::Prefetch { pack } => {
                let mut opts = s3_options(server, &url, CHUNK, cache);
                opts.handlers = p.threads;
                opts.prefetch = Some(PathBuf::from(&s3_trace));
                opts.pack = pack;
                opts.prefetch_threads = cpus;
                let r = run::restore(&snapshot, opts, PAGE, &runs, p.threads)?;
                // Measured with its pack, or not at all.
                let not_used = r.summary.pack.as_ref().and_then(|p| p.not_used.clone());
                if let Some(why) = not_used.filter(|_| pack) {
                    return Err(LabError::Sample(format!("the pack was not used: {why}")));
                }
                Ok((r.time, Some(r.cpu), vec![r.summary], 1))
            }
            How::OnDemand { chunk, sample } => {
                let mut opts = s3_options(server, &url, chunk, cache);
                opts.handlers = p.threads;
                let sampled: Vec<(usize, usize)> = runs.iter().step_by(sample).copied().collect();
                let r = run::restore(&snapshot, opts, PAGE, &sampled, p.threads)?;
                Ok((r.time, Some(r.cpu), vec![r.summary], sample as u32))
            }
            How::PrefetchFour => {
                let four = gang(4, |_| {
                    let mut opts = s3_options(server, &url, CHUNK, cache);
                    opts.handlers = 1;
                    opts.prefetch = Some(PathBuf::from(&s3_trace));
                    opts.pack = false;
                    opts.prefetch_threads = 1;
                    run::restore(&snapshot, opts, PAGE, &runs, 1)
                })?;
                let mut summaries = Vec::new();
                let mut slowest = Duration::ZERO;
                for r in four.results {
                    let r = r?;
                    slowest = slowest.max(r.time);
                    summaries.push(r.summary);
                }
                // The slowest restore's own time (the four start together;
                // the gang's wall also counts their setup).
                Ok((slowest.min(four.wall), None, summaries, 1))
            }
        }
    })();
    server.set_latency(Duration::ZERO);
    let (time, cpu, summaries, scale) = result?;
    let scale_f = f64::from(scale);
    // The memory's range GETs and the pack's.
    let pack_key = format!("{}.pages", s3_trace.rsplit('/').next().unwrap_or_default());
    let (mut gets, mut chunks) = (0u64, 0usize);
    for key in [
        url.rsplit('/').next().unwrap_or_default(),
        pack_key.as_str(),
    ] {
        let counts = server.gets_of(BUCKET, key);
        gets += counts.values().sum::<u64>();
        chunks += counts.len();
    }
    let chunks = chunks.max(1) as f64;
    let packs = summaries
        .iter()
        .filter_map(|s| s.pack.as_ref().and_then(|p| p.object.as_ref()));
    let object = summaries
        .iter()
        .filter_map(|s| s.object.as_ref())
        .chain(packs);
    let (fetched, host_hits) = object.fold((0u64, 0u64), |(f, h), o| {
        (f + o.fetched_bytes, h + o.host_hits)
    });
    let sample = Sample::new().with("time_ms", time.as_secs_f64() * 1e3 * scale_f);
    // Four restores at once overlap: the process's CPU is not theirs apart.
    let sample = match cpu {
        Some(cpu) => sample.with("cpu_ms", cpu.as_secs_f64() * 1e3 * scale_f),
        None => sample,
    };
    Ok(sample
        .with("gets", gets as f64 * scale_f)
        .with("gets_per_chunk", gets as f64 / chunks)
        .with("fetched_mib", fetched as f64 / f64::from(1 << 20) * scale_f)
        .with("host_hits", host_hits as f64 * scale_f))
}
