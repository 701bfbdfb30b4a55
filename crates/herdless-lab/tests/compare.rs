//! `herdless-lab compare A.json B.json`: verdicts only beyond the spread,
//! `--fail-on-regression`, and typed errors for files of another schema,
//! missing files and corrupt JSON.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use herdless_lab::harness::report::{Machine, SCHEMA};
use herdless_lab::harness::{
    compare, run_experiment, Case, Experiment, LabError, Metric, PerSuite, Ratio, Report, Role,
    RunOptions, Sample, Section, Suite, Variant,
};

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

/// A run of a toy experiment: `old` takes 10 ns × n, `new` takes
/// `new_ns` × n; every repetition alike, so the spread is 0.
fn run(new_ns: f64) -> Report {
    let cases = vec![Case::new("1", 1.0), Case::new("2", 2.0)];
    let fixed = move |name, role, t: f64| {
        Variant::new(name, role, move |c: &Case<f64>| {
            Ok(Sample::new().with("t", t * c.params).with("n", 3.0))
        })
    };
    let exp = Experiment::new("toy", "seed").section(
        Section::new(
            "toy table",
            "n",
            PerSuite {
                smoke: cases.clone(),
                quick: cases.clone(),
                full: cases,
            },
        )
        .metric(Metric::lower("t", "ns"))
        .metric(Metric::lower("n", "count"))
        .variant(fixed("old", Role::Before, 10.0))
        .variant(fixed("new", Role::After, new_ns))
        .ratio(Ratio::of("old", "new")),
    );
    let opts = RunOptions::new(Suite::Smoke);
    let result = run_experiment(&exp, &opts).unwrap();
    Report::new(Machine::detect(), &opts, SystemTime::now(), vec![result])
}

fn write(report: &Report, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    report.write_json(&path).unwrap();
    path
}

#[test]
fn only_differences_beyond_the_spread_get_a_verdict() {
    let (a, mut b) = (run(1.0), run(2.0));
    let c = compare::compare(&a, &b, false);
    let rows = &c.sections[0].rows;
    assert_eq!(rows.len(), 4, "two cases × two variants, primary only");
    let verdict = |variant: &str| {
        rows.iter()
            .filter(|r| r.variant == variant)
            .map(|r| r.change)
            .collect::<Vec<_>>()
    };
    assert_eq!(verdict("old"), [compare::Change::Same; 2]);
    assert_eq!(verdict("new"), [compare::Change::Worse; 2], "2 ns > 1 ns");
    assert_eq!(c.regressions(), 2);

    // Widen B's spread of `new` beyond the difference: no verdict.
    for case in &mut b.experiments[0].sections[0].cases {
        case.cells[1].metrics.get_mut("t").unwrap().spread = 100.0;
    }
    assert_eq!(compare::compare(&a, &b, false).regressions(), 0);

    let all = compare::compare(&a, &run(2.0), true);
    assert_eq!(all.sections[0].rows.len(), 8, "every metric");
    let text = compare::render(&all, true);
    assert!(text.contains("slower") && text.contains("same"), "{text}");
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
    assert!(stdout.contains("toy — toy table"), "{stdout}");
    assert!(
        stdout.contains("2.00×") && stdout.contains("slower"),
        "{stdout}"
    );

    let out = lab(&[cmp, &a, &b, Path::new("--fail-on-regression")]);
    assert_eq!(out.status.code(), Some(1));
    let out = lab(&[cmp, &b, &a, Path::new("--fail-on-regression")]);
    assert!(out.status.success(), "B faster than A is no regression");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("faster"), "{stdout}");

    let out = lab(&[cmp, &a]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: herdless-lab compare"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_of_another_schema_is_refused_naming_both_versions() {
    let dir = scratch("schema");
    let a = write(&run(1.0), &dir, "a.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    value["schema"] = serde_json::json!(SCHEMA + 98);
    let other = dir.join("other.json");
    std::fs::write(&other, value.to_string()).unwrap();

    let err = Report::read_json(&other).unwrap_err();
    assert!(
        matches!(err, LabError::Schema { found, expected, .. } if found == SCHEMA + 98 && expected == SCHEMA),
        "{err}"
    );
    let out = lab(&[Path::new("compare"), &a, &other]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("schema {}", SCHEMA + 98))
            && stderr.contains(&format!("reads schema {SCHEMA}"))
            && stderr.contains("other.json"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn missing_corrupt_and_inconsistent_files_are_typed_errors() {
    let dir = scratch("bad-files");
    let a = write(&run(1.0), &dir, "a.json");
    let missing = dir.join("missing.json");
    assert!(matches!(
        Report::read_json(&missing),
        Err(LabError::File { .. })
    ));
    let corrupt = dir.join("corrupt.json");
    std::fs::write(&corrupt, "{\"schema\": 1, \"machine\": ").unwrap();
    assert!(matches!(
        Report::read_json(&corrupt),
        Err(LabError::Json(_))
    ));
    // Parses, but a ratio has fewer values than cases: refused rather than
    // indexed out of bounds later.
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    value["experiments"][0]["sections"][0]["ratios"][0]["values"] = serde_json::json!([1.0]);
    let inconsistent = dir.join("inconsistent.json");
    std::fs::write(&inconsistent, value.to_string()).unwrap();
    assert!(matches!(
        Report::read_json(&inconsistent),
        Err(LabError::Inconsistent { .. })
    ));

    for (bad, says) in [
        (&missing, "missing.json: No such file"),
        (&corrupt, "JSON:"),
        (&inconsistent, "inconsistent results"),
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
    let html = dir.join("html");
    let out = lab(&[Path::new("render"), &a, Path::new("--report"), &html]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    assert!(page.contains("id=\"table-toy-s0-t\"") && page.contains("id=\"chart-toy-s0\""));
    let out = lab(&[Path::new("render"), &a]);
    assert!(!out.status.success(), "--report DIR is required");
    std::fs::remove_dir_all(dir).unwrap();
}
