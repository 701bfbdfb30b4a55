//! Tasks on a real tokio runtime beside threads: the runtime the scenario
//! tests use, the gate a task holds a guard across, and the counting
//! stress of tasks (some cancelled) and threads on one lock.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use super::wait_until;

/// A multi-threaded runtime with two workers (this machine's two cores)
/// and its timers.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// What a task holds its guard across: [`Gate::hold`] says the task holds
/// the guard, then waits until the test lets it go.
pub struct Gate {
    held: mpsc::Sender<()>,
    go: tokio::sync::oneshot::Receiver<()>,
}

impl Gate {
    /// Says the guard is held, and awaits the go.
    pub async fn hold(self) {
        self.held.send(()).unwrap();
        self.go.await.unwrap();
    }
}

/// "A thread waits for a guard a task holds across an await": runs `task`
/// (given a [`Gate`] to hold its guard across) on a [`runtime`]; once it
/// holds, starts `thread` (which takes the lock), waits until
/// `thread_waits` says the thread is queued, lets the task go, and joins
/// both. The caller asserts what each did.
pub fn guard_held_across_an_await<F>(
    task: impl FnOnce(Gate) -> F,
    thread: impl FnOnce() + Send + 'static,
    thread_waits: impl FnMut() -> bool,
) where
    F: Future<Output = ()> + Send + 'static,
{
    let rt = runtime();
    let (held_tx, held_rx) = mpsc::channel();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let task = rt.spawn(task(Gate {
        held: held_tx,
        go: go_rx,
    }));
    held_rx.recv().unwrap();
    let thread = thread::spawn(thread);
    wait_until("the thread waits for the guard", thread_waits);
    go_tx.send(()).unwrap();
    rt.block_on(task).unwrap();
    thread.join().unwrap();
}

/// Runs `tasks` tasks (on a [`runtime`]) and `threads` threads on one lock
/// until each has done `rounds` rounds. Task `i`'s round is
/// `task_round(i)`, which resolves to whether it took the lock (`false`: it
/// was cancelled, and tries again); the task yields after every try.
/// Thread `i`'s round `r` is `thread_round(i, r)`. Returns the number of
/// cancelled tries, after printing it.
pub fn tasks_and_threads<R, F>(
    (tasks, threads, rounds): (u64, u64, u64),
    task_round: R,
    thread_round: impl Fn(u64, u64) + Send + Sync + 'static,
) -> usize
where
    R: Fn(u64) -> F + Send + Sync + 'static,
    F: Future<Output = bool> + Send + 'static,
{
    let rt = runtime();
    let cancelled = Arc::new(AtomicUsize::new(0));
    let task_round = Arc::new(task_round);
    let tasks: Vec<_> = (0..tasks)
        .map(|i| {
            let (task_round, cancelled) = (task_round.clone(), cancelled.clone());
            rt.spawn(async move {
                let mut done = 0;
                while done < rounds {
                    if task_round(i).await {
                        done += 1;
                    } else {
                        cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let thread_round = Arc::new(thread_round);
    let threads: Vec<_> = (0..threads)
        .map(|i| {
            let thread_round = thread_round.clone();
            thread::spawn(move || {
                for r in 0..rounds {
                    thread_round(i, r);
                }
            })
        })
        .collect();
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    let cancelled = cancelled.load(Ordering::Relaxed);
    eprintln!("   {cancelled} cancelled waits");
    cancelled
}
