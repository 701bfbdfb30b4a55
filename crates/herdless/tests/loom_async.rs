//! loom models of tasks waiting beside threads: the waker slot's update
//! racing a grant, a granted or chosen future dropped (the grant passed
//! on), and a reader batch of a thread and a task.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p herdless --release --test loom_async`.
//! A "task" is a loom thread that polls a future by hand with wakers that
//! signal a loom `Notify`, so loom explores every interleaving of the
//! poll, the waker update and the grant. A lost wakeup shows up as a loom
//! deadlock report (every thread blocked).
#![cfg(loom)]

mod loom_common;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use loom_common::{
    model, poll_once, run_task, run_task_with_a_new_waker_after_one_poll, task_waker,
};

use herdless::rwsem::RawRwSem;
use herdless::variants::{Counting, RwSemConfig, WakeTiming};
use herdless::wait_queue::{Attempt, WaitQueue};

const CONFIGS: [RwSemConfig; 2] = [
    RwSemConfig::new(Counting::Generic, WakeTiming::WakeAfterUnlock),
    RwSemConfig::new(Counting::AtomicCount, WakeTiming::WakeAfterUnlock),
];

/// The task re-polls with a new waker while the release grants (or, with
/// `AtomicCount`, nudges) it: the grant clones the old waker and the update
/// sees the grant under the wait lock, or the grant clones the new one.
/// Mutation check: storing the new waker without the wait lock (or without
/// looking at the grant under it) deadlocks this model.
#[test]
fn a_task_waker_updated_while_granted_is_never_lost() {
    for config in CONFIGS {
        model(3, move || {
            let sem = Arc::new(RawRwSem::with_config(config));
            sem.write();
            let task = thread::spawn({
                let sem = sem.clone();
                move || {
                    run_task_with_a_new_waker_after_one_poll(sem.write_async());
                    // SAFETY: the future returned: we hold the write lock.
                    unsafe { sem.write_unlock() };
                }
            });
            // SAFETY: taken above.
            unsafe { sem.write_unlock() };
            task.join().unwrap();
            assert!(!sem.is_locked());
            assert_eq!(sem.waiters(), 0);
        });
    }
}

/// A queued writer future is dropped while the release races to grant it,
/// with a thread queued behind: either the future left first (the thread is
/// granted by the release) or it was granted and its drop hands the hold
/// on. Mutation check: a drop that only unlinks (ignoring a grant that
/// won) deadlocks the thread.
#[test]
fn a_granted_task_future_dropped_passes_the_grant_on() {
    for config in CONFIGS {
        model(2, move || {
            let sem = Arc::new(RawRwSem::with_config(config));
            sem.write();
            let (_, waker) = task_waker();
            let mut fut = Box::pin(sem.write_async());
            assert!(poll_once(fut.as_mut(), &waker).is_pending());
            let thread_writer = thread::spawn({
                let sem = sem.clone();
                move || {
                    sem.write();
                    // SAFETY: taken just above.
                    unsafe { sem.write_unlock() };
                }
            });
            let releaser = thread::spawn({
                let sem = sem.clone();
                // SAFETY: the hold taken above; holds belong to no thread.
                move || unsafe { sem.write_unlock() }
            });
            drop(fut);
            releaser.join().unwrap();
            thread_writer.join().unwrap();
            assert!(!sem.is_locked());
            assert_eq!(sem.waiters(), 0);
        });
    }
}

/// A writer's release grants a thread reader and a task reader as one
/// batch (FIFO, one list); both finish.
#[test]
fn a_reader_batch_of_a_thread_and_a_task_is_granted_by_one_release() {
    for config in CONFIGS {
        model(2, move || {
            let sem = Arc::new(RawRwSem::with_config(config));
            sem.write();
            let task = thread::spawn({
                let sem = sem.clone();
                move || {
                    run_task(sem.read_async());
                    // SAFETY: the future returned: we hold a read lock.
                    unsafe { sem.read_unlock() };
                }
            });
            let reader = thread::spawn({
                let sem = sem.clone();
                move || {
                    sem.read();
                    // SAFETY: taken just above.
                    unsafe { sem.read_unlock() };
                }
            });
            // SAFETY: taken above.
            unsafe { sem.write_unlock() };
            task.join().unwrap();
            reader.join().unwrap();
            assert!(!sem.is_locked());
        });
    }
}

/// A task's upgrade waits in the upgrade slot for a reader; the future is
/// dropped while the reader's release races to grant it: either it left
/// the slot first, or the grant won and the drop turns it back into the
/// upgradable hold. Either way the task holds the lock upgradable after
/// the drop, and releasing that leaves the lock free. Mutation check: a
/// drop that ignores a grant that won leaves a writer hold behind: the
/// lock is still held at the end.
#[test]
fn a_dropped_upgrade_future_leaves_the_upgradable_hold() {
    for config in CONFIGS {
        model(2, move || {
            let sem = Arc::new(RawRwSem::with_config(config));
            sem.upgradable_read();
            sem.read();
            let reader = thread::spawn({
                let sem = sem.clone();
                // SAFETY: the read hold taken above; holds belong to no
                // thread.
                move || unsafe { sem.read_unlock() }
            });
            let (_, waker) = task_waker();
            // SAFETY: we hold the lock upgradable until the end.
            let mut fut = Box::pin(unsafe { sem.upgrade_async() });
            let upgraded = poll_once(fut.as_mut(), &waker).is_ready();
            drop(fut);
            reader.join().unwrap();
            // SAFETY: ready: the write hold; dropped pending: the
            // upgradable hold (the future's contract).
            unsafe {
                if upgraded {
                    sem.write_unlock();
                } else {
                    sem.upgradable_unlock();
                }
            }
            assert!(!sem.is_locked());
            assert_eq!(sem.waiters(), 0);
        });
    }
}

/// Items consumed by exclusive waiters (Relaxed: the queue orders them).
struct Items(AtomicUsize);

impl Items {
    fn take(&self) -> Attempt<()> {
        let n = self.0.load(Ordering::Relaxed);
        if n > 0
            && self
                .0
                .compare_exchange(n, n - 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            Attempt::Done(())
        } else {
            Attempt::Wait
        }
    }
}

/// A task chosen by a wake is dropped before it looks, with a thread
/// waiting behind it: the wakeup goes on to the thread, which takes the
/// item. Mutation check: a drop that does not pass a chosen entry's wakeup
/// on deadlocks the thread.
#[test]
fn a_chosen_task_dropped_passes_the_wakeup_on() {
    model(2, || {
        let q = Arc::new(WaitQueue::new());
        let items = Arc::new(Items(AtomicUsize::new(0)));
        let (_, waker) = task_waker();
        let mut fut = Box::pin(q.wait_event_exclusive_async(|| items.take()));
        assert!(poll_once(fut.as_mut(), &waker).is_pending());
        let thread_waiter = thread::spawn({
            let (q, items) = (q.clone(), items.clone());
            move || q.wait_event_exclusive(|| items.take())
        });
        let poster = thread::spawn({
            let (q, items) = (q.clone(), items.clone());
            move || {
                items.0.fetch_add(1, Ordering::Relaxed);
                q.wake_up(1);
            }
        });
        drop(fut);
        poster.join().unwrap();
        thread_waiter.join().unwrap();
        assert_eq!(items.0.load(Ordering::Relaxed), 0);
        assert!(q.is_empty());
    });
}

/// A task re-polls with a new waker while a wake chooses it: it is woken
/// through one waker or the other, or sees the grant itself. Mutation
/// check: storing the waker without looking at the grant under the queue
/// lock deadlocks this model.
#[test]
fn a_wait_queue_task_waker_updated_while_chosen_is_never_lost() {
    model(3, || {
        let q = Arc::new(WaitQueue::new());
        let items = Arc::new(Items(AtomicUsize::new(0)));
        let task = thread::spawn({
            let (q, items) = (q.clone(), items.clone());
            move || {
                run_task_with_a_new_waker_after_one_poll(
                    q.wait_event_exclusive_async(|| items.take()),
                );
            }
        });
        items.0.fetch_add(1, Ordering::Relaxed);
        q.wake_up(1);
        task.join().unwrap();
        assert_eq!(items.0.load(Ordering::Relaxed), 0);
    });
}
