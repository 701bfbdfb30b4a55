//! Text tables in the seeds' own shape: one row per case, one column per
//! variant showing `median [± spread]`, then the ratio columns of the
//! primary metric, then a one-line verdict.
//!
//! The primary metric's table comes first, with the ratios; every other
//! metric follows in a table of the same shape without them.

use std::fmt::Write as _;

use super::report::{fmt_ratio, fmt_sig, Cell, ExperimentReport, RatioReport, SectionReport};
use super::stats::SpreadKind;

/// Renders an experiment: a title line, then each section.
pub fn render_experiment(exp: &ExperimentReport) -> String {
    let mut out = format!("== {} — {}\n", exp.name, exp.seed);
    for section in &exp.sections {
        out.push('\n');
        out.push_str(&render_section(section));
    }
    out
}

/// Renders one section: a table per measured metric (the primary one with
/// the ratio columns and the verdict), then any errors.
pub fn render_section(s: &SectionReport) -> String {
    let mut out = String::new();
    for (m, metric) in s.metrics.iter().enumerate() {
        if m > 0 && !s.measured(&metric.name) {
            continue;
        }
        let (kind, reps) = spread_of(s, &metric.name);
        let better = if metric.lower_is_better {
            "lower"
        } else {
            "higher"
        };
        let _ = writeln!(
            out,
            "{}: {} ({}, {better} is better), median [{}] of {reps} repetitions",
            s.title,
            metric.name,
            metric.unit,
            kind.describe()
        );
        let primary = m == 0;
        let mut header = vec![s.param.clone()];
        header.extend(s.variants.iter().map(|v| v.name.clone()));
        if primary {
            header.extend(s.ratios.iter().map(ratio_header));
        }
        let rows: Vec<Vec<String>> = (0..s.cases.len())
            .map(|c| {
                let case = &s.cases[c];
                let mut row = vec![case.label.clone()];
                row.extend(
                    case.cells
                        .iter()
                        .map(|cell| measurement(cell, &metric.name)),
                );
                if primary {
                    row.extend(s.ratios.iter().map(|r| ratio_cell(r, c, &case.label)));
                }
                row
            })
            .collect();
        out.push_str(&grid(&header, &rows));
        if primary {
            let _ = writeln!(out, "verdict: {}", s.verdict());
        }
        out.push('\n');
    }
    for case in &s.cases {
        for cell in &case.cells {
            if let Some(first) = cell.errors.first() {
                let _ = writeln!(
                    out,
                    "error: {} at {} {}: {first}",
                    cell.variant, s.param, case.label
                );
            }
        }
    }
    out
}

/// `median [±spread]`, or why there is none.
fn measurement(cell: &Cell, metric: &str) -> String {
    match cell.metrics.get(metric) {
        Some(sum) => format!("{} [±{}]", fmt_sig(sum.median, 4), fmt_sig(sum.spread, 2)),
        None if !cell.errors.is_empty() => "error".to_string(),
        None => "—".to_string(),
    }
}

/// `num/den`; the target is spelled out in the verdict below the table.
fn ratio_header(r: &RatioReport) -> String {
    r.name()
}

/// The ratio on case `c`, marked `ok`/`MISS` where its target is checked.
fn ratio_cell(r: &RatioReport, c: usize, label: &str) -> String {
    let Some(value) = r.values[c] else {
        return "—".to_string();
    };
    match r.target.filter(|_| r.applies_to(label)) {
        Some(b) if b.holds(value) => format!("{} ok", fmt_ratio(value)),
        Some(_) => format!("{} MISS", fmt_ratio(value)),
        None => fmt_ratio(value),
    }
}

/// The spread kind and repetition count of a metric's cells (the most
/// samples any cell has: cells only have fewer after errors).
pub(crate) fn spread_of(s: &SectionReport, metric: &str) -> (SpreadKind, usize) {
    let reps = s
        .cases
        .iter()
        .flat_map(|c| c.cells.iter())
        .filter_map(|cell| cell.metrics.get(metric))
        .map(|sum| sum.samples.len())
        .max()
        .unwrap_or(0);
    (SpreadKind::for_samples(reps), reps)
}

/// A bordered grid; the first column left-aligned, the others right-aligned.
pub(crate) fn grid(header: &[String], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| width(&r[i]))
                .chain([width(&header[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let rule: String = widths
        .iter()
        .map(|w| format!("+{}", "-".repeat(w + 2)))
        .collect::<String>()
        + "+\n";
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - width(cell));
            if i == 0 {
                let _ = write!(l, "| {cell}{pad} ");
            } else {
                let _ = write!(l, "| {pad}{cell} ");
            }
        }
        l + "|\n"
    };
    let mut out = rule.clone();
    out.push_str(&line(header));
    out.push_str(&rule);
    for r in rows {
        out.push_str(&line(r));
    }
    out.push_str(&rule);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::harness::{
        run_experiment, Case, Experiment, Metric, PerSuite, Ratio, Role, RunOptions, Sample,
        Section, Suite, Variant,
    };

    fn toy() -> ExperimentReport {
        let cases = vec![Case::new("1", 1.0), Case::new("2", 2.0)];
        let fixed = |name, role, t: f64| {
            Variant::new(name, role, move |c: &Case<f64>| {
                Ok(Sample::new().with("t", t * c.params))
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
            .metric(Metric::lower("never", "ns"))
            .variant(fixed("old", Role::Before, 10.0))
            .variant(fixed("new", Role::After, 1.0))
            .ratio(Ratio::of("old", "new").at_least(10.0).at_case("2")),
        );
        run_experiment(&exp, &RunOptions::new(Suite::Smoke)).unwrap()
    }

    #[test]
    fn primary_table_shows_ratios_targets_and_verdict() {
        let text = render_experiment(&toy());
        assert!(text.lines().any(|l| l.ends_with(" old/new |")), "{text}");
        let row = |n: &str| {
            let start = format!("| {n} ");
            text.lines().find(|l| l.starts_with(&start)).unwrap()
        };
        assert!(
            row("2").starts_with("| 2 | 20.00 [±0] | 2.000 [±0] |"),
            "{text}"
        );
        assert!(
            row("2").ends_with(" 10.0× ok |"),
            "target checked at 2: {text}"
        );
        assert!(row("1").ends_with(" 10.0× |"), "and only at 2: {text}");
        assert!(
            text.contains("verdict: old/new ≥ 10.0× at 2: met (10.0× at n 2)"),
            "{text}"
        );
        assert!(
            !text.contains("never"),
            "unmeasured metrics get no table: {text}"
        );
    }

    #[test]
    fn grid_aligns_columns_under_the_widest_cell() {
        let header = vec!["n".to_string(), "value".to_string()];
        let rows = vec![vec!["512".to_string(), "1.5".to_string()]];
        assert_eq!(
            grid(&header, &rows),
            "+-----+-------+\n| n   | value |\n+-----+-------+\n| 512 |   1.5 |\n+-----+-------+\n"
        );
    }
}
