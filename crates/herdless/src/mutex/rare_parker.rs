//! Which threads sleep at the head of a mutex's queue instead of its tail:
//! those that rarely find a mutex taken (issue 23's occasional locker).
//!
//! On many CPUs, threads that hammer a mutex keep it on the CPUs that run
//! (`raw.rs`), and the ones that lose sleep in a queue that moves on one
//! wake-up per hand-off. A thread that takes the lock once in a while and
//! finds it taken would wait behind all of them: on 16 cores, beside 15
//! and 32 hogs, its p99 wait was 128–502 µs without this rule (2.3–4.8×
//! std's, stop 35; 0.2–2.4 ms in an earlier session's runs). Such a
//! thread is therefore queued first, as the woken thread that lost its
//! race is, while the busy threads keep their first-come order behind it.
//! This is the scheduler's sleeper credit (CFS, EEVDF) applied to a lock
//! queue: a thread that asked for little goes ahead of those that ask all
//! the time. It only orders the queue: who may take the lock, and every
//! step of the protocol in `raw.rs`, stay the same.
//!
//! # Who counts as rare
//! A thread about to sleep on a mutex is rare if it never slept on one
//! before, or if its previous sleep began at least the budget's
//! `rare_gap` ago *and* it found a mutex taken (took the slow path) at
//! most once per `rare_gap` since then, on average. A busy thread takes the
//! slow path on almost every acquisition, so it never counts, however long
//! it ran between sleeps; an occasional locker counts every time. Counting
//! is one thread-local add on the slow path; the clock is read only when
//! the thread is about to sleep.
//!
//! # No stream of rare threads starves anyone
//! Rare threads do not all go to the head: one goes ahead only if the
//! waiter at the head did not go ahead itself and was not passed by the
//! last one that did (`futex::bucket::Queue::may_pass_head`). So a waiter
//! is passed at most once while it is first, and rare threads keep their
//! arrival order among themselves. Both are kept by address, and a
//! thread sleeps in the same record slot every time: a later sleep of a
//! thread passed once counts as passed while it is first, and the rare
//! thread then queues at the tail (`Queue::unlink`: what forgetting them
//! measured on 2 cores, and the experiment for 16). A rare thread never goes ahead of a task: threads and
//! tasks keep their arrival order (`lock_async.rs`).
//!
//! # On two CPUs: park, do not yield
//! On two CPUs a thread that finds the mutex taken yields after spinning
//! (`spin.rs`), and a yield next to a busy holder can hand that holder the
//! rest of a time slice: an occasional locker beside one hog waited 1.8–3.9
//! ms at p99 (std: 14–56 µs). A rare thread therefore skips the yields
//! and parks at once, at the head, and the holder's next unlock wakes it.
//! Not on a mutex a condvar waits with (MONITOR, `raw.rs`), whose threads
//! count as rare whenever they slept on the condvar rather than the mutex:
//! its spin policy stays as it was. Measured on 2 cores (stop 35, the
//! lab's `locks` tables for the mutex, the occasional locker and the
//! queue, interleaved with `rare=0`, two rounds each way): the locker beside
//! one hog 31.7–35.7 µs (3,583–3,870 without; std 14.6–16.3), beside four
//! 39.6–47.8 µs (111–135 without; std 217–2,863); the mutex throughput
//! and queue rows within the runs' spread (mutex 8–32 threads 3.28–3.55×
//! std against 3.21–3.54×). Three earlier rounds without the MONITOR
//! exception gave the locker 30.6–37.4 µs.
//!
//! Nor does it watch its grant word before the futex wait (the budget's
//! `rare_watch`, 0 on two CPUs; everyone else watches for `watch`, 400
//! spin-loop hints). Its grant comes from the holder's unlock, and the
//! holder may run on the same CPU: then every hint of the watch is time
//! the holder cannot run, and the unlock that would end the watch comes
//! after it (stop 42: beside one hog, 256–363 of 820–873 acquisitions
//! made while the hog ran on the locker's CPU took over 5 µs, against
//! 4–13 of 3,127–3,180 with it on the other CPU). Measured on 2 cores (stop
//! 42, eight interleaved pairs of the occasional-locker table against
//! `rarewatch=400`): beside one hog 6.6–15.9 µs at p99 against 15.9–21.6
//! (0.82–2.12× std's, median 1.47×, against 0.83–2.95×, median 2.24×),
//! beside four 8.0–29.4 µs against 19.5–39.0; eight pairs of the mutex
//! throughput table and three of the whole `locks` within each other's
//! spread (32 threads, 1/0: 2.02–4.06× std against 2.00–4.16×). On more
//! CPUs the holder rarely shares the sleeper's, and the rare thread
//! watches as everyone does (stop 40: no watch at all did not change the
//! locker's p99 on 16 cores).
//!
//! # The gap, measured
//! The default is 250 µs (`HERDLESS_MUTEX_TUNING=rare=MICROSECONDS` sets it
//! for experiments; 0 turns it off). Measured on 16 cores (Intel Xeon,
//! Linux 6.18, stop 35, the lab's `locks` quick suite, counters off), with
//! a first form of this file: rare was a sleep that began at least the gap
//! after the thread's previous one, and every rare thread went to the
//! head. The occasional locker's p99 wait beside 15 and 32 hogs:
//! - off: 128–151 µs and 389–502 µs in four runs (std 55–74 and 85–153);
//! - 250 µs: 14.4–46.6 µs and 32.5–38.1 µs in three runs (std 60–101 and
//!   81–98): 0.18–0.65× std;
//! - 1 ms: 16.7/51.5 µs in one run, 305/1,331 µs in another: the lab's
//!   locker comes back once per millisecond, so with a 1 ms gap about half
//!   of its back-to-back sleeps did not count;
//! - 4 ms: 141/363 µs, as off.
//!
//! The throughput rows and the slowest thread's share moved within the
//! runs' spread (herdless/std at 16 threads, 1/0: 3.05–3.58× off,
//! 3.12–3.93× at 250 µs). That form let a busy thread that ran 250 µs
//! without sleeping go to the head too (at 16 threads they sleep every
//! ~150 µs on average), and a stream of rare threads would have been served
//! newest first. The form here keeps the locker's place (it counts as rare
//! either way, and the only waiters it cannot pass are the last one that
//! went ahead and the one that one passed) and leaves the busy threads in
//! the order they had with the rule off. On many CPUs the budget does not
//! yield, so the two-CPU rule above changes nothing there.
//!
//! The form here, measured on 16 cores (stop 36, the same kind of
//! machine, counters off), does not show stop 35's gain: the locker's p99
//! beside 15 and 32 hogs was 15–245 µs and 331–593 µs in four runs (one
//! with counters on; std 48–72 and 80–190), against 148 and 604 µs with the rule off and 111
//! and 547 µs with the first form's definition of rare
//! (`HERDLESS_MUTEX_TUNING=rarecount=0`), each interleaved with a default
//! run. Its median wait stayed below a microsecond, under std's; what
//! sets the tail there is not the queue's order alone. At 32 hogs on 16
//! CPUs a likely part is that herdless's hogs spin rather than sleep (2–3
//! sleeps per 1,000 acquisitions against std's 13), so a woken locker, or
//! a woken hog holding the one wake, waits for a CPU; this is not yet
//! counted. The rule stays for what it does on two CPUs; on sixteen the
//! hogs' throughput was the same with it and without (16–25 M
//! acquisitions/s beside 15 hogs, 20–25 M beside 32).
//!
//! What the tail on sixteen CPUs needed was the rare thread asking for the
//! lock when its spin budget is spent, instead of sleeping at all
//! (`spin_ask.rs`, `SpinAsk::Rare`, the default since stop 45): the next
//! unlock hands it the lock. Its p99 beside 15 and 32 hogs fell to
//! 5.3–5.7 µs (two interleaved pairs; 19–371 µs without, std 55–123),
//! with the hogs' rows against std as without it.
//!
//! # Waiting for its turn (an experiment)
//! Only one thread asks at a time (`raw.rs`), so a rare thread whose spin
//! budget is spent while another thread asks sleeps instead, at the head
//! of the queue if it may pass the head, else at the tail, behind every
//! busy sleeper. On 16 cores (stop 45) its p99 beside 15 and 32 hogs was
//! 5.3–7.4 µs in 13 of 16 cells but 317–635 µs in three, in runs where
//! the lock stayed on a few CPUs (the hogs at twice their usual rate). A
//! guess until counted (the stats build's `ahead_refused_share` and the
//! hogs' sleeps): there the other hogs sleep, a woken one is nearly
//! always asking, and a locker sent to the tail of that long queue waits
//! through it at one wake per sleeper.
//! `HERDLESS_MUTEX_TUNING=rareturns=N` lets a rare thread that would ask
//! spin up to `N` more budgets for the asker to be served and ask then;
//! 0, the default, keeps it as measured. Spinning is all it changes: the
//! protocol, and who may ask, stay the same. On 2 cores (stop 45, three
//! interleaved pairs, `rareturns=4`) neither better nor worse: the
//! locker's p99 beside one hog 6.6–13.5 µs against 10.7–13.7, beside four
//! 12.7–81 against 40–73, the mutex rows within each other's spread
//! (8–32 threads, 1/0: 3.24–3.89× std against 2.00–3.45×). The 16-core
//! machine decides it (README, "Stop 45 on 16 cores").

use std::time::Duration;

use super::spin::SpinBudget;
use super::spin_ask::SpinAsk;

#[cfg(not(loom))]
use std::cell::Cell;
#[cfg(not(loom))]
use std::time::Instant;

/// A thread's recent contention: when it last began to sleep on a mutex,
/// and how many times since then it found one taken.
#[cfg(not(loom))]
#[derive(Clone, Copy)]
struct History {
    last_sleep: Option<Instant>,
    contended: u32,
}

#[cfg(not(loom))]
std::thread_local! {
    static HISTORY: Cell<History> = const {
        Cell::new(History { last_sleep: None, contended: 0 })
    };
}

/// One slow-path acquisition's question "is this thread rare?": it counts
/// the acquisition as contended when it starts, and asks (and records the
/// sleep) at its first park only, since a park that failed its validation
/// is no sleep.
pub(super) struct RareQuestion {
    gap: Duration,
    answer: Option<bool>,
    peeked: Option<bool>,
    /// Budgets left to spin for its turn to ask ("Waiting for its turn").
    turns_left: u32,
}

impl RareQuestion {
    /// For an acquisition that found the mutex taken; `woken`: it starts
    /// as a woken thread (a condvar waiter moved onto the mutex), which
    /// neither counts nor asks. With the budget's `rare_counts` off (an
    /// experiment: `HERDLESS_MUTEX_TUNING=rarecount=0`) nothing is counted,
    /// and a sleep that begins a gap after the last one is rare.
    pub(super) fn new(budget: &SpinBudget, woken: bool) -> Self {
        let gap = budget.rare_gap;
        if !woken && !gap.is_zero() && budget.rare_counts {
            note_contended();
        }
        let asks = !woken && budget.spin_ask == SpinAsk::Rare;
        RareQuestion {
            gap,
            answer: None,
            peeked: None,
            turns_left: if asks { budget.rare_turns } else { 0 },
        }
    }

    /// A thread that spun in vain finds another thread asking for the
    /// lock: whether it spins one more budget for its turn to ask, being
    /// rare, instead of sleeping ("Waiting for its turn").
    pub(super) fn waits_for_turn(&mut self) -> bool {
        if self.turns_left == 0 || !self.peek() {
            return false;
        }
        self.turns_left -= 1;
        true
    }

    /// Whether the thread would be rare if it slept now, without recording
    /// a sleep (asked once per acquisition): a rare thread parks instead of
    /// yielding on a plain mutex (`raw.rs`; module docs, "On two CPUs").
    pub(super) fn peek(&mut self) -> bool {
        let gap = self.gap;
        *self.peeked.get_or_insert_with(|| is_rare(gap, false))
    }

    /// Whether the thread, about to sleep, is rare (asked once per
    /// acquisition, and recorded as a sleep: [`is_rare`]).
    pub(super) fn ask(&mut self) -> bool {
        let gap = self.gap;
        *self.answer.get_or_insert_with(|| is_rare(gap, true))
    }
}

/// Counts one acquisition that found the mutex taken (the slow path), for
/// [`is_rare`]. Nothing under loom.
fn note_contended() {
    #[cfg(not(loom))]
    HISTORY.with(|history| {
        let mut h = history.get();
        h.contended = h.contended.saturating_add(1);
        history.set(h);
    });
}

/// Whether this thread is rare now (module docs); `record`: it is about
/// to sleep on a mutex, which starts a new history. A zero `gap` turns
/// this off (always `false`, nothing recorded); so does loom, whose models
/// explore the queue's orders without it.
fn is_rare(gap: Duration, record: bool) -> bool {
    #[cfg(loom)]
    {
        let _ = (gap, record);
        false
    }
    #[cfg(not(loom))]
    {
        if gap.is_zero() {
            return false;
        }
        let now = Instant::now();
        let h = HISTORY.with(|history| {
            let h = history.get();
            if record {
                history.set(History {
                    last_sleep: Some(now),
                    contended: 0,
                });
            }
            h
        });
        h.last_sleep
            .is_none_or(|then| now.duration_since(then) >= gap.saturating_mul(h.contended.max(1)))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Runs `check` on a thread of its own: a fresh history.
    fn on_a_fresh_thread(check: impl FnOnce() + Send + 'static) {
        std::thread::spawn(check).join().unwrap();
    }

    /// A sleep about to begin: is the thread rare? (recorded)
    fn sleeps_rarely(gap: Duration) -> bool {
        is_rare(gap, true)
    }

    #[test]
    fn a_thread_is_rare_first_and_after_the_gap_but_not_within_it() {
        on_a_fresh_thread(|| {
            let hour = Duration::from_secs(3600);
            let short = Duration::from_millis(2);
            assert!(sleeps_rarely(hour), "a thread that never slept is rare");
            assert!(!sleeps_rarely(hour), "a second sleep within the gap is not");
            std::thread::sleep(short);
            assert!(sleeps_rarely(short), "a sleep after the gap is rare again");
            std::thread::sleep(short);
            assert!(!sleeps_rarely(Duration::ZERO), "a zero gap turns it off");
            assert!(sleeps_rarely(short), "and records nothing");
        });
    }

    #[test]
    fn a_thread_that_found_mutexes_taken_often_since_its_last_sleep_is_not_rare() {
        on_a_fresh_thread(|| {
            let gap = Duration::from_millis(2);
            assert!(sleeps_rarely(gap));
            for _ in 0..1_000_000 {
                note_contended();
            }
            std::thread::sleep(gap);
            // Past the gap, but a million contended acquisitions would need
            // 2,000 s to be one per gap.
            assert!(!sleeps_rarely(gap), "a busy thread is not rare");
            note_contended();
            std::thread::sleep(gap);
            assert!(sleeps_rarely(gap), "one contended acquisition in a gap is");
        });
    }

    #[test]
    fn only_a_rare_thread_waits_for_its_turn_and_only_so_often() {
        on_a_fresh_thread(|| {
            let hour = Duration::from_secs(3600);
            let mut budget = SpinBudget {
                rare_gap: hour,
                spin_ask: SpinAsk::Rare,
                rare_turns: 2,
                ..*SpinBudget::get()
            };
            let mut question = RareQuestion::new(&budget, false);
            assert!(question.waits_for_turn() && question.waits_for_turn());
            assert!(!question.waits_for_turn(), "two turns, then it sleeps");
            assert!(
                !RareQuestion::new(&budget, true).waits_for_turn(),
                "a woken thread asks as the woken one"
            );
            budget.spin_ask = SpinAsk::Every;
            assert!(
                !RareQuestion::new(&budget, false).waits_for_turn(),
                "only where rare threads are the ones that ask"
            );
        });
    }

    #[test]
    fn peeking_records_no_sleep() {
        on_a_fresh_thread(|| {
            let hour = Duration::from_secs(3600);
            let budget = SpinBudget {
                rare_gap: hour,
                ..*SpinBudget::get()
            };
            let mut question = RareQuestion::new(&budget, false);
            assert!(question.peek(), "a thread that never slept is rare");
            assert!(question.ask(), "and still is: the peek recorded nothing");
            assert!(question.peek(), "a peek is asked once per acquisition");
            assert!(
                !RareQuestion::new(&budget, false).peek(),
                "the ask recorded a sleep"
            );
        });
    }
}
