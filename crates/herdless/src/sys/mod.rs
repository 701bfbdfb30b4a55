//! The one place that sleeps in the kernel: wait on a 32-bit word until it
//! changes, and wake a sleeper of a word.
//!
//! Everything above (the [`parker`](crate::parker) and the internal wait-list
//! [`lock`](crate::lock)) is written against these three functions. On Linux
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

#[cfg(not(loom))]
mod linux;
#[cfg(not(loom))]
pub(crate) use linux::{wait, wake_one};

#[cfg(loom)]
mod loom_model;
#[cfg(loom)]
pub(crate) use loom_model::{wait, wake_one};
