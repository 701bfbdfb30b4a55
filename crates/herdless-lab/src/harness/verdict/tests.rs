//! The verdicts' tests: x/0 and 0/0, the confidence levels, undecided
//! targets and the caps.

use super::*;
use crate::harness::disturbance::Disturbance;
use crate::harness::report::{CaseReport, Cell, Metric, VariantInfo};
use crate::harness::spec::Role;
use crate::harness::stats::Summary;

/// `(median, spread)` of a cell.
type Measured = (f64, f64);

/// A section with variants `a` and `b`, one case per `(a, b)` pair of
/// `(median, spread)` (7 samples each), and one ratio a/b with `bound`.
fn section(cells: &[(Measured, Measured)], bound: Bound) -> SectionReport {
    let summary = |(median, spread): (f64, f64)| {
        let mut s = Summary::of(&[median; 7]).unwrap();
        s.spread = spread;
        s
    };
    let cell = |name: &str, ms| Cell {
        variant: name.to_string(),
        metrics: [("t".to_string(), summary(ms))].into_iter().collect(),
        errors: Vec::new(),
        skipped: None,
    };
    let mut s = SectionReport {
        title: "fixture".into(),
        param: "n".into(),
        metrics: vec![Metric::lower("t", "x")],
        variants: ["a", "b"]
            .map(|name| VariantInfo {
                name: name.into(),
                role: Role::Peer,
            })
            .to_vec(),
        cases: cells
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| CaseReport {
                label: (i + 1).to_string(),
                params: serde_json::Value::Null,
                cells: vec![cell("a", a), cell("b", b)],
                attempts: 1,
                remeasured_for: None,
                disturbance: None,
            })
            .collect(),
        ratios: vec![Ratio {
            target: Some(bound),
            ..Ratio::of("a", "b")
        }],
        evidence: Vec::new(),
        disturbance: None,
    };
    s.compute_ratios();
    s
}

#[test]
fn x_over_zero_is_infinite_and_meets_at_least_and_misses_at_most() {
    // "after" never contended: before/after = 5/0.
    let s = section(&[((5.0, 0.0), (0.0, 0.0))], Bound::AtLeast(5.0));
    assert_eq!(
        s.ratios[0].values,
        vec![Some(Quotient::Value(f64::INFINITY))]
    );
    assert_eq!(s.ratios[0].met, Some(true));
    assert_eq!(s.ratios[0].confidence, Some(Confidence::High));
    assert!(
        s.verdict()
            .contains("met (worst ∞× at n 1), high confidence"),
        "{}",
        s.verdict()
    );
    let s = section(&[((5.0, 0.0), (0.0, 0.0))], Bound::AtMost(1.1));
    assert_eq!(s.ratios[0].met, Some(false));
}

#[test]
fn zero_over_zero_is_not_judged_and_other_cases_decide() {
    let s = section(&[((0.0, 0.0), (0.0, 0.0))], Bound::AtLeast(5.0));
    assert_eq!(s.ratios[0].values, vec![Some(Quotient::BothZero)]);
    assert_eq!((s.ratios[0].met, s.ratios[0].confidence), (None, None));
    assert!(
        s.verdict()
            .contains("not judged: both medians 0 (0/0) at n 1"),
        "{}",
        s.verdict()
    );
    // With another case measured, that case decides.
    let s = section(
        &[((0.0, 0.0), (0.0, 0.0)), ((60.0, 1.0), (10.0, 0.1))],
        Bound::AtLeast(5.0),
    );
    assert_eq!(s.deciding(&s.ratios[0]), Some((1, Quotient::Value(6.0))));
    assert_eq!(s.ratios[0].met, Some(true));
}

#[test]
fn zero_over_x_meets_at_most_and_misses_at_least() {
    let s = section(&[((0.0, 0.0), (4.0, 0.0))], Bound::AtMost(1.0));
    assert_eq!(s.ratios[0].met, Some(true));
    let s = section(&[((0.0, 0.0), (4.0, 0.0))], Bound::AtLeast(1.0));
    assert_eq!(s.ratios[0].met, Some(false));
}

#[test]
fn confidence_follows_the_margin_in_spreads() {
    // 12/10 = 1.2 against ≥ 1.0. Interval at k: (12 − k·s)/(10 + k·s').
    let level =
        |s: f64| section(&[((12.0, s), (10.0, s))], Bound::AtLeast(1.0)).ratios[0].confidence;
    assert_eq!(level(0.2), Some(Confidence::High)); // k=2: 11.6/10.4 = 1.12
    assert_eq!(level(0.7), Some(Confidence::Medium)); // k=1: 11.3/10.7 ≥ 1; k=2: 10.6/11.4 < 1
    assert_eq!(level(1.5), Some(Confidence::Low)); // k=1: 10.5/11.5 < 1
                                                   // Missed targets: the same margins on the other side.
    let missed =
        |s: f64| section(&[((8.0, s), (10.0, s))], Bound::AtLeast(1.0)).ratios[0].confidence;
    assert_eq!(missed(0.2), Some(Confidence::High));
    assert_eq!(missed(2.0), Some(Confidence::Low));
}

#[test]
fn met_takes_the_least_confident_case_and_missed_the_most_confident() {
    let close = ((10.2, 0.5), (10.0, 0.5)); // 1.02, within the spread
    let clear = ((20.0, 0.1), (10.0, 0.1)); // 2.0
    let s = section(&[clear, close], Bound::AtLeast(1.0));
    assert_eq!(
        (s.ratios[0].met, s.ratios[0].confidence),
        (Some(true), Some(Confidence::Low))
    );
    let far_miss = ((5.0, 0.1), (10.0, 0.1)); // 0.5
    let near_miss = ((9.9, 0.5), (10.0, 0.5));
    let s = section(&[near_miss, far_miss, clear], Bound::AtLeast(1.0));
    let j = s.judge(&s.ratios[0]).unwrap();
    assert_eq!((j.met, j.case, j.confidence), (false, 1, Confidence::High));
}

#[test]
fn a_value_at_the_bound_is_undecided_leaning_by_the_median() {
    // 10.1/10 and 9.9/10 against ≥ 1.0 with spreads of 0.5: the bound
    // lies within the spread either way.
    let at = |num: f64| section(&[((num, 0.5), (10.0, 0.5))], Bound::AtLeast(1.0));
    for (num, met, text) in [
        (10.1, true, "undecided (leans met) (worst 1.01× at n 1)"),
        (9.9, false, "undecided (leans missed) (worst 0.990× at n 1)"),
    ] {
        let s = at(num);
        let j = s.judge(&s.ratios[0]).unwrap();
        assert_eq!(
            (j.outcome(), j.met, j.confidence),
            (Outcome::Undecided, met, Confidence::Low)
        );
        assert_eq!(s.ratios[0].outcome, Some(Outcome::Undecided));
        assert!(s.bound_within_spread(&s.ratios[0], 0));
        let line = format!("{text}, low confidence: the bound is within the spread");
        assert!(s.verdict().contains(&line), "{}", s.verdict());
    }
    // Clear of the bound, by twice the spread or by one: decided.
    for (cells, outcome, text) in [
        (
            ((20.0, 0.1), (10.0, 0.1)),
            Outcome::Met,
            "met (worst 2.00× at n 1), high",
        ),
        (
            ((12.0, 0.7), (10.0, 0.7)),
            Outcome::Met,
            "met (worst 1.20× at n 1), medium",
        ),
        (
            ((5.0, 0.1), (10.0, 0.1)),
            Outcome::Missed,
            "MISSED (worst 0.500× at n 1), high",
        ),
    ] {
        let s = section(&[cells], Bound::AtLeast(1.0));
        assert_eq!(s.ratios[0].outcome, Some(outcome));
        assert!(!s.bound_within_spread(&s.ratios[0], 0));
        assert!(s.verdict().contains(text), "{}", s.verdict());
    }
    // Too few repetitions to measure a spread: undecided, but not
    // because the bound is within one.
    let mut s = section(&[((20.0, 0.1), (10.0, 0.1))], Bound::AtLeast(1.0));
    for cell in &mut s.cases[0].cells {
        cell.metrics.get_mut("t").unwrap().samples.truncate(2);
    }
    s.compute_ratios();
    assert_eq!(s.ratios[0].outcome, Some(Outcome::Undecided));
    assert!(!s.bound_within_spread(&s.ratios[0], 0));
}

#[test]
fn few_repetitions_or_a_disturbed_machine_cap_the_confidence() {
    let mut s = section(&[((20.0, 0.1), (10.0, 0.1))], Bound::AtLeast(1.0));
    assert_eq!(s.ratios[0].confidence, Some(Confidence::High));
    s.cases[0].disturbance = Some(Disturbance {
        others: 0.4,
        steal: 0.0,
        seconds: 2.0,
    });
    s.compute_ratios();
    let j = s.judge(&s.ratios[0]).unwrap();
    assert_eq!(j.confidence, Confidence::Medium);
    assert!(j.disturbed);
    assert!(
        j.reasons[0].contains("disturbed at n 1: others 40%"),
        "{:?}",
        j.reasons
    );
    // A quiet row, but the section-level window says disturbed: the row
    // had its own window, which wins.
    s.cases[0].disturbance = Some(Disturbance::default());
    s.disturbance = Some(Disturbance {
        others: 0.5,
        steal: 0.0,
        seconds: 9.0,
    });
    s.compute_ratios();
    assert_eq!(s.ratios[0].confidence, Some(Confidence::High));
    for cell in &mut s.cases[0].cells {
        let t = cell.metrics.get_mut("t").unwrap();
        t.samples.truncate(2);
    }
    s.compute_ratios();
    assert_eq!(s.ratios[0].confidence, Some(Confidence::Low));
}

#[test]
fn the_interval_widens_the_quotient_both_ways() {
    assert_eq!(interval((12.0, 1.0), (10.0, 1.0), 1.0), (1.0, 13.0 / 9.0));
    assert_eq!(
        interval((5.0, 0.0), (0.0, 0.0), 1.0),
        (f64::INFINITY, f64::INFINITY)
    );
    assert_eq!(interval((5.0, 1.0), (0.0, 2.0), 1.0), (2.0, f64::INFINITY));
    assert_eq!(interval((0.0, 0.0), (0.0, 0.0), 1.0), (0.0, f64::INFINITY));
}
