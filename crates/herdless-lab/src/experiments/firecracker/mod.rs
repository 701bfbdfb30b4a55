//! `firecracker` (issue 22 §3, §4): a real Firecracker VM restored from
//! one snapshot through every `herdless-uffd` configuration, Firecracker's
//! own example handlers (`uffd_on_demand_handler`,
//! `uffd_fault_all_handler`) and its File backend, into 4 KiB and 2 MiB
//! (hugetlbfs) guest memory, and with a balloon inflating right after the
//! restore. Where `restore` plays the VMM itself, this one runs Firecracker.
//!
//! The guest (`crates/herdless-lab/firecracker/guest/`, bare-metal: this
//! machine's kvm-pvm cannot run a stock Linux guest kernel) reads its
//! working set every 100 ms and prints each pass (`guest.rs`); the lab
//! boots and snapshots it once per case (`snapshot.rs`), and each
//! measurement restores it through a backend and waits for the first pass,
//! whose checksum must be the snapshot's (`restore.rs`). The lab README's
//! `firecracker` section gives the tables, variants, metrics and target.
//!
//! It needs `/dev/kvm`, root, Firecracker and its example handlers, the
//! guest image and `herdless-uffd` (`tools.rs` names the environment
//! variables); the run skips it, saying what is missing, where they are
//! not there. A 2 MiB variant needs free hugepages (reserved for the rest of
//! the run where root can), and is skipped with the reason where there are
//! none.

mod api;
mod from_s3;
mod guest;
mod process;
mod restore;
mod snapshot;
mod tools;

use serde::Serialize;

use crate::harness::{Case, Experiment, Metric, PerSuite, Ratio, Role, Section};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// The guest's working set, MiB.
    pub ws_mib: usize,
    /// Guest memory, MiB.
    pub mem_mib: usize,
    /// MiB of the working set (its end) the guest gives to a virtio balloon
    /// right after the restore (0: no balloon device).
    pub balloon_mib: usize,
}

/// The guest memory a restore maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Pages {
    /// Ordinary 4 KiB pages.
    Small4K,
    /// 2 MiB hugetlbfs pages (`"huge_pages": "2M"` on load).
    Huge2M,
}

/// Who serves the restored guest's memory.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Backend {
    /// Firecracker's File backend: the memory file mapped privately.
    File,
    /// Firecracker's example `uffd_on_demand_handler`.
    FcOnDemand,
    /// Firecracker's example `uffd_fault_all_handler`.
    FcFaultAll,
    /// `herdless-uffd` with these options.
    Herdless(&'static [&'static str]),
    /// `herdless-uffd --prefetch TRACE` (the case's recorded working set)
    /// with these options.
    HerdlessPrefetch(&'static [&'static str]),
}

/// Rows of (working set, guest memory, ballooned) MiB.
fn cases(rows: &[(usize, usize, usize)]) -> Vec<Case<Params>> {
    Case::list(rows, |(ws_mib, mem_mib, balloon_mib)| {
        let label = match balloon_mib {
            0 => format!("{ws_mib} MiB"),
            b => format!("{ws_mib} MiB, {b} out"),
        };
        let params = Params {
            ws_mib,
            mem_mib,
            balloon_mib,
        };
        (label, params)
    })
}

fn rows() -> PerSuite<Vec<Case<Params>>> {
    PerSuite {
        smoke: cases(&[(16, 128, 0)]),
        quick: cases(&[(128, 512, 0)]),
        full: cases(&[(64, 512, 0), (128, 512, 0), (256, 512, 0)]),
    }
}

fn balloon_rows() -> PerSuite<Vec<Case<Params>>> {
    PerSuite {
        smoke: cases(&[(16, 128, 4)]),
        quick: cases(&[(128, 512, 16)]),
        full: cases(&[(128, 512, 16), (128, 512, 64)]),
    }
}

fn metrics<P>(s: Section<P>) -> Section<P> {
    s.metric(Metric::lower("time_ms", "ms"))
        .metric(Metric::lower("pass_ms", "ms"))
        .metric(Metric::lower("load_ms", "ms"))
        .metric(Metric::lower("start_ms", "ms"))
        .metric(Metric::lower("setup_ms", "ms"))
        .metric(Metric::lower("handoff_ms", "ms"))
        .metric(Metric::lower("faults", "faults"))
        .metric(Metric::lower("copied_mib", "MiB"))
        .evidence(&[
            "faults",
            "load_ms",
            "start_ms",
            "setup_ms",
            "handoff_ms",
            "copied_mib",
        ])
}

/// The variants of `list`, restoring into `pages`.
fn variants(section: Section<Params>, pages: Pages, list: &[Variant]) -> Section<Params> {
    section.variants(
        move |backend, case| restore::measure(backend, pages, case),
        list.iter().copied(),
    )
}

/// A column: its name, its role and who serves the memory.
type Variant = (&'static str, Role, Backend);

const FILE: Variant = ("file", Role::Kernel, Backend::File);
const FC_ON_DEMAND: Variant = ("fc-on-demand", Role::Peer, Backend::FcOnDemand);
const FC_FAULT_ALL: Variant = ("fc-fault-all", Role::Peer, Backend::FcFaultAll);
const HL_4K: Variant = ("hl-4k", Role::Before, Backend::Herdless(&[]));
const HL_64K: Variant = (
    "hl-64k",
    Role::Peer,
    Backend::Herdless(&["--fault-around", "64K"]),
);
const HL_PREFETCH: Variant = ("hl-prefetch", Role::After, Backend::HerdlessPrefetch(&[]));
const HL_COPY_ALL: Variant = (
    "hl-copy-all",
    Role::Peer,
    Backend::Herdless(&["--copy-all"]),
);

/// 4 KiB guest memory: every backend.
fn small_pages() -> Section<Params> {
    let section = Section::new(
        "4 KiB guest memory, working set of a 512 MiB guest (target: on-demand/prefetch ≥ 10)",
        "working set",
        rows(),
    );
    let hl_2m = (
        "hl-2m",
        Role::Peer,
        Backend::Herdless(&["--fault-around", "2M"]),
    );
    let hl_h2 = ("hl-h2", Role::Peer, Backend::Herdless(&["--handlers", "2"]));
    let two = &["--prefetch-threads", "2", "--handlers", "2"];
    let hl_prefetch_2 = ("hl-prefetch-2", Role::Peer, Backend::HerdlessPrefetch(two));
    let list = [
        FILE,
        FC_ON_DEMAND,
        FC_FAULT_ALL,
        HL_4K,
        HL_64K,
        hl_2m,
        hl_h2,
        HL_PREFETCH,
        hl_prefetch_2,
        HL_COPY_ALL,
    ];
    variants(metrics(section), Pages::Small4K, &list)
        .ratio(Ratio::of("fc-on-demand", "hl-prefetch").at_least(10.0))
        .ratio(Ratio::of("fc-on-demand", "hl-4k"))
        .ratio(Ratio::of("file", "hl-prefetch"))
        .ratio(Ratio::of("fc-fault-all", "hl-copy-all"))
}

/// 2 MiB hugetlbfs guest memory: the File backend cannot restore into it,
/// and fault-around has no meaning there (a fault is a whole 2 MiB page).
fn huge_pages() -> Section<Params> {
    let section = Section::new(
        "2 MiB hugetlbfs guest memory, the same snapshot",
        "working set",
        rows(),
    );
    let hl_2m_pages = ("hl-2m-pages", Role::Before, Backend::Herdless(&[]));
    let list = [
        FC_ON_DEMAND,
        FC_FAULT_ALL,
        hl_2m_pages,
        HL_PREFETCH,
        HL_COPY_ALL,
    ];
    variants(metrics(section), Pages::Huge2M, &list)
        .ratio(Ratio::of("fc-on-demand", "hl-prefetch"))
        .ratio(Ratio::of("fc-on-demand", "hl-2m-pages"))
        .ratio(Ratio::of("fc-fault-all", "hl-copy-all"))
}

/// A balloon inflated right after the restore (issue 22 §4): the
/// `REMOVE`s reach the handler while it is still installing memory, and
/// the first pass reads the ballooned tail back as zeros. Firecracker's
/// `fault_all_handler` is left out: it panics on a `REMOVE` (and takes the
/// VM down with it).
fn ballooned() -> Section<Params> {
    let section = Section::new(
        "4 KiB guest memory, the end of the working set ballooned right after the restore",
        "working set",
        balloon_rows(),
    );
    let section = metrics(section)
        .metric(Metric::lower("zero_read_ms", "ms"))
        .metric(Metric::lower("inflate_ms", "ms"));
    let list = [FILE, FC_ON_DEMAND, HL_4K, HL_64K, HL_PREFETCH, HL_COPY_ALL];
    variants(section, Pages::Small4K, &list)
        .ratio(Ratio::of("fc-on-demand", "hl-prefetch"))
        .ratio(Ratio::of("fc-on-demand", "hl-copy-all"))
        .ratio(Ratio::of("fc-on-demand", "hl-4k").on_metric("zero_read_ms"))
        .ratio(Ratio::of("file", "hl-64k").on_metric("zero_read_ms"))
}

/// The experiment.
pub fn experiment() -> Experiment {
    Experiment::new(
        "firecracker",
        "issue 22, herdless-uffd in a real Firecracker: one snapshot restored through every \
         herdless-uffd mode, Firecracker's example handlers and its File backend, 4 KiB and 2 MiB",
    )
    .claim(
        "REAP (ASPLOS '21): prefetching a recorded working set instead of faulting page by page \
         cut a restored function's page faults by 97% and its cold start 3.7x",
    )
    .mechanism(
        "a real VMM's vCPU faults on guest memory through KVM into the userfaultfd; each \
         handler answers with UFFDIO_COPYs: one page per fault, a window per fault, the \
         recorded working set in bulk from the handoff on, or everything first",
    )
    .requires(tools::check)
    .section(small_pages())
    .section(huge_pages())
    .section(ballooned())
    .section(from_s3::section())
}
