//! What an [`ObjectSource`](super::ObjectSource) did: GETs, bytes, cache
//! hits in this process and on the host, retries, failures, and the time
//! GETs and readers waiting for chunks took. Tallies are `Relaxed`
//! counters (nothing is published through them).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::stats::Histogram;
use crate::Latency;

/// `l` with its quantiles (bucket upper edges) no longer than the
/// longest seen.
fn within_max(l: Latency) -> Latency {
    Latency {
        p50: l.p50.min(l.max),
        p99: l.p99.min(l.max),
        ..l
    }
}

/// The source's counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) fetches: AtomicU64,
    pub(crate) prefetch_fetches: AtomicU64,
    pub(crate) fetched_bytes: AtomicU64,
    pub(crate) fetch_failures: AtomicU64,
    pub(crate) fetch_retries: AtomicU64,
    pub(crate) chunks_failed: AtomicU64,
    pub(crate) process_hits: AtomicU64,
    pub(crate) host_hits: AtomicU64,
    pub(crate) host_lock_waits: AtomicU64,
    pub(crate) host_lock_timeouts: AtomicU64,
    pub(crate) chunk_waits: AtomicU64,
    pub(crate) cache_write_errors: AtomicU64,
    pub(crate) ahead_gets: AtomicU64,
    pub(crate) ahead_used: AtomicU64,
    pub(crate) fetch_latency: Histogram,
    pub(crate) wait_latency: Histogram,
}

impl Counters {
    pub(crate) fn add(&self, c: &AtomicU64, n: u64) {
        let _ = self;
        c.fetch_add(n, Relaxed);
    }
}

/// What an object source has done so far, from
/// [`ObjectSource::stats`](super::ObjectSource::stats) (see
/// [`ObjectSource::open`](super::ObjectSource::open) for an example).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectStats {
    /// Bytes per chunk (one GET).
    pub chunk_size: u64,
    /// Chunks in the object.
    pub chunks: u64,
    /// Chunks fetched from the store (GETs that returned their bytes).
    pub fetches: u64,
    /// Of those, fetched for the prefetch rather than for a reader.
    pub prefetch_fetches: u64,
    /// Bytes fetched from the store.
    pub fetched_bytes: u64,
    /// GETs that failed (each retried, or the last of a chunk that failed).
    pub fetch_failures: u64,
    /// GETs made again after a failure.
    pub fetch_retries: u64,
    /// Chunks given up on (the GETs kept failing, the object changed, or
    /// it is gone): their pages are poisoned when touched.
    pub chunks_failed: u64,
    /// Reads served from a chunk this process already held (no wait).
    pub process_hits: u64,
    /// Chunks read from the host cache instead of the store (fetched by
    /// another restore on this host, or an earlier one).
    pub host_hits: u64,
    /// Chunks another process was fetching when this one wanted them
    /// (this one waited for its lock, then read its chunk).
    pub host_lock_waits: u64,
    /// Locks waited for in vain (the holder took too long): this process
    /// fetched the chunk itself.
    pub host_lock_timeouts: u64,
    /// Reads that waited for their chunk to arrive.
    pub chunk_waits: u64,
    /// Chunks that could not be written to the host cache (served anyway).
    pub cache_write_errors: u64,
    /// Chunk files this process evicted from the host cache.
    pub cache_evictions: u64,
    /// GETs of chunks made ahead, in the round trip that opened the object
    /// (a pack's first chunks: `ahead.rs`), before its size and ETag were
    /// known.
    pub ahead_gets: u64,
    /// Of those, the ones whose answers were used (counted in `fetches`
    /// too); the rest were past the object's end, found in the host cache,
    /// failed, or came from another version of the object.
    pub ahead_used: u64,
    /// Round trip of each successful GET (request to last byte).
    pub fetch_latency: Latency,
    /// How long reads that waited for a chunk waited.
    pub wait_latency: Latency,
}

impl Counters {
    /// The figures now; `chunk_size`, `chunks` and `evictions` come from
    /// the source.
    pub(crate) fn snapshot(&self, chunk_size: u64, chunks: u64, evictions: u64) -> ObjectStats {
        let l = |c: &AtomicU64| c.load(Relaxed);
        ObjectStats {
            chunk_size,
            chunks,
            fetches: l(&self.fetches),
            prefetch_fetches: l(&self.prefetch_fetches),
            fetched_bytes: l(&self.fetched_bytes),
            fetch_failures: l(&self.fetch_failures),
            fetch_retries: l(&self.fetch_retries),
            chunks_failed: l(&self.chunks_failed),
            process_hits: l(&self.process_hits),
            host_hits: l(&self.host_hits),
            host_lock_waits: l(&self.host_lock_waits),
            host_lock_timeouts: l(&self.host_lock_timeouts),
            chunk_waits: l(&self.chunk_waits),
            cache_write_errors: l(&self.cache_write_errors),
            cache_evictions: evictions,
            ahead_gets: l(&self.ahead_gets),
            ahead_used: l(&self.ahead_used),
            fetch_latency: within_max(self.fetch_latency.latency()),
            wait_latency: within_max(self.wait_latency.latency()),
        }
    }
}
