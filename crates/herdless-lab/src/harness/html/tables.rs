//! The report's HTML tables for one section: one per measured metric (the
//! primary one always), rows = cases, columns = variants showing
//! `median ± spread`; the primary table adds the ratio columns, marked where
//! a target is checked, and the verdicts (one per target, with its
//! confidence) below it.

use std::fmt::Write as _;

use super::{esc, id};
use crate::harness::format::fmt_sig;
use crate::harness::report::{Ratio, SectionReport};
use crate::harness::table::{ratio_mark, spread_of};

/// Writes the tables of section `s`; `prefix` is `<experiment>-s<i>`.
pub(super) fn section(out: &mut String, s: &SectionReport, prefix: &str) {
    for (m, metric) in s.metrics.iter().enumerate() {
        let primary = m == 0;
        if !primary && !s.measured(&metric.name) {
            continue;
        }
        let (kind, reps) = spread_of(s, &metric.name);
        let _ = writeln!(
            out,
            "<table id=\"table-{prefix}-{}\" class=\"metric\">\n<caption>{}{}: median {} of \
             {reps} repetitions</caption>",
            id(&metric.name),
            if primary { "primary metric: " } else { "" },
            esc(&metric.heading()),
            esc(kind.describe()),
        );
        out.push_str("<tr>");
        let _ = write!(out, "<th>{}</th>", esc(&s.param));
        for v in &s.variants {
            let _ = write!(
                out,
                "<th title=\"{}\">{}</th>",
                esc(&format!("{:?}", v.role).to_lowercase()),
                esc(&v.name)
            );
        }
        if primary {
            for r in &s.ratios {
                let _ = write!(out, "<th>{}</th>", esc(&r.name()));
            }
        }
        out.push_str("</tr>\n");
        for (c, case) in s.cases.iter().enumerate() {
            let _ = write!(out, "<tr><th>{}</th>", esc(&case.label));
            for cell in &case.cells {
                match cell.metrics.get(&metric.name) {
                    Some(sum) => {
                        let _ = write!(
                            out,
                            "<td class=\"num\">{} <span class=\"spread\">± {}</span></td>",
                            fmt_sig(sum.median, 4),
                            fmt_sig(sum.spread, 2)
                        );
                    }
                    None if !cell.errors.is_empty() => {
                        let _ = write!(
                            out,
                            "<td class=\"error\" title=\"{}\">error</td>",
                            esc(&cell.errors.join("; "))
                        );
                    }
                    None if cell.skipped.is_some() => {
                        let _ = write!(
                            out,
                            "<td class=\"num\" title=\"{}\">skipped</td>",
                            esc(cell.skipped.as_deref().unwrap_or_default())
                        );
                    }
                    None => out.push_str("<td class=\"num\">—</td>"),
                }
            }
            if primary {
                for r in &s.ratios {
                    ratio_cell(out, r, c, &case.label);
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        if primary {
            for line in s.verdict_lines() {
                let _ = writeln!(out, "<p class=\"verdict\">verdict: {}</p>", esc(&line));
            }
        }
    }
    let errors = s.errors();
    if !errors.is_empty() {
        out.push_str("<ul class=\"errors\">\n");
        for e in errors {
            let _ = writeln!(out, "<li>{}</li>", esc(&e));
        }
        out.push_str("</ul>\n");
    }
    for line in s.skips() {
        let _ = writeln!(out, "<p class=\"verdict\">skipped: {}</p>", esc(&line));
    }
}

/// The ratio on case `c`: `ok`/`MISS` where its target is checked.
fn ratio_cell(out: &mut String, r: &Ratio, c: usize, label: &str) {
    let _ = match ratio_mark(r, c, label) {
        None => write!(out, "<td class=\"num\">—</td>"),
        Some((text, Some(true))) => write!(out, "<td class=\"num ok\">{} ok</td>", esc(&text)),
        Some((text, Some(false))) => {
            write!(out, "<td class=\"num miss\">{} MISS</td>", esc(&text))
        }
        Some((text, None)) => write!(out, "<td class=\"num\">{}</td>", esc(&text)),
    };
}
