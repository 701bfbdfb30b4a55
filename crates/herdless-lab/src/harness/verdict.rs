//! Judging a table's ratios against their targets: which case decides, met
//! or missed, and how far the verdict can be trusted. The lab README's
//! "Verdicts, confidence and a disturbed machine" says what each means.
//!
//! - **The value.** A ratio divides two medians per case
//!   ([`Quotient::of`]): `x/0` is `∞` (meets every "at least", misses
//!   every "at most"), `0/0` is not judged (the other cases decide). The
//!   worst value over the cases a target applies to decides it.
//! - **The confidence.** A case's noise interval moves the medians by `k`
//!   spreads the ways that widen the quotient,
//!   `[(n − k·sn)/(d + k·sd), (n + k·sn)/(d − k·sd)]` ([`interval`]): wholly
//!   on the verdict's side of the bound at `k = 2` is high, at `k = 1`
//!   medium, else low. "Met" takes its least confident case, "missed" its
//!   most confident missing one. Under [`MIN_SAMPLES`] repetitions it is
//!   low; a row disturbed ([`DISTURBED`]) caps it at medium.
//! - **The outcome.** Low confidence decides nothing: [`Outcome::Undecided`],
//!   leaning the way the median lies ([`Judgement::met`]); the runner
//!   measures such a row again first (`runner.rs`), and `compare` takes two
//!   undecided verdicts to agree.
//!
//! [`DISTURBED`]: super::disturbance::DISTURBED

use super::format::{describe_bound, fmt_quotient, fmt_ratio};
use super::outcome::{Confidence, Outcome, OutcomeCounts};
use super::quotient::Quotient;
use super::report::{Ratio, SectionReport};
use super::spec::Bound;

/// Fewest repetitions a cell needs for its spread to mean anything.
pub const MIN_SAMPLES: usize = 3;

/// A target's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// The deciding case (index).
    pub case: usize,
    /// The deciding case's label.
    pub label: String,
    /// The deciding value.
    pub value: Quotient,
    /// Which side of the bound the deciding value lies on: whether the
    /// target holds as measured, decided or not (the verdict "leans" this
    /// way when it is [`Outcome::Undecided`]).
    pub met: bool,
    /// How far the verdict can be trusted.
    pub confidence: Confidence,
    /// Why the confidence is not high (empty when it is).
    pub reasons: Vec<String>,
    /// Whether a case the verdict rests on was measured on a disturbed
    /// machine.
    pub disturbed: bool,
}

impl Judgement {
    /// Met, missed, or undecided at low confidence.
    pub fn outcome(&self) -> Outcome {
        Outcome::of(self.met, self.confidence)
    }

    /// `met`, `MISSED`, `undecided (leans met)` or `undecided (leans
    /// missed)`.
    pub fn verdict(&self) -> &'static str {
        self.outcome().label(self.met)
    }
}

/// The noise interval of `num/den` at `k` spreads: `(lowest, highest)`
/// quotient the spreads allow. A zero denominator makes the high end
/// infinite; a zero over a zero makes the interval `[0, ∞]`.
pub fn interval(num: (f64, f64), den: (f64, f64), k: f64) -> (f64, f64) {
    let ((n, sn), (d, sd)) = (num, den);
    let (n_lo, n_hi) = ((n - k * sn).max(0.0), n + k * sn);
    let (d_lo, d_hi) = ((d - k * sd).max(0.0), d + k * sd);
    let div = |a: f64, b: f64, zero_over_zero: f64| match (a == 0.0, b == 0.0) {
        (true, true) => zero_over_zero,
        (false, true) => f64::INFINITY,
        _ => a / b,
    };
    (div(n_lo, d_hi, 0.0), div(n_hi, d_lo, f64::INFINITY))
}

/// What a case's verdict rests on: its margin from the bound in spreads,
/// its repetitions, and the machine's state while it was measured.
#[derive(Clone, Debug)]
struct CaseLevel {
    margin: Confidence,
    samples: usize,
    /// Why the row counts as disturbed, if it does.
    disturbed: Option<String>,
}

impl CaseLevel {
    /// The margin, capped by too few repetitions (low) or a disturbed
    /// machine (medium), with the reasons it is not high.
    fn confidence(self) -> (Confidence, Vec<String>) {
        let mut confidence = self.margin;
        let mut reasons = Vec::new();
        if self.samples < MIN_SAMPLES {
            confidence = Confidence::Low;
            reasons.push(format!("{} repetitions measure no spread", self.samples));
        } else {
            match self.margin {
                Confidence::High => {}
                Confidence::Medium => {
                    reasons.push("clear of the bound by less than twice the spread".to_string())
                }
                Confidence::Low => reasons.push("the bound is within the spread".to_string()),
            }
        }
        if let Some(why) = self.disturbed {
            confidence = confidence.min(Confidence::Medium);
            reasons.push(why);
        }
        (confidence, reasons)
    }
}

/// Whether all of `(lo, hi)` lies on the `met` (or missed) side of `bound`.
fn clear_of(bound: Bound, (lo, hi): (f64, f64), met: bool) -> bool {
    match (bound, met) {
        (Bound::AtLeast(b), true) => lo >= b,
        (Bound::AtLeast(b), false) => hi < b,
        (Bound::AtMost(b), true) => hi <= b,
        (Bound::AtMost(b), false) => lo > b,
    }
}

impl SectionReport {
    /// Fills each ratio's per-case values, verdict and confidence from the
    /// medians and spreads.
    pub fn compute_ratios(&mut self) {
        for r in 0..self.ratios.len() {
            let metric = self.ratio_metric(&self.ratios[r]).to_string();
            let (num, den) = (self.ratios[r].num.clone(), self.ratios[r].den.clone());
            self.ratios[r].values = (0..self.cases.len())
                .map(|c| {
                    let n = self.median(c, &num, &metric)?;
                    let d = self.median(c, &den, &metric)?;
                    Some(Quotient::of(n, d))
                })
                .collect();
            let judgement = self.judge(&self.ratios[r]);
            self.ratios[r].met = judgement.as_ref().map(|j| j.met);
            self.ratios[r].confidence = judgement.as_ref().map(|j| j.confidence);
            self.ratios[r].outcome = judgement.as_ref().map(Judgement::outcome);
        }
    }

    /// How the section's targets came out.
    pub fn outcome_counts(&self) -> OutcomeCounts {
        let mut counts = OutcomeCounts::default();
        for r in self.ratios.iter().filter(|r| r.target.is_some()) {
            counts.add(self.judge(r).as_ref().map(Judgement::outcome));
        }
        counts
    }

    /// The cases `ratio`'s target applies to that have a value to judge
    /// (`0/0` has none), with that value.
    fn judged_values(&self, ratio: &Ratio) -> Vec<(usize, f64)> {
        (0..self.cases.len())
            .filter(|&c| ratio.applies_to(&self.cases[c].label))
            .filter_map(|c| Some((c, ratio.values.get(c).copied()??.value()?)))
            .collect()
    }

    /// The case (index) and value that decide `ratio`'s target: the worst
    /// value over the cases it applies to; `None` without a target or a
    /// value to judge.
    pub fn deciding(&self, ratio: &Ratio) -> Option<(usize, Quotient)> {
        let bound = ratio.target?;
        self.judged_values(ratio)
            .into_iter()
            .reduce(|a, b| {
                let b_worse = match bound {
                    Bound::AtLeast(_) => b.1 < a.1,
                    Bound::AtMost(_) => b.1 > a.1,
                };
                if b_worse {
                    b
                } else {
                    a
                }
            })
            .map(|(c, v)| (c, Quotient::Value(v)))
    }

    /// `ratio`'s verdict with its confidence; `None` without a target or a
    /// value to judge.
    pub fn judge(&self, ratio: &Ratio) -> Option<Judgement> {
        let bound = ratio.target?;
        let (case, value) = self.deciding(ratio)?;
        let met = bound.holds(value.value()?);
        // The cases that make the verdict: every judged case for "met",
        // the missing ones for "missed".
        let levels: Vec<(usize, CaseLevel)> = self
            .judged_values(ratio)
            .into_iter()
            .filter(|&(_, v)| bound.holds(v) == met)
            .map(|(c, _)| (c, self.case_level(ratio, bound, c, met)))
            .collect();
        let level = if met {
            // The least confident case, its fewest samples, any
            // disturbance.
            levels
                .iter()
                .map(|(_, l)| l.margin)
                .min()
                .map(|margin| CaseLevel {
                    margin,
                    samples: levels.iter().map(|(_, l)| l.samples).min().unwrap_or(0),
                    disturbed: levels.iter().find_map(|(_, l)| l.disturbed.clone()),
                })
        } else {
            // The most confident missing case (the deciding one on ties).
            levels
                .iter()
                .max_by_key(|(c, l)| (l.margin, *c == case))
                .map(|(_, l)| l.clone())
        };
        let disturbed = level.as_ref().is_some_and(|l| l.disturbed.is_some());
        let (confidence, reasons) = level.map_or_else(
            || (Confidence::Low, vec!["no spread to judge by".to_string()]),
            CaseLevel::confidence,
        );
        Some(Judgement {
            case,
            label: self.cases[case].label.clone(),
            value,
            met,
            confidence,
            reasons,
            disturbed,
        })
    }

    /// The confidence of case `c`'s own verdict on `ratio` (met or missed
    /// by its value there), with why it is not high; `None` where the
    /// target does not apply or has no value to judge. The runner asks it
    /// to decide whether a row is worth measuring again.
    pub fn case_confidence(&self, ratio: &Ratio, c: usize) -> Option<(Confidence, Vec<String>)> {
        Some(self.own_case_level(ratio, c)?.confidence())
    }

    /// Whether `ratio`'s bound lies within case `c`'s spread (its noise
    /// interval at one spread), with repetitions enough to measure one.
    /// Too few repetitions leave a verdict undecided too, but measuring the
    /// row again with as few would measure no spread either; the runner
    /// asks this to decide whether an undecided row is worth measuring
    /// again.
    pub fn bound_within_spread(&self, ratio: &Ratio, c: usize) -> bool {
        self.own_case_level(ratio, c)
            .is_some_and(|level| level.margin == Confidence::Low && level.samples >= MIN_SAMPLES)
    }

    /// Case `c`'s level on the side of `ratio`'s bound its own value lies
    /// on; `None` where the target does not apply or has no value to judge.
    fn own_case_level(&self, ratio: &Ratio, c: usize) -> Option<CaseLevel> {
        let bound = ratio.target?;
        if !ratio.applies_to(&self.cases[c].label) {
            return None;
        }
        let value = ratio.values.get(c).copied()??.value()?;
        Some(self.case_level(ratio, bound, c, bound.holds(value)))
    }

    /// How clearly case `c` is on the `met` (or missed) side of `bound`.
    fn case_level(&self, ratio: &Ratio, bound: Bound, c: usize, met: bool) -> CaseLevel {
        let metric = self.ratio_metric(ratio);
        let disturbed = self
            .disturbance_at(c)
            .filter(|d| d.is_disturbed())
            .map(|d| {
                format!(
                    "disturbed at {} {}: {}",
                    self.param,
                    self.cases[c].label,
                    d.describe()
                )
            });
        let (Some(n), Some(d)) = (
            self.summary(c, &ratio.num, metric),
            self.summary(c, &ratio.den, metric),
        ) else {
            return CaseLevel {
                margin: Confidence::Low,
                samples: 0,
                disturbed,
            };
        };
        let (num, den) = ((n.median, n.spread), (d.median, d.spread));
        let margin = if clear_of(bound, interval(num, den, 2.0), met) {
            Confidence::High
        } else if clear_of(bound, interval(num, den, 1.0), met) {
            Confidence::Medium
        } else {
            Confidence::Low
        };
        CaseLevel {
            margin,
            samples: n.samples.len().min(d.samples.len()),
            disturbed,
        }
    }

    /// One line per target: met, missed or undecided (leaning met or
    /// missed) with the value that decides it and the verdict's confidence;
    /// or, without targets, the range of the first ratio.
    pub fn verdict_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for r in &self.ratios {
            let Some(bound) = r.target else {
                continue;
            };
            let head = format!("{} {} {}", r.name(), describe_bound(bound), self.where_(r));
            match self.judge(r) {
                Some(j) => {
                    let worst = if r.at.len() == 1 { "" } else { "worst " };
                    let mut line = format!(
                        "{head}: {} ({worst}{} at {} {}), {} confidence",
                        j.verdict(),
                        fmt_quotient(j.value),
                        self.param,
                        j.label,
                        j.confidence.label()
                    );
                    if !j.reasons.is_empty() {
                        line.push_str(": ");
                        line.push_str(&j.reasons.join("; "));
                    }
                    lines.push(line);
                }
                None => lines.push(format!("{head}: {}", self.why_not_judged(r))),
            }
        }
        if lines.is_empty() {
            if let Some(r) = self.ratios.first() {
                lines.push(match r.range() {
                    Some((lo, hi)) => format!(
                        "{} from {} to {} over {}",
                        r.name(),
                        fmt_ratio(lo),
                        fmt_ratio(hi),
                        self.param
                    ),
                    None => format!("{}: no data", r.name()),
                });
            }
        }
        if lines.is_empty() {
            lines.push("no ratio to judge".to_string());
        }
        lines
    }

    /// The verdict lines joined with `; ` (one paragraph).
    pub fn verdict(&self) -> String {
        self.verdict_lines().join("; ")
    }

    /// `at every case`, or `at 8, 16`.
    fn where_(&self, r: &Ratio) -> String {
        if r.at.is_empty() {
            "at every case".to_string()
        } else {
            format!("at {}", r.at.join(", "))
        }
    }

    /// Why a target has no verdict: no value where it applies, or only
    /// `0/0`.
    fn why_not_judged(&self, r: &Ratio) -> String {
        let both_zero: Vec<&str> = (0..self.cases.len())
            .filter(|&c| r.applies_to(&self.cases[c].label))
            .filter(|&c| r.values.get(c).copied().flatten() == Some(Quotient::BothZero))
            .map(|c| self.cases[c].label.as_str())
            .collect();
        if both_zero.is_empty() {
            "no data".to_string()
        } else {
            format!(
                "not judged: both medians 0 (0/0) at {} {}",
                self.param,
                both_zero.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
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
}
