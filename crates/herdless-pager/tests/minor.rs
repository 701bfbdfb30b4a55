//! Minor-fault mode: a memfd source mapped shared, faults answered with
//! `UFFDIO_CONTINUE` over the window.

mod common;

use std::io::Write;

use common::*;
use herdless_pager::{FileSource, HandlerMode, Pager};

fn memfd_source(bytes: &[u8]) -> FileSource {
    let fd = rustix::fs::memfd_create("herdless-minor", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).unwrap();
    FileSource::from_file(file, "memfd").unwrap()
}

#[test]
fn minor_mode_maps_the_shared_memory_with_fault_around_and_discards_reread_it() {
    let len = 256 * PAGE;
    let src = pattern(len, 10);
    for mode in [HandlerMode::BlockingRead, HandlerMode::Poll] {
        let Some(pager) = build(
            Pager::builder(len)
                .source(memfd_source(&src))
                .minor_faults(true)
                .fault_around(16 * PAGE)
                .handlers(2)
                .mode(mode),
        ) else {
            return;
        };
        assert!(pager.is_minor());
        for p in 0..len / PAGE {
            check_page(&pager, p, |i| src[i]);
        }
        pager.settle();
        let st = pager.stats();
        assert_eq!(st.faults, (len / PAGE / 16) as u64, "{st:?}");
        assert_eq!(st.pages_installed(), (len / PAGE) as u64, "{st:?}");
        // A discard of a shared mapping drops the mapping, not the file.
        pager.discard(0, 32 * PAGE).unwrap();
        pager.settle();
        for p in 0..32 {
            check_page(&pager, p, |i| src[i]);
        }
        assert!(pager.take_errors().is_empty());
    }
}
