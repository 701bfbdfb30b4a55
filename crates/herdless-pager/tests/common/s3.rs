//! An S3-protocol server for one test (`herdless-s3d`: s3s over s3s-fs on
//! 127.0.0.1) with bucket `snaps`, the process environment pointing the
//! object store at it, and snapshot bytes to store. Shared by the
//! `ObjectSource` tests and the `herdless-uffd` S3 restore tests; include
//! it with `#[path = "common/s3.rs"] mod s3;` beside a `skip` module at
//! the crate root.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use herdless_s3d::{Credentials, S3Server};

/// The tests set the process environment the store reads (and a handler
/// they start inherits): one test at a time.
pub static ENV: Mutex<()> = Mutex::new(());

/// A running server, its directory (removed when dropped), and the
/// environment held for this test.
pub struct S3World {
    pub server: S3Server,
    pub dir: PathBuf,
    _env: MutexGuard<'static, ()>,
}

impl S3World {
    /// Starts a server storing under `dir/s3` with credentials
    /// `access_key`/`secret`, creates bucket `snaps` and points the
    /// environment at it; `None` after printing why no server could start
    /// (the test then skips).
    pub fn start(dir: PathBuf, access_key: &str, secret: &str) -> Option<S3World> {
        let env = ENV.lock().unwrap_or_else(|p| p.into_inner());
        std::fs::create_dir_all(dir.join("s3")).unwrap();
        let server = match S3Server::start(dir.join("s3"), Credentials::new(access_key, secret)) {
            Ok(s) => s,
            Err(e) => {
                crate::skip::skip(format!("no S3 server could start here: {e}"));
                return None;
            }
        };
        server.create_bucket("snaps").unwrap();
        for (k, v) in server.env() {
            // SAFETY: every test of the binary that reads or changes the
            // environment holds `ENV`, and no other thread of the process
            // reads it.
            unsafe { std::env::set_var(k, v) };
        }
        Some(S3World {
            server,
            dir,
            _env: env,
        })
    }
}

impl Drop for S3World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Bytes that differ for every page and every seed, never zero.
pub fn seeded_bytes(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let x = (i as u64 ^ seed.wrapping_mul(0xD6E8_FEB8_6659_FD93))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (x >> 29) as u8 | 1
        })
        .collect()
}
