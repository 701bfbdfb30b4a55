//! Fetching chunks: the host cache first, then a range GET (with the
//! object's ETag as `If-Match`, and the ETag of the answer checked too),
//! retried with exponential backoff while the failure is one that may
//! pass; and the prefetch queue, drained in order by at most
//! `fetch_concurrency` tasks.
//!
//! # Who drives the async client
//! `object_store` is async. The source owns a tokio runtime with threads
//! of its own (`herdless-fetch`); every fetch is a task spawned on it with
//! [`Handle::spawn`](tokio::runtime::Handle::spawn), which any thread may
//! call. The threads that need bytes (the pager's handlers and prefetch
//! threads) never enter the runtime and never `block_on` it: they wait on
//! the chunk's slot (`chunks.rs`), which the task completes. A task always
//! completes its slot, also when the fetch panics, so no reader waits for
//! a fetch that will never end; every GET has a request timeout, the
//! retries are bounded, and so is a wait for another process's lock on
//! the host cache. The cache's file work (open, read, write, rename,
//! `flock`) runs on the runtime's blocking threads.
//!
//! # Demand first
//! A reader that needs a chunk nobody is fetching starts its fetch at once
//! (also one queued for the prefetch but not yet started: it takes it
//! over), so a demand fault never waits behind the prefetch's queue; the
//! prefetch's tasks skip chunks a reader took. Readers thus wait only for
//! their own chunks.
//!
//! # Restores of one snapshot starting together
//! A chunk whose host cache lock another process holds (it is fetching
//! it) is waited for by a task of its own, which looks again every few
//! milliseconds; the prefetch's queue goes on with the next chunk. So
//! restores that start together, their queues in the same order, each
//! fetch the chunks nobody else has locked, and read the others' from the
//! cache once written, instead of all waiting behind the one that locked
//! the first `fetch_concurrency` chunks, wave after wave (the test
//! `a_prefetch_goes_on_past_a_chunk_another_source_is_fetching`: with one
//! fetch at a time and the first chunk's GET held for another source,
//! the others are fetched meanwhile). On the lab's 2 cores four restores
//! at once are bound by CPU, not by the waits, and took as long either
//! way (README, "Restoring from S3").

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use object_store::{GetOptions, GetRange};

use super::ahead::{self, Ahead, Early};
use super::buffer::ChunkBuf;
use super::chunks::Chunks;
use super::error::ObjectError;
use super::host_cache::{HostCache, Lookup};
use super::location::{redact, Location};
use super::stats::Counters;
use super::write_behind::WriteBehind;

/// The longest pause between two tries of a GET.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The prefetch's chunks still to fetch, and the tasks fetching them.
#[derive(Default)]
pub(crate) struct Queue {
    order: VecDeque<usize>,
    /// Tasks draining `order` (at most the concurrency); changed only
    /// under the queue's lock, with `order`, so a task that finds the
    /// queue empty and leaves is never counted by a `prefetch` that has
    /// just added chunks.
    drainers: usize,
}

/// Everything a fetch task needs (never the runtime itself: a task must
/// not own what it runs on).
pub(crate) struct Core {
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) loc: Location,
    pub(crate) len: u64,
    pub(crate) chunk_size: u64,
    /// The object's ETag when it was opened (`None`: the store gives none).
    pub(crate) etag: Option<String>,
    pub(crate) chunks: Chunks,
    pub(crate) cache: Option<HostCache>,
    /// The host cache's writes, behind the fetches.
    pub(crate) writes: WriteBehind,
    pub(crate) counters: Counters,
    pub(crate) queue: Mutex<Queue>,
    pub(crate) concurrency: usize,
    pub(crate) retries: u32,
    pub(crate) backoff: Duration,
    pub(crate) lock_patience: Duration,
    /// Things worth a line in the log (the first few), credentials blanked.
    pub(crate) warnings: Mutex<Vec<String>>,
    /// The GETs made ahead when the object was opened (`ahead.rs`).
    pub(crate) ahead: Ahead,
}

impl Core {
    /// The bytes of chunk `i`.
    pub(crate) fn range(&self, i: usize) -> Range<u64> {
        let start = i as u64 * self.chunk_size;
        start..(start + self.chunk_size).min(self.len)
    }

    pub(crate) fn warn(&self, msg: String) {
        let mut w = self.warnings.lock().unwrap_or_else(PoisonError::into_inner);
        if w.len() < 16 {
            w.push(redact(&msg));
        }
    }

    /// Starts the fetch of chunk `i`, whose slot the caller has just moved
    /// to `Fetching`.
    pub(crate) fn start_fetch(self: &Arc<Self>, i: usize) {
        let core = Arc::clone(self);
        self.handle
            .spawn(async move { core.fetch_and_complete(i, false, None).await });
    }

    /// Fetches chunk `i` and completes its slot, whatever happens
    /// (`looked`: what one look in the host cache found already).
    async fn fetch_and_complete(
        self: &Arc<Self>,
        i: usize,
        prefetch: bool,
        looked: Option<std::io::Result<Lookup>>,
    ) {
        let outcome = AssertUnwindSafe(self.load(i, prefetch, looked))
            .catch_unwind()
            .await;
        let outcome = match outcome {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(e)) => {
                self.counters.add(&self.counters.chunks_failed, 1);
                Err(format!("chunk {i} of {}: {e}", self.loc.shown))
            }
            Err(_) => {
                self.counters.add(&self.counters.chunks_failed, 1);
                Err(format!(
                    "chunk {i} of {}: the fetch panicked",
                    self.loc.shown
                ))
            }
        };
        self.chunks
            .complete(i, outcome.map_err(|m| redact(&m).into()));
    }

    /// One look in the host cache for chunk `i`, without waiting: the
    /// chunk, its lock (ours now), or `HeldElsewhere` if another process
    /// holds the lock (it is fetching the chunk).
    async fn look(self: &Arc<Self>, i: usize) -> std::io::Result<Lookup> {
        let want = (self.range(i).end - self.range(i).start) as usize;
        self.on_cache(move |c| c.find_or_lock(i, want)).await
    }

    /// Looks for chunk `i` in the host cache until it is there or its lock
    /// is ours, while another process holds the lock, at most the lock
    /// patience (then `HeldElsewhere`: this process fetches it too). The
    /// wait is a task's sleep between looks, not a blocking thread's: many
    /// chunks can wait at once.
    async fn wait_for_lock(self: &Arc<Self>, i: usize) -> std::io::Result<Lookup> {
        let deadline = Instant::now() + self.lock_patience;
        let mut pause = Duration::from_micros(250);
        loop {
            match self.look(i).await {
                Ok(Lookup::HeldElsewhere) if Instant::now() < deadline => {
                    // The holder is fetching over the network: a look every
                    // few milliseconds costs nothing next to that.
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(2));
                }
                other => return other,
            }
        }
    }

    /// Chunk `i` from the host cache, or fetched (and then written there,
    /// behind: this process's readers get the bytes as soon as the GET
    /// ends). `looked`: a look made already (`drain`).
    async fn load(
        self: &Arc<Self>,
        i: usize,
        prefetch: bool,
        looked: Option<std::io::Result<Lookup>>,
    ) -> Result<Bytes, ObjectError> {
        if let Some(early) = self.ahead.take(i) {
            return self.load_early(i, early, prefetch).await;
        }
        if self.cache.is_none() {
            return self.get(i, prefetch).await;
        }
        let t0 = Instant::now();
        let looked = match looked {
            Some(l) => l,
            None => self.wait_for_lock(i).await,
        };
        let lock = match looked {
            Ok(Lookup::Found(bytes)) => {
                self.counters.add(&self.counters.host_hits, 1);
                if t0.elapsed() > Duration::from_millis(1) {
                    self.counters.add(&self.counters.host_lock_waits, 1);
                }
                return Ok(bytes);
            }
            Ok(Lookup::Locked(file)) => Some(file),
            Ok(Lookup::HeldElsewhere) => {
                self.counters.add(&self.counters.host_lock_timeouts, 1);
                None
            }
            Err(e) => {
                self.warn(format!("cannot use chunk {i} of the host cache: {e}"));
                None
            }
        };
        let bytes = self.get(i, prefetch).await?;
        self.write_behind(i, bytes.clone(), lock);
        Ok(bytes)
    }

    /// Chunk `i` from its GET made ahead (`ahead.rs`), its host cache lock
    /// taken then; fetched as usual if that answer is not the chunk's.
    async fn load_early(
        self: &Arc<Self>,
        i: usize,
        early: Early,
        prefetch: bool,
    ) -> Result<Bytes, ObjectError> {
        let Early {
            task,
            started,
            lock,
        } = early;
        let range = self.range(i);
        let bytes = match ahead::bytes(task, self.etag.as_deref(), range.clone()).await {
            Some(bytes) => {
                let c = &self.counters;
                c.fetch_latency.record(started.elapsed());
                c.add(&c.fetches, 1);
                c.add(&c.ahead_used, 1);
                c.add(&c.fetched_bytes, range.end - range.start);
                if prefetch {
                    c.add(&c.prefetch_fetches, 1);
                }
                bytes
            }
            None => self.get(i, prefetch).await?,
        };
        if self.cache.is_some() {
            self.write_behind(i, bytes.clone(), lock);
        }
        Ok(bytes)
    }

    /// Writes chunk `i` to the host cache behind the fetches
    /// (`write_behind.rs`), and only then unlocks it: another process
    /// waiting for the lock finds the chunk whole.
    fn write_behind(self: &Arc<Self>, i: usize, bytes: Bytes, lock: Option<std::fs::File>) {
        let core = Arc::clone(self);
        self.writes.queue(Box::new(move || {
            if let Some(cache) = &core.cache
                && let Err(e) = cache.store(i, &bytes)
            {
                core.counters.add(&core.counters.cache_write_errors, 1);
                core.warn(format!("cannot write chunk {i} to the host cache: {e}"));
            }
            drop(lock);
        }));
    }

    /// Chunk `i` from the store: GETs until one succeeds, the failure is
    /// final, or the retries are spent.
    async fn get(&self, i: usize, prefetch: bool) -> Result<Bytes, ObjectError> {
        let range = self.range(i);
        let want = (range.end - range.start) as usize;
        let mut backoff = self.backoff;
        let mut tries = 0;
        loop {
            let t0 = Instant::now();
            let err = match self.get_once(range.clone(), want).await {
                Ok(bytes) if bytes.len() == want => {
                    let c = &self.counters;
                    c.fetch_latency.record(t0.elapsed());
                    c.add(&c.fetches, 1);
                    c.add(&c.fetched_bytes, want as u64);
                    if prefetch {
                        c.add(&c.prefetch_fetches, 1);
                    }
                    return Ok(bytes);
                }
                Ok(bytes) => ObjectError::Other {
                    url: self.loc.shown.clone(),
                    reason: format!("a GET of {want} bytes returned {}", bytes.len()),
                },
                Err(e) => e,
            };
            self.counters.add(&self.counters.fetch_failures, 1);
            if !err.is_transient() || tries >= self.retries {
                return Err(err);
            }
            tries += 1;
            self.counters.add(&self.counters.fetch_retries, 1);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One range GET of `want` bytes, its answer's ETag checked against
    /// the one at the start (a store that ignores `If-Match` is caught
    /// here), its body copied as it arrives into a buffer of the chunk's
    /// own (`buffer.rs`).
    async fn get_once(&self, range: Range<u64>, want: usize) -> Result<Bytes, ObjectError> {
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: self.etag.clone(),
            ..GetOptions::default()
        };
        let res = self
            .loc
            .store
            .get_opts(&self.loc.path, opts)
            .await
            .map_err(|e| classify(&self.loc, self.etag.as_deref(), e))?;
        if let (Some(was), Some(now)) = (&self.etag, &res.meta.e_tag)
            && was != now
        {
            return Err(ObjectError::Changed {
                url: self.loc.shown.clone(),
                was: was.clone(),
                now: now.clone(),
            });
        }
        let failed = |e| classify(&self.loc, self.etag.as_deref(), e);
        let mut buf = ChunkBuf::with_capacity(want);
        let mut body = res.into_stream();
        while let Some(frame) = body.next().await {
            if !buf.push(&frame.map_err(failed)?) {
                return Err(ObjectError::Other {
                    url: self.loc.shown.clone(),
                    reason: format!("a GET of {want} bytes returned more"),
                });
            }
        }
        Ok(buf.freeze())
    }

    /// Queues `chunks` (in this order) for the prefetch, skipping those
    /// already asked for, and starts tasks to fetch them, at most
    /// `concurrency` at once.
    pub(crate) fn prefetch(self: &Arc<Self>, chunks: impl IntoIterator<Item = usize>) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        for i in chunks {
            if i < self.chunks.len() && self.chunks.queue(i) {
                q.order.push_back(i);
            }
        }
        while q.drainers < self.concurrency && q.drainers < q.order.len() {
            q.drainers += 1;
            let core = Arc::clone(self);
            self.handle.spawn(async move { core.drain().await });
        }
    }

    /// A prefetch task: fetches the queue's chunks in order until it is
    /// empty.
    async fn drain(self: Arc<Self>) {
        loop {
            let next = {
                let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                match q.order.pop_front() {
                    Some(i) => i,
                    None => {
                        q.drainers -= 1;
                        return;
                    }
                }
            };
            if !self.chunks.claim_queued(next) {
                continue;
            }
            // A chunk another process on the host is fetching is waited for
            // beside the queue, which goes on with the next: restores of one
            // snapshot starting together each fetch different chunks, instead
            // of all waiting for the one that locked the first (module doc).
            // (A chunk asked for ahead holds our own lock.)
            if self.cache.is_none() || self.ahead.has(next) {
                self.fetch_and_complete(next, true, None).await;
                continue;
            }
            match self.look(next).await {
                Ok(Lookup::HeldElsewhere) => {
                    let core = Arc::clone(&self);
                    self.handle
                        .spawn(async move { core.fetch_and_complete(next, true, None).await });
                }
                looked => self.fetch_and_complete(next, true, Some(looked)).await,
            }
        }
    }
}

/// What the source makes of a store's error.
pub(crate) fn classify(loc: &Location, etag: Option<&str>, e: object_store::Error) -> ObjectError {
    let url = loc.shown.clone();
    let reason = redact(&e.to_string());
    match e {
        object_store::Error::NotFound { .. } => ObjectError::NotFound { url, reason },
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ObjectError::Denied { url, reason },
        object_store::Error::Precondition { .. } => ObjectError::Changed {
            url,
            was: etag.unwrap_or("(none)").to_string(),
            now: format!("another ({reason})"),
        },
        _ if asked_the_instance_for_credentials(&reason) => ObjectError::Denied {
            url,
            reason: format!(
                "none in the environment: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
                 the store's own variables; the instance's metadata service gave none either: \
                 {reason}"
            ),
        },
        _ => ObjectError::Other { url, reason },
    }
}

/// Whether a store's failure came from asking the cloud instance's
/// metadata service for credentials, which the builders do when the
/// environment holds none: off a cloud instance the request is refused or
/// times out, and the store's message names only that endpoint.
fn asked_the_instance_for_credentials(reason: &str) -> bool {
    [
        "169.254.169.254",
        "169.254.170.2",
        "metadata.google.internal",
    ]
    .iter()
    .any(|endpoint| reason.contains(endpoint))
}

impl Core {
    /// Runs `f` on the host cache, on the runtime's blocking threads (file
    /// work, and `flock` waits, block).
    async fn on_cache<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&HostCache) -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        let core = Arc::clone(self);
        tokio::task::spawn_blocking(move || match &core.cache {
            Some(c) => f(c),
            None => Err(std::io::Error::other("no host cache")),
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(format!("host cache task: {e}"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_ask_for_instance_credentials_is_told_apart() {
        // object_store's message when the environment holds no AWS
        // credentials, off an EC2 instance (seen on the lab's VM).
        let imds = "Generic S3 error: Error performing PUT \
                    http://169.254.169.254/latest/api/token in 4.4ms - Server returned \
                    non-2xx status code: 403 Forbidden";
        assert!(asked_the_instance_for_credentials(imds));
        assert!(!asked_the_instance_for_credentials(
            "Generic S3 error: Error performing GET http://127.0.0.1:9000/snaps/vm.mem: 500"
        ));
    }
}
