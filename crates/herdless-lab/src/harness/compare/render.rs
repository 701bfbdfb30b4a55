//! The comparison as text, within 100 columns: notes, the targets' verdicts
//! in A and B, one grid of cells per section (per metric with
//! `--all-metrics`), the cells in one run only, and a closing count.

use std::fmt::Write as _;

use itertools::Itertools;

use super::{Comparison, Judgement, Row, SIGNIFICANCE};
use crate::harness::format::{fmt_num, fmt_quotient, fmt_spread};
use crate::harness::grid::grid;
use crate::harness::wrap::{para, WIDTH};

/// The comparison as text.
pub fn render(c: &Comparison, all_metrics: bool) -> String {
    let mut out = String::new();
    for note in &c.notes {
        out.push_str(&para(&format!("note: {note}"), 6));
    }
    if !c.targets.is_empty() {
        out.push('\n');
        out.push_str(&para(
            "targets, A → B (undecided: of low confidence, noise alone could turn it; runs \
             agree unless they contradict each other, and a flip is within noise where either \
             verdict is undecided or was measured on a disturbed machine):",
            2,
        ));
        for t in &c.targets {
            let line = format!(
                "[{}] {} / {}: {}: {} → {}",
                t.agreement.label(),
                t.experiment,
                t.title,
                t.target,
                verdict(t.a.as_ref()),
                verdict(t.b.as_ref())
            );
            out.push_str(&para(&format!("  {line}"), 4));
        }
    }
    for s in &c.sections {
        out.push('\n');
        out.push_str(&para(
            &format!(
                "{} / {}: B/A of the medians; faster or slower where beyond both spreads and \
                 p ≤ {SIGNIFICANCE}",
                s.experiment, s.title
            ),
            4,
        ));
        if s.rows.is_empty() {
            out.push_str("(nothing measured in both runs)\n");
            continue;
        }
        let metrics = s.rows.iter().map(|r| r.metric.as_str()).unique();
        for metric in metrics {
            if all_metrics {
                let _ = writeln!(out, "{metric}:");
            }
            let header: Vec<String> = [s.param.as_str(), "variant", "A", "B", "B/A", "verdict"]
                .map(str::to_string)
                .to_vec();
            let rows: Vec<Vec<String>> = s
                .rows
                .iter()
                .filter(|r| r.metric == metric)
                .map(|r| {
                    vec![
                        r.case.clone(),
                        r.variant.clone(),
                        measured(r.a),
                        measured(r.b),
                        fmt_quotient(r.ratio),
                        label(r),
                    ]
                })
                .collect();
            out.push_str(&grid(&header, &rows, 2, WIDTH));
        }
    }
    for (which, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        if !list.is_empty() {
            let _ = writeln!(out, "\nmeasured in {which} only ({}):", list.len());
            for name in list {
                out.push_str(&para(&format!("  {name}"), 4));
            }
        }
    }
    let primary: Vec<&Row> = c
        .sections
        .iter()
        .flat_map(|s| &s.rows)
        .filter(|r| r.primary)
        .collect();
    let too_few = primary.iter().filter(|r| r.too_few).count();
    let mut summary = format!(
        "{} primary measurements compared: {} faster, {} slower beyond the noise",
        primary.len(),
        c.improvements(),
        primary
            .iter()
            .filter(|r| r.change == super::Change::Worse)
            .count()
    );
    if too_few > 0 {
        let _ = write!(
            summary,
            " ({too_few} with fewer than {} repetitions in a run: too few to tell)",
            super::MIN_SAMPLES
        );
    }
    let _ = write!(
        summary,
        "; {} targets: {} agree",
        c.targets.len(),
        c.count_targets(super::Agreement::Agree),
    );
    let undecided = c.undecided_in_both();
    if undecided > 0 {
        let _ = write!(summary, " ({undecided} of them undecided in both runs)");
    }
    let _ = write!(
        summary,
        ", {} differ within noise, {} changed, {} judged in one run only.",
        c.count_targets(super::Agreement::WithinNoise),
        c.changed_targets(),
        c.count_targets(super::Agreement::OneSided),
    );
    out.push('\n');
    out.push_str(&para(&summary, 2));
    out
}

/// `met 1.36× at 8 (high)`, `MISSED 0.9× at 4 (medium, disturbed)`,
/// `undecided (leans missed) 4.82× at 16 (low)`, or `not judged`.
fn verdict(v: Option<&Judgement>) -> String {
    match v {
        Some(v) => format!(
            "{} {} at {} ({}{})",
            v.verdict(),
            fmt_quotient(v.value),
            v.label,
            v.confidence.label(),
            if v.disturbed { ", disturbed" } else { "" }
        ),
        None => "not judged".to_string(),
    }
}

/// The cell's verdict; `same?` where the runs had too few repetitions to
/// tell.
fn label(r: &Row) -> String {
    let label = r.change.label(r.primary);
    if r.too_few {
        format!("{label}?")
    } else {
        label.to_string()
    }
}

/// `median ±spread%`.
fn measured((median, spread): (f64, f64)) -> String {
    format!("{} {}", fmt_num(median, 4), fmt_spread(median, spread))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::compare::TargetDiff;
    use crate::harness::outcome::Confidence;

    #[test]
    fn undecided_verdicts_print_their_leaning_and_are_counted_apart() {
        let diff = |a, b| TargetDiff::toy("a/b ≥ 5.00× at threads 16", a, b);
        let c = Comparison {
            targets: vec![
                diff(
                    Judgement::toy(false, 4.82, Confidence::Low),
                    Judgement::toy(true, 5.44, Confidence::Low),
                ),
                diff(
                    Judgement::toy(true, 5.44, Confidence::Low),
                    Judgement::toy(false, 3.0, Confidence::High),
                ),
                diff(
                    Judgement::toy(true, 5.44, Confidence::Low),
                    Judgement::toy(true, 9.0, Confidence::High),
                ),
            ],
            ..Comparison::default()
        };
        let text = render(&c, false);
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains(
                "[agree] toy / toy table: a/b ≥ 5.00× at threads 16: undecided (leans missed) \
                 4.82× at 16 (low) → undecided (leans met) 5.44× at 16 (low)"
            ),
            "{text}"
        );
        assert!(
            words.contains(
                "[within noise] toy / toy table: a/b ≥ 5.00× at threads 16: undecided (leans \
                 met) 5.44× at 16 (low) → MISSED 3.00× at 16 (high)"
            ),
            "{text}"
        );
        assert!(
            words.contains(
                "[agree] toy / toy table: a/b ≥ 5.00× at threads 16: undecided (leans met) \
                 5.44× at 16 (low) → met 9.00× at 16 (high)"
            ),
            "{text}"
        );
        assert!(
            words.contains(
                "3 targets: 2 agree (1 of them undecided in both runs), 1 differ within noise, \
                 0 changed, 0 judged in one run only."
            ),
            "{text}"
        );
    }
}
