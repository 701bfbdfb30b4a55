//! `herdless-lab compare A.json B.json`: two runs side by side, per
//! experiment, section, case and variant, to check a change for
//! regressions.
//!
//! For each cell present in both runs: the medians of A and B, the ratio
//! B/A, and a verdict that is `same` unless the medians differ by more than
//! the two spreads together (`|B − A| > spread A + spread B`); then it says
//! which way, respecting the metric's direction: `faster`/`slower` for the
//! primary metric (a time or a throughput), `better`/`worse` for the
//! others. Only the primary metric is compared unless `all_metrics`. Cells
//! in one run only are counted and named, not compared.

use std::fmt::Write as _;

use super::report::{fmt_ratio, fmt_sig, Report, SectionReport};
use super::stats::Summary;
use super::table::grid;

/// Which way B moved from A, where the move exceeds the spreads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// B is better than A by more than the spreads.
    Better,
    /// B is worse than A by more than the spreads.
    Worse,
    /// The difference is within the spreads.
    Same,
}

impl Change {
    /// Judges `b` against `a` for a metric where lower (or higher) is
    /// better.
    pub fn of(a: &Summary, b: &Summary, lower_is_better: bool) -> Change {
        let diff = b.median - a.median;
        if diff.abs() <= a.spread + b.spread {
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
    /// B's median over A's (`None` if A's is zero).
    pub ratio: Option<f64>,
    /// The verdict.
    pub change: Change,
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

/// The comparison of two runs.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// Sections present in both, in A's order.
    pub sections: Vec<SectionDiff>,
    /// `experiment / section / case / variant` measured in A only.
    pub only_in_a: Vec<String>,
    /// The same, in B only.
    pub only_in_b: Vec<String>,
    /// Differences between the runs' settings (machine, suite, counters).
    pub notes: Vec<String>,
}

impl Comparison {
    /// Primary metrics that got worse beyond the spreads.
    pub fn regressions(&self) -> usize {
        self.sections
            .iter()
            .flat_map(|s| &s.rows)
            .filter(|r| r.primary && r.change == Change::Worse)
            .count()
    }

    /// Primary metrics that got better beyond the spreads.
    pub fn improvements(&self) -> usize {
        self.sections
            .iter()
            .flat_map(|s| &s.rows)
            .filter(|r| r.primary && r.change == Change::Better)
            .count()
    }
}

/// Compares run `b` against run `a`; only primary metrics unless
/// `all_metrics`.
pub fn compare(a: &Report, b: &Report, all_metrics: bool) -> Comparison {
    let mut out = Comparison {
        notes: notes(a, b),
        ..Comparison::default()
    };
    for ea in &a.experiments {
        for sa in &ea.sections {
            let sb = b
                .experiments
                .iter()
                .filter(|e| e.name == ea.name)
                .flat_map(|e| &e.sections)
                .find(|s| s.title == sa.title);
            match sb {
                Some(sb) => {
                    let (diff, only_a, only_b) = section(&ea.name, sa, sb, all_metrics);
                    out.sections.push(diff);
                    out.only_in_a.extend(only_a);
                    out.only_in_b.extend(only_b);
                }
                None => out.only_in_a.extend(cells(&ea.name, sa)),
            }
        }
    }
    for eb in &b.experiments {
        for sb in &eb.sections {
            let in_a = a
                .experiments
                .iter()
                .filter(|e| e.name == eb.name)
                .flat_map(|e| &e.sections)
                .any(|s| s.title == sb.title);
            if !in_a {
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

/// Compares two versions of one section.
fn section(
    exp: &str,
    sa: &SectionReport,
    sb: &SectionReport,
    all_metrics: bool,
) -> (SectionDiff, Vec<String>, Vec<String>) {
    let mut rows = Vec::new();
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let name = |case: &str, variant: &str| format!("{exp} / {} / {case} / {variant}", sa.title);
    // B's declaration of the metrics decides the direction and the order.
    let metrics: Vec<_> = sb
        .metrics
        .iter()
        .enumerate()
        .filter(|(i, _)| all_metrics || *i == 0)
        .collect();
    for ca in &sa.cases {
        let cb = sb.cases.iter().find(|c| c.label == ca.label);
        for cell_a in ca.cells.iter().filter(|c| !c.metrics.is_empty()) {
            let Some(cell_b) = cb
                .and_then(|cb| cb.cells.iter().find(|c| c.variant == cell_a.variant))
                .filter(|c| !c.metrics.is_empty())
            else {
                only_a.push(name(&ca.label, &cell_a.variant));
                continue;
            };
            for &(i, metric) in &metrics {
                let (Some(a), Some(b)) = (
                    cell_a.metrics.get(&metric.name),
                    cell_b.metrics.get(&metric.name),
                ) else {
                    continue;
                };
                let ratio = b.median / a.median;
                rows.push(Row {
                    case: ca.label.clone(),
                    variant: cell_a.variant.clone(),
                    metric: metric.name.clone(),
                    primary: i == 0,
                    a: (a.median, a.spread),
                    b: (b.median, b.spread),
                    ratio: ratio.is_finite().then_some(ratio),
                    change: Change::of(a, b, metric.lower_is_better),
                });
            }
        }
    }
    for cb in &sb.cases {
        let ca = sa.cases.iter().find(|c| c.label == cb.label);
        for cell_b in cb.cells.iter().filter(|c| !c.metrics.is_empty()) {
            let in_a = ca
                .and_then(|ca| ca.cells.iter().find(|c| c.variant == cell_b.variant))
                .is_some_and(|c| !c.metrics.is_empty());
            if !in_a {
                only_b.push(name(&cb.label, &cell_b.variant));
            }
        }
    }
    let diff = SectionDiff {
        experiment: exp.to_string(),
        title: sa.title.clone(),
        param: sa.param.clone(),
        rows,
    };
    (diff, only_a, only_b)
}

/// What differs between the two runs' settings.
fn notes(a: &Report, b: &Report) -> Vec<String> {
    let mut notes = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            notes.push(format!("{what} differs: A {x}, B {y}"));
        }
    };
    differ("suite", a.suite.name().into(), b.suite.name().into());
    differ(
        "cores",
        a.machine.cores.to_string(),
        b.machine.cores.to_string(),
    );
    differ(
        "CPU",
        a.machine.cpu_model.clone(),
        b.machine.cpu_model.clone(),
    );
    differ("kernel", a.machine.kernel.clone(), b.machine.kernel.clone());
    differ(
        "herdless counters",
        a.herdless_stats.to_string(),
        b.herdless_stats.to_string(),
    );
    notes
}

/// The comparison as text: one grid per section, then the cells in one run
/// only, then a summary line.
pub fn render(c: &Comparison, all_metrics: bool) -> String {
    let mut out = String::new();
    for note in &c.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for s in &c.sections {
        let _ = writeln!(
            out,
            "\n{} — {}: B/A of the medians; a verdict where |B − A| > spread A + spread B",
            s.experiment, s.title
        );
        let mut header = vec![s.param.clone(), "variant".to_string()];
        if all_metrics {
            header.push("metric".into());
        }
        header.extend(["A".into(), "B".into(), "B/A".into(), "verdict".into()]);
        let rows: Vec<Vec<String>> = s
            .rows
            .iter()
            .map(|r| {
                let mut row = vec![r.case.clone(), r.variant.clone()];
                if all_metrics {
                    row.push(r.metric.clone());
                }
                row.push(measured(r.a));
                row.push(measured(r.b));
                row.push(r.ratio.map_or("—".into(), fmt_ratio));
                row.push(r.change.label(r.primary).to_string());
                row
            })
            .collect();
        if rows.is_empty() {
            out.push_str("(nothing measured in both runs)\n");
        } else {
            out.push_str(&grid(&header, &rows));
        }
    }
    for (which, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        if !list.is_empty() {
            let _ = writeln!(out, "\nmeasured in {which} only ({}):", list.len());
            for name in list {
                let _ = writeln!(out, "  {name}");
            }
        }
    }
    let compared: usize = c
        .sections
        .iter()
        .flat_map(|s| &s.rows)
        .filter(|r| r.primary)
        .count();
    let _ = writeln!(
        out,
        "\n{compared} primary measurements compared: {} faster, {} slower beyond the spread",
        c.improvements(),
        c.regressions()
    );
    out
}

/// `median [±spread]`.
fn measured((median, spread): (f64, f64)) -> String {
    format!("{} [±{}]", fmt_sig(median, 4), fmt_sig(spread, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(median: f64, spread: f64) -> Summary {
        let mut s = Summary::of(&[median]).unwrap();
        s.spread = spread;
        s
    }

    #[test]
    fn a_difference_within_the_spreads_is_the_same() {
        let (a, b) = (summary(100.0, 5.0), summary(108.0, 4.0));
        assert_eq!(Change::of(&a, &b, true), Change::Same);
        assert_eq!(Change::of(&a, &summary(110.0, 4.0), true), Change::Worse);
        assert_eq!(Change::of(&a, &summary(110.0, 4.0), false), Change::Better);
        assert_eq!(Change::of(&a, &summary(90.0, 4.0), true), Change::Better);
        assert_eq!(Change::Worse.label(true), "slower");
        assert_eq!(Change::Better.label(false), "better");
    }
}
