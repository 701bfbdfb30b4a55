//! # herdless-lab
//!
//! The lab: reproduces each seed's experiment with herdless before and after
//! the seed's change, next to the kernel's own mechanism and the best
//! library, in one process, and prints the seed's table with spreads and
//! ratios. `harness` is the one generic runner and its outputs (table, JSON,
//! SVG); `experiments` holds the experiments as data. The binary
//! (`src/main.rs`) is only the command line.

#![warn(missing_docs)]

pub mod experiments;
pub mod harness;
