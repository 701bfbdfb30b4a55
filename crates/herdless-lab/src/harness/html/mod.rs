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

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::narrative::{paragraph, Outcome};
use super::output::OutputFile;
use super::plot;
use super::report::{ExperimentReport, Report};
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
    let mut out = String::new();
    let m = &report.machine;
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>herdless lab: {} suite</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <h1>herdless lab</h1>\n<p class=\"machine\">{} suite, {} repetitions kept (+{} warm-up), \
         herdless counters {}, started {}.<br>{} cores, Linux {}, {}; lab {}.</p>\n",
        report.suite.name(),
        report.suite.name(),
        report.reps,
        report.warmup_reps,
        if report.herdless_stats { "on" } else { "off" },
        utc(report.started_unix),
        m.cores,
        esc(&m.kernel),
        esc(&m.cpu_model),
        esc(&m.lab_version),
    );
    if let Some(busy) = report.conditions.describe(None) {
        let _ = writeln!(out, "<p class=\"machine\">{}.</p>", esc(&busy));
    }
    summary(&mut out, report);
    for exp in &report.experiments {
        experiment(&mut out, exp)?;
    }
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

/// One row per section: its outcome and verdict, linked to the section.
fn summary(out: &mut String, report: &Report) {
    out.push_str(
        "<table id=\"summary\">\n<caption>Every table's verdict</caption>\n\
         <tr><th>experiment</th><th>table</th><th>outcome</th><th>verdict</th></tr>\n",
    );
    for exp in &report.experiments {
        for (i, s) in exp.sections.iter().enumerate() {
            let outcome = Outcome::of(s);
            let _ = writeln!(
                out,
                "<tr><td><a href=\"#exp-{e}\">{e}</a></td><td><a href=\"#exp-{e}-s{i}\">{}</a></td>\
                 <td><span class=\"outcome {}\">{}</span></td><td>{}</td></tr>",
                esc(&s.title),
                class(outcome.label()),
                outcome.label(),
                esc(&s.verdict()),
                e = id(&exp.name),
            );
        }
    }
    out.push_str("</table>\n");
}

fn experiment(out: &mut String, exp: &ExperimentReport) -> Result<(), LabError> {
    let e = id(&exp.name);
    let _ = writeln!(
        out,
        "<section id=\"exp-{e}\">\n<h2>{}</h2>\n<p>{}</p>",
        esc(&exp.name),
        esc(&exp.seed)
    );
    if !exp.claim.is_empty() || !exp.mechanism.is_empty() {
        let _ = writeln!(
            out,
            "<dl class=\"seed\"><dt>What the seed claimed</dt><dd>{}</dd>\
             <dt>Its mechanism</dt><dd>{}</dd></dl>",
            esc(or_dash(&exp.claim)),
            esc(or_dash(&exp.mechanism))
        );
    }
    for (i, s) in exp.sections.iter().enumerate() {
        let outcome = Outcome::of(s);
        let _ = writeln!(
            out,
            "<section id=\"exp-{e}-s{i}\">\n<h3>{} <span class=\"outcome {}\">{}</span></h3>",
            esc(&s.title),
            class(outcome.label()),
            outcome.label()
        );
        match plot::svg(exp, s)? {
            Some(svg) => {
                let _ = writeln!(
                    out,
                    "<figure id=\"chart-{e}-s{i}\">\n{}\n<figcaption>{}: median {} ({}) against \
                     {}, one line per variant, log scale.</figcaption>\n</figure>",
                    strip_xml_declaration(&svg),
                    esc(&s.title),
                    esc(&s.primary().name),
                    esc(&s.primary().unit),
                    esc(&s.param)
                );
            }
            None => out.push_str("<p>No chart: no positive median to draw.</p>\n"),
        }
        let _ = writeln!(out, "<p class=\"finding\">{}</p>", esc(&paragraph(s)));
        for case in &s.cases {
            if let Some(why) = &case.remeasured_for {
                let _ = writeln!(
                    out,
                    "<p class=\"note\">Measured {} times at {} {}: {}.</p>",
                    case.attempts,
                    esc(&s.param),
                    esc(&case.label),
                    esc(why)
                );
            }
            if let Some(d) = case.disturbance.filter(|d| d.is_disturbed()) {
                let _ = writeln!(
                    out,
                    "<p class=\"note\">Disturbed while measuring {} {}: {}.</p>",
                    esc(&s.param),
                    esc(&case.label),
                    esc(&d.describe())
                );
            }
        }
        tables::section(out, s, &format!("{e}-s{i}"));
        out.push_str("</section>\n");
    }
    out.push_str("</section>\n");
    Ok(())
}

/// An inline `<svg>` must not carry an XML declaration.
fn strip_xml_declaration(svg: &str) -> &str {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest
            .split_once("?>")
            .map_or(svg, |(_, body)| body.trim_start()),
        None => svg,
    }
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "—"
    } else {
        text
    }
}

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A name made safe for an id: ASCII letters, digits, `_` and `-` kept,
/// anything else becomes `-`.
pub fn id(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// `"partly reproduced"` → `"partly-reproduced"` (a CSS class).
fn class(label: &str) -> String {
    label.replace(' ', "-")
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
        assert_eq!(
            esc("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
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
    fn an_xml_declaration_is_dropped_from_inline_svg() {
        assert_eq!(
            strip_xml_declaration("<?xml version=\"1.0\"?>\n<svg/>"),
            "<svg/>"
        );
        assert_eq!(strip_xml_declaration("<svg/>"), "<svg/>");
    }
}
