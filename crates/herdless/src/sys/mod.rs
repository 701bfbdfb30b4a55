//! The one place that sleeps in the kernel: wait on a 32-bit word until it
//! changes, and wake a sleeper of a word.
//!
//! Everything above (the [`parker`](crate::parker) and the internal wait-list
//! [`lock`](crate::lock)) is written against these functions. On Linux
//! they are the `FUTEX_WAIT`/`FUTEX_WAKE` syscalls through rustix; under
//! `--cfg loom` they are a model of the same contract on loom's `Mutex` and
//! `Condvar`, so the logic above them is what loom checks.
//!
//! Contract (the futex contract):
//! - `wait(word, expected, deadline)` returns at once if `word != expected`,
//!   otherwise sleeps until woken, the deadline passes, or spuriously. The
//!   check and the sleep are atomic with respect to `wake`.
//! - `wake_one(word)` wakes a sleeper of `word` (or more: spurious wakeups
//!   are allowed); waking a word nobody
//!   sleeps on, even one whose memory has been reused, is harmless.
//!   `wake_all(word)` wakes every sleeper of `word`.
//! - `wait_either(word, expected, other, other_expected, deadline)`, where
//!   `either_supported()` (Linux 5.16's `futex_waitv`): as `wait`, on two
//!   words at once; a wake of either ends it, and a change of either
//!   value before the sleep makes it return at once. The condvar's
//!   broadcast uses it (`condvar/broadcast.rs`).

#[cfg(not(loom))]
mod linux;
#[cfg(not(loom))]
pub(crate) use linux::{either_supported, wait, wait_either, wake_all, wake_one};

#[cfg(loom)]
mod loom_model;
#[cfg(loom)]
pub(crate) use loom_model::{wait, wait_either, wake_all, wake_one};
