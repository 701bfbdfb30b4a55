//! Working-set pages files ("packs", `TRACE.pages`): `--record` writes
//! one beside its trace, `--prefetch` reads the working set from it
//! instead of the memory's chunks, from an S3-protocol server started by
//! the test (`herdless-s3d`) or from local files; a pack that does not
//! belong to its trace or memory, is truncated, or is not a pack at all
//! is refused with the reason, and one whose bytes are corrupt is served
//! from the memory where its checksum fails: every restore still serves
//! every byte of the memory.

mod restore_support;
#[path = "common/s3.rs"]
mod s3;

use std::path::{Path, PathBuf};

use herdless_pager::restore::Trace;
use restore_support::*;
use s3::{seeded_bytes, S3World};

const URL: &str = "s3://snaps/vm.mem";
const TRACE: &str = "s3://snaps/ws.trace";
const LEN: usize = 128 * PAGE;
/// The working set: pages in first-touch order, in chunks 0, 1, 2, 6 and
/// 7 of 64 KiB.
const WS: [usize; 13] = [5, 6, 7, 40, 2, 3, 100, 101, 102, 103, 20, 127, 21];

fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Touches the working set in guest memory served by `handler`, checks
/// it, then every byte; ends the VMM and returns the handler's figures.
fn restore_and_check(
    mem: &herdless_pager::vmm::GuestMemory,
    handler: Handler,
    data: &[u8],
    stats: &Path,
) -> (serde_json::Value, String) {
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    let mut buf = vec![0u8; PAGE];
    for &p in &WS {
        mem.read(base + p * PAGE, &mut buf).unwrap();
        assert!(buf == data[p * PAGE..(p + 1) * PAGE], "page {p}");
    }
    mem.check_against(data, 2, &|_| false).unwrap();
    drop(conn);
    let (out, err) = handler.finish_ok();
    (read_json(stats), format!("{out}\n{err}"))
}

/// Touches the working set, in its order, in guest memory served by
/// `handler` (a recording restore), then ends the VMM and the handler.
fn touch_the_working_set(mem: &herdless_pager::vmm::GuestMemory, handler: Handler) {
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    let mut buf = vec![0u8; PAGE];
    for &p in &WS {
        mem.read(base + p * PAGE, &mut buf).unwrap();
    }
    drop(conn);
    handler.finish_ok();
}

/// An S3 world with the memory of `seed` stored, and a trace and its pack
/// recorded into the bucket from it.
fn recorded(name: &str, seed: u64) -> Option<(S3World, Vec<u8>)> {
    let w = S3World::start(
        test_dir(&format!("pack-{name}")),
        "AKPACK",
        "s3cr3t-of-the-pack-tests",
    )?;
    let data = seeded_bytes(LEN, seed);
    w.server.put("snaps", "vm.mem", data.clone()).unwrap();
    let mem = guest_memory(&[LEN])?;
    let handler = start(
        &path(&w.dir, "rec.sock"),
        Path::new(URL),
        &["--chunk-size", "64K", "--no-cache", "--record", TRACE],
    );
    touch_the_working_set(&mem, handler);
    Some((w, data))
}

/// Starts a prefetch restore of `URL` from `TRACE` through the host
/// cache `cache`, in chunks of 16 KiB (the pack's 56 KiB in four).
fn prefetch_cached(w: &S3World, sock: &str, stats: &Path, cache: &Path) -> Handler {
    let args = [
        "--chunk-size",
        "16K",
        "--cache-dir",
        cache.to_str().unwrap(),
        "--prefetch",
        TRACE,
        "--stats-json",
        stats.to_str().unwrap(),
    ];
    start(&path(&w.dir, sock), Path::new(URL), &args)
}

/// Starts a prefetch restore of `URL` from `TRACE` with `args`.
fn prefetch(w: &S3World, sock: &str, stats: &Path, args: &[&str]) -> Handler {
    let mut all = vec![
        "--chunk-size",
        "64K",
        "--no-cache",
        "--prefetch",
        TRACE,
        "--stats-json",
        stats.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    start(&path(&w.dir, sock), Path::new(URL), &all)
}

#[test]
fn record_then_prefetch_through_s3_reads_the_working_set_from_its_pack_only() {
    let Some((w, data)) = recorded("s3", 1) else {
        return;
    };
    let root = w.server.root().join("snaps");
    let pack = std::fs::read(root.join("ws.trace.pages")).unwrap();
    let header = herdless_pager::restore::pack::PackHeader::parse(&pack).unwrap();
    let trace = Trace::parse(
        &std::fs::read_to_string(root.join("ws.trace")).unwrap(),
        Path::new(TRACE),
    )
    .unwrap();
    assert!(header.matches(&trace).is_ok());
    assert_eq!(header.data_len, (WS.len() * PAGE) as u64);
    assert!(
        header.memory_etag.is_some(),
        "recorded from the object: bound by its ETag"
    );

    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    w.server.reset_counts();
    let stats = path(&w.dir, "stats.json");
    let handler = prefetch(&w, "sock", &stats, &[]);
    // Installed before it is touched, no memory chunk fetched for it.
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    for &p in &WS {
        wait_until("the working set is prefetched", || {
            resident(base + p * PAGE, PAGE)
        });
    }
    assert!(
        w.server.gets_of("snaps", "vm.mem").is_empty(),
        "{:?}",
        w.server.gets_of("snaps", "vm.mem")
    );
    drop(conn);
    drop(mem);
    let (status, out, err) = handler.finish();
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    let j = read_json(&stats);
    assert_eq!(j["pack"]["used"], true, "{j}");
    assert_eq!(j["pack"]["bound_by"], "the memory object's ETag", "{j}");
    assert_eq!(
        j["pack"]["served_bytes"].as_u64(),
        Some((WS.len() * PAGE) as u64),
        "{j}"
    );
    assert_eq!(j["pack"]["parts_bad"].as_u64(), Some(0), "{j}");
    assert_eq!(j["faults"].as_u64(), Some(0), "{j}");
    assert!(
        out.contains("pack: ") && out.contains(", 0 parts failed"),
        "{out}"
    );
    // The pack in few GETs: the one that opened it (its first 4 KiB:
    // header, size and ETag) and its one 64 KiB chunk (4 KiB of header,
    // 52 KiB of pages), asked for ahead in the same round trip with 15
    // more past its end (refused: its size was not known yet; or
    // cancelled before they were sent, once it was).
    let gets = w.server.gets_of("snaps", "ws.trace.pages");
    assert_eq!(gets.get(&0), Some(&2), "{gets:?}");
    assert!(gets.len() <= 16, "{gets:?}");
    assert!(
        gets.iter()
            .all(|(&first, &n)| first == 0 || (first >= pack.len() as u64 && n == 1)),
        "{gets:?}"
    );
    let object = &j["pack"]["object"];
    assert_eq!(object["ahead_gets"].as_u64(), Some(16), "{j}");
    assert_eq!(object["ahead_used"].as_u64(), Some(1), "{j}");
    assert_eq!(object["fetches"].as_u64(), Some(1), "{j}");
    assert!(out.contains("(1 of 16 asked for ahead used)"), "{out}");

    // A second restore touching everything: every byte, the rest from the
    // memory's chunks.
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let handler = prefetch(&w, "sock2", &stats, &[]);
    let (j, _) = restore_and_check(&mem, handler, &data, &stats);
    assert_eq!(j["pack"]["used"], true, "{j}");
}

#[test]
fn restores_starting_together_fetch_each_chunk_of_the_pack_once_and_a_warm_cache_none_ahead() {
    let Some((w, data)) = recorded("together", 3) else {
        return;
    };
    let pack_len = std::fs::metadata(w.server.root().join("snaps/ws.trace.pages"))
        .unwrap()
        .len();
    let cache = path(&w.dir, "cache");
    w.server.reset_counts();
    let stats = [path(&w.dir, "a.json"), path(&w.dir, "b.json")];
    // Both open the pack at once: one asks for its chunks ahead, the other
    // waits for it and reads them from the host cache.
    let handlers: Vec<Handler> = std::thread::scope(|s| {
        let started: Vec<_> = ["a.sock", "b.sock"]
            .iter()
            .zip(&stats)
            .map(|(sock, stats)| s.spawn(|| prefetch_cached(&w, sock, stats, &cache)))
            .collect();
        started.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ahead = Vec::new();
    for (handler, stats) in handlers.into_iter().zip(&stats) {
        let Some(mem) = guest_memory(&[LEN]) else {
            return;
        };
        let (j, _) = restore_and_check(&mem, handler, &data, stats);
        assert_eq!(j["pack"]["used"], true, "{j}");
        ahead.push(j["pack"]["object"]["ahead_gets"].as_u64().unwrap());
    }
    ahead.sort_unstable();
    assert_eq!(ahead, [0, 16], "one asked ahead, the other waited for it");
    // Chunk 0 once, besides the two GETs that opened the pack; chunks 1 to
    // 3 once each; past the end (asked for ahead), once each.
    let gets = w.server.gets_of("snaps", "ws.trace.pages");
    assert_eq!(gets.get(&0), Some(&3), "{gets:?}");
    for (first, n) in &gets {
        assert_eq!(*n, if *first == 0 { 3 } else { 1 }, "{gets:?}");
        assert!(*first % (16 << 10) == 0, "{gets:?}");
    }
    assert_eq!(
        gets.keys().filter(|&&f| f > 0 && f < pack_len).count(),
        3,
        "{gets:?}"
    );

    // Again, with the pack in the host cache: nothing asked for ahead, and
    // no chunk of the pack fetched (only the GET that opens it).
    w.server.reset_counts();
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let handler = prefetch_cached(&w, "c.sock", &stats[0], &cache);
    let (j, _) = restore_and_check(&mem, handler, &data, &stats[0]);
    let object = &j["pack"]["object"];
    assert_eq!(object["ahead_gets"].as_u64(), Some(0), "{j}");
    assert_eq!(object["fetches"].as_u64(), Some(0), "{j}");
    assert_eq!(object["host_hits"].as_u64(), Some(4), "{j}");
    let gets = w.server.gets_of("snaps", "ws.trace.pages");
    assert_eq!(gets.into_iter().collect::<Vec<_>>(), [(0, 1)]);
}

#[test]
fn the_pack_is_fetched_while_the_memory_is_still_being_opened() {
    let Some((w, data)) = recorded("overlap", 7) else {
        return;
    };
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    w.server.reset_counts();
    // The memory's HEAD waits: a handler that opened the memory, the
    // trace and the pack one after another would not ask for the pack
    // before it is answered.
    w.server.hold_requests("snaps", "vm.mem");
    let stats = path(&w.dir, "stats.json");
    let handler = std::thread::scope(|s| {
        let starting = s.spawn(|| prefetch(&w, "sock", &stats, &[]));
        wait_until("the pack's header and parts are asked for", || {
            w.server
                .gets_of("snaps", "ws.trace.pages")
                .get(&0)
                .is_some_and(|&n| n >= 2)
        });
        assert!(
            !starting.is_finished(),
            "the handler listened before the memory was opened"
        );
        w.server.release_requests("snaps", "vm.mem");
        starting.join().unwrap()
    });
    let (j, _) = restore_and_check(&mem, handler, &data, &stats);
    assert_eq!(j["pack"]["used"], true, "{j}");
    assert_eq!(j["pack"]["parts_bad"].as_u64(), Some(0), "{j}");
    assert!(j["set_up_for_s"].as_f64().is_some_and(|s| s > 0.0), "{j}");
}

#[test]
fn a_pack_of_another_snapshot_of_the_same_size_is_refused_and_the_restore_serves_the_new_one() {
    let Some((w, _)) = recorded("another", 1) else {
        return;
    };
    let newer = seeded_bytes(LEN, 2);
    w.server.put("snaps", "vm.mem", newer.clone()).unwrap();
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let stats = path(&w.dir, "stats.json");
    let handler = prefetch(&w, "sock", &stats, &[]);
    let (j, log) = restore_and_check(&mem, handler, &newer, &stats);
    assert_eq!(j["pack"]["used"], false, "{j}");
    let why = j["pack"]["not_used"].as_str().unwrap();
    assert!(why.contains("differs from the memory's"), "{why}");
    assert!(
        log.contains("prefetching the trace's pages from the memory"),
        "{log}"
    );
}

#[test]
fn a_corrupt_part_of_a_pack_bound_by_etag_is_served_from_the_memory() {
    let Some((w, data)) = recorded("corrupt", 3) else {
        return;
    };
    let root = w.server.root().join("snaps");
    let mut pack = std::fs::read(root.join("ws.trace.pages")).unwrap();
    let last = pack.len() - 1;
    pack[last] ^= 0x55;
    w.server.put("snaps", "ws.trace.pages", pack).unwrap();
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let stats = path(&w.dir, "stats.json");
    let handler = prefetch(&w, "sock", &stats, &[]);
    let (j, log) = restore_and_check(&mem, handler, &data, &stats);
    assert_eq!(j["pack"]["used"], true, "{j}");
    assert_eq!(j["pack"]["parts_bad"].as_u64(), Some(1), "{j}");
    assert_eq!(j["pack"]["served_bytes"].as_u64(), Some(0), "{j}");
    assert!(
        j["pack"]["fell_back_bytes"].as_u64() >= Some(PAGE as u64),
        "{j}"
    );
    assert!(log.contains("checksum does not match"), "{log}");
}

#[test]
fn truncated_foreign_and_malformed_packs_are_refused_with_the_reason() {
    let Some((w, data)) = recorded("refusals", 4) else {
        return;
    };
    let root = w.server.root().join("snaps");
    let good = std::fs::read(root.join("ws.trace.pages")).unwrap();
    let other_trace = Trace::from_offsets(PAGE as u64, LEN as u64, [0, PAGE as u64]).to_text();
    let mut bad_magic = good.clone();
    bad_magic[..8].copy_from_slice(b"garbage!");
    let mut version = good.clone();
    version[20] = b'9'; // "herdless-uffd pages 9"
    let cases: [(&str, Vec<u8>, Option<String>, &str); 5] = [
        (
            "truncated",
            good[..good.len() - 1].to_vec(),
            None,
            "truncated",
        ),
        (
            "longer",
            [good.clone(), vec![0]].concat(),
            None,
            "longer than it says",
        ),
        (
            "another trace",
            good.clone(),
            Some(other_trace),
            "another trace",
        ),
        (
            "not a pack",
            bad_magic,
            None,
            "not a herdless-uffd pages file",
        ),
        ("another version", version, None, "version 9"),
    ];
    let trace_text = std::fs::read(root.join("ws.trace")).unwrap();
    for (i, (case, pack, trace, why)) in cases.into_iter().enumerate() {
        w.server.put("snaps", "ws.trace.pages", pack).unwrap();
        let t = trace.map_or(trace_text.clone(), String::into_bytes);
        w.server.put("snaps", "ws.trace", t).unwrap();
        let Some(mem) = guest_memory(&[LEN]) else {
            return;
        };
        let stats = path(&w.dir, "stats.json");
        let handler = prefetch(&w, &format!("sock{i}"), &stats, &[]);
        let (j, _) = restore_and_check(&mem, handler, &data, &stats);
        assert_eq!(j["pack"]["used"], false, "{case}: {j}");
        let got = j["pack"]["not_used"].as_str().unwrap();
        assert!(got.contains(why), "{case}: {got}");
    }
    // And with `--no-pack`, none is looked for.
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let stats = path(&w.dir, "stats.json");
    let handler = prefetch(&w, "sock-off", &stats, &["--no-pack"]);
    let (j, _) = restore_and_check(&mem, handler, &data, &stats);
    assert!(j["pack"].is_null(), "{j}");
}

#[test]
fn a_local_pack_is_written_by_record_and_bound_by_sampled_pages() {
    let dir = test_dir("pack-local");
    let (memory, data) = memory_file(&dir, LEN, 5);
    let trace = path(&dir, "ws.trace");
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let handler = start(
        &path(&dir, "rec.sock"),
        &memory,
        &["--record", trace.to_str().unwrap()],
    );
    touch_the_working_set(&mem, handler);
    drop(mem);
    let pack = std::fs::read(path(&dir, "ws.trace.pages")).unwrap();
    let header = herdless_pager::restore::pack::PackHeader::parse(&pack).unwrap();
    assert!(header.memory_etag.is_none(), "a local file has no ETag");
    let h = header.header_len as usize;
    assert!(
        pack[h..h + PAGE] == data[5 * PAGE..6 * PAGE],
        "the first page recorded comes first"
    );

    let stats = path(&dir, "stats.json");
    let args = [
        "--prefetch",
        trace.to_str().unwrap(),
        "--stats-json",
        stats.to_str().unwrap(),
    ];
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let handler = start(&path(&dir, "sock"), &memory, &args);
    let (j, _) = restore_and_check(&mem, handler, &data, &stats);
    assert_eq!(j["pack"]["used"], true, "{j}");
    assert_eq!(
        j["pack"]["bound_by"], "sampled pages compared with the memory",
        "{j}"
    );

    // Another memory file of that size beside the same trace and pack:
    // refused, and the restore serves the new file.
    let newer = seeded_bytes(LEN, 6);
    std::fs::write(&memory, &newer).unwrap();
    let Some(mem) = guest_memory(&[LEN]) else {
        return;
    };
    let handler = start(&path(&dir, "sock2"), &memory, &args);
    let (j, _) = restore_and_check(&mem, handler, &newer, &stats);
    assert_eq!(j["pack"]["used"], false, "{j}");
    let _ = std::fs::remove_dir_all(&dir);
}
