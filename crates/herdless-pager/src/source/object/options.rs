//! How an [`ObjectSource`](super::ObjectSource) reads: chunk size, host
//! cache, concurrency, retries and timeouts, and the store settings given
//! over the environment's.

use std::path::PathBuf;
use std::time::Duration;

use super::location::Timeouts;
use super::ObjectError;

/// Default bytes per GET (measured with the lab's `restore-s3`: see the
/// README's "Restoring from S3").
pub const DEFAULT_CHUNK_SIZE: u64 = 2 << 20;

/// Default limit of the host cache, in bytes.
pub const DEFAULT_CACHE_MAX: u64 = 8 << 30;

/// Default number of chunks the prefetch fetches at once.
pub const DEFAULT_FETCH_CONCURRENCY: usize = 16;

/// Default number of a pack's chunks asked for in the round trip that
/// opens it, before its size is known (`ahead.rs`; at most the fetch
/// concurrency).
pub const DEFAULT_FETCH_AHEAD: usize = 16;

/// The largest chunk accepted.
pub const MAX_CHUNK_SIZE: u64 = 1 << 30;

/// How an [`ObjectSource`](super::ObjectSource) reads. Start from the defaults and change what
/// you need; [`ObjectSource::open`](super::ObjectSource::open) checks the values.
///
/// ```
/// use std::time::Duration;
/// use herdless_pager::object::ObjectOptions;
///
/// let opts = ObjectOptions {
///     chunk_size: 4 << 20, // E2B's range reads
///     cache_dir: Some("/var/cache/snapshots".into()),
///     fetch_concurrency: 8,
///     request_timeout: Duration::from_secs(10),
///     // Over the environment's AWS_REGION, for this source only.
///     store_config: vec![("aws_region".into(), "eu-west-1".into())],
///     ..ObjectOptions::default()
/// };
/// assert_eq!(opts.retries, 4);
/// ```
#[derive(Clone, Debug)]
pub struct ObjectOptions {
    /// Bytes per range GET: a multiple of the page size, at most
    /// [`MAX_CHUNK_SIZE`].
    pub chunk_size: u64,
    /// The host cache directory (`None`: no host cache, every chunk is
    /// fetched from the store).
    pub cache_dir: Option<PathBuf>,
    /// Bytes of chunks the host cache may hold, all objects together
    /// (least recently used evicted first).
    pub cache_max: u64,
    /// Chunks the prefetch fetches at once (demand reads are not counted:
    /// they start at once).
    pub fetch_concurrency: usize,
    /// Chunks of a restore's pack asked for in the round trip that opens
    /// it, before its size and ETag are known (0: none; no more than
    /// `fetch_concurrency` are): its working set arrives a round trip
    /// sooner. A pack of fewer chunks costs up to a refused GET for each one
    /// past its end; a host cache holding the pack already, or another
    /// process fetching it, means none are (`ObjectSource::open_reading_first`).
    pub fetch_ahead: usize,
    /// Tries after the first for a GET that failed in a way that may pass
    /// (the network, `5xx`); `404`, `403` and a changed object are final.
    pub retries: u32,
    /// Pause before the first retry, doubled for each next one (at most
    /// 2 s).
    pub retry_backoff: Duration,
    /// How long one request may take (then it counts as failed).
    pub request_timeout: Duration,
    /// How long to wait for another process fetching a chunk before
    /// fetching it too.
    pub lock_patience: Duration,
    /// Threads of the source's runtime (the async client's).
    pub fetch_threads: usize,
    /// Store settings that override the environment's, by the names
    /// `object_store`'s builders take (`aws_endpoint`, `aws_region`,
    /// `aws_access_key_id`, `aws_secret_access_key`, `aws_allow_http`, and
    /// the Google and Azure ones): for a program that must not change its
    /// environment.
    pub store_config: Vec<(String, String)>,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        ObjectOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            cache_dir: Some(default_cache_dir()),
            cache_max: DEFAULT_CACHE_MAX,
            fetch_concurrency: DEFAULT_FETCH_CONCURRENCY,
            fetch_ahead: DEFAULT_FETCH_AHEAD,
            retries: 4,
            retry_backoff: Duration::from_millis(50),
            request_timeout: Duration::from_secs(30),
            lock_patience: Duration::from_secs(60),
            fetch_threads: 2,
            store_config: Vec::new(),
        }
    }
}

/// The host cache directory used when none is given:
/// `/var/cache/herdless-uffd` for root, else
/// `$XDG_CACHE_HOME/herdless-uffd` (`~/.cache/herdless-uffd`), else one in
/// the temporary directory, per user.
///
/// ```
/// let dir = herdless_pager::object::default_cache_dir();
/// assert!(dir.ends_with("herdless-uffd") || dir.to_string_lossy().contains("herdless-uffd-"));
/// ```
pub fn default_cache_dir() -> PathBuf {
    let uid = rustix::process::geteuid();
    if uid.is_root() {
        return PathBuf::from("/var/cache/herdless-uffd");
    }
    let xdg = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty());
    if let Some(x) = xdg {
        return PathBuf::from(x).join("herdless-uffd");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".cache").join("herdless-uffd");
    }
    std::env::temp_dir().join(format!("herdless-uffd-{}", uid.as_raw()))
}

impl ObjectOptions {
    /// Checks the values that can never work, whatever the object: the
    /// chunk size and the fetch concurrency.
    /// [`ObjectSource::open`](super::ObjectSource::open) checks them
    /// first; `herdless-uffd` checks them with its other options.
    ///
    /// ```
    /// use herdless_pager::object::ObjectOptions;
    /// assert!(ObjectOptions::default().check().is_ok());
    /// let odd = ObjectOptions { chunk_size: 5000, ..ObjectOptions::default() };
    /// assert!(odd.check().unwrap_err().to_string().contains("multiple of the page size"));
    /// ```
    ///
    /// # Errors
    /// [`ObjectError::Option`] naming the value and what it must be.
    pub fn check(&self) -> Result<(), ObjectError> {
        let page = rustix::param::page_size() as u64;
        if self.chunk_size == 0
            || !self.chunk_size.is_multiple_of(page)
            || self.chunk_size > MAX_CHUNK_SIZE
        {
            return Err(ObjectError::Option(format!(
                "the chunk size {} must be a multiple of the page size ({page}) and at most \
                 {MAX_CHUNK_SIZE}",
                self.chunk_size
            )));
        }
        if self.fetch_concurrency == 0 || self.fetch_concurrency > 1024 {
            return Err(ObjectError::Option(format!(
                "the fetch concurrency {} must be between 1 and 1024",
                self.fetch_concurrency
            )));
        }
        Ok(())
    }

    /// The request and connect timeouts, and the settings over the
    /// environment's, as the store's location takes them.
    pub(super) fn timeouts(&self) -> Timeouts {
        Timeouts {
            request: self.request_timeout,
            connect: self.request_timeout.min(Duration::from_secs(10)),
            config: self.store_config.clone(),
        }
    }
}
