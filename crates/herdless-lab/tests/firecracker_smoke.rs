//! The `firecracker` experiment: skipped with its reason where Firecracker
//! or KVM is missing (CI), and, where they are here (`HERDLESS_FIRECRACKER`,
//! `HERDLESS_FC_GUEST`... set), its smoke suite restoring the real VM
//! through every backend with the counts each one implies.

use std::process::Command;
use std::time::SystemTime;

// The pager tests' skip mechanism: a printed reason and a count at exit.
#[path = "../../herdless-pager/tests/common/skip.rs"]
mod skip;

use herdless_lab::experiments;
use herdless_lab::harness::report::{Cell, Machine, SectionReport};
use herdless_lab::harness::{run_experiment, Report, RunOptions, Suite};

#[test]
fn without_firecracker_the_experiment_is_skipped_with_the_reason_and_the_run_passes() {
    let out = Command::new(env!("CARGO_BIN_EXE_herdless-lab"))
        .args(["run", "firecracker", "--smoke"])
        .env("HERDLESS_FIRECRACKER", "/no/such/firecracker")
        .output()
        .expect("the lab binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("firecracker: skipped:") && words.contains("/no/such/firecracker"),
        "{stdout}"
    );
}

fn cells<'a>(section: &'a SectionReport, variant: &str) -> Vec<&'a Cell> {
    section.cases.iter().flat_map(|c| &c.cells).filter(|cell| cell.variant == variant).collect()
}

#[test]
fn firecracker_smoke_restores_through_every_backend_with_the_counts_each_implies() {
    let exp = experiments::find("firecracker").unwrap();
    if let Some(reason) = exp.unavailable() {
        skip::skip(&reason);
        return;
    }
    let opts = RunOptions::new(Suite::Smoke);
    let result = run_experiment(&exp, &opts).unwrap();
    let report = Report::new(Machine::detect(), &opts, SystemTime::now(), vec![result]);
    let sections = &report.experiments[0].sections;
    assert_eq!(sections.len(), 3);
    for section in sections {
        for case in &section.cases {
            for cell in &case.cells {
                // A 2 MiB cell may be skipped (no hugepages here), never fail.
                assert!(
                    cell.errors.is_empty(),
                    "{}: {}: {:?}",
                    section.title,
                    cell.variant,
                    cell.errors
                );
            }
        }
    }
    let medians = |section: &SectionReport, variant: &str, metric: &str| -> Vec<f64> {
        cells(section, variant)
            .iter()
            .filter_map(|cell| cell.metrics.get(metric).map(|m| m.median))
            .collect()
    };
    // Smoke: a 16 MiB working set, 4096 pages of 4 KiB.
    let ws_pages = 16.0 * 256.0;
    let small = &sections[0];
    for variant in ["fc-on-demand", "hl-4k", "hl-h2"] {
        // One fault per page of the working set, at least.
        for faults in medians(small, variant, "faults") {
            assert!(faults >= ws_pages, "{variant}: {faults} faults");
        }
    }
    for faults in medians(small, "hl-64k", "faults") {
        // 16 pages per window.
        assert!(faults < ws_pages / 8.0, "hl-64k: {faults}");
    }
    for faults in medians(small, "file", "faults") {
        // The kernel's fault-around maps up to 16 pages per fault.
        assert!(faults >= ws_pages / 16.0, "file: {faults}");
    }
    for variant in ["hl-prefetch", "hl-copy-all"] {
        for copied in medians(small, variant, "copied_mib") {
            assert!(copied >= 16.0, "{variant}: the working set, at least: {copied}");
        }
    }
    // Ballooned: the last 4 MiB of the working set discarded right after
    // the restore (before or after a prefetch copied them: it races). Every
    // pass read them as zeros (its checksum says so), timed apart.
    let ballooned = &sections[2];
    for variant in ["file", "fc-on-demand", "hl-4k", "hl-prefetch"] {
        assert!(!medians(ballooned, variant, "zero_read_ms").is_empty(), "{variant}");
    }
}
