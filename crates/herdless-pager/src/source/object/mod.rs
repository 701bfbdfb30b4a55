//! [`ObjectSource`]: pages read from an object store (`s3://BUCKET/KEY`,
//! `gs://`, `az://`, `http(s)://`, `file://`) in chunks, through a chunk
//! cache shared by every process on the host (feature `object-store`).
//!
//! What production restores do (E2B pages guest memory from GCS or S3 in
//! 4 MiB range reads with a node cache; BuildBuddy and AWS Lambda read
//! chunks through a host cache with single flight per chunk), as a
//! [`PageSource`]: `herdless-uffd` serves a Firecracker snapshot straight
//! from an object URL.
//!
//! - **Chunks**: the object is read in range GETs of
//!   [`chunk_size`](ObjectOptions::chunk_size) bytes; within a process, one
//!   fetch per chunk however many threads want it (`chunks.rs`).
//! - **Host cache**: fetched chunks go to a directory shared by every
//!   `herdless-uffd` on the host, keyed by the object's identity (URL,
//!   size, ETag, version), so concurrent restores of one snapshot fetch
//!   each chunk once, bounded in size with LRU eviction
//!   (`host_cache.rs`).
//! - **Demand first**: a read waits only for its own chunks, whose fetch
//!   starts at once; [`prefetch`](ObjectSource::prefetch) queues chunks in
//!   a given order, fetched by at most
//!   [`fetch_concurrency`](ObjectOptions::fetch_concurrency) tasks
//!   (`fetch.rs`, which also says how the async client is driven: a tokio
//!   runtime the source owns; readers wait on a chunk's condition
//!   variable, never inside the runtime).
//! - **Failures**: a GET that fails is retried with backoff; one that
//!   keeps failing fails the read (the pager poisons the page: `SIGBUS`
//!   in the guest), and so does an object that changed since it was opened
//!   (its ETag, checked with `If-Match` and on every answer). Never a hang,
//!   never a page of another version. Credentials never appear in a
//!   message.
//!
//! Opening the source makes one `HEAD` request (the object's size and
//! ETag): a missing object or refused credentials are an error there,
//! before anything is served. A store that gives no ETag (a plain HTTP
//! server may not) is keyed in the host cache by size and modification
//! time, and a change during the restore cannot be told there.
//!
//! The source keeps the chunks it has read in memory until it is dropped
//! (the host cache keeps them on disk for the others).

mod ahead;
mod buffer;
mod chunks;
mod error;
mod fetch;
mod host_cache;
mod location;
mod options;
mod stats;
mod whole;
mod write_behind;

use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use object_store::ObjectStoreExt;

pub use error::ObjectError;
pub use location::is_object_url;
pub use options::{
    default_cache_dir, ObjectOptions, DEFAULT_CACHE_MAX, DEFAULT_CHUNK_SIZE, DEFAULT_FETCH_AHEAD,
    DEFAULT_FETCH_CONCURRENCY, MAX_CHUNK_SIZE,
};
pub use stats::ObjectStats;
pub use whole::{read_object, write_object};

use chunks::{Chunks, Claim};
use fetch::{classify, Core};
use host_cache::HostCache;
use location::Location;

use super::PageSource;

/// The runtime a source owns, shut down when the last clone of the source
/// goes: its fetches are dropped, and the chunks fetched but not yet
/// written to the host cache are waited for (a bounded time,
/// `write_behind.rs`), so that the next restore of the object finds them.
/// (Inside an async runtime, where nothing may block, it does not wait.)
struct OwnedRuntime {
    runtime: Option<tokio::runtime::Runtime>,
    writes: Arc<write_behind::Pending>,
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        if tokio::runtime::Handle::try_current().is_err() {
            self.writes.wait_idle(write_behind::WRITES_BEHIND_PATIENCE);
        }
    }
}

/// An object in a store, as a [`PageSource`] (module doc). Clones share
/// the chunks, the fetcher and the counters: keep one to ask for
/// [`stats`](ObjectSource::stats) or [`prefetch`](ObjectSource::prefetch)
/// while the pager owns another.
///
/// ```no_run
/// use herdless_pager::object::{ObjectOptions, ObjectSource};
/// use herdless_pager::PageSource;
/// // AWS_ENDPOINT_URL, AWS_REGION and the credentials come from the environment.
/// let src = ObjectSource::open("s3://snapshots/vm.mem", &ObjectOptions::default())?;
/// let mut page = vec![0u8; 4096];
/// src.read_at(0, &mut page)?; // one GET of the first chunk (or the host cache)
/// assert_eq!(src.stats().fetches + src.stats().host_hits, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ObjectSource {
    core: Arc<Core>,
    _runtime: Arc<OwnedRuntime>,
}

impl std::fmt::Debug for ObjectSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectSource")
            .field("url", &self.core.loc.shown)
            .field("len", &self.core.len)
            .field("etag", &self.core.etag)
            .field("chunk_size", &self.core.chunk_size)
            .finish_non_exhaustive()
    }
}

/// Runs `fut` on `handle`'s runtime and waits for it from this thread
/// (which must not be one of that runtime's).
fn wait_on<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    spawn_waitable(handle, fut).recv().ok()
}

/// Runs `fut` on `handle`'s runtime; its output is to be waited for from
/// a thread that is not one of that runtime's.
fn spawn_waitable<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl Future<Output = T> + Send + 'static,
) -> std::sync::mpsc::Receiver<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx
}

fn runtime(threads: usize) -> Result<tokio::runtime::Runtime, ObjectError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("herdless-fetch")
        .enable_all()
        .build()
        .map_err(ObjectError::Runtime)
}

impl ObjectSource {
    /// Opens the object at `url`: checks `opts`, sets up the store from the
    /// environment, asks the object's size and ETag (`HEAD`), opens its
    /// directory in the host cache and starts the fetcher's threads.
    /// Blocks for the `HEAD`; call it outside any async runtime's threads.
    ///
    /// # Examples
    /// A local file through `file://` (the same code reads `s3://`,
    /// `gs://`, `az://` and `http(s)://`), in two chunks through a host
    /// cache:
    /// ```
    /// use herdless_pager::object::{ObjectOptions, ObjectSource};
    /// use herdless_pager::PageSource;
    ///
    /// let dir = std::env::temp_dir().join(format!("object-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let memory = dir.join("vm.mem");
    /// std::fs::write(&memory, vec![5u8; 4 << 20])?;
    /// let opts = ObjectOptions {
    ///     chunk_size: 2 << 20,
    ///     cache_dir: Some(dir.join("cache")),
    ///     ..ObjectOptions::default()
    /// };
    /// let src = ObjectSource::open(&format!("file://{}", memory.display()), &opts)?;
    /// assert_eq!(src.len(), 4 << 20);
    /// src.prefetch([(0, 4096)]); // chunk 0's GET starts; returns at once
    /// let mut page = vec![0u8; 4096];
    /// src.read_at((2 << 20) + 4096, &mut page)?; // waits for chunk 1 only
    /// assert!(page.iter().all(|&b| b == 5));
    /// src.read_at(0, &mut page)?; // the prefetched chunk
    /// let stats = src.stats();
    /// assert_eq!((stats.chunks, stats.fetches, stats.host_hits), (2, 2, 0));
    /// drop(src); // waits for the host cache's writes
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A bad URL or option, a store that cannot be set up, a missing
    /// object, refused credentials, an unusable cache directory
    /// ([`ObjectError`] has an example).
    pub fn open(url: &str, opts: &ObjectOptions) -> Result<Self, ObjectError> {
        Self::open_probing(url, opts, 0, 0).map(|(source, _)| source)
    }

    /// Opens the object at `url` as [`open`](Self::open) does, but asks
    /// for its size and ETag with a GET of its first `first` bytes (all of
    /// it if it is shorter) instead of a `HEAD`, and returns those bytes:
    /// one round trip instead of two where the caller needs the object's
    /// start at once (a pack's header). The bytes go around the chunks and
    /// the host cache (they are read again as part of the first chunk), so
    /// concurrent restores still fetch each chunk once. An empty object is
    /// an error here (no range of it can be read).
    ///
    /// With `ahead` > 0, chunks `0..ahead` are asked for in the same round
    /// trip, before the object's size and ETag are known (what a pack,
    /// read whole from its start, wants: `ahead.rs` says when their
    /// answers are used, and how restores starting together on one host
    /// still fetch each chunk once). A chunk past the object's end costs a
    /// refused GET, unless it was not sent yet when the size became known
    /// (then it is cancelled); [`ObjectStats::ahead_gets`] and
    /// [`ahead_used`](ObjectStats::ahead_used) count them.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::object::{ObjectOptions, ObjectSource};
    /// use herdless_pager::PageSource;
    ///
    /// let dir = std::env::temp_dir().join(format!("object-first-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let file = dir.join("vm.trace.pages");
    /// std::fs::write(&file, b"HEADER and the rest")?;
    /// let url = format!("file://{}", file.display());
    /// let opts = ObjectOptions { cache_dir: Some(dir.join("cache")), ..ObjectOptions::default() };
    /// let (src, start) = ObjectSource::open_reading_first(&url, &opts, 6, 2)?;
    /// assert_eq!((&start[..], src.len()), (&b"HEADER"[..], 19));
    /// // Chunk 0 was asked for ahead; chunk 1 is past the end (a GET refused).
    /// assert_eq!((src.stats().ahead_gets, src.stats().fetches), (2, 0));
    /// let mut all = vec![0u8; 19];
    /// src.read_at(0, &mut all)?; // chunk 0: the answer fetched ahead
    /// assert_eq!(&all[..], b"HEADER and the rest");
    /// assert_eq!((src.stats().ahead_used, src.stats().fetches), (1, 1));
    /// drop(src);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As for [`open`](Self::open), and an empty object.
    pub fn open_reading_first(
        url: &str,
        opts: &ObjectOptions,
        first: u64,
        ahead: usize,
    ) -> Result<(Self, Bytes), ObjectError> {
        Self::open_probing(url, opts, first.max(1), ahead)
    }

    /// [`open`](Self::open) (`first` = 0: a `HEAD`) or
    /// [`open_reading_first`](Self::open_reading_first).
    fn open_probing(
        url: &str,
        opts: &ObjectOptions,
        first: u64,
        ahead: usize,
    ) -> Result<(Self, Bytes), ObjectError> {
        opts.check()?;
        let loc = Location::parse(url, &opts.timeouts())?;
        let rt = runtime(opts.fetch_threads)?;
        let handle = rt.handle().clone();
        let (store, path) = (Arc::clone(&loc.store), loc.path.clone());
        let probe = spawn_waitable(&handle, async move {
            if first == 0 {
                return store.head(&path).await.map(|m| (m, Bytes::new()));
            }
            let range = object_store::GetOptions {
                range: Some(object_store::GetRange::Bounded(0..first)),
                ..object_store::GetOptions::default()
            };
            let got = store.get_opts(&path, range).await?;
            let meta = got.meta.clone();
            Ok((meta, got.bytes().await?))
        });
        // Chunks asked for ahead, in this round trip, after the probe (the
        // store answers it first: `ahead.rs`).
        let asked = ahead::Asked::start(&handle, &loc, opts, ahead);
        let (meta, start) = probe
            .recv()
            .ok()
            .ok_or_else(|| ObjectError::Other {
                url: loc.shown.clone(),
                reason: "the fetcher stopped".into(),
            })?
            .map_err(|e| classify(&loc, None, e))?;
        let len = meta.size;
        let etag = meta.e_tag.clone();
        // What the host cache keys the chunks by: never another object's
        // (or another version's) bytes.
        let identity = format!(
            "herdless-uffd chunk cache 1\nurl {}\nsize {len}\netag {}\nversion {}\nmodified {}\nchunk {}\n",
            loc.shown,
            etag.as_deref().unwrap_or("-"),
            meta.version.as_deref().unwrap_or("-"),
            if etag.is_none() { meta.last_modified.to_rfc3339() } else { "-".into() },
            opts.chunk_size
        );
        let cache = opts
            .cache_dir
            .as_ref()
            .map(|dir| {
                HostCache::open(dir, &identity, opts.cache_max).map_err(|source| {
                    ObjectError::Cache {
                        path: dir.clone(),
                        source,
                    }
                })
            })
            .transpose()?;
        let ahead_gets = asked.gets();
        let ahead = asked.settle(len, opts, cache.as_ref());
        let n = usize::try_from(len.div_ceil(opts.chunk_size)).map_err(|_| {
            ObjectError::Option(format!(
                "{len} bytes in chunks of {} are too many",
                opts.chunk_size
            ))
        })?;
        let core = Core {
            handle,
            loc,
            len,
            chunk_size: opts.chunk_size,
            etag,
            chunks: Chunks::new(n),
            cache,
            counters: stats::Counters::default(),
            queue: Mutex::new(fetch::Queue::default()),
            concurrency: opts.fetch_concurrency,
            retries: opts.retries,
            backoff: opts.retry_backoff,
            lock_patience: opts.lock_patience,
            warnings: Mutex::new(Vec::new()),
            writes: write_behind::WriteBehind::new(),
            ahead,
        };
        core.counters.add(&core.counters.ahead_gets, ahead_gets);
        let writes = core.writes.pending();
        let source = ObjectSource {
            core: Arc::new(core),
            _runtime: Arc::new(OwnedRuntime {
                runtime: Some(rt),
                writes,
            }),
        };
        Ok((source, start))
    }

    /// The URL, without any credentials it carried.
    pub fn url(&self) -> &str {
        &self.core.loc.shown
    }

    /// The object's ETag when it was opened, if the store gives one.
    pub fn etag(&self) -> Option<&str> {
        self.core.etag.as_deref()
    }

    /// Bytes per chunk.
    pub fn chunk_size(&self) -> u64 {
        self.core.chunk_size
    }

    /// This object's directory in the host cache, if there is one.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.core.cache.as_ref().map(HostCache::dir)
    }

    /// Starts fetching the chunks holding `ranges` (offset, length), in
    /// this order (a chunk once), at most `fetch_concurrency` at once;
    /// chunks already fetched or being fetched are skipped. Returns at
    /// once ([`open`](ObjectSource::open) has an example).
    pub fn prefetch(&self, ranges: impl IntoIterator<Item = (u64, u64)>) {
        let cs = self.core.chunk_size;
        let len = self.core.len;
        let chunks = ranges
            .into_iter()
            .filter(|&(off, n)| n > 0 && off < len)
            .flat_map(move |(off, n)| {
                let end = off.saturating_add(n).min(len);
                (off / cs)..end.div_ceil(cs)
            })
            .map(|i| i as usize);
        self.core.prefetch(chunks);
    }

    /// What the source has done so far ([`open`](ObjectSource::open) has
    /// an example).
    pub fn stats(&self) -> ObjectStats {
        let evicted = self
            .core
            .cache
            .as_ref()
            .map_or(0, |c| c.evicted.load(std::sync::atomic::Ordering::Relaxed));
        self.core
            .counters
            .snapshot(self.core.chunk_size, self.core.chunks.len() as u64, evicted)
    }

    /// Things worth a line in the log (the host cache could not be
    /// written...), credentials blanked; the first few.
    pub fn warnings(&self) -> Vec<String> {
        self.core
            .warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Claims every chunk of `[offset, end)` (non-empty, inside the
    /// object), starting the fetches this reader now owns, so that they
    /// run together; the claims, to be waited for in order.
    fn claim_range(&self, offset: u64, end: u64) -> Vec<(usize, Claim)> {
        self.chunks_of(offset, end)
            .map(|i| {
                let claim = self.core.chunks.claim(i);
                if let Claim::Fetch = claim {
                    self.core.start_fetch(i);
                }
                (i, claim)
            })
            .collect()
    }

    /// The chunks holding `[offset, end)` (non-empty).
    fn chunks_of(&self, offset: u64, end: u64) -> std::ops::RangeInclusive<usize> {
        let cs = self.core.chunk_size;
        (offset / cs) as usize..=((end - 1) / cs) as usize
    }

    /// Chunk `i`, waiting for it if need be (its fetch started now if
    /// nobody has started it).
    fn chunk(&self, i: usize, claim: Claim) -> io::Result<Bytes> {
        let c = &self.core.counters;
        match claim {
            Claim::Ready(b) => {
                c.add(&c.process_hits, 1);
                return Ok(b);
            }
            Claim::Failed(f) => return Err(io::Error::other(f.to_string())),
            Claim::Fetch | Claim::Wait => {}
        }
        let t0 = Instant::now();
        c.add(&c.chunk_waits, 1);
        let got = self.core.chunks.wait(i);
        c.wait_latency.record(t0.elapsed());
        got.map_err(|f| io::Error::other(f.to_string()))
    }
}

impl PageSource for ObjectSource {
    fn len(&self) -> u64 {
        self.core.len
    }

    fn may_touch_region(&self) -> bool {
        false
    }

    /// Every chunk of the range is asked for first (their fetches start
    /// together), then waited for in order.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.core.len)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let cs = self.core.chunk_size;
        for (i, claim) in self.claim_range(offset, end) {
            let bytes = self.chunk(i, claim)?;
            copy_part(&bytes, i as u64 * cs, offset, buf);
        }
        Ok(())
    }

    /// Fetches (or waits for) every chunk of the range; a failure is left
    /// for the read that follows.
    fn wait_ready(&self, offset: u64, len: usize) {
        let end = offset.saturating_add(len as u64).min(self.core.len);
        if offset >= end {
            return;
        }
        for (i, claim) in self.claim_range(offset, end) {
            if matches!(claim, Claim::Fetch | Claim::Wait) {
                let _ = self.chunk(i, claim);
            }
        }
    }

    /// Where the range lies in one chunk this process has: that chunk's
    /// bytes, kept until the source is dropped (`Ready` is final).
    fn memory_at(&self, offset: u64, len: usize) -> Option<*const u8> {
        let end = offset
            .checked_add(len as u64)
            .filter(|&e| len > 0 && e <= self.core.len)?;
        let chunks = self.chunks_of(offset, end);
        if chunks.start() != chunks.end() {
            return None;
        }
        let i = *chunks.start();
        let bytes = self.core.chunks.peek(i)?;
        // The kernel reads `len` bytes there: all of them in the chunk.
        let part = part_of(bytes, self.core.range(i).start, offset, end);
        (part.len() == len).then_some(part.as_ptr())
    }

    /// Every chunk of the range fetched (or failed for good).
    fn ready(&self, offset: u64, len: usize) -> bool {
        let end = offset.saturating_add(len as u64).min(self.core.len);
        offset >= end
            || self
                .chunks_of(offset, end)
                .all(|i| self.core.chunks.settled(i))
    }

    /// Chunks fetched (or failed for good) so far.
    fn arrivals(&self) -> u64 {
        self.core.chunks.arrivals()
    }

    fn wait_arrival(&self, seen: u64, patience: std::time::Duration) -> u64 {
        self.core.chunks.wait_arrival(seen, patience)
    }

    /// Every chunk of the range already here, or `f` is not called.
    fn with_bytes(&self, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        let Some(end) = offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.core.len)
        else {
            return false;
        };
        if len == 0 {
            return true;
        }
        let chunks: Option<Vec<(usize, &Bytes)>> = self
            .chunks_of(offset, end)
            .map(|i| self.core.chunks.peek(i).map(|b| (i, b)))
            .collect();
        let Some(chunks) = chunks else {
            return false;
        };
        for (i, bytes) in &chunks {
            f(part_of(bytes, self.core.range(*i).start, offset, end));
        }
        true
    }

    /// The prefix held by chunks this process already has.
    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let cs = self.core.chunk_size;
        let end = offset.saturating_add(buf.len() as u64).min(self.core.len);
        let mut at = offset;
        while at < end {
            let i = (at / cs) as usize;
            let Some(bytes) = self.core.chunks.peek(i) else {
                break;
            };
            copy_part(bytes, i as u64 * cs, offset, buf);
            at = (i as u64 + 1) * cs;
        }
        Ok(usize::try_from(at.min(end).saturating_sub(offset)).unwrap_or(0))
    }
}

/// What `chunk` (starting at object offset `chunk_start`) holds of the
/// object's bytes `[offset, end)` (empty if nothing).
fn part_of(chunk: &[u8], chunk_start: u64, offset: u64, end: u64) -> &[u8] {
    let lo = chunk_start.max(offset);
    let hi = (chunk_start + chunk.len() as u64).min(end).max(lo);
    &chunk[(lo - chunk_start) as usize..(hi - chunk_start) as usize]
}

/// Copies what `chunk` (starting at object offset `chunk_start`) holds of
/// `buf` (starting at object offset `offset`).
fn copy_part(chunk: &[u8], chunk_start: u64, offset: u64, buf: &mut [u8]) {
    let part = part_of(chunk, chunk_start, offset, offset + buf.len() as u64);
    let to = (chunk_start.max(offset) - offset) as usize;
    buf[to..to + part.len()].copy_from_slice(part);
}
