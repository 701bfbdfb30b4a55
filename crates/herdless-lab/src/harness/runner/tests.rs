//! The runner's tests: interleaving, warm-up, failures, re-measuring.

use super::*;
use crate::harness::quotient::Quotient;
use crate::harness::spec::{Case, PerSuite, Ratio, Role, Section, Variant};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

fn cases() -> PerSuite<Vec<Case<u32>>> {
    let c = vec![Case::new("1", 1), Case::new("2", 2)];
    PerSuite {
        smoke: c.clone(),
        quick: c.clone(),
        full: c,
    }
}

#[test]
fn variants_interleave_and_rotate_and_warmup_is_dropped() {
    static ORDER: Mutex<Vec<(&str, u32)>> = Mutex::new(Vec::new());
    let variant = |name: &'static str, role, value: f64| {
        Variant::new(name, role, move |c: &Case<u32>| {
            ORDER.lock().unwrap().push((name, c.params));
            Ok(Sample::new().with("t", value * c.params as f64))
        })
    };
    let exp = Experiment::new("toy", "none").section(
        Section::new("toy", "n", cases())
            .metric(Metric::lower("t", "s"))
            .variant(variant("a", Role::Before, 10.0))
            .variant(variant("b", Role::After, 2.0))
            .ratio(Ratio::of("a", "b").at_least(4.0)),
    );
    let opts = RunOptions {
        reps: 2,
        warmup: 1,
        ..RunOptions::new(Suite::Quick)
    };
    let report = run_experiment(&exp, &opts).unwrap();
    let order = ORDER.lock().unwrap().clone();
    assert_eq!(
        order,
        vec![
            ("a", 1),
            ("b", 1),
            ("a", 2),
            ("b", 2), // warm-up
            ("b", 1),
            ("a", 1),
            ("b", 2),
            ("a", 2), // rotated
            ("a", 1),
            ("b", 1),
            ("a", 2),
            ("b", 2),
        ]
    );
    let s = &report.sections[0];
    assert_eq!(s.cases[1].cells[0].metrics["t"].samples, vec![20.0, 20.0]);
    assert_eq!(s.ratios[0].values, vec![Some(Quotient::Value(5.0)); 2]);
    assert_eq!(s.ratios[0].met, Some(true));
}

#[test]
fn one_ratio_column_judges_several_named_cases_by_the_worst() {
    // a/b is 5 at case 1 and 2.5 at case 2.
    let exp = Experiment::new("toy", "none").section(
        Section::new("toy", "n", cases())
            .metric(Metric::lower("t", "s"))
            .variant(Variant::new("a", Role::Before, |c: &Case<u32>| {
                Ok(Sample::new().with("t", if c.params == 1 { 10.0 } else { 5.0 }))
            }))
            .variant(Variant::new("b", Role::After, |_: &Case<u32>| {
                Ok(Sample::new().with("t", 2.0))
            }))
            .ratio(Ratio::of("a", "b").at_least(4.0).at_case("1").at_case("2"))
            .ratio(Ratio::of("a", "b").at_least(4.0).at_case("1")),
    );
    let report = run_experiment(&exp, &RunOptions::new(Suite::Smoke)).unwrap();
    let s = &report.sections[0];
    assert_eq!(s.ratios[0].at, ["1", "2"]);
    assert_eq!(s.ratios[0].met, Some(false), "2.5 at case 2 decides");
    assert_eq!(s.ratios[1].met, Some(true));
    assert!(
        s.verdict()
            .contains("at 1, 2: undecided (leans missed) (worst 2.50×"),
        "{}",
        s.verdict()
    );
    // JSON: a list for several cases, a plain label for one (as schema 1
    // always wrote), and both read back.
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["ratios"][0]["at"], serde_json::json!(["1", "2"]));
    assert_eq!(json["ratios"][1]["at"], serde_json::json!("1"));
    let back: crate::harness::report::SectionReport = serde_json::from_value(json).unwrap();
    assert_eq!(back.ratios[0].at, ["1", "2"]);
    assert_eq!(back.ratios[1].at, ["1"]);
}

#[test]
fn a_failing_variant_is_recorded_and_not_rerun_and_others_go_on() {
    static CALLS: Mutex<usize> = Mutex::new(0);
    let exp = Experiment::new("toy", "none").section(
        Section::new("toy", "n", cases())
            .metric(Metric::lower("t", "s"))
            .variant(Variant::new("bad", Role::Before, |_: &Case<u32>| {
                *CALLS.lock().unwrap() += 1;
                Err(LabError::Sample("boom".into()))
            }))
            .variant(Variant::new("good", Role::After, |_: &Case<u32>| {
                Ok(Sample::new().with("t", 1.0))
            })),
    );
    let report = run_experiment(&exp, &RunOptions::new(Suite::Quick)).unwrap();
    assert_eq!(*CALLS.lock().unwrap(), 2, "once per case");
    let row = &report.sections[0].cases[0];
    assert_eq!(row.cells[0].errors.len(), 1);
    assert!(row.cells[0].metrics.is_empty());
    assert_eq!(
        row.cells[1].metrics["t"].samples.len(),
        Suite::Quick.default_reps()
    );
    assert_eq!(report.sections[0].ratios[0].values, vec![None, None]);
}

#[test]
fn a_variant_this_machine_cannot_run_is_skipped_not_failed_and_not_rerun() {
    static CALLS: Mutex<usize> = Mutex::new(0);
    let exp = Experiment::new("toy", "none").section(
        Section::new("toy", "n", cases())
            .metric(Metric::lower("t", "s"))
            .variant(Variant::new("huge", Role::Peer, |_: &Case<u32>| {
                *CALLS.lock().unwrap() += 1;
                Err(LabError::Unavailable("no hugepages".into()))
            }))
            .variant(Variant::new("good", Role::After, |_: &Case<u32>| {
                Ok(Sample::new().with("t", 1.0))
            })),
    );
    let report = run_experiment(&exp, &RunOptions::new(Suite::Quick)).unwrap();
    assert_eq!(*CALLS.lock().unwrap(), 2, "once per case");
    let cell = &report.sections[0].cases[0].cells[0];
    assert!(cell.errors.is_empty() && cell.metrics.is_empty());
    assert_eq!(cell.skipped.as_deref(), Some("no hugepages"));
    let table = crate::harness::table::render_experiment(&report);
    assert!(
        table.contains("skipped: huge (not run here): no hugepages"),
        "{table}"
    );
    // Old results files have no `skipped`: read as None.
    let mut json = serde_json::to_value(cell).unwrap();
    json.as_object_mut().unwrap().remove("skipped");
    let back: crate::harness::report::Cell = serde_json::from_value(json).unwrap();
    assert_eq!(back.skipped, None);
}

#[test]
fn samples_must_hold_the_primary_metric_and_only_declared_ones() {
    let metrics = [Metric::lower("t", "s"), Metric::lower("u", "s")];
    assert!(check_sample(Sample::new().with("t", 1.0), &metrics).is_ok());
    assert!(check_sample(Sample::new().with("u", 1.0), &metrics).is_err());
    assert!(check_sample(Sample::new().with("t", 1.0).with("x", 1.0), &metrics).is_err());
    assert!(check_sample(Sample::new().with("t", f64::NAN), &metrics).is_err());
}

#[test]
fn a_ratio_naming_an_unknown_variant_is_a_definition_error() {
    let exp = Experiment::new("toy", "none").section(
        Section::new("toy", "n", cases())
            .metric(Metric::lower("t", "s"))
            .variant(Variant::new("a", Role::After, |_: &Case<u32>| {
                Ok(Sample::new().with("t", 1.0))
            }))
            .ratio(Ratio::of("a", "nope")),
    );
    let err = run_experiment(&exp, &RunOptions::new(Suite::Smoke)).unwrap_err();
    assert!(matches!(err, LabError::Definition(_)), "{err}");
}

/// One case; `steady` always takes 10; `noisy` takes the values of
/// `first` (one per call) and 10 after them. `noisy/steady ≤ 1.2`.
fn noisy_row(first: &'static [f64]) -> Experiment {
    let calls = AtomicUsize::new(0);
    let one = vec![Case::new("1", 1u32)];
    Experiment::new("toy", "none").section(
        Section::new(
            "toy",
            "n",
            PerSuite {
                smoke: one.clone(),
                quick: one.clone(),
                full: one,
            },
        )
        .metric(Metric::lower("t", "s"))
        .variant(Variant::new("noisy", Role::After, move |_: &Case<u32>| {
            let i = calls.fetch_add(1, Ordering::Relaxed);
            Ok(Sample::new().with("t", first.get(i).copied().unwrap_or(10.0)))
        }))
        .variant(Variant::new("steady", Role::Peer, |_: &Case<u32>| {
            Ok(Sample::new().with("t", 10.0))
        }))
        .ratio(Ratio::of("noisy", "steady").at_most(1.2)),
    )
}

fn retrying(retries: usize) -> RunOptions {
    RunOptions {
        reps: 5,
        warmup: 0,
        retries,
        retry_budget: f64::INFINITY,
        ..RunOptions::new(Suite::Quick)
    }
}

#[test]
fn a_row_too_wide_to_judge_is_measured_again_and_the_narrow_attempt_kept() {
    let exp = noisy_row(&[10.0, 20.0, 12.0, 20.0, 15.0]);
    let report = run_experiment(&exp, &retrying(2)).unwrap();
    let s = &report.sections[0];
    let case = &s.cases[0];
    assert_eq!(case.attempts, 2, "the second attempt was narrow enough");
    let why = case.remeasured_for.as_deref().unwrap();
    assert!(
        why.starts_with("noisy t spread") && why.ends_with("> 10%"),
        "{why}"
    );
    assert_eq!(case.cells[0].metrics["t"].samples, vec![10.0; 5]);
    assert_eq!(s.ratios[0].values, vec![Some(Quotient::Value(1.0))]);
    assert_eq!(s.ratios[0].met, Some(true));
}

#[test]
fn re_measuring_is_bounded_and_keeps_the_first_attempt_when_no_retry_is_narrower() {
    // Noisy for all 15 calls: the first pass and both retries alike.
    static NOISE: [f64; 15] = [
        10.0, 30.0, 11.0, 29.0, 20.0, 10.0, 30.0, 11.0, 29.0, 20.0, 10.0, 30.0, 11.0, 29.0, 20.0,
    ];
    let report = run_experiment(&noisy_row(&NOISE), &retrying(2)).unwrap();
    let case = &report.sections[0].cases[0];
    assert_eq!(case.attempts, 3, "one first pass and two retries, no more");
    assert_eq!(case.cells[0].metrics["t"].samples, NOISE[..5].to_vec());
    // Without retries the row is judged as measured.
    let once = run_experiment(&noisy_row(&NOISE), &retrying(0)).unwrap();
    assert_eq!(once.sections[0].cases[0].attempts, 1);
    assert_eq!(once.sections[0].cases[0].remeasured_for, None);
}

#[test]
fn an_undecided_row_is_measured_again_however_narrow() {
    // noisy ≈ 12 ± 4%, steady 10: 1.2 against ≤ 1.2, the bound within
    // the spread of a row far narrower than 10%. Then noisy takes 10.
    static AT_BOUND: [f64; 5] = [11.5, 12.5, 11.5, 12.5, 12.0];
    let once = run_experiment(&noisy_row(&AT_BOUND), &retrying(0)).unwrap();
    let s = &once.sections[0];
    assert_eq!(s.ratios[0].outcome, Some(Outcome::Undecided));
    let (_, _, spread) = widest(s, 0, &s.ratios).unwrap();
    assert!(spread < 0.10, "{spread}");
    assert_eq!(
        needs_remeasure(s, 0, 0.10).as_deref(),
        Some("undecided: the bound 1.20× is within the spread")
    );

    let report = run_experiment(&noisy_row(&AT_BOUND), &retrying(2)).unwrap();
    let s = &report.sections[0];
    let case = &s.cases[0];
    assert_eq!(case.attempts, 2, "the second attempt decided it");
    assert_eq!(
        case.remeasured_for.as_deref(),
        Some("undecided: the bound 1.20× is within the spread")
    );
    // Kept for being narrower, not for its value.
    assert_eq!(case.cells[0].metrics["t"].samples, vec![10.0; 5]);
    assert_eq!(s.ratios[0].outcome, Some(Outcome::Met));
}

#[test]
fn a_clear_verdict_is_not_measured_again_however_wide() {
    // noisy ≈ 2 ± 50%, steady 10: 0.2 ≤ 1.2 even at twice the spread.
    let report = run_experiment(&noisy_row(&[1.0, 3.0, 1.0, 3.0, 2.0]), &retrying(2)).unwrap();
    let s = &report.sections[0];
    assert_eq!(s.ratios[0].confidence, Some(Confidence::High));
    assert_eq!(s.cases[0].attempts, 1);
}
