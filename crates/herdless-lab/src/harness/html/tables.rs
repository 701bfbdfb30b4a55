//! The report's HTML tables for one section: one per measured metric (the
//! primary one always), rows = cases, columns = variants showing
//! `median ± spread`; the primary table adds the ratio columns, marked where
//! a target is checked, and the verdicts (one per target, with its
//! confidence) below it.

use maud::{html, Markup};

use super::id;
use crate::harness::format::fmt_sig;
use crate::harness::report::{Cell, SectionReport};
use crate::harness::table::{ratio_mark, spread_of};

/// The tables of section `s`; `prefix` is `<experiment>-s<i>`.
pub(super) fn section(s: &SectionReport, prefix: &str) -> Markup {
    let measured = s.metrics.iter().enumerate();
    let metrics = measured.filter(|(m, metric)| *m == 0 || s.measured(&metric.name));
    let errors = s.errors();
    html! {
        @for (m, metric) in metrics {
            @let primary = m == 0;
            @let (kind, reps) = spread_of(s, &metric.name);
            table id={ "table-" (prefix) "-" (id(&metric.name)) } class="metric" {
                caption {
                    @if primary { "primary metric: " }
                    (metric.heading()) ": median " (kind.describe()) " of " (reps) " repetitions"
                }
                tr {
                    th { (s.param) }
                    @for v in &s.variants {
                        th title=(format!("{:?}", v.role).to_lowercase()) { (v.name) }
                    }
                    @if primary {
                        @for r in &s.ratios { th { (r.name()) } }
                    }
                }
                @for (c, case) in s.cases.iter().enumerate() {
                    tr {
                        th { (case.label) }
                        @for cell in &case.cells { (value_cell(cell, &metric.name)) }
                        @if primary {
                            @for r in &s.ratios {
                                @match ratio_mark(r, c, &case.label) {
                                    None => td.num { "—" },
                                    Some((text, Some(true))) => td.num.ok { (text) " ok" },
                                    Some((text, Some(false))) => td.num.miss { (text) " MISS" },
                                    Some((text, None)) => td.num { (text) },
                                }
                            }
                        }
                    }
                }
            }
            @if primary {
                @for line in s.verdict_lines() { p.verdict { "verdict: " (line) } }
            }
        }
        @if !errors.is_empty() {
            ul.errors {
                @for e in errors { li { (e) } }
            }
        }
        @for line in s.skips() { p.verdict { "skipped: " (line) } }
    }
}

/// A cell's `median ± spread` of `metric`, or why it has none (`error`,
/// `skipped`, with the reason as its title, or `—`).
fn value_cell(cell: &Cell, metric: &str) -> Markup {
    html! {
        @match (cell.metrics.get(metric), &cell.skipped) {
            (Some(sum), _) => td.num {
                (fmt_sig(sum.median, 4)) " " span.spread { "± " (fmt_sig(sum.spread, 2)) }
            },
            (None, _) if !cell.errors.is_empty() => {
                td.error title=(cell.errors.join("; ")) { "error" }
            },
            (None, Some(why)) => td.num title=(why) { "skipped" },
            (None, None) => td.num { "—" },
        }
    }
}
