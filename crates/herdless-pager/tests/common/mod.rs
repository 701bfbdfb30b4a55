//! Helpers shared by the pager's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use herdless_pager::{Pager, PagerBuilder, PagerError};

pub const PAGE: usize = 4096;

/// A byte pattern that differs in every page and at every offset.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
            (x >> 29) as u8 | 1 // never zero: zeros mean "not from the source"
        })
        .collect()
}

/// Builds the pager, or returns `None` after saying why userfaultfd is
/// unavailable here (the dedicated refusal test checks the error type).
pub fn build(b: PagerBuilder) -> Option<Pager> {
    match b.build() {
        Ok(p) => Some(p),
        Err(e @ PagerError::UserfaultfdUnavailable { .. }) => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("building the pager: {e}"),
    }
}

/// Expected byte `i` of a region served from `src` (zeros past its end).
pub fn expected(src: &[u8], i: usize) -> u8 {
    src.get(i).copied().unwrap_or(0)
}

/// Reads page `p` of the pager and compares it with `want`.
pub fn check_page(pager: &Pager, p: usize, want: impl Fn(usize) -> u8) {
    let mut buf = vec![0u8; PAGE];
    pager.read(p * PAGE, &mut buf).unwrap();
    for (k, b) in buf.iter().enumerate() {
        let i = p * PAGE + k;
        assert_eq!(*b, want(i), "byte {i:#x} (page {p})");
    }
}

/// A fresh scratch directory under the system temp dir.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("herdless-pager-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small deterministic generator (xorshift), for random orders.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}
