//! The two runtimes the `async` experiment runs its tasks on, behind one
//! call: spawn every task, wait for all, return the wall time between.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::harness::gang::{join_each, spawn_each, STACK_SIZE};
use crate::harness::{LabError, Usage};

/// A multi-threaded runtime with one worker per CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Runtime {
    /// tokio's multi-threaded scheduler.
    Tokio,
    /// smol: an `async_executor::Executor` run by one thread per CPU.
    Smol,
}

fn workers() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

/// Counts the polls of a task: every poll after the first follows a wake
/// (the task's own `wake_by_ref` included, as tokio's cooperative budget
/// does), so `polls - 1` is the wakeups the task received. Optionally also
/// its moves: polls on another thread than its previous poll (a wake that
/// sent it to another worker, or another worker that stole it), which
/// cost the lock's and the task's cache lines a trip between CPUs.
pub struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: u64,
    total: Arc<AtomicU64>,
    last_thread: Option<usize>,
    moves: u64,
    moves_total: Option<Arc<AtomicU64>>,
}

impl<F> Counted<F> {
    /// Wraps `inner`; its polls are added to `total` when it completes.
    pub fn new(inner: F, total: Arc<AtomicU64>) -> Self {
        Counted {
            inner: Box::pin(inner),
            polls: 0,
            total,
            last_thread: None,
            moves: 0,
            moves_total: None,
        }
    }

    /// Also adds its moves to `total` when it completes.
    pub fn with_moves(mut self, total: Arc<AtomicU64>) -> Self {
        self.moves_total = Some(total);
        self
    }
}

/// This thread, as a number no other running thread has: the address of
/// a thread-local (`thread::current()` clones an `Arc` at every poll,
/// 2% of a held-lock row's samples).
fn this_thread() -> usize {
    thread_local! {
        static HERE: u8 = const { 0 };
    }
    HERE.with(|here| std::ptr::from_ref(here) as usize)
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls += 1;
        if self.moves_total.is_some() {
            let here = this_thread();
            if self.last_thread.is_some_and(|t| t != here) {
                self.moves += 1;
            }
            self.last_thread = Some(here);
        }
        let out = self.inner.as_mut().poll(cx);
        if out.is_ready() {
            // Relaxed: read after every task was joined.
            self.total.fetch_add(self.polls, Ordering::Relaxed);
            if let Some(moves) = &self.moves_total {
                moves.fetch_add(self.moves, Ordering::Relaxed);
            }
        }
        out
    }
}

/// What one run of [`run_tasks`] took.
#[derive(Clone, Copy, Debug)]
pub struct TaskRun {
    /// From the first spawn to the last task's completion.
    pub elapsed: Duration,
    /// The process's counters over the same span: CPU time, and voluntary
    /// context switches, which are the runtime's workers going to sleep
    /// with nothing to run (and woken again by a task's wake), plus at
    /// most one per task for the thread that waits for them.
    pub usage: Usage,
}

impl TaskRun {
    /// Voluntary context switches per `n` (ops or items): how often a
    /// worker ran out of tasks and slept.
    pub fn sleeps_per(&self, n: f64) -> f64 {
        self.usage.voluntary_switches as f64 / n
    }

    /// CPU time of every thread, in ns per `n`.
    pub fn cpu_ns_per(&self, n: f64) -> f64 {
        self.usage.cpu_micros as f64 * 1e3 / n
    }
}

/// Runs every future in `tasks` as a task on `runtime` (a fresh one, with
/// one worker per CPU), waits for all of them, and returns the time from
/// the first spawn to the last completion with the process's counters
/// over it. A task that panics is an error.
pub fn run_tasks<F>(runtime: Runtime, tasks: Vec<F>) -> Result<TaskRun, LabError>
where
    F: Future<Output = ()> + Send + 'static,
{
    match runtime {
        Runtime::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers())
                .thread_stack_size(STACK_SIZE)
                .build()
                .map_err(|e| LabError::os("building a tokio runtime", e))?;
            let before = Usage::process();
            let start = Instant::now();
            let handles: Vec<_> = tasks.into_iter().map(|t| rt.spawn(t)).collect();
            rt.block_on(async {
                for h in handles {
                    h.await
                        .map_err(|_| LabError::Panicked("a tokio task".into()))?;
                }
                Ok::<_, LabError>(())
            })?;
            Ok(TaskRun {
                elapsed: start.elapsed(),
                usage: Usage::process().since(&before),
            })
        }
        Runtime::Smol => {
            let ex = smol::Executor::new();
            let (stop, stopped) = async_channel::bounded::<()>(1);
            let (ex, stopped) = (&ex, &stopped);
            thread::scope(|s| {
                let run = move |_| smol::block_on(ex.run(stopped.recv()));
                let threads = spawn_each(s, "smol", workers(), run)?;
                let before = Usage::process();
                let start = Instant::now();
                let handles: Vec<_> = tasks.into_iter().map(|t| ex.spawn(t)).collect();
                // A panicking task re-panics here, in `await`: caught below.
                let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    smol::block_on(async {
                        for h in handles {
                            h.await;
                        }
                    })
                }));
                let elapsed = start.elapsed();
                let usage = Usage::process().since(&before);
                drop(stop); // ends every worker's `run`
                            // A worker's own result is `recv`'s "closed": expected.
                join_each(threads, "a smol worker")?;
                joined.map_err(|_| LabError::Panicked("a smol task".into()))?;
                Ok(TaskRun { elapsed, usage })
            })
        }
    }
}
