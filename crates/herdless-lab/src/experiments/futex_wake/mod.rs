//! `futex-wake` (seed 004, "futex: Avoid taking hb lock if nothing to
//! wakeup"): herdless's futex table with the bucket lock always taken
//! (before) and skipped when the bucket's waiter count is zero (after),
//! next to the kernel's `FUTEX_WAKE` and `parking_lot_core`.
//!
//! Two tables: waking N sleepers one at a time (the seed's table: the
//! count must cost nothing measurable when there are waiters) and waking
//! with nobody waiting (the path the count makes lock-free).

mod backend;
mod no_waiters;
mod one_at_a_time;

use herdless::variants::WakePolicy;
use serde::Serialize;

use self::backend::{Backend, Herdless, Kernel, ParkingLot};
use self::no_waiters::NoWaiters;
use self::one_at_a_time::OneAtATime;
use crate::harness::{
    Case, Experiment, LabError, Metric, PerSuite, Ratio, Role, Sample, Section, Variant,
};

const ALWAYS_LOCK: &str = "always-lock";
const WAITER_COUNT: &str = "waiter-count";
const KERNEL: &str = "kernel";
const PARKING_LOT: &str = "parking_lot_core";

/// A workload of this experiment, written once for every backend.
trait Measure {
    /// What a row varies.
    type Params: Serialize + Send + Sync + 'static;

    /// Measures `case` once on `backend`.
    fn measure<B: Backend>(backend: &B, case: &Case<Self::Params>) -> Result<Sample, LabError>;
}

/// The experiment.
pub fn experiment() -> Experiment {
    Experiment::new(
        "futex-wake",
        "seed 004, futex: Avoid taking hb lock if nothing to wakeup (Bueso, 2013): \
         a per-bucket waiter count lets wake skip the lock when nobody waits, at no cost when somebody does",
    )
    .claim(
        "wake with nobody waiting returns without taking the hash-bucket lock; waking 32-512 \
         waiters one at a time costs about what it did (2.84 ms before, 3.82 ms after at 512 \
         threads, within one stddev, on a quad-core x86_64)",
    )
    .mechanism(
        "a per-bucket count of waiters, raised before a waiter queues and read by wake after a \
         full barrier: a count of zero means nobody can be woken, so wake skips the lock",
    )
    .section(wake_one_at_a_time())
    .section(wake_with_no_waiters())
}

fn wake_one_at_a_time() -> Section<one_at_a_time::Params> {
    let cases = |ns: &[usize]| Case::each(ns, |threads| one_at_a_time::Params { threads });
    let seed_ns = [32, 64, 128, 256, 512];
    let section = Section::new(
        "wake one at a time",
        "threads",
        PerSuite {
            smoke: cases(&[4, 8]),
            quick: cases(&seed_ns),
            full: cases(&seed_ns),
        },
    )
    .metric(Metric::lower("per_wake_us", "µs"))
    .metric(Metric::lower("time_ms", "ms"))
    .metric(Metric::lower(
        "ran_during_pct",
        "% of woken threads that ran before the last wake",
    ))
    .ratio(Ratio::of(WAITER_COUNT, ALWAYS_LOCK))
    // Issue 14's target: the kernel's floor for a queue that wakes a
    // chosen thread is 1.05–1.23× its own shared-word wake on this
    // machine (lab README, `futex-wake`), so within 1.2× from 64 threads
    // up; at 32 the VM's vCPU wake regime decides (same section).
    .ratio(
        Ratio::of(WAITER_COUNT, KERNEL)
            .at_most(1.2)
            .at_case("64")
            .at_case("128")
            .at_case("256")
            .at_case("512"),
    )
    .ratio(Ratio::of(PARKING_LOT, WAITER_COUNT))
    .evidence(&["time_ms", "ran_during_pct"]);
    with_variants::<OneAtATime>(section)
}

fn wake_with_no_waiters() -> Section<no_waiters::Params> {
    let cases = |threads: &[usize], calls: usize| {
        let mut out = Vec::new();
        for &t in threads {
            let case = |label: String, shared| {
                Case::new(
                    label,
                    no_waiters::Params {
                        threads: t,
                        shared,
                        calls,
                    },
                )
            };
            if t == 1 {
                out.push(case("1".into(), true));
            } else {
                out.push(case(format!("{t} shared"), true));
                out.push(case(format!("{t} distinct"), false));
            }
        }
        out
    };
    let section = Section::new(
        "wake with no waiters",
        "threads",
        PerSuite {
            smoke: cases(&[1, 2], 2_000),
            quick: cases(&[1, 2, 4], 200_000),
            full: cases(&[1, 2, 4], 1_000_000),
        },
    )
    .metric(Metric::lower("ns_per_wake", "ns"))
    .metric(Metric::lower("sleeps", "wakers blocked, per run"))
    .metric(Metric::lower("lock_acquisitions_per_wake", "per wake"))
    .ratio(
        Ratio::of(ALWAYS_LOCK, WAITER_COUNT)
            .at_least(10.0)
            .at_case("2 shared"),
    )
    .ratio(
        Ratio::of(KERNEL, WAITER_COUNT)
            .at_least(20.0)
            .at_case("2 shared"),
    )
    .ratio(Ratio::of(PARKING_LOT, WAITER_COUNT))
    .evidence(&["lock_acquisitions_per_wake", "sleeps"]);
    with_variants::<NoWaiters>(section)
}

/// Adds the four variants, each with a backend of its own.
fn with_variants<M: Measure>(section: Section<M::Params>) -> Section<M::Params> {
    section
        .variant(variant::<M, _>(
            ALWAYS_LOCK,
            Role::Before,
            Herdless::new(WakePolicy::AlwaysLock),
        ))
        .variant(variant::<M, _>(
            WAITER_COUNT,
            Role::After,
            Herdless::new(WakePolicy::WaiterCount),
        ))
        .variant(variant::<M, _>(KERNEL, Role::Kernel, Kernel))
        .variant(variant::<M, _>(PARKING_LOT, Role::Peer, ParkingLot))
}

fn variant<M: Measure, B: Backend>(
    name: &'static str,
    role: Role,
    backend: B,
) -> Variant<M::Params> {
    Variant::new(name, role, move |case| M::measure(&backend, case))
}
