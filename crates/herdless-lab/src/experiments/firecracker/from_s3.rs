//! `firecracker`'s S3 section (issue 24): the same snapshot restored in a
//! real Firecracker by `herdless-uffd` serving it from `s3://`, through
//! the lab's S3 server (`lab_s3.rs`) whose answers start 0 or 20 ms after
//! their requests arrive, against the same handler serving the local
//! file. Each restore starts with a cold host cache.
//!
//! Variants:
//! - `hl-prefetch`: `--prefetch TRACE` from the local memory file (the
//!   first section's `hl-prefetch`);
//! - `hl-s3-prefetch` (after): the memory `s3://…`, `--prefetch s3://…`
//!   with the trace's pack (`TRACE.pages`) beside it in the bucket, as
//!   `herdless-uffd --record s3://…` leaves them;
//! - `hl-s3-no-ahead`: `hl-s3-prefetch` with `--fetch-ahead 0` (the
//!   pack's chunks asked for once its first GET has answered: stop 37's
//!   restore);
//! - `hl-s3-no-cache`: `hl-s3-prefetch` with `--no-cache` (no host cache:
//!   what writing the fetched chunks there costs the restore);
//! - `hl-s3-2m`: the memory `s3://…`, no trace, `--fault-around 2M`
//!   (every fault waits for its 2 MiB chunk).
//!
//! Besides the first section's metrics: `start_ms`, from the handler's
//! start to the first pass (its set-up, its S3 round trips included);
//! `setup_ms`, the handler's own start until it listened; and
//! `handoff_ms`, from its listening until Firecracker's handoff (the lab
//! then starts Firecracker, which loads the snapshot's state and makes the
//! guest memory): the time an object's chunks are fetched before the VMM
//! asks for anything.

use std::ffi::OsString;
use std::time::Duration;

use serde::Serialize;

use super::restore::{self, herdless_uffd, trace_of};
use super::snapshot;
use super::tools;
use super::{metrics, Pages, Params};
use crate::experiments::lab_s3::lab_s3;
use crate::harness::scratch::scratch_dir;
use crate::harness::{Case, LabError, Metric, PerSuite, Ratio, Role, Sample, Section};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct S3Params {
    /// The first section's row.
    #[serde(flatten)]
    pub vm: Params,
    /// Round trip added to every request, in milliseconds.
    pub latency_ms: u64,
}

/// Who serves the memory.
#[derive(Clone, Copy, Debug)]
enum Served {
    /// `herdless-uffd --prefetch` from the local file.
    LocalPrefetch,
    /// `herdless-uffd` from `s3://`: with `--prefetch` (and its pack), or
    /// with these options.
    S3 {
        prefetch: bool,
        args: &'static [&'static str],
    },
}

fn cases(ws_mib: usize, mem_mib: usize, latencies: &[u64]) -> Vec<Case<S3Params>> {
    let vm = Params {
        ws_mib,
        mem_mib,
        balloon_mib: 0,
    };
    Case::list(latencies, |latency_ms| {
        (format!("{latency_ms} ms"), S3Params { vm, latency_ms })
    })
}

/// The section.
pub(super) fn section() -> Section<S3Params> {
    let section = Section::new(
        "from S3 (the lab's server, a round trip per request), 4 KiB guest memory, the same \
         snapshot",
        "latency",
        PerSuite {
            smoke: cases(16, 128, &[0]),
            quick: cases(128, 512, &[0, 20]),
            full: cases(128, 512, &[0, 5, 20]),
        },
    );
    metrics(section)
        .metric(Metric::lower("gets", "GETs"))
        .evidence(&["gets"])
        .variants(
            measure,
            [
                ("hl-prefetch", Role::Peer, Served::LocalPrefetch),
                (
                    "hl-s3-prefetch",
                    Role::After,
                    Served::S3 {
                        prefetch: true,
                        args: &[],
                    },
                ),
                (
                    "hl-s3-no-ahead",
                    Role::Peer,
                    Served::S3 {
                        prefetch: true,
                        args: &["--fetch-ahead", "0"],
                    },
                ),
                (
                    "hl-s3-no-cache",
                    Role::Peer,
                    Served::S3 {
                        prefetch: true,
                        args: &["--no-cache"],
                    },
                ),
                (
                    "hl-s3-2m",
                    Role::Peer,
                    Served::S3 {
                        prefetch: false,
                        args: &["--fault-around", "2M"],
                    },
                ),
            ],
        )
        .ratio(Ratio::of("hl-s3-prefetch", "hl-prefetch").at_case("20 ms"))
        .ratio(
            Ratio::of("hl-s3-prefetch", "hl-prefetch")
                .on_metric("start_ms")
                .at_case("20 ms"),
        )
        .ratio(Ratio::of("hl-s3-no-ahead", "hl-s3-prefetch").at_case("20 ms"))
        .ratio(Ratio::of("hl-s3-prefetch", "hl-s3-no-cache"))
        .ratio(Ratio::of("hl-s3-2m", "hl-s3-prefetch"))
}

/// Measures one case served `from`.
fn measure(from: Served, case: &Case<S3Params>) -> Result<Sample, LabError> {
    let (p, latency_ms) = (case.params.vm, case.params.latency_ms);
    let tools = tools::tools_for_measuring()?;
    let snap = snapshot::snapshot(&p)?;
    let scratch = scratch_dir("fc-s3")?;
    let trace = scratch.path().join("working-set.trace");
    let recorded = trace_of(tools, &snap, Pages::Small4K, &p)?;
    std::fs::write(&trace, &*recorded).map_err(LabError::file(&trace))?;
    let mut run = herdless_uffd(tools, scratch.path().join("stats.json"));
    let (prefetch, args) = match from {
        Served::LocalPrefetch => {
            run.args.extend(["--prefetch".into(), trace.into()]);
            return restore::restore(tools, &snap, Pages::Small4K, &p, &scratch, Some(run));
        }
        Served::S3 { prefetch, args } => (prefetch, args),
    };
    let s3 = lab_s3()?;
    let mut store = s3.lock()?;
    let key = format!("fc-{}m-of-{}m.mem", p.ws_mib, p.mem_mib);
    let (url, s3_trace) = store.snapshot_with_trace(&key, &snap.memory_path, &trace)?;
    run.memory = Some(OsString::from(&url));
    run.env = store
        .server
        .env()
        .into_iter()
        .map(|(k, v)| (k.into(), v))
        .collect();
    let cache = scratch.path().join("cache");
    // A cold host cache of its own, unless the variant has none.
    if !args.contains(&"--no-cache") {
        run.args
            .extend(["--cache-dir".into(), OsString::from(cache.as_os_str())]);
    }
    if prefetch {
        run.args
            .extend(["--prefetch".into(), s3_trace.clone().into()]);
    }
    run.args.extend(args.iter().map(OsString::from));
    let server = &store.server;
    server.set_latency(Duration::from_millis(latency_ms));
    server.reset_counts();
    let result = restore::restore(tools, &snap, Pages::Small4K, &p, &scratch, Some(run));
    server.set_latency(Duration::ZERO);
    let pack = format!("{}.pages", crate::experiments::lab_s3::key_of(&s3_trace));
    let gets = store.all_gets_of(&key) + store.all_gets_of(&pack);
    Ok(result?.with("gets", gets as f64))
}
