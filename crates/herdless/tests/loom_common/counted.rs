//! The mutex models' counted critical section: a plain load and store of a
//! counter under the lock, so two holders at once lose an increment (the
//! final count), and a release the model picks (plain or fair).

use loom::sync::atomic::{AtomicU32, Ordering};

use herdless::RawMutex;

/// Bumps `count` inside `m`'s critical section and releases `m` (with
/// `release_fair` if `fair`). The caller holds `m`.
pub fn bump_and_release(m: &RawMutex, count: &AtomicU32, fair: bool) {
    let n = count.load(Ordering::Relaxed);
    count.store(n + 1, Ordering::Relaxed);
    // SAFETY: the caller holds `m`.
    unsafe {
        if fair {
            m.release_fair();
        } else {
            m.release();
        }
    }
}

/// Takes `m`, then [`bump_and_release`].
pub fn lock_bump_and_release(m: &RawMutex, count: &AtomicU32, fair: bool) {
    m.acquire();
    bump_and_release(m, count, fair);
}
