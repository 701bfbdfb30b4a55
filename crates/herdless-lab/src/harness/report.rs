//! The result model: what a run measured, as plain serialisable data.
//!
//! The runner produces it; the table printer, the plotter and the JSON
//! writer only read it, so a table can be re-rendered from a JSON file.
//! [`SCHEMA`] is bumped whenever a field changes meaning or disappears.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::spec::{Bound, Role, Suite};
use super::stats::Summary;

/// Version of the JSON layout.
pub const SCHEMA: u32 = 1;

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
    /// The experiments, in the order run.
    pub experiments: Vec<ExperimentReport>,
}

/// The machine a report was measured on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// `std::thread::available_parallelism`.
    pub cores: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// The lab's version.
    pub lab_version: String,
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
    /// The metrics that explain the result (absent in files of older labs).
    #[serde(default)]
    pub evidence: Vec<String>,
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
    /// One per case (`None` where either median is missing or zero).
    pub values: Vec<Option<f64>>,
    /// Whether the target holds where it applies (`None`: no target, or no
    /// value to check).
    pub met: Option<bool>,
}

impl RatioReport {
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
        self.cases
            .iter()
            .flat_map(|c| &c.cells)
            .any(|cell| cell.metrics.contains_key(metric))
    }

    /// Median of `metric` for `variant` on case `case`.
    pub fn median(&self, case: usize, variant: &str, metric: &str) -> Option<f64> {
        self.cases[case]
            .cells
            .iter()
            .find(|c| c.variant == variant)?
            .metrics
            .get(metric)
            .map(|s| s.median)
    }

    /// Fills each ratio's per-case values and verdict from the medians.
    pub fn compute_ratios(&mut self) {
        let primary = self.primary().name.clone();
        for r in 0..self.ratios.len() {
            let metric = self.ratios[r].metric.clone().unwrap_or(primary.clone());
            let values: Vec<Option<f64>> = (0..self.cases.len())
                .map(|c| {
                    let num = self.median(c, &self.ratios[r].num, &metric)?;
                    let den = self.median(c, &self.ratios[r].den, &metric)?;
                    let ratio = num / den;
                    ratio.is_finite().then_some(ratio)
                })
                .collect();
            self.ratios[r].values = values;
            self.ratios[r].met = ratio_met(self, &self.ratios[r]);
        }
    }

    /// The case (index) and value that decide `ratio`'s target: the worst
    /// value over the cases it applies to; `None` without a target or data.
    pub fn deciding(&self, ratio: &RatioReport) -> Option<(usize, f64)> {
        decisive(self, ratio)
    }

    /// The one-line verdict: each target met or missed with the value that
    /// decides it, or the range of the first ratio when there is no target.
    pub fn verdict(&self) -> String {
        let mut parts = Vec::new();
        for r in &self.ratios {
            let Some(bound) = r.target else {
                continue;
            };
            let name = r.name();
            let target = describe_bound(bound);
            let where_ = if r.at.is_empty() {
                "at every case".to_string()
            } else {
                format!("at {}", r.at.join(", "))
            };
            match decisive(self, r) {
                Some((case, value)) => {
                    let mark = if bound.holds(value) { "met" } else { "MISSED" };
                    let worst = if r.at.len() == 1 { "" } else { "worst " };
                    parts.push(format!(
                        "{name} {target} {where_}: {mark} ({worst}{} at {} {})",
                        fmt_ratio(value),
                        self.param,
                        self.cases[case].label
                    ));
                }
                None => parts.push(format!("{name} {target} {where_}: no data")),
            }
        }
        if parts.is_empty() {
            if let Some(r) = self.ratios.first() {
                let vals: Vec<f64> = r.values.iter().flatten().copied().collect();
                let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if vals.is_empty() {
                    parts.push(format!("{}/{}: no data", r.num, r.den));
                } else {
                    parts.push(format!(
                        "{}/{} from {} to {} over {}",
                        r.num,
                        r.den,
                        fmt_ratio(lo),
                        fmt_ratio(hi),
                        self.param
                    ));
                }
            }
        }
        if parts.is_empty() {
            return "no ratio to judge".to_string();
        }
        parts.join("; ")
    }
}

/// The case and value that decide a ratio's target: the worst value over the
/// cases it applies to.
fn decisive(section: &SectionReport, ratio: &RatioReport) -> Option<(usize, f64)> {
    let bound = ratio.target?;
    (0..section.cases.len())
        .filter(|&c| ratio.applies_to(&section.cases[c].label))
        .filter_map(|c| ratio.values[c].map(|v| (c, v)))
        .reduce(|a, b| {
            let b_worse = match bound {
                Bound::AtLeast(_) => b.1 < a.1,
                Bound::AtMost(_) => b.1 > a.1,
            };
            if b_worse {
                b
            } else {
                a
            }
        })
}

fn ratio_met(section: &SectionReport, ratio: &RatioReport) -> Option<bool> {
    let (_, value) = decisive(section, ratio)?;
    Some(ratio.target?.holds(value))
}

/// `≥ 10×` or `≤ 1.1×`.
pub fn describe_bound(bound: Bound) -> String {
    match bound {
        Bound::AtLeast(b) => format!("≥ {}", fmt_ratio(b)),
        Bound::AtMost(b) => format!("≤ {}", fmt_ratio(b)),
    }
}

/// A ratio with three significant digits and a `×`.
pub fn fmt_ratio(value: f64) -> String {
    format!("{}×", fmt_sig(value, 3))
}

/// `value` with `digits` significant digits (no exponent, at most 6
/// decimals).
pub fn fmt_sig(value: f64, digits: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i64;
    let decimals = (digits as i64 - 1 - magnitude).clamp(0, 6) as usize;
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits_adapt_to_magnitude() {
        assert_eq!(fmt_sig(1234.56, 4), "1235");
        assert_eq!(fmt_sig(12.3456, 4), "12.35");
        assert_eq!(fmt_sig(0.0123456, 4), "0.01235");
        assert_eq!(fmt_sig(0.0, 4), "0");
    }
}
