//! `ObjectSource` against a real S3-protocol server in this process
//! (`herdless-s3d`: s3s over s3s-fs on 127.0.0.1): every byte read back,
//! one GET per chunk however many threads read it, the host cache shared
//! by several sources (as by several processes), a failing GET retried, a
//! failing chunk failing its reads (never a hang), an object replaced
//! while it is read refused, a missing object and bad credentials refused
//! at open, and no credential in any message.

#![cfg(feature = "object-store")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herdless_pager::object::{ObjectError, ObjectOptions, ObjectSource};
use herdless_pager::PageSource;
use s3::{seeded_bytes, S3World, ENV};

#[path = "common/s3.rs"]
mod s3;
#[path = "common/skip.rs"]
mod skip;

const SECRET: &str = "s3cr3t-of-the-object-tests";
const CHUNK: u64 = 64 << 10;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("herdless-object-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A server with bucket `snaps`, its environment set; `None` after printing
/// why none could start.
fn world(name: &str) -> Option<S3World> {
    S3World::start(dir(name), "AKOBJECTTEST", SECRET)
}

fn opts(w: &S3World, cache: Option<&str>) -> ObjectOptions {
    ObjectOptions {
        chunk_size: CHUNK,
        cache_dir: cache.map(|c| w.dir.join(c)),
        retry_backoff: Duration::from_millis(1),
        ..ObjectOptions::default()
    }
}

#[test]
fn every_byte_reads_back_and_each_chunk_is_fetched_once_by_many_threads() {
    let Some(w) = world("bytes") else { return };
    let len = 10 * CHUNK as usize + 12_345;
    let data = seeded_bytes(len, 1);
    w.server.put("snaps", "vm.mem", data.clone()).unwrap();
    let src = ObjectSource::open("s3://snaps/vm.mem", &opts(&w, None)).unwrap();
    assert_eq!(src.len(), len as u64);
    let src = Arc::new(src);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (src, data) = (Arc::clone(&src), data.clone());
            std::thread::spawn(move || {
                // Odd-sized reads crossing chunk edges, from every thread.
                let mut at = t * 777;
                while at < len {
                    let n = 5000.min(len - at);
                    let mut buf = vec![0u8; n];
                    src.read_at(at as u64, &mut buf).unwrap();
                    assert!(buf == data[at..at + n], "bytes at {at}");
                    at += n * 3 + 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut all = vec![0u8; len];
    src.read_at(0, &mut all).unwrap();
    assert!(all == data);
    let gets = w.server.gets_of("snaps", "vm.mem");
    assert_eq!(gets.len(), 11, "{gets:?}");
    assert!(
        gets.values().all(|&n| n == 1),
        "one GET per chunk: {gets:?}"
    );
    let s = src.stats();
    assert_eq!((s.fetches, s.fetched_bytes), (11, len as u64), "{s:?}");
    assert!(s.process_hits > 0 && s.fetch_latency.count == 11, "{s:?}");
    // What the source has without waiting: everything now.
    let mut buf = vec![0u8; 3 * CHUNK as usize];
    assert_eq!(src.read_nowait(CHUNK, &mut buf).unwrap(), buf.len());
    let mut past = vec![0u8; 2];
    assert!(
        src.read_at(len as u64 - 1, &mut past).is_err(),
        "past the end"
    );
}

#[test]
fn sources_sharing_a_host_cache_fetch_each_chunk_once() {
    let Some(w) = world("host") else { return };
    let len = 8 * CHUNK as usize;
    let data = seeded_bytes(len, 2);
    w.server.put("snaps", "vm.mem", data.clone()).unwrap();
    // Four sources (as four processes: each its own chunks, one cache).
    let srcs: Vec<_> = (0..4)
        .map(|_| ObjectSource::open("s3://snaps/vm.mem", &opts(&w, Some("cache"))).unwrap())
        .collect();
    let threads: Vec<_> = srcs
        .iter()
        .cloned()
        .map(|src| {
            let data = data.clone();
            std::thread::spawn(move || {
                src.prefetch([(0, len as u64)]);
                let mut all = vec![0u8; len];
                src.read_at(0, &mut all).unwrap();
                assert!(all == data);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let gets = w.server.gets_of("snaps", "vm.mem");
    assert_eq!(gets.len(), 8, "{gets:?}");
    assert!(
        gets.values().all(|&n| n == 1),
        "each chunk once on the host: {gets:?}"
    );
    let fetched: u64 = srcs.iter().map(|s| s.stats().fetches).sum();
    let host: u64 = srcs.iter().map(|s| s.stats().host_hits).sum();
    assert_eq!((fetched, host), (8, 24), "the others read the host cache");
    // A later restore reads it all from the host cache.
    let later = ObjectSource::open("s3://snaps/vm.mem", &opts(&w, Some("cache"))).unwrap();
    let mut all = vec![0u8; len];
    later.read_at(0, &mut all).unwrap();
    assert!(all == data);
    assert_eq!((later.stats().fetches, later.stats().host_hits), (0, 8));
}

#[test]
fn a_prefetch_goes_on_past_a_chunk_another_source_is_fetching() {
    let Some(w) = world("past") else { return };
    let len = 4 * CHUNK as usize;
    let data = seeded_bytes(len, 9);
    w.server.put("snaps", "vm.mem", data.clone()).unwrap();
    // One fetch at a time each: a prefetch that waited for a chunk locked
    // on the host would fetch nothing else meanwhile.
    let one = ObjectOptions {
        fetch_concurrency: 1,
        ..opts(&w, Some("cache"))
    };
    let a = ObjectSource::open("s3://snaps/vm.mem", &one).unwrap();
    let b = ObjectSource::open("s3://snaps/vm.mem", &one).unwrap();
    w.server.hold_gets("snaps", "vm.mem", 0);
    a.prefetch([(0, CHUNK)]);
    let gets = || w.server.gets_of("snaps", "vm.mem");
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}: {:?}", gets());
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    until("a's GET of chunk 0 arrives (and is held)", &|| {
        gets().get(&0) == Some(&1)
    });
    // Chunk 0 is locked on the host by `a`, its GET held: `b`'s prefetch
    // leaves it to a waiting task and fetches the three others.
    b.prefetch([(0, len as u64)]);
    until("b fetches chunks 1 to 3", &|| {
        (1..4).all(|i| gets().get(&(i * CHUNK)) == Some(&1))
    });
    assert_eq!(gets().get(&0), Some(&1), "chunk 0 not fetched by b");
    w.server.release_gets("snaps", "vm.mem", 0);
    for src in [&a, &b] {
        let mut all = vec![0u8; len];
        src.read_at(0, &mut all).unwrap();
        assert!(all == data);
    }
    assert!(
        gets().values().all(|&n| n == 1),
        "each chunk once: {:?}",
        gets()
    );
    assert_eq!((b.stats().fetches, b.stats().host_hits), (3, 1));
    assert_eq!((a.stats().fetches, a.stats().host_hits), (1, 3));
}

#[test]
fn a_failing_get_is_retried_and_one_that_keeps_failing_fails_its_reads_only() {
    let Some(w) = world("fail") else { return };
    let len = 4 * CHUNK as usize;
    let data = seeded_bytes(len, 3);
    w.server.put("snaps", "vm.mem", data.clone()).unwrap();
    let src = ObjectSource::open("s3://snaps/vm.mem", &opts(&w, None)).unwrap();
    w.server.fail_next_gets(2);
    let mut buf = vec![0u8; 100];
    src.read_at(10, &mut buf).unwrap();
    assert!(buf == data[10..110]);
    assert_eq!(
        w.server.gets_of("snaps", "vm.mem").get(&0),
        Some(&3),
        "two failures, then served"
    );
    let s = src.stats();
    assert_eq!(
        (s.fetch_retries, s.fetch_failures, s.chunks_failed),
        (2, 2, 0),
        "{s:?}"
    );

    w.server.fail_gets_of("snaps", "vm.mem", true);
    let e = src.read_at(CHUNK + 5, &mut buf).unwrap_err();
    assert!(e.to_string().contains("chunk 1"), "{e}");
    assert_eq!(src.stats().chunks_failed, 1);
    assert_eq!(
        w.server.gets_of("snaps", "vm.mem").get(&CHUNK),
        Some(&5),
        "the first GET and four retries"
    );
    // A chunk failed for good stays failed (no new GET), the others serve.
    assert!(src.read_at(CHUNK + 9, &mut buf).is_err());
    assert_eq!(w.server.gets_of("snaps", "vm.mem").get(&CHUNK), Some(&5));
    w.server.fail_gets_of("snaps", "vm.mem", false);
    src.read_at(2 * CHUNK, &mut buf).unwrap();
    assert!(buf == data[2 * CHUNK as usize..2 * CHUNK as usize + 100]);
    assert!(!format!("{e} {:?}", src.stats()).contains(SECRET));
}

#[test]
fn a_slow_get_holds_only_the_reads_of_its_own_chunk() {
    let Some(w) = world("slow") else { return };
    let len = 4 * CHUNK as usize;
    let data = seeded_bytes(len, 4);
    w.server.put("snaps", "vm.mem", data.clone()).unwrap();
    let src = ObjectSource::open("s3://snaps/vm.mem", &opts(&w, None)).unwrap();
    w.server.hold_gets("snaps", "vm.mem", 0);
    let slow = {
        let src = src.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64];
            src.read_at(100, &mut buf).map(|()| buf)
        })
    };
    let arrived = || w.server.gets_of("snaps", "vm.mem").get(&0).copied() == Some(1);
    while !arrived() {
        std::thread::yield_now();
    }
    // Chunk 0's GET is held at the server: chunk 3 is read meanwhile.
    let mut buf = vec![0u8; 64];
    src.read_at(3 * CHUNK + 1, &mut buf).unwrap();
    assert!(buf == data[3 * CHUNK as usize + 1..3 * CHUNK as usize + 65]);
    assert!(!slow.is_finished(), "the held chunk's read still waits");
    w.server.release_gets("snaps", "vm.mem", 0);
    let got = slow.join().unwrap().unwrap();
    assert!(got == data[100..164]);
    assert_eq!(src.stats().chunk_waits, 2);
}

#[test]
fn an_object_replaced_while_it_is_read_fails_the_chunks_read_after() {
    let Some(w) = world("changed") else { return };
    let len = 4 * CHUNK as usize;
    let old = seeded_bytes(len, 5);
    w.server.put("snaps", "vm.mem", old.clone()).unwrap();
    let src = ObjectSource::open("s3://snaps/vm.mem", &opts(&w, Some("cache"))).unwrap();
    let mut buf = vec![0u8; 64];
    src.read_at(0, &mut buf).unwrap();
    assert!(buf == old[..64]);
    w.server
        .put("snaps", "vm.mem", seeded_bytes(len, 6))
        .unwrap();
    let e = src.read_at(2 * CHUNK, &mut buf).unwrap_err();
    assert!(e.to_string().contains("changed"), "{e}");
    // What was read before the change still reads the old bytes.
    src.read_at(0, &mut buf).unwrap();
    assert!(buf == old[..64]);
    // A new source is a new identity: nothing of the old one's cache.
    let new = ObjectSource::open("s3://snaps/vm.mem", &opts(&w, Some("cache"))).unwrap();
    new.read_at(0, &mut buf).unwrap();
    assert!(buf == seeded_bytes(len, 6)[..64]);
    assert_eq!(new.stats().host_hits, 0);
    assert_ne!(new.cache_dir(), src.cache_dir());
}

#[test]
fn a_missing_object_and_bad_credentials_are_refused_at_open_without_the_secret() {
    let Some(w) = world("refused") else { return };
    w.server
        .put("snaps", "vm.mem", seeded_bytes(4096, 7))
        .unwrap();
    let e = ObjectSource::open("s3://snaps/nope.mem", &opts(&w, None)).unwrap_err();
    assert!(matches!(e, ObjectError::NotFound { .. }), "{e}");
    let e = ObjectSource::open("s3://nobucket/vm.mem", &opts(&w, None)).unwrap_err();
    assert!(matches!(e, ObjectError::NotFound { .. }), "{e}");
    // SAFETY: every test of this binary that reads or changes the
    // environment holds `ENV`, and no other thread of the process reads it.
    unsafe { std::env::set_var("AWS_SECRET_ACCESS_KEY", "wrong-secret-of-the-test") };
    let e = ObjectSource::open("s3://snaps/vm.mem", &opts(&w, None)).unwrap_err();
    assert!(matches!(e, ObjectError::Denied { .. }), "{e}");
    assert!(
        !format!("{e} {e:?}").contains("wrong-secret-of-the-test"),
        "{e:?}"
    );
    let e = ObjectSource::open("s3://snaps", &opts(&w, None)).unwrap_err();
    assert!(matches!(e, ObjectError::BadUrl { .. }), "{e}");
}

/// An `https://` object builds the TLS client (rustls with `ring`, the
/// provider installed by the source) and fails to connect to a port where
/// nothing listens: a clear error, never a panic for want of a crypto
/// provider.
#[test]
fn an_https_object_builds_its_tls_client_and_reports_a_refused_connection() {
    // The store reads the environment the other tests set.
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let opts = ObjectOptions {
        retries: 0,
        retry_backoff: Duration::from_millis(1),
        request_timeout: Duration::from_secs(5),
        ..ObjectOptions::default()
    };
    let e = ObjectSource::open("https://127.0.0.1:9/vm.mem", &opts).unwrap_err();
    let message = e.to_string();
    assert!(!message.is_empty(), "{message}");
}
