//! One measurement of `bounce`: `bounces` bounces of one mode with one
//! handler mode, every page checked after every bounce.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use herdless_pager::{HandlerMode, MemSource, Pager, PagerError, PagerStats};

use super::area::{self, RegionPage, PAGE};
use super::{Params, HANDLERS, UF_METRICS};
use crate::harness::gang::{gang, share};
use crate::harness::scratch::xorshift;
use crate::harness::{Case, LabError, Sample};

/// Pages per `discard` call, and the granule of the copiers' shares.
const CHUNK: usize = 16;

/// Measures one case: the mean time, faults and per-handler faults per
/// bounce. Any page failing a check, and any error the pager reports,
/// fails the measurement.
pub(crate) fn measure(mode: HandlerMode, case: &Case<Params>) -> Result<Sample, LabError> {
    let p = case.params;
    if p.pages < 4 * CHUNK || p.threads == 0 || p.bounces == 0 {
        return Err(LabError::Definition(format!(
            "bounce needs at least {} pages, a thread and a bounce: {p:?}",
            4 * CHUNK
        )));
    }
    // The discarded quarter (pages from `zone` on), whole chunks.
    let zone = if p.discard {
        p.pages - (p.pages / 4) / CHUNK * CHUNK
    } else {
        p.pages
    };
    let expected: Vec<AtomicU64> = (0..p.pages).map(|_| AtomicU64::new(0)).collect();
    let mut src = area::initial(p.pages);
    let mut wall = Duration::ZERO;
    let mut faults = 0u64;
    let mut uf = [0u64; HANDLERS];
    for b in 0..p.bounces {
        let (w, stats, dst) = bounce(mode, &p, b, src, &expected, zone)?;
        wall += w;
        faults += stats.faults;
        let mut per = stats.per_handler_faults.clone();
        per.sort_unstable_by(|a, b| b.cmp(a));
        for (u, n) in uf.iter_mut().zip(per) {
            *u += n;
        }
        src = dst;
    }
    let n = p.bounces as f64;
    let mut s = Sample::new()
        .with("ms_per_bounce", wall.as_secs_f64() * 1e3 / n)
        .with("faults", faults as f64 / n);
    for (name, u) in UF_METRICS.iter().zip(uf) {
        s = s.with(name, u as f64 / n);
    }
    Ok(s)
}

fn pager_err(b: usize) -> impl Fn(PagerError) -> LabError {
    move |e| LabError::Sample(format!("bounce {b}: pager: {e}"))
}

/// One bounce: a pager over `src`, the threads, the checks. Returns the
/// threads' wall time, the pager's stats and the destination read back.
fn bounce(
    mode: HandlerMode,
    p: &Params,
    b: usize,
    src: Vec<u8>,
    expected: &[AtomicU64],
    zone: usize,
) -> Result<(Duration, PagerStats, Vec<u8>), LabError> {
    let bytes = p.pages * PAGE;
    let pager = Pager::builder(bytes)
        .source(MemSource::new(src))
        .fault_around(PAGE)
        .handlers(HANDLERS)
        .mode(mode)
        .build()
        .map_err(pager_err(b))?;
    let base = pager.as_ptr() as usize;
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let fail = |msg: String| {
        if let Ok(mut f) = failure.lock() {
            f.get_or_insert(msg);
        }
    };
    let copiers = if p.racing || p.discard { p.threads } else { 0 };
    let run = gang(p.threads + copiers + usize::from(p.discard), |i| {
        if i < p.threads {
            lock_and_count(base, p, b, i, expected, zone, &fail);
        } else if i < p.threads + copiers {
            copy_in_reverse(&pager, p, i - p.threads, copiers, &fail);
        } else {
            discard_zone(&pager, p, zone, &fail);
        }
    })?;
    pager.settle();
    let stats = pager.stats();
    if let Some(e) = pager.take_errors().into_iter().next() {
        return Err(pager_err(b)(e));
    }
    if let Some(msg) = failure.lock().ok().and_then(|mut f| f.take()) {
        return Err(LabError::Sample(format!("bounce {b}: {msg}")));
    }
    // Read back (faulting in pages nobody touched) and check every page.
    let mut dst = vec![0u8; bytes];
    pager.read(0, &mut dst).map_err(pager_err(b))?;
    drop(pager);
    area::verify(&dst, expected, zone).map_err(|m| LabError::Sample(format!("bounce {b}: {m}")))?;
    area::restore_zone(&mut dst, expected, zone);
    Ok((run.wall, stats, dst))
}

/// A faulting thread: locks pages, checks (`ver`) and increments their
/// counters; its own share in order, or as many random pages (`rnd`), all
/// below `zone`.
fn lock_and_count(
    base: usize,
    p: &Params,
    b: usize,
    t: usize,
    expected: &[AtomicU64],
    zone: usize,
    fail: &(impl Fn(String) + Sync),
) {
    let mine = share(t, p.threads, zone);
    let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ (((b as u64) << 32) | (t as u64 + 1));
    for k in mine {
        let page = if p.rnd {
            (xorshift(&mut x) % zone as u64) as usize
        } else {
            k
        };
        let pg = RegionPage::new(base, page);
        pg.lock();
        let count = pg.count();
        // `expected[page]` is written only under this page's lock, whose
        // Acquire/Release orders it: Relaxed is enough.
        let want = expected[page].load(Ordering::Relaxed);
        if p.ver && count != want {
            fail(format!(
                "page {page}: counter {count} under the lock, {want} last written"
            ));
        }
        pg.set_count(count + 1);
        expected[page].store(count + 1, Ordering::Relaxed);
        pg.unlock();
    }
}

/// A background copier (`racing`): fills its share of the area with
/// [`Pager::populate`], one page per call as uffd-stress copies, from its
/// end backwards, against the faulting threads walking forwards.
fn copy_in_reverse(
    pager: &Pager,
    p: &Params,
    c: usize,
    copiers: usize,
    fail: &(impl Fn(String) + Sync),
) {
    let chunks = share(c, copiers, p.pages / CHUNK);
    for page in (chunks.start * CHUNK..chunks.end * CHUNK).rev() {
        if let Err(e) = pager.populate(page * PAGE, PAGE) {
            fail(format!("populate: {e}"));
            return;
        }
    }
}

/// The discarder (`discard`): drops the pages from `zone` on, a chunk at a
/// time, while the copiers fill them.
fn discard_zone(pager: &Pager, p: &Params, zone: usize, fail: &(impl Fn(String) + Sync)) {
    for k in (zone..p.pages).step_by(CHUNK) {
        if let Err(e) = pager.discard(k * PAGE, CHUNK * PAGE) {
            fail(format!("discard: {e}"));
            return;
        }
    }
}
