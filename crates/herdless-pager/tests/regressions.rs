//! Regression tests for defects found by feeding the pager hostile input
//! (issue 13): each is named after what it guards.

mod common;

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use herdless_pager::{
    FileSource, HandlerMode, PageSource, Pager, PagerError, MAX_FAULT_AROUND, MAX_HANDLERS,
};

/// How long a read may take before the test calls it hung. Never reached
/// when the pager works (a read takes microseconds); it only turns a hang,
/// the bug these tests guard against, into a failure instead of a stuck CI.
const HANG: Duration = Duration::from_secs(60);

/// Reads `len` bytes of the region at `off` the way the kernel does (a
/// `pwrite` from the region into a memfd): a poisoned page fails the call
/// with `EFAULT` instead of killing the test with `SIGBUS`.
fn kernel_read(pager: &Pager, off: usize, len: usize) -> io::Result<Vec<u8>> {
    let fd = rustix::fs::memfd_create("herdless-kernel-read", rustix::fs::MemfdFlags::CLOEXEC)?;
    // SAFETY: the range lies inside the region, mapped while `pager` lives;
    // only the kernel reads it, and no Rust reference outlives this call.
    let bytes = unsafe { std::slice::from_raw_parts(pager.as_ptr().add(off), len) };
    let n = rustix::io::pwrite(&fd, bytes, 0)?;
    let mut out = vec![0u8; n];
    rustix::io::pread(&fd, &mut out, 0)?;
    Ok(out)
}

/// [`kernel_read`] from another thread, failing the test if it never
/// returns (a fault nobody answered).
fn kernel_read_or_hang(pager: &Pager, off: usize, len: usize) -> io::Result<Vec<u8>> {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        s.spawn(move || tx.send(kernel_read(pager, off, len)).unwrap());
        rx.recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("a read at {off:#x} was never answered"))
    })
}

fn is_efault(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::FAULT.raw_os_error())
}

/// A [`FileSource`] without its mapping: every byte goes through `pread`.
struct PreadOnly(FileSource);

impl PageSource for PreadOnly {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_at(offset, buf)
    }
    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_nowait(offset, buf)
    }
    fn may_touch_region(&self) -> bool {
        false
    }
}

#[test]
fn fault_around_never_changes_the_bytes_a_read_sees_of_a_file_that_shrank() {
    // Reads the region through system calls (a poisoned page is EFAULT,
    // not SIGBUS): with a user-mode-only userfaultfd those get EFAULT for
    // every missing page, so this needs a full one.
    if common::skip::unless_full_userfaultfd().is_none() {
        return;
    }
    let dir = scratch_dir("shrunk");
    let path = dir.join("source");
    const PAGES: usize = 40;
    let src = pattern(PAGES * PAGE, 13);
    // New lengths: mid-page, page-aligned, inside the first window, and
    // the windows' last page; pages read: the new end's, one before it,
    // one wholly past it, in either order.
    for new_len in [2 * PAGE + 100, 5 * PAGE, 17 * PAGE + 1, 31 * PAGE + 4095] {
        let end_page = (new_len - 1) / PAGE;
        for pread_only in [false, true] {
            for window in [PAGE, 4 * PAGE, 16 * PAGE, 64 * PAGE, MAX_FAULT_AROUND] {
                std::fs::write(&path, &src).unwrap();
                let file = FileSource::open(&path).unwrap();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(new_len as u64)
                    .unwrap();
                let b = Pager::builder(PAGES * PAGE).fault_around(window);
                let b = if pread_only {
                    b.source(PreadOnly(file))
                } else {
                    b.source(file)
                };
                let Some(pager) = build(b) else {
                    return;
                };
                let what = format!("new length {new_len}, window {window}, pread {pread_only}");
                // Bytes of the file, then zeros to the page's end: as mmap.
                let want = |p: usize| -> Vec<u8> {
                    (p * PAGE..(p + 1) * PAGE)
                        .map(|i| if i < new_len { src[i] } else { 0 })
                        .collect()
                };
                let got = kernel_read_or_hang(&pager, end_page * PAGE, PAGE)
                    .unwrap_or_else(|e| panic!("{what}: the new end's page failed: {e}"));
                assert!(got == want(end_page), "{what}: page {end_page}");
                if end_page > 0 {
                    let got = kernel_read_or_hang(&pager, (end_page - 1) * PAGE, PAGE).unwrap();
                    assert!(got == want(end_page - 1), "{what}: page {}", end_page - 1);
                }
                // The same read from user space: no SIGBUS.
                let mut buf = vec![0u8; PAGE];
                pager.read(end_page * PAGE, &mut buf).unwrap();
                assert!(buf == want(end_page), "{what}: user-space read");
                // Wholly past the new end: poisoned as a mapped file's page
                // would be (SIGBUS to a user access), zeros without poison.
                let past = kernel_read_or_hang(&pager, (end_page + 1) * PAGE, PAGE);
                pager.settle();
                match past {
                    Err(e) => assert!(is_efault(&e), "{what}: {e}"),
                    Ok(v) => {
                        assert_eq!(pager.stats().poisoned_pages, 0, "{what}");
                        assert!(v.iter().all(|&b| b == 0), "{what}: past the end");
                    }
                }
                let errors = pager.take_errors();
                assert!(
                    errors
                        .iter()
                        .all(|e| matches!(e, PagerError::SourceRead { offset, .. }
                        if *offset >= ((end_page + 1) * PAGE) as u64)),
                    "{what}: only pages past the end fail: {errors:?}"
                );
            }
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_huge_window_is_a_typed_error_and_a_window_past_the_region_is_capped() {
    for window in [1usize << 40, 1 << 63, MAX_FAULT_AROUND * 2] {
        let e = Pager::builder(1 << 20)
            .fault_around(window)
            .build()
            .err()
            .expect("refused");
        assert!(
            matches!(e, PagerError::WindowTooLarge { window: w, max: MAX_FAULT_AROUND } if w == window),
            "{e}"
        );
    }
    let src = pattern(16 * PAGE, 14);
    let Some(pager) = build(
        Pager::builder(16 * PAGE)
            .source(herdless_pager::MemSource::new(src.clone()))
            .fault_around(MAX_FAULT_AROUND),
    ) else {
        return;
    };
    assert_eq!(
        pager.fault_around_bytes(),
        16 * PAGE,
        "capped at the region"
    );
    check_page(&pager, 5, |i| src[i]);
    pager.settle();
    assert_eq!(pager.stats().pages_installed(), 16);
    for p in 0..16 {
        check_page(&pager, p, |i| src[i]);
    }
}

/// A source whose methods panic on the pages named.
struct Panicking {
    read_at_panics_on: usize,
    nowait_panics_on: Option<usize>,
}

impl PageSource for Panicking {
    fn len(&self) -> u64 {
        32 * PAGE as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let first = offset as usize / PAGE;
        let last = (offset as usize + buf.len() - 1) / PAGE;
        if (first..=last).contains(&self.read_at_panics_on) {
            panic!("read_at of page {} (a test source)", self.read_at_panics_on);
        }
        buf.fill(0x5A);
        Ok(())
    }
    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(p) = self.nowait_panics_on {
            let first = offset as usize / PAGE;
            let last = (offset as usize + buf.len().max(1) - 1) / PAGE;
            if (first..=last).contains(&p) {
                panic!("read_nowait of page {p} (a test source)");
            }
        }
        Ok(0) // nothing without blocking: every demand page is read_at
    }
    fn may_touch_region(&self) -> bool {
        false // so that handlers(1) really is one handler
    }
}

#[test]
fn a_panicking_source_never_leaves_a_fault_unanswered() {
    // Reads the region through system calls (a poisoned page is EFAULT,
    // not SIGBUS): with a user-mode-only userfaultfd those get EFAULT for
    // every missing page, so this needs a full one.
    if common::skip::unless_full_userfaultfd().is_none() {
        return;
    }
    for handlers in [1, 2] {
        for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
            for window in [PAGE, 16 * PAGE] {
                let Some(pager) = build(
                    Pager::builder(32 * PAGE)
                        .source(Panicking {
                            read_at_panics_on: 3,
                            nowait_panics_on: Some(20),
                        })
                        .fault_around(window)
                        .handlers(handlers)
                        .mode(mode),
                ) else {
                    return;
                };
                let what = format!("{handlers} handlers, {mode:?}, window {window}");
                // The faulting page's read panics: poisoned (or zeros).
                let r = kernel_read_or_hang(&pager, 3 * PAGE, PAGE);
                pager.settle();
                let st = pager.stats();
                match r {
                    Err(e) => assert!(is_efault(&e) && st.poisoned_pages == 1, "{what}: {e}"),
                    Ok(v) => assert!(st.poisoned_pages == 0 && v.iter().all(|&b| b == 0)),
                }
                // The same handlers serve on: other pages, and a page whose
                // neighbour's non-blocking read panics.
                for p in [10, 21, 20] {
                    let v = kernel_read_or_hang(&pager, p * PAGE, PAGE)
                        .unwrap_or_else(|e| panic!("{what}: page {p}: {e}"));
                    assert!(v.iter().all(|&b| b == 0x5A), "{what}: page {p}");
                }
                let errors = pager.take_errors();
                assert!(
                    errors.iter().any(|e| matches!(e,
                        PagerError::SourcePanicked { method: "read_at", offset, message }
                            if *offset == 3 * PAGE as u64 && message.contains("page 3"))),
                    "{what}: {errors:?}"
                );
                assert!(
                    !errors
                        .iter()
                        .any(|e| matches!(e, PagerError::HandlerPanicked(_))),
                    "{what}: a source's panic is not the handler's: {errors:?}"
                );
            }
        }
    }
}

/// A source whose `len` panics.
struct PanickingLen;

impl PageSource for PanickingLen {
    fn len(&self) -> u64 {
        panic!("len (a test source)")
    }
    fn read_at(&self, _: u64, _: &mut [u8]) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_source_panicking_while_the_pager_is_built_is_a_typed_error() {
    let e = Pager::builder(PAGE)
        .source(PanickingLen)
        .build()
        .err()
        .expect("refused");
    assert!(
        matches!(&e, PagerError::SourcePanicked { method: "len", message, .. } if message.contains("len")),
        "{e}"
    );
}

#[test]
fn unstartable_handler_counts_are_typed_errors() {
    for asked in [100_000, MAX_HANDLERS + 1, usize::MAX] {
        let e = Pager::builder(PAGE)
            .handlers(asked)
            .build()
            .err()
            .expect("refused");
        assert!(
            matches!(e, PagerError::TooManyHandlers { asked: a, max: MAX_HANDLERS } if a == asked),
            "{e}"
        );
    }
}

const SPAWN_CHILD: &str = "HERDLESS_PAGER_SPAWN_FAILURE_CHILD";

/// Runs in a child process (see the next test): with the address space
/// capped a little above what the process uses, thread stacks run out
/// part-way through starting 200 handlers.
#[test]
fn spawn_failure_child() {
    if std::env::var(SPAWN_CHILD).is_err() {
        return; // only meaningful in the child
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let cap = (vm_kib << 10) + (64 << 20);
    rustix::process::setrlimit(
        rustix::process::Resource::As,
        rustix::process::Rlimit {
            current: Some(cap),
            maximum: None,
        },
    )
    .unwrap();
    match Pager::builder(16 * PAGE).handlers(200).build() {
        Ok(_) => println!("RESULT started-all"),
        Err(PagerError::ThreadSpawn { started, .. }) => println!("RESULT spawn-failed {started}"),
        Err(PagerError::UserfaultfdUnavailable { .. }) => println!("RESULT unavailable"),
        Err(e) => println!("RESULT other {e}"),
    }
    // Everything the failed build started was released: a small pager
    // starts and serves.
    match Pager::builder(16 * PAGE).handlers(2).build() {
        Ok(p) => {
            check_page(&p, 3, |_| 0);
            println!("RESULT then-served");
        }
        Err(e) => println!("RESULT then-failed {e}"),
    }
}

#[test]
fn a_thread_spawn_failing_midway_is_a_typed_error_and_everything_started_is_released() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "spawn_failure_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SPAWN_CHILD, "1")
        .process_group(0)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("RESULT unavailable") {
        eprintln!("skipping: userfaultfd is unavailable here");
        return;
    }
    let started = stdout
        .split("RESULT spawn-failed ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("the child did not fail to spawn: {stdout}"));
    assert!((1..200).contains(&started), "{stdout}");
    assert!(stdout.contains("RESULT then-served"), "{stdout}");
    assert!(out.status.success(), "{stdout}");
}
