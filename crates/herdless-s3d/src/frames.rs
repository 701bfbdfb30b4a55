//! Object bodies in large frames: `s3s-fs` streams an object through a
//! 4 KiB buffer over tokio's file (a blocking-pool round trip and an HTTP
//! frame per 4 KiB), which held this server to ~60–70 MB/s on two cores.
//! The service lets `s3s` answer every GET (authentication, headers,
//! errors) and then replaces a successful answer's body with the same
//! bytes, sent from a read-only shared mapping of the object's file in
//! [`FRAME`]-byte frames: the socket copies straight from the file's
//! pages, with no read into a buffer and no blocking thread per body (the
//! server stands in for a remote store, whose CPU is not the host's: the
//! less of the host's CPU it takes, the truer the lab's S3 figures). Where
//! the file cannot be mapped, the body is read in [`FRAME`]-byte `pread`s
//! on a blocking thread instead.
//!
//! The last few files sent stay mapped for the next GETs of the same file
//! (same inode and size), so that a GET costs no `mmap`. A mapping reads
//! the file's pages as they are when sent: objects change here the way
//! `s3s-fs` changes them, by a new file renamed over the old (a PUT),
//! which leaves the mapped file whole. A file truncated in place while a
//! GET of it is being sent would fault the server (`SIGBUS`): nothing here
//! does that, and tests change objects through the server.
//!
//! The object's file is opened before `s3s` answers and its inode compared
//! with the path's afterwards: a PUT that replaced the object in between
//! (a new file renamed over the old) turns the answer into a `503`, which
//! a client retries, rather than the old ETag over the new bytes.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use memmap2::Mmap;
use s3s::stream::{ByteStream, RemainingLength};
use tokio::sync::mpsc;

/// Bytes per frame (and per `pread`).
pub(crate) const FRAME: usize = 1 << 20;

/// The file of object `bucket/key` under `root`, if the path is a plain
/// one (no percent-escapes, no `.` or `..` segments): others keep
/// `s3s-fs`'s own body.
pub(crate) fn object_file(root: &Path, object: &str) -> Option<PathBuf> {
    if object.contains('%') {
        return None;
    }
    let rel = Path::new(object);
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| root.join(rel))
}

/// An object's file, opened before the answer, and its inode.
pub(crate) struct Opened {
    file: File,
    path: PathBuf,
    ino: (u64, u64),
}

impl Opened {
    pub(crate) fn open(path: PathBuf) -> Option<Opened> {
        let file = File::open(&path).ok()?;
        let m = file.metadata().ok()?;
        Some(Opened {
            file,
            path,
            ino: (m.dev(), m.ino()),
        })
    }

    /// Whether the path still names the file opened.
    pub(crate) fn unchanged(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.ino)
    }

    /// `len` bytes from `first`, as a body of large frames: slices of a
    /// mapping of the file, or (where it cannot be mapped) read on a
    /// blocking thread, two frames ahead at most.
    pub(crate) fn body(self, first: u64, len: u64) -> s3s::Body {
        if let Some(bytes) = mapping_of(&self.file, self.ino, first, len) {
            let frames = Sliced { bytes, at: 0 };
            return s3s::Body::from(Box::pin(frames) as s3s::stream::DynByteStream);
        }
        let (tx, rx) = mpsc::channel(2);
        let file = self.file;
        tokio::task::spawn_blocking(move || {
            let mut at = first;
            let end = first + len;
            while at < end {
                let n = (end - at).min(FRAME as u64) as usize;
                let frame = read_frame(&file, at, n);
                let failed = frame.is_err();
                // The client went away: stop reading.
                if tx.blocking_send(frame).is_err() || failed {
                    return;
                }
                at += n as u64;
            }
        });
        let frames = Frames {
            rx,
            remaining: usize::try_from(len).unwrap_or(usize::MAX),
        };
        s3s::Body::from(Box::pin(frames) as s3s::stream::DynByteStream)
    }
}

/// A file kept mapped, by its inode (device, number): its whole bytes, a
/// read-only shared mapping (its page-cache pages, faulted in as the
/// socket first copies them) that every `Bytes` of it keeps alive.
type Kept = ((u64, u64), Bytes);

/// Files kept mapped, the latest last (a mapping holds its file, so its
/// inode number is not reused while it is here).
const MAPPINGS_KEPT: usize = 8;

/// The bytes `[first, first + len)` of `file` (inode `ino`), from a
/// mapping of the whole file made now or kept from an earlier GET; `None`
/// where the file is shorter or cannot be mapped.
fn mapping_of(file: &File, ino: (u64, u64), first: u64, len: u64) -> Option<Bytes> {
    static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
    let end = usize::try_from(first.checked_add(len)?).ok()?;
    let size = usize::try_from(file.metadata().ok()?.len()).ok()?;
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let found = kept.iter().find(|(i, m)| *i == ino && m.len() == size);
    let whole = match found {
        Some((_, m)) => m.clone(),
        None => {
            // SAFETY: objects are never truncated in place while mapped
            // (module doc): a PUT renames a new file over the old one.
            let m = Bytes::from_owner(unsafe { Mmap::map(file) }.ok()?);
            if kept.len() >= MAPPINGS_KEPT {
                kept.remove(0);
            }
            kept.push((ino, m.clone()));
            m
        }
    };
    drop(kept);
    let first = usize::try_from(first).ok()?;
    (end <= whole.len()).then(|| whole.slice(first..end))
}

/// A mapped body, sent in [`FRAME`]-byte slices (no copy).
struct Sliced {
    bytes: Bytes,
    at: usize,
}

impl Stream for Sliced {
    type Item = Result<Bytes, s3s::StdError>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let (at, len) = (self.at, self.bytes.len());
        if at >= len {
            return Poll::Ready(None);
        }
        let end = len.min(at + FRAME);
        self.at = end;
        Poll::Ready(Some(Ok(self.bytes.slice(at..end))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.bytes.len() - self.at;
        (left, Some(left))
    }
}

impl ByteStream for Sliced {
    fn remaining_length(&self) -> RemainingLength {
        RemainingLength::new_exact(self.bytes.len() - self.at)
    }
}

/// `n` bytes of `file` from `at`, read into memory not zeroed first (a
/// frame is written once, by the kernel).
fn read_frame(file: &File, at: u64, n: usize) -> io::Result<Bytes> {
    let mut buf: Vec<u8> = Vec::with_capacity(n);
    while buf.len() < n {
        let done = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..n - done];
        let (got, _) = rustix::io::pread(file, spare, at + done as u64)?;
        if got.is_empty() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let got = got.len();
        // SAFETY: `pread` initialized the `got` bytes after the vector's
        // length, inside its capacity.
        unsafe { buf.set_len(done + got) };
    }
    Ok(Bytes::from(buf))
}

/// The `FIRST-LAST/TOTAL` of a `Content-Range: bytes FIRST-LAST/TOTAL`
/// answer: (first, length).
pub(crate) fn content_range(v: &str) -> Option<(u64, u64)> {
    let (range, _) = v.strip_prefix("bytes ")?.split_once('/')?;
    let (first, last) = range.split_once('-')?;
    let (first, last): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
    (last >= first).then(|| (first, last - first + 1))
}

/// The frames, as `s3s` streams a body.
struct Frames {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    remaining: usize,
}

impl Stream for Frames {
    type Item = Result<Bytes, s3s::StdError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => {
                self.remaining = self.remaining.saturating_sub(b.len());
                Poll::Ready(Some(Ok(b)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, None)
    }
}

impl ByteStream for Frames {
    fn remaining_length(&self) -> RemainingLength {
        RemainingLength::new_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_and_object_paths_are_read_strictly() {
        assert_eq!(content_range("bytes 0-4095/8192"), Some((0, 4096)));
        assert_eq!(content_range("bytes 10-9/8192"), None);
        assert_eq!(content_range("items 0-1/2"), None);
        let root = Path::new("/srv");
        assert_eq!(
            object_file(root, "b/k/x"),
            Some(PathBuf::from("/srv/b/k/x"))
        );
        assert_eq!(object_file(root, "b/../etc"), None);
        assert_eq!(object_file(root, "b/a%20b"), None);
    }
}
