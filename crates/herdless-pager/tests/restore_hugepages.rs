//! `herdless-uffd` serving guest memory of 2 MiB hugetlbfs pages (issue 22
//! §2), for a client playing Firecracker with `"huge_pages": "2M"`
//! (`MAP_HUGETLB` regions, `"page_size": 2097152`): every byte, one
//! `UFFDIO_COPY` of a whole page per fault; balloon discards reading zeros
//! page by page; working-set record and prefetch in 2 MiB units; 4 KiB and
//! 2 MiB regions in one handshake; a 4 KiB trace served into 2 MiB pages.
//! Each test reserves the hugepages it needs (as root, raising
//! `vm.nr_hugepages` and giving them back) or skips with the reason.

mod restore_support;

use herdless_pager::restore::{Run, Trace};
use herdless_pager::vmm::{GuestMemory, HUGE_PAGE};
use restore_support::*;

const H: usize = HUGE_PAGE;

/// One page of each 2 MiB page of every hugepage region, then the rest,
/// all byte-checked.
#[test]
fn a_hugepage_region_is_served_every_byte_one_whole_page_per_fault() {
    let Some((_pool, mem)) = huge_guest_memory(&[(4 * H, H)]) else {
        return;
    };
    let dir = test_dir("huge-every-byte");
    let (memory, file) = memory_file(&dir, 4 * H, 31);
    let stats = dir.join("stats.json");
    let handler = start(
        &dir.join("sock"),
        &memory,
        &[
            "--handlers",
            "2",
            "--fault-around",
            "64K",
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    mem.check_against(&file, 3, &|_| false).unwrap();
    drop(conn);
    let (_, err) = handler.finish_ok();
    // Fault-around has no meaning there: said once, not refused.
    assert_eq!(
        err.matches("--fault-around applies to the 4096-byte pages only")
            .count(),
        1,
        "{err}"
    );
    let json = read_json(&stats);
    assert_eq!(json["pages_copied"].as_u64(), Some(4), "{json}");
    assert_eq!(json["bytes_copied"].as_u64(), Some(4 * H as u64), "{json}");
    assert_eq!(json["pages_fault_around"].as_u64(), Some(0), "{json}");
    assert_eq!(json["page_sizes"], serde_json::json!([H]), "{json}");
    assert_eq!(
        json["pages_on_demand"].as_u64(),
        Some(4),
        "one fault served per 2 MiB page: {json}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The balloon on hugepage memory: a discard takes whole 2 MiB pages; they
/// read zeros after (filled from a zero buffer: `UFFDIO_ZEROPAGE` does not
/// serve hugetlbfs), touched or not before, and the rest still reads the
/// file.
#[test]
fn a_discarded_hugepage_reads_zeros_whether_or_not_it_was_filled_before() {
    let Some((_pool, mem)) = huge_guest_memory(&[(6 * H, H)]) else {
        return;
    };
    let dir = test_dir("huge-discard");
    let (memory, file) = memory_file(&dir, 6 * H, 32);
    let stats = dir.join("stats.json");
    let handler = start(
        &dir.join("sock"),
        &memory,
        &["--stats-json", stats.to_str().unwrap()],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    let mut buf = vec![0u8; PAGE];
    // Page 1 filled, then discarded; page 4 discarded before any touch.
    mem.read(base + H + 5 * PAGE, &mut buf).unwrap();
    assert!(buf == file[H + 5 * PAGE..H + 6 * PAGE]);
    mem.discard(base + H, H).unwrap();
    mem.discard(base + 4 * H, H).unwrap();
    let zero =
        |a: usize| (base + H..base + 2 * H).contains(&a) || a >= base + 4 * H && a < base + 5 * H;
    mem.check_against(&file, 2, &zero).unwrap();
    // Again after it was served zeros: still zeros (never the file).
    mem.discard(base + H, H).unwrap();
    mem.check_against(&file, 2, &zero).unwrap();
    drop(conn);
    handler.finish_ok();
    let json = read_json(&stats);
    assert_eq!(json["pages_discarded"].as_u64(), Some(3), "{json}");
    assert_eq!(json["zero_pages"].as_u64(), Some(3), "{json}");
    assert_eq!(json["pages_copied"].as_u64(), Some(5), "{json}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Pages of 2 MiB touched in this order (page numbers in the region).
const HUGE_WS: [usize; 4] = [5, 1, 2, 7];

fn touch_each(mem: &GuestMemory, file: &[u8], region: usize, pages: &[usize], page: usize) {
    let r = mem.regions()[region];
    // The second half of the page (of its first 4 KiB for a 2 MiB page):
    // the fault is for the whole page.
    let mut buf = vec![0u8; PAGE / 2];
    for &p in pages {
        let at = p * page + PAGE / 2;
        mem.read(r.base + at, &mut buf).unwrap();
        let off = r.offset as usize + at;
        assert!(buf == file[off..off + PAGE / 2], "region {region} page {p}");
    }
}

#[test]
fn record_then_prefetch_works_in_2m_pages() {
    let dir = test_dir("huge-record");
    let (memory, file) = memory_file(&dir, 8 * H, 33);
    let trace = dir.join("ws.trace");
    {
        let Some((_pool, mem)) = huge_guest_memory(&[(8 * H, H)]) else {
            return;
        };
        let handler = start(
            &dir.join("sock"),
            &memory,
            &["--record", trace.to_str().unwrap()],
        );
        let conn = mem.handoff(&handler.socket).unwrap();
        touch_each(&mem, &file, 0, &HUGE_WS, H);
        drop(conn);
        handler.finish_ok();
    }
    let recorded = Trace::read(&trace).unwrap();
    let want = Trace::from_offsets(H as u64, file.len() as u64, HUGE_WS.map(|p| (p * H) as u64));
    assert_eq!(recorded, want, "2 MiB pages in first-touch order");
    assert!(recorded.runs.contains(&Run {
        offset: H as u64,
        pages: 2,
        page_size: H as u64
    }));

    let Some((_pool, mem)) = huge_guest_memory(&[(8 * H, H)]) else {
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
    let base = mem.regions()[0].base;
    for p in HUGE_WS {
        wait_until("the working set is prefetched", || {
            resident(base + p * H, H)
        });
    }
    assert!(
        !resident(base + 3 * H, PAGE),
        "only the trace is prefetched"
    );
    touch_each(&mem, &file, 0, &HUGE_WS, H);
    drop(conn);
    handler.finish_ok();
    let json = read_json(&stats);
    assert_eq!(json["pages_prefetched"].as_u64(), Some(4), "{json}");
    assert_eq!(json["faults"].as_u64(), Some(0), "{json}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A 2 MiB region and a 4 KiB one in one handshake (hugepage guest RAM
/// beside ordinary memory): every byte, discards in both, a trace that
/// records each in its own pages, and a prefetch of it.
#[test]
fn mixed_4k_and_2m_regions_in_one_handshake_are_each_served_in_their_pages() {
    let regions = [(4 * H, H), (64 * PAGE, PAGE)];
    let len = 4 * H + 64 * PAGE;
    let dir = test_dir("huge-mixed");
    let (memory, file) = memory_file(&dir, len, 34);
    let trace = dir.join("ws.trace");
    let stats = dir.join("stats.json");
    {
        let Some((_pool, mem)) = huge_guest_memory(&regions) else {
            return;
        };
        let handler = start(
            &dir.join("sock"),
            &memory,
            &[
                "--record",
                trace.to_str().unwrap(),
                "--handlers",
                "2",
                "--stats-json",
                stats.to_str().unwrap(),
            ],
        );
        let conn = mem.handoff(&handler.socket).unwrap();
        touch_each(&mem, &file, 1, &[3, 4], PAGE);
        touch_each(&mem, &file, 0, &[2], H);
        touch_each(&mem, &file, 1, &[40], PAGE);
        touch_each(&mem, &file, 0, &[0], H);
        mem.check_against(&file, 3, &|_| false).unwrap();
        let r = mem.regions().to_vec();
        let discarded = [(r[0].base + 3 * H, H), (r[1].base + 8 * PAGE, 2 * PAGE)];
        for (a, l) in discarded {
            mem.discard(a, l).unwrap();
        }
        let zero = |a: usize| discarded.iter().any(|&(s, l)| a >= s && a < s + l);
        mem.check_against(&file, 2, &zero).unwrap();
        drop(conn);
        handler.finish_ok();
    }
    let json = read_json(&stats);
    assert_eq!(json["pages_copied"].as_u64(), Some(4 + 64), "{json}");
    assert_eq!(
        json["bytes_copied"].as_u64(),
        Some(len as u64),
        "every byte copied once: {json}"
    );
    assert_eq!(json["page_sizes"], serde_json::json!([PAGE, H]), "{json}");
    assert_eq!(json["zero_pages"].as_u64(), Some(1 + 2), "{json}");
    let recorded = Trace::read(&trace).unwrap();
    let hb = 4 * H as u64; // where the 4 KiB region's bytes start in the file
    let p4 = |p: u64| (hb + p * PAGE as u64, PAGE as u64);
    let first = [
        p4(3),
        p4(4),
        (2 * H as u64, H as u64),
        p4(40),
        (0, H as u64),
    ];
    let pages: Vec<(u64, u64)> = recorded
        .runs
        .iter()
        .flat_map(|r| (0..r.pages).map(move |k| (r.offset + k * r.page_size, r.page_size)))
        .collect();
    assert_eq!(
        pages[..first.len()],
        first[..],
        "first-touch order, each region in its own pages: {recorded:?}"
    );
    assert_eq!(pages.len(), 4 + 64, "every page, once: {recorded:?}");

    // Prefetched into a fresh restore: the trace's pages are in, in both
    // page sizes, before anything is touched.
    let Some((_pool, mem)) = huge_guest_memory(&regions) else {
        return;
    };
    let handler = start(
        &dir.join("sock2"),
        &memory,
        &["--prefetch", trace.to_str().unwrap()],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let r = mem.regions().to_vec();
    for (a, l) in [
        (r[0].base + 2 * H, H),
        (r[0].base, H),
        (r[1].base + 3 * PAGE, 2 * PAGE),
        (r[1].base + 40 * PAGE, PAGE),
    ] {
        wait_until("the mixed working set is prefetched", || resident(a, l));
    }
    mem.check_against(&file, 2, &|_| false).unwrap();
    drop(conn);
    handler.finish_ok();
    let _ = std::fs::remove_dir_all(dir);
}

/// A snapshot taken with 4 KiB pages restored into 2 MiB pages (Firecracker
/// PR #6064): its 4 KiB trace prefetches the 2 MiB pages holding its pages;
/// and copying everything up front works in 2 MiB pages too.
#[test]
fn a_4k_trace_prefetches_the_2m_pages_holding_it_and_copy_all_copies_whole_pages() {
    let Some((pool, mem)) = huge_guest_memory(&[(4 * H, H)]) else {
        return;
    };
    let dir = test_dir("huge-4k-trace");
    let (memory, file) = memory_file(&dir, 4 * H, 35);
    let trace = dir.join("4k.trace");
    let t = Trace::from_offsets(
        PAGE as u64,
        file.len() as u64,
        [H + 3 * PAGE, H + 4 * PAGE, 3 * H + 100 * PAGE].map(|o| o as u64),
    );
    std::fs::write(&trace, t.to_text()).unwrap();
    let stats = dir.join("stats.json");
    let handler = start(
        &dir.join("sock"),
        &memory,
        &[
            "--prefetch",
            trace.to_str().unwrap(),
            "--stats-json",
            stats.to_str().unwrap(),
        ],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    for p in [1, 3] {
        wait_until("the 2 MiB pages holding the trace", || {
            resident(base + p * H, H)
        });
    }
    mem.check_against(&file, 2, &|_| false).unwrap();
    drop(conn);
    handler.finish_ok();
    assert_eq!(read_json(&stats)["pages_prefetched"].as_u64(), Some(2));
    drop(mem);
    drop(pool);

    let Some((_pool, mem)) = huge_guest_memory(&[(4 * H, H)]) else {
        return;
    };
    let handler = start(
        &dir.join("sock2"),
        &memory,
        &["--copy-all", "--stats-json", stats.to_str().unwrap()],
    );
    let conn = mem.handoff(&handler.socket).unwrap();
    let r = mem.regions()[0];
    let mut buf = vec![0u8; PAGE];
    // The last page first: answered at once (by a handler, or the copy
    // that got there); the copy then brings in the rest untouched.
    mem.read(r.base + r.size - PAGE, &mut buf).unwrap();
    wait_until("the copy installed every page", || resident(r.base, r.size));
    mem.check_against(&file, 2, &|_| false).unwrap();
    drop(conn);
    handler.finish_ok();
    let json = read_json(&stats);
    // Whole 2 MiB pages, each filled once: by the copy or by that fault.
    let prefetched = json["pages_prefetched"].as_u64().unwrap();
    let on_demand = json["pages_on_demand"].as_u64().unwrap();
    assert_eq!(prefetched + on_demand, 4, "{json}");
    assert!(prefetched >= 3, "{json}");
    let _ = std::fs::remove_dir_all(dir);
}
