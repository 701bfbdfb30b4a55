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

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use rustix::mm;

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
    capacity: usize,
    len: usize,
}

enum Backing {
    /// `capacity` bytes at `base`, aligned to [`HUGE`] inside a private
    /// anonymous mapping of `map_len` bytes at `map`.
    Mapped {
        base: NonNull<u8>,
        map: NonNull<u8>,
        map_len: usize,
    },
    /// `capacity` bytes, zeroed when made.
    Heap(Vec<u8>),
}

// SAFETY: a mapped buffer's memory is owned by this value alone (mapped in
// `with_capacity`, unmapped once in `drop`); written only through
// `&mut self`, and read only through `&self`.
unsafe impl Send for ChunkBuf {}
// SAFETY: as above: a shared `ChunkBuf` is only read.
unsafe impl Sync for ChunkBuf {}

impl ChunkBuf {
    /// A buffer for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> ChunkBuf {
        let backing = if capacity >= HUGE {
            Self::map(capacity)
        } else {
            None
        };
        ChunkBuf {
            backing: backing.unwrap_or_else(|| Backing::Heap(vec![0; capacity])),
            capacity,
            len: 0,
        }
    }

    /// A mapping for `capacity` bytes starting on a huge page boundary,
    /// if one may and can be made.
    fn map(capacity: usize) -> Option<Backing> {
        if MAPPED.fetch_add(1, Relaxed) >= MAPPED_MAX {
            MAPPED.fetch_sub(1, Relaxed);
            return None;
        }
        let made = Self::map_aligned(capacity);
        if made.is_none() {
            MAPPED.fetch_sub(1, Relaxed);
        }
        made
    }

    fn map_aligned(capacity: usize) -> Option<Backing> {
        let map_len = capacity.checked_add(HUGE)?;
        // SAFETY: a fresh private anonymous mapping the kernel places (no
        // address given); nothing else refers to it.
        let map = unsafe {
            mm::mmap_anonymous(
                std::ptr::null_mut(),
                map_len,
                mm::ProtFlags::READ | mm::ProtFlags::WRITE,
                mm::MapFlags::PRIVATE,
            )
        }
        .ok()?;
        let map = NonNull::new(map.cast::<u8>())?;
        let skip = (HUGE - map.as_ptr() as usize % HUGE) % HUGE;
        // SAFETY: `skip < HUGE`, so `skip + capacity <= map_len`: inside
        // the mapping.
        let base = unsafe { NonNull::new_unchecked(map.as_ptr().add(skip)) };
        // Best effort: without it the buffer is in 4 KiB pages.
        // SAFETY: advice on memory this value owns; it changes no byte.
        let _ = unsafe { mm::madvise(base.as_ptr().cast(), capacity, mm::Advice::LinuxHugepage) };
        Some(Backing::Mapped { base, map, map_len })
    }

    fn base(&self) -> *const u8 {
        match &self.backing {
            Backing::Mapped { base, .. } => base.as_ptr(),
            Backing::Heap(v) => v.as_ptr(),
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
        let (len, capacity) = (self.len, self.capacity);
        match &mut self.backing {
            // SAFETY: `capacity - len` bytes after the written ones, inside
            // the mapping, which `&mut self` holds alone. Anonymous memory
            // reads as zeros until written: they are initialized.
            Backing::Mapped { base, .. } => unsafe {
                std::slice::from_raw_parts_mut(base.as_ptr().add(len), capacity - len)
            },
            Backing::Heap(v) => &mut v[len..],
        }
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
            Backing::Mapped { .. } => Bytes::from_owner(self),
        }
    }
}

impl AsRef<[u8]> for ChunkBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the first `len <= capacity` bytes at `base` are
        // initialized (written, or zeros) and stay while `self` lives.
        unsafe { std::slice::from_raw_parts(self.base(), self.len) }
    }
}

impl Drop for ChunkBuf {
    fn drop(&mut self) {
        if let Backing::Mapped { map, map_len, .. } = self.backing {
            // SAFETY: unmaps exactly the mapping made in `map_aligned`; no
            // slice of it outlives `self` (`Bytes` own the buffer).
            let _ = unsafe { mm::munmap(map.as_ptr().cast(), map_len) };
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
        assert!(matches!(b.backing, Backing::Mapped { .. }));
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
