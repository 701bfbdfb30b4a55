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
//! - `s3-prefetch-no-ahead`: the same with `--fetch-ahead 0`: the pack's
//!   chunks asked for once its first GET has answered, not in the same
//!   round trip (stop 37's restore);
//! - `s3-prefetch-no-pack`: the same as `s3-prefetch` with `--no-pack`: the memory's chunks
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
//! touched its share (`time_ms`); and from the handler's start
//! (`Restore::bind`) to the same end (`start_ms`). The handler's `HEAD` of
//! the object, the trace's GET and the pack's first GET are made at once
//! before it listens (a restore is refused before it listens when the
//! object is missing); the pack's parts start to be fetched then, without
//! waiting: here the VMM connects right after (a real one takes its own
//! time first: `firecracker`'s S3 section).
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

use std::path::{Path, PathBuf};
use std::time::Duration;

use herdless_pager::object::ObjectOptions;
use herdless_pager::restore::{RestoreOptions, RestoreSummary};
use serde::Serialize;

use super::run::{self, socket_path};
use super::workload::PAGE;
use crate::experiments::lab_s3::{key_of, lab_s3, LabS3};
use crate::harness::scratch::scratch_dir;
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
    Prefetch { pack: bool, ahead: bool },
    OnDemand { chunk: u64, sample: usize },
    PrefetchFour,
}

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
    .metric(Metric::lower("start_ms", "ms"))
    .metric(Metric::lower("cpu_ms", "ms of CPU, whole process"))
    .metric(Metric::lower("gets", "GETs"))
    .metric(Metric::lower("gets_per_chunk", "GETs"))
    .metric(Metric::lower("fetched_mib", "MiB"))
    .metric(Metric::higher("host_hits", "chunks"))
    .evidence(&[
        "start_ms",
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
            (
                "s3-prefetch",
                Role::After,
                How::Prefetch {
                    pack: true,
                    ahead: true,
                },
            ),
            (
                "s3-prefetch-no-ahead",
                Role::Peer,
                How::Prefetch {
                    pack: true,
                    ahead: false,
                },
            ),
            (
                "s3-prefetch-no-pack",
                Role::Peer,
                How::Prefetch {
                    pack: false,
                    ahead: true,
                },
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
        Ratio::of("s3-prefetch", "local-prefetch")
            .on_metric("start_ms")
            .at_case("20 ms"),
    )
    .ratio(
        Ratio::of("s3-on-demand-4k", "s3-on-demand")
            .at_least(10.0)
            .at_case("20 ms"),
    )
    .ratio(Ratio::of("s3-prefetch-no-ahead", "s3-prefetch").at_case("20 ms"))
    .ratio(Ratio::of("s3-prefetch-no-pack", "s3-prefetch").at_case("20 ms"))
    .ratio(
        Ratio::of("s3-prefetch-4x", "s3-prefetch-no-pack")
            .on_metric("gets_per_chunk")
            .at_most(1.0),
    )
}

/// Restore options for `url` through the lab's server.
fn s3_options(store: &LabS3, url: &str, chunk: u64, cache: &Path) -> RestoreOptions {
    let mut opts = RestoreOptions::new(socket_path(), url);
    opts.object = ObjectOptions {
        chunk_size: chunk,
        cache_dir: Some(cache.to_path_buf()),
        store_config: store.store_config(),
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
            .with("start_ms", r.from_start.as_secs_f64() * 1e3)
            .with("cpu_ms", r.cpu.as_secs_f64() * 1e3));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let s3 = lab_s3()?;
    let mut store = s3.lock()?;
    let key = format!("snapshot-{}m", snapshot.len >> 20);
    let (url, s3_trace) = store.snapshot_with_trace(&key, &snapshot.path, &trace)?;
    let store = &*store;
    let server = &store.server;
    server.set_latency(Duration::from_millis(latency_ms));
    server.reset_counts();
    let cache = scratch_dir("s3-cache")?;
    let cache = cache.path();
    // (time, before the handoff, CPU time, the restores' figures, what the
    // sample stands for)
    type Measured = (
        Duration,
        Duration,
        Option<Duration>,
        Vec<RestoreSummary>,
        u32,
    );
    let result = (|| -> Result<Measured, LabError> {
        match how {
            How::LocalPrefetch => unreachable!("measured above"),
            How::Prefetch { pack, ahead } => {
                let mut opts = s3_options(store, &url, CHUNK, cache);
                if !ahead {
                    opts.object.fetch_ahead = 0;
                }
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
                let before = r.from_start - r.time;
                Ok((r.time, before, Some(r.cpu), vec![r.summary], 1))
            }
            How::OnDemand { chunk, sample } => {
                let mut opts = s3_options(store, &url, chunk, cache);
                opts.handlers = p.threads;
                let sampled: Vec<(usize, usize)> = runs.iter().step_by(sample).copied().collect();
                let r = run::restore(&snapshot, opts, PAGE, &sampled, p.threads)?;
                let before = r.from_start - r.time;
                Ok((r.time, before, Some(r.cpu), vec![r.summary], sample as u32))
            }
            How::PrefetchFour => {
                let four = gang(4, |_| {
                    let mut opts = s3_options(store, &url, CHUNK, cache);
                    opts.handlers = 1;
                    opts.prefetch = Some(PathBuf::from(&s3_trace));
                    opts.pack = false;
                    opts.prefetch_threads = 1;
                    run::restore(&snapshot, opts, PAGE, &runs, 1)
                })?;
                let mut summaries = Vec::new();
                let (mut slowest, mut before) = (Duration::ZERO, Duration::ZERO);
                for r in four.results {
                    let r = r?;
                    if r.time >= slowest {
                        (slowest, before) = (r.time, r.from_start - r.time);
                    }
                    summaries.push(r.summary);
                }
                // The slowest restore's own time (the four start together;
                // the gang's wall also counts their setup).
                Ok((slowest.min(four.wall), before, None, summaries, 1))
            }
        }
    })();
    server.set_latency(Duration::ZERO);
    let (time, before, cpu, summaries, scale) = result?;
    let scale_f = f64::from(scale);
    // The memory's range GETs and the pack's.
    let pack_key = format!("{}.pages", key_of(&s3_trace));
    let (mut gets, mut inside, mut chunks) = (0u64, 0u64, 0usize);
    for key in [key_of(&url), pack_key.as_str()] {
        let (n, distinct) = store.gets_of(key);
        inside += n;
        chunks += distinct;
        // Those past the pack's end too: asked for ahead, refused.
        gets += store.all_gets_of(key);
    }
    // A restore that used a pack opened it with one GET of its first
    // 4 KiB, in place of a `HEAD` (its header, with its size and ETag):
    // counted in `gets`, not as a second fetch of the pack's first chunk.
    let probes = summaries
        .iter()
        .filter(|s| s.pack.as_ref().is_some_and(|p| p.not_used.is_none()))
        .count() as u64;
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
    let sample = Sample::new()
        .with("time_ms", time.as_secs_f64() * 1e3 * scale_f)
        .with(
            "start_ms",
            (before.as_secs_f64() + time.as_secs_f64() * scale_f) * 1e3,
        );
    // Four restores at once overlap: the process's CPU is not theirs apart.
    let sample = match cpu {
        Some(cpu) => sample.with("cpu_ms", cpu.as_secs_f64() * 1e3 * scale_f),
        None => sample,
    };
    Ok(sample
        .with("gets", gets as f64 * scale_f)
        .with(
            "gets_per_chunk",
            inside.saturating_sub(probes) as f64 / chunks,
        )
        .with("fetched_mib", fetched as f64 / f64::from(1 << 20) * scale_f)
        .with("host_hits", host_hits as f64 * scale_f))
}
