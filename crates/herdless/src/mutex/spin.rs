//! How long a thread that finds the mutex held keeps trying before it
//! sleeps: rounds of exponential spinning (1, 2, 4, ... spin-loop hints),
//! then some `yield_now`s, then give up (park).
//!
//! Who spins is the protocol's business (`raw.rs`: a thread spins while
//! nobody sleeps, and the one woken thread always does); this file only
//! says for how long. The budget depends on the machine: on many CPUs the
//! holder is almost always running on another one and is about to unlock,
//! so pure spinning pays and a `yield_now` (a system call that finds
//! nothing else to run) is wasted; on 2 CPUs with 8–32 threads the holder
//! is often descheduled, and yielding lets it run (the lab's `locks`
//! experiment measured std's 100 spinning loads at 1.4× the CPU per
//! operation of parking_lot's yields there, and convoys).

use std::sync::OnceLock;
use std::time::Duration;

use super::spin_ask::SpinAsk;
use crate::deadline::Deadline;
use crate::futex::ParkHow;
use crate::util::tuning_text::{self, pairs};

/// The spin budget of one acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SpinBudget {
    /// Rounds of exponential spinning: round `r` spins `2^r` hints.
    pub(super) pause_rounds: u32,
    /// Rounds of exponential spinning while nobody sleeps on the mutex
    /// (PARKED clear): 9 on more than two CPUs (below), `pausefree=R` in
    /// experiments; `None`: `pause_rounds`, as for everyone.
    pub(super) free_pause_rounds: Option<u32>,
    /// `yield_now` calls after the spinning rounds.
    pub(super) yields: u32,
    /// Which mutexes' newcomers (threads that are not the woken one) yield
    /// only while a woken thread is awake for the lock (WAKING set), and
    /// otherwise park after their spinning rounds; see [`SpinBudget::get`].
    pub(super) waking_yield: WakingYield,
    /// Whether a thread that is not the woken one spins although sleepers
    /// are queued (it may then take the lock ahead of them).
    pub(super) spin_past_sleepers: bool,
    /// How many times a sleeper looks at its grant word before the first
    /// futex wait.
    pub(super) watch: u32,
    /// The same for a rare thread, one that sleeps at the head of the
    /// queue: 0 on two CPUs, where its grant's giver may need its CPU
    /// (`rare_parker.rs`, "On two CPUs").
    pub(super) rare_watch: u32,
    /// Whether a woken thread that spun in vain asks the next unlock for
    /// the lock (ASKING, see `raw.rs`).
    pub(super) ask: bool,
    /// Which other threads that spun in vain ask too, if nobody else is
    /// asking, before they sleep (`raw.rs`, "Fairness"; with `ask`).
    pub(super) spin_ask: SpinAsk,
    /// Rounds of exponential spinning a woken thread spends before it asks
    /// (at most `pause_rounds`; after asking it spins the whole budget).
    pub(super) ask_rounds: u32,
    /// Whether a woken thread that lost goes back to the head of the queue
    /// (else to the tail, as std's and parking_lot's do).
    pub(super) front: bool,
    /// Wakes in vain after which a task asks the next waking unlock for
    /// the lock (`lock_async.rs`, "Fairness"); 0: never asks.
    pub(super) task_ask_after: u32,
    /// The gap that makes a thread rare: one that finds a mutex taken at
    /// most once per gap sleeps at the head of the queue
    /// (`rare_parker.rs`); zero: no thread does.
    pub(super) rare_gap: Duration,
    /// Budgets a rare thread that would ask spins for its turn while
    /// another asks (`rare_parker.rs`); 0, the default: it sleeps.
    pub(super) rare_turns: u32,
    /// Whether a thread's contended acquisitions since its last sleep count
    /// against its being rare (`rare_parker.rs`; off only in experiments).
    pub(super) rare_counts: bool,
}

impl SpinBudget {
    /// The budget for this machine (`HERDLESS_MUTEX_TUNING` overrides it
    /// for experiments: `pause=R,pausefree=R,yield=Y,past=0|1,watch=W,
    /// rarewatch=W,ask=0|1,spinask=0|1|2,askpause=R,front=0|1,waking_yield=0|1|2,
    /// rare=MICROSECONDS,rarecount=0|1,rareturns=N,taskask=N`).
    ///
    /// `waking_yield`: which mutexes' newcomers yield only while a woken
    /// thread is awake (0: none, 1: those a condvar waits with, the
    /// default; 2: all). It matters on 2 CPUs only (with more, the budget
    /// does not yield). Measured in the lab's `locks` on 2 cores, three
    /// interleaved quick runs each way (stop 33), for every mutex against
    /// none: the Mutex+Condvar bounded queue at 4/4 cap 16 runs at 3.5–4.0×
    /// std instead of 0.22–0.36× (0.9 involuntary switches per 1,000 items
    /// instead of 127: a yield there mostly hands the CPU to another
    /// contender), and an occasional locker beside one hog waits 1.5–1.6×
    /// std's p99 instead of 149–237×; but a plain mutex at 4–64 threads
    /// falls from 2.9–3.7× std to 1.4–2.8× (its threads park instead of
    /// yielding to the holder), 2 threads from 0.97–2.5× to 0.56–0.98×, and
    /// the occasional locker beside 4 hogs waits 1.5–9.9× std's p99
    /// instead of 0.04–0.18×. Hence the default: a mutex that serves a
    /// condvar (a queue, a monitor) gets the first behaviour, a plain one
    /// keeps its yields (five more interleaved runs: the queue 3.45–3.73×
    /// std against 0.20–0.37× with `waking_yield=0`; lab README, `locks`).
    pub(super) fn get() -> &'static SpinBudget {
        static BUDGET: OnceLock<SpinBudget> = OnceLock::new();
        BUDGET.get_or_init(|| {
            tuning_text::from_env(
                "HERDLESS_MUTEX_TUNING",
                SpinBudget::for_cpus,
                SpinBudget::apply,
            )
        })
    }

    fn for_cpus(cpus: usize) -> SpinBudget {
        if cpus <= 2 {
            // parking_lot_core's `SpinWait` shape, ten yields instead of
            // seven (lab README, `locks`). Spinning past sleepers, as on
            // many CPUs: a thread that parks at once behind a sleeper
            // waits for a whole wake. Measured in the lab's `locks`
            // experiment on 2 cores, four interleaved runs each way: the
            // occasional locker beside 4 hogs waited 0.04–0.08× std's p99
            // (0.48–10.5× without), every throughput row within the runs'
            // spread of each other (mutex 8–32 threads 3.2–4.4× std either
            // way).
            SpinBudget {
                pause_rounds: 4,
                free_pause_rounds: None,
                yields: 10,
                waking_yield: WakingYield::Monitors,
                spin_past_sleepers: true,
                watch: 400,
                rare_watch: 0,
                ask: true,
                spin_ask: SpinAsk::DEFAULT,
                ask_rounds: 4,
                front: true,
                task_ask_after: 1,
                rare_gap: RARE_GAP,
                rare_turns: 0,
                rare_counts: true,
            }
        } else {
            // Spin past sleepers too, as Go's `sync.Mutex` does: with
            // sleepers queued most of the time (a condvar's requeued
            // waiters), a newcomer that parks at once turns every hand-off
            // into a wake. The woken thread's ASKING (`raw.rs`) keeps that
            // fair. Measured on 16 cores (issue 23): the bounded queue 4/4
            // cap 16 went from 0.82× to 2.19× std, 16/16 cap 4 from 0.35×
            // to 1.50×.
            //
            // Seven rounds: no other count wins every row. Stop 36, 16
            // cores, one interleaved pair of runs each (the lab's mutex
            // and queue tables, M acquisitions/s, against 7 rounds): 9
            // rounds 14.4 against 9.3 at 4 threads (1/0), 21.9–26.4
            // against 15.1–19.6 at 8–16, but 16.5 against 24.0 at 32 and
            // 11–24% less with work outside the lock (5/50, 10/100); 5
            // rounds 23–33 against 16–25 at 8–32 threads, but 11% less at
            // 4 and the queue 4/4 cap 16 and 16/16 cap 4 at 0.57–0.66×.
            // Asking at once (`askpause=0`) or after 3 rounds instead of
            // 7 gave the slowest thread a smaller share at 16–32 threads
            // in five of the six rows measured (0.19–0.55 against
            // 0.33–0.58).
            //
            // Nine rounds while nobody sleeps on the mutex (PARKED clear),
            // seven once somebody does: the 2–4-thread rows, where 9
            // rounds won, run with few sleepers, while the 32-thread and
            // queue rows, where 9 rounds lost, have sleepers queued most
            // of the time. Measured on 16 cores (stop 40, four
            // interleaved pairs of the lab's mutex tables against seven
            // rounds for all, `pausefree=7`): 1.09–1.29× the acquisitions
            // per second at 2 threads (1/0) and 1.48–1.70× at 4 (15–18 M
            // against 9.4–11; herdless 0.88–0.98× parking_lot before,
            // 1.44–1.59× after), 8–64 threads 0.83–1.26× (within the
            // runs' spread), 0.93–0.995× with work outside the lock (5/50,
            // 10/100: still 1.30–1.52× parking_lot), the bounded queue
            // 0.86–1.07× in three pairs (1.5–10× std either way). The
            // occasional locker's p99 beside 15 and 32 hogs: 108 and 36
            // µs in one pair (default 131 and 482), 783 and 1,621 µs in
            // the other (103 and 324); stop 41's pair: 24 µs beside 32
            // hogs against the default's 811. Not settled.
            //
            // Each round spins its hints blind. Looking at the lock every
            // 8 hints and ending the round when it is free (stop 41, seven
            // interleaved pairs on 16 cores) ran at 0.30–0.62× the
            // acquisitions per second at 2–32 threads (1/0) and 0.62–0.75×
            // with work outside the lock, and did not even buy fairness:
            // the slowest thread's share at 32 threads was 0.40–0.50
            // against 0.32–0.43, at 16 0.40–0.58 against 0.31–0.57, at 32
            // (5/50) 0.49–0.56 against 0.49–0.63. A spinner that sees the
            // lock free takes its line from the releaser and ends the
            // releaser's run of acquisitions, which is where the
            // throughput comes from.
            SpinBudget {
                pause_rounds: 7,
                free_pause_rounds: Some(9),
                yields: 0,
                waking_yield: WakingYield::Monitors,
                spin_past_sleepers: true,
                watch: 400,
                rare_watch: 400,
                ask: true,
                spin_ask: SpinAsk::DEFAULT,
                ask_rounds: 7,
                front: true,
                task_ask_after: 1,
                rare_gap: RARE_GAP,
                rare_turns: 0,
                rare_counts: true,
            }
        }
    }

    /// Whether a thread whose budget is spent asks for the lock (if it has
    /// not since it last slept, and nobody else is asking: the caller's
    /// to see); `woken`: it owns WAKING; `rare`: whether it is a rare
    /// thread (`rare_parker.rs`), asked only where [`SpinAsk::Rare`] needs
    /// the answer.
    pub(super) fn asks(&self, woken: bool, rare: impl FnOnce() -> bool) -> bool {
        self.ask
            && (woken
                || match self.spin_ask {
                    SpinAsk::Never => false,
                    SpinAsk::Rare => rare(),
                    SpinAsk::Every => true,
                })
    }

    /// How a mutex sleeper parks: a woken thread that lost the lock goes
    /// back to the head (with `front`), a rare thread (`rare`, asked by
    /// the caller: `rare_parker.rs`) ahead, watching its grant for
    /// `rare_watch`, every other one at the tail, watching for `watch`.
    pub(super) fn park_how(&self, deadline: Deadline, woken: bool, rare: bool) -> ParkHow {
        ParkHow {
            front: woken && self.front,
            ahead: rare,
            watch: if rare { self.rare_watch } else { self.watch },
            ..ParkHow::until(deadline)
        }
    }

    fn apply(&mut self, text: &str) {
        for (name, value) in pairs(text) {
            match name {
                "pause" => self.pause_rounds = value.min(16),
                "pausefree" => self.free_pause_rounds = Some(value.min(16)),
                "yield" => self.yields = value,
                "past" => self.spin_past_sleepers = value != 0,
                "watch" => self.watch = value,
                "rarewatch" => self.rare_watch = value,
                "ask" => self.ask = value != 0,
                "spinask" => {
                    self.spin_ask = match value {
                        0 => SpinAsk::Never,
                        1 => SpinAsk::Every,
                        2 => SpinAsk::Rare,
                        _ => continue,
                    }
                }
                "askpause" => self.ask_rounds = value,
                "front" => self.front = value != 0,
                "taskask" => self.task_ask_after = value,
                "rare" => self.rare_gap = Duration::from_micros(value.into()),
                "rarecount" => self.rare_counts = value != 0,
                "rareturns" => self.rare_turns = value,
                "waking_yield" => {
                    self.waking_yield = match value {
                        0 => WakingYield::Never,
                        1 => WakingYield::Monitors,
                        _ => WakingYield::Always,
                    }
                }
                _ => {}
            }
        }
    }
}

/// The default `rare_gap` (`rare_parker.rs`, where its measurement is).
const RARE_GAP: Duration = Duration::from_micros(250);

/// Which mutexes keep their newcomers from yielding while no woken thread
/// is awake for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WakingYield {
    /// None: newcomers always spend their yields.
    Never,
    /// Mutexes a condvar has waited with (their MONITOR bit, `raw.rs`).
    Monitors,
    /// Every mutex.
    Always,
}

impl WakingYield {
    /// Whether it applies to a mutex; `monitor`: a condvar has waited with
    /// it (its MONITOR bit, `raw.rs`).
    pub(super) fn on(self, monitor: bool) -> bool {
        match self {
            WakingYield::Never => false,
            WakingYield::Monitors => monitor,
            WakingYield::Always => true,
        }
    }
}

/// One acquisition's progress through its [`SpinBudget`].
pub(super) struct SpinWait {
    rounds: u32,
}

impl SpinWait {
    pub(super) const fn new() -> Self {
        SpinWait { rounds: 0 }
    }

    /// Whether the next [`SpinWait::spin`] would yield (its spinning
    /// rounds are spent and the budget has yields left).
    pub(super) fn yields_next(&self, budget: &SpinBudget) -> bool {
        self.rounds >= budget.pause_rounds && self.rounds < budget.pause_rounds + budget.yields
    }

    /// Spins or yields once; `false` once the budget is spent (time to
    /// park, or to ask). `may_yield`: false for a thread that the budget's
    /// `waking_yield` keeps from yielding now; `will_ask`: the woken
    /// thread before it asks, which spins `ask_rounds` rounds, not
    /// `pause_rounds`; `alone`: nobody sleeps on the mutex, so a thread
    /// that is not about to ask spins `free_pause_rounds` if set
    /// (`yields_next` keeps reading `pause_rounds`).
    /// Under loom it never spins: loom explores the parking paths.
    pub(super) fn spin(
        &mut self,
        budget: &SpinBudget,
        may_yield: bool,
        will_ask: bool,
        alone: bool,
    ) -> bool {
        if cfg!(loom) {
            return false;
        }
        let yields = if may_yield { budget.yields } else { 0 };
        let pause_rounds = if will_ask {
            budget.ask_rounds.min(budget.pause_rounds)
        } else if alone {
            budget.free_pause_rounds.unwrap_or(budget.pause_rounds)
        } else {
            budget.pause_rounds
        };
        if self.rounds < pause_rounds {
            for _ in 0..1u32 << self.rounds {
                std::hint::spin_loop();
            }
        } else if self.rounds < pause_rounds + yields {
            std::thread::yield_now();
        } else {
            return false;
        }
        self.rounds += 1;
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn tuning_text_sets_the_named_fields_and_ignores_the_rest() {
        let mut budget = SpinBudget::for_cpus(2);
        budget.apply("waking_yield=2, yield=3,bogus=9,pause=x,past");
        assert_eq!(budget.waking_yield, WakingYield::Always);
        assert_eq!(budget.yields, 3);
        assert_eq!(budget.pause_rounds, SpinBudget::for_cpus(2).pause_rounds);
        budget.apply("waking_yield=0");
        assert_eq!(budget.waking_yield, WakingYield::Never);
        assert!(WakingYield::Monitors.on(true) && WakingYield::Always.on(false));
        assert!(!WakingYield::Monitors.on(false) && !WakingYield::Never.on(true));
    }

    #[test]
    fn a_rare_sleeper_parks_ahead_with_its_own_watch_and_a_woken_one_at_the_front() {
        let mut budget = SpinBudget::for_cpus(2);
        budget.apply("watch=7,rarewatch=3");
        let rare = budget.park_how(Deadline::Never, false, true);
        assert!(rare.ahead && !rare.front);
        assert_eq!(rare.watch, 3);
        let woken = budget.park_how(Deadline::Never, true, false);
        assert!(woken.front && !woken.ahead);
        assert_eq!(woken.watch, 7);
        budget.apply("front=0");
        let plain = budget.park_how(Deadline::Never, true, false);
        assert!(!plain.front && !plain.ahead);
        assert_eq!(SpinBudget::for_cpus(2).rare_watch, 0, "two CPUs: no watch");
        assert_eq!(
            SpinBudget::for_cpus(16).rare_watch,
            SpinBudget::for_cpus(16).watch,
            "more: the same watch as everyone"
        );
    }

    #[test]
    fn a_thread_kept_from_yielding_parks_after_its_spinning_rounds() {
        let budget = SpinBudget::for_cpus(2);
        let count = |may_yield| {
            let mut spin = SpinWait::new();
            std::iter::from_fn(|| spin.spin(&budget, may_yield, false, false).then_some(())).count()
                as u32
        };
        assert_eq!(count(true), budget.pause_rounds + budget.yields);
        assert_eq!(count(false), budget.pause_rounds);
    }

    #[test]
    fn a_woken_thread_spins_its_ask_rounds_before_it_asks() {
        for cpus in [2, 16] {
            let mut budget = SpinBudget::for_cpus(cpus);
            let count = |budget: &SpinBudget, will_ask| {
                let mut spin = SpinWait::new();
                std::iter::from_fn(|| spin.spin(budget, false, will_ask, false).then_some(()))
                    .count() as u32
            };
            assert_eq!(
                count(&budget, true),
                count(&budget, false),
                "by default a woken thread spins the whole budget before it asks"
            );
            assert_eq!(budget.task_ask_after, 1, "a task asks once woken in vain");
            budget.apply("askpause=2,rarecount=0,rareturns=3,taskask=4");
            assert_eq!(budget.rare_turns, 3);
            assert_eq!(budget.task_ask_after, 4);
            assert_eq!(count(&budget, true), 2);
            assert_eq!(count(&budget, false), budget.pause_rounds);
            assert!(!budget.rare_counts);
            budget.apply("askpause=99");
            assert_eq!(
                count(&budget, true),
                budget.pause_rounds,
                "never past the budget"
            );
        }
    }

    #[test]
    fn the_woken_and_rare_threads_ask_by_default_and_spinask_changes_who() {
        for cpus in [2, 16] {
            let mut budget = SpinBudget::for_cpus(cpus);
            assert_eq!(budget.spin_ask, SpinAsk::Rare);
            assert!(budget.asks(true, || unreachable!("the woken one is never asked")));
            assert!(budget.asks(false, || true) && !budget.asks(false, || false));
            budget.apply("spinask=0");
            assert_eq!(budget.spin_ask, SpinAsk::Never);
            assert!(!budget.asks(false, || true), "a rare thread does not ask");
            budget.apply("spinask=2");
            assert_eq!(budget.spin_ask, SpinAsk::Rare);
            budget.apply("spinask=1");
            assert!(budget.asks(false, || false), "every thread asks");
            budget.apply("spinask=3");
            assert_eq!(budget.spin_ask, SpinAsk::Every, "no such form: unchanged");
            budget.apply("ask=0");
            assert!(!budget.asks(true, || true) && !budget.asks(false, || true));
        }
    }

    #[test]
    fn a_thread_alone_spins_its_free_rounds() {
        let count = |budget: &SpinBudget, alone| {
            let mut spin = SpinWait::new();
            std::iter::from_fn(|| spin.spin(budget, false, false, alone).then_some(())).count()
                as u32
        };
        let two = SpinBudget::for_cpus(2);
        assert_eq!(
            count(&two, true),
            count(&two, false),
            "two CPUs: one budget"
        );
        let many = SpinBudget::for_cpus(16);
        assert_eq!(count(&many, true), 9, "nobody sleeps: nine rounds");
        assert_eq!(count(&many, false), many.pause_rounds);
        assert!(many.pause_rounds < 9);
    }

    #[test]
    fn pausefree_sets_the_free_rounds_whatever_the_order() {
        for cpus in [2, 16] {
            let mut budget = SpinBudget::for_cpus(cpus);
            let count = |budget: &SpinBudget, will_ask, alone| {
                let mut spin = SpinWait::new();
                std::iter::from_fn(|| spin.spin(budget, false, will_ask, alone).then_some(()))
                    .count() as u32
            };
            budget.apply("pausefree=9");
            assert_eq!(
                count(&budget, false, true),
                9,
                "nobody sleeps: the free rounds"
            );
            assert_eq!(count(&budget, false, false), budget.pause_rounds);
            assert_eq!(
                count(&budget, true, true),
                budget.ask_rounds.min(budget.pause_rounds),
                "a woken thread about to ask keeps its ask rounds"
            );
            budget.apply("pause=5");
            assert_eq!(
                count(&budget, false, true),
                9,
                "`pausefree` holds whatever the order"
            );
            assert_eq!(count(&budget, false, false), 5);
        }
        let mut plain = SpinBudget::for_cpus(2);
        plain.apply("pause=3");
        let mut spin = SpinWait::new();
        assert_eq!(
            std::iter::from_fn(|| spin.spin(&plain, false, false, true).then_some(())).count(),
            3,
            "without `pausefree`, `pause` is everyone's"
        );
    }
}
