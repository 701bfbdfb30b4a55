//! Where a chunk's bytes land: a buffer of the chunk's size that a GET's
//! body (or the host cache's file) is copied into as it arrives; for a
//! chunk of 2 MiB or more, memory of its own asked to be backed by
//! transparent huge pages.
//!
//! A chunk's buffer is written once, whole, and kept while the source
//! lives. In 4 KiB pages that is one page fault (and one zeroed page) per
//! 4 KiB the first time each is written: measured on the lab's 2-core VM,
//! copying 13 chunks of 2 MiB into fresh vectors took 12–31 ms, into
//! buffers in huge pages 6–7 ms. Where the kernel gives no huge page
//! (`madvise` refused, or none free) the mapping is ordinary memory, and
//! where none can be mapped, or [`MAPPED_MAX`] buffers are mapped already
//! (each is a mapping of the process's, which the kernel counts against
//! `vm.max_map_count`), the buffer is a vector.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use memmap2::{Advice, MmapMut};

/// The huge page size asked for; chunks smaller than this are vectors.
const HUGE: usize = 2 << 20;

/// Mapped buffers alive at most in the process (16 GiB of 2 MiB chunks),
/// far below the kernel's default of 65 530 mappings per process.
const MAPPED_MAX: usize = 8192;

/// Mapped buffers alive now (a count, not an ordering: `Relaxed`).
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// A fixed-size buffer filled from the front ([`push`](ChunkBuf::push),
/// or [`spare`](ChunkBuf::spare) and [`filled`](ChunkBuf::filled)) and
/// then frozen into [`Bytes`].
pub(crate) struct ChunkBuf {
    backing: Backing,
    /// Where the buffer starts in the backing (a huge page boundary of a
    /// mapping; 0 for a vector).
    start: usize,
    capacity: usize,
    len: usize,
}

enum Backing {
    /// A private anonymous mapping one huge page longer than the buffer,
    /// counted in [`MAPPED`] while it lives.
    Mapped(MmapMut),
    /// `capacity` bytes, zeroed when made.
    Heap(Vec<u8>),
}

impl ChunkBuf {
    /// A buffer for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> ChunkBuf {
        if capacity >= HUGE
            && let Some((map, start)) = Self::map(capacity)
        {
            return ChunkBuf {
                backing: Backing::Mapped(map),
                start,
                capacity,
                len: 0,
            };
        }
        ChunkBuf {
            backing: Backing::Heap(vec![0; capacity]),
            start: 0,
            capacity,
            len: 0,
        }
    }

    /// A mapping with room for `capacity` bytes from a huge page boundary,
    /// and that boundary's offset in it, if one may and can be made.
    fn map(capacity: usize) -> Option<(MmapMut, usize)> {
        if MAPPED.fetch_add(1, Relaxed) >= MAPPED_MAX {
            MAPPED.fetch_sub(1, Relaxed);
            return None;
        }
        let Some(map) = capacity
            .checked_add(HUGE)
            .and_then(|l| MmapMut::map_anon(l).ok())
        else {
            MAPPED.fetch_sub(1, Relaxed);
            return None;
        };
        let start = (HUGE - map.as_ptr() as usize % HUGE) % HUGE;
        // Best effort: without it the buffer is in 4 KiB pages.
        let _ = map.advise_range(Advice::HugePage, start, capacity);
        Some((map, start))
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let (start, capacity) = (self.start, self.capacity);
        match &mut self.backing {
            Backing::Mapped(m) => &mut m[start..start + capacity],
            Backing::Heap(v) => &mut v[..],
        }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `bytes`; false (nothing appended) if they do not fit.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        let Some(to) = self.spare().get_mut(..bytes.len()) else {
            return false;
        };
        to.copy_from_slice(bytes);
        self.len += bytes.len();
        true
    }

    /// The space not written yet, for a `read` into it; mark what was
    /// read with [`filled`](ChunkBuf::filled).
    pub(crate) fn spare(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.bytes_mut()[len..]
    }

    /// Counts `n` more bytes of [`spare`](ChunkBuf::spare) as written.
    pub(crate) fn filled(&mut self, n: usize) {
        self.len = (self.len + n).min(self.capacity);
    }

    /// The bytes written, as `Bytes` that keep the buffer alive.
    pub(crate) fn freeze(mut self) -> Bytes {
        match &mut self.backing {
            Backing::Heap(v) => {
                let mut v = std::mem::take(v);
                v.truncate(self.len);
                Bytes::from(v)
            }
            Backing::Mapped(_) => Bytes::from_owner(self),
        }
    }
}

impl AsRef<[u8]> for ChunkBuf {
    fn as_ref(&self) -> &[u8] {
        let at = self.start;
        match &self.backing {
            Backing::Mapped(m) => &m[at..at + self.len],
            Backing::Heap(v) => &v[..self.len],
        }
    }
}

impl Drop for ChunkBuf {
    fn drop(&mut self) {
        if let Backing::Mapped(_) = self.backing {
            MAPPED.fetch_sub(1, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_takes_what_fits_and_freezes_to_exactly_that() {
        let mut b = ChunkBuf::with_capacity(HUGE + 4096);
        assert!(matches!(b.backing, Backing::Mapped(_)));
        assert!(b.push(&[1, 2, 3]));
        assert_eq!(b.len(), 3);
        let spare = b.spare();
        assert_eq!(spare.len(), HUGE + 4093);
        spare[..2].copy_from_slice(&[4, 5]);
        b.filled(2);
        assert!(!b.push(&vec![0u8; HUGE + 4092]), "one byte too many");
        assert!(b.push(&vec![9u8; HUGE + 4091]));
        let bytes = b.freeze();
        assert_eq!(bytes.len(), HUGE + 4096);
        assert_eq!(&bytes[..6], &[1, 2, 3, 4, 5, 9]);
        assert_eq!(bytes.slice(HUGE..HUGE + 2).as_ref(), &[9, 9]);
    }

    #[test]
    fn small_buffers_are_vectors_and_work_the_same() {
        let mut b = ChunkBuf::with_capacity(10);
        assert!(matches!(b.backing, Backing::Heap(_)));
        assert!(b.push(b"01234"));
        b.spare()[..2].copy_from_slice(b"56");
        b.filled(2);
        assert!(!b.push(b"789x"));
        assert_eq!(&b.freeze()[..], b"0123456");
    }
}
