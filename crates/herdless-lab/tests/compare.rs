//! `herdless-lab compare A.json B.json`: cell verdicts only beyond the
//! noise, target verdicts that noise alone does not flip,
//! `--fail-on-regression`, and typed errors for files of another schema,
//! missing files and corrupt JSON. Every report here is the harness's toy
//! experiment (`harness::toy`) or fixture data derived from it: nothing is
//! timed.

use std::path::{Path, PathBuf};
use std::process::Command;

use herdless_lab::harness::compare::{self, Agreement, Change};
use herdless_lab::harness::outcome::Confidence;
use herdless_lab::harness::report::SCHEMA;
use herdless_lab::harness::stats::Summary;
use herdless_lab::harness::toy::Toy;
use herdless_lab::harness::{LabError, Report};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herdless-lab-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn lab(args: &[&Path]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_herdless-lab"))
        .args(args)
        .output()
        .expect("the lab binary runs")
}

/// The toy with `new` taking `new_ns` per item.
fn run(new_ns: f64) -> Report {
    Toy { new_ns, ..Toy::default() }.report()
}

fn write(report: &Report, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    report.write_json(&path).unwrap();
    path
}

/// Replaces every sample of every cell by its median times `noise`, one
/// factor per repetition, and judges the tables again.
fn jitter(report: &mut Report, noise: &[f64]) {
    for s in &mut report.experiments[0].sections {
        for case in &mut s.cases {
            for cell in &mut case.cells {
                for summary in cell.metrics.values_mut() {
                    let samples: Vec<f64> = noise.iter().map(|f| summary.median * f).collect();
                    *summary = Summary::of(&samples).unwrap();
                }
            }
        }
        s.compute_ratios();
    }
}

#[test]
fn only_differences_beyond_the_noise_get_a_verdict() {
    let (a, mut b) = (run(1.0), run(2.0));
    let c = compare::compare(&a, &b, false);
    let rows = &c.sections[0].rows;
    assert_eq!(rows.len(), 6, "two cases × three variants, primary only");
    let verdict = |variant: &str| {
        rows.iter().filter(|r| r.variant == variant).map(|r| r.change).collect::<Vec<_>>()
    };
    assert_eq!(verdict("old"), [Change::Same; 2]);
    assert_eq!(verdict("kern"), [Change::Same; 2]);
    assert_eq!(verdict("new"), [Change::Worse; 2], "2 ns > 1 ns");
    assert_eq!(c.regressions(), 2);
    assert_eq!(c.targets.len(), 1);
    assert_eq!(c.targets[0].agreement, Agreement::Agree, "10× and 5× both ≥ 5");

    // Widen B's spread of `new` beyond the difference: no verdict.
    for case in &mut b.experiments[0].sections[0].cases {
        case.cells[1].metrics.get_mut("t").unwrap().spread = 100.0;
    }
    assert_eq!(compare::compare(&a, &b, false).regressions(), 0);

    let all = compare::compare(&a, &run(2.0), true);
    assert_eq!(all.sections[0].rows.len(), 12, "every measured metric");
    let text = compare::render(&all, true);
    assert!(text.contains("slower") && text.contains("same"), "{text}");
    assert!(text.contains("\nwasted:\n"), "one grid per metric: {text}");
}

#[test]
fn two_noisy_runs_of_the_same_code_agree_on_every_verdict() {
    // The same medians, different noise of ±10% in each run.
    let (mut a, mut b) = (run(1.0), run(1.0));
    jitter(&mut a, &[0.90, 1.10, 0.95, 1.05, 1.00]);
    jitter(&mut b, &[1.08, 0.92, 1.02, 0.97, 1.04]);
    let c = compare::compare(&a, &b, true);
    assert!(
        c.sections[0].rows.iter().all(|r| r.change == Change::Same),
        "{:?}",
        c.sections[0].rows
    );
    assert_eq!(c.count_targets(Agreement::Agree), 1);
    assert_eq!(c.regressions(), 0);
    let text = compare::render(&c, false);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("1 targets: 1 agree, 0 differ within noise, 0 changed"), "{text}");
}

#[test]
fn a_target_flipped_by_noise_is_not_a_change_and_a_confident_flip_is() {
    // old/new ≥ 5 at n 4: 10× in A, 4× in B (new takes 2.5).
    let (a, mut b) = (run(1.0), run(2.5));
    let c = compare::compare(&a, &b, false);
    let t = &c.targets[0];
    assert_eq!(t.agreement, Agreement::Changed, "{t:?}");
    assert!(t.is_regression());
    assert_eq!(c.changed_targets(), 1);
    assert!(compare::render(&c, false).contains("CHANGED"));

    // Now B's `new` is noisy at n 4 (median 10, half IQR 3): 4× ± a lot,
    // the bound within the spread, the verdict of low confidence.
    let s = &mut b.experiments[0].sections[0];
    *s.cases[1].cells[1].metrics.get_mut("t").unwrap() =
        Summary::of(&[5.0, 7.0, 10.0, 13.0, 15.0]).unwrap();
    s.compute_ratios();
    assert_eq!(s.ratios[0].confidence, Some(Confidence::Low));
    let c = compare::compare(&a, &b, false);
    assert_eq!(c.targets[0].agreement, Agreement::WithinNoise);
    assert!(!c.targets[0].is_regression());
}

#[test]
fn cli_compare_prints_the_table_and_fails_on_regression_only_when_asked() {
    let dir = scratch("compare");
    let a = write(&run(1.0), &dir, "a.json");
    let b = write(&run(2.0), &dir, "b.json");
    let cmp = Path::new("compare");

    let out = lab(&[cmp, &a, &b]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("toy / toy table"), "{stdout}");
    assert!(stdout.contains("2.00×") && stdout.contains("slower"), "{stdout}");
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "{stdout}");

    let out = lab(&[cmp, &a, &b, Path::new("--fail-on-regression")]);
    assert_eq!(out.status.code(), Some(1));
    let out = lab(&[cmp, &b, &a, Path::new("--fail-on-regression")]);
    assert!(out.status.success(), "B faster than A is no regression");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("faster"), "{stdout}");

    let out = lab(&[cmp, &a]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage: herdless-lab compare"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_of_another_schema_is_refused_naming_both_versions() {
    let dir = scratch("schema");
    let a = write(&run(1.0), &dir, "a.json");
    for other_schema in [1, SCHEMA + 98] {
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
        value["schema"] = serde_json::json!(other_schema);
        let other = dir.join("other.json");
        std::fs::write(&other, value.to_string()).unwrap();

        let err = Report::read_json(&other).unwrap_err();
        assert!(
            matches!(err, LabError::Schema { found, expected, .. } if found == other_schema && expected == SCHEMA),
            "{err}"
        );
        for verb in ["compare", "check-json"] {
            let mut args = vec![Path::new(verb)];
            if verb == "compare" {
                args.push(&a);
            }
            args.push(&other);
            let out = lab(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(
                stderr.contains(&format!("schema {other_schema}"))
                    && stderr.contains(&format!("reads schema {SCHEMA}"))
                    && stderr.contains("other.json"),
                "{stderr}"
            );
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn missing_corrupt_and_inconsistent_files_are_typed_errors_naming_the_file() {
    let dir = scratch("bad-files");
    let a = write(&run(1.0), &dir, "a.json");
    let missing = dir.join("missing.json");
    assert!(matches!(Report::read_json(&missing), Err(LabError::File { .. })));
    let corrupt = dir.join("corrupt.json");
    std::fs::write(&corrupt, "{\"schema\": 2, \"machine\": ").unwrap();
    assert!(matches!(
        Report::read_json(&corrupt),
        Err(LabError::Json { path, .. }) if path == corrupt
    ));
    // Parses, but a ratio has fewer values than cases: refused rather than
    // indexed out of bounds later.
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    value["experiments"][0]["sections"][0]["ratios"][0]["values"] = serde_json::json!([1.0]);
    let inconsistent = dir.join("inconsistent.json");
    std::fs::write(&inconsistent, value.to_string()).unwrap();
    assert!(matches!(Report::read_json(&inconsistent), Err(LabError::Inconsistent { .. })));

    for (bad, says) in [
        (&missing, "missing.json: No such file"),
        (&corrupt, "corrupt.json: JSON:"),
        (&inconsistent, "inconsistent.json: inconsistent results"),
    ] {
        let out = lab(&[Path::new("compare"), &a, bad]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn render_writes_the_report_of_a_results_file() {
    let dir = scratch("render");
    let a = write(&run(1.0), &dir, "a.json");
    let html = dir.join("deeper/html");
    let out = lab(&[Path::new("render"), &a, Path::new("--report"), &html]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    assert!(page.contains("id=\"table-toy-s0-t\"") && page.contains("id=\"chart-toy-s0\""));
    assert!(page.contains("high confidence"), "verdicts carry their confidence");
    let out = lab(&[Path::new("render"), &a]);
    assert_eq!(out.status.code(), Some(2), "--report DIR is required");
    std::fs::remove_dir_all(dir).unwrap();
}
