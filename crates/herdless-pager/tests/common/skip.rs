//! Skipping a test whose precondition this machine cannot meet (no
//! userfaultfd, not root), visibly: the reason is printed when the test
//! skips, past cargo's output capture, and the test binary ends with the
//! count and the list of the tests it skipped, right under libtest's
//! `test result:` line (which counts them as passed: libtest cannot mark a
//! test ignored at run time). A skip is never silent and never a failure.
//!
//! A test adopts it with one line (after `mod common;`, or, from a test
//! file that does not use the rest of `common`, or from another crate's
//! tests, `#[path = "<relative path to>/common/skip.rs"] mod skip;`; it
//! needs only the `libc` and `rustix` crates):
//!
//! ```ignore
//! let Some(uffd) = common::skip::unless_userfaultfd() else { return };
//! // ... build with `.user_mode_only(uffd.user_mode_only())`
//! let Some(()) = common::skip::unless_full_userfaultfd() else { return };
//! common::skip::skip("why"); // any other precondition, then return
//! ```
//!
//! What a run prints for a skipped test, and at the end of the binary:
//!
//! ```text
//! skipped: out_of_range_reads_discards_and_populates_are_bad_ranges: userfaultfd is unavailable here (...)
//! ...
//! test result: ok. 8 passed; 0 failed; 1 ignored; ...
//!
//! SKIPPED 7 tests of bad_input (counted as passed above):
//!   out_of_range_reads_discards_and_populates_are_bad_ranges: userfaultfd is unavailable here (...)
//! ```
//!
//! `HERDLESS_TEST_UFFD` chooses how the tests use userfaultfd: `auto` (the
//! default: full userfaultfd where this process may open it, else
//! `UFFD_USER_MODE_ONLY`, else skip), `user-mode-only` (what an ordinary
//! user gets, also as root), or `none` (skip every test that needs it).

#![allow(dead_code)]

use std::fmt::Display;
use std::sync::{Mutex, Once, OnceLock};

/// The tests skipped so far: (test name, reason), one entry per test.
static SKIPPED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static SUMMARY_AT_EXIT: Once = Once::new();

/// Environment variable choosing how tests use userfaultfd.
pub const UFFD_ENV: &str = "HERDLESS_TEST_UFFD";

/// Writes `text` to file descriptor 2 directly: libtest captures what the
/// `print!`/`eprint!` macros write, not the descriptor.
fn write_stderr(text: &str) {
    let mut bytes = text.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live buffer of `bytes.len()` bytes; writing
        // to descriptor 2 has no other precondition.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return; // stderr closed: nothing more to do
        }
        bytes = &bytes[n as usize..];
    }
}

/// The running test's name: libtest runs each test on a thread named
/// after it.
fn current_test() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => "a test on the main thread".to_string(),
    }
}

/// The test binary's name without cargo's hash (`bad_input`).
fn binary_name() -> String {
    let exe = std::env::args().next().unwrap_or_default();
    let file = exe.rsplit('/').next().unwrap_or_default();
    match file.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => file.to_string(),
    }
}

/// Prints the skipped tests when the test binary exits (after libtest's
/// `test result:` line, also when tests failed).
extern "C" fn print_summary() {
    let skipped = match SKIPPED.lock() {
        Ok(v) => v,
        Err(poisoned) => poisoned.into_inner(),
    };
    if skipped.is_empty() {
        return;
    }
    let n = skipped.len();
    let mut text = format!(
        "\nSKIPPED {n} test{} of {} (counted as passed above):\n",
        if n == 1 { "" } else { "s" },
        binary_name()
    );
    for (test, reason) in skipped.iter() {
        text.push_str(&format!("  {test}: {reason}\n"));
    }
    text.push('\n');
    write_stderr(&text);
}

/// Marks the running test skipped for `reason`: prints it now and lists it
/// when the binary exits. The caller then returns without asserting.
pub fn skip(reason: impl Display) {
    let test = current_test();
    let reason = reason.to_string();
    write_stderr(&format!("skipped: {test}: {reason}\n"));
    let mut skipped = match SKIPPED.lock() {
        Ok(v) => v,
        Err(poisoned) => poisoned.into_inner(),
    };
    if !skipped.iter().any(|(t, _)| *t == test) {
        skipped.push((test, reason));
    }
    drop(skipped);
    SUMMARY_AT_EXIT.call_once(|| {
        // SAFETY: `print_summary` is an `extern "C" fn()` that does not
        // unwind; registering it has no other precondition.
        let rc = unsafe { libc::atexit(print_summary) };
        if rc != 0 {
            write_stderr("(could not register the skip summary; the skips are printed above)\n");
        }
    });
}

/// How this process may use userfaultfd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UffdAccess {
    /// Every fault is reported, including those of system calls (root,
    /// `CAP_SYS_PTRACE`, or `vm.unprivileged_userfaultfd=1`).
    Full,
    /// `UFFD_USER_MODE_ONLY` (Linux 5.11+), what any user may open: only
    /// user-space accesses fault; a system call touching a missing page
    /// gets `EFAULT`.
    UserModeOnly,
}

impl UffdAccess {
    /// The argument for `PagerBuilder::user_mode_only`.
    pub fn user_mode_only(self) -> bool {
        self == UffdAccess::UserModeOnly
    }
}

/// `UFFD_USER_MODE_ONLY` from `<linux/userfaultfd.h>` (rustix has no name
/// for it; spelled out here so that this file needs only libc and rustix).
const UFFD_USER_MODE_ONLY: u32 = 1;

/// Opens (and closes) a userfaultfd with the given flags.
fn try_open(user_mode_only: bool) -> Result<(), rustix::io::Errno> {
    use rustix::mm::UserfaultfdFlags as F;
    let mut flags = F::CLOEXEC | F::NONBLOCK;
    if user_mode_only {
        flags |= F::from_bits_retain(UFFD_USER_MODE_ONLY);
    }
    // SAFETY: the descriptor is closed at once, nothing is registered with
    // it, so no fault in this process changes behaviour.
    unsafe { rustix::mm::userfaultfd(flags) }.map(drop)
}

fn read_sysctl(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unreadable: {e}"))
}

/// Finds how this process may use userfaultfd, or says why it cannot.
fn probe() -> Result<UffdAccess, String> {
    let choice = std::env::var(UFFD_ENV).unwrap_or_default();
    let full_first = match choice.as_str() {
        "" | "auto" => true,
        "user-mode-only" => false,
        "none" => return Err(format!("{UFFD_ENV}=none")),
        other => panic!("{UFFD_ENV}={other:?}: expected auto, user-mode-only or none"),
    };
    let full = if full_first {
        match try_open(false) {
            Ok(()) => return Ok(UffdAccess::Full),
            Err(e) => format!("{e}"),
        }
    } else {
        format!("not tried ({UFFD_ENV}={choice})")
    };
    let user_mode_only = match try_open(true) {
        Ok(()) => return Ok(UffdAccess::UserModeOnly),
        Err(rustix::io::Errno::INVAL) => {
            "EINVAL: this kernel predates UFFD_USER_MODE_ONLY (Linux 5.11)".to_string()
        }
        Err(e) => format!("{e}"),
    };
    Err(format!(
        "userfaultfd is unavailable here (full: {full}; user-mode-only: {user_mode_only}; \
         kernel {}, vm.unprivileged_userfaultfd={}; a seccomp filter, such as a container's \
         default profile, can also forbid the system call). Run as root, or on Linux 5.11+ \
         where any user may open a user-mode-only userfaultfd",
        read_sysctl("/proc/sys/kernel/osrelease"),
        read_sysctl("/proc/sys/vm/unprivileged_userfaultfd"),
    ))
}

/// How this process may use userfaultfd (probed once per test binary), or
/// `None` after marking the running test skipped with the reason.
pub fn unless_userfaultfd() -> Option<UffdAccess> {
    static PROBED: OnceLock<Result<UffdAccess, String>> = OnceLock::new();
    match PROBED.get_or_init(probe) {
        Ok(access) => Some(*access),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

/// `Some` when this process may open a full userfaultfd (what a pager
/// built without `user_mode_only`, such as the lab's, needs), else `None`
/// after marking the running test skipped with the reason.
pub fn unless_full_userfaultfd() -> Option<()> {
    match unless_userfaultfd()? {
        UffdAccess::Full => Some(()),
        UffdAccess::UserModeOnly => {
            skip(
                "needs a full userfaultfd (root, CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1); \
                 this process may only open a user-mode-only one",
            );
            None
        }
    }
}
