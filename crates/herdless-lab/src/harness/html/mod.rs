//! The `--report DIR` output: one self-contained `index.html` (CSS inline,
//! charts as inline SVG, no script, no external URL).
//!
//! Per experiment: what the seed claimed (headline figure and mechanism);
//! per section: the chart of the primary metric against the case parameter
//! (from `plot.rs`), the paragraph saying whether the seed's effect
//! reproduced and which counted metric explains it (`narrative.rs`), and one
//! table per measured metric with median ± spread, the primary one with the
//! ratio columns (kernel and peers included) and the verdicts with their
//! confidence (`tables.rs`), and the rows measured again or on a disturbed
//! machine.
//!
//! Element ids are stable, for tests and links: `exp-<experiment>`,
//! `chart-<experiment>-s<i>` (a `<figure>` holding the `<svg>`), and
//! `table-<experiment>-s<i>-<metric>`, with `i` the section's index from 0.

mod tables;

use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::narrative::{paragraph, Outcome};
use super::output::OutputFile;
use super::plot;
use super::report::{ExperimentReport, Report, SectionReport};
use super::LabError;

const STYLE: &str = include_str!("style.css");

/// The report's page in `dir`: `dir/index.html`.
pub fn index_of(dir: &Path) -> PathBuf {
    dir.join("index.html")
}

/// Writes the page for `report` into a claimed `index.html`.
pub fn write_report_to(report: &Report, out: OutputFile) -> Result<PathBuf, LabError> {
    let page = render(report)?;
    out.write(page.as_bytes())
}

/// The whole page.
pub fn render(report: &Report) -> Result<String, LabError> {
    let m = &report.machine;
    let suite = report.suite.name();
    let experiments: Vec<Markup> = report
        .experiments
        .iter()
        .map(experiment)
        .collect::<Result<_, _>>()?;
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "herdless lab: " (suite) " suite" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "herdless lab" }
                p.machine {
                    (suite) " suite, " (report.reps) " repetitions kept (+" (report.warmup_reps)
                    " warm-up), herdless counters " (if report.herdless_stats { "on" } else { "off" })
                    ", started " (utc(report.started_unix)) "."
                    br;
                    (m.cores) " cores, Linux " (m.kernel) ", " (m.cpu_model) "; lab " (m.lab_version) "."
                }
                @if let Some(busy) = report.conditions.describe(None) {
                    p.machine { (busy) "." }
                }
                (summary(report))
                @for exp in experiments {
                    (exp)
                }
            }
        }
    };
    Ok(page.into_string())
}

/// One row per section: its outcome and verdict, linked to the section.
fn summary(report: &Report) -> Markup {
    html! {
        table #summary {
            caption { "Every table's verdict" }
            tr { th { "experiment" } th { "table" } th { "outcome" } th { "verdict" } }
            @for exp in &report.experiments {
                @let e = id(&exp.name);
                @for (i, s) in exp.sections.iter().enumerate() {
                    tr {
                        td { a href={ "#exp-" (e) } { (e) } }
                        td { a href={ "#exp-" (e) "-s" (i) } { (s.title) } }
                        td { (outcome(s)) }
                        td { (s.verdict()) }
                    }
                }
            }
        }
    }
}

/// The section's outcome, styled by its label.
fn outcome(s: &SectionReport) -> Markup {
    let label = Outcome::of(s).label();
    html! { span class={ "outcome " (label.replace(' ', "-")) } { (label) } }
}

fn experiment(exp: &ExperimentReport) -> Result<Markup, LabError> {
    let e = id(&exp.name);
    let charts: Vec<Option<String>> = exp
        .sections
        .iter()
        .map(|s| plot::svg(exp, s))
        .collect::<Result<_, _>>()?;
    Ok(html! {
        section id={ "exp-" (e) } {
            h2 { (exp.name) }
            p { (exp.seed) }
            @if !exp.claim.is_empty() || !exp.mechanism.is_empty() {
                dl.seed {
                    dt { "What the seed claimed" }
                    dd { (or_dash(&exp.claim)) }
                    dt { "Its mechanism" }
                    dd { (or_dash(&exp.mechanism)) }
                }
            }
            @for ((i, s), chart) in exp.sections.iter().enumerate().zip(charts) {
                section id={ "exp-" (e) "-s" (i) } {
                    h3 { (s.title) " " (outcome(s)) }
                    @if let Some(svg) = chart {
                        figure id={ "chart-" (e) "-s" (i) } {
                            (PreEscaped(svg))
                            figcaption {
                                (s.title) ": median " (s.primary().name) " (" (s.primary().unit)
                                ") against " (s.param) ", one line per variant, log scale."
                            }
                        }
                    } @else {
                        p { "No chart: no positive median to draw." }
                    }
                    p.finding { (paragraph(s)) }
                    @for case in &s.cases {
                        @if let Some(why) = &case.remeasured_for {
                            p.note {
                                "Measured " (case.attempts) " times at " (s.param) " " (case.label)
                                ": " (why) "."
                            }
                        }
                        @if let Some(d) = case.disturbance.filter(|d| d.is_disturbed()) {
                            p.note {
                                "Disturbed while measuring " (s.param) " " (case.label) ": "
                                (d.describe()) "."
                            }
                        }
                    }
                    (tables::section(s, &format!("{e}-s{i}")))
                }
            }
        }
    })
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "—"
    } else {
        text
    }
}

/// A name made safe for an id: ASCII letters, digits, `_` and `-` kept,
/// anything else becomes `-`.
pub fn id(name: &str) -> String {
    name.replace(
        |c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "-",
    )
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM UTC`.
fn utc(unix: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix);
    // `2025-11-21T13:20:00Z`
    let text = humantime::format_rfc3339_seconds(at).to_string();
    format!("{} {} UTC", &text[..10], &text[11..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_content_and_attributes() {
        let mut report = crate::harness::toy::Toy::default().report();
        let exp = &mut report.experiments[0];
        exp.seed = "a<b & \"c\">".into();
        let cell = &mut exp.sections[0].cases[0].cells[0];
        cell.metrics.clear();
        cell.errors = vec!["<\"x\">".into()];
        let page = render(&report).unwrap();
        assert!(
            page.contains("<p>a&lt;b &amp; &quot;c&quot;&gt;</p>"),
            "{page}"
        );
        assert!(page.contains("title=\"&lt;&quot;x&quot;&gt;\""), "{page}");
        assert!(!page.contains("a<b"), "{page}");
    }

    #[test]
    fn ids_keep_only_safe_characters() {
        assert_eq!(id("futex-wake"), "futex-wake");
        assert_eq!(id("a b/\"c\""), "a-b--c-");
    }

    #[test]
    fn unix_seconds_become_a_utc_date() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400 + 3_660), "2000-02-29 01:01 UTC");
        assert_eq!(utc(1_763_731_200), "2025-11-21 13:20 UTC");
    }

    #[test]
    fn charts_are_inlined_without_an_xml_declaration() {
        let report = crate::harness::toy::Toy::default().report();
        let exp = &report.experiments[0];
        let svg = plot::svg(exp, &exp.sections[0]).unwrap().unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(!render(&report).unwrap().contains("<?xml"));
    }
}
