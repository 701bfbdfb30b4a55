//! Which spinning threads may ask for a mutex (ASKING, `raw.rs`) once their
//! spin budget is spent, instead of going to sleep: an occasional locker
//! beside busy threads on many CPUs waits for one unlock, not behind the
//! busy threads asleep in the queue (issue 23). Each form below, with what
//! it cost and bought on 16 cores; `HERDLESS_MUTEX_TUNING=spinask=N`
//! chooses one for experiments (`spin.rs`).
//!
//! Measured and removed (stop 45): every thread asking, each at most once
//! per gap (`spinask=3`, a thread-local clock read where the thread would
//! otherwise park). At 50 µs, on 16 cores (two interleaved pairs against
//! `Never`), the occasional locker's p99 beside 15 and 32 busy threads was
//! 12–18 µs (against 35–397) but the busy threads' rows 0.73–0.77× at 8–32
//! threads (1/0): the hand-offs of every thread's paced requests. At 200
//! and 500 µs (two pairs each) 11.6–26.5 µs and the busy rows as without
//! it, but two of the four runs in a regime where the lock stayed on a few
//! CPUs and the slowest of 16 busy threads took 0.19–0.21 of the mean. On
//! 2 cores (stop 44, three interleaved pairs at 50 µs) the throughput rows
//! within each other's spread, but the locker's p99 beside one hog
//! 19.8–24.7 µs against 8.7–15.0. Rare threads asking alone did better on
//! both machines.

/// Which threads other than the woken one ask for the lock (ASKING,
/// `raw.rs`) once their spin budget is spent, instead of going to sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SpinAsk {
    /// None (`spinask=0`): stop 44's default. On 16 cores the occasional
    /// locker beside 15 and 32 busy threads then waited 19–103 and
    /// 35–397 µs at p99 (stop 45, four runs; std 56–66 and 86–138):
    /// having spun, it slept behind the busy threads asleep in the queue.
    Never,
    /// Rare threads (`spinask=2`, `rare_parker.rs`): the default. The
    /// occasional locker beside busy ones gets the lock at the next
    /// unlock instead of sleeping, and busy threads never ask, so the
    /// lock still stays on the CPUs that run. Measured on 16 cores (stop
    /// 45, two interleaved pairs of the `locks` tables against `Never`):
    /// the locker's p99 wait beside 15 and 32 busy threads 5.3–5.7 µs
    /// against 19–371 (std 55–123 in the same runs), the mutex rows
    /// against std as without it (8–32 threads, 1/0: 2.93–3.49× against
    /// 2.99–3.41×; 1 thread 0.96–1.00× against 0.97–1.00×); the slowest
    /// busy thread's share at 16 threads (1/0) 0.51–0.52 against
    /// 0.56–0.58 (std 0.54–0.64 in the four runs). Later runs (stop 45,
    /// eight more) had the locker at 5.7–7.4 µs in 9 of 12 cells and
    /// 317–635 µs in three, where the lock stayed on a few CPUs
    /// (`rare_parker.rs`, "Waiting for its turn"). On 2 cores (stop 44,
    /// four interleaved pairs of the mutex and locker tables) neither
    /// better nor worse: the locker's p99 beside one hog 8.6–13.8 µs
    /// against 10.9–15.2, beside four 11–56 against 10–55, the throughput
    /// rows within each other's spread.
    Rare,
    /// Every thread (`spinask=1`). Measured on 16 cores (stop 44, three
    /// interleaved pairs of the lab's `locks` tables against `Never`): the
    /// occasional locker's p99 wait beside 15 and 32 busy threads 17–25
    /// and 27–36 µs against 16–107 and 344–373 (std 58–71 and 79–130),
    /// and the slowest busy thread's share up (16 threads, 1/0: 0.57–0.69
    /// against 0.46–0.49; 32 threads, 5/50: 0.66–0.71 against 0.53–0.56);
    /// but the busy threads' acquisitions per second fell to 0.31–0.45×
    /// at 8–64 threads (1/0; 0.73–0.83× with work outside the lock): with
    /// a thread asking at nearly every unlock, the lock moves to another
    /// CPU on every acquisition, as in a FIFO lock, where without it the
    /// holder's CPU takes runs of them.
    Every,
}

impl SpinAsk {
    /// Every machine's default, except under loom, whose models explore
    /// the protocol with every contender asking (`raw.rs`).
    pub(super) const DEFAULT: SpinAsk = if cfg!(loom) {
        SpinAsk::Every
    } else {
        SpinAsk::Rare
    };
}
