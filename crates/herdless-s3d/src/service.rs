//! The HTTP service: every request goes through [`Control`] (counted,
//! delayed, held or failed as the test asked) and is then served by
//! `s3s` over `s3s-fs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use s3s::service::S3Service;

use crate::control::{Control, RangeKey, Verdict};

/// `s3s`'s service behind the test's controls.
#[derive(Clone)]
pub(crate) struct Controlled {
    pub(crate) inner: S3Service,
    pub(crate) control: Arc<Control>,
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
            let gate = this.control.arrive(range.as_ref());
            let latency = this.control.latency();
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            if let Some(gate) = gate {
                // Released by closing the semaphore: the acquire fails then.
                let _ = gate.acquire().await;
            }
            if let (Some(_), Some(object)) = (&range, &object) {
                if let Verdict::Fail = this.control.verdict(object) {
                    return Ok(slow_down());
                }
            }
            this.inner.call(req.map(s3s::Body::from)).await
        })
    }
}
