//! Why an object could not be opened or read: one line each, with the
//! object's URL as given less any credentials in it, and the store's own
//! message with every credential of the environment blanked out.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// What can go wrong opening an [`ObjectSource`](super::ObjectSource) or
/// reading a whole small object.
///
/// ```
/// use herdless_pager::object::{ObjectError, ObjectOptions, ObjectSource};
///
/// let opts = ObjectOptions::default();
/// let err = ObjectSource::open("s3://a-bucket-but-no-key", &opts).unwrap_err();
/// assert!(matches!(err, ObjectError::BadUrl { .. }));
/// assert!(err.to_string().contains("names no object"));
/// // A missing object is refused when the source is opened, not at a fault.
/// let err = ObjectSource::open("file:///no/such/vm.mem", &opts).unwrap_err();
/// assert!(matches!(err, ObjectError::NotFound { .. }), "{err}");
/// ```
#[derive(Debug, Error)]
pub enum ObjectError {
    /// The URL does not parse, or names no object.
    #[error("{url}: {reason}")]
    BadUrl {
        /// The URL, credentials removed.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store could not be set up from the URL and the environment
    /// (a region or credentials missing, a malformed setting).
    #[error("{url}: cannot set up the object store: {reason}")]
    Store {
        /// The URL, credentials removed.
        url: String,
        /// The store's message, credentials blanked.
        reason: String,
    },
    /// There is no such object (or bucket).
    #[error("{url}: no such object ({reason})")]
    NotFound {
        /// The URL, credentials removed.
        url: String,
        /// The store's message, credentials blanked.
        reason: String,
    },
    /// The store refused the credentials, or they may not read the object.
    #[error("{url}: access refused: check the credentials ({reason})")]
    Denied {
        /// The URL, credentials removed.
        url: String,
        /// The store's message, credentials blanked.
        reason: String,
    },
    /// The object changed (its ETag is no longer the one it had when it was
    /// opened): nothing more is read from it.
    #[error(
        "{url}: the object changed while it was being read (ETag {was} at the start, now {now})"
    )]
    Changed {
        /// The URL, credentials removed.
        url: String,
        /// The ETag when it was opened.
        was: String,
        /// The ETag seen now (or what the store said).
        now: String,
    },
    /// Any other failure of the store (after the retries).
    #[error("{url}: {reason}")]
    Other {
        /// The URL, credentials removed.
        url: String,
        /// The store's message, credentials blanked.
        reason: String,
    },
    /// The host chunk cache directory cannot be used.
    #[error("the chunk cache directory {}: {source}", path.display())]
    Cache {
        /// The directory.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// A bad option (chunk size, concurrency).
    #[error("{0}")]
    Option(String),
    /// The fetcher's threads could not start.
    #[error("cannot start the fetcher's threads: {0}")]
    Runtime(io::Error),
}

impl ObjectError {
    /// Whether trying again may succeed (a failure of the network or of the
    /// store's servers), as opposed to an answer that will not change.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, ObjectError::Other { .. })
    }
}
