//! Helpers for the tests that drive the real `herdless-uffd` binary with
//! a client playing Firecracker's VMM side (`herdless_pager::vmm`): the
//! userfaultfd check that skips with a printed reason, memory files,
//! starting the handler and waiting for it to listen, and waiting for its
//! exit with a hang detector.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herdless_pager::vmm::{GuestMemory, Hugepages, HUGE_PAGE};

/// The pager tests' skip reporting (printed past the capture, counted at
/// exit): `tests/common/skip.rs`.
#[path = "../common/skip.rs"]
pub mod skip;

pub mod files;

pub const PAGE: usize = 4096;

/// How long a handler may take to exit once the VMM is gone before the
/// test calls it hung. Never reached when it works (it exits in
/// milliseconds); it only turns a hang into a failure.
pub const HANG: Duration = Duration::from_secs(60);

/// Guest memory with `sizes`, or `None` after printing why userfaultfd
/// cannot be used here (the test then skips).
pub fn guest_memory(sizes: &[usize]) -> Option<GuestMemory> {
    match GuestMemory::new(sizes) {
        Ok(m) => Some(m),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::EACCES | libc::ENOSYS)
            ) =>
        {
            skip::skip(format!(
                "userfaultfd is not permitted here for the VMM side ({e}); \
                 run as root or with vm.unprivileged_userfaultfd=1"
            ));
            None
        }
        Err(e) => panic!("setting up guest memory: {e}"),
    }
}

/// Guest memory with `regions` (`(size, page size)`, some of 2 MiB pages
/// from the hugepage pool, as Firecracker's `"huge_pages": "2M"`), and the
/// hugepages reserved for it (keep it alive as long as the memory; it
/// gives the pages back to the pool when dropped); `None` after marking the
/// test skipped with the reason (no userfaultfd, no hugepages).
pub fn huge_guest_memory(regions: &[(usize, usize)]) -> Option<(Hugepages, GuestMemory)> {
    let need: usize = regions
        .iter()
        .filter(|r| r.1 == HUGE_PAGE)
        .map(|r| r.0 / HUGE_PAGE)
        .sum();
    // Checked first: without it there is nothing to reserve for.
    if !userfaultfd_works() {
        return None;
    }
    let pool = match Hugepages::reserve(need as u64) {
        Ok(p) => p,
        Err(reason) => {
            skip::skip(format!("needs {need} free 2 MiB hugepages: {reason}"));
            return None;
        }
    };
    match GuestMemory::with_page_sizes(regions) {
        Ok(m) => Some((pool, m)),
        Err(e) => panic!("setting up hugepage guest memory ({need} pages reserved): {e}"),
    }
}

/// Guest memory with a full userfaultfd, for tests that read it through a
/// system call (`kernel_read`: with a user-mode-only userfaultfd that gets
/// `EFAULT` instead of a fault) or open a userfaultfd themselves; `None`
/// after marking the test skipped with the reason.
pub fn full_guest_memory(sizes: &[usize]) -> Option<GuestMemory> {
    let mem = guest_memory(sizes)?;
    if mem.is_user_mode_only() {
        skip::skip(
            "needs a full userfaultfd (root, CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1): \
             it reads guest memory through system calls or opens a userfaultfd itself; \
             this process may only open a user-mode-only one",
        );
        return None;
    }
    Some(mem)
}

/// Whether userfaultfd works here (printing why not, for a skip).
pub fn userfaultfd_works() -> bool {
    guest_memory(&[PAGE]).is_some()
}

/// A byte pattern that differs in every page and is never zero.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
            (x >> 29) as u8 | 1
        })
        .collect()
}

/// A fresh directory for one test's socket and files.
pub fn test_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("herdless-uffd-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes a memory file of `len` bytes (pattern `seed`) into `dir`.
pub fn memory_file(dir: &Path, len: usize, seed: u64) -> (PathBuf, Vec<u8>) {
    let path = dir.join("memory");
    let bytes = pattern(len, seed);
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes)
}

/// A running `herdless-uffd`.
pub struct Handler {
    pub child: Child,
    pub socket: PathBuf,
    /// Every line it wrote to standard error so far.
    pub log: Arc<Mutex<Vec<String>>>,
    stdout: Option<std::process::ChildStdout>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// Starts `herdless-uffd SOCKET MEMORY args...` and waits until it says it
/// listens (its first line; or returns once it exited, for refusals).
pub fn start(socket: &Path, memory: &Path, args: &[&str]) -> Handler {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herdless-uffd"))
        .arg(socket)
        .arg(memory)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = Arc::clone(&log);
    let reader = std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let listening = line.contains("listening on");
            lines.lock().unwrap().push(line);
            if listening && let Some(tx) = tx.take() {
                let _ = tx.send(());
            }
        }
        // End of stream (it exited): release a waiter either way.
        drop(tx);
    });
    // Either it listens, or its stderr closed (it exited).
    let _ = rx.recv_timeout(HANG);
    let stdout = child.stdout.take();
    Handler {
        child,
        socket: socket.to_path_buf(),
        log,
        stdout,
        reader: Some(reader),
    }
}

impl Handler {
    /// Waits for the exit (failing the test if it never comes), and
    /// returns its status, standard output and standard error.
    pub fn finish(mut self) -> (ExitStatus, String, String) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).unwrap();
        let mut fds = [rustix::event::PollFd::new(
            &pidfd,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: HANG.as_secs() as i64,
            tv_nsec: 0,
        };
        let ready = rustix::event::poll(&mut fds, Some(&timeout)).unwrap();
        if ready == 0 {
            let _ = self.child.kill();
            panic!(
                "herdless-uffd did not exit within {HANG:?}; its log:\n{}",
                self.log.lock().unwrap().join("\n")
            );
        }
        let status = self.child.wait().unwrap();
        let mut out = String::new();
        if let Some(mut o) = self.stdout.take() {
            use std::io::Read;
            o.read_to_string(&mut out).unwrap();
        }
        // Its standard error closed when it exited: the reader has every
        // line once it ends.
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        (status, out, self.log())
    }

    /// [`finish`](Self::finish), asserting it exited 0 (its output and log
    /// in the failure message); returns standard output and error.
    pub fn finish_ok(self) -> (String, String) {
        let (status, out, err) = self.finish();
        assert_eq!(status.code(), Some(0), "{out}\n{err}");
        (out, err)
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

/// The JSON document in `path` (a `--stats-json` figures file).
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Whether every page of `[addr, addr + len)` is resident (installed by
/// the handler), by `mincore`.
pub fn resident(addr: usize, len: usize) -> bool {
    let pages = len.div_ceil(PAGE);
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr..addr + len` is a live mapping of the caller's; mincore
    // only reads its page tables and writes one byte per page into `vec`.
    let r = unsafe { libc::mincore(addr as *mut _, len, vec.as_mut_ptr().cast()) };
    assert_eq!(r, 0, "mincore");
    vec.iter().all(|b| b & 1 != 0)
}

/// Waits until `cond` holds (yielding), failing the test after [`HANG`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG, "never happened: {what}");
        std::thread::yield_now();
    }
}
