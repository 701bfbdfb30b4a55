//! The headline table: every ratio target of a run, in Markdown, with the
//! machine it ran on and how busy it was. `herdless-lab summary FILE`
//! prints it from a `--json` results file; the README's "Results" section
//! is this output.

use std::fmt::Write as _;

use super::format::{describe_bound, fmt_quotient};
use super::outcome::Outcome;
use super::report::Report;

/// One row per ratio target: experiment, claim, where it is judged, the
/// deciding measured value (the worst over the cases it applies to), and
/// whether it was met, missed, or left undecided at low confidence (with
/// the side it leans to).
pub fn markdown(report: &Report) -> String {
    let m = &report.machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Measured with `herdless-lab` {} ({} suite, {} repetitions kept per cell, herdless stats {}) on {}, {}, Linux {}.\n",
        m.lab_version,
        report.suite.name(),
        report.reps,
        if report.herdless_stats { "on" } else { "off" },
        m.cores_text(),
        m.cpu_model,
        m.kernel,
    );
    if let Some(busy) = report.conditions.describe(Some(m.cores)) {
        let _ = writeln!(out, "Machine: {busy}.\n");
    }
    out.push_str("| experiment | table | target | judged at | measured | verdict | confidence |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for exp in &report.experiments {
        for s in &exp.sections {
            for ratio in &s.ratios {
                let Some(bound) = ratio.target else {
                    continue;
                };
                let judged_at = if ratio.at.is_empty() {
                    format!("every {}", s.param)
                } else {
                    format!("{} {}", s.param, ratio.at.join(", "))
                };
                // The verdict: `met`, `**missed**` (bold, to be found at a
                // glance), `undecided (leans met)` or `undecided (leans
                // missed)`.
                let (measured, verdict, confidence) = match s.judge(ratio) {
                    Some(j) => (
                        format!("{} (at {})", fmt_quotient(j.value), j.label),
                        match j.outcome() {
                            Outcome::Missed => "**missed**",
                            _ => j.verdict(),
                        },
                        j.confidence.label(),
                    ),
                    None if !s.both_zero_at(ratio).is_empty() => {
                        ("0/0".to_string(), "not judged", "—")
                    }
                    None => ("no data".to_string(), "**no data**", "—"),
                };
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} {} | {judged_at} | {measured} | {verdict} | {confidence} |",
                    exp.name,
                    short_title(&s.title),
                    ratio.name(),
                    describe_bound(bound),
                );
            }
        }
    }
    out
}

/// A table's title up to its first parenthesis or colon.
fn short_title(title: &str) -> &str {
    let end = title.find(['(', ':']).unwrap_or(title.len());
    title[..end].trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::toy::Toy;

    #[test]
    fn one_row_per_target_with_its_verdict_and_confidence() {
        let mut report = Toy::default().report();
        let md = markdown(&report);
        assert!(md.contains("| verdict | confidence |"), "{md}");
        assert!(
            md.contains(
                "| `toy` | toy table | old/new ≥ 5.00× | n 4 | 10.0× (at 4) | met | high |"
            ),
            "{md}"
        );
        // At the bound within the spread: undecided, leaning by the median.
        let md = markdown(&Toy::at_bound_report());
        assert!(
            md.contains("| old/new ≥ 10.0× | n 4 | 10.0× (at 4) | undecided (leans met) | low |"),
            "{md}"
        );
        // Both medians 0 where the target is judged: not judged, not "no data".
        let s = &mut report.experiments[0].sections[0];
        for cell in &mut s.cases[1].cells[..2] {
            for m in cell.metrics.values_mut() {
                *m = crate::harness::stats::Summary::of(&[0.0; 5]).unwrap();
            }
        }
        s.compute_ratios();
        let md = markdown(&report);
        assert!(md.contains("| n 4 | 0/0 | not judged | — |"), "{md}");
    }
}
