//! Shared pieces of the loom models: the bounded `model` runner; tasks
//! for the async models (a "task" is a loom thread that polls a future by
//! hand with wakers that signal a loom `Notify`, so loom explores every
//! interleaving of the poll, the waker update and the grant; a lost wakeup
//! shows up as a loom deadlock report, every thread blocked); and the
//! counted critical section of the mutex models (`counted`).
// Each model binary uses some of these helpers.
#![allow(dead_code, unused_imports)]

mod counted;

pub use counted::{bump_and_release, lock_bump_and_release};

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::Notify;

/// Runs `f` under loom with at most `bound` preemptions per execution,
/// plus `HERDLESS_LOOM_EXTRA_PREEMPTIONS` if set: each model's bound is the
/// one CI can afford, and a deeper search (`=1` multiplies a model's time
/// by ten to a hundred) is for a session that changed what it pins.
pub fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let extra = std::env::var("HERDLESS_LOOM_EXTRA_PREEMPTIONS").map_or(0, |v| {
        v.parse::<usize>()
            .expect("HERDLESS_LOOM_EXTRA_PREEMPTIONS is a count")
    });
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound + extra);
    builder.check(f);
}

/// A task's waker: wakes signal a loom `Notify` the task blocks on.
pub struct TaskWake(Notify);

impl Wake for TaskWake {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.notify();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.notify();
    }
}

/// A waker and the `Notify` its wakes signal.
pub fn task_waker() -> (std::sync::Arc<TaskWake>, Waker) {
    let wake = std::sync::Arc::new(TaskWake(Notify::new()));
    (wake.clone(), Waker::from(wake))
}

/// Polls `fut` with `waker` until it is ready, blocking on the waker's
/// `Notify` between polls (a one-task executor).
pub fn block_on<F: Future>(mut fut: Pin<&mut F>, wake: &TaskWake, waker: &Waker) -> F::Output {
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut Context::from_waker(waker)) {
            return out;
        }
        wake.0.wait();
    }
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

/// Runs `fut` as a task to completion (a fresh waker, [`block_on`]).
pub fn run_task<F: Future>(fut: F) -> F::Output {
    let (wake, waker) = task_waker();
    block_on(pin!(fut), &wake, &waker)
}

/// Polls `fut` once with a waker it then forgets, and if it is pending
/// runs it to completion with a new one: the waker update races whatever
/// wakes or grants the task meanwhile.
pub fn run_task_with_a_new_waker_after_one_poll<F: Future>(fut: F) -> F::Output {
    let (_, old) = task_waker();
    let (wake, new) = task_waker();
    let mut fut = pin!(fut);
    match poll_once(fut.as_mut(), &old) {
        Poll::Ready(out) => out,
        Poll::Pending => block_on(fut, &wake, &new),
    }
}
