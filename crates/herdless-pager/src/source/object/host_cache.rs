//! The host chunk cache: a directory shared by every `herdless-uffd` on
//! the host (and by later restores), holding the chunks fetched from
//! object stores, so that four restores of one snapshot at once fetch each
//! chunk once, and a snapshot restored again is read from the disk.
//!
//! # Layout
//! ```text
//! CACHE_DIR/                      mode 0700
//!   <md5 of the identity>/        one object at one chunk size
//!     identity                    what the directory holds: URL (no credentials),
//!                                 size, ETag, version, chunk size; checked on open
//!     17                          chunk 17, complete (appears only by rename)
//!     17.lock                     held (flock) by the process fetching chunk 17
//!     .17.4242.3.tmp              chunk 17 being written by process 4242
//!   ahead/<md5 of the URL>.ahead  who fetches a pack's first chunks ahead, and the
//!                                 object directory it last named (`ahead.rs`)
//! ```
//! A directory is keyed by the object's identity, so a replaced object
//! (another ETag or version) never reads the old one's chunks.
//!
//! # Sharing between processes
//! A chunk file appears only complete, by `rename` of a temporary file
//! written beside it: a reader that opens it has all of it. A process
//! that does not find it takes the chunk's lock (`flock`, exclusive, on
//! `N.lock`), looks again (the holder before it may have written it), and
//! only then fetches, writes and renames, and unlocks. So while the
//! locks are kept, each chunk is fetched once per host. A process that
//! finds the lock held looks again every few milliseconds (`fetch.rs`:
//! a task's sleep, and its prefetch goes on with the chunks nobody is
//! fetching meanwhile), for at most a bounded time (another process may
//! be stopped); then it fetches on its own (a second fetch, never a
//! hang).
//!
//! # Eviction (`--cache-max`)
//! After writing a tenth of the limit, a process adds up the cache's
//! chunk files and, when they are over the limit, deletes the least
//! recently used (modification time: a hit touches it) down to 90 % of
//! it, each with its lock file when that lock is free. A process already
//! reading a deleted chunk keeps its bytes (it read them whole); one that
//! looks later fetches it again. Deleting a lock file while a process
//! waits on it can let two processes fetch that chunk: only under
//! eviction, and never a wrong byte (both rename the same bytes).

use std::fs::{self, DirBuilder, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use md5::Digest;
use rustix::fs::FlockOperation;

use super::buffer::ChunkBuf;

/// Temporary files older than this are a crashed writer's: eviction
/// deletes them.
const STALE_TMP: Duration = Duration::from_secs(600);

/// What [`HostCache::find_or_lock`] found.
pub(crate) enum Lookup {
    /// The chunk, whole.
    Found(Bytes),
    /// Not there: this process holds its lock and fetches it.
    Locked(File),
    /// Not there, and another process holds its lock (fetching it).
    HeldElsewhere,
}

/// One object's chunks in the host cache.
pub(crate) struct HostCache {
    /// The cache directory (all objects).
    root: PathBuf,
    /// This object's directory.
    dir: PathBuf,
    /// Bytes the cache's chunk files may take.
    max: u64,
    /// Bytes written since the cache's size was last added up.
    written: AtomicU64,
    /// Chunk files this process deleted (eviction).
    pub(crate) evicted: AtomicU64,
}

/// The directory name of an identity: its MD5, in hex (a name, not a
/// security measure: the `identity` file inside is checked).
pub(crate) fn dir_name(identity: &str) -> String {
    md5::Md5::digest(identity.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_chunk_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

impl HostCache {
    /// Opens (creating if need be) the cache directory `root` and the
    /// directory of the object described by `identity`, limited to `max`
    /// bytes of chunks in all.
    pub(crate) fn open(root: &Path, identity: &str, max: u64) -> io::Result<HostCache> {
        DirBuilder::new().recursive(true).mode(0o700).create(root)?;
        let dir = root.join(dir_name(identity));
        match DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            r => r?,
        }
        let cache = HostCache {
            root: root.to_path_buf(),
            dir,
            max,
            written: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        };
        let id_path = cache.dir.join("identity");
        match fs::read_to_string(&id_path) {
            Ok(found) if found == identity => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} holds another object's chunks (its identity file differs)",
                        cache.dir.display()
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                cache.write_atomically(&id_path, identity.as_bytes())?;
            }
            Err(e) => return Err(e),
        }
        cache.evict_if_over();
        Ok(cache)
    }

    /// This object's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn chunk_path(&self, i: usize) -> PathBuf {
        self.dir.join(i.to_string())
    }

    /// Whether the object directory `dir` (named as [`dir`](Self::dir)
    /// names one) holds chunk `i` whole, or a process holds that chunk's
    /// lock (it is fetching it): without opening the object.
    pub(crate) fn chunk_there_or_coming(dir: &Path, i: usize) -> bool {
        if dir.join(i.to_string()).is_file() {
            return true;
        }
        let Ok(lock) = File::open(lock_path(dir, i)) else {
            return false;
        };
        matches!(
            rustix::fs::flock(&lock, FlockOperation::NonBlockingLockShared),
            Err(rustix::io::Errno::WOULDBLOCK)
        )
    }

    /// Chunk `i`, if the cache has it whole (`len` bytes); a hit marks it
    /// recently used.
    fn read(&self, i: usize, len: usize) -> io::Result<Option<Bytes>> {
        let mut f = match File::open(self.chunk_path(i)) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut buf = ChunkBuf::with_capacity(len);
        while buf.len() < len {
            match f.read(buf.spare()) {
                Ok(0) => break,
                Ok(n) => buf.filled(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if buf.len() != len || f.read(&mut [0u8; 1])? != 0 {
            // Not what this process would have written: not used.
            return Ok(None);
        }
        // Least recently used: a hit is a use (best effort).
        let _ = f.set_modified(SystemTime::now());
        Ok(Some(buf.freeze()))
    }

    /// Chunk `i` if the cache has it; otherwise its lock, and the chunk if
    /// the process that held the lock before wrote it meanwhile (module
    /// doc: look, lock, look again); `HeldElsewhere` if another process
    /// holds the lock now (it is fetching the chunk: the caller looks
    /// again later, `fetch.rs`). Never waits.
    pub(crate) fn find_or_lock(&self, i: usize, len: usize) -> io::Result<Lookup> {
        if let Some(bytes) = self.read(i, len)? {
            return Ok(Lookup::Found(bytes));
        }
        let lock = self.lock(i)?;
        // (A failure to read now is a miss: the lock is ours to fetch with.)
        if let Ok(Some(bytes)) = self.read(i, len) {
            return Ok(Lookup::Found(bytes));
        }
        Ok(lock.map_or(Lookup::HeldElsewhere, Lookup::Locked))
    }

    /// Takes chunk `i`'s lock if no other process holds it.
    fn lock(&self, i: usize) -> io::Result<Option<File>> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path(&self.dir, i))?;
        loop {
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Some(file)),
                Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Writes chunk `i` (a temporary file, then renamed into place), and
    /// evicts if the cache has grown past its limit.
    pub(crate) fn store(&self, i: usize, bytes: &[u8]) -> io::Result<()> {
        self.write_atomically(&self.chunk_path(i), bytes)?;
        let since = self.written.fetch_add(bytes.len() as u64, Relaxed) + bytes.len() as u64;
        if since >= self.max / 10 {
            self.written.store(0, Relaxed);
            self.evict_if_over();
        }
        Ok(())
    }

    fn write_atomically(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("chunk");
        // Unique on the host: the process id, and a number no other cache
        // of this process (several sources of one object) takes.
        static TMP_SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            TMP_SEQ.fetch_add(1, Relaxed)
        ));
        let written = (|| {
            let mut f = File::options().write(true).create_new(true).open(&tmp)?;
            f.write_all(bytes)?;
            fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }

    /// Deletes the least recently used chunk files of the whole cache
    /// while they take more than the limit (module doc).
    fn evict_if_over(&self) {
        let mut chunks = Vec::new();
        let mut total = 0u64;
        let now = SystemTime::now();
        let Ok(objects) = fs::read_dir(&self.root) else {
            return;
        };
        for obj in objects.flatten() {
            let Ok(entries) = fs::read_dir(obj.path()) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                let Ok(meta) = e.metadata() else { continue };
                let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                if name.ends_with(".tmp") {
                    if now.duration_since(mtime).is_ok_and(|age| age > STALE_TMP) {
                        let _ = fs::remove_file(e.path());
                    }
                } else if is_chunk_name(&name) {
                    total += meta.len();
                    chunks.push((mtime, meta.len(), e.path()));
                }
            }
        }
        if total <= self.max {
            return;
        }
        chunks.sort();
        let target = self.max / 10 * 9;
        for (_, len, path) in chunks {
            if total <= target {
                break;
            }
            let lock = path.with_file_name(format!(
                "{}.lock",
                path.file_name().and_then(|n| n.to_str()).unwrap_or("")
            ));
            if fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(len);
                self.evicted.fetch_add(1, Relaxed);
                remove_lock_if_free(&lock);
            }
        }
    }
}

/// Chunk `i`'s lock file in the object directory `dir`.
fn lock_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("{i}.lock"))
}

/// Removes a chunk's lock file if nobody holds its lock.
fn remove_lock_if_free(lock: &Path) {
    let Ok(f) = File::open(lock) else { return };
    if rustix::fs::flock(&f, FlockOperation::NonBlockingLockExclusive).is_ok() {
        let _ = fs::remove_file(lock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("herdless-host-cache-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_chunk_is_read_back_whole_and_another_identity_gets_another_directory() {
        let root = temp("roundtrip");
        let a = HostCache::open(&root, "object a", 1 << 30).unwrap();
        assert_eq!(a.read(3, 5).unwrap(), None);
        let lock = a.lock(3).unwrap().expect("a free lock");
        assert!(
            a.lock(3).unwrap().is_none(),
            "flock excludes a second open file description"
        );
        a.store(3, b"hello").unwrap();
        drop(lock);
        assert_eq!(a.read(3, 5).unwrap().as_deref(), Some(&b"hello"[..]));
        assert_eq!(
            a.read(3, 6).unwrap(),
            None,
            "a chunk of another length is not used"
        );
        // Several caches of a new object in one process (as the lab's four
        // restores) open and write side by side.
        std::thread::scope(|s| {
            for i in 0..4 {
                let root = &root;
                s.spawn(move || {
                    let c = HostCache::open(root, "object c", 1 << 30).unwrap();
                    c.store(10 + i, b"same").unwrap();
                });
            }
        });
        let b = HostCache::open(&root, "object b", 1 << 30).unwrap();
        assert_ne!(a.dir(), b.dir());
        assert_eq!(b.read(3, 5).unwrap(), None);
        // The same identity finds the same chunks.
        let again = HostCache::open(&root, "object a", 1 << 30).unwrap();
        assert_eq!(again.read(3, 5).unwrap().as_deref(), Some(&b"hello"[..]));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn eviction_keeps_the_cache_under_its_limit_dropping_the_oldest_first() {
        let root = temp("evict");
        let c = HostCache::open(&root, "object", 10_000).unwrap();
        for i in 0..20 {
            c.store(i, &[i as u8; 1000]).unwrap();
        }
        let kept: Vec<usize> = (0..20)
            .filter(|&i| c.read(i, 1000).unwrap().is_some())
            .collect();
        let bytes = kept.len() * 1000;
        assert!(bytes <= 10_000, "{kept:?}");
        assert!(kept.contains(&19), "the newest chunk is kept: {kept:?}");
        assert!(c.evicted.load(Relaxed) >= 10);
        fs::remove_dir_all(&root).unwrap();
    }
}
