//! Tasks under loom, for the async models: a "task" is a loom thread that
//! polls a future by hand with wakers that signal a loom `Notify`, so loom
//! explores every interleaving of the poll, the waker update and the
//! grant. A lost wakeup shows up as a loom deadlock report (every thread
//! blocked).
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::Notify;

/// Runs `f` under loom with at most `bound` preemptions per execution.
pub fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound);
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
