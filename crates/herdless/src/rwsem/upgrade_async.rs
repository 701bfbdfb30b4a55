//! Upgrading from a task: [`RawUpgrade`], the future under
//! [`RwSemAsyncExt::upgrade_async`](super::RwSemAsyncExt::upgrade_async).
//!
//! The task's record waits in the upgrade slot, as a thread's does
//! (`upgrade.rs`): ahead of the whole queue, new readers kept out
//! (UPGRADING), granted by the last reader's release. `poll` maps the
//! thread's sleep; a drop before the future completed maps its timeout:
//! the record leaves the slot (readers queued behind it are let in), and a
//! grant that won is turned back into the upgradable hold with
//! `downgrade_to_upgradable`, so a dropped upgrade always leaves the caller
//! holding the lock upgradable, as `upgrade_timeout`'s `Err` does.

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use super::raw::RawRwSem;
use super::waiter::{Kind, Waiter};
use crate::util::sleeper::Sleeper;
use crate::util::wake_list::WakeList;
use crate::variants::Counting;

/// A task's upgrade of the upgradable hold of a [`RawRwSem`] to the
/// exclusive one (from [`RawRwSem::upgrade_async`]): `Ready(())` once the
/// caller holds the lock exclusive. Dropped before that, the caller still
/// holds it upgradable.
///
/// # Panics
/// If polled again after it returned `Ready`.
///
/// # Examples
/// Dropped while readers hold the lock, it gives up waiting and the
/// caller keeps the upgradable hold:
/// ```
/// use std::future::Future;
/// use std::task::{Context, Waker};
/// use herdless::RawRwSem;
///
/// let sem = RawRwSem::new();
/// sem.upgradable_read();
/// sem.read();
/// // SAFETY: this thread holds the lock upgradable.
/// let mut upgrade = Box::pin(unsafe { sem.upgrade_async() });
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(upgrade.as_mut().poll(&mut cx).is_pending(), "a reader holds the lock");
/// drop(upgrade);
/// assert!(!sem.is_locked_exclusive() && !sem.try_upgradable_read());
/// // SAFETY: the shared and the upgradable hold taken above.
/// unsafe {
///     sem.read_unlock();
///     sem.upgradable_unlock();
/// }
/// assert!(!sem.is_locked());
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RawUpgrade<'a> {
    sem: &'a RawRwSem,
    /// The record is in the upgrade slot (or was granted out of it, and
    /// no poll has seen the grant yet).
    queued: bool,
    /// The future returned `Ready`.
    done: bool,
    /// Pinned: never moved out of the future, dropped in place.
    waiter: Waiter,
}

impl RawRwSem {
    /// Turns the upgradable hold into the exclusive one, as a task (the
    /// async form of [`upgrade`](Self::upgrade)): waits in the upgrade
    /// slot, ahead of every queued waiter, for the readers to leave.
    ///
    /// # Safety
    /// The caller holds the lock upgradable, and does not release that
    /// hold while the future lives. Once the future completed it holds the
    /// lock exclusive; if the future is dropped before, it holds it
    /// upgradable.
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.upgradable_read();
    /// // SAFETY: this thread holds the lock upgradable.
    /// futures::executor::block_on(unsafe { sem.upgrade_async() });
    /// assert!(sem.is_locked_exclusive());
    /// // SAFETY: the upgrade made the hold exclusive.
    /// unsafe { sem.write_unlock() };
    /// ```
    pub unsafe fn upgrade_async(&self) -> RawUpgrade<'_> {
        RawUpgrade {
            sem: self,
            queued: false,
            done: false,
            waiter: Waiter::new(Sleeper::task(), Kind::Upgrade),
        }
    }
}

impl RawUpgrade<'_> {
    fn ready(&mut self) -> Poll<()> {
        self.queued = false;
        self.done = true;
        Poll::Ready(())
    }
}

impl Future for RawUpgrade<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: the record is never moved out of the future (only shared
        // references to it are taken; `Drop` runs in place).
        let this = unsafe { self.get_unchecked_mut() };
        assert!(!this.done, "an upgrade future polled after it completed");
        let sem = this.sem;
        let slot = this.waiter.wake_handle().slot().expect("a task's record");
        if !this.queued {
            if sem.config.counting == Counting::AtomicCount && sem.try_upgrade_count() {
                return this.ready();
            }
            // SAFETY: we own the record and it is in no slot yet.
            unsafe { slot.set(cx.waker()) };
            let mut wakes = WakeList::new();
            let mut q = sem.lock_wait();
            if sem.upgrade_locked(&mut q) {
                drop(q);
                return this.ready();
            }
            // The record is pinned in this future; it leaves the slot
            // before the future is gone: granted, or taken out by `Drop`.
            sem.enter_upgrade_slot_locked(&mut q, NonNull::from(&this.waiter), &mut wakes);
            sem.finish(q, &mut wakes);
            this.queued = true;
            return if this.waiter.is_granted() {
                this.ready()
            } else {
                Poll::Pending
            };
        }
        if this.waiter.is_granted() {
            return this.ready();
        }
        if slot.will_wake(cx.waker()) {
            return Poll::Pending;
        }
        let q = sem.lock_wait();
        // Under the wait lock a grant is final.
        if this.waiter.is_granted() {
            drop(q);
            return this.ready();
        }
        // SAFETY: we own the record and hold the wait lock.
        unsafe { slot.set(cx.waker()) };
        drop(q);
        Poll::Pending
    }
}

impl Drop for RawUpgrade<'_> {
    fn drop(&mut self) {
        if !self.queued {
            return;
        }
        let sem = self.sem;
        let granted = self.waiter.is_granted() || {
            let mut wakes = WakeList::new();
            let mut q = sem.lock_wait();
            // Under the wait lock a grant is final (ARCHITECTURE contract
            // 4); otherwise leave the slot, letting queued readers in.
            let kept = self
                .waiter
                .cancel_locked(|| sem.leave_upgrade_slot_locked(&mut q, &mut wakes));
            sem.finish(q, &mut wakes);
            kept.is_some()
        };
        if granted {
            // SAFETY: the grant made us the writer; the caller's contract
            // is to hold the lock upgradable after a dropped upgrade.
            unsafe { sem.downgrade_to_upgradable() };
        }
    }
}

impl std::fmt::Debug for RawUpgrade<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawUpgrade")
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}
