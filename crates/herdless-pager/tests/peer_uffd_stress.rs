//! The Linux userfaultfd stress test's bounces, served by herdless-pager:
//! threads lock a mutex inside each page and count in it while the pages
//! are still being moved in by faults and by background copiers; every
//! count must survive every bounce. Ported from the kernel's
//! `tools/testing/selftests/mm/uffd-stress.c` (with `uffd-common.c`),
//! memory type `anon`; `docs/PEER_SUITES.md` maps each upstream mode and
//! check to what is here, and says what is not ported and why.
//!
//! Upstream, per bounce: the destination area is registered with
//! userfaultfd; per CPU, a *locking* thread takes the `pthread_mutex_t` at
//! the start of a page (faulting it in), checks the page's counter against
//! `count_verify` and increments both; a *handler* thread answers the
//! faults with `UFFDIO_COPY` from the source area; a *background* thread
//! copies its share of the pages (first half, second half) racing the
//! handlers. When the background threads are done the locking threads stop;
//! the areas swap and the next bounce moves the memory back. The bounce
//! number's bits choose the mode, counting down so every combination runs:
//! - bit 0 `rnd`: locking threads pick random pages (else walk in order);
//! - bit 1 `racing`: all locking threads walk the same pages, so faults on
//!   one page race each other (else each starts at its own share);
//! - bit 2 `ver`: after the bounce, every page's counter is verified in the
//!   destination area;
//! - bit 3 `poll`: handlers `poll()` the userfaultfd (else blocking `read()`).
//!
//! Here a bounce is one [`Pager`]: its region is the destination, the last
//! destination read back is its [`MemSource`], fault-around is off (one
//! page per fault, as upstream), its handler threads (one per locking
//! thread) run in [`HandlerMode::Poll`] or [`HandlerMode::BlockingRead`],
//! and the background threads copy with [`Pager::populate`], one page per
//! call as upstream's `copy_page_retry`. Sizes are scaled down (2 threads of
//! each kind, 256 pages each, 32 bounces split over two tests); the checks are upstream's,
//! plus two of herdless's own: every page transferred exactly once, and
//! every page of the read-back (lock, counter, placeholder, identity)
//! checked after every bounce.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

use common::*;
use herdless_pager::{HandlerMode, MemSource, Pager};

/// Locking, handler and background threads, each (upstream: one per CPU).
const THREADS: usize = 2;
/// Pages each background thread copies (upstream: the area / CPUs).
const PAGES_PER_THREAD: usize = 256;
const PAGES: usize = THREADS * PAGES_PER_THREAD;
/// Pages each locking thread locks before the background copy starts
/// (herdless's addition: upstream starts all threads at once on areas of
/// thousands of pages, where the copy cannot outrun the faults; on these
/// small areas it could, and a bounce would then serve no fault at all).
const HEAD_START: usize = 8;

/// Upstream's bounce count (`uffd-stress anon <MiB> 32`): the two tests
/// split the bounces by the `poll` bit, 16 each.
const BOUNCES: usize = 32;

const BOUNCE_RANDOM: usize = 1 << 0;
const BOUNCE_RACINGFAULTS: usize = 1 << 1;
const BOUNCE_VERIFY: usize = 1 << 2;
const BOUNCE_POLL: usize = 1 << 3;

// The layout of every page (upstream's `area_mutex`/`area_count`): the
// mutex, the counter, a placeholder that is never zero, and (herdless's
// addition) the page's number + 1; the rest is zeros.
const MUTEX: usize = 0;
const COUNT: usize = std::mem::size_of::<libc::pthread_mutex_t>().next_multiple_of(8);
const PLACEHOLDER: usize = COUNT + 8;
const IDENTITY: usize = PLACEHOLDER + 8;

fn word(buf: &[u8], page: usize, off: usize) -> u64 {
    let at = page * PAGE + off;
    u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap())
}

fn set_word(buf: &mut [u8], page: usize, off: usize, v: u64) {
    let at = page * PAGE + off;
    buf[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// The first source (upstream's `uffd_test_ctx_init`): every page an
/// unlocked mutex, counter 1, placeholder 1; `count_verify` all 1.
fn initial_area() -> (Vec<u8>, Vec<AtomicU64>) {
    let mut area = vec![0u8; PAGES * PAGE];
    let unlocked = libc::PTHREAD_MUTEX_INITIALIZER;
    // SAFETY: a pthread_mutex_t is plain data; viewing the initializer's
    // bytes reads initialized memory of exactly its size.
    let unlocked = unsafe {
        std::slice::from_raw_parts(
            (&unlocked as *const libc::pthread_mutex_t).cast::<u8>(),
            std::mem::size_of::<libc::pthread_mutex_t>(),
        )
    };
    for p in 0..PAGES {
        area[p * PAGE + MUTEX..p * PAGE + MUTEX + unlocked.len()].copy_from_slice(unlocked);
        set_word(&mut area, p, COUNT, 1);
        set_word(&mut area, p, PLACEHOLDER, 1);
        set_word(&mut area, p, IDENTITY, p as u64 + 1);
    }
    let count_verify = (0..PAGES).map(|_| AtomicU64::new(1)).collect();
    (area, count_verify)
}

/// The modes of upstream's bounce number `bounces`.
#[derive(Clone, Copy, Debug)]
struct Mode(usize);

impl Mode {
    fn has(self, bit: usize) -> bool {
        self.0 & bit != 0
    }

    fn handler_mode(self) -> HandlerMode {
        if self.has(BOUNCE_POLL) {
            HandlerMode::Poll
        } else {
            HandlerMode::BlockingRead
        }
    }

    /// Upstream's `bounces: N, mode: rnd racing ver poll` line.
    fn describe(self) -> String {
        let mut s = format!("bounces: {}, mode:", self.0);
        for (bit, name) in [
            (BOUNCE_RANDOM, " rnd"),
            (BOUNCE_RACINGFAULTS, " racing"),
            (BOUNCE_VERIFY, " ver"),
        ] {
            if self.has(bit) {
                s.push_str(name);
            }
        }
        s.push_str(if self.has(BOUNCE_POLL) {
            " poll"
        } else {
            " read"
        });
        s
    }
}

/// The first failure any thread of a bounce saw (upstream's `err()` exits
/// the process; here the thread records it, releases what it holds so no
/// other thread hangs, and stops).
#[derive(Default)]
struct Failure(Mutex<Option<String>>);

impl Failure {
    fn set(&self, msg: String) {
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(msg);
    }

    fn seen(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Upstream's `locking_thread`: until the background copy is finished (and
/// at least `PAGES` times here, so that every run touches pages), lock a
/// page's mutex (the first touch of a missing page faults inside
/// `pthread_mutex_lock`), check its counter against `count_verify`, and
/// increment both. Counts itself in `started` after `HEAD_START` pages (or
/// when it stops early).
fn locking_thread(
    base: usize,
    mode: Mode,
    cpu: usize,
    count_verify: &[AtomicU64],
    (started, finished): (&AtomicUsize, &AtomicBool),
    failure: &Failure,
) {
    let mut head_start = HeadStart {
        started,
        counted: false,
        failure,
    };
    // Upstream: page_nr = -bounces (+ cpu * nr_pages_per_cpu unless racing).
    let mut page_nr = PAGES - mode.0 % PAGES;
    if !mode.has(BOUNCE_RACINGFAULTS) {
        page_nr += cpu * PAGES_PER_THREAD;
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (((mode.0 as u64) << 32) | (cpu as u64 + 1)));
    let mut ops = 0;
    // Acquire pairs with the Release store after the background threads
    // joined: nothing else is published through it (the loop only stops).
    loop {
        let done = finished.load(Ordering::Acquire) && ops >= PAGES;
        if done || failure.seen() {
            break;
        }
        if ops == HEAD_START {
            head_start.count_in();
        }
        ops += 1;
        page_nr = (if mode.has(BOUNCE_RANDOM) {
            rng.next() as usize
        } else {
            page_nr + 1
        }) % PAGES;
        let page = base + page_nr * PAGE;
        let mutex = (page + MUTEX) as *mut libc::pthread_mutex_t;
        let counter = (page + COUNT) as *mut u64;
        // SAFETY: the page lies in the pager's region, mapped while the
        // pager lives (it outlives these threads); the mutex was
        // initialized in the source the page is copied from, and the region
        // is only ever accessed through raw pointers.
        let rc = unsafe { libc::pthread_mutex_lock(mutex) };
        if rc != 0 {
            failure.set(format!("pthread_mutex_lock on page {page_nr}: error {rc}"));
            break;
        }
        // SAFETY: the counter is in the same page, read and written only
        // under its mutex.
        let count = unsafe { counter.read() };
        // `count_verify[page_nr]` is written only under this page's mutex,
        // which orders it: Relaxed is enough.
        let want = count_verify[page_nr].load(Ordering::Relaxed);
        if count != want {
            failure.set(format!(
                "{}: page_nr {page_nr} memory corruption {count} {want}",
                mode.describe()
            ));
        } else {
            // SAFETY: as for the read, under the mutex.
            unsafe { counter.write(count + 1) };
            count_verify[page_nr].store(count + 1, Ordering::Relaxed);
        }
        // SAFETY: this thread locked `mutex` above.
        let rc = unsafe { libc::pthread_mutex_unlock(mutex) };
        if rc != 0 {
            failure.set(format!(
                "pthread_mutex_unlock on page {page_nr}: error {rc}"
            ));
            break;
        }
    }
}

/// A locking thread's count in `started`: once after its head start, or
/// when it stops, also by a panic (then recorded as a failure), so that
/// the background threads are never left waiting.
struct HeadStart<'a> {
    started: &'a AtomicUsize,
    counted: bool,
    failure: &'a Failure,
}

impl HeadStart<'_> {
    fn count_in(&mut self) {
        if !std::mem::replace(&mut self.counted, true) {
            // Release pairs with the background threads' Acquire load; it
            // only orders their start after these pages were locked.
            self.started.fetch_add(1, Ordering::Release);
        }
    }
}

impl Drop for HeadStart<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.failure.set("a locking thread panicked".to_string());
        }
        self.count_in();
    }
}

/// Upstream's `background_thread`: copies this thread's share of the
/// pages, the first half then the second, one page per call; here once
/// every locking thread has its head start.
fn background_thread(pager: &Pager, cpu: usize, started: &AtomicUsize, failure: &Failure) {
    // Acquire pairs with the locking threads' Release increments.
    while started.load(Ordering::Acquire) < THREADS && !failure.seen() {
        thread::yield_now();
    }
    let (start, end) = (cpu * PAGES_PER_THREAD, (cpu + 1) * PAGES_PER_THREAD);
    let mid = (start + end) / 2;
    for page_nr in (start..mid).chain(mid..end) {
        if let Err(e) = pager.populate(page_nr * PAGE, PAGE) {
            failure.set(format!("populate page {page_nr}: {e}"));
            return;
        }
    }
}

/// Checks every page of a destination read back after a bounce: unlocked
/// mutex, the counter last written (`count_verify`), the placeholder and
/// the page's identity.
fn verify_read_back(area: &[u8], count_verify: &[AtomicU64], mode: Mode) {
    for (p, want) in count_verify.iter().enumerate() {
        let want = want.load(Ordering::Relaxed);
        let (count, placeholder, identity) = (
            word(area, p, COUNT),
            word(area, p, PLACEHOLDER),
            word(area, p, IDENTITY),
        );
        assert_eq!(
            (count, placeholder, identity),
            (want, 1, p as u64 + 1),
            "{}: page {p} read back (counter, placeholder, identity)",
            mode.describe()
        );
        // SAFETY: the bytes of an initialized mutex, read as one; trylock
        // on a private copy tells whether it was left locked.
        let mut m: libc::pthread_mutex_t =
            unsafe { std::ptr::read_unaligned(area[p * PAGE + MUTEX..].as_ptr().cast()) };
        // SAFETY: `m` is a valid mutex value owned by this frame.
        let rc = unsafe { libc::pthread_mutex_trylock(&mut m) };
        assert_eq!(rc, 0, "{}: page {p} was left locked", mode.describe());
        // SAFETY: locked just above by this thread.
        unsafe { libc::pthread_mutex_unlock(&mut m) };
    }
}

/// One bounce (upstream's `stress()` and what `userfaultfd_stress()` does
/// around it): returns the destination read back, the next bounce's
/// source; `None` if the test was skipped (no userfaultfd here).
fn bounce(mode: Mode, src: Vec<u8>, count_verify: &[AtomicU64]) -> Option<Vec<u8>> {
    let pager = build(
        Pager::builder(PAGES * PAGE)
            .source(MemSource::new(src))
            .fault_around(PAGE)
            .handlers(THREADS)
            .mode(mode.handler_mode()),
    )?;
    let base = pager.as_ptr() as usize;
    let started = AtomicUsize::new(0);
    let finished = AtomicBool::new(false);
    let failure = Failure::default();
    thread::scope(|s| {
        let (started, finished, failure, pager) = (&started, &finished, &failure, &pager);
        for cpu in 0..THREADS {
            let flags = (started, finished);
            s.spawn(move || locking_thread(base, mode, cpu, count_verify, flags, failure));
        }
        let background: Vec<_> = (0..THREADS)
            .map(|cpu| s.spawn(move || background_thread(pager, cpu, started, failure)))
            .collect();
        for b in background {
            if b.join().is_err() {
                // Stops the locking threads too (they watch `failure`).
                failure.set("a background thread panicked".to_string());
            }
        }
        // Release: see the Acquire in `locking_thread`.
        finished.store(true, Ordering::Release);
    });
    if let Some(msg) = failure.take() {
        panic!("{msg}");
    }
    pager.settle();
    let st = pager.stats();
    assert!(pager.take_errors().is_empty(), "{}", mode.describe());
    // Every page was moved exactly once, by a fault or by a background
    // copier (upstream: a copy is complete or EEXIST, never partial).
    assert_eq!(
        st.pages_installed(),
        PAGES as u64,
        "{}: {st:?}",
        mode.describe()
    );
    // The first page locked was missing and nothing copied yet: at least
    // one page moved by a fault, served by a handler, in every bounce.
    assert!(st.pages_on_demand >= 1, "{}: {st:?}", mode.describe());
    assert_eq!(st.per_handler_faults.len(), THREADS);
    assert_eq!(st.per_handler_faults.iter().sum::<u64>(), st.faults);
    // Upstream's test_uffdio_copy_eexist: copying a page that is already
    // there is refused (EEXIST) and changes nothing: the pager fills none.
    assert_eq!(pager.populate(0, PAGES * PAGE).unwrap(), 0);
    if mode.has(BOUNCE_VERIFY) {
        // Upstream's verification, in the destination area itself: every
        // counter is the one last written. Upstream reads it unregistered,
        // where a page never moved reads zero; here such a page would fault,
        // hence the fault count must not move.
        for (p, want) in count_verify.iter().enumerate() {
            // SAFETY: the counter of page `p` of the live region; every
            // locking thread has finished, so nothing writes it.
            let count = unsafe { ((base + p * PAGE + COUNT) as *const u64).read_volatile() };
            let want = want.load(Ordering::Relaxed);
            assert_eq!(count, want, "{}: error area_count {p}", mode.describe());
        }
        pager.settle();
        assert_eq!(pager.stats().faults, st.faults, "{}", mode.describe());
    }
    let mut dst = vec![0u8; PAGES * PAGE];
    pager.read(0, &mut dst).unwrap();
    pager.settle();
    assert_eq!(pager.stats().faults, st.faults, "{}", mode.describe());
    drop(pager);
    verify_read_back(&dst, count_verify, mode);
    println!(
        "{}, userfaults: {} missing ({:?}), {} copied in the background",
        mode.describe(),
        st.faults,
        st.per_handler_faults,
        st.pages_populated
    );
    Some(dst)
}

/// Upstream's `while (bounces--)` from `BOUNCES`, keeping the bounces
/// whose `poll` bit is `poll`: each bounce's destination is the next one's
/// source.
fn bounces(poll: bool) {
    let (mut area, count_verify) = initial_area();
    for nr in (0..BOUNCES)
        .rev()
        .filter(|nr| Mode(*nr).has(BOUNCE_POLL) == poll)
    {
        let Some(next) = bounce(Mode(nr), area, &count_verify) else {
            return; // skipped: no userfaultfd here
        };
        area = next;
    }
}

#[test]
fn poll_handler_bounces_in_every_rnd_racing_ver_mode_keep_every_counter() {
    // Bounces 31..0 with BOUNCE_POLL set: each rnd/racing/ver combination twice.
    bounces(true);
}

#[test]
fn blocking_read_handler_bounces_in_every_rnd_racing_ver_mode_keep_every_counter() {
    // Bounces 31..0 without it: blocking reads, each combination twice.
    bounces(false);
}
