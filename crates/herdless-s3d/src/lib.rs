//! # herdless-s3d: an S3 server inside the test process
//!
//! What herdless-pager's object-store tests and the lab's `restore`
//! experiment restore snapshots from: a real S3-protocol server (the `s3s`
//! crate, serving a directory through `s3s-fs`, with SigV4 authentication)
//! listening on `127.0.0.1`, on a tokio runtime of its own, with controls
//! a test needs and a real store does not give: a time to the first byte
//! of every answer (a round trip to a region, the store's own work
//! included), range GETs answered with `503 Slow
//! Down` (a failing GET) or held until released (a slow GET), and a count
//! of the range GETs served, by object and first byte (to see that a chunk
//! was fetched once).
//!
//! A client finds it through the standard environment
//! ([`S3Server::env`]: `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, `AWS_REGION`
//! and the credentials), as `object_store`'s `AmazonS3Builder::from_env`
//! reads it; objects are addressed path-style, `s3://BUCKET/KEY`.
//!
//! ```
//! use herdless_s3d::{Credentials, S3Server};
//! let root = std::env::temp_dir().join(format!("s3d-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&root)?;
//! let server = S3Server::start(&root, Credentials::new("AKTEST", "secret-of-the-test"))?;
//! server.create_bucket("snapshots")?;
//! let etag = server.put("snapshots", "vm.mem", vec![7u8; 8192])?;
//! assert!(!etag.is_empty());
//! assert!(server.env().iter().any(|(k, v)| *k == "AWS_ENDPOINT_URL" && v.starts_with("http://127.0.0.1:")));
//! drop(server);
//! std::fs::remove_dir_all(&root)?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod control;
mod frames;
mod service;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use s3s::S3;

use control::Control;
pub use control::RangeKey;
use service::Controlled;

/// The region the server says it is in.
pub const REGION: &str = "us-east-1";

/// An access key and its secret, which the server checks every request's
/// signature against.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_key: String,
}

impl Credentials {
    /// An access key and its secret.
    ///
    /// ```
    /// let c = herdless_s3d::Credentials::new("AK", "SK");
    /// assert_eq!(c.access_key, "AK");
    /// ```
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Credentials {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
        }
    }
}

/// A running server; dropping it stops it (connections are cut).
pub struct S3Server {
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
    control: Arc<Control>,
    /// The same directory as the server's, for [`put`](S3Server::put).
    fs: s3s_fs::FileSystem,
    root: PathBuf,
    credentials: Credentials,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl S3Server {
    /// Serves the directory `root` (each subdirectory a bucket) on a free
    /// port of `127.0.0.1`, accepting only requests signed with
    /// `credentials`.
    ///
    /// # Errors
    /// The directory cannot be used, no port can be bound, or the runtime
    /// cannot start.
    pub fn start(root: impl AsRef<Path>, credentials: Credentials) -> io::Result<Self> {
        let root = root.as_ref().to_path_buf();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("s3d")
            .enable_all()
            .build()?;
        let served = s3s_fs::FileSystem::new(&root).map_err(|e| other(format!("{e:?}")))?;
        let fs = s3s_fs::FileSystem::new(&root).map_err(|e| other(format!("{e:?}")))?;
        let mut builder = S3ServiceBuilder::new(served);
        builder.set_auth(SimpleAuth::from_single(
            credentials.access_key.clone(),
            credentials.secret_key.clone(),
        ));
        let control = Arc::new(Control::default());
        let svc = Controlled {
            inner: builder.build(),
            control: Arc::clone(&control),
            root: Arc::new(std::fs::canonicalize(&root)?),
        };
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let listener = {
            let _in_runtime = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener)?
        };
        runtime.spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let _ = socket.set_nodelay(true);
                let svc = svc.clone();
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(socket), svc)
                        .await;
                });
            }
        });
        Ok(S3Server {
            runtime: Some(runtime),
            addr,
            control,
            fs,
            root,
            credentials,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The directory served.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The environment a client reads (`AmazonS3Builder::from_env`) to
    /// reach this server with its credentials.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", REGION.into()),
            ("AWS_ACCESS_KEY_ID", self.credentials.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.credentials.secret_key.clone()),
        ]
    }

    /// Creates the bucket `name` (a directory), if it is not there.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn create_bucket(&self, name: &str) -> io::Result<()> {
        match std::fs::create_dir(self.root.join(name)) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            r => r,
        }
    }

    /// Stores `bytes` as `bucket/key` (replacing what was there), as an S3
    /// `PutObject` does; returns its ETag.
    ///
    /// # Errors
    /// The server's store refused it (no such bucket, the disk).
    pub fn put(&self, bucket: &str, key: &str, bytes: Vec<u8>) -> io::Result<String> {
        let len = i64::try_from(bytes.len()).map_err(other)?;
        let body = s3s::dto::StreamingBlob::from(s3s::Body::from(bytes));
        let input = s3s::dto::PutObjectInput::builder()
            .bucket(bucket.to_string())
            .key(key.to_string())
            .content_length(Some(len))
            .body(Some(body))
            .build()
            .map_err(other)?;
        let req = s3s::S3Request {
            input,
            method: http::Method::PUT,
            uri: format!("/{bucket}/{key}").parse().map_err(other)?,
            headers: http::HeaderMap::new(),
            extensions: http::Extensions::new(),
            credentials: None,
            region: None,
            service: None,
            trailing_headers: None,
        };
        let runtime = self.runtime.as_ref().ok_or_else(|| other("stopped"))?;
        let out = runtime
            .block_on(self.fs.put_object(req))
            .map_err(|e| other(format!("{e:?}")))?;
        Ok(out.output.e_tag.map(|t| t.into_value()).unwrap_or_default())
    }

    /// From now on, no answer starts before `latency` has passed since
    /// its request arrived (zero: none): a round trip to a region. The
    /// server works the answer out meanwhile, as a remote store works out
    /// its own within its latency; a held GET answers once released, and
    /// not before its latency.
    pub fn set_latency(&self, latency: Duration) {
        self.control.set_latency(latency);
    }

    /// Answers the next `n` range GETs (of any object) with `503 Slow
    /// Down`, a failure a client retries.
    pub fn fail_next_gets(&self, n: u64) {
        self.control.fail_next(n);
    }

    /// Answers every range GET of `bucket/key` with `503` while `failing`.
    pub fn fail_gets_of(&self, bucket: &str, key: &str, failing: bool) {
        self.control
            .fail_object(&format!("{bucket}/{key}"), failing);
    }

    /// Holds every range GET of `bucket/key` starting at byte `first`
    /// until [`release_gets`](Self::release_gets) (the GET is counted when
    /// it arrives).
    pub fn hold_gets(&self, bucket: &str, key: &str, first: u64) {
        self.control.hold((format!("{bucket}/{key}"), first));
    }

    /// Lets the held GETs of that range go on, and later ones through.
    pub fn release_gets(&self, bucket: &str, key: &str, first: u64) {
        self.control.release(&(format!("{bucket}/{key}"), first));
    }

    /// Holds every request of `bucket/key` (its `HEAD`, whole and range
    /// GETs) until [`release_requests`](Self::release_requests).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("s3d-hold-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let server = herdless_s3d::S3Server::start(&dir, herdless_s3d::Credentials::new("AK", "SK"))?;
    /// server.hold_requests("snaps", "vm.mem");
    /// // ... a client's HEAD of s3://snaps/vm.mem now waits ...
    /// server.release_requests("snaps", "vm.mem");
    /// # drop(server);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn hold_requests(&self, bucket: &str, key: &str) {
        self.control
            .hold((format!("{bucket}/{key}"), control::EVERY_REQUEST));
    }

    /// Lets the requests held by [`hold_requests`](Self::hold_requests)
    /// go on, and later ones through.
    pub fn release_requests(&self, bucket: &str, key: &str) {
        self.control
            .release(&(format!("{bucket}/{key}"), control::EVERY_REQUEST));
    }

    /// Range GETs that arrived for `bucket/key`: first byte → count.
    pub fn gets_of(&self, bucket: &str, key: &str) -> HashMap<u64, u64> {
        let object = format!("{bucket}/{key}");
        self.control
            .gets()
            .into_iter()
            .filter(|((o, _), _)| *o == object)
            .map(|((_, first), n)| (first, n))
            .collect()
    }

    /// Every request that arrived (GETs, HEADs, anything).
    pub fn requests(&self) -> u64 {
        self.control.requests()
    }

    /// Forgets the counts so far.
    pub fn reset_counts(&self) {
        self.control.reset_counts();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
