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

    /// A made-up verdict, `value` at case `16` (tests).
    #[cfg(test)]
    pub(crate) fn toy(met: bool, value: f64, confidence: Confidence) -> Judgement {
        Judgement {
            case: 0,
            label: "16".into(),
            value: Quotient::Value(value),
            met,
            confidence,
            reasons: Vec::new(),
            disturbed: false,
        }
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
        // The smallest value against "at least", the largest against "at
        // most"; the first such case on ties.
        let worse = match ratio.target? {
            Bound::AtLeast(_) => 1.0,
            Bound::AtMost(_) => -1.0,
        };
        self.judged_values(ratio)
            .into_iter()
            .min_by(|a, b| (worse * a.1).total_cmp(&(worse * b.1)))
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

    /// The cases `r`'s target applies to where both medians are 0 (`0/0`).
    pub fn both_zero_at(&self, r: &Ratio) -> Vec<&str> {
        (0..self.cases.len())
            .filter(|&c| r.applies_to(&self.cases[c].label))
            .filter(|&c| r.values.get(c).copied().flatten() == Some(Quotient::BothZero))
            .map(|c| self.cases[c].label.as_str())
            .collect()
    }

    /// Why a target has no verdict: no value where it applies, or only
    /// `0/0`.
    fn why_not_judged(&self, r: &Ratio) -> String {
        let both_zero = self.both_zero_at(r);
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
mod tests;
