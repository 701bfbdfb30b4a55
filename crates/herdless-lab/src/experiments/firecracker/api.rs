//! Firecracker's API: HTTP/1.1 requests with JSON bodies over its Unix
//! socket (`--api-sock`), one connection per request, as `curl
//! --unix-socket` sends them (`reqwest` on a runtime of the API's own).
//! Only what the experiment calls: `PUT` and `PATCH` with a body, answered
//! `204 No Content` (or an error status with a JSON `fault_message`), and a
//! `GET /` to see that it listens.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Client, Method};

use crate::harness::LabError;

/// A Firecracker's API socket.
pub(crate) struct Api {
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl Api {
    /// The API listening (or about to) on `socket`.
    pub(crate) fn new(socket: &Path) -> Result<Self, LabError> {
        // reqwest's TLS stack (never used here: plain HTTP) needs a crypto
        // provider installed before a client is built; a second install
        // fails harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::builder()
            .unix_socket(socket)
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| LabError::Sample(format!("a client for Firecracker's API: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LabError::os("a runtime for Firecracker's API", e))?;
        Ok(Api { client, runtime })
    }

    /// Waits until the API answers (the socket file exists from `bind`,
    /// connections are refused until Firecracker listens).
    pub(crate) fn wait_ready(&self, within: Duration) -> Result<(), LabError> {
        let deadline = Instant::now() + within;
        // reqwest times a request from `send`, in the runtime's context.
        let _context = self.runtime.enter();
        loop {
            let get = self
                .request(Method::GET, "/", Duration::from_secs(2))
                .send();
            match self.runtime.block_on(get) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(LabError::Stuck {
                        what: format!("Firecracker's API ({e})"),
                        after: within,
                    })
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }

    /// `PUT path` with `body`; an error unless the answer is 2xx.
    pub(crate) fn put(
        &self,
        path: &str,
        body: &serde_json::Value,
        within: Duration,
    ) -> Result<(), LabError> {
        self.send(Method::PUT, path, body, within, &mut || Ok(()))
    }

    /// `method path` with `body`, calling `watch` every few milliseconds
    /// until the answer comes: an error from it (the page-fault handler
    /// Firecracker waits for has died...) ends the wait at once. An error
    /// unless the answer is 2xx.
    pub(crate) fn send(
        &self,
        method: Method,
        path: &str,
        body: &serde_json::Value,
        within: Duration,
        watch: &mut dyn FnMut() -> Result<(), LabError>,
    ) -> Result<(), LabError> {
        let what = format!("Firecracker {method} {path}");
        let _context = self.runtime.enter();
        let answer = self
            .request(method, path, within)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send();
        self.runtime.block_on(async {
            tokio::pin!(answer);
            let answer = loop {
                tokio::select! {
                    answer = &mut answer => break answer,
                    () = tokio::time::sleep(Duration::from_millis(10)) => {
                        watch().map_err(|e| reworded(e, |e| format!("{what}: {e}")))?;
                    }
                }
            };
            let answer = answer.map_err(|e| LabError::Sample(format!("{what}: {e}")))?;
            let status = answer.status();
            if status.is_success() {
                return Ok(());
            }
            let text = answer.text().await.unwrap_or_default();
            let status = status.as_u16();
            Err(LabError::Sample(format!(
                "{what}: HTTP {status} {}",
                text.trim()
            )))
        })
    }

    /// A request of `method` for `path`, answered within `within`.
    fn request(&self, method: Method, path: &str, within: Duration) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("http://localhost{path}"))
            .timeout(within)
            .header(ACCEPT, "application/json")
    }
}

/// `e` as a measurement's error whose message `reword` rewrites (a
/// `Sample` error's message without its "bad sample" prefix, so context
/// added at each level reads as one sentence).
pub(crate) fn reworded(e: LabError, reword: impl FnOnce(String) -> String) -> LabError {
    match e {
        LabError::Sample(message) => LabError::Sample(reword(message)),
        other => LabError::Sample(reword(other.to_string())),
    }
}
