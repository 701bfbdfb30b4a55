//! `SIGTERM` and `SIGINT` end `herdless-uffd` cleanly at every stage:
//! waiting for the VMM, waiting for its handoff message, copying everything
//! (`--copy-all`), serving. Each time the socket file it created is gone
//! (and a file put in its place is not), the outputs it was asked for keep
//! their old bytes (a restore a signal cut short writes none), nothing is
//! left beside them, and it exits 128 + the signal.

mod restore_support;

use std::os::unix::net::UnixStream;

use restore_support::files::Files;
use restore_support::*;

/// `--record ws.trace --stats-json old.json`, by absolute path (the
/// handler runs in the test's directory).
fn outputs(files: &Files) -> [String; 4] {
    let abs = |name: &str| files.dir.join(name).to_str().unwrap().to_string();
    [
        "--record".into(),
        abs("ws.trace"),
        "--stats-json".into(),
        abs("old.json"),
    ]
}

/// Starts `herdless-uffd DIR/sock DIR/vm.mem outputs... extra...`.
fn start_with_outputs(files: &Files, extra: &[&str]) -> Handler {
    let outs = outputs(files);
    let mut args: Vec<&str> = outs.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    let handler = start(&files.dir.join("sock"), &files.dir.join("vm.mem"), &args);
    assert!(handler.socket.exists(), "not listening: {}", handler.log());
    handler
}

fn send(handler: &Handler, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(handler.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}

/// Sends `signal`, waits for the exit; checks status 128 + `number`, the
/// socket gone, every file as it was; its standard output and error.
fn stop_and_check(
    case: &str,
    files: &Files,
    handler: Handler,
    signal: rustix::process::Signal,
    number: i32,
) -> (String, String) {
    send(&handler, signal);
    let (status, out, err) = handler.finish();
    assert_eq!(status.code(), Some(128 + number), "{case}\n{out}\n{err}");
    assert!(
        !files.dir.join("sock").exists(),
        "{case}: the socket file was left behind"
    );
    files.intact(case, &[]);
    (out, err)
}

#[test]
fn a_signal_while_waiting_for_the_vmm_removes_the_socket_and_writes_nothing() {
    let files = Files::new("signal-accept");
    for (signal, number) in [
        (rustix::process::Signal::TERM, 15),
        (rustix::process::Signal::INT, 2),
    ] {
        let handler = start_with_outputs(&files, &[]);
        let (out, err) = stop_and_check("waiting for the VMM", &files, handler, signal, number);
        assert!(
            err.contains(&format!(
                "stopped by signal {number} while waiting for the VMM to connect"
            )),
            "{err}"
        );
        // Nobody connected: no VM hangs, nothing to stop.
        assert!(!err.contains("note:"), "{err}");
        assert!(out.is_empty(), "no summary: nothing was served\n{out}");
    }
    let _ = std::fs::remove_dir_all(&files.dir);
}

#[test]
fn a_signal_while_waiting_for_the_handoff_removes_the_socket_and_says_the_vm_hangs() {
    let files = Files::new("signal-handoff");
    let handler = start_with_outputs(&files, &[]);
    // A VMM that connects and sends nothing (yet).
    let conn = UnixStream::connect(&handler.socket).unwrap();
    let me = format!("connection from pid {}", std::process::id());
    wait_until("the handler took the connection", || {
        handler.log().contains(&me)
    });
    let (_, err) = stop_and_check(
        "waiting for the handoff",
        &files,
        handler,
        rustix::process::Signal::TERM,
        15,
    );
    assert!(
        err.contains("stopped by signal 15 while waiting for the VMM's handoff message"),
        "{err}"
    );
    assert!(err.contains("note: the VMM that connected"), "{err}");
    drop(conn);
    let _ = std::fs::remove_dir_all(&files.dir);
}

#[test]
fn a_file_put_in_place_of_the_socket_is_left_alone() {
    let files = Files::new("signal-replaced");
    let handler = start_with_outputs(&files, &[]);
    // Someone removes the socket and puts another file there.
    let sock = files.dir.join("sock");
    std::fs::remove_file(&sock).unwrap();
    std::fs::write(&sock, b"someone else's").unwrap();
    send(&handler, rustix::process::Signal::TERM);
    let (status, out, err) = handler.finish();
    assert_eq!(status.code(), Some(143), "{out}\n{err}");
    assert_eq!(std::fs::read(&sock).unwrap(), b"someone else's");
    std::fs::remove_file(&sock).unwrap();
    files.intact("socket replaced", &[]);
    let _ = std::fs::remove_dir_all(&files.dir);
}

/// Pages of `[addr, addr + len)` the handler has installed (`mincore`).
fn resident_pages(addr: usize, len: usize) -> usize {
    let mut vec = vec![0u8; len.div_ceil(PAGE)];
    // SAFETY: `addr..addr + len` is the test's own guest mapping; mincore
    // only reads its page tables and writes one byte per page into `vec`.
    let r = unsafe { libc::mincore(addr as *mut _, len, vec.as_mut_ptr().cast()) };
    assert_eq!(r, 0, "mincore");
    vec.iter().filter(|b| *b & 1 != 0).count()
}

/// Waits until the handler's whole process is stopped (`SIGSTOP`).
fn wait_stopped(handler: &Handler) {
    // SAFETY: `info` is a local siginfo_t that waitid fills; WNOWAIT
    // leaves the child's state to be waited for again.
    let r = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            handler.child.id(),
            &mut info,
            libc::WSTOPPED | libc::WNOWAIT,
        )
    };
    assert_eq!(r, 0, "waitid: {}", std::io::Error::last_os_error());
}

/// The number before `what` in the summary line (`"160 pages copied"`).
fn figure(line: &str, what: &str) -> usize {
    let before = &line[..line.find(what).unwrap_or_else(|| panic!("{what}: {line}"))];
    before
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: {line}"))
}

#[test]
fn a_signal_during_copy_all_stops_the_copy_removes_the_socket_and_writes_nothing() {
    const MEMORY: usize = 32 << 20;
    let pages = MEMORY / PAGE;
    let files = Files::with_memory("signal-copy-all", MEMORY);
    // The copy is caught in the middle by stopping the handler's process
    // (SIGSTOP: every thread at once) once it has begun, and looking at
    // what it installed; a copy that was over by then (a machine busy
    // elsewhere delayed the test) is started again, a few times.
    for attempt in 1..=5 {
        let Some(mem) = guest_memory(&[MEMORY]) else {
            return;
        };
        let handler = start_with_outputs(&files, &["--copy-all"]);
        let conn = mem.handoff(&handler.socket).unwrap();
        let base = mem.regions()[0].base;
        wait_until("the copy began", || resident_pages(base, PAGE) == 1);
        send(&handler, rustix::process::Signal::STOP);
        wait_stopped(&handler);
        let installed = resident_pages(base, MEMORY);
        // Queued while it is stopped: the signal is there when it goes on.
        send(&handler, rustix::process::Signal::TERM);
        send(&handler, rustix::process::Signal::CONT);
        if installed == pages {
            eprintln!("attempt {attempt}: the copy was over before it could be stopped");
            let (status, out, err) = handler.finish();
            assert_eq!(status.code(), Some(143), "{out}\n{err}");
            drop(conn);
            continue;
        }
        let case = format!("stopped after {installed} of {pages} pages");
        let (status, out, err) = handler.finish();
        drop(conn);
        assert_eq!(status.code(), Some(143), "{case}\n{out}\n{err}");
        assert!(out.contains("stopped by signal 15"), "{case}: {out}");
        // The copy stopped where it was: what it had installed, and at most
        // the run in flight (512 pages) more, never the rest.
        let copied = figure(&out, "pages copied");
        assert!(
            copied >= installed && copied < pages,
            "{case}: {copied} copied\n{out}"
        );
        assert_eq!(figure(&out, "faults served"), 0, "{case}: {out}");
        assert!(
            err.contains("note: the VMM that connected"),
            "{case}: {err}"
        );
        eprintln!("{case}, {copied} copied by the end");
        assert!(!files.dir.join("sock").exists(), "{case}: socket left");
        files.intact(&case, &[]);
        let _ = std::fs::remove_dir_all(&files.dir);
        return;
    }
    panic!("the copy of {MEMORY} bytes was over before the test could stop it, 5 times");
}

#[test]
fn a_signal_while_serving_ends_with_the_summary_and_writes_nothing() {
    let Some(mem) = guest_memory(&[16 * PAGE]) else {
        return;
    };
    let files = Files::with_memory("signal-serving", 16 * PAGE);
    let handler = start_with_outputs(&files, &[]);
    let conn = mem.handoff(&handler.socket).unwrap();
    let bytes = files.kept[0].1.clone();
    mem.check_against(&bytes, 1, &|_| false).unwrap();
    let (out, err) = stop_and_check(
        "serving",
        &files,
        handler,
        rustix::process::Signal::TERM,
        15,
    );
    drop(conn);
    assert!(
        out.contains("16 pages copied") && out.contains("stopped by signal 15"),
        "{out}"
    );
    assert!(err.contains("note: the VMM that connected"), "{err}");
    let _ = std::fs::remove_dir_all(&files.dir);
}
