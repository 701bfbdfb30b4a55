//! The result model: what a run measured, as plain serialisable data.
//!
//! The runner produces it; the table printer, the plotter and the JSON
//! writer only read it, so a table can be re-rendered from a JSON file.
//! [`SCHEMA`] is bumped whenever a field changes meaning or disappears.
//! Judging the ratios against their targets is `verdict.rs`'s job.

use std::collections::BTreeMap;

use itertools::Itertools;
use serde::{Deserialize, Serialize};

use super::disturbance::{Conditions, Disturbance};
pub use super::machine::Machine;
use super::spec::Suite;
pub use super::spec::{Metric, Ratio, VariantInfo};
use super::stats::Summary;

/// Version of the JSON layout.
///
/// 2: ratio values may be `"inf"`, `"-inf"` or `"0/0"` (a zero
/// denominator); ratios carry a `confidence`; cases carry `attempts`,
/// `remeasured_for` and `disturbance`, sections `disturbance`, the run its
/// `conditions` (load average, disturbance). Ratios later gained an
/// `outcome` (`"met"`, `"missed"` or `"undecided"`); a schema-2 file without
/// it still reads, the outcome derived from `met` and `confidence`.
pub const SCHEMA: u32 = 2;

/// A whole lab run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`] when written by this lab.
    pub schema: u32,
    /// Where it ran.
    pub machine: Machine,
    /// The suite.
    pub suite: Suite,
    /// Repetitions kept per (case, variant).
    pub reps: usize,
    /// Repetitions run first and discarded.
    pub warmup_reps: usize,
    /// Whether herdless counted its software events during the run.
    pub herdless_stats: bool,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    /// How busy the machine was around and during the run.
    pub conditions: Conditions,
    /// The experiments, in the order run.
    pub experiments: Vec<ExperimentReport>,
}

/// One experiment's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExperimentReport {
    /// Command-line name.
    pub name: String,
    /// The seed and its claim.
    pub seed: String,
    /// The seed's headline figure (absent in files of older labs).
    #[serde(default)]
    pub claim: String,
    /// The seed's mechanism (absent in files of older labs).
    #[serde(default)]
    pub mechanism: String,
    /// One per table.
    pub sections: Vec<SectionReport>,
}

/// One table's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SectionReport {
    /// Table title.
    pub title: String,
    /// What the rows vary.
    pub param: String,
    /// Metrics, primary first.
    pub metrics: Vec<Metric>,
    /// Columns, in display order.
    pub variants: Vec<VariantInfo>,
    /// Rows.
    pub cases: Vec<CaseReport>,
    /// Ratio columns of the primary metric, with their verdicts.
    pub ratios: Vec<Ratio>,
    /// The metrics that explain the result.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// How much of the machine others took while the whole table was
    /// measured (`None`: too short a window to tell).
    pub disturbance: Option<Disturbance>,
}

/// One row: every variant's results for one case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseReport {
    /// Row label.
    pub label: String,
    /// The parameters the variants were given.
    pub params: serde_json::Value,
    /// One per variant, in the section's variant order.
    pub cells: Vec<Cell>,
    /// How many times the row was measured: 1, or more when a judged cell's
    /// spread was too wide (or the machine disturbed) and the runner
    /// measured the row again; the attempt kept is the narrowest.
    pub attempts: u32,
    /// Why the row was measured again (`None` if it was not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remeasured_for: Option<String>,
    /// How much of the machine others took while the kept attempt was
    /// measured (`None`: too short a window to tell).
    pub disturbance: Option<Disturbance>,
}

/// One variant's results on one case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    /// Variant name.
    pub variant: String,
    /// Metric name → summary of the kept repetitions.
    pub metrics: BTreeMap<String, Summary>,
    /// Errors of failed repetitions (a variant that fails once on a case is
    /// not run again on it).
    pub errors: Vec<String>,
    /// Why the variant could not run here at all
    /// ([`LabError::Unavailable`](crate::harness::LabError::Unavailable)):
    /// not an error, and no measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl Cell {
    /// What a table shows for a metric this cell lacks: `error`, `skipped`
    /// or `—`.
    pub fn missing(&self) -> &'static str {
        if !self.errors.is_empty() {
            "error"
        } else if self.skipped.is_some() {
            "skipped"
        } else {
            "—"
        }
    }
}

impl SectionReport {
    /// The primary metric.
    pub fn primary(&self) -> &Metric {
        &self.metrics[0]
    }

    /// Whether any cell holds `metric` (a peer may lack a counter, and a
    /// build without herdless's counters lacks them all).
    pub fn measured(&self, metric: &str) -> bool {
        self.cases
            .iter()
            .flat_map(|c| &c.cells)
            .any(|cell| cell.metrics.contains_key(metric))
    }

    /// Summary of `metric` for `variant` on case `case`.
    pub fn summary(&self, case: usize, variant: &str, metric: &str) -> Option<&Summary> {
        self.cases[case]
            .cells
            .iter()
            .find(|c| c.variant == variant)?
            .metrics
            .get(metric)
    }

    /// Median of `metric` for `variant` on case `case`.
    pub fn median(&self, case: usize, variant: &str, metric: &str) -> Option<f64> {
        self.summary(case, variant, metric).map(|s| s.median)
    }

    /// The metric `ratio` divides: its own, or the primary one.
    pub fn ratio_metric<'a>(&'a self, ratio: &'a Ratio) -> &'a str {
        ratio.metric.as_deref().unwrap_or(&self.metrics[0].name)
    }

    /// The first error of every cell that failed: `variant at param
    /// label: error`.
    pub fn errors(&self) -> Vec<String> {
        let first = |case: &CaseReport, cell: &Cell| {
            let e = cell.errors.first()?;
            Some(format!(
                "{} at {} {}: {e}",
                cell.variant, self.param, case.label
            ))
        };
        let cells = self
            .cases
            .iter()
            .flat_map(|c| c.cells.iter().map(move |l| (c, l)));
        cells.filter_map(|(case, cell)| first(case, cell)).collect()
    }

    /// Why variants could not run here, once per variant and reason:
    /// `variant (not run here): why`.
    pub fn skips(&self) -> Vec<String> {
        let cells = self.cases.iter().flat_map(|c| &c.cells);
        let skip = |cell: &Cell| {
            Some(format!(
                "{} (not run here): {}",
                cell.variant,
                cell.skipped.as_ref()?
            ))
        };
        cells.filter_map(skip).unique().collect()
    }
    /// How much of the machine others took while case `case` was measured:
    /// the row's own window, or the whole table's when the row's was too
    /// short to tell.
    pub fn disturbance_at(&self, case: usize) -> Option<Disturbance> {
        self.cases[case].disturbance.or(self.disturbance)
    }
}
