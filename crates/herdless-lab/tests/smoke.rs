//! The smoke suite end to end: in process (the report round-trips through
//! JSON and holds every variant's samples) and through the binary (`run`
//! with `--json` and `--plot`, `summary`, `list`). The command line's
//! errors are `cli.rs`'s.

use std::path::PathBuf;
use std::process::Command;
use std::time::SystemTime;

// The pager tests' skip mechanism: a printed reason and a count at exit.
#[path = "../../herdless-pager/tests/common/skip.rs"]
mod skip;

use herdless_lab::experiments;
use herdless_lab::harness::report::{Machine, SectionReport, SCHEMA};
use herdless_lab::harness::{run_experiment, Report, RunOptions, Suite};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herdless-lab-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs one experiment's smoke suite in process.
fn smoke_report(name: &str) -> Report {
    let exp = experiments::find(name).unwrap();
    let opts = RunOptions::new(Suite::Smoke);
    let result = run_experiment(&exp, &opts).unwrap();
    Report::new(Machine::detect(), &opts, SystemTime::now(), vec![result])
}

fn variant_names(section: &SectionReport) -> Vec<&str> {
    section.variants.iter().map(|v| v.name.as_str()).collect()
}

/// Every cell of `section` was measured without an error.
fn assert_no_errors(section: &SectionReport) {
    for case in &section.cases {
        for cell in &case.cells {
            assert!(
                cell.errors.is_empty(),
                "{} at {}: {:?}",
                cell.variant,
                case.label,
                cell.errors
            );
        }
    }
}

fn lab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_herdless-lab"))
        .args(args)
        .output()
        .expect("the lab binary runs")
}

#[test]
fn futex_wake_smoke_round_trips_through_json_with_every_variant() {
    let report = smoke_report("futex-wake");

    let text = serde_json::to_string(&report).unwrap();
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), text, "lossless");
    assert_eq!(back.schema, SCHEMA);
    assert_eq!(back.suite, Suite::Smoke);

    let exp = &back.experiments[0];
    assert_eq!(exp.name, "futex-wake");
    assert_eq!(exp.sections.len(), 2);
    for section in &exp.sections {
        let names: Vec<&str> = section.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["always-lock", "waiter-count", "kernel", "parking_lot_core"]
        );
        assert!(!section.cases.is_empty());
        let primary = &section.primary().name;
        for case in &section.cases {
            assert_eq!(case.cells.len(), names.len());
            for (cell, name) in case.cells.iter().zip(&names) {
                assert_eq!(cell.variant, *name);
                assert!(
                    cell.errors.is_empty(),
                    "{name} at {}: {:?}",
                    case.label,
                    cell.errors
                );
                let summary = &cell.metrics[primary];
                assert_eq!(summary.samples.len(), report.reps);
                assert!(summary.median > 0.0, "{name} at {}", case.label);
            }
        }
        for ratio in &section.ratios {
            assert_eq!(ratio.values.len(), section.cases.len());
            // Every variant measured every case, so every ratio has a value
            // (a number, ∞ or 0/0).
            assert!(
                ratio.values.iter().all(Option::is_some),
                "{}/{}",
                ratio.num,
                ratio.den
            );
        }
    }
}

#[test]
fn cli_smoke_writes_parsable_json_and_svg_plots() {
    let dir = scratch("cli");
    let json = dir.join("out.json");
    let plots = dir.join("plots");
    let out = lab(&[
        "run",
        "futex-wake",
        "--smoke",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("wake one at a time") && stdout.contains("verdicts:"),
        "{stdout}"
    );

    let report = Report::read_json(&json).unwrap();
    assert_eq!(report.experiments[0].name, "futex-wake");
    let svgs: Vec<_> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(svgs.len(), 2, "{svgs:?}");
    for svg in svgs {
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.starts_with("<svg") && text.contains("<text"),
            "{}",
            svg.display()
        );
    }

    // The README's "Results" table comes from `summary`: one row per
    // target, with the machine.
    let out = lab(&["summary", json.to_str().unwrap()]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{md}");
    assert!(
        md.contains(&format!("{} cores", report.machine.cores)),
        "{md}"
    );
    let targets = report.experiments[0]
        .sections
        .iter()
        .flat_map(|s| &s.ratios)
        .filter(|r| r.target.is_some())
        .count();
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| `futex-wake` |"))
        .count();
    assert_eq!(rows, targets, "{md}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn summary_of_a_missing_or_corrupt_file_is_a_clear_error() {
    let dir = scratch("summary");
    let missing = dir.join("missing.json");
    let out = lab(&["summary", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.json"));
    let corrupt = dir.join("corrupt.json");
    std::fs::write(&corrupt, "{ not json").unwrap();
    let out = lab(&["summary", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn several_experiments_run_in_the_order_named_once_each() {
    let out = lab(&["run", "herd", "epoll", "herd", "--smoke"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let starts: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("== "))
        .filter_map(|l| l.split(':').next())
        .collect();
    assert_eq!(starts, ["herd", "epoll"], "{stdout}");
}

#[test]
fn list_names_every_experiment() {
    let out = lab(&["list"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    for exp in experiments::all() {
        assert!(stdout.contains(exp.name), "{stdout}");
    }
}

#[test]
fn epoll_smoke_measures_every_variant_without_errors() {
    let report = smoke_report("epoll");
    let section = &report.experiments[0].sections[0];
    assert_eq!(
        variant_names(section),
        ["spinlock", "rwlock-swap", "lock-free", "kernel"]
    );
    assert_no_errors(section);
}

#[test]
fn rwsem_smoke_measures_every_variant_without_errors() {
    let report = smoke_report("rwsem");
    let section = &report.experiments[0].sections[0];
    assert_eq!(
        variant_names(section),
        [
            "generic:under-lock",
            "generic:after-unlock",
            "atomic:under-lock",
            "atomic:after-unlock",
            "std",
            "parking_lot",
            "pthread"
        ]
    );
    assert_no_errors(section);
    // The scaling curve: herdless's default against the three peers.
    let scaling = &report.experiments[0].sections[1];
    assert!(scaling.title.contains("scaling"), "{}", scaling.title);
    assert_eq!(
        variant_names(scaling),
        ["herdless", "std", "parking_lot", "pthread"]
    );
    assert_no_errors(scaling);
}

#[test]
fn fault_around_smoke_measures_every_variant_without_errors() {
    let Some(()) = skip::unless_full_userfaultfd() else {
        return;
    };
    let report = smoke_report("fault-around");
    for section in &report.experiments[0].sections {
        assert_eq!(
            variant_names(section),
            [
                "window-4k",
                "window-16k",
                "window-64k",
                "minor-64k",
                "kernel-mmap"
            ]
        );
        assert_no_errors(section);
        // Faults: 16 pages per fault with the 64 KiB window, one without
        // fault-around (single-threaded, sequential).
        if section.title.starts_with("random") {
            continue;
        }
        for case in section.cases.iter().filter(|c| c.label == "1") {
            for cell in &case.cells {
                let ppf = cell.metrics["pages_per_fault"].median;
                match cell.variant.as_str() {
                    "window-4k" => assert_eq!(ppf, 1.0),
                    "window-64k" | "minor-64k" => assert_eq!(ppf, 16.0),
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn locks_smoke_measures_every_family_in_every_table_without_errors() {
    let report = smoke_report("locks");
    let exp = &report.experiments[0];
    assert_eq!(exp.sections.len(), 6);
    for section in &exp.sections {
        assert_eq!(
            variant_names(section),
            ["herdless", "parking_lot", "std", "pthread"]
        );
        assert_no_errors(section);
        if section.title.starts_with("an occasional locker") {
            // Every family timed the occasional locker's waits.
            for case in &section.cases {
                for cell in &case.cells {
                    assert!(cell.metrics["p99_wait_us"].median > 0.0, "{}", cell.variant);
                }
            }
            continue;
        }
        if section.title.starts_with("mutex") {
            // Every family's threads say where they ran (`placement.rs`).
            for case in &section.cases {
                for cell in &case.cells {
                    let spread = cell.metrics["home_rate_spread"].median;
                    // 0 only if the threads of some CPU took no lock.
                    assert!((0.0..=1.0).contains(&spread), "{}: {spread}", cell.variant);
                    assert!(cell.metrics["slowest_crowd_share"].median > 0.0);
                }
            }
        }
        // herdless counts its futex-table events (the lab builds it with
        // `stats`); the peers count nothing there.
        let table_metric = section
            .metrics
            .iter()
            .find(|m| m.name.starts_with("table_"))
            .expect("a herdless counter");
        for case in &section.cases {
            for cell in &case.cells {
                let counted = cell.metrics.contains_key(&table_metric.name);
                assert_eq!(counted, cell.variant == "herdless", "{}", cell.variant);
            }
        }
    }

    // notify_all: every waiter sleeps on the condvar at least once, and is
    // woken (dequeued) at least once. herdless's notify_all moves every
    // waiter: onto the mutex when the notifier holds it on two CPUs (its
    // unlock wakes the first), else to a batch it wakes in a cascade. Only
    // with the cascade turned off (`HERDLESS_CONDVAR_FANOUT=0`) does a
    // notify_all that finds the mutex free wake one and move the others;
    // and with the broadcast (the default where the kernel can) it finds
    // the mutex free and moves nobody: it wakes them all with one call.
    let cascade = match std::env::var("HERDLESS_CONDVAR_FANOUT") {
        Ok(n) => n.trim().parse::<usize>().map_or(true, |n| n > 0),
        Err(_) => true,
    };
    let broadcast = cascade && herdless::RawCondvar::broadcast_enabled();
    let notify_all = exp
        .sections
        .iter()
        .find(|s| s.title.starts_with("notify_all"))
        .expect("the notify_all table");
    for case in &notify_all.cases {
        let waiters = case.params["waiters"].as_f64().unwrap();
        for cell in &case.cells {
            let sleeps = cell.metrics["sleeps_per_waiter"].min;
            assert!(
                sleeps >= 1.0,
                "{} at {}: {sleeps}",
                cell.variant,
                case.label
            );
        }
        let herdless = &case.cells[0].metrics;
        let holding = case.params["notify_holding_lock"].as_bool().unwrap();
        let moved = if holding || (cascade && !broadcast) {
            waiters
        } else if broadcast {
            0.0
        } else {
            waiters - 1.0
        };
        assert_eq!(
            herdless["requeued_per_waiter"].median,
            moved / waiters,
            "{}",
            case.label
        );
        assert!(
            herdless["table_wakeups_per_waiter"].min >= 1.0,
            "{}",
            case.label
        );
    }
}
