//! Helpers shared by the pager's integration tests: patterns, page checks,
//! building a pager the way this machine allows (`skip.rs`), and reading a
//! page that may be poisoned (`sigbus.rs`).
#![allow(dead_code)]

pub mod sigbus;
pub mod skip;

use std::path::PathBuf;

use herdless_pager::{Pager, PagerBuilder, PagerError};
use skip::skip;

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

/// Builds the pager with the userfaultfd this process may open (full, or
/// `UFFD_USER_MODE_ONLY` for an ordinary user), or returns `None` after
/// marking the test skipped with the reason: no userfaultfd here, or a
/// kernel without a feature the configuration needs. (The refusal test in
/// `bad_input.rs` checks the error type itself.)
pub fn build(b: PagerBuilder) -> Option<Pager> {
    let access = skip::unless_userfaultfd()?;
    match b.user_mode_only(access.user_mode_only()).build() {
        Ok(p) => Some(p),
        Err(e @ PagerError::FeatureUnsupported { .. }) => {
            skip(e);
            None
        }
        Err(e) => panic!("building the pager ({access:?}): {e}"),
    }
}

/// Whether pagers built by [`build`] are user-mode-only (only meaningful
/// once [`build`] returned a pager).
pub fn user_mode_only() -> bool {
    skip::unless_userfaultfd().is_some_and(|a| a.user_mode_only())
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
