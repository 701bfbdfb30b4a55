//! `bounce` (seed 000, "userfaultfd: switch to exclusive wakeup for blocking
//! reads", Arcangeli 2015): the shape of the kernel's
//! `tools/testing/selftests/mm/uffd-stress.c`, whose per-handler fault
//! counts the seed prints, served by `herdless-pager`: two areas whose
//! pages (`area.rs`) faulting threads lock and count, swapping roles every
//! bounce (`run.rs`), with `poll` handlers (before) or `blocking-read`
//! ones (after). The lab README's `bounce` section gives the modes (`rnd`,
//! `racing`, `ver`, `discard`), the checks, the metrics and the sizes.

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
                &[
                    "",
                    "rnd",
                    "racing",
                    "rnd racing",
                    "ver",
                    "rnd racing ver",
                    "racing discard",
                ],
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
        .variant(Variant::new("poll", Role::Before, |c| {
            run::measure(HandlerMode::Poll, c)
        }))
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
