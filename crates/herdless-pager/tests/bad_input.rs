//! Bad input gets a typed error, never a panic or a hang; source failures
//! are reported and never leave a faulting thread asleep.

mod common;

use std::io;
use std::os::unix::process::CommandExt;
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
        return;
    };
    check_page(&pager, 1, |i| src[i]); // still there
    let r = kernel_reads_page(&pager, 5, &dir.join("sink"));
    pager.settle();
    let st = pager.stats();
    assert_eq!(st.source_errors, 1, "{st:?}");
    let errors = pager.take_errors();
    assert!(
        matches!(&errors[..], [PagerError::SourceRead { offset, .. }] if *offset == 5 * PAGE as u64),
        "{errors:?}"
    );
    if st.poisoned_pages == 1 {
        let e = r.expect_err("a poisoned page cannot be read");
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::FAULT.raw_os_error())
        );
    } else {
        eprintln!("no UFFDIO_POISON on this kernel: the page was answered with zeros");
        r.unwrap();
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

/// Runs in a child process as user `nobody` (see the next test).
#[test]
fn refusal_child() {
    let Ok(which) = std::env::var(CHILD) else {
        return; // only meaningful in the child
    };
    let r = Pager::builder(4 * PAGE)
        .user_mode_only(which == "user-mode-only")
        .build();
    match r {
        Ok(p) => {
            check_page(&p, 0, |_| 0);
            println!("RESULT ok");
        }
        Err(PagerError::UserfaultfdUnavailable { .. }) => println!("RESULT unavailable"),
        Err(e) => println!("RESULT other {e}"),
    }
}

#[test]
fn an_unprivileged_process_gets_the_typed_refusal_or_user_mode_only_works() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: not root, cannot switch to an unprivileged user");
        return;
    }
    let unprivileged_allowed = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    let run = |which: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "refusal_child", "--nocapture"])
            .env(CHILD, which)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let full = run("full");
    if unprivileged_allowed {
        assert!(full.contains("RESULT ok"), "{full}");
    } else {
        assert!(full.contains("RESULT unavailable"), "{full}");
    }
    // UFFD_USER_MODE_ONLY is allowed to unprivileged users (Linux 5.11+).
    let umo = run("user-mode-only");
    assert!(umo.contains("RESULT ok"), "{umo}");
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
