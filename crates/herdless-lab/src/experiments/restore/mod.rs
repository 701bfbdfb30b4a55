//! `restore` (issue 13; seed 002's fault-around and REAP's working-set
//! prefetch, ASPLOS '21): restoring a Firecracker snapshot with
//! `herdless-uffd`. A snapshot of R MiB (quick: 256) of which a guest-like
//! workload touches a working set of W % (quick: 10 %, in a repeatable
//! scattered order with sequential runs, `workload.rs`), from 1 and 4
//! threads, restored by:
//! - `4k-on-demand` (before): one page per fault, as Firecracker's
//!   `on_demand_handler`;
//! - `fault-around-64k`: the faulting page's 64 KiB window per fault;
//! - `prefetch` (after): the working set recorded once (a 4 KiB on-demand
//!   restore with `--record`, untimed), then installed in the background
//!   from the handoff on (`--prefetch`, one prefetch thread per CPU),
//!   demand faults first, a fault on a page of the trace filling the next
//!   32 pages of it;
//! - `copy-all`: every page copied from the handoff on, beside the
//!   handlers (Firecracker's `fault_all_handler` copies it all before it
//!   answers the first fault);
//! - `2m-on-demand`: the same snapshot restored into 2 MiB hugepage guest
//!   memory (Firecracker's `"huge_pages": "2M"`: `MAP_HUGETLB` regions),
//!   one 2 MiB `UFFDIO_COPY` per fault. It needs the snapshot's size in
//!   free hugepages, reserved for each measurement (as root, raising
//!   `vm.nr_hugepages` and giving them back); where they cannot be, it is
//!   skipped with the reason.
//!
//! The handler is `herdless-uffd`'s library on a thread of the lab; the VMM
//! is `herdless_pager::vmm`, which sets up guest memory and hands it over
//! exactly as Firecracker does (a real socket, `SCM_RIGHTS`); `run.rs`.
//! Every handler (min(T, 2) handler threads) has the working set's pages
//! of the memory file mapped before the VMM connects, as Firecracker's
//! examples map the whole file; `copy-all` and `2m-on-demand`, which
//! copy whole 2 MiB pages, map all of it.
//!
//! A second section, "re-read ballooned memory" (`balloon.rs`, issue 22
//! §4): B MiB a balloon took, read again, served by `herdless-uffd` (zeros
//! by the 2 MiB run) or by the kernel (memory no userfaultfd covers, as
//! after Firecracker's handler unregisters a removed range); target: no
//! slower than the kernel.
//!
//! Metrics: `time_ms`, from the handoff until every thread has touched its
//! share of the working set (every word summed and checked against the
//! snapshot); `cpu_ms`, the CPU time the whole lab process spent over
//! that same span (every thread of the restore and of the workload: with
//! T workload threads and as many busy handlers on 2 CPUs, a time close
//! to `cpu_ms / 2` says the restore was CPU-bound there);
//! `demand_faults`, fault messages the handler served;
//! `copied_mib`, bytes copied into guest memory; `unread_mib`, of those,
//! bytes the workload never touched. Targets at every thread count:
//! `4k-on-demand/prefetch` ≥ 3 on time and ≥ 20 on demand faults.

mod balloon;
mod run;
mod s3;
mod workload;

use serde::Serialize;

use balloon::{BalloonParams, Server};

use crate::harness::{Case, Experiment, Metric, PerSuite, Ratio, Role, Section};

/// Parameters of one row.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Params {
    /// Snapshot (guest memory) size in MiB.
    pub snapshot_mib: usize,
    /// Working set, in percent of the snapshot.
    pub working_set_percent: usize,
    /// Workload threads (the guest's vCPUs).
    pub threads: usize,
}

/// How a variant restores.
#[derive(Clone, Copy, Debug)]
pub(crate) enum How {
    /// Serve faults only, with this fault-around window.
    OnDemand { window: usize },
    /// Prefetch the recorded working set.
    Prefetch,
    /// Copy everything first.
    CopyAll,
    /// Serve faults only, in 2 MiB hugepage guest memory.
    Hugepages,
}

fn cases(snapshot_mib: usize, threads: &[usize]) -> Vec<Case<Params>> {
    Case::each(threads, |threads| Params {
        snapshot_mib,
        working_set_percent: 10,
        threads,
    })
}

/// The experiment.
pub fn experiment() -> Experiment {
    let s = Section::new(
        "restore a snapshot, 10% working set (targets: 4k/prefetch time ≥ 3, faults ≥ 20)",
        "threads",
        PerSuite {
            smoke: cases(16, &[1, 2]),
            quick: cases(256, &[1, 4]),
            full: cases(1024, &[1, 2, 4]),
        },
    )
    .metric(Metric::lower("time_ms", "ms"))
    .metric(Metric::lower("cpu_ms", "ms of CPU, whole process"))
    .metric(Metric::lower("demand_faults", "faults"))
    .metric(Metric::lower("copied_mib", "MiB"))
    .metric(Metric::lower("unread_mib", "MiB"))
    .evidence(&["cpu_ms", "demand_faults", "copied_mib", "unread_mib"])
    .variants(
        run::measure,
        [
            (
                "4k-on-demand",
                Role::Before,
                How::OnDemand { window: 4 << 10 },
            ),
            (
                "fault-around-64k",
                Role::Peer,
                How::OnDemand { window: 64 << 10 },
            ),
            ("prefetch", Role::After, How::Prefetch),
            ("copy-all", Role::Peer, How::CopyAll),
            ("2m-on-demand", Role::Peer, How::Hugepages),
        ],
    )
    .ratio(Ratio::of("4k-on-demand", "prefetch").at_least(3.0))
    .ratio(
        Ratio::of("4k-on-demand", "prefetch")
            .on_metric("demand_faults")
            .at_least(20.0),
    )
    .ratio(Ratio::of("4k-on-demand", "fault-around-64k"))
    .ratio(Ratio::of("copy-all", "prefetch"))
    .ratio(Ratio::of("4k-on-demand", "2m-on-demand"));
    let balloon_cases = |mibs: &[usize]| -> Vec<Case<BalloonParams>> {
        let case = |m| Case::new(format!("{m} MiB"), BalloonParams { ballooned_mib: m });
        mibs.iter().map(|&m| case(m)).collect()
    };
    let b = Section::new(
        "re-read ballooned memory (target: as fast as the kernel's own zero pages)",
        "ballooned",
        PerSuite {
            smoke: balloon_cases(&[4]),
            quick: balloon_cases(&[16]),
            full: balloon_cases(&[16, 64]),
        },
    )
    .metric(Metric::lower("time_ms", "ms"))
    .metric(Metric::lower("minor_faults", "faults"))
    .metric(Metric::lower("uffd_faults", "faults"))
    .evidence(&["minor_faults", "uffd_faults"])
    .variants(
        balloon::measure,
        [
            ("herdless-uffd", Role::After, Server::HerdlessUffd),
            ("kernel", Role::Peer, Server::Kernel),
        ],
    )
    .ratio(Ratio::of("kernel", "herdless-uffd").at_least(1.0));
    Experiment::new(
        "restore",
        "issue 13, herdless-uffd: a Firecracker snapshot restored on demand (4 KiB or a 64 KiB \
         window, or into 2 MiB hugepages), by prefetching a recorded working set (REAP, ASPLOS \
         '21), or by copying everything first",
    )
    .claim(
        "REAP: recording the pages a function touches and prefetching them cut page faults by \
         97% and cold-start latency 3.7x",
    )
    .mechanism(
        "the working set recorded in first-touch order is installed in large UFFDIO_COPY chunks \
         in the background from the handoff on, so the guest finds its pages present instead of \
         faulting once per page; demand faults are served first",
    )
    .section(s)
    .section(b)
    .section(s3::section())
}
