//! `herdless-uffd SOCKET s3://BUCKET/KEY`: a snapshot restored from an
//! S3-protocol server started by this test (`herdless-s3d`: s3s over
//! s3s-fs on 127.0.0.1, with SigV4 credentials), for a client playing
//! Firecracker's VMM side: every byte served, discarded ranges reading
//! zeros, record → prefetch with both traces in the store, four restores
//! at once fetching each chunk once, a failing GET retried and one that
//! keeps failing poisoning its pages, a slow GET holding only its own
//! chunk, an object replaced mid-restore, and a missing object or bad
//! credentials refused before the handler listens. No credential ever
//! appears in what it prints.

mod restore_support;
#[path = "common/s3.rs"]
mod s3;

use std::path::{Path, PathBuf};

use restore_support::*;
use s3::{seeded_bytes, S3World};

const SECRET: &str = "s3cr3t-of-the-restore-tests";
const URL: &str = "s3://snaps/vm.mem";
const CHUNK: usize = 64 << 10;

/// The S3 server of one test, for the handler to restore from (it
/// inherits the test's environment: the store's endpoint and credentials).
struct World(S3World);

impl std::ops::Deref for World {
    type Target = S3World;
    fn deref(&self) -> &S3World {
        &self.0
    }
}

impl World {
    /// An S3 server with bucket `snaps`, the environment pointing at it;
    /// `None` after printing why no server could start.
    fn new(name: &str) -> Option<World> {
        S3World::start(test_dir(&format!("s3-{name}")), "AKRESTORE", SECRET).map(World)
    }

    /// Stores a memory object of `len` bytes; its bytes.
    fn put_memory(&self, len: usize, seed: u64) -> Vec<u8> {
        let data = seeded_bytes(len, seed);
        self.server.put("snaps", "vm.mem", data.clone()).unwrap();
        data
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Starts `herdless-uffd` on `URL` with 64 KiB chunks and `args`.
    fn start(&self, sock: &str, args: &[&str]) -> Handler {
        let mut all = vec!["--chunk-size", "64K"];
        all.extend_from_slice(args);
        start(&self.path(sock), Path::new(URL), &all)
    }
}

fn no_secret(texts: &[&str]) {
    for t in texts {
        assert!(!t.contains(SECRET), "a credential was printed: {t}");
    }
}

#[test]
fn every_byte_of_an_s3_snapshot_is_served_and_its_discarded_ranges_read_zeros() {
    let Some(w) = World::new("bytes") else { return };
    let sizes = [96 * PAGE, 64 * PAGE];
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let data = w.put_memory(sizes.iter().sum(), 1);
    let (stats, cache) = (w.path("stats.json"), w.path("cache"));
    let handler = w.start(
        "sock",
        &[
            "--handlers",
            "2",
            "--fault-around",
            "64K",
            "--cache-dir",
            cache.to_str().unwrap(),
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    mem.check_against(&data, 4, &|_| false).unwrap();
    let r = mem.regions().to_vec();
    let discarded = [(r[0].base + 10 * PAGE, 7 * PAGE), (r[1].base, 3 * PAGE)];
    for (addr, len) in discarded {
        mem.discard(addr, len).unwrap();
    }
    let zero = |a: usize| discarded.iter().any(|&(s, l)| a >= s && a < s + l);
    mem.check_against(&data, 3, &zero).unwrap();
    drop(conn);
    let (out, err) = handler.finish_ok();
    assert!(out.contains("object: 10 fetches"), "{out}");
    let j = read_json(&stats);
    assert_eq!(j["pages_copied"].as_u64(), Some(160), "{j}");
    assert_eq!(j["zero_pages"].as_u64(), Some(10), "{j}");
    assert_eq!(j["object"]["fetches"].as_u64(), Some(10), "{j}");
    assert_eq!(j["object"]["chunks_failed"].as_u64(), Some(0), "{j}");
    let gets = w.server.gets_of("snaps", "vm.mem");
    assert_eq!(gets.len(), 10, "{gets:?}");
    assert!(gets.values().all(|&n| n == 1), "each chunk once: {gets:?}");
    no_secret(&[&out, &err, &j.to_string()]);
}

#[test]
fn record_then_prefetch_through_s3_installs_the_working_set_before_it_is_touched() {
    let Some(w) = World::new("record-prefetch") else {
        return;
    };
    let sizes = [128 * PAGE];
    let data = w.put_memory(sizes[0], 2);
    let ws: Vec<usize> = [5, 6, 7, 40, 2, 3, 100, 101, 102, 103, 60, 127, 61].to_vec();
    let trace = "s3://snaps/ws.trace";

    // 1. Record, the trace written to the store.
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let handler = w.start("sock1", &["--record", trace, "--no-cache"]);
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    let mut buf = vec![0u8; PAGE];
    for &p in &ws {
        mem.read(base + p * PAGE, &mut buf).unwrap();
        assert!(buf == data[p * PAGE..(p + 1) * PAGE], "page {p}");
    }
    drop(conn);
    handler.finish_ok();
    let stored = std::fs::read_to_string(w.server.root().join("snaps/ws.trace")).unwrap();
    let recorded = herdless_pager::restore::Trace::parse(&stored, Path::new(trace)).unwrap();
    assert_eq!(recorded.pages(), ws.len() as u64, "{stored}");
    drop(mem);

    // 2. Prefetch from the stored trace, into a fresh restore with a cold
    // cache: the working set is installed without a fault.
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let stats = w.path("stats.json");
    w.server.reset_counts();
    let handler = w.start(
        "sock2",
        &[
            "--prefetch",
            trace,
            // From the memory's chunks (`restore_pack.rs`: from the pack
            // the record wrote beside the trace).
            "--no-pack",
            "--no-cache",
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    for &p in &ws {
        wait_until("the working set is prefetched", || {
            resident(base + p * PAGE, PAGE)
        });
    }
    for &p in &ws {
        mem.read(base + p * PAGE, &mut buf).unwrap();
        assert!(buf == data[p * PAGE..(p + 1) * PAGE], "page {p}");
    }
    assert!(
        !resident(base + 64 * PAGE, PAGE),
        "only the trace is installed"
    );
    drop(conn);
    handler.finish_ok();
    let j = read_json(&stats);
    assert_eq!(j["faults"].as_u64(), Some(0), "{j}");
    assert_eq!(j["pages_prefetched"].as_u64(), Some(ws.len() as u64), "{j}");
    // The trace's pages lie in chunks 0 and 1 (64 KiB = 16 pages): only
    // those are fetched, by the prefetch.
    let gets = w.server.gets_of("snaps", "vm.mem");
    let mut firsts: Vec<u64> = gets.keys().copied().collect();
    firsts.sort_unstable();
    let want: Vec<u64> = [0, 2, 3, 6, 7].iter().map(|c| c * CHUNK as u64).collect();
    assert_eq!(firsts, want, "the chunks holding the trace's pages");
}

#[test]
fn four_restores_at_once_fetch_each_chunk_once_through_the_host_cache() {
    let Some(w) = World::new("four") else { return };
    let len = 48 * PAGE;
    let data = w.put_memory(len, 3);
    let cache = w.path("cache");
    let mut mems = Vec::new();
    for _ in 0..4 {
        let Some(m) = guest_memory(&[len]) else {
            return;
        };
        mems.push(m);
    }
    let handlers: Vec<Handler> = (0..4)
        .map(|i| {
            let stats = w.path(&format!("stats{i}.json"));
            w.start(
                &format!("sock{i}"),
                &[
                    "--cache-dir",
                    cache.to_str().unwrap(),
                    "--handlers",
                    "2",
                    "--stats-json",
                    stats.to_str().unwrap(),
                ],
            )
        })
        .collect();
    let conns: Vec<_> = mems
        .iter()
        .zip(&handlers)
        .map(|(m, h)| m.handoff(&h.socket).unwrap())
        .collect();
    std::thread::scope(|s| {
        for m in &mems {
            let data = &data;
            s.spawn(move || m.check_against(data, 2, &|_| false).unwrap());
        }
    });
    drop(conns);
    let chunks = (len / CHUNK) as u64;
    let (mut fetched, mut host) = (0, 0);
    for (i, h) in handlers.into_iter().enumerate() {
        h.finish_ok();
        let j = read_json(&w.path(&format!("stats{i}.json")));
        let (f, hh) = (
            j["object"]["fetches"].as_u64().unwrap(),
            j["object"]["host_hits"].as_u64().unwrap(),
        );
        assert_eq!(f + hh, chunks, "restore {i} got every chunk once: {j}");
        fetched += f;
        host += hh;
    }
    let gets = w.server.gets_of("snaps", "vm.mem");
    assert_eq!(gets.len() as u64, chunks, "{gets:?}");
    assert!(
        gets.values().all(|&n| n == 1),
        "each chunk fetched once on the host: {gets:?}"
    );
    assert_eq!((fetched, host), (chunks, 3 * chunks));
}

#[test]
fn a_failing_get_is_retried_and_one_that_keeps_failing_poisons_its_pages() {
    let Some(w) = World::new("failing") else {
        return;
    };
    let len = 8 * CHUNK;
    let data = w.put_memory(len, 4);
    let Some(mem) = full_guest_memory(&[len]) else {
        return;
    };
    let stats = w.path("stats.json");
    let handler = w.start(
        "sock",
        &[
            "--no-cache",
            "--handlers",
            "2",
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    // Two GETs fail, then the chunk is served.
    w.server.fail_next_gets(2);
    let mut buf = vec![0u8; PAGE];
    mem.read(base + PAGE, &mut buf).unwrap();
    assert!(buf == data[PAGE..2 * PAGE]);
    // Every GET fails from now on: chunk 6's pages are poisoned (EFAULT
    // to the kernel's read, SIGBUS to a vCPU; zeros without
    // UFFDIO_POISON), never a hang, never wrong bytes.
    w.server.fail_gets_of("snaps", "vm.mem", true);
    match mem.kernel_read(base + 6 * CHUNK + 3 * PAGE, PAGE) {
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "{e}"),
        Ok(v) => assert!(v.iter().all(|&b| b == 0)),
    }
    // Chunk 0, already here, still serves.
    mem.read(base + 5 * PAGE, &mut buf).unwrap();
    assert!(buf == data[5 * PAGE..6 * PAGE]);
    drop(conn);
    let (status, out, err) = handler.finish();
    assert_eq!(
        status.code(),
        Some(3),
        "served, some pages poisoned: {out}\n{err}"
    );
    assert!(err.contains("chunk 6 of s3://snaps/vm.mem"), "{err}");
    let j = read_json(&stats);
    assert_eq!(j["object"]["fetch_retries"].as_u64(), Some(2 + 4), "{j}");
    assert_eq!(j["object"]["chunks_failed"].as_u64(), Some(1), "{j}");
    no_secret(&[&out, &err, &j.to_string()]);
}

#[test]
fn a_slow_get_holds_only_the_faults_on_its_own_chunk() {
    let Some(w) = World::new("slow") else { return };
    let len = 4 * CHUNK;
    let data = w.put_memory(len, 5);
    let Some(mem) = guest_memory(&[len]) else {
        return;
    };
    let handler = w.start("sock", &["--no-cache", "--handlers", "2"]);
    w.server.hold_gets("snaps", "vm.mem", 0);
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    std::thread::scope(|s| {
        let slow = s.spawn(|| {
            let mut buf = vec![0u8; PAGE];
            mem.read(base + 2 * PAGE, &mut buf).unwrap();
            buf
        });
        wait_until("chunk 0's GET reaches the server", || {
            w.server.gets_of("snaps", "vm.mem").get(&0) == Some(&1)
        });
        // Chunk 0's GET is held: a fault on chunk 3 is served meanwhile.
        let mut buf = vec![0u8; PAGE];
        mem.read(base + 3 * CHUNK, &mut buf).unwrap();
        assert!(buf == data[3 * CHUNK..3 * CHUNK + PAGE]);
        assert!(
            !slow.is_finished(),
            "the fault on the held chunk still waits"
        );
        w.server.release_gets("snaps", "vm.mem", 0);
        let got = slow.join().unwrap();
        assert!(got == data[2 * PAGE..3 * PAGE]);
    });
    drop(conn);
    handler.finish_ok();
}

#[test]
fn an_object_replaced_mid_restore_is_never_mixed_in() {
    let Some(w) = World::new("replaced") else {
        return;
    };
    let len = 4 * CHUNK;
    let data = w.put_memory(len, 6);
    let Some(mem) = full_guest_memory(&[len]) else {
        return;
    };
    let handler = w.start("sock", &["--cache-dir", w.path("cache").to_str().unwrap()]);
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    let mut buf = vec![0u8; PAGE];
    mem.read(base, &mut buf).unwrap();
    assert!(buf == data[..PAGE]);
    w.server
        .put("snaps", "vm.mem", seeded_bytes(len, 7))
        .unwrap();
    // Chunk 2 was never read: it would be the new object's. Poisoned.
    match mem.kernel_read(base + 2 * CHUNK, PAGE) {
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "{e}"),
        Ok(v) => assert!(v.iter().all(|&b| b == 0), "never the new object's bytes"),
    }
    // Chunk 0's pages, read before the change, are the old object's.
    mem.read(base + 7 * PAGE, &mut buf).unwrap();
    assert!(buf == data[7 * PAGE..8 * PAGE]);
    drop(conn);
    let (status, out, err) = handler.finish();
    assert_eq!(status.code(), Some(3), "{out}\n{err}");
    assert!(err.contains("changed"), "{err}");
}

#[test]
fn a_missing_object_or_bad_credentials_are_refused_before_the_handler_listens() {
    let Some(w) = World::new("refused") else {
        return;
    };
    w.put_memory(4 * PAGE, 8);
    let missing = start(&w.path("sock1"), Path::new("s3://snaps/nope.mem"), &[]);
    let (status, out, err) = missing.finish();
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    // Refused before it listened: no VMM can have connected, so no note
    // tells the user to stop one.
    assert!(
        err.contains("no such object")
            && !err.contains("listening")
            && !err.contains("no page-fault handler"),
        "{err}"
    );
    assert!(!w.path("sock1").exists(), "nothing to connect to");

    // An option that can never work is a usage error (exit 2), said before
    // any request.
    let odd_chunk = start(&w.path("sock3"), Path::new(URL), &["--chunk-size", "5000"]);
    let (status, out, err) = odd_chunk.finish();
    assert_eq!(status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("chunk size 5000 must be a multiple of the page size"),
        "{err}"
    );

    // SAFETY: every test of this binary that reads or changes the
    // environment holds `ENV`, and no other thread of the process reads it.
    unsafe { std::env::set_var("AWS_SECRET_ACCESS_KEY", "wrong-secret-of-the-restore-test") };
    let denied = w.start("sock2", &[]);
    let (status, out, err) = denied.finish();
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("access refused")
            && !err.contains("listening")
            && !err.contains("no page-fault handler"),
        "{err}"
    );
    assert!(!w.path("sock2").exists());
    assert!(!err.contains("wrong-secret-of-the-restore-test"), "{err}");
    no_secret(&[&out, &err]);
}
