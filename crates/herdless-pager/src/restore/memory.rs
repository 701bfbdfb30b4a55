//! What a restore serves from: the snapshot's memory file, or (feature
//! `object-store`) an object URL (`s3://BUCKET/KEY`, `gs://`, `az://`,
//! `http(s)://`, `file://`) read through the host chunk cache
//! ([`ObjectSource`](crate::object::ObjectSource)); and the working-set
//! traces, which may be object URLs too (read whole; a `--record` trace
//! is written with one PUT at the end).
//!
//! With an object, "reading the file ahead" (`--populate`, and the pages
//! `--prefetch` installs) means starting to fetch those chunks, in trace
//! order, as soon as the handler starts: it does not wait for them
//! before listening.

use std::path::Path;

use super::{RestoreError, RestoreOptions, Trace};
use crate::{FileSource, PageSource, PagerError};

/// The bytes a restore serves.
pub(crate) enum MemorySource {
    /// A local file.
    File(FileSource),
    /// An object in a store.
    #[cfg(feature = "object-store")]
    Object(crate::object::ObjectSource),
}

/// Whether `path` is an object URL this build reads.
pub(crate) fn is_url(path: &Path) -> bool {
    #[cfg(feature = "object-store")]
    {
        path.to_str().is_some_and(crate::object::is_object_url)
    }
    #[cfg(not(feature = "object-store"))]
    {
        let _ = path;
        false
    }
}

impl MemorySource {
    /// Opens the memory file or object of `opts` (an object: its `HEAD`,
    /// so a missing object or refused credentials stop the restore here,
    /// before it listens).
    pub(crate) fn open(opts: &RestoreOptions) -> Result<Self, RestoreError> {
        Self::open_at(&opts.memory_file, opts)
    }

    /// Opens the file or object at `path` as [`open`](Self::open) does
    /// (also a trace's pack).
    pub(crate) fn open_at(path: &Path, opts: &RestoreOptions) -> Result<Self, RestoreError> {
        #[cfg(feature = "object-store")]
        if is_url(path) {
            let url = path.to_string_lossy();
            return Ok(MemorySource::Object(crate::object::ObjectSource::open(
                &url,
                &opts.object,
            )?));
        }
        let _ = opts;
        FileSource::open(path)
            .map(MemorySource::File)
            .map_err(|e| match e {
                PagerError::SourceOpen { path, source } => {
                    RestoreError::MemoryFile { path, source }
                }
                other => RestoreError::Pager(other),
            })
    }

    /// Opens the file or object at `path` as [`open_at`](Self::open_at)
    /// does, with its first `first` bytes where they come in the same
    /// round trip: an object's, read by the GET that replaces its `HEAD`
    /// (`ObjectSource::open_reading_first`); a file's are not read (empty).
    /// An object's chunks `0..ahead` are asked for in that round trip too.
    pub(crate) fn open_reading_first(
        path: &Path,
        opts: &RestoreOptions,
        first: u64,
        ahead: usize,
    ) -> Result<(Self, Vec<u8>), RestoreError> {
        #[cfg(feature = "object-store")]
        if is_url(path) {
            let url = path.to_string_lossy();
            let (source, start) =
                crate::object::ObjectSource::open_reading_first(&url, &opts.object, first, ahead)?;
            return Ok((MemorySource::Object(source), start.to_vec()));
        }
        let _ = (first, ahead);
        Ok((Self::open_at(path, opts)?, Vec::new()))
    }

    /// How `path`, opened as this source, is named in messages (an object
    /// URL without credentials).
    pub(crate) fn shown(&self, path: &Path) -> String {
        match self {
            MemorySource::File(_) => path.display().to_string(),
            #[cfg(feature = "object-store")]
            MemorySource::Object(o) => o.url().to_string(),
        }
    }

    /// Reads `buf.len()` bytes at `offset` (an object: waiting for its
    /// chunks).
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        match self {
            MemorySource::File(f) => f.read_at(offset, buf),
            #[cfg(feature = "object-store")]
            MemorySource::Object(o) => o.read_at(offset, buf),
        }
    }

    /// The object's ETag, if this is an object whose store gives one.
    pub(crate) fn etag(&self) -> Option<&str> {
        match self {
            MemorySource::File(_) => None,
            #[cfg(feature = "object-store")]
            MemorySource::Object(o) => o.etag(),
        }
    }

    /// The object's chunk size (bytes per GET), if this is an object.
    pub(crate) fn chunk_size(&self) -> Option<u64> {
        match self {
            MemorySource::File(_) => None,
            #[cfg(feature = "object-store")]
            MemorySource::Object(o) => Some(o.chunk_size()),
        }
    }

    /// Bytes of memory.
    pub(crate) fn len(&self) -> u64 {
        match self {
            MemorySource::File(f) => f.len(),
            #[cfg(feature = "object-store")]
            MemorySource::Object(o) => o.len(),
        }
    }

    /// Prepares `[offset, offset + len)` to be copied: a file's pages read
    /// and mapped; an object's chunks queued for the fetcher (returns at
    /// once).
    pub(crate) fn populate(&self, offset: u64, len: u64) -> Result<(), PagerError> {
        match self {
            MemorySource::File(f) => f.populate(offset, len),
            #[cfg(feature = "object-store")]
            MemorySource::Object(o) => {
                o.prefetch([(offset, len)]);
                Ok(())
            }
        }
    }

    /// The object, if serving one.
    #[cfg(feature = "object-store")]
    pub(crate) fn object(&self) -> Option<&crate::object::ObjectSource> {
        match self {
            MemorySource::Object(o) => Some(o),
            MemorySource::File(_) => None,
        }
    }

    /// The source the handlers read.
    pub(crate) fn boxed(self) -> Box<dyn PageSource> {
        match self {
            MemorySource::File(f) => Box::new(f),
            #[cfg(feature = "object-store")]
            MemorySource::Object(o) => Box::new(o),
        }
    }
}

/// Why opening a file or object failed, without its name, and whether
/// because there is none.
pub(crate) fn open_failure(e: &RestoreError) -> (bool, String) {
    match e {
        RestoreError::MemoryFile { source, .. } => (
            source.kind() == std::io::ErrorKind::NotFound,
            source.to_string(),
        ),
        #[cfg(feature = "object-store")]
        RestoreError::Object(o) => (
            matches!(o, crate::object::ObjectError::NotFound { .. }),
            o.to_string(),
        ),
        other => (false, other.to_string()),
    }
}

/// Reads the trace at `path` (a file, or an object URL).
pub(crate) fn read_trace(path: &Path, opts: &RestoreOptions) -> Result<Trace, RestoreError> {
    #[cfg(feature = "object-store")]
    if is_url(path) {
        let bytes = crate::object::read_object(&path.to_string_lossy(), &opts.object)?;
        let text = String::from_utf8(bytes).map_err(|_| RestoreError::Trace {
            path: path.to_path_buf(),
            reason: "not text".into(),
        })?;
        return Trace::parse(&text, path);
    }
    let _ = opts;
    Trace::read(path)
}

/// Writes `bytes` (a recorded trace, or its pack) to `path`, an object
/// URL (one PUT).
#[cfg(feature = "object-store")]
pub(crate) fn write_object(
    path: &Path,
    bytes: Vec<u8>,
    opts: &RestoreOptions,
) -> Result<(), RestoreError> {
    crate::object::write_object(&path.to_string_lossy(), bytes, &opts.object)?;
    Ok(())
}
