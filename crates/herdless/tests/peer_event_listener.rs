//! Port of smol-rs/event-listener's `tests/notify.rs` (event-listener
//! 5.4.1) onto `herdless::WaitQueue`, the queue tasks and threads share.
//!
//! The mapping (docs/PEER_SUITES.md has the table):
//! - `event.listen()` is a task's exclusive wait,
//!   `queue.wait_unlocked_async(())`, polled once: a herdless future takes
//!   its place in the queue at its first poll, not at creation, so the
//!   port's `listen` polls it once (upstream registers at `listen()`).
//! - `is_notified` polls it, as upstream does.
//! - `event.notify_additional(n)` is `wake_up(n)`: it wakes `n` more
//!   waiters. `event.notify(n)` ("make sure `n` are notified, counting
//!   those notified already") has no herdless counterpart: each
//!   `wake_up(1)` announces one unit of work and wakes one more waiter.
//!   The tests that use `notify` translate it into the `wake_up` that
//!   notifies the same listeners, and say so.
//! - A notified listener that is dropped passes the notification on (both
//!   libraries), but herdless always passes it on (the wakeup was a unit
//!   of work nobody took), where event-listener does so only when fewer
//!   than `n` listeners remain notified: `drop_notified2` is ported with
//!   herdless's semantics.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

use herdless::wait_queue::WaitUnlocked;
use herdless::WaitQueue;

type Listener<'a> = Pin<Box<WaitUnlocked<'a, ()>>>;

struct NoopWake;
impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

fn noop() -> Waker {
    Waker::from(Arc::new(NoopWake))
}

/// A listener, queued (upstream's `event.listen()`).
fn listen(event: &WaitQueue) -> Listener<'_> {
    let mut l = Box::pin(event.wait_unlocked_async(()));
    assert!(!is_notified(&mut l), "a fresh listener is not notified");
    l
}

fn is_notified(listener: &mut Listener<'_>) -> bool {
    let waker = noop();
    listener
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready()
}

/// Upstream: `notify(2) == 2`, `notify(1) == 0` (two are notified
/// already), and the third listener stays unnotified. herdless semantics:
/// `wake_up(1)` after `wake_up(2)` wakes a third waiter (it announces one
/// more unit of work), so the port checks that instead.
#[test]
fn notify() {
    let event = WaitQueue::new();

    let mut l1 = listen(&event);
    let mut l2 = listen(&event);
    let mut l3 = listen(&event);

    assert!(!is_notified(&mut l1));
    assert!(!is_notified(&mut l2));
    assert!(!is_notified(&mut l3));

    assert_eq!(event.wake_up(2), 2);
    assert!(is_notified(&mut l1));
    assert!(is_notified(&mut l2));
    assert!(!is_notified(&mut l3));
    // herdless semantics: one more unit of work wakes one more waiter.
    assert_eq!(event.wake_up(1), 1);
    assert!(is_notified(&mut l3));
}

/// Upstream's middle `notify(1) == 0` (one is notified already) has no
/// counterpart and is left out; the rest is as upstream.
#[test]
fn notify_additional() {
    let event = WaitQueue::new();

    let mut l1 = listen(&event);
    let mut l2 = listen(&event);
    let mut l3 = listen(&event);

    assert_eq!(event.wake_up(1), 1);
    assert_eq!(event.wake_up(1), 1);

    assert!(is_notified(&mut l1));
    assert!(is_notified(&mut l2));
    assert!(!is_notified(&mut l3));
}

#[test]
fn notify_one() {
    let event = WaitQueue::new();

    let mut l1 = listen(&event);
    let mut l2 = listen(&event);

    assert!(!is_notified(&mut l1));
    assert!(!is_notified(&mut l2));

    assert_eq!(event.wake_up(1), 1);
    assert!(is_notified(&mut l1));
    assert!(!is_notified(&mut l2));

    assert_eq!(event.wake_up(1), 1);
    assert!(is_notified(&mut l2));
}

#[test]
fn notify_all() {
    let event = WaitQueue::new();

    let mut l1 = listen(&event);
    let mut l2 = listen(&event);

    assert!(!is_notified(&mut l1));
    assert!(!is_notified(&mut l2));

    assert_eq!(event.wake_up_all(), 2);
    assert!(is_notified(&mut l1));
    assert!(is_notified(&mut l2));
}

#[test]
fn drop_notified() {
    let event = WaitQueue::new();

    let l1 = listen(&event);
    let mut l2 = listen(&event);
    let mut l3 = listen(&event);

    assert_eq!(event.wake_up(1), 1);
    drop(l1);
    assert!(is_notified(&mut l2));
    assert!(!is_notified(&mut l3));
}

/// herdless semantics: upstream's `notify(2)` keeps two listeners
/// notified, so dropping one of them passes nothing on (`l3` stays
/// unnotified). herdless's `wake_up(2)` announces two units of work; the
/// dropped listener's unit goes to `l3`.
#[test]
fn drop_notified2() {
    let event = WaitQueue::new();

    let l1 = listen(&event);
    let mut l2 = listen(&event);
    let mut l3 = listen(&event);

    assert_eq!(event.wake_up(2), 2);
    drop(l1);
    assert!(is_notified(&mut l2));
    assert!(
        is_notified(&mut l3),
        "herdless: the dropped listener's wakeup goes on"
    );
}

/// Upstream: `notify_additional(1) == 1`, then `notify(2) == 1` (one more
/// to make two); here `wake_up(1)` twice notifies the same listeners.
#[test]
fn drop_notified_additional() {
    let event = WaitQueue::new();

    let l1 = listen(&event);
    let mut l2 = listen(&event);
    let mut l3 = listen(&event);
    let mut l4 = listen(&event);

    assert_eq!(event.wake_up(1), 1);
    assert_eq!(event.wake_up(1), 1);
    drop(l1);
    assert!(is_notified(&mut l2));
    assert!(is_notified(&mut l3));
    assert!(!is_notified(&mut l4));
}

#[test]
fn drop_non_notified() {
    let event = WaitQueue::new();

    let mut l1 = listen(&event);
    let mut l2 = listen(&event);
    let l3 = listen(&event);

    assert_eq!(event.wake_up(1), 1);
    drop(l3);
    assert!(is_notified(&mut l1));
    assert!(!is_notified(&mut l2));
}

/// A waker that records its number when woken.
struct Record(u32, Arc<Mutex<Vec<u32>>>);
impl Wake for Record {
    fn wake(self: Arc<Self>) {
        self.1.lock().unwrap().push(self.0);
    }
}

#[test]
fn notify_all_fair() {
    let event = WaitQueue::new();
    let v = Arc::new(Mutex::new(vec![]));

    let mut l1 = Box::pin(event.wait_unlocked_async(()));
    let mut l2 = Box::pin(event.wait_unlocked_async(()));
    let mut l3 = Box::pin(event.wait_unlocked_async(()));

    let waker1 = Waker::from(Arc::new(Record(1, v.clone())));
    let waker2 = Waker::from(Arc::new(Record(2, v.clone())));
    let waker3 = Waker::from(Arc::new(Record(3, v.clone())));

    assert!(l1
        .as_mut()
        .poll(&mut Context::from_waker(&waker1))
        .is_pending());
    assert!(l2
        .as_mut()
        .poll(&mut Context::from_waker(&waker2))
        .is_pending());
    assert!(l3
        .as_mut()
        .poll(&mut Context::from_waker(&waker3))
        .is_pending());

    assert_eq!(event.wake_up_all(), 3);
    assert_eq!(&*v.lock().unwrap(), &[1, 2, 3]);

    assert!(l1
        .as_mut()
        .poll(&mut Context::from_waker(&waker1))
        .is_ready());
    assert!(l2
        .as_mut()
        .poll(&mut Context::from_waker(&waker2))
        .is_ready());
    assert!(l3
        .as_mut()
        .poll(&mut Context::from_waker(&waker3))
        .is_ready());
}
