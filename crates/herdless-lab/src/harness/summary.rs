//! The headline table: every ratio target of a run, in Markdown, with the
//! machine it ran on. `herdless-lab summary FILE` prints it from a `--json`
//! results file; the README's "Results" section is this output.

use std::fmt::Write as _;

use super::report::{describe_bound, fmt_ratio, Report, SectionReport};
use super::spec::Bound;

/// One row per ratio target: experiment, claim, where it is judged, the
/// deciding measured value (the worst over the cases it applies to), and
/// whether it was met.
pub fn markdown(report: &Report) -> String {
    let m = &report.machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Measured with `herdless-lab` {} ({} suite, {} repetitions kept per cell, herdless stats {}) on {} cores, {}, Linux {}.\n",
        m.lab_version,
        report.suite.name(),
        report.reps,
        if report.herdless_stats { "on" } else { "off" },
        m.cores,
        m.cpu_model,
        m.kernel,
    );
    out.push_str("| experiment | table | target | judged at | measured | verdict |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for exp in &report.experiments {
        for section in &exp.sections {
            for row in rows(section) {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} | {} |",
                    exp.name,
                    short_title(&section.title),
                    row.target,
                    row.judged_at,
                    row.measured,
                    row.verdict
                );
            }
        }
    }
    out
}

struct Row {
    target: String,
    judged_at: String,
    measured: String,
    verdict: &'static str,
}

fn rows(section: &SectionReport) -> Vec<Row> {
    let mut rows = Vec::new();
    for ratio in &section.ratios {
        let Some(bound) = ratio.target else {
            continue;
        };
        let applicable = section
            .cases
            .iter()
            .enumerate()
            .filter(|(_, c)| ratio.applies_to(&c.label))
            .filter_map(|(i, c)| ratio.values.get(i).copied().flatten().map(|v| (c, v)));
        let worst = applicable.reduce(|a, b| {
            let b_worse = match bound {
                Bound::AtLeast(_) => b.1 < a.1,
                Bound::AtMost(_) => b.1 > a.1,
            };
            if b_worse {
                b
            } else {
                a
            }
        });
        let judged_at = if ratio.at.is_empty() {
            format!("every {}", section.param)
        } else {
            format!("{} {}", section.param, ratio.at.join(", "))
        };
        let (measured, verdict) = match worst {
            Some((case, value)) => (
                format!("{} (at {})", fmt_ratio(value), case.label),
                if bound.holds(value) {
                    "met"
                } else {
                    "**missed**"
                },
            ),
            None => ("no data".to_string(), "**no data**"),
        };
        rows.push(Row {
            target: format!("{} {}", ratio.name(), describe_bound(bound)),
            judged_at,
            measured,
            verdict,
        });
    }
    rows
}

/// A table's title up to its first parenthesis or colon.
fn short_title(title: &str) -> &str {
    let end = title.find(['(', ':']).unwrap_or(title.len());
    title[..end].trim_end()
}
