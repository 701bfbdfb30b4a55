//! A ratio column, declared and judged in one struct: which variants it
//! divides and the target it should meet (the experiment's declaration),
//! then its value per case and its verdict (filled in by `verdict.rs`).

use itertools::Itertools;
use serde::{Deserialize, Serialize};

use super::outcome::{Confidence, Outcome};
use super::quotient::Quotient;

/// A bound a ratio should meet.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The ratio should be at least this.
    AtLeast(f64),
    /// The ratio should be at most this.
    AtMost(f64),
}

impl Bound {
    /// Whether `value` meets the bound.
    pub fn holds(self, value: f64) -> bool {
        match self {
            Bound::AtLeast(b) => value >= b,
            Bound::AtMost(b) => value <= b,
        }
    }
}

/// A ratio column: the median of `num` over that of `den` per case (of the
/// primary metric unless `metric` says otherwise), with an optional target
/// the section's verdict checks.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ratio {
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
    /// median is missing; empty until measured).
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
    ///
    /// [`Report::read_json`]: super::Report::read_json
    #[serde(default)]
    pub outcome: Option<Outcome>,
}

impl Ratio {
    /// `num / den`, reported without a target.
    pub fn of(num: &str, den: &str) -> Self {
        Ratio {
            num: num.to_string(),
            den: den.to_string(),
            target: None,
            at: Vec::new(),
            metric: None,
            values: Vec::new(),
            met: None,
            confidence: None,
            outcome: None,
        }
    }

    /// Claims the ratio is at least `bound`.
    pub fn at_least(mut self, bound: f64) -> Self {
        self.target = Some(Bound::AtLeast(bound));
        self
    }

    /// Claims the ratio is at most `bound`.
    pub fn at_most(mut self, bound: f64) -> Self {
        self.target = Some(Bound::AtMost(bound));
        self
    }

    /// Divides the medians of `metric` instead of the primary metric's (for
    /// a claim about a counted mechanism rather than the headline figure).
    pub fn on_metric(mut self, metric: &str) -> Self {
        self.metric = Some(metric.to_string());
        self
    }

    /// Checks the target only on the case labelled `label`; called again,
    /// on each of the cases named (one column, judged by the worst of
    /// them).
    pub fn at_case(mut self, label: &str) -> Self {
        self.at.push(label.to_string());
        self
    }

    /// The smallest and the largest value over the cases (`0/0` and
    /// missing ones left out); `None` without any.
    pub fn range(&self) -> Option<(f64, f64)> {
        let values = self.values.iter().flatten().filter_map(|q| q.value());
        values.minmax_by(f64::total_cmp).into_option()
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

/// `Ratio::at` in JSON: `null`, one label, or a list (schema 1 wrote `null`
/// or one label; both still read, and are still written that way).
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
