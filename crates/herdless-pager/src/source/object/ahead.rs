//! Chunks fetched ahead: an object's first chunks asked for in the same
//! round trip as its size and ETag, before either is known, so that a
//! restore's pack (`restore/pack/`) arrives one round trip sooner.
//!
//! # Why
//! Opening an object costs a round trip (its size and ETag); only then
//! are its chunks known and asked for: two round trips before the first
//! byte of a working set arrives, at 20 ms each the largest part of a
//! prefetch from S3 (lab, `restore` from S3). A pack is fetched whole, in
//! order, from its start, so its first chunks can be asked for blind: a
//! range GET of chunk `i` needs only the chunk size.
//!
//! # Never a byte of another version
//! An answer fetched ahead is used only if its ETag is the one the
//! object was opened with (these GETs cannot carry `If-Match`: the ETag
//! is not known yet), its range is exactly the chunk's, and it holds the
//! chunk's length. Anything else (a chunk past the object's end, a failed
//! GET, another version) is dropped and counted unused, and the chunk is
//! fetched as usual, with `If-Match`.
//!
//! # Once per host
//! A host cache that already holds the object, or another process that is
//! fetching it ahead, makes a fetch ahead a waste of GETs: a mark per URL
//! in the cache directory (`CACHE_DIR/ahead/<md5 of the URL>.ahead`)
//! decides. A process that takes the mark's lock (exclusive, without
//! waiting) and finds that the object it names has its first chunk in the
//! cache, or that chunk's lock held (the last leader's answers are still
//! coming), does not fetch ahead; one that finds nothing there fetches ahead
//! and, once the object is opened, takes the host cache's locks on those
//! chunks (look, lock, look again, as any fetch does) and only then writes
//! the object's directory into the mark and lets it go. A process that
//! finds the mark locked does not fetch ahead, and after opening the
//! object waits (a bounded time) for the mark to be let go before it looks
//! for chunks: it then finds them locked by the process fetching them,
//! and reads them once written. So restores starting together fetch each
//! chunk once, as without fetching ahead.

use std::fs::{DirBuilder, File};
use std::io::{self, Read, Seek, Write};
use std::ops::Range;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::{GetOptions, GetRange};
use rustix::fs::FlockOperation;

use super::buffer::ChunkBuf;
use super::host_cache::{dir_name, HostCache, Lookup};
use super::location::Location;
use super::options::ObjectOptions;

/// What a GET fetched ahead brought.
pub(crate) struct Answer {
    etag: Option<String>,
    range: Range<u64>,
    bytes: Bytes,
}

pub(crate) type Task = tokio::task::JoinHandle<Result<Answer, object_store::Error>>;

/// A chunk's GET fetched ahead, waiting for a fetch to take it.
pub(crate) struct Early {
    pub(crate) task: Task,
    /// When it was asked for (its latency counts from there).
    pub(crate) started: Instant,
    /// The host cache's lock on the chunk, taken when the object was
    /// opened (module doc): held until the chunk is written there.
    pub(crate) lock: Option<File>,
}

/// The chunk's bytes from `task`, if its answer is the chunk's (module
/// doc): `etag` the object's, `range` the chunk's.
pub(crate) async fn bytes(task: Task, etag: Option<&str>, range: Range<u64>) -> Option<Bytes> {
    let answer = task.await.ok()?.ok()?;
    let same = etag.is_some() && answer.etag.as_deref() == etag;
    let whole = answer.range == range && answer.bytes.len() as u64 == range.end - range.start;
    (same && whole).then_some(answer.bytes)
}

/// The GETs fetched ahead for one object, by chunk, until taken.
pub(crate) struct Ahead {
    slots: Mutex<Vec<Option<Early>>>,
}

impl Ahead {
    /// Whether chunk `i` has a GET fetched ahead, not yet taken.
    pub(crate) fn has(&self, i: usize) -> bool {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.get(i).is_some_and(Option::is_some)
    }

    /// Takes chunk `i`'s GET fetched ahead, if there is one.
    pub(crate) fn take(&self, i: usize) -> Option<Early> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.get_mut(i).and_then(Option::take)
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        let slots = self.slots.get_mut().unwrap_or_else(PoisonError::into_inner);
        for early in slots.iter().flatten() {
            early.task.abort();
        }
    }
}

/// An object's chunks asked for ahead while it is being opened, and its
/// mark (module doc).
pub(crate) struct Asked {
    mark: Option<Mark>,
    early: Vec<(Task, Instant)>,
}

impl Asked {
    /// Takes `loc`'s mark in `opts`'s cache directory and, if this process
    /// leads, asks for chunks `0..count` now, on `handle`'s runtime
    /// (`count` 0: nothing, no mark).
    pub(crate) fn start(
        handle: &tokio::runtime::Handle,
        loc: &Location,
        opts: &ObjectOptions,
        count: usize,
    ) -> Asked {
        let mark = (count > 0).then(|| mark(opts.cache_dir.as_deref(), &loc.shown));
        let early = match &mark {
            Some(Mark::Lead(_)) => start(handle, loc, opts.chunk_size, count),
            _ => Vec::new(),
        };
        Asked { mark, early }
    }

    /// GETs asked for ahead.
    pub(crate) fn gets(&self) -> u64 {
        self.early.len() as u64
    }

    /// The object is open (`len` bytes, its chunks in `cache`): settles
    /// the answers coming ([`settle`]), then names the object in the mark
    /// and lets it go, or (following) waits for the leader's.
    pub(crate) fn settle(self, len: u64, opts: &ObjectOptions, cache: Option<&HostCache>) -> Ahead {
        let ahead = settle(self.early, len, opts.chunk_size, cache);
        match self.mark {
            Some(Mark::Lead(file) | Mark::Skip(file)) => lead_done(file, cache),
            // (The leader holds its mark for one request at most.)
            Some(Mark::Follow(file)) => follow(file, opts.lock_patience.min(opts.request_timeout)),
            None => {}
        }
        ahead
    }
}

/// GETs of chunks `0..count` of `loc`'s object, `chunk_size` bytes each,
/// started now on `handle`'s runtime (module doc).
fn start(
    handle: &tokio::runtime::Handle,
    loc: &Location,
    chunk_size: u64,
    count: usize,
) -> Vec<(Task, Instant)> {
    (0..count as u64)
        .map(|i| {
            let (store, path) = (std::sync::Arc::clone(&loc.store), loc.path.clone());
            let range = i * chunk_size..(i + 1) * chunk_size;
            let task = handle.spawn(async move {
                let opts = GetOptions {
                    range: Some(GetRange::Bounded(range)),
                    ..GetOptions::default()
                };
                let res = store.get_opts(&path, opts).await?;
                let (etag, range) = (res.meta.e_tag.clone(), res.range.clone());
                let mut buf = ChunkBuf::with_capacity((range.end - range.start) as usize);
                let mut body = res.into_stream();
                while let Some(frame) = body.next().await {
                    if !buf.push(&frame?) {
                        break; // longer than its range says: not used
                    }
                }
                Ok(Answer {
                    etag,
                    range,
                    bytes: buf.freeze(),
                })
            });
            (task, Instant::now())
        })
        .collect()
}

/// Chunks `started` fetched ahead of an object of `len` bytes, now
/// opened: those past its end dropped (cancelled, if not sent yet: the
/// store sees a refused GET or none), the others' host cache locks taken
/// (a chunk the cache holds is dropped: read from there).
fn settle(
    started: Vec<(Task, Instant)>,
    len: u64,
    chunk_size: u64,
    cache: Option<&HostCache>,
) -> Ahead {
    let mut slots = Vec::with_capacity(started.len());
    for (i, (task, started)) in started.into_iter().enumerate() {
        let start = i as u64 * chunk_size;
        let want = (chunk_size.min(len.saturating_sub(start))) as usize;
        if want == 0 {
            task.abort();
            slots.push(None);
            continue;
        }
        let lock = match cache.map(|c| c.find_or_lock(i, want)) {
            Some(Ok(Lookup::Found(_))) => {
                task.abort();
                slots.push(None);
                continue;
            }
            Some(Ok(Lookup::Locked(file))) => Some(file),
            Some(Ok(Lookup::HeldElsewhere)) | Some(Err(_)) | None => None,
        };
        slots.push(Some(Early {
            task,
            started,
            lock,
        }));
    }
    Ahead {
        slots: Mutex::new(slots),
    }
}

/// What the mark of an object's URL in the host cache says (module doc).
enum Mark {
    /// Fetch ahead; the mark's lock is held (none without a cache
    /// directory) until [`lead_done`] lets it go.
    Lead(Option<File>),
    /// Another process is fetching ahead: wait for it ([`follow`]) once
    /// the object is opened, before looking for chunks.
    Follow(File),
    /// The cache holds the object's first chunk already: no fetch ahead.
    /// The mark's lock is held until [`lead_done`] names the object opened
    /// (another version, after a new upload, is then the one named).
    Skip(Option<File>),
}

/// The mark of `url` (credentials blanked) in the cache directory `root`
/// (`None`: no host cache, so always fetch ahead). A mark that cannot be
/// made (an unusable directory) means no fetch ahead: the open that
/// follows says what is wrong with the directory.
fn mark(root: Option<&Path>, url: &str) -> Mark {
    let Some(root) = root else {
        return Mark::Lead(None);
    };
    let opened = (|| {
        let dir = root.join("ahead");
        DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join(format!("{}.ahead", dir_name(url))))
    })();
    let Ok(mut file) = opened else {
        return Mark::Skip(None);
    };
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => return Mark::Follow(file),
        Err(_) => return Mark::Skip(None),
    }
    let mut named = String::new();
    let _ = file.read_to_string(&mut named);
    let named = named.trim();
    let safe = !named.is_empty() && named.bytes().all(|b| b.is_ascii_hexdigit());
    if safe && HostCache::chunk_there_or_coming(&root.join(named), 0) {
        return Mark::Skip(Some(file));
    }
    Mark::Lead(Some(file))
}

/// The leader's end (module doc): names the object's directory in the
/// mark, and lets the mark go (the chunks' host locks are held by now).
/// Also a process that skipped: the object it opened is named.
fn lead_done(mark: Option<File>, cache: Option<&HostCache>) {
    if let (Some(mut file), Some(cache)) = (mark, cache) {
        let name = cache
            .dir()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let _ = (|| -> io::Result<()> {
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(name.unwrap_or_default().as_bytes())
        })();
    }
}

/// A follower's wait (module doc): until the leader lets its mark go, at
/// most `patience`.
fn follow(mark: File, patience: Duration) {
    let deadline = Instant::now() + patience;
    let mut pause = Duration::from_micros(200);
    loop {
        match rustix::fs::flock(&mark, FlockOperation::NonBlockingLockShared) {
            Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {}
            Err(rustix::io::Errno::INTR) => continue,
            _ => return,
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ahead-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn answered(rt: &tokio::runtime::Runtime, etag: &str, range: Range<u64>, n: usize) -> Task {
        let etag = Some(etag.to_string());
        rt.spawn(async move {
            Ok(Answer {
                etag,
                range,
                bytes: Bytes::from(vec![7u8; n]),
            })
        })
    }

    #[test]
    fn an_answer_is_used_only_if_it_is_the_chunk_of_the_version_opened() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let used = |task, etag: Option<&str>| rt.block_on(bytes(task, etag, 0..4096)).is_some();
        assert!(used(answered(&rt, "\"v1\"", 0..4096, 4096), Some("\"v1\"")));
        // Another version, no ETag to compare, another range, short.
        assert!(!used(
            answered(&rt, "\"v2\"", 0..4096, 4096),
            Some("\"v1\"")
        ));
        assert!(!used(answered(&rt, "\"v1\"", 0..4096, 4096), None));
        assert!(!used(
            answered(&rt, "\"v1\"", 0..2048, 4096),
            Some("\"v1\"")
        ));
        assert!(!used(
            answered(&rt, "\"v1\"", 0..4096, 4095),
            Some("\"v1\"")
        ));
        // A GET that failed (past the end: refused).
        let refused: Task = rt.spawn(async {
            Err(object_store::Error::NotImplemented {
                operation: "test".into(),
                implementer: "test".into(),
            })
        });
        assert!(!used(refused, Some("\"v1\"")));
    }

    #[test]
    fn one_process_leads_a_second_follows_and_a_cache_holding_chunk_0_skips() {
        let root = temp("mark");
        let url = "s3://snaps/vm.trace.pages";
        let Mark::Lead(Some(lead)) = mark(Some(&root), url) else {
            panic!("the first to ask leads");
        };
        // (Another open file description: flock excludes it as it would
        // another process.)
        let Mark::Follow(follower) = mark(Some(&root), url) else {
            panic!("a second, while the first leads, follows");
        };
        assert!(matches!(
            mark(Some(&root), "s3://snaps/other"),
            Mark::Lead(_)
        ));
        let cache = HostCache::open(&root, "an identity", 1 << 30).unwrap();
        let Ok(Lookup::Locked(chunk0)) = cache.find_or_lock(0, 4) else {
            panic!("chunk 0's lock is free");
        };
        lead_done(Some(lead), Some(&cache));
        let t0 = Instant::now();
        follow(follower, Duration::from_secs(5));
        assert!(t0.elapsed() < Duration::from_secs(5), "the mark was let go");
        // Chunk 0 locked by the leader (its answer still coming): skip.
        assert!(matches!(mark(Some(&root), url), Mark::Skip(Some(_))));
        drop(chunk0);
        assert!(matches!(mark(Some(&root), url), Mark::Lead(Some(_))));
        cache.store(0, b"abcd").unwrap();
        assert!(matches!(mark(Some(&root), url), Mark::Skip(Some(_))));
        // No host cache: always ahead.
        assert!(matches!(mark(None, url), Mark::Lead(None)));
        let _ = std::fs::remove_dir_all(&root);
    }
}
