//! Whole small objects (a working-set trace, its pack), read or written
//! with one request on a runtime of their own.

use std::future::Future;
use std::sync::Arc;

use object_store::{ObjectStoreExt, PutPayload};

use super::fetch::classify;
use super::location::Location;
use super::{runtime, wait_on, ObjectError, ObjectOptions, OwnedRuntime};

/// Reads the whole (small) object at `url` (a working-set trace).
///
/// # Errors
/// As for [`ObjectSource::open`](super::ObjectSource::open), and the GET failing.
pub fn read_object(url: &str, opts: &ObjectOptions) -> Result<Vec<u8>, ObjectError> {
    let got = one_request(url, opts, |store, path| async move {
        match store.get(&path).await {
            Ok(r) => r.bytes().await,
            Err(e) => Err(e),
        }
    })?;
    Ok(got.to_vec())
}

/// Writes `bytes` as the object at `url` (replacing it): a recorded
/// working-set trace.
///
/// # Errors
/// As for [`ObjectSource::open`](super::ObjectSource::open), and the PUT failing.
pub fn write_object(url: &str, bytes: Vec<u8>, opts: &ObjectOptions) -> Result<(), ObjectError> {
    one_request(url, opts, |store, path| async move {
        store.put(&path, PutPayload::from(bytes)).await
    })?;
    Ok(())
}

/// Runs one request on the object at `url` on a one-thread runtime of its
/// own (shut down after it): `request` gets the store and the object's
/// path; its error is classified as a fetch's is.
fn one_request<T, F>(
    url: &str,
    opts: &ObjectOptions,
    request: impl FnOnce(Arc<dyn object_store::ObjectStore>, object_store::path::Path) -> F,
) -> Result<T, ObjectError>
where
    T: Send + 'static,
    F: Future<Output = Result<T, object_store::Error>> + Send + 'static,
{
    let loc = Location::parse(url, &opts.timeouts())?;
    let rt = OwnedRuntime {
        runtime: Some(runtime(1)?),
        writes: Arc::default(),
    };
    let handle = rt
        .runtime
        .as_ref()
        .map(|r| r.handle().clone())
        .ok_or_else(|| ObjectError::Other {
            url: loc.shown.clone(),
            reason: "no runtime".into(),
        })?;
    match wait_on(&handle, request(Arc::clone(&loc.store), loc.path.clone())) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(classify(&loc, None, e)),
        None => Err(ObjectError::Other {
            url: loc.shown.clone(),
            reason: "the fetcher stopped".into(),
        }),
    }
}
