//! `herdless-uffd` refuses broken or hostile VMM input, survives a memory
//! file that changes underneath, and keeps strangers off its socket (issue
//! 17). Each case drives the real binary with a client sending the hostile
//! input, and ends in one clear error line and exit status 1, or in the
//! documented service (exit 0, or 3 when faults had to be poisoned) —
//! never a panic, a hang or a `SIGBUS` death.

mod restore_support;

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;

use herdless_pager::vmm::{send_with_fds, GuestMemory};
use restore_support::*;

/// Reads `conn` to its end: the handler closed it (an end of file, or a
/// reset when it closed with our message unread).
fn closed_by_the_handler(conn: &UnixStream) {
    let mut got = Vec::new();
    match (&*conn).read_to_end(&mut got) {
        Ok(_) => assert!(got.is_empty(), "the handler sent {got:?}"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
}

/// Waits for the handler to exit and checks it refused with exactly one
/// error line containing `what`, status 1, and no panic. Returns its whole
/// log (standard error), complete once it has exited.
fn refused(handler: Handler, what: &str) -> String {
    let (status, out, err) = handler.finish();
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("herdless-uffd: error: "))
        .collect();
    assert_eq!(errors.len(), 1, "one error line, got:\n{err}");
    assert!(
        errors[0].contains(what),
        "expected {what:?} in {:?}",
        errors[0]
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked") && out.is_empty(), "{out}\n{err}");
    err
}

/// Starts a handler over a `pages`-page memory file in a fresh directory.
fn handler_for(name: &str, pages: usize, args: &[&str]) -> (Handler, std::path::PathBuf, Vec<u8>) {
    let dir = test_dir(name);
    let (memory, file) = memory_file(&dir, pages * PAGE, 11);
    (start(&dir.join("sock"), &memory, args), dir, file)
}

/// Sends `body` with `mem`'s userfaultfd and expects the refusal `what`.
fn message_refused(name: &str, file_pages: usize, mem: &GuestMemory, body: &str, what: &str) {
    let (handler, dir, _) = handler_for(name, file_pages, &[]);
    let conn = UnixStream::connect(&handler.socket).unwrap();
    send_with_fds(&conn, body.as_bytes(), &[mem.uffd()]).unwrap();
    refused(handler, what);
    drop(conn);
    let _ = std::fs::remove_dir_all(dir);
}

fn mapping(base: usize, size: usize, offset: usize, page_size: usize) -> String {
    format!(
        "{{\"base_host_virt_addr\":{base},\"size\":{size},\"offset\":{offset},\"page_size\":{page_size}}}"
    )
}

#[test]
fn mappings_that_do_not_fit_the_memory_file_are_refused() {
    let Some(mem) = guest_memory(&[16 * PAGE, 16 * PAGE]) else {
        return;
    };
    let (a, b) = (mem.regions()[0].base, mem.regions()[1].base);
    let two = |x: String, y: String| format!("[{x},{y}]");
    let cases = [
        (
            "past-the-end",
            format!("[{}]", mapping(a, 16 * PAGE, 20 * PAGE, PAGE)),
            "past the memory file",
        ),
        (
            "sum",
            two(
                mapping(a, 16 * PAGE, 0, PAGE),
                mapping(b, 16 * PAGE, 8 * PAGE, PAGE),
            ),
            "more than the memory file's",
        ),
        (
            "host-overlap",
            two(
                mapping(a, 16 * PAGE, 0, PAGE),
                mapping(a + 8 * PAGE, 8 * PAGE, 16 * PAGE, PAGE),
            ),
            "host range overlaps",
        ),
        (
            "file-overlap",
            two(
                mapping(a, 8 * PAGE, 0, PAGE),
                mapping(b, 8 * PAGE, 4 * PAGE, PAGE),
            ),
            "file range overlaps",
        ),
        (
            "zero",
            format!("[{}]", mapping(a, 0, 0, PAGE)),
            "size is zero",
        ),
        (
            "unaligned-base",
            format!("[{}]", mapping(a + 100, PAGE, 0, PAGE)),
            "is not a multiple of the page size",
        ),
        (
            "unaligned-size",
            format!("[{}]", mapping(a, PAGE + 1, 0, PAGE)),
            "size 0x1001 is not a multiple",
        ),
        (
            "page-size",
            format!("[{}]", mapping(a & !0x3f_ffff, 4 << 20, 0, 4 << 20)),
            "page size 4194304 is not served",
        ),
        ("empty", "[]".to_string(), "lists no memory mappings"),
    ];
    for (name, body, what) in cases {
        let file_pages = if name == "page-size" { 1024 } else { 24 };
        message_refused(name, file_pages, &mem, &body, what);
    }
}

/// Firecracker has resumed the VM by the time the handler refuses its
/// handoff: the refusal names the fix, and a note says the VM now hangs.
#[test]
fn a_memory_file_shorter_than_guest_memory_is_refused_naming_the_fix() {
    let Some(mem) = guest_memory(&[32 * PAGE]) else {
        return;
    };
    let (handler, dir, _) = handler_for("short-file", 16, &[]);
    let conn = mem.handoff(&handler.socket).unwrap();
    let log = refused(
        handler,
        "start herdless-uffd with the memory file written with this snapshot",
    );
    assert!(
        log.contains("note: the VMM that connected has no page-fault handler now")
            && log.contains("hangs at its first page fault: stop it"),
        "{log}"
    );
    drop(conn);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn messages_that_are_not_mapping_lists_are_refused() {
    let Some(mem) = guest_memory(&[16 * PAGE]) else {
        return;
    };
    message_refused(
        "not-json",
        16,
        &mem,
        "GET / HTTP/1.1\r\n\r\n",
        "is not JSON",
    );
    message_refused(
        "shape",
        16,
        &mem,
        r#"{"base_host_virt_addr":4096}"#,
        "not a list of memory mappings",
    );
    message_refused(
        "fields",
        16,
        &mem,
        r#"[{"base":4096,"size":4096,"offset":0}]"#,
        "missing field `base_host_virt_addr`",
    );
}

#[test]
fn a_message_without_exactly_one_userfaultfd_is_refused() {
    let Some(mem) = full_guest_memory(&[16 * PAGE]) else {
        return;
    };
    let body = mem.mappings_json();
    let memfd = rustix::fs::memfd_create("not-a-uffd", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    // SAFETY: userfaultfd(2) has no memory-safety precondition; the fd is
    // never registered or used here (it is sent uninitialised on purpose).
    let raw = unsafe { rustix::mm::userfaultfd(rustix::mm::UserfaultfdFlags::CLOEXEC) }.unwrap();
    let cases: [(&str, Vec<std::os::fd::BorrowedFd<'_>>, &str); 4] = [
        ("no-fd", vec![], "carries no file descriptor"),
        (
            "two-fds",
            vec![mem.uffd(), memfd.as_fd()],
            "carries 2 file descriptors",
        ),
        (
            "memfd",
            vec![memfd.as_fd()],
            "is not a userfaultfd (it is /memfd:not-a-uffd",
        ),
        (
            "raw-uffd",
            vec![raw.as_fd()],
            "was not initialised with UFFDIO_API",
        ),
    ];
    for (name, fds, what) in cases {
        let (handler, dir, _) = handler_for(name, 16, &[]);
        let conn = UnixStream::connect(&handler.socket).unwrap();
        send_with_fds(&conn, body.as_bytes(), &fds).unwrap();
        refused(handler, what);
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_connection_that_sends_nothing_or_half_a_message_times_out() {
    let Some(mem) = guest_memory(&[16 * PAGE]) else {
        return;
    };
    for (name, partial) in [("silent", ""), ("half", "[{\"base_host_virt_addr\":")] {
        let (handler, dir, _) = handler_for(name, 16, &["--handoff-timeout", "0.3"]);
        let conn = UnixStream::connect(&handler.socket).unwrap();
        if !partial.is_empty() {
            send_with_fds(&conn, partial.as_bytes(), &[mem.uffd()]).unwrap();
        }
        refused(handler, "sent no complete handoff message within 300ms");
        drop(conn); // kept open until the handler gave up
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_connection_closed_before_its_message_is_refused() {
    let (handler, dir, _) = handler_for("closed", 16, &[]);
    drop(UnixStream::connect(&handler.socket).unwrap());
    refused(handler, "closed the connection before sending");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_second_connection_while_serving_is_turned_away_and_serving_goes_on() {
    let Some(mem) = guest_memory(&[32 * PAGE]) else {
        return;
    };
    let (handler, dir, file) = handler_for("second", 32, &[]);
    let conn = mem.handoff(&handler.socket).unwrap();
    let mut buf = vec![0u8; PAGE];
    mem.read(mem.regions()[0].base, &mut buf).unwrap();
    // Another process tries its luck: closed without a word.
    let intruder = UnixStream::connect(&handler.socket).unwrap();
    let _ = send_with_fds(&intruder, b"[]", &[]);
    closed_by_the_handler(&intruder);
    mem.check_against(&file, 2, &|_| false).unwrap();
    drop(conn);
    let (_, err) = handler.finish_ok();
    assert!(
        err.contains("refused a second connection from pid"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_fault_outside_every_mapping_is_answered_reported_and_serving_goes_on() {
    let Some(mem) = full_guest_memory(&[16 * PAGE, 16 * PAGE]) else {
        return;
    };
    let (handler, dir, file) = handler_for("unmapped", 16, &[]);
    // The VMM registered two regions but describes one.
    let r = mem.regions();
    let body = format!("[{}]", mapping(r[0].base, r[0].size, 0, PAGE));
    let conn = UnixStream::connect(&handler.socket).unwrap();
    send_with_fds(&conn, body.as_bytes(), &[mem.uffd()]).unwrap();
    // Answered (poisoned: EFAULT to the kernel's read; or zeros), not
    // left waiting, and not served from the file.
    match mem.kernel_read(r[1].base + 3 * PAGE, PAGE) {
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "{e}"),
        Ok(v) => assert!(v.iter().all(|&b| b == 0)),
    }
    let mut buf = vec![0u8; PAGE];
    for p in 0..16 {
        mem.read(r[0].base + p * PAGE, &mut buf).unwrap();
        assert!(buf == file[p * PAGE..(p + 1) * PAGE], "page {p}");
    }
    drop(conn);
    let (status, out, err) = handler.finish();
    assert_eq!(
        status.code(),
        Some(3),
        "served, with a fault it could not serve: {out}\n{err}"
    );
    assert!(err.contains("outside every region served"), "{err}");
    assert!(out.contains("faults served"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_memory_file_that_shrinks_while_serving_poisons_only_the_pages_past_its_end() {
    let Some(mem) = full_guest_memory(&[64 * PAGE]) else {
        return;
    };
    let (handler, dir, file) = handler_for("shrinks", 64, &["--fault-around", "64K"]);
    let base = mem.regions()[0].base;
    let conn = mem.handoff(&handler.socket).unwrap();
    let mut buf = vec![0u8; PAGE];
    mem.read(base, &mut buf).unwrap();
    let new_len = 20 * PAGE + 100;
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("memory"))
        .unwrap()
        .set_len(new_len as u64)
        .unwrap();
    // The page holding the new end: its bytes, then zeros (as mmap).
    let v = mem.kernel_read(base + 20 * PAGE, PAGE).unwrap();
    assert!(v[..100] == file[20 * PAGE..20 * PAGE + 100] && v[100..].iter().all(|&b| b == 0));
    // Wholly past the end: poisoned (EFAULT here; SIGBUS to a vCPU), or
    // zeros without UFFDIO_POISON; never the old bytes, never a hang.
    for p in [21, 40, 63] {
        match mem.kernel_read(base + p * PAGE, PAGE) {
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "page {p}: {e}"),
            Ok(v) => assert!(v.iter().all(|&b| b == 0), "page {p}"),
        }
    }
    // Before it: the file's bytes; the handler is alive and serving.
    for p in 1..20 {
        mem.read(base + p * PAGE, &mut buf).unwrap();
        assert!(buf == file[p * PAGE..(p + 1) * PAGE], "page {p}");
    }
    drop(conn);
    let (status, out, err) = handler.finish();
    assert_eq!(status.code(), Some(3), "{out}\n{err}");
    assert!(err.contains("reading the source at offset"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_memory_file_replaced_while_serving_is_served_as_it_was_opened() {
    let Some(mem) = guest_memory(&[32 * PAGE]) else {
        return;
    };
    let (handler, dir, file) = handler_for("replaced", 32, &[]);
    let conn = mem.handoff(&handler.socket).unwrap();
    let other = dir.join("other");
    std::fs::write(&other, vec![0xEEu8; 8 * PAGE]).unwrap();
    std::fs::rename(&other, dir.join("memory")).unwrap();
    mem.check_against(&file, 2, &|_| false).unwrap();
    drop(conn);
    handler.finish_ok();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_socket_is_owner_only_unless_a_mode_is_given() {
    for (args, want) in [(vec![], 0o600), (vec!["--socket-mode", "660"], 0o660)] {
        let mut all = vec!["--accept-timeout", "0.2"];
        all.extend(args);
        let (handler, dir, _) = handler_for(&format!("mode-{want:o}"), 16, &all);
        let mode = std::fs::metadata(&handler.socket)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, want, "{mode:o}");
        refused(handler, "no VMM connected within 200ms");
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_peer_of_another_user_is_turned_away_before_its_message_is_read() {
    let Some(mem) = guest_memory(&[16 * PAGE]) else {
        return;
    };
    let ours = rustix::process::getuid().as_raw();
    let other = ours.wrapping_add(4242).to_string();
    let (handler, dir, _) = handler_for(
        "allow-uid",
        16,
        &["--allow-uid", &other, "--accept-timeout", "0.5"],
    );
    // The handler may close it before the message is even sent.
    let conn = UnixStream::connect(&handler.socket).unwrap();
    let _ = send_with_fds(&conn, mem.mappings_json().as_bytes(), &[mem.uffd()]);
    closed_by_the_handler(&conn);
    // Read once the handler has exited: the log is collected by a thread,
    // and the refusal line may come after the close the client saw.
    let log = refused(handler, "no VMM connected within 500ms");
    assert!(
        log.contains(&format!(
            "refused a connection from pid {} uid {ours}",
            std::process::id()
        )) && log.contains(&format!("only uid {other} may connect")),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn paths_that_cannot_be_served_are_refused_before_anything_is_served() {
    let dir = test_dir("paths");
    let (memory, _) = memory_file(&dir, 16 * PAGE, 1);
    std::fs::write(dir.join("taken"), b"keep me").unwrap();
    refused(start(&dir.join("taken"), &memory, &[]), "already exists");
    assert_eq!(std::fs::read(dir.join("taken")).unwrap(), b"keep me");
    refused(
        start(&dir.join("sock"), &dir.join("no-such-memory"), &[]),
        "memory file",
    );
    refused(
        start(
            &dir.join("sock"),
            &memory,
            &["--prefetch", "/nonexistent/trace"],
        ),
        "trace /nonexistent/trace",
    );
    // A trace of another snapshot.
    let trace = dir.join("other.trace");
    std::fs::write(
        &trace,
        "herdless-uffd trace 1\npage-size 4096\nfile-length 8192\n0x0 1\n",
    )
    .unwrap();
    refused(
        start(
            &dir.join("sock"),
            &memory,
            &["--prefetch", trace.to_str().unwrap()],
        ),
        "another snapshot",
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_message_larger_than_any_mapping_list_is_refused() {
    let Some(mem) = guest_memory(&[16 * PAGE]) else {
        return;
    };
    let (handler, dir, _) = handler_for("huge", 16, &[]);
    let conn = UnixStream::connect(&handler.socket).unwrap();
    // An array that never ends, 2 MiB of it (sent from a thread: the
    // handler stops reading at its limit and closes).
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = send_with_fds(&conn, b"[", &[mem.uffd()]);
            let chunk = "0,".repeat(32 << 10);
            for _ in 0..32 {
                if send_with_fds(&conn, chunk.as_bytes(), &[]).is_err() {
                    break;
                }
            }
        });
        refused(handler, "exceeds 1048576 bytes");
    });
    let _ = std::fs::remove_dir_all(dir);
}
