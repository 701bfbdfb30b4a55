//! `restore` from an object store (issue 24): the same snapshot and
//! working set as the first table, served by `herdless-uffd` from
//! `s3://` through its chunk cache, from an S3 server in this process
//! (`herdless-s3d`: s3s over s3s-fs, the objects on tmpfs, on 127.0.0.1)
//! that adds a round trip of 0, 5 or 20 ms to every request. Rows: that
//! latency; 4 workload threads, 4 handler threads. Variants:
//! - `local-prefetch`: the first table's `prefetch`, from the local file;
//! - `s3-prefetch` (after): the recorded working set prefetched from the
//!   object (its chunks queued in trace order when the handler starts, 16
//!   GETs at once), demand faults first; a cold host cache;
//! - `s3-on-demand`: faults only, 2 MiB chunks (a fault waits for its
//!   chunk; the next faults in it find it here);
//! - `s3-on-demand-4k` (before): faults only, 4 KiB range GETs (one GET
//!   per page); run on every 16th run of the working set and its time
//!   multiplied by 16 (a page's GET shares nothing with another's: the
//!   time is proportional to the pages, and the whole working set would
//!   take minutes per repetition at 20 ms; its `gets` and `fetched_mib`
//!   are multiplied by 16 too);
//! - `s3-prefetch-4x`: four restores of the object at once (one workload
//!   thread each), sharing one cold host cache.
//!
//! Timed, as in the first table, from the handoff until every thread has
//! touched its share; the handler's `HEAD` of the object comes before (a
//! restore is refused before it listens when the object is missing). The
//! chunks of the trace start to be fetched when the handler starts,
//! without waiting: here the VMM connects right after.
//!
//! Metrics besides `time_ms`: `gets`, range GETs the server answered;
//! `gets_per_chunk`, of those, per distinct chunk (1: each fetched once on
//! the host, however many restores); `fetched_mib`, bytes the restores
//! fetched; `host_hits`, chunks they read from the host cache instead.
//! Targets at 20 ms: `s3-prefetch/local-prefetch` ≤ 2;
//! `s3-on-demand-4k/s3-on-demand` ≥ 10; and at every latency four
//! restores fetch no more GETs per chunk than one
//! (`s3-prefetch-4x/s3-prefetch` on `gets_per_chunk` ≤ 1).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use herdless_pager::object::ObjectOptions;
use herdless_pager::restore::{RestoreOptions, RestoreSummary};
use herdless_s3d::{Credentials, S3Server};
use serde::Serialize;

use super::run::{self, socket_path};
use super::workload::{self, Snapshot, PAGE};
use crate::harness::scratch::{self, scratch_dir};
use crate::harness::{Case, LabError, Metric, PerSuite, Ratio, Role, Sample, Section};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Snapshot (guest memory) size in MiB.
    pub snapshot_mib: usize,
    /// Working set, in percent of the snapshot.
    pub working_set_percent: usize,
    /// Workload threads (the guest's vCPUs).
    pub threads: usize,
    /// Round trip added to every request, in milliseconds.
    pub latency_ms: u64,
}

/// How a variant restores.
#[derive(Clone, Copy, Debug)]
enum How {
    LocalPrefetch,
    Prefetch,
    OnDemand { chunk: u64, sample: usize },
    PrefetchFour,
}

const BUCKET: &str = "lab";
/// Chunk size of the chunked variants (herdless-uffd's default).
const CHUNK: u64 = herdless_pager::object::DEFAULT_CHUNK_SIZE;
/// One run in this many of the working set for `s3-on-demand-4k`.
const SAMPLE_4K: usize = 16;

fn cases(snapshot_mib: usize, latencies: &[u64]) -> Vec<Case<Params>> {
    let params = |latency_ms| Params {
        snapshot_mib,
        working_set_percent: 10,
        threads: 4,
        latency_ms,
    };
    latencies
        .iter()
        .map(|&ms| Case::new(format!("{ms} ms"), params(ms)))
        .collect()
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
    .metric(Metric::lower("gets", "GETs"))
    .metric(Metric::lower("gets_per_chunk", "GETs"))
    .metric(Metric::lower("fetched_mib", "MiB"))
    .metric(Metric::higher("host_hits", "chunks"))
    .evidence(&["gets", "gets_per_chunk", "fetched_mib", "host_hits"])
    .variants(
        measure,
        [
            ("local-prefetch", Role::Peer, How::LocalPrefetch),
            ("s3-prefetch", Role::After, How::Prefetch),
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
    .ratio(
        Ratio::of("s3-prefetch-4x", "s3-prefetch")
            .on_metric("gets_per_chunk")
            .at_most(1.0),
    )
}

/// The lab's S3 server and the snapshots it holds (key by size).
struct Store {
    server: S3Server,
    keys: HashMap<usize, String>,
}

/// The server's directory, removed when the lab exits.
static ROOT: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_root() {
    if let Some(root) = ROOT.get() {
        let _ = std::fs::remove_dir_all(root);
    }
}

/// The server (started once) holding `snapshot` as an object; its URL.
fn store_with(snapshot: &Snapshot) -> Result<(&'static Mutex<Store>, String), LabError> {
    static STORE: OnceLock<Mutex<Store>> = OnceLock::new();
    let store = match STORE.get() {
        Some(s) => s,
        None => {
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
            let _ = STORE.set(Mutex::new(Store {
                server,
                keys: HashMap::new(),
            }));
            STORE
                .get()
                .ok_or_else(|| LabError::Panicked("the S3 server".into()))?
        }
    };
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
    Ok((store, format!("s3://{BUCKET}/{key}")))
}

/// Restore options for `url` through the lab's server.
fn s3_options(server: &S3Server, url: &str, chunk: u64, cache: &Path) -> RestoreOptions {
    let mut opts = RestoreOptions::new(socket_path(), url);
    let config = server
        .env()
        .into_iter()
        .filter_map(|(k, v)| {
            let key = match k {
                "AWS_ENDPOINT_URL" => "aws_endpoint",
                "AWS_ALLOW_HTTP" => "aws_allow_http",
                "AWS_REGION" => "aws_region",
                "AWS_ACCESS_KEY_ID" => "aws_access_key_id",
                "AWS_SECRET_ACCESS_KEY" => "aws_secret_access_key",
                _ => return None,
            };
            Some((key.to_string(), v))
        })
        .collect();
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
    let p = case.params;
    let bytes = p.snapshot_mib << 20;
    let snapshot = workload::snapshot(bytes)?;
    let pages = bytes / PAGE;
    let runs = workload::working_set(pages, pages * p.working_set_percent / 100);
    // The working set recorded once (the first table's trace).
    let rp = super::Params {
        snapshot_mib: p.snapshot_mib,
        working_set_percent: p.working_set_percent,
        threads: p.threads,
    };
    let trace = run::trace_for(&snapshot, &rp, &runs)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let How::LocalPrefetch = how {
        let mut opts = RestoreOptions::new(socket_path(), &snapshot.path);
        opts.handlers = run::handlers(p.threads);
        opts.populate = herdless_pager::restore::Populate::Trace(trace.clone());
        opts.prefetch = Some(trace);
        opts.prefetch_threads = cpus;
        let r = run::restore(&snapshot, opts, PAGE, &runs, p.threads)?;
        return Ok(Sample::new().with("time_ms", r.time.as_secs_f64() * 1e3));
    }
    let (store, url) = store_with(&snapshot)?;
    let store = store
        .lock()
        .map_err(|_| LabError::Panicked("the S3 server".into()))?;
    let server = &store.server;
    server.set_latency(Duration::from_millis(p.latency_ms));
    server.reset_counts();
    let cache = scratch_dir("s3-cache")?;
    let cache = cache.path();
    // (time, the restores' figures, what the sample stands for)
    let result = (|| -> Result<(Duration, Vec<RestoreSummary>, u32), LabError> {
        match how {
            How::LocalPrefetch => unreachable!("measured above"),
            How::Prefetch => {
                let mut opts = s3_options(server, &url, CHUNK, cache);
                opts.handlers = p.threads;
                opts.prefetch = Some(trace);
                opts.prefetch_threads = cpus;
                let r = run::restore(&snapshot, opts, PAGE, &runs, p.threads)?;
                Ok((r.time, vec![r.summary], 1))
            }
            How::OnDemand { chunk, sample } => {
                let mut opts = s3_options(server, &url, chunk, cache);
                opts.handlers = p.threads;
                let sampled: Vec<(usize, usize)> = runs.iter().step_by(sample).copied().collect();
                let r = run::restore(&snapshot, opts, PAGE, &sampled, p.threads)?;
                Ok((r.time, vec![r.summary], sample as u32))
            }
            How::PrefetchFour => {
                let t0 = std::time::Instant::now();
                let outcomes: Vec<Result<run::Restored, LabError>> = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..4)
                        .map(|_| {
                            let mut opts = s3_options(server, &url, CHUNK, cache);
                            opts.handlers = 1;
                            opts.prefetch = Some(trace.clone());
                            opts.prefetch_threads = 1;
                            let (snapshot, runs) = (&snapshot, &runs);
                            s.spawn(move || run::restore(snapshot, opts, PAGE, runs, 1))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err(LabError::Panicked("a restore".into())))
                        })
                        .collect()
                });
                let elapsed = t0.elapsed();
                let mut summaries = Vec::new();
                let mut slowest = Duration::ZERO;
                for o in outcomes {
                    let r = o?;
                    slowest = slowest.max(r.time);
                    summaries.push(r.summary);
                }
                // The slowest restore's own time (the four start together;
                // `elapsed` also counts their setup).
                Ok((slowest.min(elapsed), summaries, 1))
            }
        }
    })();
    server.set_latency(Duration::ZERO);
    let (time, summaries, scale) = result?;
    let scale_f = f64::from(scale);
    let counts = server.gets_of(BUCKET, url.rsplit('/').next().unwrap_or_default());
    let gets: u64 = counts.values().sum();
    let chunks = counts.len().max(1) as f64;
    let object = summaries.iter().filter_map(|s| s.object.as_ref());
    let (fetched, host_hits) = object.fold((0u64, 0u64), |(f, h), o| {
        (f + o.fetched_bytes, h + o.host_hits)
    });
    Ok(Sample::new()
        .with("time_ms", time.as_secs_f64() * 1e3 * scale_f)
        .with("gets", gets as f64 * scale_f)
        .with("gets_per_chunk", gets as f64 / chunks)
        .with("fetched_mib", fetched as f64 / f64::from(1 << 20) * scale_f)
        .with("host_hits", host_hits as f64 * scale_f))
}
