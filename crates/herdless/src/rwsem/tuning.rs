//! How long an `AtomicCount` acquirer spins before it queues, and how long
//! a queued waiter lets running threads take the lock ahead of it: the
//! defaults, and `HERDLESS_RWSEM_TUNING`, which overrides them for
//! experiments (the lab's many-core sweeps, `scripts/many-cores.sh`).

use std::sync::OnceLock;
use std::time::Duration;

use super::raw::HANDOFF_AFTER;
use crate::util::tuning_text::{self, pairs};

/// The spin and hand-off settings of every `AtomicCount` semaphore in the
/// process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RwSemTuning {
    /// Rounds of `crossbeam_utils::Backoff` spinning before an acquirer
    /// queues (and a nudged writer's tries before it sleeps again).
    pub(super) spin_rounds: u32,
    /// How long a sleeper lets running threads steal before it asks for
    /// hand-off ([`HANDOFF_AFTER`] unless overridden).
    pub(super) handoff_after: Duration,
    /// Whether a spinning writer claims a lock that readers hold
    /// (`claim.rs`); on unless `intent=0`.
    pub(super) writer_intent: bool,
}

impl RwSemTuning {
    /// The defaults for a machine with `cpus` CPUs: the kernel's 4 ms
    /// hand-off time, and nine rounds of spinning (up to 255 spin-loop
    /// hints) on two CPUs, fourteen (up to 575) on more. Measured on 16
    /// cores (Intel Xeon, issue 23, stop 36), the lab's `rwsem` table
    /// (`AtomicCount`, 10% writes) in two interleaved pairs of runs:
    /// fourteen rounds 3–11% faster than nine at 8–32 threads (1.75–1.97
    /// M ops/s against 1.65–1.92), with 16 context switches per 1,000
    /// operations at 8 threads instead of 28; five rounds 13–25% slower;
    /// the hand-off time at 1 ms or 250 µs within the runs' spread of 4
    /// ms. parking_lot's `RwLock` stayed ahead at 8–16 threads (2.05–2.44
    /// M ops/s there), until spinning writers claimed the lock.
    ///
    /// Writers' claims on (`claim.rs`), on every machine. Measured on 16
    /// cores (stop 40, four interleaved pairs of the same table, claims
    /// on against `intent=0`): 1.21–1.32× the operations per second at 8
    /// and 16 threads, 1.02–1.10× at 32 (2.43–2.52 M ops/s at 8 against
    /// 1.88–2.01), which took the table from 0.79–0.81× parking_lot at 8
    /// threads to 1.03–1.06×, from 0.84–0.87× to 1.07–1.17× at 16, and
    /// from 1.17–1.18× to 1.20–1.31× at 32 (std: 1.17–1.69×); the peers'
    /// own rows moved 0.95–1.15× between the paired runs. On 2
    /// cores it ran within the spread of claims off: 1.19–1.28 against
    /// 1.17–1.23 M ops/s at 16 threads in stop 39's four interleaved
    /// pairs, 1.15–1.34 against 1.19–1.26 at 8–16 threads in stop 40's
    /// three (counters on).
    fn for_cpus(cpus: usize) -> RwSemTuning {
        RwSemTuning {
            spin_rounds: if cpus <= 2 { 9 } else { 14 },
            handoff_after: HANDOFF_AFTER,
            writer_intent: true,
        }
    }

    /// The settings for this process: the defaults, with
    /// `HERDLESS_RWSEM_TUNING=spin=ROUNDS,handoff=MICROSECONDS,intent=0|1`
    /// applied
    /// (unknown names and unparsable values are ignored, as
    /// `HERDLESS_MUTEX_TUNING`'s are).
    pub(super) fn get() -> &'static RwSemTuning {
        static TUNING: OnceLock<RwSemTuning> = OnceLock::new();
        TUNING.get_or_init(|| {
            tuning_text::from_env(
                "HERDLESS_RWSEM_TUNING",
                RwSemTuning::for_cpus,
                RwSemTuning::apply,
            )
        })
    }

    fn apply(&mut self, text: &str) {
        for (name, value) in pairs(text) {
            match name {
                "spin" => self.spin_rounds = value.min(64),
                // At least 1 µs: a zero timer would make a waiter that
                // re-arms it never sleep.
                "handoff" => self.handoff_after = Duration::from_micros(value.max(1).into()),
                "intent" => self.writer_intent = value != 0,
                _ => {}
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn tuning_text_sets_the_named_fields_and_ignores_the_rest() {
        let mut tuning = RwSemTuning::for_cpus(2);
        tuning.apply("spin=3, handoff=1000,bogus=2,spin=x,handoff");
        assert_eq!(tuning.spin_rounds, 3);
        assert_eq!(tuning.handoff_after, Duration::from_millis(1));
        tuning.apply("handoff=0");
        assert_eq!(tuning.handoff_after, Duration::from_micros(1));
        assert!(tuning.writer_intent, "writers claim unless told not to");
        tuning.apply("intent=0");
        assert!(!tuning.writer_intent);
        tuning.apply("intent=1");
        assert!(tuning.writer_intent);
        assert!(RwSemTuning::for_cpus(16).spin_rounds > RwSemTuning::for_cpus(2).spin_rounds);
    }
}
