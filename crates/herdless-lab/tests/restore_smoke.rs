//! The `restore` experiment's smoke suite in process: every variant
//! measured without an error, and the counts that do not depend on timing
//! exactly as the restore methods make them.

use std::sync::OnceLock;
use std::time::SystemTime;

use herdless_lab::experiments;
use herdless_lab::harness::report::Machine;
use herdless_lab::harness::{run_experiment, Report, RunOptions, Suite};

/// One smoke run of the `restore` experiment, shared by the tests below
/// (each reads its own tables); `None`, said once, where userfaultfd is
/// not permitted.
fn smoke_report() -> Option<&'static Report> {
    static REPORT: OnceLock<Option<Report>> = OnceLock::new();
    REPORT
        .get_or_init(|| {
            if let Err(e) = herdless_pager::vmm::GuestMemory::new(&[4096]) {
                eprintln!("skipping: userfaultfd is not permitted here ({e})");
                return None;
            }
            let exp = experiments::find("restore").unwrap();
            let opts = RunOptions::new(Suite::Smoke);
            let result = run_experiment(&exp, &opts).unwrap();
            Some(Report::new(
                Machine::detect(),
                &opts,
                SystemTime::now(),
                vec![result],
            ))
        })
        .as_ref()
}

#[test]
fn restore_smoke_measures_every_variant_with_the_counts_each_method_implies() {
    let Some(report) = smoke_report() else {
        return;
    };
    let section = &report.experiments[0].sections[0];
    let names: Vec<&str> = section.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "4k-on-demand",
            "fault-around-64k",
            "prefetch",
            "copy-all",
            "2m-on-demand"
        ]
    );
    // Smoke: a 16 MiB snapshot, 10% of its 4096 pages touched.
    let ws_mib = (4096 * 10 / 100) as f64 * 4096.0 / f64::from(1 << 20);
    for case in &section.cases {
        for cell in &case.cells {
            if let Some(why) = &cell.skipped {
                // Only the hugepage restore may be unable to run here.
                assert_eq!(cell.variant, "2m-on-demand", "{why}");
                eprintln!("2m-on-demand skipped: {why}");
                continue;
            }
            assert!(
                cell.errors.is_empty(),
                "{} at {}: {:?}",
                cell.variant,
                case.label,
                cell.errors
            );
            let m = |name: &str| cell.metrics[name].median;
            // The restore's CPU is counted: the workload alone touches
            // every page of the working set in the span.
            assert!(m("cpu_ms") > 0.0, "{} counted no CPU", cell.variant);
            match cell.variant.as_str() {
                "4k-on-demand" => {
                    // One fault and one page per working-set page.
                    assert_eq!(m("copied_mib"), ws_mib);
                    assert_eq!(m("unread_mib"), 0.0);
                    assert!(m("demand_faults") >= 409.0);
                }
                "fault-around-64k" => assert!(m("unread_mib") > 0.0, "neighbours nobody reads"),
                "prefetch" => {
                    assert_eq!(m("copied_mib"), ws_mib, "the working set, once");
                    assert_eq!(m("unread_mib"), 0.0);
                }
                "copy-all" => {
                    // The copy runs beside the handlers: by the end of the
                    // pass the working set is in (copied, or filled by its
                    // fault), and no page was filled twice.
                    let copied = m("copied_mib");
                    assert!(copied >= ws_mib && copied <= 16.0, "{copied}");
                    assert_eq!(m("unread_mib"), copied - ws_mib);
                }
                "2m-on-demand" => {
                    // Whole 2 MiB pages, each holding some of the working
                    // set, one fault each at least.
                    let copied = m("copied_mib");
                    assert!(copied % 2.0 == 0.0 && copied > 0.0 && copied <= 16.0);
                    assert_eq!(m("unread_mib"), copied - ws_mib);
                    assert!(m("demand_faults") >= copied / 2.0);
                }
                other => panic!("unexpected variant {other}"),
            }
        }
    }
    // Re-reading 4 MiB the balloon took: herdless-uffd serves it with one
    // fault per 2 MiB window.
    let balloon = &report.experiments[0].sections[1];
    for cell in &balloon.cases[0].cells {
        assert!(
            cell.errors.is_empty(),
            "{}: {:?}",
            cell.variant,
            cell.errors
        );
        if cell.variant == "herdless-uffd" {
            assert_eq!(cell.metrics["uffd_faults"].median, 2.0);
        }
    }
}

#[test]
fn restore_from_s3_smoke_fetches_each_chunk_once_however_many_restores() {
    let Some(report) = smoke_report() else {
        return;
    };
    let section = report.experiments[0]
        .sections
        .iter()
        .find(|s| s.title.starts_with("restore from S3"))
        .expect("the S3 table");
    let names: Vec<&str> = section.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "local-prefetch",
            "s3-prefetch",
            "s3-prefetch-no-ahead",
            "s3-prefetch-no-pack",
            "s3-on-demand",
            "s3-on-demand-4k",
            "s3-prefetch-4x"
        ]
    );
    for case in &section.cases {
        let m = |variant: &str, name: &str| {
            let cell = case.cells.iter().find(|c| c.variant == variant).unwrap();
            assert!(
                cell.errors.is_empty(),
                "{variant} at {}: {:?}",
                case.label,
                cell.errors
            );
            cell.metrics[name].median
        };
        for v in [
            "s3-prefetch",
            "s3-prefetch-no-ahead",
            "s3-prefetch-no-pack",
            "s3-on-demand",
            "s3-on-demand-4k",
            "s3-prefetch-4x",
        ] {
            assert_eq!(
                m(v, "gets_per_chunk"),
                1.0,
                "{v} at {}: each chunk once",
                case.label
            );
        }
        // The pack: the working set (10 % of 4096 pages) and a 4 KiB
        // header, one 2 MiB GET, after the GET of its first 4 KiB that
        // opens it (in place of a `HEAD`); nothing of the memory. Asked
        // for ahead (in the round trip that opens it), with 15 more chunks
        // past its end: refused (or cancelled before they were sent, once
        // the pack's size is known), counted in `gets` only.
        let pack_mib = f64::from(4096 * (409 + 1)) / f64::from(1 << 20);
        let gets = m("s3-prefetch", "gets");
        assert!((2.0..=2.0 + 15.0).contains(&gets), "{gets}");
        assert_eq!(m("s3-prefetch-no-ahead", "gets"), 2.0);
        for v in ["s3-prefetch", "s3-prefetch-no-ahead"] {
            assert!((m(v, "fetched_mib") - pack_mib).abs() < 1e-9, "{v}");
            assert_eq!(m(v, "host_hits"), 0.0, "{v}: a cold cache");
        }
        // Without it: a 16 MiB object in 2 MiB chunks; the working set
        // touches them all.
        assert_eq!(m("s3-prefetch-no-pack", "gets"), 8.0);
        assert_eq!(m("s3-prefetch-no-pack", "fetched_mib"), 16.0);
        // Four restores at once: the same GETs as one, the others hits.
        assert_eq!(m("s3-prefetch-4x", "gets"), 8.0);
        assert_eq!(m("s3-prefetch-4x", "fetched_mib"), 16.0);
        assert_eq!(m("s3-prefetch-4x", "host_hits"), 24.0);
    }
}
