//! Firecracker's API: HTTP/1.1 requests with JSON bodies over its Unix
//! socket (`--api-sock`), one connection per request, as `curl
//! --unix-socket` sends them. Only what the experiment calls: `PUT` and
//! `PATCH` with a body, answered `204 No Content` (or an error status with a
//! JSON `fault_message`), and a `GET /` to see that it listens.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::harness::LabError;

/// Responses are small; anything longer is not Firecracker's API.
const MAX_BODY: usize = 1 << 20;

/// A Firecracker's API socket.
pub(crate) struct Api {
    socket: PathBuf,
}

impl Api {
    /// The API listening (or about to) on `socket`.
    pub(crate) fn new(socket: &Path) -> Self {
        Api {
            socket: socket.to_path_buf(),
        }
    }

    /// Waits until the API answers (the socket file exists from `bind`,
    /// connections are refused until Firecracker listens).
    pub(crate) fn wait_ready(&self, within: Duration) -> Result<(), LabError> {
        let deadline = Instant::now() + within;
        loop {
            match self.request("GET", "/", None, Duration::from_secs(2), &mut || Ok(())) {
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
        self.send("PUT", path, body, within, &mut || Ok(()))
    }

    /// `PATCH path` with `body`; an error unless the answer is 2xx.
    pub(crate) fn patch(
        &self,
        path: &str,
        body: &serde_json::Value,
        within: Duration,
    ) -> Result<(), LabError> {
        self.send("PATCH", path, body, within, &mut || Ok(()))
    }

    /// `method path` with `body`, calling `watch` every few milliseconds
    /// until the answer comes: an error from it (the page-fault handler
    /// Firecracker waits for has died...) ends the wait at once. An error
    /// unless the answer is 2xx.
    pub(crate) fn send(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
        within: Duration,
        watch: &mut dyn FnMut() -> Result<(), LabError>,
    ) -> Result<(), LabError> {
        let what = format!("Firecracker {method} {path}");
        let (status, text) = self
            .request(method, path, Some(body), within, watch)
            .map_err(|e| match e {
                Failed::Io(e) => LabError::os(what.clone(), e),
                Failed::Watch(e) => reworded(e, |e| format!("{what}: {e}")),
            })?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(LabError::Sample(format!(
                "{what}: HTTP {status} {}",
                text.trim()
            )))
        }
    }

    /// Sends one request and reads the status and body of the answer,
    /// calling `watch` while none has come.
    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        within: Duration,
        watch: &mut dyn FnMut() -> Result<(), LabError>,
    ) -> Result<(u16, String), Failed> {
        let mut stream = UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(within))?;
        stream.set_write_timeout(Some(within))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if !body.is_empty() {
            request.push_str("Content-Type: application/json\r\n");
        }
        request.push_str(&format!(
            "Accept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
        stream.write_all(request.as_bytes())?;
        let deadline = Instant::now() + within;
        while !readable(&stream, Duration::from_millis(10))? {
            watch().map_err(Failed::Watch)?;
            if Instant::now() >= deadline {
                return Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into());
            }
        }
        Ok(read_response(&mut BufReader::new(stream))?)
    }
}

/// Why a request failed.
#[derive(Debug)]
enum Failed {
    Io(std::io::Error),
    /// The watcher said to stop waiting.
    Watch(LabError),
}

impl From<std::io::Error> for Failed {
    fn from(e: std::io::Error) -> Self {
        Failed::Io(e)
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Io(e) => e.fmt(f),
            Failed::Watch(e) => e.fmt(f),
        }
    }
}

/// Whether `stream` has something to read (or was closed) within `within`.
fn readable(stream: &UnixStream, within: Duration) -> std::io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(stream, PollFlags::IN)];
    let timeout = Timespec::try_from(within).unwrap_or(Timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    });
    match poll(&mut fds, Some(&timeout)) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn bad(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

/// Reads a status line, headers and a `Content-Length` body.
fn read_response(reader: &mut impl BufRead) -> std::io::Result<(u16, String)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| bad(format!("not an HTTP status line: {line:?}")))?;
    let mut length = 0usize;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("the answer ended inside its headers"));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("bad Content-Length: {value:?}")))?;
            }
        }
    }
    if length > MAX_BODY {
        return Err(bad(format!("a {length}-byte answer")));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_read_to_the_end_of_its_body_and_no_further() {
        let text = "HTTP/1.1 400 \r\nServer: Firecracker API\r\ncontent-length: 25\r\n\r\n\
                    {\"fault_message\": \"bad\"}\nHTTP/1.1 204";
        let (status, body) = read_response(&mut text.as_bytes()).unwrap();
        assert_eq!(status, 400);
        assert_eq!(body, "{\"fault_message\": \"bad\"}\n");
        let (status, body) = read_response(&mut &b"HTTP/1.1 204 \r\n\r\n"[..]).unwrap();
        assert_eq!((status, body.as_str()), (204, ""));
    }

    #[test]
    fn what_is_not_http_is_an_error_not_a_status() {
        for text in [
            "",
            "SSH-2.0\r\n\r\n",
            "HTTP/1.1 204 \r\nContent-Length: x\r\n\r\n",
        ] {
            assert!(read_response(&mut text.as_bytes()).is_err(), "{text:?}");
        }
        let truncated = "HTTP/1.1 200 \r\nContent-Length: 10\r\n\r\nshort";
        assert!(read_response(&mut truncated.as_bytes()).is_err());
    }
}
