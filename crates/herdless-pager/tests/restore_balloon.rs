//! `herdless-uffd` and a balloon on a restored VM (issue 22 §4), with the
//! client playing Firecracker (its balloon `MADV_DONTNEED`s guest memory,
//! which raises `REMOVE` events):
//! - a balloon inflating right after the handoff, while `--copy-all` or a
//!   `--prefetch` copies (Firecracker's `fault_all_handler` panics there):
//!   the copy goes on to the end (it reads a pending event itself, or a
//!   handler beside it does, and applies it), nothing discarded comes back, every byte is right;
//! - memory ballooned away and read again is served zeros by the run, one
//!   fault per 2 MiB window instead of one per 4 KiB page.

mod restore_support;

use herdless_pager::restore::Trace;
use herdless_pager::vmm::GuestMemory;
use restore_support::*;

/// Pages discarded by the balloon: 8 of every 128, in 16 ranges per
/// thread, from the end of memory backwards (the copy starts at the
/// front: the two meet while it runs).
fn ballooned(pages: usize) -> impl Fn(usize) -> bool {
    move |p: usize| p < pages && p % 128 >= 40 && p % 128 < 48
}

/// Restores `pages` pages with `args` while two balloon threads discard
/// from the moment of the handoff; then checks that every page not
/// discarded arrives without a fault (the copy went on to the end), that
/// every byte is right, and returns the figures.
fn balloon_during_copy(name: &str, pages: usize, args: &[&str]) -> Option<serde_json::Value> {
    let mem = guest_memory(&[pages * PAGE])?;
    let dir = test_dir(name);
    let (memory, file) = memory_file(&dir, pages * PAGE, 41);
    let stats = dir.join("stats.json");
    let mut all = vec!["--stats-json", stats.to_str().unwrap()];
    all.extend_from_slice(args);
    let handler = start(&dir.join("sock"), &memory, &all);
    let base = mem.regions()[0].base;
    let gone = ballooned(pages);
    let conn = mem.handoff(&handler.socket).unwrap();
    std::thread::scope(|s| {
        for t in 0..2 {
            let mem: &GuestMemory = &mem;
            s.spawn(move || {
                for block in (0..pages / 128).rev().filter(|b| b % 2 == t) {
                    mem.discard(base + (block * 128 + 40) * PAGE, 8 * PAGE)
                        .unwrap();
                }
            });
        }
    });
    // The copy goes on to the end: every page not discarded arrives
    // without anyone touching it (a copy that gave up would leave pages
    // missing here for good, and this would never hold).
    for p in (0..pages).filter(|&p| !gone(p)) {
        wait_until("the copy to go on past the balloon", || {
            resident(base + p * PAGE, PAGE)
        });
    }
    let zero = |a: usize| gone((a - base) / PAGE);
    mem.check_against(&file, 2, &zero).unwrap();
    drop(conn);
    let (out, _) = handler.finish_ok();
    let json = read_json(&stats);
    eprintln!(
        "{name}: {out}\n  eagain_retry {} copier_reads {} prefetch_passes {}",
        json["eagain_retry"], json["copier_reads"], json["prefetch_passes"]
    );
    let _ = std::fs::remove_dir_all(dir);
    Some(json)
}

/// Checks the figures every copy that met the balloon must show.
fn copied_past_the_balloon(json: &serde_json::Value, pages: usize) {
    let kept = (0..pages).filter(|&p| !ballooned(pages)(p)).count() as u64;
    let prefetched = json["pages_prefetched"].as_u64().unwrap();
    // Every page kept was copied by the copier, none on demand (a page
    // copied and then discarded counts too).
    assert!(prefetched >= kept, "{json}");
    assert_eq!(json["pages_on_demand"].as_u64(), Some(0), "{json}");
    assert_eq!(json["pages_copied"].as_u64(), Some(prefetched), "{json}");
    assert_eq!(
        json["pages_discarded"].as_u64(),
        Some(8 * (pages / 128) as u64),
        "{json}"
    );
    assert!(json["prefetch_passes"].as_u64().unwrap() >= 1, "{json}");
}

#[test]
fn a_balloon_inflating_during_copy_all_neither_stops_the_copy_nor_gets_pages_back() {
    let pages = 8192; // 32 MiB: a copy that runs for a while
    for round in 0..2 {
        let Some(json) = balloon_during_copy(&format!("copy-all-{round}"), pages, &["--copy-all"])
        else {
            return;
        };
        copied_past_the_balloon(&json, pages);
    }
}

#[test]
fn a_balloon_inflating_during_a_prefetch_neither_stops_it_nor_gets_pages_back() {
    let pages = 8192;
    let dir = test_dir("balloon-prefetch-trace");
    let trace = dir.join("all.trace");
    let all = Trace::from_offsets(
        PAGE as u64,
        (pages * PAGE) as u64,
        (0..pages).map(|p| (p * PAGE) as u64),
    );
    std::fs::write(&trace, all.to_text()).unwrap();
    for round in 0..2 {
        let Some(json) = balloon_during_copy(
            &format!("prefetch-{round}"),
            pages,
            &[
                "--prefetch",
                trace.to_str().unwrap(),
                "--prefetch-threads",
                "2",
            ],
        ) else {
            return;
        };
        copied_past_the_balloon(&json, pages);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// 8 MiB read, ballooned away, read again by one thread in order: zeros,
/// with one fault per 2 MiB window (the run of discarded pages in it
/// mapped at once), where one per 4 KiB page was before.
#[test]
fn ballooned_memory_read_again_is_served_zeros_one_fault_per_2m_window() {
    let pages = 4096; // 16 MiB, of which 8 MiB are ballooned
    let Some(mem) = guest_memory(&[pages * PAGE]) else {
        return;
    };
    let dir = test_dir("balloon-reread");
    let (memory, file) = memory_file(&dir, pages * PAGE, 42);
    let stats = dir.join("stats.json");
    let handler = start(
        &dir.join("sock"),
        &memory,
        &["--copy-all", "--stats-json", stats.to_str().unwrap()],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    wait_until("everything copied", || resident(base, pages * PAGE));
    mem.check_against(&file, 1, &|_| false).unwrap();
    // The balloon takes 8 MiB from 4 MiB on (region-aligned windows).
    let (from, len) = (base + (4 << 20), 8 << 20);
    mem.discard(from, len).unwrap();
    let mut buf = vec![0u8; PAGE];
    for a in (from..from + len).step_by(PAGE) {
        mem.read(a, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "{a:#x}");
    }
    // The rest still reads the file; the ballooned range zeros.
    mem.check_against(&file, 2, &|a| a >= from && a < from + len)
        .unwrap();
    drop(conn);
    handler.finish_ok();
    let json = read_json(&stats);
    assert_eq!(json["zero_pages"].as_u64(), Some(2048), "{json}");
    assert_eq!(
        json["faults"].as_u64(),
        Some(4),
        "one fault per 2 MiB window: {json}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
