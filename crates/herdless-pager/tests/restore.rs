//! `herdless-uffd` restoring a snapshot for a client that plays
//! Firecracker's VMM side exactly (`herdless_pager::vmm`): every byte
//! served from the memory file, from several threads, in two regions;
//! discarded ranges read zeros; the older message format; working-set
//! record and prefetch; copying everything up front; the VMM's memory
//! going away.

mod restore_support;

use restore_support::*;

/// Two regions (as Firecracker lays out memory around the x86 MMIO gap),
/// checked byte for byte from 4 threads, then a range of each discarded
/// (the balloon) and checked for zeros; then the VMM closes and the
/// handler exits 0 with its summary.
fn serve_two_regions(args: &[&str], seed: u64) {
    let sizes = [96 * PAGE, 64 * PAGE];
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let dir = test_dir(&format!("two-regions-{seed}"));
    let (memory, file) = memory_file(&dir, sizes.iter().sum(), seed);
    let stats = dir.join("stats.json");
    let mut all = vec!["--stats-json", stats.to_str().unwrap()];
    all.extend_from_slice(args);
    let handler = start(&dir.join("sock"), &memory, &all);
    let conn = mem.handoff(&handler.socket).unwrap();
    mem.check_against(&file, 4, &|_| false)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    // The balloon: a range inside each region, discarded; it reads zeros,
    // the rest still reads the file.
    let r = mem.regions().to_vec();
    let discarded = [(r[0].base + 10 * PAGE, 7 * PAGE), (r[1].base, 3 * PAGE)];
    for (addr, len) in discarded {
        mem.discard(addr, len).unwrap();
    }
    let zero = |a: usize| discarded.iter().any(|&(s, l)| a >= s && a < s + l);
    mem.check_against(&file, 3, &zero)
        .unwrap_or_else(|e| panic!("{args:?} after the discards: {e}"));
    drop(conn); // the VMM exits
    let (status, out, err) = handler.finish();
    eprintln!("{args:?}: {out}");
    assert_eq!(status.code(), Some(0), "{args:?}\n{out}\n{err}");
    assert!(
        out.contains("faults served") && out.contains("the VMM closed the connection"),
        "{out}"
    );
    assert!(
        err.contains(&format!("connection from pid {}", std::process::id())),
        "{err}"
    );
    let json = read_json(&stats);
    let pages = (sizes.iter().sum::<usize>() / PAGE) as u64;
    let copied = json["pages_copied"].as_u64().unwrap();
    assert_eq!(copied, pages, "every page copied once: {json}");
    assert_eq!(json["pages_discarded"].as_u64(), Some(10), "{json}");
    assert_eq!(json["zero_pages"].as_u64(), Some(10), "{json}");
    assert_eq!(json["poisoned_pages"].as_u64(), Some(0), "{json}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_firecracker_vmm_is_served_every_byte_and_its_discarded_ranges_read_zeros() {
    serve_two_regions(&[], 1);
}

#[test]
fn several_handlers_with_fault_around_serve_the_same_bytes() {
    serve_two_regions(&["--handlers", "3", "--fault-around", "64K"], 2);
}

#[test]
fn an_older_firecracker_message_with_page_size_kib_only_is_served() {
    let Some(mem) = guest_memory(&[32 * PAGE]) else {
        return;
    };
    let dir = test_dir("kib");
    let (memory, file) = memory_file(&dir, 32 * PAGE, 3);
    let handler = start(&dir.join("sock"), &memory, &[]);
    let r = mem.regions()[0];
    // Firecracker 1.7-1.10: the page size in bytes, under its old name.
    let body = format!(
        "[{{\"base_host_virt_addr\":{},\"size\":{},\"offset\":0,\"page_size_kib\":4096}}]",
        r.base, r.size
    );
    let conn = std::os::unix::net::UnixStream::connect(&handler.socket).unwrap();
    herdless_pager::vmm::send_with_fds(&conn, body.as_bytes(), &[mem.uffd()]).unwrap();
    mem.check_against(&file, 2, &|_| false).unwrap();
    drop(conn);
    handler.finish_ok();
}

/// Pages (of the two regions, as `(region, page)`) a guest touches, in
/// this order: scattered, with a few sequential runs.
fn working_set() -> Vec<(usize, usize)> {
    let mut ws = vec![(0, 5), (0, 6), (0, 7), (1, 40), (0, 2), (1, 3)];
    ws.extend((100..110).map(|p| (0, p)));
    ws.extend([(1, 0), (0, 60), (1, 63), (0, 61)]);
    ws
}

#[test]
fn record_then_prefetch_installs_the_working_set_before_it_is_touched() {
    let sizes = [128 * PAGE, 64 * PAGE];
    let dir = test_dir("record-prefetch");
    let (memory, file) = memory_file(&dir, sizes.iter().sum(), 4);
    let trace = dir.join("ws.trace");
    let ws = working_set();
    let offset = |mem: &herdless_pager::vmm::GuestMemory, (r, p): (usize, usize)| {
        let reg = mem.regions()[r];
        (reg.base + p * PAGE, reg.offset as usize + p * PAGE)
    };

    // 1. Record: one thread touches the working set in order.
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let handler = start(
        &dir.join("sock"),
        &memory,
        &["--record", trace.to_str().unwrap()],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let mut buf = vec![0u8; PAGE];
    for &page in &ws {
        let (addr, off) = offset(&mem, page);
        mem.read(addr, &mut buf).unwrap();
        assert!(buf == file[off..off + PAGE], "{page:?}");
    }
    drop(conn);
    handler.finish_ok();
    let recorded = herdless_pager::restore::Trace::read(&trace).unwrap_or_else(|e| panic!("{e}"));
    let want = herdless_pager::restore::Trace::from_offsets(
        PAGE as u64,
        file.len() as u64,
        ws.iter().map(|&page| offset(&mem, page).1 as u64),
    );
    assert_eq!(recorded, want, "the faulted pages in first-touch order");
    assert_eq!(recorded.pages(), ws.len() as u64);
    drop(mem);

    // 2. Prefetch into a fresh restore (other addresses, same file): the
    // working set is installed without a fault, and nothing else is.
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let stats = dir.join("stats.json");
    let handler = start(
        &dir.join("sock2"),
        &memory,
        &[
            "--prefetch",
            trace.to_str().unwrap(),
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    for &page in &ws {
        let (addr, _) = offset(&mem, page);
        wait_until("the working set is prefetched", || resident(addr, PAGE));
    }
    for &page in &ws {
        let (addr, off) = offset(&mem, page);
        mem.read(addr, &mut buf).unwrap();
        assert!(buf == file[off..off + PAGE], "{page:?}");
    }
    let (untouched, _) = offset(&mem, (0, 64));
    assert!(!resident(untouched, PAGE), "only the trace is prefetched");
    drop(conn);
    handler.finish_ok();
    let json = read_json(&stats);
    assert_eq!(
        json["pages_prefetched"].as_u64(),
        Some(ws.len() as u64),
        "{json}"
    );
    assert_eq!(json["faults"].as_u64(), Some(0), "{json}");
    assert_eq!(
        json["trace_pages"].as_u64(),
        Some(ws.len() as u64),
        "{json}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn copy_all_installs_every_page_and_answers_faults_meanwhile() {
    let sizes = [64 * PAGE, 32 * PAGE];
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let dir = test_dir("copy-all");
    let (memory, file) = memory_file(&dir, sizes.iter().sum(), 5);
    let stats = dir.join("stats.json");
    let handler = start(
        &dir.join("sock"),
        &memory,
        &["--copy-all", "--stats-json", stats.to_str().unwrap()],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    // The page copied last first (regions go in address order): the
    // copier has not reached it, or has; either way the access is answered
    // at once, by a handler or by the copy.
    let last = mem.regions().iter().map(|r| r.base + r.size).max().unwrap() - PAGE;
    let mut buf = vec![0u8; PAGE];
    mem.read(last, &mut buf).unwrap();
    // The copy goes on without any further access: every page comes in.
    for r in mem.regions() {
        wait_until("the copy installed every page", || resident(r.base, r.size));
    }
    mem.check_against(&file, 2, &|_| false).unwrap();
    drop(conn);
    handler.finish_ok();
    let json = read_json(&stats);
    // Each page filled once: by the copy, or by the one fault it answered.
    let prefetched = json["pages_prefetched"].as_u64().unwrap();
    let on_demand = json["pages_on_demand"].as_u64().unwrap();
    assert_eq!(prefetched + on_demand, 96, "{json}");
    assert!(prefetched >= 95, "{json}");
    assert!(json["faults"].as_u64().unwrap() <= 1, "{json}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_discarded_page_is_never_prefetched_back_while_discards_race_the_prefetch() {
    const PAGES: usize = 512;
    let dir = test_dir("prefetch-vs-discard");
    let (memory, file) = memory_file(&dir, PAGES * PAGE, 6);
    // The whole file, as a trace, backwards in 16-page runs (so that the
    // prefetch and the discards meet in the middle).
    let trace = dir.join("all.trace");
    let offsets: Vec<u64> = (0..PAGES / 16)
        .rev()
        .flat_map(|r| (r * 16..r * 16 + 16).map(|p| (p * PAGE) as u64))
        .collect();
    let t = herdless_pager::restore::Trace::from_offsets(PAGE as u64, file.len() as u64, offsets);
    std::fs::write(&trace, t.to_text()).unwrap();
    for round in 0..24 {
        let Some(mem) = guest_memory(&[PAGES * PAGE]) else {
            return;
        };
        let handler = start(
            &dir.join(format!("sock{round}")),
            &memory,
            &[
                "--prefetch",
                trace.to_str().unwrap(),
                "--prefetch-threads",
                "2",
                "--handlers",
                "2",
                "--fault-around",
                "32K",
            ],
        );
        let base = mem.regions()[0].base;
        // Discarded: pages 4..9 of every 32-page block, from two threads,
        // while a third touches pages everywhere.
        let discarded = |a: usize| {
            let p = (a - base) / PAGE;
            (4..9).contains(&(p % 32))
        };
        let conn = mem.handoff(&handler.socket).unwrap();
        std::thread::scope(|s| {
            for t in 0..2 {
                let mem = &mem;
                s.spawn(move || {
                    let blocks: Vec<usize> = (0..PAGES / 32).filter(|b| b % 2 == t).collect();
                    for b in blocks.into_iter().rev() {
                        mem.discard(base + (b * 32 + 4) * PAGE, 5 * PAGE).unwrap();
                    }
                });
            }
            let mem = &mem;
            s.spawn(move || {
                let mut buf = [0u8; 8];
                for p in (round..PAGES).step_by(7) {
                    let _ = mem.read(base + p * PAGE, &mut buf);
                }
            });
        });
        // Let the prefetch finish: the handler stops it and joins it
        // before it exits. Then nothing may fault (nobody would answer):
        // only resident pages are read.
        drop(conn);
        let (status, out, err) = handler.finish();
        assert_eq!(status.code(), Some(0), "round {round}: {out}\n{err}");
        let mut buf = vec![0u8; PAGE];
        let mut prefetched = 0;
        for p in 0..PAGES {
            let addr = base + p * PAGE;
            if !resident(addr, PAGE) {
                continue;
            }
            mem.read(addr, &mut buf).unwrap();
            if discarded(addr) {
                assert!(
                    buf.iter().all(|&b| b == 0),
                    "round {round}: discarded page {p} holds file data again"
                );
            } else {
                prefetched += 1;
                assert!(
                    buf == file[p * PAGE..(p + 1) * PAGE],
                    "round {round}: page {p}"
                );
            }
        }
        assert!(prefetched > 0, "round {round}: nothing was served");
    }
    let _ = std::fs::remove_dir_all(dir);
}

const VMM_CHILD: &str = "HERDLESS_UFFD_VMM_CHILD";

/// Runs in a child process (see the next test): a VMM that sets up its
/// guest memory, passes the mapping list and its userfaultfd to the parent
/// over fd 3, and exits when told to.
#[test]
fn vmm_child() {
    if std::env::var(VMM_CHILD).is_err() {
        return; // only meaningful in the child
    }
    use std::io::Read;
    use std::os::fd::FromRawFd;
    // SAFETY: the parent put a socket at fd 3 for us, and nothing else in
    // this process owns it.
    let mut to_parent = unsafe { std::os::unix::net::UnixStream::from_raw_fd(3) };
    let mem = herdless_pager::vmm::GuestMemory::new(&[64 * PAGE]).unwrap();
    herdless_pager::vmm::send_with_fds(&to_parent, mem.mappings_json().as_bytes(), &[mem.uffd()])
        .unwrap();
    let mut go = [0u8; 1];
    let _ = to_parent.read(&mut go);
    std::process::exit(0);
}

/// Receives one message and the descriptors attached to it.
fn receive_with_fds(
    stream: &std::os::unix::net::UnixStream,
) -> (Vec<u8>, Vec<std::os::fd::OwnedFd>) {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut buf = vec![0u8; 1 << 16];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = rustix::net::recvmsg(
        stream,
        &mut [std::io::IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .unwrap();
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(f) = m {
            fds.extend(f);
        }
    }
    buf.truncate(msg.bytes);
    (buf, fds)
}

#[test]
fn the_vmm_going_away_ends_the_restore_even_with_its_connection_still_open() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    if !userfaultfd_works() {
        return;
    }
    let dir = test_dir("vmm-gone");
    let (memory, _) = memory_file(&dir, 64 * PAGE, 7);
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let theirs_fd = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "vmm_child", "--nocapture", "--test-threads=1"])
        .env(VMM_CHILD, "1");
    // SAFETY: between fork and exec only dup2, which is async-signal-safe,
    // puts the socket at fd 3 (without close-on-exec) for the child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(theirs_fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(theirs);
    let (body, fds) = receive_with_fds(&ours);
    assert_eq!(fds.len(), 1, "the child's userfaultfd");
    // The VMM exits: its memory is gone, its userfaultfd lives on here.
    (&ours).write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success());

    let handler = start(&dir.join("sock"), &memory, &["--copy-all"]);
    let conn = std::os::unix::net::UnixStream::connect(&handler.socket).unwrap();
    herdless_pager::vmm::send_with_fds(&conn, &body, &[std::os::fd::AsFd::as_fd(&fds[0])]).unwrap();
    // `conn` stays open: the handler learns from ESRCH, not from a close.
    let (status, out, err) = handler.finish();
    drop(conn);
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("the VMM's memory went away"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}
