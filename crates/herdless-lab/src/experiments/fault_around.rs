//! `fault-around` (seed 002, "mm: map few pages around fault address if
//! they are in page cache", Shutemov 2014): the usemem shape. T threads
//! read a file-backed region, sequentially or in a shuffled order, summing
//! every word and checking the sum against the file's, through
//! [`Pager`] with fault-around windows of 4 KiB (before), 16 KiB and
//! 64 KiB (after), in minor-fault mode, and through the kernel's own
//! `mmap`. The lab README's `fault-around` section gives the sizes,
//! variants, metrics and targets.

use herdless_pager::{FileSource, HandlerMode, Pager};
use serde::Serialize;

use crate::harness::affinity::{allowed_cpus, Pin};
use crate::harness::gang::{self, gang};
use crate::harness::scratch::{self, xorshift, PAGE};
use crate::harness::{Case, Experiment, LabError, Metric, PerSuite, Ratio, Role, Sample, Section};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Reader threads.
    pub threads: usize,
    /// Random page order instead of sequential shares.
    pub random: bool,
    /// Region (and file) size in bytes.
    pub bytes: usize,
}

/// How a variant maps the file.
#[derive(Clone, Copy, Debug)]
enum How {
    /// The pager with this fault-around window.
    Window(usize),
    /// The pager in minor-fault mode with this window.
    Minor(usize),
    /// The kernel's own `mmap`.
    Kernel,
}

/// The experiment.
pub fn experiment() -> Experiment {
    Experiment::new(
        "fault-around",
        "seed 002, mm: map few pages around fault address if they are in page cache \
         (Shutemov, 2014): a userfaultfd pager mapping a 64 KiB window per fault",
    )
    .claim(
        "time to complete down 80% on sequential multi-threaded reads of a file; no significant \
         change on the git test suite or a kernel build",
    )
    .mechanism(
        "on a fault, the pages around the address that are already in the page cache are \
         mapped as well (16 pages, asked for without blocking), so a sequential reader faults \
         once per window instead of once per page",
    )
    .section(
        section(
            "sequential (targets at 1 thread: 4k/64k time ≥ 3, minor-64k/kernel ≤ 1.5)",
            false,
            &[1, 2, 8],
        )
        .ratio(
            Ratio::of("window-4k", "window-64k")
                .at_least(3.0)
                .at_case("1"),
        )
        .ratio(
            Ratio::of("minor-64k", "kernel-mmap")
                .at_most(1.5)
                .at_case("1"),
        )
        .ratio(Ratio::of("window-64k", "kernel-mmap")),
    )
    .section(
        section("random", true, &[1, 8])
            .ratio(Ratio::of("window-4k", "window-64k"))
            .ratio(Ratio::of("minor-64k", "kernel-mmap")),
    )
}

/// A section; `quick` lists the quick suite's thread counts.
fn section(title: &'static str, random: bool, quick: &[usize]) -> Section<Params> {
    let cases = |threads: &[usize], bytes: usize| {
        Case::each(threads, |threads| Params {
            threads,
            random,
            bytes,
        })
    };
    Section::new(
        title,
        "threads",
        PerSuite {
            smoke: cases(&[1, 2], 8 << 20),
            quick: cases(quick, 64 << 20),
            full: cases(&[1, 2, 8], 256 << 20),
        },
    )
    .metric(Metric::lower("time_ms", "ms"))
    .metric(Metric::lower("faults", "faults"))
    .metric(Metric::higher("pages_per_fault", "pages"))
    .metric(Metric::lower("kernel_faults", "faults"))
    .evidence(&["faults", "pages_per_fault"])
    .variants(
        measure,
        [
            ("window-4k", Role::Before, How::Window(4 << 10)),
            ("window-16k", Role::Peer, How::Window(16 << 10)),
            ("window-64k", Role::After, How::Window(64 << 10)),
            ("minor-64k", Role::Peer, How::Minor(64 << 10)),
            ("kernel-mmap", Role::Kernel, How::Kernel),
        ],
    )
}

/// The pages thread `t` of `threads` reads of `pages` pages, as runs
/// (first page, length): its share in one run, or page by page shuffled.
fn share(t: usize, threads: usize, pages: usize, random: bool) -> Vec<(usize, usize)> {
    let mine = gang::share(t, threads, pages);
    if !random {
        return vec![(mine.start, mine.len())];
    }
    let mut mine: Vec<(usize, usize)> = mine.map(|p| (p, 1)).collect();
    let mut x = 0x2545_F491_4F6C_DD1D_u64 ^ (t as u64 + 1);
    for i in (1..mine.len()).rev() {
        mine.swap(i, (xorshift(&mut x) % (i as u64 + 1)) as usize);
    }
    mine
}

fn measure(how: How, case: &Case<Params>) -> Result<Sample, LabError> {
    let Params {
        threads,
        random,
        bytes,
    } = case.params;
    let backing = scratch::pattern_file(bytes)?;
    let pages = bytes / PAGE;
    let want = backing.sum(&[(0, pages)]);
    let file = backing
        .file
        .try_clone()
        .map_err(|e| LabError::os("dup backing file", e))?;
    // One reader: it and the pager's handler share one CPU (threads
    // inherit the pin, so the handlers and the gang's worker get it), for
    // every variant alike. Otherwise each fault costs two wakeups of a
    // thread sleeping on the *other*, idle CPU, and on this kind of VM an
    // idle CPU takes ~40-50 µs to wake: the 1-thread rows then measured
    // the hypervisor's idle exit, ~100 µs per fault, not the pager.
    let _pin = if threads == 1 {
        let cpus = allowed_cpus()?;
        Some(Pin::current_to(&cpus[..cpus.len().min(1)])?)
    } else {
        None
    };
    let pager_err = |e: herdless_pager::PagerError| LabError::Sample(format!("pager: {e}"));

    // Keep the mapping alive across the gang.
    enum Map {
        Pager(Pager),
        Kernel(memmap2::Mmap),
    }
    let map = match how {
        How::Window(window) | How::Minor(window) => {
            let source =
                FileSource::from_file(file, "fault-around backing file").map_err(pager_err)?;
            Map::Pager(
                Pager::builder(bytes)
                    .source(source)
                    .fault_around(window)
                    .minor_faults(matches!(how, How::Minor(_)))
                    .handlers(threads.min(2))
                    .mode(HandlerMode::BlockingRead)
                    .build()
                    .map_err(pager_err)?,
            )
        }
        How::Kernel => {
            // SAFETY: a read-only shared mapping of our own scratch file,
            // which nothing writes or truncates while it is mapped.
            let map = unsafe { memmap2::Mmap::map(&file) }
                .map_err(|e| LabError::os("mmap of the backing file", e))?;
            Map::Kernel(map)
        }
    };
    let base = match &map {
        Map::Pager(p) => p.as_ptr() as usize,
        Map::Kernel(m) => m.as_ptr() as usize,
    };
    let run = gang(threads, |t| {
        scratch::sum_pages(base, &share(t, threads, pages, random))
    });
    let (faults, ppf) = match &map {
        Map::Pager(p) => {
            p.settle();
            let st = p.stats();
            (st.faults as f64, st.pages_per_fault())
        }
        Map::Kernel(_) => (f64::NAN, f64::NAN),
    };
    let run = run?;
    let got = run.results.iter().fold(0u64, |a, s| a.wrapping_add(*s));
    if got != want {
        return Err(LabError::Sample(format!(
            "checksum {got:#x}, the file's is {want:#x}: a page was served wrong"
        )));
    }
    let kernel_faults = run.usage.minor_faults as f64;
    let mut s = Sample::new()
        .with("time_ms", run.wall.as_secs_f64() * 1e3)
        .with("kernel_faults", kernel_faults);
    if faults.is_nan() {
        s = s.with("faults", kernel_faults);
        s = s.with("pages_per_fault", pages as f64 / kernel_faults.max(1.0));
    } else {
        s = s.with("faults", faults).with("pages_per_fault", ppf);
    }
    Ok(s)
}
