//! The guest-like workload of `restore`: a working set of W pages of the
//! snapshot, in a repeatable scattered order with some sequential runs,
//! touched (every word of every page summed) from T threads; the
//! snapshot file it restores is a [`Snapshot`] (`scratch`'s pattern file,
//! with the sum of each of its pages, so that a page served wrong fails
//! the measurement).

use crate::harness::scratch::xorshift;
pub(crate) use crate::harness::scratch::{
    pattern_file as snapshot, sum_pages as touch, PatternFile as Snapshot, PAGE,
};

/// The working set: `pages_wanted` distinct pages of a `pages`-page
/// snapshot as runs (first page, length), in touch order. Runs start at
/// scattered pages; half are one page, a third 2 to 8 pages, the rest 16
/// to 64 (the sequential stretches of a guest's heap or page cache).
/// Repeatable: the same arguments give the same runs.
pub(crate) fn working_set(pages: usize, pages_wanted: usize) -> Vec<(usize, usize)> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || xorshift(&mut x);
    let mut taken = vec![false; pages];
    let mut runs = Vec::new();
    let mut count = 0;
    while count < pages_wanted.min(pages) {
        let roll = next() % 6;
        let len = match roll {
            0..=2 => 1,
            3 | 4 => 2 + (next() % 7) as usize,
            _ => 16 + (next() % 49) as usize,
        };
        let start = (next() % pages as u64) as usize;
        let mut p = start;
        while p < pages && p < start + len && count < pages_wanted {
            if taken[p] {
                break;
            }
            taken[p] = true;
            count += 1;
            p += 1;
        }
        if p > start {
            runs.push((start, p - start));
        }
    }
    runs
}

/// The runs thread `t` of `threads` touches: every `threads`-th run.
pub(crate) fn share(runs: &[(usize, usize)], t: usize, threads: usize) -> Vec<(usize, usize)> {
    runs.iter().skip(t).step_by(threads).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_set_is_repeatable_distinct_and_of_the_size_asked() {
        let a = working_set(10_000, 1_000);
        assert_eq!(a, working_set(10_000, 1_000));
        let mut seen = vec![false; 10_000];
        let mut n = 0;
        for &(s, l) in &a {
            for (p, seen) in seen.iter_mut().enumerate().skip(s).take(l) {
                assert!(!*seen, "page {p} twice");
                *seen = true;
                n += 1;
            }
        }
        assert_eq!(n, 1_000);
        assert!(a.iter().any(|r| r.1 >= 16), "some sequential runs");
        assert!(
            a.iter().filter(|r| r.1 == 1).count() > a.len() / 4,
            "mostly scattered"
        );
    }
}
