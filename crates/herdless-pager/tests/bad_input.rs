//! Bad input gets a typed error, never a panic or a hang; source failures
//! are reported and never leave a faulting thread asleep.

mod common;

use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use herdless_pager::{FileSource, MemSource, PageSource, Pager, PagerError};

#[test]
fn bad_lengths_windows_and_handler_counts_are_typed_errors() {
    let err = |b: herdless_pager::PagerBuilder| b.build().err().expect("refused");
    assert!(matches!(err(Pager::builder(0)), PagerError::ZeroLength));
    assert!(matches!(
        err(Pager::builder(PAGE + 1)),
        PagerError::LengthNotPageMultiple { len, page: PAGE } if len == PAGE + 1
    ));
    assert!(matches!(
        err(Pager::builder(PAGE).fault_around(3 * PAGE)),
        PagerError::WindowNotPowerOfTwo { .. }
    ));
    assert!(matches!(
        err(Pager::builder(PAGE).fault_around(PAGE / 2)),
        PagerError::WindowTooSmall { .. }
    ));
    assert!(matches!(
        err(Pager::builder(PAGE).handlers(0)),
        PagerError::NoHandlers
    ));
    let short = Pager::builder(4 * PAGE)
        .source(MemSource::new(vec![1u8; PAGE]))
        .require_full_source(true);
    let e = err(short);
    assert!(
        matches!(e, PagerError::SourceShorterThanRegion { source_len, region_len }
            if source_len == PAGE as u64 && region_len == 4 * PAGE),
        "{e}"
    );
    let e = err(Pager::builder(PAGE)
        .source(MemSource::new(vec![1u8; PAGE]))
        .minor_faults(true));
    assert!(matches!(e, PagerError::MinorNeedsSharedMemory), "{e}");
}

#[test]
fn a_missing_file_or_a_directory_is_a_source_open_error_naming_it() {
    let dir = scratch_dir("bad-open");
    let missing = dir.join("no-such-file");
    let e = FileSource::open(&missing).unwrap_err();
    assert!(matches!(e, PagerError::SourceOpen { .. }), "{e}");
    assert!(e.to_string().contains("no-such-file"), "{e}");
    let e = FileSource::open(&dir).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn out_of_range_reads_discards_and_populates_are_bad_ranges() {
    let Some(pager) = build(Pager::builder(4 * PAGE)) else {
        return;
    };
    let mut buf = [0u8; 8];
    assert!(matches!(
        pager.read(4 * PAGE - 4, &mut buf),
        Err(PagerError::BadRange { .. })
    ));
    assert!(matches!(
        pager.discard(PAGE / 2, PAGE),
        Err(PagerError::BadRange { .. })
    ));
    assert!(matches!(
        pager.populate(0, 5 * PAGE),
        Err(PagerError::BadRange { .. })
    ));
    assert!(matches!(
        pager.read(usize::MAX, &mut buf),
        Err(PagerError::BadRange { .. })
    ));
}

/// Writes a page of the region to a file: the kernel reads it, faulting it
/// in through the pager; a poisoned page makes the call fail with EFAULT
/// instead of killing the test with SIGBUS.
fn kernel_reads_page(pager: &Pager, p: usize, sink: &std::path::Path) -> io::Result<()> {
    let null = std::fs::File::create(sink)?;
    // SAFETY: the page lies inside the region, mapped while `pager` lives;
    // the slice is only read by the kernel, and no Rust reference to it
    // outlives this call.
    let bytes = unsafe { std::slice::from_raw_parts(pager.as_ptr().add(p * PAGE), PAGE) };
    rustix::io::write(&null, bytes)
        .map(|_| ())
        .map_err(Into::into)
}

/// How reading a page that may be poisoned ended.
#[derive(Debug, PartialEq)]
enum PageRead {
    /// Read without error.
    Ok,
    /// A system call reading it failed with EFAULT.
    Efault,
    /// A user-space read of it raised SIGBUS at this offset of the region.
    Sigbus(usize),
}

/// Reads page `p` the way this pager lets the test survive a poisoned
/// page: through a system call (EFAULT) with a full userfaultfd; from user
/// space under a SIGBUS catcher with a user-mode-only one, whose faults a
/// system call would never raise (it would get EFAULT at once).
fn read_possibly_poisoned_page(pager: &Pager, p: usize, sink: &std::path::Path) -> PageRead {
    if !user_mode_only() {
        return match kernel_reads_page(pager, p, sink) {
            Ok(()) => PageRead::Ok,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::FAULT.raw_os_error()) => {
                PageRead::Efault
            }
            Err(e) => panic!("writing page {p} to a file: {e}"),
        };
    }
    // SAFETY: the page lies inside the region, mapped while `pager` lives
    // and never referenced by Rust; after a SIGBUS it is replaced by a zero
    // page outside the pager, and this test reads no more of it.
    match unsafe { sigbus::read_or_sigbus(pager.as_ptr().add(p * PAGE)) } {
        Ok(_) => PageRead::Ok,
        Err(addr) => PageRead::Sigbus(addr - pager.as_ptr() as usize),
    }
}

#[test]
fn a_file_truncated_under_the_pager_poisons_the_page_and_reports_the_read_error() {
    let dir = scratch_dir("vanish");
    let path = dir.join("source");
    let src = pattern(16 * PAGE, 9);
    std::fs::write(&path, &src).unwrap();
    let source = FileSource::open(&path).unwrap();
    // The file shrinks to 2 pages and vanishes; the source still says 16.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(2 * PAGE as u64)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let Some(pager) = build(Pager::builder(16 * PAGE).source(source).fault_around(PAGE)) else {
        std::fs::remove_dir_all(dir).unwrap();
        return;
    };
    check_page(&pager, 1, |i| src[i]); // still there
    let r = read_possibly_poisoned_page(&pager, 5, &dir.join("sink"));
    pager.settle();
    let st = pager.stats();
    assert_eq!(st.source_errors, 1, "{st:?}");
    let errors = pager.take_errors();
    assert!(
        matches!(&errors[..], [PagerError::SourceRead { offset, .. }] if *offset == 5 * PAGE as u64),
        "{errors:?}"
    );
    if st.poisoned_pages == 1 {
        let want = if user_mode_only() {
            PageRead::Sigbus(5 * PAGE)
        } else {
            PageRead::Efault
        };
        assert_eq!(r, want, "a poisoned page cannot be read");
    } else {
        eprintln!("no UFFDIO_POISON on this kernel: the page was answered with zeros");
        assert_eq!(r, PageRead::Ok);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A source that reads, for page 0, from the pager's own region (page 1):
/// the mistake the pager must detect instead of deadlocking.
struct SelfReading {
    region: Arc<AtomicUsize>,
}

impl PageSource for SelfReading {
    fn len(&self) -> u64 {
        8 * PAGE as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(7);
        if offset == 0 {
            let base = self.region.load(Ordering::Acquire) as *const u8;
            // SAFETY: `base` is the live region (set before any fault);
            // reading page 1 faults and is served by the other handler.
            buf[0] = unsafe { std::ptr::read_volatile(base.add(PAGE)) };
        }
        Ok(())
    }
}

#[test]
fn a_handler_touching_its_own_region_is_reported_and_served_by_another() {
    for handlers in [2, 1] {
        handler_touching_its_own_region(handlers);
    }
}

/// With `handlers(1)` too: a source that may touch the region keeps a
/// second handler, so the touch never deadlocks.
fn handler_touching_its_own_region(handlers: usize) {
    let region = Arc::new(AtomicUsize::new(0));
    let Some(pager) = build(
        Pager::builder(8 * PAGE)
            .source(SelfReading {
                region: Arc::clone(&region),
            })
            .fault_around(PAGE)
            .handlers(handlers),
    ) else {
        return;
    };
    assert_eq!(
        pager.stats().per_handler_faults.len(),
        2,
        "at least two handlers"
    );
    region.store(pager.as_ptr() as usize, Ordering::Release);
    check_page(&pager, 0, |_| 7);
    let errors = pager.take_errors();
    assert!(
        matches!(&errors[..], [PagerError::HandlerTouchedRegion { offset, .. }] if *offset == PAGE),
        "{errors:?}"
    );
    pager.settle();
    assert_eq!(pager.stats().handler_self_faults, 1);
}

const CHILD: &str = "HERDLESS_PAGER_REFUSAL_CHILD";
const NOBODY: u32 = 65534;

/// What an unprivileged process gets from the pager: `ok` (it works),
/// `unavailable` (the typed refusal) or `other <error>`.
fn unprivileged_outcome(user_mode_only: bool) -> String {
    match Pager::builder(4 * PAGE)
        .user_mode_only(user_mode_only)
        .build()
    {
        Ok(p) => {
            check_page(&p, 0, |_| 0);
            "ok".to_string()
        }
        Err(PagerError::UserfaultfdUnavailable { .. }) => "unavailable".to_string(),
        Err(e) => format!("other {e}"),
    }
}

/// Becomes user and group `nobody` with no supplementary groups, for the
/// whole process: glibc's `setuid` family changes every thread's
/// credentials, and leaving uid 0 clears the capabilities.
fn become_nobody() -> io::Result<()> {
    let check = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    // SAFETY: these calls take plain integers (setgroups: an empty list, a
    // null pointer with length 0) and have no memory-safety preconditions.
    unsafe {
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setgid(NOBODY))?;
        check(libc::setuid(NOBODY))?;
    }
    // Leaving uid 0 for good drops every capability, CAP_SYS_PTRACE too.
    assert!(!rustix::process::geteuid().is_root());
    assert!(!has_cap_sys_ptrace());
    Ok(())
}

/// Whether this process holds CAP_SYS_PTRACE (which lets it open a full
/// userfaultfd), from `/proc/self/status`.
fn has_cap_sys_ptrace() -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}

/// The part of the next test that runs in a child process: started as root
/// (so any path to this binary works, private home or not), it becomes
/// `nobody` before anything else and prints what the pager does then.
#[test]
#[ignore = "a helper: an_unprivileged_process_gets_the_typed_refusal_or_user_mode_only_works \
            runs it in a child process"]
fn refusal_child() {
    let Ok(which) = std::env::var(CHILD) else {
        skip::skip(format!(
            "a helper: runs only in a child process with {CHILD} set"
        ));
        return;
    };
    match become_nobody() {
        Ok(()) => println!("RESULT {}", unprivileged_outcome(which == "user-mode-only")),
        Err(e) => println!("RESULT cannot-become-nobody {e}"),
    }
}

/// Runs [`refusal_child`] in a child process of this binary (as root: no
/// path has to be reachable by `nobody`), which becomes `nobody` itself;
/// `None` after a skip when root cannot change user here.
fn outcome_in_an_unprivileged_child(which: &str) -> Option<String> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "refusal_child", "--ignored", "--nocapture"])
        .env(CHILD, which)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let result = stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no RESULT line from the child: {stdout}"))
        .to_string();
    if let Some(why) = result.strip_prefix("cannot-become-nobody ") {
        skip::skip(format!("root cannot change user here: {why}"));
        return None;
    }
    Some(result)
}

#[test]
fn an_unprivileged_process_gets_the_typed_refusal_or_user_mode_only_works() {
    // Where even this process cannot open one (a seccomp filter forbidding
    // the call, say), an unprivileged one cannot either: nothing to learn.
    let Some(_) = skip::unless_userfaultfd() else {
        return;
    };
    let (full, umo) = if rustix::process::geteuid().is_root() {
        let Some(full) = outcome_in_an_unprivileged_child("full") else {
            return;
        };
        let Some(umo) = outcome_in_an_unprivileged_child("user-mode-only") else {
            return;
        };
        (full, umo)
    } else if has_cap_sys_ptrace() {
        skip::skip("this non-root process holds CAP_SYS_PTRACE: it is not unprivileged");
        return;
    } else {
        // Already unprivileged: check in this process.
        (unprivileged_outcome(false), unprivileged_outcome(true))
    };
    let unprivileged_allowed = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    if unprivileged_allowed {
        assert_eq!(full, "ok");
    } else {
        assert_eq!(full, "unavailable");
    }
    // UFFD_USER_MODE_ONLY is allowed to unprivileged users (Linux 5.11+);
    // an older kernel rejects the flag (EINVAL), which is no refusal.
    if umo.contains("Invalid argument") && !kernel_at_least(5, 11) {
        skip::skip(format!("UFFD_USER_MODE_ONLY needs Linux 5.11+: {umo}"));
        return;
    }
    assert_eq!(umo, "ok");
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let have = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    have >= (major, minor)
}

#[test]
fn the_refusal_message_explains_the_permission_choices() {
    let e = PagerError::UserfaultfdUnavailable {
        source: io::Error::from_raw_os_error(1),
    };
    let msg = e.to_string();
    for hint in [
        "vm.unprivileged_userfaultfd",
        "user_mode_only",
        "CAP_SYS_PTRACE",
        "/dev/userfaultfd",
    ] {
        assert!(msg.contains(hint), "{msg}");
    }
}
