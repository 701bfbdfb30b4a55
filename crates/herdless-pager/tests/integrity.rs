//! Every byte read equals the source (zeros past its end), across faulting
//! thread counts, both handler modes, every window size, sequential and
//! random order, for memory and file sources; exact fault counts.

mod common;

use std::thread;

use common::*;
use herdless_pager::{FileSource, HandlerMode, MemSource, Pager};

const REGION: usize = 512 * PAGE; // 2 MiB
/// Not a page multiple, and shorter than the region by a few pages.
const SOURCE: usize = REGION - 5 * PAGE - 123;

fn read_all(pager: &Pager, src: &[u8], threads: usize, random: bool, seed: u64) {
    let pages = REGION / PAGE;
    thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut order: Vec<usize> = (0..pages).filter(|p| p % threads == t).collect();
                if random {
                    Rng(seed + t as u64 + 1).shuffle(&mut order);
                }
                for p in order {
                    check_page(pager, p, |i| expected(src, i));
                }
            });
        }
    });
}

#[test]
fn every_byte_matches_the_source_for_every_window_mode_thread_count_and_order() {
    let src = pattern(SOURCE, 1);
    for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
        for window in [PAGE, 4 * PAGE, 16 * PAGE, 64 * PAGE] {
            for threads in [1, 4] {
                for random in [false, true] {
                    let Some(pager) = build(
                        Pager::builder(REGION)
                            .source(MemSource::new(src.clone()))
                            .fault_around(window)
                            .handlers(2)
                            .mode(mode),
                    ) else {
                        return;
                    };
                    read_all(&pager, &src, threads, random, window as u64);
                    pager.settle();
                    let st = pager.stats();
                    let source_pages = SOURCE.div_ceil(PAGE) as u64;
                    assert_eq!(
                        st.pages_installed(),
                        source_pages,
                        "each source page filled exactly once ({mode:?}, {window}, {threads}, {random}): {st:?}"
                    );
                    assert!(pager.take_errors().is_empty());
                }
            }
        }
    }
}

#[test]
fn sequential_single_thread_fault_counts_are_exact() {
    let src = pattern(REGION, 2);
    for window in [PAGE, 16 * PAGE] {
        let Some(pager) = build(
            Pager::builder(REGION)
                .source(MemSource::new(src.clone()))
                .fault_around(window),
        ) else {
            return;
        };
        read_all(&pager, &src, 1, false, 0);
        pager.settle();
        let st = pager.stats();
        let pages = (REGION / PAGE) as u64;
        let per_fault = (window / PAGE) as u64;
        assert_eq!(st.faults, pages / per_fault, "{st:?}");
        assert_eq!(st.pages_on_demand, pages / per_fault);
        assert_eq!(st.pages_fault_around, pages - pages / per_fault);
        assert_eq!(st.pages_per_fault(), per_fault as f64);
        assert_eq!(st.per_handler_faults, vec![pages / per_fault]);
        assert_eq!(st.latency.count, st.faults);
        // The faulting page and its window are one copy: the reader is
        // woken once the window is in and never faults on a neighbour
        // still being filled.
        assert_eq!(st.duplicate_faults, 0, "{st:?}");
    }
}

#[test]
fn a_sequential_reader_of_a_mapped_file_faults_once_per_window() {
    let dir = scratch_dir("file-window");
    let path = dir.join("source");
    let src = pattern(REGION, 5);
    std::fs::write(&path, &src).unwrap(); // just written: in the page cache
    let Some(pager) = build(
        Pager::builder(REGION)
            .source(FileSource::open(&path).unwrap())
            .fault_around(16 * PAGE),
    ) else {
        return;
    };
    read_all(&pager, &src, 1, false, 0);
    pager.settle();
    let st = pager.stats();
    let pages = (REGION / PAGE) as u64;
    assert_eq!(st.faults, pages / 16, "{st:?}");
    assert_eq!(st.duplicate_faults, 0, "{st:?}");
    assert_eq!(st.pages_fault_around, pages - pages / 16, "{st:?}");
    drop(pager);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_source_in_the_page_cache_is_served_with_fault_around_and_zeros_past_its_end() {
    let dir = scratch_dir("file");
    let path = dir.join("source");
    let src = pattern(SOURCE, 3);
    std::fs::write(&path, &src).unwrap(); // just written: in the page cache
    for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
        let Some(pager) = build(
            Pager::builder(REGION)
                .source(FileSource::open(&path).unwrap())
                .fault_around(16 * PAGE)
                .mode(mode),
        ) else {
            break;
        };
        read_all(&pager, &src, 2, true, 9);
        pager.settle();
        let st = pager.stats();
        assert_eq!(st.pages_installed(), SOURCE.div_ceil(PAGE) as u64, "{st:?}");
        assert!(st.pages_fault_around > 0, "{st:?}");
        assert!(st.zero_pages >= 4, "the pages past the source: {st:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_zero_source_reads_zeros() {
    let Some(pager) = build(Pager::builder(64 * PAGE)) else {
        return;
    };
    for p in 0..64 {
        check_page(&pager, p, |_| 0);
    }
}
