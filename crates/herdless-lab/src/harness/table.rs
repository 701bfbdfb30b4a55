//! The terminal's tables, in the seeds' own shape and within 100 columns:
//! per section, one table per measured metric (rows = cases, columns =
//! variants, cells `median ±spread%`), then the ratios of the medians in
//! their own table (`ok`/`MISS` where a target is checked), then one
//! verdict per line with its confidence.
//!
//! When a section's tables do not fit with the variants' full names (and
//! four significant digits), they use three digits, then letters `A`, `B`…
//! with a legend; a table still too wide wraps its widest cells
//! ([`grid`](super::grid)). Long lines wrap ([`wrap`](super::wrap)).

use std::fmt::Write as _;

use super::format::{fmt_num, fmt_quotient, fmt_spread};
use super::grid::grid;
use super::report::{Cell, ExperimentReport, Ratio, SectionReport};
use super::spec::Role;
use super::stats::SpreadKind;
use super::wrap::{para, width, WIDTH};

/// Renders an experiment: a title line, then each section.
pub fn render_experiment(exp: &ExperimentReport) -> String {
    let mut out = para(&format!("== {}: {}", exp.name, exp.seed), 3);
    for section in &exp.sections {
        out.push('\n');
        out.push_str(&render_section(section));
    }
    out
}

/// How a section's tables name the variants and write the medians.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Layout {
    /// Letters instead of the variants' names (with a legend).
    codes: bool,
    /// Significant digits of the medians.
    digits: usize,
}

/// Renders one section: heading, notes, a table per measured metric, the
/// ratios, the verdicts, then any errors.
pub fn render_section(s: &SectionReport) -> String {
    let layouts = [(false, 4), (false, 3), (true, 4), (true, 3)]
        .map(|(codes, digits)| Layout { codes, digits });
    let layout = layouts
        .into_iter()
        .find(|&l| widest_table(s, l) <= WIDTH)
        .unwrap_or(layouts[3]);
    let mut out = String::new();
    let (kind, reps) = spread_of(s, &s.primary().name);
    out.push_str(&para(
        &format!(
            "-- {}: median ±spread ({} as a % of the median) of {reps} repetitions",
            s.title,
            match kind {
                SpreadKind::HalfIqr => "half IQR",
                SpreadKind::HalfRange => "half range",
            }
        ),
        3,
    ));
    if layout.codes {
        let legend: Vec<String> = s
            .variants
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{} {} ({})", code(i), v.name, role(v.role)))
            .collect();
        out.push_str(&para(&format!("   variants: {}", legend.join(", ")), 13));
    }
    for line in notes(s) {
        out.push_str(&para(&format!("   {line}"), 5));
    }
    for (m, metric) in s.metrics.iter().enumerate() {
        if m > 0 && !s.measured(&metric.name) {
            continue;
        }
        let _ = writeln!(out, "\n{}", metric.heading());
        let (header, rows) = metric_table(s, m, layout);
        out.push_str(&grid(&header, &rows, 1, WIDTH));
        if m == 0 {
            if let Some((header, rows)) = ratio_table(s, layout) {
                let _ = writeln!(
                    out,
                    "\nratios of the medians ({} unless named)",
                    metric.name
                );
                out.push_str(&grid(&header, &rows, 1, WIDTH));
            }
            out.push_str("\nverdicts:\n");
            for line in s.verdict_lines() {
                out.push_str(&para(&format!("  {line}"), 4));
            }
        }
    }
    for error in s.errors() {
        out.push_str(&para(&format!("error: {error}"), 4));
    }
    for skip in s.skips() {
        out.push_str(&para(&format!("skipped: {skip}"), 4));
    }
    out
}

/// The rows measured again or measured on a disturbed machine.
fn notes(s: &SectionReport) -> Vec<String> {
    let mut lines = Vec::new();
    for case in &s.cases {
        if let Some(why) = &case.remeasured_for {
            lines.push(format!(
                "re-measured {} {}: {} attempts ({why})",
                s.param, case.label, case.attempts
            ));
        }
    }
    let disturbed: Vec<String> = s
        .cases
        .iter()
        .filter_map(|c| {
            let d = c.disturbance.filter(|d| d.is_disturbed())?;
            Some(format!(
                "{} {:.0}%+{:.0}%",
                c.label,
                d.others * 100.0,
                d.steal * 100.0
            ))
        })
        .collect();
    if !disturbed.is_empty() {
        lines.push(format!(
            "disturbed (CPU time taken by others + steal) at {} {}",
            s.param,
            disturbed.join(", ")
        ));
    } else if let Some(d) = s.disturbance.filter(|d| d.is_disturbed()) {
        lines.push(format!(
            "disturbed while measuring this table: {}",
            d.describe()
        ));
    }
    lines
}

/// `A`, `B`, … `Z`, then `V27`…
fn code(i: usize) -> String {
    match u8::try_from(i) {
        Ok(i) if i < 26 => char::from(b'A' + i).to_string(),
        _ => format!("V{}", i + 1),
    }
}

fn role(role: Role) -> &'static str {
    match role {
        Role::Before => "before",
        Role::After => "after",
        Role::Kernel => "kernel",
        Role::Peer => "peer",
    }
}

/// The variants' column names under `layout`.
fn names(s: &SectionReport, layout: Layout) -> Vec<String> {
    s.variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if layout.codes {
                code(i)
            } else {
                v.name.clone()
            }
        })
        .collect()
}

/// The widest line of any of the section's tables under `layout`, before
/// wrapping.
fn widest_table(s: &SectionReport, layout: Layout) -> usize {
    let mut tables = vec![metric_table(s, 0, layout)];
    tables.extend(ratio_table(s, layout));
    for m in 1..s.metrics.len() {
        if s.measured(&s.metrics[m].name) {
            tables.push(metric_table(s, m, layout));
        }
    }
    tables
        .iter()
        .map(|(header, rows)| grid(header, rows, 1, usize::MAX))
        .flat_map(|text| text.lines().map(width).collect::<Vec<_>>())
        .max()
        .unwrap_or(0)
}

/// Metric `m`'s table: one row per case, one `median ±spread` column per
/// variant, medians and spreads aligned within each column.
fn metric_table(s: &SectionReport, m: usize, layout: Layout) -> (Vec<String>, Vec<Vec<String>>) {
    let metric = &s.metrics[m].name;
    let mut header = vec![s.param.clone()];
    header.extend(names(s, layout));
    let mut rows: Vec<Vec<String>> = s.cases.iter().map(|c| vec![c.label.clone()]).collect();
    for v in 0..s.variants.len() {
        let parts: Vec<Result<(String, String), &'static str>> = s
            .cases
            .iter()
            .map(|c| measurement(&c.cells[v], metric, layout.digits))
            .collect();
        // The widest median and the widest spread of the column.
        let (mw, sw) = parts
            .iter()
            .flatten()
            .fold((0, 0), |(mw, sw), (median, spread)| {
                (mw.max(width(median)), sw.max(width(spread)))
            });
        for (row, part) in rows.iter_mut().zip(parts) {
            row.push(match part {
                Ok((median, spread)) => format!("{median:>mw$} {spread:sw$}"),
                Err(text) => format!("{text}{}", " ".repeat(if sw > 0 { sw + 1 } else { 0 })),
            });
        }
    }
    (header, rows)
}

/// `(median, ±spread)`, or the text standing for a missing value.
fn measurement(cell: &Cell, metric: &str, digits: usize) -> Result<(String, String), &'static str> {
    let sum = cell.metrics.get(metric).ok_or(cell.missing())?;
    Ok((
        fmt_num(sum.median, digits),
        fmt_spread(sum.median, sum.spread),
    ))
}

/// The ratios' table: one row per case, one column per ratio; `None`
/// without ratios.
fn ratio_table(s: &SectionReport, layout: Layout) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    if s.ratios.is_empty() {
        return None;
    }
    let names = names(s, layout);
    let short = |variant: &str| {
        s.variants
            .iter()
            .position(|v| v.name == variant)
            .map_or(variant.to_string(), |i| names[i].clone())
    };
    let mut header = vec![s.param.clone()];
    header.extend(s.ratios.iter().map(|r| {
        let name = format!("{}/{}", short(&r.num), short(&r.den));
        match &r.metric {
            Some(m) => format!("{name} {m}"),
            None => name,
        }
    }));
    let rows = s
        .cases
        .iter()
        .enumerate()
        .map(|(c, case)| {
            let mut row = vec![case.label.clone()];
            row.extend(s.ratios.iter().map(|r| ratio_cell(r, c, &case.label)));
            row
        })
        .collect();
    Some((header, rows))
}

/// The ratio on case `c`, marked `ok`/`MISS` where its target is checked.
fn ratio_cell(r: &Ratio, c: usize, label: &str) -> String {
    match ratio_mark(r, c, label) {
        None => "—".to_string(),
        Some((text, Some(true))) => format!("{text} ok"),
        Some((text, Some(false))) => format!("{text} MISS"),
        Some((text, None)) => text,
    }
}

/// The ratio on case `c` (`None`: no value) and, where its target is
/// checked, whether it holds there.
pub(crate) fn ratio_mark(r: &Ratio, c: usize, label: &str) -> Option<(String, Option<bool>)> {
    let q = r.values[c]?;
    let target = r.target.filter(|_| r.applies_to(label));
    Some((
        fmt_quotient(q),
        target.zip(q.value()).map(|(b, v)| b.holds(v)),
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::report::VariantInfo;
    use crate::harness::toy::Toy;

    #[test]
    fn metric_ratio_and_verdict_tables_of_the_toy() {
        let text = render_experiment(&Toy::default().report().experiments[0]);
        let line = |start: &str| {
            text.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no line starting {start:?} in\n{text}"))
        };
        assert_eq!(line("n "), "n        old        new       kern");
        // Medians right-aligned, spreads after them.
        assert_eq!(line("4 "), "4  40.00 ±0%  4.000 ±0%  8.000 ±0%");
        assert_eq!(
            line("ratios of the medians"),
            "ratios of the medians (t unless named)"
        );
        let ratios = text.split("ratios of the medians").nth(1).unwrap();
        let row = |n: &str| ratios.lines().find(|l| l.starts_with(n)).unwrap();
        assert_eq!(row("n "), "n   old/new  kern/new");
        assert_eq!(row("4 "), "4  10.0× ok     2.00×", "target checked at 4");
        assert_eq!(row("1 "), "1     10.0×     2.00×", "and only at 4");
        assert!(
            text.contains("  old/new ≥ 5.00× at 4: met (10.0× at n 4), high confidence\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwasted (per item, lower is better)\n"),
            "{text}"
        );
        assert!(
            !text.contains("never"),
            "unmeasured metrics get no table: {text}"
        );
    }

    #[test]
    fn many_long_variant_names_become_letters_with_a_legend() {
        let mut s = Toy::default().section();
        let long = [
            "a-rather-long-variant-name-old",
            "another-long-name-new",
            "kernel-with-a-long-name",
        ];
        for (v, name) in s.variants.iter_mut().zip(long) {
            v.name = name.to_string();
        }
        for case in &mut s.cases {
            for (cell, name) in case.cells.iter_mut().zip(long) {
                cell.variant = name.to_string();
            }
        }
        for r in &mut s.ratios {
            for side in [&mut r.num, &mut r.den] {
                let i = ["old", "new", "kern"]
                    .iter()
                    .position(|n| n == side)
                    .unwrap();
                *side = long[i].to_string();
            }
        }
        // Seven copies of the three columns: too wide for full names.
        let (variants, cases) = (s.variants.clone(), s.cases.clone());
        for k in 0..6 {
            s.variants.extend(variants.iter().map(|v| VariantInfo {
                name: format!("{}-{k}", v.name),
                role: v.role,
            }));
            for (case, orig) in s.cases.iter_mut().zip(&cases) {
                case.cells.extend(orig.cells.iter().map(|c| {
                    let mut c = c.clone();
                    c.variant = format!("{}-{k}", c.variant);
                    c
                }));
            }
        }
        let text = render_section(&s);
        assert!(
            text.contains("variants: A a-rather-long-variant-name-old (before), B "),
            "{text}"
        );
        assert!(text.lines().all(|l| width(l) <= WIDTH), "{text}");
        assert!(
            text.contains("A/B"),
            "ratio columns use the letters: {text}"
        );
    }
}
