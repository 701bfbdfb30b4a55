//! The address space a set of handlers serves: one or more registered
//! ranges of a process's memory (the [`Pager`](crate::Pager)'s own region,
//! or a VMM's guest memory regions handed over by `herdless-uffd`), each
//! backed by a range of the source and served in its own page size (the
//! host's 4 KiB, or 2 MiB for a hugetlbfs region). Pages are numbered
//! across the regions, in address order, each region's in its own unit
//! (a 2 MiB region of 8 MiB is 4 pages), so one
//! [`PageStates`](crate::page_state::PageStates) covers them all.
//!
//! A run of pages the fault path fills never crosses a region (so it has
//! one page size): fault-around windows are aligned within their region
//! (region-relative page numbers, as the kernel aligns within a VMA) and
//! clipped to the pages holding source bytes.

use std::ops::Range;

/// The larger page size served besides the host's: 2 MiB, a hugetlbfs
/// page on x86-64 and arm64 (Firecracker's `"huge_pages": "2M"`).
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// One registered range and the source bytes behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    /// First byte's address.
    pub(crate) base: usize,
    /// Length in bytes (a page multiple).
    pub(crate) len: usize,
    /// Where its first byte comes from in the source.
    pub(crate) source_offset: u64,
    /// Its first page's number in the space.
    pub(crate) first_page: usize,
    /// Its pages holding at least one source byte (from its start): past
    /// them the region reads zeros.
    pub(crate) source_pages: usize,
    /// Its page size in bytes (every page of it is filled whole).
    pub(crate) page: usize,
}

/// A region to serve: where it is, how long, where its bytes are in the
/// source, and its page size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    /// First byte's address (aligned to `page`).
    pub(crate) base: usize,
    /// Length in bytes (a multiple of `page`).
    pub(crate) len: usize,
    /// Where its first byte comes from in the source.
    pub(crate) source_offset: u64,
    /// Page size in bytes.
    pub(crate) page: usize,
}

/// The regions a set of handlers serves.
#[derive(Debug)]
pub(crate) struct Space {
    /// Sorted by address, not overlapping (checked by whoever built them).
    regions: Box<[Region]>,
    pages: usize,
}

impl Space {
    /// Regions `spans`, not overlapping, each aligned to its page size,
    /// over a source of `source_len` bytes.
    pub(crate) fn new(mut spans: Vec<Span>, source_len: u64) -> Self {
        spans.sort_by_key(|s| s.base);
        let mut first_page = 0;
        let regions = spans
            .into_iter()
            .map(|s| {
                let pages = s.len / s.page;
                let source_pages = usize::try_from(
                    source_len
                        .saturating_sub(s.source_offset)
                        .div_ceil(s.page as u64),
                )
                .unwrap_or(usize::MAX)
                .min(pages);
                let r = Region {
                    base: s.base,
                    len: s.len,
                    source_offset: s.source_offset,
                    first_page,
                    source_pages,
                    page: s.page,
                };
                first_page += pages;
                r
            })
            .collect();
        Space {
            regions,
            pages: first_page,
        }
    }

    /// Pages in all regions.
    pub(crate) fn pages(&self) -> usize {
        self.pages
    }

    /// The regions, by address.
    pub(crate) fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// The region holding page `p` (< `pages()`).
    pub(crate) fn region_of(&self, p: usize) -> &Region {
        let i = self.regions.partition_point(|r| r.first_page <= p) - 1;
        &self.regions[i]
    }

    /// The page holding address `addr`, if a region does.
    pub(crate) fn page_of(&self, addr: usize) -> Option<usize> {
        let i = self
            .regions
            .partition_point(|r| r.base <= addr)
            .checked_sub(1)?;
        let r = &self.regions[i];
        (addr - r.base < r.len).then(|| r.first_page + (addr - r.base) / r.page)
    }

    /// Page `p`'s address.
    pub(crate) fn addr(&self, p: usize) -> usize {
        let r = self.region_of(p);
        r.base + (p - r.first_page) * r.page
    }

    /// Page `p`'s size in bytes (its region's page size).
    pub(crate) fn page_size(&self, p: usize) -> usize {
        self.region_of(p).page
    }

    /// The largest page size of any region.
    pub(crate) fn largest_page(&self) -> usize {
        self.regions.iter().map(|r| r.page).max().unwrap_or(0)
    }

    /// Where page `p`'s bytes start in the source.
    pub(crate) fn source_offset(&self, p: usize) -> u64 {
        let r = self.region_of(p);
        r.source_offset + ((p - r.first_page) * r.page) as u64
    }

    /// The end (exclusive) of page `p`'s region's pages holding source
    /// bytes: no run from `p` goes past it.
    pub(crate) fn source_end(&self, p: usize) -> usize {
        let r = self.region_of(p);
        r.first_page + r.source_pages
    }

    /// Whether page `p` holds source bytes (else it reads zeros).
    pub(crate) fn has_source(&self, p: usize) -> bool {
        p < self.source_end(p)
    }

    /// The fault-around window of page `p` (which holds source bytes):
    /// `window_pages` (a power of two) aligned within its region, clipped
    /// to the region's pages holding source bytes.
    pub(crate) fn window(&self, p: usize, window_pages: usize) -> Range<usize> {
        let r = self.region_of(p);
        let start = r.first_page + ((p - r.first_page) & !(window_pages - 1));
        start..(start + window_pages).min(r.first_page + r.source_pages)
    }

    /// The aligned run of `pages` pages (a power of two) holding page `p`,
    /// clipped to its region (source bytes or not).
    pub(crate) fn aligned(&self, p: usize, pages: usize) -> Range<usize> {
        let r = self.region_of(p);
        let start = r.first_page + ((p - r.first_page) & !(pages - 1));
        start..(start + pages).min(r.first_page + r.len / r.page)
    }

    /// The pages of `[start, end)` (addresses) in each region, as ranges of
    /// page numbers: partial pages at either end included.
    pub(crate) fn pages_in(&self, start: usize, end: usize) -> Vec<Range<usize>> {
        self.regions
            .iter()
            .filter_map(|r| {
                let lo = start.max(r.base);
                let hi = end.min(r.base + r.len);
                (lo < hi).then(|| {
                    r.first_page + (lo - r.base) / r.page
                        ..r.first_page + (hi - r.base).div_ceil(r.page)
                })
            })
            .collect()
    }

    /// The pages holding any of the source bytes `[offset, offset + len)`,
    /// as ranges of page numbers per region (in each region's own unit: a
    /// 4 KiB range in a 2 MiB region is the 2 MiB page holding it).
    pub(crate) fn pages_of_source(&self, offset: u64, len: u64) -> Vec<Range<usize>> {
        self.regions
            .iter()
            .filter_map(|r| {
                let page = r.page as u64;
                let r_end = r.source_offset + r.len as u64;
                let lo = offset.max(r.source_offset);
                let hi = offset.saturating_add(len).min(r_end);
                (lo < hi).then(|| {
                    let first = r.first_page + ((lo - r.source_offset) / page) as usize;
                    let last = r.first_page + (hi - r.source_offset).div_ceil(page) as usize;
                    first..last.min(r.first_page + r.source_pages)
                })
            })
            .filter(|range| !range.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: usize = 4096;
    const H: usize = 2 << 20;

    fn span(base: usize, len: usize, source_offset: u64, page: usize) -> Span {
        Span {
            base,
            len,
            source_offset,
            page,
        }
    }

    #[test]
    fn pages_are_numbered_across_regions_in_address_order() {
        // Given out of order; the second region's source starts at 0.
        let s = Space::new(
            vec![
                span(0x40_0000, 4 * P, 0, P),
                span(0x10_0000, 8 * P, 4 * P as u64, P),
            ],
            10 * P as u64 + 100,
        );
        assert_eq!(s.pages(), 12);
        assert_eq!(s.regions()[0].base, 0x10_0000);
        assert_eq!(s.page_of(0x10_0000 + 3 * P + 5), Some(3));
        assert_eq!(s.page_of(0x40_0000), Some(8));
        assert_eq!(s.page_of(0x40_0000 + 4 * P), None);
        assert_eq!(s.page_of(0x0f_ffff), None);
        assert_eq!(s.addr(9), 0x40_0000 + P);
        assert_eq!(s.source_offset(0), 4 * P as u64);
        assert_eq!(s.source_offset(9), P as u64);
        // Region 0: source bytes 4P..12P, the source has 10P + 100: 7 pages.
        assert_eq!(s.source_end(0), 7);
        assert!(s.has_source(6) && !s.has_source(7));
        assert_eq!(s.source_end(8), 12);
        assert_eq!(s.window(5, 4), 4..7);
        assert_eq!(s.window(9, 16), 8..12, "a window stays in its region");
        assert_eq!(
            s.pages_in(0x10_0000 + 7 * P + 1, 0x40_0000 + P),
            vec![7..8, 8..9]
        );
        assert_eq!(s.pages_of_source(0, 2 * P as u64), vec![8..10]);
        assert_eq!(
            s.pages_of_source(3 * P as u64, 3 * P as u64),
            vec![0..2, 11..12]
        );
    }

    #[test]
    fn a_hugepage_region_is_numbered_in_its_own_pages_beside_a_4k_one() {
        // 8 MiB of 2 MiB pages at 0x4000_0000 (file bytes 1 MiB on), and
        // 1 MiB of 4 KiB pages at 0x1000_0000 (file bytes 0 on).
        let s = Space::new(
            vec![
                span(0x4000_0000, 4 * H, 1 << 20, H),
                span(0x1000_0000, 256 * P, 0, P),
            ],
            (1 << 20) + 4 * H as u64,
        );
        assert_eq!(s.pages(), 256 + 4);
        assert_eq!(s.largest_page(), H);
        assert_eq!(s.page_of(0x4000_0000 + H + 12345), Some(257));
        assert_eq!(s.page_size(257), H);
        assert_eq!(s.page_size(3), P);
        assert_eq!(s.addr(258), 0x4000_0000 + 2 * H);
        assert_eq!(s.source_offset(259), (1 << 20) + 3 * H as u64);
        assert_eq!(s.source_end(256), 260);
        assert_eq!(s.window(257, 1), 257..258);
        // A discard of 4 KiB inside a huge page covers the whole page.
        assert_eq!(
            s.pages_in(0x4000_0000 + H + P, 0x4000_0000 + H + 2 * P),
            vec![257..258]
        );
        // Trace bytes in 4 KiB units land on the huge page holding them.
        assert_eq!(
            s.pages_of_source((1 << 20) + H as u64 + 4096, 4096),
            vec![257..258]
        );
        assert_eq!(s.pages_of_source(4096, 2 * P as u64), vec![1..3]);
    }
}
