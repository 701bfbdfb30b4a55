//! The bounce areas' pages (as uffd-stress lays them out): a lock word, a
//! counter and the page's identity at the start of every page, the rest
//! zeros.
//!
//! ```text
//! offset 0: u32 lock (0 free, 1 held)   8: u64 counter   16: u64 page + 1
//! ```
//! In the pager's region the words are only touched atomically (the first
//! touch faults the page in); in a read-back buffer they are plain bytes.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes per page.
pub(crate) const PAGE: usize = 4096;
const LOCK: usize = 0;
const COUNT: usize = 8;
const ID: usize = 16;

fn word(buf: &[u8], page: usize, off: usize) -> u64 {
    let at = page * PAGE + off;
    let mut w = [0u8; 8];
    w.copy_from_slice(&buf[at..at + 8]);
    u64::from_ne_bytes(w)
}

fn set_word(buf: &mut [u8], page: usize, off: usize, v: u64) {
    let at = page * PAGE + off;
    buf[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// The first source: every page free, counter 0, its identity.
pub(crate) fn initial(pages: usize) -> Vec<u8> {
    let mut buf = vec![0u8; pages * PAGE];
    for p in 0..pages {
        set_word(&mut buf, p, ID, p as u64 + 1);
    }
    buf
}

/// Checks a read-back destination: every page below `zone` free, holding
/// its identity and the counter last written (`expected`); every page from
/// `zone` on (the discarded quarter) all zeros.
pub(crate) fn verify(buf: &[u8], expected: &[AtomicU64], zone: usize) -> Result<(), String> {
    for (p, want) in expected.iter().enumerate() {
        if p >= zone {
            if let Some(i) = buf[p * PAGE..(p + 1) * PAGE].iter().position(|&b| b != 0) {
                return Err(format!(
                    "discarded page {p} reads a non-zero byte at {i}: resurrected"
                ));
            }
            continue;
        }
        let want = want.load(Ordering::Relaxed);
        let (lock, count, id) = (word(buf, p, LOCK), word(buf, p, COUNT), word(buf, p, ID));
        if id != p as u64 + 1 || count != want || lock & 0xFFFF_FFFF != 0 {
            return Err(format!(
                "page {p}: identity {id} (want {}), counter {count} (want {want}), lock {lock:#x}",
                p + 1
            ));
        }
    }
    Ok(())
}

/// Gives the discarded pages from `zone` on their identity back (counter
/// 0, which `expected` now says too), for the next bounce's source.
pub(crate) fn restore_zone(buf: &mut [u8], expected: &[AtomicU64], zone: usize) {
    for (p, e) in expected.iter().enumerate().skip(zone) {
        set_word(buf, p, ID, p as u64 + 1);
        e.store(0, Ordering::Relaxed);
    }
}

/// Page `page` of a live region at `base`.
#[derive(Clone, Copy)]
pub(crate) struct RegionPage {
    addr: usize,
}

impl RegionPage {
    /// Page `page` of the region starting at `base` (page-aligned, mapped
    /// while the caller uses the result).
    pub(crate) fn new(base: usize, page: usize) -> Self {
        RegionPage { addr: base + page * PAGE }
    }

    fn lock_word(&self) -> &AtomicU32 {
        // SAFETY: `addr` is a page of a live mapping (the caller keeps the
        // pager alive), 4-aligned, and only ever accessed atomically while
        // mapped; a missing page faults and is served by the pager.
        unsafe { AtomicU32::from_ptr((self.addr + LOCK) as *mut u32) }
    }

    fn counter(&self) -> &AtomicU64 {
        // SAFETY: as for `lock_word`, 8-aligned.
        unsafe { AtomicU64::from_ptr((self.addr + COUNT) as *mut u64) }
    }

    /// Takes the page lock (spins, then yields).
    pub(crate) fn lock(&self) {
        let lock = self.lock_word();
        let mut spins = 0u32;
        // Acquire pairs with `unlock`'s Release: the counter the last holder
        // wrote is visible.
        while lock.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Releases the page lock.
    pub(crate) fn unlock(&self) {
        self.lock_word().store(0, Ordering::Release);
    }

    /// The counter (read and written under the lock).
    pub(crate) fn count(&self) -> u64 {
        self.counter().load(Ordering::Relaxed)
    }

    /// Sets the counter (under the lock).
    pub(crate) fn set_count(&self, v: u64) {
        self.counter().store(v, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(counts: &[u64]) -> Vec<AtomicU64> {
        counts.iter().map(|&c| AtomicU64::new(c)).collect()
    }

    #[test]
    fn verify_accepts_the_written_counters_and_names_a_wrong_or_resurrected_page() {
        let mut buf = initial(4);
        set_word(&mut buf, 1, COUNT, 3);
        let mut want = expected(&[0, 3, 0, 0]);
        assert_eq!(verify(&buf, &want, 4), Ok(()));

        want[1] = AtomicU64::new(4);
        let err = verify(&buf, &want, 4).unwrap_err();
        assert!(err.contains("page 1") && err.contains("counter 3"), "{err}");

        // Page 3 was discarded: it must read zeros, yet holds its identity.
        let want = expected(&[0, 3, 0, 0]);
        let err = verify(&buf, &want, 3).unwrap_err();
        assert!(err.contains("discarded page 3"), "{err}");
        buf[3 * PAGE..].fill(0);
        assert_eq!(verify(&buf, &want, 3), Ok(()));
        restore_zone(&mut buf, &want, 3);
        assert_eq!(verify(&buf, &want, 4), Ok(()));
    }
}
