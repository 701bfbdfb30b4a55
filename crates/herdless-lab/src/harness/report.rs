//! The result model: what a run measured, as plain serialisable data.
//!
//! The runner produces it; the table printer, the plotter and the JSON
//! writer only read it, so a table can be re-rendered from a JSON file.
//! [`SCHEMA`] is bumped whenever a field changes meaning or disappears.
//! Judging the ratios against their targets is `verdict.rs`'s job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::disturbance::{Conditions, Disturbance};
pub use super::machine::Machine;
use super::outcome::{Confidence, Outcome};
use super::quotient::Quotient;
use super::spec::{Bound, Role, Suite};
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
    pub metrics: Vec<MetricInfo>,
    /// Columns, in display order.
    pub variants: Vec<VariantInfo>,
    /// Rows.
    pub cases: Vec<CaseReport>,
    /// Ratio columns of the primary metric, with their verdicts.
    pub ratios: Vec<RatioReport>,
    /// The metrics that explain the result.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// How much of the machine others took while the whole table was
    /// measured (`None`: too short a window to tell).
    pub disturbance: Option<Disturbance>,
}

/// A metric's declaration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MetricInfo {
    /// Key.
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Whether smaller is better.
    pub lower_is_better: bool,
}

/// A variant's declaration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantInfo {
    /// Column name.
    pub name: String,
    /// Before, after, kernel or peer.
    pub role: Role,
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

/// A ratio of medians (of the primary metric unless `metric` says
/// otherwise), per case, with its target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RatioReport {
    /// Numerator variant.
    pub num: String,
    /// Denominator variant.
    pub den: String,
    /// The claimed bound, if any.
    pub target: Option<Bound>,
    /// The cases the bound applies to; empty: every case. In JSON: `null`
    /// (every case), a label (one case, as before this could name
    /// several), or a list of labels.
    #[serde(default, with = "at_cases")]
    pub at: Vec<String>,
    /// The metric divided; absent: the section's primary metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// One per case: the quotient of the medians (`None` where either
    /// median is missing).
    pub values: Vec<Option<Quotient>>,
    /// Whether the target holds where it applies, as measured: the side of
    /// the bound the deciding value lies on, decided or not (`None`: no
    /// target, or no value to judge it by).
    pub met: Option<bool>,
    /// How far the verdict can be trusted (`None` when `met` is).
    #[serde(default)]
    pub confidence: Option<Confidence>,
    /// Met, missed, or undecided at low confidence (`None` when `met` is).
    /// Files of earlier labs lack it: [`Report::read_json`] derives it from
    /// `met` and `confidence`.
    #[serde(default)]
    pub outcome: Option<Outcome>,
}

impl MetricInfo {
    /// `time_ms (ms, lower is better)`: how every output names a metric.
    pub fn heading(&self) -> String {
        let better = if self.lower_is_better { "lower" } else { "higher" };
        format!("{} ({}, {better} is better)", self.name, self.unit)
    }
}

impl RatioReport {
    /// The smallest and the largest value over the cases (`0/0` and
    /// missing ones left out); `None` without any.
    pub fn range(&self) -> Option<(f64, f64)> {
        let values = self.values.iter().flatten().filter_map(|q| q.value());
        values.fold(None, |range, v| match range {
            None => Some((v, v)),
            Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
        })
    }

    /// `num/den`, with the metric when it is not the primary one.
    pub fn name(&self) -> String {
        match &self.metric {
            Some(m) => format!("{}/{} {m}", self.num, self.den),
            None => format!("{}/{}", self.num, self.den),
        }
    }

    /// Whether the target (if any) is checked on the case labelled `label`.
    pub fn applies_to(&self, label: &str) -> bool {
        self.at.is_empty() || self.at.iter().any(|l| l == label)
    }
}

/// `RatioReport::at` in JSON: `null`, one label, or a list (schema 1 wrote
/// `null` or one label; both still read, and are still written that way).
mod at_cases {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }

    pub fn serialize<S: Serializer>(at: &[String], s: S) -> Result<S::Ok, S::Error> {
        match at {
            [] => s.serialize_none(),
            [one] => one.serialize(s),
            many => many.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match Option::<OneOrMany>::deserialize(d)? {
            None => Vec::new(),
            Some(OneOrMany::One(one)) => vec![one],
            Some(OneOrMany::Many(many)) => many,
        })
    }
}

impl SectionReport {
    /// The primary metric.
    pub fn primary(&self) -> &MetricInfo {
        &self.metrics[0]
    }

    /// Whether any cell holds `metric` (a peer may lack a counter, and a
    /// build without herdless's counters lacks them all).
    pub fn measured(&self, metric: &str) -> bool {
        self.cases.iter().flat_map(|c| &c.cells).any(|cell| cell.metrics.contains_key(metric))
    }

    /// Summary of `metric` for `variant` on case `case`.
    pub fn summary(&self, case: usize, variant: &str, metric: &str) -> Option<&Summary> {
        self.cases[case].cells.iter().find(|c| c.variant == variant)?.metrics.get(metric)
    }

    /// Median of `metric` for `variant` on case `case`.
    pub fn median(&self, case: usize, variant: &str, metric: &str) -> Option<f64> {
        self.summary(case, variant, metric).map(|s| s.median)
    }

    /// The metric `ratio` divides: its own, or the primary one.
    pub fn ratio_metric<'a>(&'a self, ratio: &'a RatioReport) -> &'a str {
        ratio.metric.as_deref().unwrap_or(&self.metrics[0].name)
    }

    /// How much of the machine others took while case `case` was measured:
    /// the row's own window, or the whole table's when the row's was too
    /// short to tell.
    pub fn disturbance_at(&self, case: usize) -> Option<Disturbance> {
        self.cases[case].disturbance.or(self.disturbance)
    }
}
