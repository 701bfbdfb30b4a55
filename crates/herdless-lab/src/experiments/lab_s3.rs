//! The lab's S3 server, for the experiments that restore from an object
//! store (`restore`'s S3 table, `firecracker`'s S3 section): one
//! `herdless-s3d` per lab process (s3s over s3s-fs, its objects on tmpfs,
//! on 127.0.0.1), started when first asked for, its directory removed
//! when the lab exits; and snapshots stored in it as `herdless-uffd
//! --record s3://…` leaves them (the memory, the trace, the trace's pack
//! bound to the memory object by its ETag).
//!
//! Experiments hold its lock while they measure: one restore at a time
//! sets its latency and reads its counts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use herdless_pager::object::{ObjectOptions, ObjectSource};
use herdless_pager::restore::{pack, Trace};
use herdless_s3d::{Credentials, S3Server};

use crate::harness::scratch::{self, Memo};
use crate::harness::LabError;

/// The one bucket.
pub(crate) const BUCKET: &str = "lab";

/// The server, and the URL of each object stored through [`LabS3::put_once`].
pub(crate) struct LabS3 {
    pub(crate) server: S3Server,
    stored: HashMap<String, String>,
}

/// The server's directory, removed when the lab exits.
static ROOT: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_root() {
    if let Some(root) = ROOT.get() {
        let _ = std::fs::remove_dir_all(root);
    }
}

/// The server (started the first time), locked for the caller.
pub(crate) fn lab_s3() -> Result<LabS3Guard, LabError> {
    static STORE: Memo<(), Arc<Mutex<LabS3>>> = Memo::new();
    let store = STORE.get((), || {
        let root = scratch::tmpfs_dir().join(format!("herdless-lab-s3-{}", std::process::id()));
        std::fs::create_dir_all(root.join(BUCKET))
            .map_err(|e| LabError::os("creating the S3 server's directory", e))?;
        if ROOT.set(root.clone()).is_ok() {
            // SAFETY: registers a plain extern "C" function without
            // arguments, as atexit requires.
            unsafe { libc::atexit(remove_root) };
        }
        let server = S3Server::start(&root, Credentials::new("AKLAB", "lab-secret-key"))
            .map_err(|e| LabError::os("starting the S3 server", e))?;
        Ok(Arc::new(Mutex::new(LabS3 {
            server,
            stored: HashMap::new(),
        })))
    })?;
    Ok(LabS3Guard(store))
}

/// The shared server; [`lock`](LabS3Guard::lock) it to use it.
pub(crate) struct LabS3Guard(Arc<Mutex<LabS3>>);

impl LabS3Guard {
    /// The server, for one measurement.
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, LabS3>, LabError> {
        self.0
            .lock()
            .map_err(|_| LabError::Panicked("the S3 server".into()))
    }
}

impl LabS3 {
    /// Stores `make()` as `key` the first time `key` is asked for; its URL.
    pub(crate) fn put_once(
        &mut self,
        key: &str,
        make: impl FnOnce() -> Result<Vec<u8>, LabError>,
    ) -> Result<String, LabError> {
        if let Some(url) = self.stored.get(key) {
            return Ok(url.clone());
        }
        self.server
            .put(BUCKET, key, make()?)
            .map_err(|e| LabError::os("storing an object in S3", e))?;
        let url = format!("s3://{BUCKET}/{key}");
        self.stored.insert(key.to_string(), url.clone());
        Ok(url)
    }

    /// The memory `memory` stored as `key`, and the trace at `local`
    /// stored beside it (`KEY.trace`) with its pack (`KEY.trace.pages`),
    /// packed from `memory` and bound to the memory object by the ETag a
    /// handler sees (`pack::build`), as `herdless-uffd --record s3://…`
    /// writes them; stored once. Their URLs: (memory, trace).
    pub(crate) fn snapshot_with_trace(
        &mut self,
        key: &str,
        memory: &Path,
        local: &Path,
    ) -> Result<(String, String), LabError> {
        let read_memory =
            || std::fs::read(memory).map_err(|e| LabError::os("reading the snapshot", e));
        let url = self.put_once(key, read_memory)?;
        let trace_key = format!("{key}.trace");
        if let Some(t) = self.stored.get(&trace_key) {
            return Ok((url, t.clone()));
        }
        let trace = Trace::read(local).map_err(|e| LabError::Sample(e.to_string()))?;
        let opts = ObjectOptions {
            store_config: self.store_config(),
            cache_dir: None,
            ..ObjectOptions::default()
        };
        let etag = ObjectSource::open(&url, &opts)
            .map_err(|e| LabError::Sample(format!("the memory object: {e}")))?
            .etag()
            .map(str::to_string);
        let bytes = read_memory()?;
        let packed = pack::build(&trace, etag.as_deref(), |off, buf| {
            let off = off as usize;
            buf.copy_from_slice(&bytes[off..off + buf.len()]);
            Ok(())
        })
        .map_err(|e| LabError::os("packing the trace", e))?;
        self.put_once(&format!("{trace_key}.pages"), || Ok(packed))?;
        let t = self.put_once(&trace_key, || Ok(trace.to_text().into_bytes()))?;
        Ok((url, t))
    }

    /// The server's `AWS_*` variables as object_store's configuration
    /// keys.
    pub(crate) fn store_config(&self) -> Vec<(String, String)> {
        let env = self.server.env().into_iter();
        env.map(|(k, v)| (k.to_ascii_lowercase(), v)).collect()
    }

    /// Range GETs the server answered for `key` since its counts were
    /// reset, and the distinct ranges they asked for, of those that start
    /// inside the object (a restore asks for a pack's first chunks before
    /// it knows its size: those past its end are refused, and left out).
    pub(crate) fn gets_of(&self, key: &str) -> (u64, usize) {
        let len = std::fs::metadata(self.server.root().join(BUCKET).join(key))
            .map_or(u64::MAX, |m| m.len());
        let counts = self.server.gets_of(BUCKET, key);
        let inside = counts.iter().filter(|&(&first, _)| first < len.max(1));
        inside.fold((0, 0), |(n, distinct), (_, &c)| (n + c, distinct + 1))
    }

    /// Every range GET the server answered for `key` since its counts were
    /// reset (those past its end too).
    pub(crate) fn all_gets_of(&self, key: &str) -> u64 {
        self.server.gets_of(BUCKET, key).values().sum()
    }
}

/// The key of the object at `url` in the lab's bucket.
pub(crate) fn key_of(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or_default()
}
