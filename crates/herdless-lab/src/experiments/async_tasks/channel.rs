//! Section "channel": one producer task sends `items` into an unbounded
//! channel, yielding to the other tasks after each send (so that the
//! consumers are waiting when items arrive: the wake path is what is
//! measured), then closes it; C consumer tasks receive until it is closed
//! and drained. Throughput is items per second from the
//! first spawn to the last consumer's end; every item must be received
//! exactly once (their sum is checked). Wakeups per item are the
//! consumers' polls beyond their first, per item: a herd (a send waking
//! several consumers) shows as more than one.
//!
//! The channels: herdless's `Channel` (`send_async`/`recv_async`, readers
//! in one FIFO wait queue, one woken per item), `flume` and
//! `async-channel`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use herdless::Channel;
use serde::Serialize;

use smol::future::yield_now;

use super::runtime::{run_tasks, Counted, Runtime};
use crate::harness::{Case, LabError, Sample};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// The runtime the tasks run on.
    pub runtime: Runtime,
    /// Consumer tasks.
    pub consumers: usize,
    /// Items sent by the one producer.
    pub items: u64,
}

/// The channels measured.
#[derive(Clone, Copy, Debug)]
pub enum Chan {
    /// `herdless::Channel`.
    Herdless,
    /// `flume::unbounded`.
    Flume,
    /// `async_channel::unbounded`.
    AsyncChannel,
}

/// Measures `case` once with `chan`.
pub fn measure(chan: Chan, case: &Case<Params>) -> Result<Sample, LabError> {
    let p = case.params;
    let polls = Arc::new(AtomicU64::new(0));
    let sum = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    type Task = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
    // Consumers are counted (their polls); the producer is not.
    let mut tasks: Vec<Counted<Task>> = Vec::new();
    macro_rules! consumers {
        ($rx:expr, $recv:ident) => {
            for _ in 0..p.consumers {
                let rx = $rx;
                let (sum, received) = (sum.clone(), received.clone());
                let body: Task = Box::pin(async move {
                    let (mut s, mut n) = (0, 0);
                    while let Ok(x) = rx.$recv().await {
                        s += x;
                        n += 1;
                    }
                    sum.fetch_add(s, Ordering::Relaxed);
                    received.fetch_add(n, Ordering::Relaxed);
                });
                tasks.push(Counted::new(body, polls.clone()));
            }
        };
    }
    let producer: Task = match chan {
        Chan::Herdless => {
            let ch = Arc::new(Channel::new());
            consumers!(ch.clone(), recv_async);
            Box::pin(async move {
                for i in 0..p.items {
                    let _ = ch.send_async(i).await;
                    yield_now().await;
                }
                ch.close();
            })
        }
        Chan::Flume => {
            let (tx, rx) = flume::unbounded();
            consumers!(rx.clone(), recv_async);
            Box::pin(async move {
                for i in 0..p.items {
                    let _ = tx.send_async(i).await;
                    yield_now().await;
                }
            })
        }
        Chan::AsyncChannel => {
            let (tx, rx) = async_channel::unbounded();
            consumers!(rx.clone(), recv);
            Box::pin(async move {
                for i in 0..p.items {
                    let _ = tx.send(i).await;
                    yield_now().await;
                }
                tx.close();
            })
        }
    };
    tasks.push(Counted::new(producer, Arc::new(AtomicU64::new(0))));
    let run = run_tasks(p.runtime, tasks)?;
    let got = received.load(Ordering::Relaxed);
    let want_sum = p.items * p.items.saturating_sub(1) / 2;
    if got != p.items || sum.load(Ordering::Relaxed) != want_sum {
        return Err(LabError::Sample(format!(
            "{got} of {} items received (or some twice)",
            p.items
        )));
    }
    let wakeups = polls
        .load(Ordering::Relaxed)
        .saturating_sub(p.consumers as u64);
    let n = p.items as f64;
    Ok(Sample::new()
        .with("items_per_s", n / run.elapsed.as_secs_f64())
        .with("wakeups_per_item", wakeups as f64 / n)
        .with("worker_sleeps_per_item", run.sleeps_per(n))
        .with("cpu_ns_per_item", run.cpu_ns_per(n))
        .with("time_ms", run.elapsed.as_secs_f64() * 1e3))
}
