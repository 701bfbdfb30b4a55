//! `herdless-lab compare A.json B.json`: two runs side by side, to check a
//! change for regressions, or two runs of the same code for agreement (the
//! lab README's "Comparing two runs" says how to read it).
//!
//! - **Targets**: the runs *agree* unless they contradict each other (two
//!   undecided verdicts agree, and so does one undecided leaning the way
//!   the other decided); they differ *within noise* when one is undecided
//!   and leans against the other, or either rests on a disturbed row. Only
//!   met against missed, both decided on quiet machines, is *changed*.
//! - **Cells**: `faster`/`slower` (`better`/`worse` off the primary metric)
//!   only beyond both spreads *and* at [`SIGNIFICANCE`] by the exact
//!   rank-sum test (`rank_test.rs`); `same` otherwise, and too few to tell
//!   under [`MIN_SAMPLES`] repetitions.
//!
//! Only the primary metric is compared unless `all_metrics`. Cells and
//! targets in one run only are named, not compared.

mod render;

pub use render::render;

use super::disturbance::Conditions;
use super::format::describe_bound;
use super::outcome::Outcome;
use super::quotient::Quotient;
use super::rank_test;
use super::report::{Report, SectionReport};
use super::stats::Summary;
use super::verdict::Judgement;

/// The p-value at or below which a difference is more than noise.
pub const SIGNIFICANCE: f64 = 0.01;

/// Fewest repetitions per run for the rank test to reach
/// [`SIGNIFICANCE`] (2 in 252 with five against five).
pub const MIN_SAMPLES: usize = 5;

/// Which way B moved from A, where the move exceeds the noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// B is better than A beyond the noise.
    Better,
    /// B is worse than A beyond the noise.
    Worse,
    /// The difference is within the noise.
    Same,
}

impl Change {
    /// Judges `b` against `a` for a metric where lower (or higher) is
    /// better: beyond both spreads and significant by the rank test.
    pub fn of(a: &Summary, b: &Summary, lower_is_better: bool) -> Change {
        let diff = b.median - a.median;
        if diff.abs() <= a.spread + b.spread
            || rank_test::p_value(&a.samples, &b.samples) > SIGNIFICANCE
        {
            return Change::Same;
        }
        if (diff < 0.0) == lower_is_better {
            Change::Better
        } else {
            Change::Worse
        }
    }

    /// `faster`/`slower` for a primary metric, `better`/`worse` otherwise.
    pub fn label(self, primary: bool) -> &'static str {
        match (self, primary) {
            (Change::Same, _) => "same",
            (Change::Better, true) => "faster",
            (Change::Worse, true) => "slower",
            (Change::Better, false) => "better",
            (Change::Worse, false) => "worse",
        }
    }
}

/// One compared (case, variant, metric).
#[derive(Clone, Debug)]
pub struct Row {
    /// Case label.
    pub case: String,
    /// Variant name.
    pub variant: String,
    /// Metric name.
    pub metric: String,
    /// Whether it is the section's primary metric.
    pub primary: bool,
    /// Median and spread in A.
    pub a: (f64, f64),
    /// Median and spread in B.
    pub b: (f64, f64),
    /// B's median over A's.
    pub ratio: Quotient,
    /// The verdict.
    pub change: Change,
    /// Whether either run had too few repetitions to tell a change.
    pub too_few: bool,
}

/// One section present in both runs.
#[derive(Clone, Debug)]
pub struct SectionDiff {
    /// Experiment name.
    pub experiment: String,
    /// Section title.
    pub title: String,
    /// What the rows vary.
    pub param: String,
    /// The compared cells.
    pub rows: Vec<Row>,
}

/// How a target's verdicts in A and B relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// No contradiction: both met, both missed, both undecided (neither
    /// run decided), or one undecided leaning the way the other decided.
    Agree,
    /// One undecided, leaning against the other's decision; or they
    /// differ and at least one was measured on a disturbed machine.
    WithinNoise,
    /// One met and the other missed, both decided (medium or high
    /// confidence), on quiet machines.
    Changed,
    /// Judged in one run only (no data, or `0/0`, in the other).
    OneSided,
}

impl Agreement {
    /// Relates A's verdict to B's.
    pub fn of(a: Option<&Judgement>, b: Option<&Judgement>) -> Agreement {
        let (Some(a), Some(b)) = (a, b) else {
            return Agreement::OneSided;
        };
        let undecided = |v: &Judgement| v.outcome() == Outcome::Undecided;
        // The same outcome, or one run undecided but leaning the way the
        // other decided: the runs do not contradict each other.
        if a.outcome() == b.outcome() || ((undecided(a) || undecided(b)) && a.met == b.met) {
            Agreement::Agree
        } else if undecided(a) || undecided(b) || a.disturbed || b.disturbed {
            Agreement::WithinNoise
        } else {
            Agreement::Changed
        }
    }

    /// `agree`, `within noise`, `CHANGED`, `one run only`.
    pub fn label(self) -> &'static str {
        match self {
            Agreement::Agree => "agree",
            Agreement::WithinNoise => "within noise",
            Agreement::Changed => "CHANGED",
            Agreement::OneSided => "one run only",
        }
    }
}

/// One target present in both runs.
#[derive(Clone, Debug)]
pub struct TargetDiff {
    /// Experiment name.
    pub experiment: String,
    /// Section title.
    pub title: String,
    /// The target: `num/den [metric] ≥ bound at cases`.
    pub target: String,
    /// The verdict in A (`None`: not judged there).
    pub a: Option<Judgement>,
    /// The verdict in B.
    pub b: Option<Judgement>,
    /// How they relate.
    pub agreement: Agreement,
}

impl TargetDiff {
    /// A made-up target's verdicts in two runs (tests).
    #[cfg(test)]
    pub(crate) fn toy(target: &str, a: Judgement, b: Judgement) -> TargetDiff {
        TargetDiff {
            experiment: "toy".into(),
            title: "toy table".into(),
            target: target.into(),
            agreement: Agreement::of(Some(&a), Some(&b)),
            a: Some(a),
            b: Some(b),
        }
    }

    /// A decided met → missed (see [`Agreement::Changed`]).
    pub fn is_regression(&self) -> bool {
        self.agreement == Agreement::Changed
            && self.a.as_ref().map(Judgement::outcome) == Some(Outcome::Met)
    }
}

/// The comparison of two runs.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// Sections present in both, in A's order.
    pub sections: Vec<SectionDiff>,
    /// Targets present in both, in A's order.
    pub targets: Vec<TargetDiff>,
    /// `experiment / section / case / variant` measured in A only.
    pub only_in_a: Vec<String>,
    /// The same, in B only.
    pub only_in_b: Vec<String>,
    /// Differences between the runs' settings (machine, suite, counters)
    /// and how busy each machine was.
    pub notes: Vec<String>,
}

impl Comparison {
    /// Primary metrics that got worse beyond the noise, plus targets that
    /// went from met to missed, both decided.
    pub fn regressions(&self) -> usize {
        self.primary_rows()
            .filter(|r| r.change == Change::Worse)
            .count()
            + self.targets.iter().filter(|t| t.is_regression()).count()
    }

    /// Primary metrics that got better beyond the noise.
    pub fn improvements(&self) -> usize {
        self.primary_rows()
            .filter(|r| r.change == Change::Better)
            .count()
    }

    /// Targets whose decided verdict changed, either way.
    pub fn changed_targets(&self) -> usize {
        self.count_targets(Agreement::Changed)
    }

    /// Targets with `agreement`.
    pub fn count_targets(&self, agreement: Agreement) -> usize {
        self.targets
            .iter()
            .filter(|t| t.agreement == agreement)
            .count()
    }

    /// Targets that agree because neither run decided them.
    pub fn undecided_in_both(&self) -> usize {
        let undecided =
            |v: &Option<Judgement>| v.as_ref().map(Judgement::outcome) == Some(Outcome::Undecided);
        self.targets
            .iter()
            .filter(|t| undecided(&t.a) && undecided(&t.b))
            .count()
    }

    fn primary_rows(&self) -> impl Iterator<Item = &Row> {
        self.sections
            .iter()
            .flat_map(|s| &s.rows)
            .filter(|r| r.primary)
    }
}

/// Compares run `b` against run `a`; only primary metrics unless
/// `all_metrics`.
pub fn compare(a: &Report, b: &Report, all_metrics: bool) -> Comparison {
    let mut out = Comparison {
        notes: notes(a, b),
        ..Comparison::default()
    };
    let find = |r: &'_ Report, exp: &str, title: &str| {
        r.experiments
            .iter()
            .filter(|e| e.name == exp)
            .flat_map(|e| &e.sections)
            .find(|s| s.title == title)
            .cloned()
    };
    for ea in &a.experiments {
        for sa in &ea.sections {
            match find(b, &ea.name, &sa.title) {
                Some(sb) => {
                    out.sections.push(section(&ea.name, sa, &sb, all_metrics));
                    out.targets.extend(targets(&ea.name, sa, &sb));
                    let (in_a, in_b) = (cells(&ea.name, sa), cells(&ea.name, &sb));
                    out.only_in_a
                        .extend(in_a.iter().filter(|c| !in_b.contains(c)).cloned());
                    out.only_in_b
                        .extend(in_b.iter().filter(|c| !in_a.contains(c)).cloned());
                }
                None => out.only_in_a.extend(cells(&ea.name, sa)),
            }
        }
    }
    for eb in &b.experiments {
        for sb in &eb.sections {
            if find(a, &eb.name, &sb.title).is_none() {
                out.only_in_b.extend(cells(&eb.name, sb));
            }
        }
    }
    out
}

/// Every measured cell of a section, named.
fn cells(exp: &str, s: &SectionReport) -> Vec<String> {
    s.cases
        .iter()
        .flat_map(|c| {
            c.cells
                .iter()
                .filter(|cell| !cell.metrics.is_empty())
                .map(move |cell| format!("{exp} / {} / {} / {}", s.title, c.label, cell.variant))
        })
        .collect()
}

/// A target's name, bound and cases: how it is matched across runs.
fn target_key(s: &SectionReport, r: &super::report::Ratio) -> Option<String> {
    let bound = r.target?;
    let at = if r.at.is_empty() {
        "at every case".to_string()
    } else {
        format!("at {} {}", s.param, r.at.join(", "))
    };
    Some(format!("{} {} {at}", r.name(), describe_bound(bound)))
}

/// The targets of one section in both runs.
fn targets(exp: &str, sa: &SectionReport, sb: &SectionReport) -> Vec<TargetDiff> {
    sa.ratios
        .iter()
        .filter_map(|ra| {
            let key = target_key(sa, ra)?;
            let rb = sb
                .ratios
                .iter()
                .find(|rb| target_key(sb, rb).as_ref() == Some(&key))?;
            let (a, b) = (sa.judge(ra), sb.judge(rb));
            Some(TargetDiff {
                experiment: exp.to_string(),
                title: sa.title.clone(),
                target: key,
                agreement: Agreement::of(a.as_ref(), b.as_ref()),
                a,
                b,
            })
        })
        .collect()
}

/// Compares two versions of one section: the cells measured in both.
fn section(exp: &str, sa: &SectionReport, sb: &SectionReport, all_metrics: bool) -> SectionDiff {
    let mut rows = Vec::new();
    // B's declaration of the metrics decides the direction and the order.
    let metrics: Vec<_> = sb
        .metrics
        .iter()
        .enumerate()
        .filter(|(i, _)| all_metrics || *i == 0)
        .collect();
    for ca in &sa.cases {
        let cb = sb.cases.iter().find(|c| c.label == ca.label);
        for cell_a in &ca.cells {
            let Some(cell_b) =
                cb.and_then(|cb| cb.cells.iter().find(|c| c.variant == cell_a.variant))
            else {
                continue;
            };
            for &(i, metric) in &metrics {
                let (Some(a), Some(b)) = (
                    cell_a.metrics.get(&metric.name),
                    cell_b.metrics.get(&metric.name),
                ) else {
                    continue;
                };
                rows.push(Row {
                    case: ca.label.clone(),
                    variant: cell_a.variant.clone(),
                    metric: metric.name.clone(),
                    primary: i == 0,
                    a: (a.median, a.spread),
                    b: (b.median, b.spread),
                    ratio: Quotient::of(b.median, a.median),
                    change: Change::of(a, b, metric.lower_is_better),
                    too_few: a.samples.len().min(b.samples.len()) < MIN_SAMPLES,
                });
            }
        }
    }
    SectionDiff {
        experiment: exp.to_string(),
        title: sa.title.clone(),
        param: sa.param.clone(),
        rows,
    }
}

/// What differs between the two runs' settings, and how busy each
/// machine was.
fn notes(a: &Report, b: &Report) -> Vec<String> {
    type Setting = fn(&Report) -> String;
    let settings: [(&str, Setting); 5] = [
        ("suite", |r| r.suite.name().into()),
        ("cores", |r| r.machine.cores.to_string()),
        ("CPU", |r| r.machine.cpu_model.clone()),
        ("kernel", |r| r.machine.kernel.clone()),
        ("herdless counters", |r| r.herdless_stats.to_string()),
    ];
    let mut notes = Vec::new();
    for (what, of) in settings {
        let (x, y) = (of(a), of(b));
        if x != y {
            notes.push(format!("{what} differs: A {x}, B {y}"));
        }
    }
    for (which, r) in [("A", a), ("B", b)] {
        if let Some(busy) = busy(&r.conditions, r.machine.cores) {
            notes.push(format!("{which} ran on a busy machine: {busy}"));
        }
    }
    notes
}

/// How busy a run's machine was, if it was.
fn busy(c: &Conditions, cores: usize) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(load) = c.load_at_start.filter(|l| l.is_busy(cores)) {
        parts.push(format!("load average {:.2} at the start", load.one));
    }
    if let Some(d) = c.disturbance.filter(|d| d.is_disturbed()) {
        parts.push(d.describe());
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::outcome::Confidence;

    fn summary(samples: &[f64]) -> Summary {
        Summary::of(samples).unwrap()
    }

    #[test]
    fn a_change_needs_the_spreads_and_the_rank_test() {
        let a = summary(&[100.0, 101.0, 99.0, 100.5, 99.5]);
        // Clearly slower: separated and beyond the spreads.
        let slow = summary(&[110.0, 111.0, 109.0, 110.5, 109.5]);
        assert_eq!(Change::of(&a, &slow, true), Change::Worse);
        assert_eq!(Change::of(&a, &slow, false), Change::Better);
        assert_eq!(Change::Worse.label(true), "slower");
        assert_eq!(Change::Better.label(false), "better");
        // Medians apart beyond the spreads, but the samples overlap: the
        // rank test says noise (p = 38/252).
        let overlapping = summary(&[98.0, 103.0, 104.0, 102.5, 120.0]);
        assert!(overlapping.median - a.median > a.spread + overlapping.spread);
        assert_eq!(Change::of(&a, &overlapping, true), Change::Same);
        // Every sample of B above every one of A, but the medians within
        // the spreads.
        let wide_a = summary(&[0.0, 1.0, 90.0, 99.0, 100.0]);
        let wide_b = summary(&[101.0, 102.0, 103.0, 104.0, 105.0]);
        assert_eq!(Change::of(&wide_a, &wide_b, true), Change::Same);
        // Two repetitions never tell.
        assert_eq!(
            Change::of(&summary(&[1.0, 1.0]), &summary(&[9.0, 9.0]), true),
            Change::Same
        );
    }

    fn verdict(met: bool, confidence: Confidence) -> Judgement {
        Judgement::toy(met, 1.0, confidence)
    }

    #[test]
    fn targets_agree_on_outcomes_and_change_only_when_both_runs_decided() {
        use Confidence::*;
        let of = |a: (bool, Confidence), b: (bool, Confidence)| {
            Agreement::of(Some(&verdict(a.0, a.1)), Some(&verdict(b.0, b.1)))
        };
        // The same outcome: decided alike, or undecided in both runs
        // whichever way each leans.
        assert_eq!(of((true, Medium), (true, High)), Agreement::Agree);
        assert_eq!(of((false, High), (false, High)), Agreement::Agree);
        assert_eq!(of((true, Low), (false, Low)), Agreement::Agree);
        assert_eq!(of((true, Low), (true, Low)), Agreement::Agree);
        // Undecided in one run, leaning the way the other decided: no
        // contradiction.
        assert_eq!(of((true, Low), (true, High)), Agreement::Agree);
        assert_eq!(of((false, Medium), (false, Low)), Agreement::Agree);
        // Undecided in one run, leaning against the other's decision.
        assert_eq!(of((true, High), (false, Low)), Agreement::WithinNoise);
        assert_eq!(of((true, Low), (false, High)), Agreement::WithinNoise);
        // Met against missed, both decided on quiet machines.
        assert_eq!(of((true, Medium), (false, High)), Agreement::Changed);
        assert_eq!(of((false, High), (true, Medium)), Agreement::Changed);
        // A decided flip measured on a disturbed machine is noise too;
        // disturbed verdicts that agree still agree.
        let disturbed = |met| Judgement {
            disturbed: true,
            ..verdict(met, Medium)
        };
        assert_eq!(
            Agreement::of(Some(&verdict(true, High)), Some(&disturbed(false))),
            Agreement::WithinNoise
        );
        assert_eq!(
            Agreement::of(Some(&verdict(true, High)), Some(&disturbed(true))),
            Agreement::Agree
        );
        assert_eq!(
            Agreement::of(Some(&verdict(true, High)), None),
            Agreement::OneSided
        );
    }

    #[test]
    fn only_a_decided_met_turned_missed_is_a_regression() {
        let diff = |a, b| TargetDiff::toy("a/b ≥ 1.00×", a, b);
        use Confidence::*;
        assert!(diff(verdict(true, High), verdict(false, Medium)).is_regression());
        assert!(!diff(verdict(false, High), verdict(true, High)).is_regression());
        assert!(!diff(verdict(true, High), verdict(false, Low)).is_regression());
        assert!(!diff(verdict(true, Low), verdict(false, High)).is_regression());
    }
}
