//! `bounce` (seed 000, "userfaultfd: switch to exclusive wakeup for blocking
//! reads", Arcangeli 2015): the shape of the kernel's
//! `tools/testing/selftests/mm/uffd-stress.c`, whose per-handler fault
//! counts the seed prints, served by `herdless-pager`.
//!
//! Two areas of N pages; every page holds a lock word, a counter and its
//! page number (`area.rs`). Each bounce the areas swap roles: the last
//! bounce's destination becomes the source ([`MemSource`](herdless_pager::MemSource))
//! of a fresh pager whose region is the new destination, registered with
//! userfaultfd, one page per fault (fault-around off, as uffd-stress).
//! Faulting threads lock pages, check and increment their counters; H
//! handler threads serve the faults (`run.rs`). Modes, as the seed's:
//! - `rnd`: each faulting thread picks pages at random over the whole area
//!   (else each walks its own share in order);
//! - `racing`: background copier threads ([`Pager::populate`](herdless_pager::Pager::populate))
//!   fill pages in the opposite order, racing the handlers;
//! - `ver`: each faulting thread checks, under the page lock, that the
//!   counter it finds is the one last written (the full check of every
//!   page after every bounce runs in every mode);
//! - `discard` (beyond the seed): a discarder thread `MADV_DONTNEED`s the
//!   last quarter of the area in chunks while copiers fill it; after the
//!   bounce every discarded page must read zeros (never resurrected).
//!
//! `poll` is the variant axis: `poll` handlers (every poller woken per
//! fault: the seed's before) against `blocking-read` handlers (one reader
//! woken per message: the seed's after).
//!
//! Metrics: `ms_per_bounce`; `faults` per bounce; `uf_1`..`uf_4`, the
//! faults served by each of the 4 handlers per bounce, busiest first (the
//! seed's `userfaults:` line, sorted). A page that fails a check, or any
//! error the pager reports, fails the measurement.

mod area;
mod run;

use serde::Serialize;

use crate::experiments::herd;
use crate::harness::{Case, Experiment, Metric, PerSuite, Ratio, Role, Section, Variant};
use herdless_pager::HandlerMode;

/// Handler threads per pager (the seed has one per CPU, 24; here 2 CPUs,
/// and more handlers than CPUs so that a wake-all herd has somebody to
/// wake).
pub const HANDLERS: usize = 4;

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Pages per area.
    pub pages: usize,
    /// Faulting (locking) threads.
    pub threads: usize,
    /// Bounces per measurement.
    pub bounces: usize,
    /// Random page order.
    pub rnd: bool,
    /// Background copiers race the handlers.
    pub racing: bool,
    /// Faulting threads check each counter before incrementing it.
    pub ver: bool,
    /// A discarder drops the last quarter of the area during the bounce.
    pub discard: bool,
}

/// The experiment.
pub fn experiment() -> Experiment {
    let mut s = Section::new(
        "uffd-stress bounces (4 handlers, one page per fault)",
        "mode",
        PerSuite {
            smoke: cases(&["", "rnd racing ver", "racing discard"], 128, 2),
            quick: cases(
                &["", "rnd", "racing", "rnd racing", "ver", "rnd racing ver", "racing discard"],
                1024,
                3,
            ),
            full: cases(
                &[
                    "",
                    "rnd",
                    "racing",
                    "rnd racing",
                    "ver",
                    "rnd ver",
                    "racing ver",
                    "rnd racing ver",
                    "discard",
                    "rnd racing discard",
                ],
                4096,
                8,
            ),
        },
    )
    .metric(Metric::lower("ms_per_bounce", "ms"))
    .metric(Metric::lower("faults", "per bounce"));
    for name in UF_METRICS {
        s = s.metric(Metric::lower(name, "faults"));
    }
    let s = s
        .variant(Variant::new("poll", Role::Before, |c| run::measure(HandlerMode::Poll, c)))
        .variant(Variant::new("blocking-read", Role::After, |c| {
            run::measure(HandlerMode::BlockingRead, c)
        }))
        .ratio(Ratio::of("poll", "blocking-read"))
        .evidence(&["faults", "uf_1", "uf_4"]);
    Experiment::new(
        "bounce",
        "seed 000, userfaultfd: switch to exclusive wakeup for blocking reads (Arcangeli, \
         2015): uffd-stress bounces served by blocking-read or poll handlers",
    )
    .claim(herd::SEED_CLAIM)
    .mechanism(herd::SEED_MECHANISM)
    .section(s)
}

/// Metric names of the per-handler counts, busiest first.
pub(crate) const UF_METRICS: [&str; HANDLERS] = ["uf_1", "uf_2", "uf_3", "uf_4"];

fn cases(modes: &[&str], pages: usize, bounces: usize) -> Vec<Case<Params>> {
    modes
        .iter()
        .map(|m| {
            let has = |w| m.split(' ').any(|x| x == w);
            let label = if m.is_empty() { "-" } else { m };
            Case::new(
                label,
                Params {
                    pages,
                    threads: 2,
                    bounces,
                    rnd: has("rnd"),
                    racing: has("racing"),
                    ver: has("ver"),
                    discard: has("discard"),
                },
            )
        })
        .collect()
}
