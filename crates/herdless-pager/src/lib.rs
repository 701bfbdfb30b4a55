//! # herdless-pager (seed 002, with seed 000's handler threads)
//!
//! A userfaultfd pager with fault-around: on one page fault, install the
//! faulting page and then the neighbouring pages of an aligned window that the
//! source can provide without blocking. Pending its own issue, this crate
//! holds no code yet: the workspace layout is fixed so that the lab and CI
//! already build it.
