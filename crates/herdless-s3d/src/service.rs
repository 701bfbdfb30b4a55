//! The HTTP service: every request goes through [`Control`] (counted,
//! delayed, held or failed as the test asked) and is then served by
//! `s3s` over `s3s-fs`, a GET's body in large frames (`frames.rs`).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use s3s::service::S3Service;

use crate::control::{Control, RangeKey, Verdict};
use crate::frames::{self, Opened};

/// `s3s`'s service behind the test's controls.
#[derive(Clone)]
pub(crate) struct Controlled {
    pub(crate) inner: S3Service,
    pub(crate) control: Arc<Control>,
    /// The directory `s3s-fs` serves (its objects' files).
    pub(crate) root: Arc<PathBuf>,
}

type Answer = Result<Response<s3s::Body>, s3s::HttpError>;

/// The first byte of a `Range: bytes=FIRST-LAST` header.
fn range_start(req: &Request<Incoming>) -> Option<u64> {
    let v = req.headers().get(http::header::RANGE)?.to_str().ok()?;
    let (first, _) = v.strip_prefix("bytes=")?.split_once('-')?;
    first.parse().ok()
}

/// `bucket/key` of a path-style request for an object (none for a bucket).
fn object_of(req: &Request<Incoming>) -> Option<String> {
    let path = req.uri().path().trim_start_matches('/');
    let (bucket, key) = path.split_once('/')?;
    (!bucket.is_empty() && !key.is_empty()).then(|| path.to_string())
}

fn slow_down() -> Response<s3s::Body> {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
                <Error><Code>SlowDown</Code><Message>injected failure</Message></Error>";
    let mut r = Response::new(s3s::Body::from(body.to_string()));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r
}

impl hyper::service::Service<Request<Incoming>> for Controlled {
    type Response = Response<s3s::Body>;
    type Error = s3s::HttpError;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let object = object_of(&req);
        let range: Option<RangeKey> = match (req.method() == Method::GET, &object) {
            (true, Some(o)) => range_start(&req).map(|s| (o.clone(), s)),
            _ => None,
        };
        let this = self.clone();
        Box::pin(async move {
            let gate = this.control.arrive(object.as_deref(), range.as_ref());
            let latency = this.control.latency();
            // The added round trip is the time to the first byte: the
            // answer is worked out meanwhile, as a remote store works out
            // its own within its latency (this server's work is the host's
            // CPU in the lab, not the store's: done while the round trip
            // runs, it is not added to it).
            let answer = async {
                if let Some(gate) = gate {
                    // Released by closing the semaphore: the acquire fails then.
                    let _ = gate.acquire().await;
                }
                if let (Some(_), Some(object)) = (&range, &object) {
                    if let Verdict::Fail = this.control.verdict(object) {
                        return Ok(slow_down());
                    }
                }
                // A GET of the object itself (no subresource such as
                // `?tagging` in the query).
                let plain_get = req.method() == Method::GET && req.uri().query().is_none();
                let opened = match (plain_get, &object) {
                    (true, Some(o)) => frames::object_file(&this.root, o).and_then(Opened::open),
                    _ => None,
                };
                let answer = this.inner.call(req.map(s3s::Body::from)).await?;
                Ok(match opened {
                    Some(file) => in_large_frames(answer, file),
                    None => answer,
                })
            };
            let (answer, ()) = tokio::join!(answer, async {
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
            });
            answer
        })
    }
}

/// `answer` (to a GET of the object whose file is `file`) with its body
/// read in large frames, if it is a success whose range it says; a `503`
/// if the object was replaced while `s3s` answered (`frames.rs`).
fn in_large_frames(answer: Response<s3s::Body>, file: Opened) -> Response<s3s::Body> {
    let header = |name| {
        answer
            .headers()
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    let range = match answer.status() {
        StatusCode::PARTIAL_CONTENT => header(http::header::CONTENT_RANGE)
            .as_deref()
            .and_then(frames::content_range),
        StatusCode::OK => header(http::header::CONTENT_LENGTH)
            .and_then(|v| v.parse().ok())
            .map(|len| (0, len)),
        _ => None,
    };
    let Some((first, len)) = range else {
        return answer;
    };
    if !file.unchanged() {
        return slow_down();
    }
    let (parts, _small_frames) = answer.into_parts();
    Response::from_parts(parts, file.body(first, len))
}
