//! `herd` (seed 000, "userfaultfd: switch to exclusive wakeup for blocking
//! reads"): R readers blocked on one [`Channel`], a producer posting items
//! one at a time, with every reader woken per item (`wake-all`, the
//! seed's before) or one (`wake-one`, [`WakeMode::Exclusive`], after).
//!
//! Two tables, as in the seed's stress run:
//! - *blocking*: every reader loops on `recv()` (exclusive waiters): the
//!   case the patch fixes; a wake-all send wakes R readers, R − 1 of whom
//!   find nothing.
//! - *mixed*: half the readers are pollers (`wait_readable` then
//!   `try_recv`, the seed's "poll" bounces), never exclusive, so every send
//!   still wakes all of them; the other half block in `recv()`. The patch
//!   can only save the blocked half's wakeups.
//!
//! # One item at a time, to sleeping readers
//! The herd only shows when the readers are asleep as an item arrives. So
//! before each send the producer waits (yielding) until the previous item
//! was received *and* every reader is queued on the channel's wait queue
//! again (`wait_queue().len() == R`): each item finds all R readers waiting.
//! The clock runs from the first send (all readers already queued) to the
//! last item's receipt; then the channel is closed and the readers exit on
//! `Closed`. A run that makes no progress for [`PATIENCE`](crate::harness::patience::PATIENCE) closes the
//! channel and returns [`LabError::Stuck`]; a reader that panics is
//! reported as [`LabError::Panicked`].
//!
//! # Counted evidence
//! - `wakeups_per_item`: the channel's wakeups (threads unparked) up to the
//!   last receipt, before the close's own wake-everybody.
//! - `wasted_per_item`: woken threads that found nothing: the channel's
//!   wasted wakeups (a woken reader or poller whose look found the queue
//!   empty) plus pollers woken while the item was still there that lost the
//!   `try_recv` race to another reader.
//! - `ctx_switches_per_item`: context switches of the whole process over
//!   the timed part (`getrusage(RUSAGE_SELF)`), minus the producer's own
//!   (its `sched_yield` waits), so the readers' sleeps and wakes only.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use herdless::channel::{Channel, TryRecvError};
use herdless::variants::WakeMode;
use serde::Serialize;

use crate::harness::gang::{join_each, spawn_each};
use crate::harness::patience::wait_until as wait_for;
use crate::harness::{
    Case, Experiment, LabError, Metric, PerSuite, Ratio, Role, Sample, Section, Usage,
};

const WAKE_ALL: &str = "wake-all";
const WAKE_ONE: &str = "wake-one";

/// How long a poller waits for readiness before looking again. Readiness
/// ends the wait at once; the timeout only bounds a poller's sleep.
const POLL_TIMEOUT: Duration = Duration::from_millis(10);

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Reader threads on the channel (pollers included).
    pub readers: usize,
    /// Of which pollers (`wait_readable` + `try_recv`).
    pub pollers: usize,
    /// Items posted, one at a time.
    pub items: u64,
}

/// Seed 000's headline figure (`herd` and `bounce` both measure it).
pub(crate) const SEED_CLAIM: &str =
    "uffd-stress 2.80 s before, 2.60 s after (-7%) with 24 threads on 24 CPUs, although half of \
     the passes poll and stay wake-all; more for pure blocking reads";

/// Seed 000's mechanism.
pub(crate) const SEED_MECHANISM: &str =
    "blocking reads wait exclusively: a wake stops at the first exclusive waiter it wakes; poll \
     waiters stay non-exclusive, so a poller queued first still wakes everyone";

/// The experiment.
pub fn experiment() -> Experiment {
    Experiment::new(
        "herd",
        "seed 000, userfaultfd: switch to exclusive wakeup for blocking reads (Arcangeli, 2015): \
         blocking readers woken one per item instead of all, while poll stays wake-all",
    )
    .claim(SEED_CLAIM)
    .mechanism(SEED_MECHANISM)
    .section(
        section(
            "blocking readers (target: wake-one wasted_per_item ≤ 0.05)",
            false,
        )
        .ratio(Ratio::of(WAKE_ONE, WAKE_ALL).at_least(2.0).at_case("16")),
    )
    .section(
        section("mixed: half pollers, half blocking readers", true)
            // At 2 readers (1 poller, 1 reader) both modes wake both
            // threads: the ratio there is 1 by construction, plus noise.
            .ratio(Ratio::of(WAKE_ONE, WAKE_ALL).at_least(1.0).at_case("16")),
    )
}

fn section(title: &'static str, mixed: bool) -> Section<Params> {
    let cases = |readers: &[usize], items: u64| {
        Case::each(readers, |r| Params {
            readers: r,
            pollers: if mixed { r / 2 } else { 0 },
            items,
        })
    };
    let seed_readers = [2, 8, 16, 32];
    Section::new(
        title,
        "readers",
        PerSuite {
            smoke: cases(&[2, 4], 200),
            quick: cases(&seed_readers, 2_000),
            full: cases(&seed_readers, 10_000),
        },
    )
    .metric(Metric::higher("items_per_s", "items/s"))
    .metric(Metric::lower("wakeups_per_item", "per item"))
    .metric(Metric::lower("wasted_per_item", "per item"))
    .metric(Metric::lower("ctx_switches_per_item", "per item"))
    .metric(Metric::lower("time_ms", "ms"))
    .evidence(&[
        "wakeups_per_item",
        "wasted_per_item",
        "ctx_switches_per_item",
    ])
    .variants(
        measure,
        [
            (WAKE_ALL, Role::Before, WakeMode::WakeAll),
            (WAKE_ONE, Role::After, WakeMode::Exclusive),
        ],
    )
}

/// What the timed part of a run counted.
struct Timed {
    elapsed: Duration,
    wakeups: u64,
    switches: u64,
}

/// Measures `case` once on a fresh channel in `mode`.
fn measure(mode: WakeMode, case: &Case<Params>) -> Result<Sample, LabError> {
    let Params {
        readers,
        pollers,
        items,
    } = case.params;
    let channel = Channel::<u64>::with_mode(mode);
    let received = AtomicU64::new(0);
    let poll_misses = AtomicU64::new(0);
    let (channel, received, poll_misses) = (&channel, &received, &poll_misses);

    let timed = thread::scope(|s| -> Result<Timed, LabError> {
        // Closes the channel, so the readers exit, before the handles are
        // joined below, on every path.
        let close = scopeguard::guard(channel, |c| {
            c.close();
        });
        let handles = spawn_each(s, "reader", readers, move |i| {
            if i < pollers {
                poll_loop(channel, received, poll_misses);
            } else {
                while channel.recv().is_ok() {
                    received.fetch_add(1, Ordering::Release);
                }
            }
        })?;
        let result = produce(channel, received, readers, items);
        drop(close);
        join_each(handles, "a reader")?;
        result
    })?;

    let got = received.load(Ordering::Acquire);
    if got != items {
        return Err(LabError::Sample(format!("{got} of {items} items received")));
    }
    // After the join: every wasted wakeup of the last item is counted; the
    // close's wakeups are never wasted (readers see `Closed`, pollers a
    // readable channel).
    let wasted = channel.stats().wasted_wakeups + poll_misses.load(Ordering::Relaxed);
    let n = items as f64;
    let secs = timed.elapsed.as_secs_f64();
    Ok(Sample::new()
        .with("items_per_s", n / secs)
        .with("wakeups_per_item", timed.wakeups as f64 / n)
        .with("wasted_per_item", wasted as f64 / n)
        .with("ctx_switches_per_item", timed.switches as f64 / n)
        .with("time_ms", secs * 1e3))
}

/// A poller: wait for readiness (bounded), then try to take an item; a
/// readiness that a blocked reader turned into nothing is a miss.
fn poll_loop(channel: &Channel<u64>, received: &AtomicU64, misses: &AtomicU64) {
    loop {
        let ready = channel.wait_readable(POLL_TIMEOUT).is_ok();
        match channel.try_recv() {
            Ok(_) => {
                received.fetch_add(1, Ordering::Release);
            }
            Err(TryRecvError::Empty) => {
                if ready {
                    misses.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(TryRecvError::Closed) => return,
        }
    }
}

/// The producer (the calling thread): posts `items` one at a time, each
/// once the previous one is taken and all `readers` are queued again.
fn produce(
    channel: &Channel<u64>,
    received: &AtomicU64,
    readers: usize,
    items: u64,
) -> Result<Timed, LabError> {
    let all_waiting = || channel.wait_queue().len() == readers;
    wait_for(all_waiting, || {
        format!(
            "{} of {readers} readers queued before the first item",
            channel.wait_queue().len()
        )
    })?;
    let process = Usage::process();
    let own = Usage::thread();
    let start = Instant::now();
    for k in 0..items {
        channel
            .send(k)
            .map_err(|_| LabError::Sample("the channel closed early".into()))?;
        wait_for(
            || received.load(Ordering::Acquire) > k && (k + 1 == items || all_waiting()),
            || {
                format!(
                    "item {k} of {items}: {} received, {} of {readers} readers queued",
                    received.load(Ordering::Acquire),
                    channel.wait_queue().len()
                )
            },
        )?;
    }
    let elapsed = start.elapsed();
    let own = Usage::thread().since(&own).ctx_switches();
    let all = Usage::process().since(&process).ctx_switches();
    Ok(Timed {
        elapsed,
        wakeups: channel.stats().wakeups,
        switches: all.saturating_sub(own),
    })
}
