//! What a target's verdict says, as the results store it: met, missed or
//! undecided ([`Outcome`]), how far it can be trusted ([`Confidence`]), and
//! how many targets came out each way ([`OutcomeCounts`]). How a verdict is
//! reached is `verdict.rs`'s job.

use serde::{Deserialize, Serialize};

/// How far a verdict can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Noise alone could turn the verdict.
    Low,
    /// Clear of the bound by the spread, not by twice the spread, or
    /// measured on a disturbed machine.
    Medium,
    /// Clear of the bound by twice the spread, on a quiet machine.
    High,
}

impl Confidence {
    /// `high`, `medium` or `low`.
    pub fn label(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

/// What a verdict decides: met or missed, or nothing (see `verdict.rs`,
/// "The outcome"). In JSON: `"met"`, `"missed"` or `"undecided"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The target holds, clear of the bound by at least the spread.
    Met,
    /// The target does not hold, clear of the bound by at least the
    /// spread.
    Missed,
    /// Low confidence: noise alone could turn the verdict.
    Undecided,
}

impl Outcome {
    /// The outcome of a verdict on the `met` side of the bound (or the
    /// missed side) with `confidence`.
    pub fn of(met: bool, confidence: Confidence) -> Outcome {
        match (confidence, met) {
            (Confidence::Low, _) => Outcome::Undecided,
            (_, true) => Outcome::Met,
            (_, false) => Outcome::Missed,
        }
    }

    /// How the text outputs write a verdict: `met`, `MISSED` (capitals, to
    /// be found at a glance), or `undecided (leans met)` / `undecided
    /// (leans missed)` with `met` the side of the bound the median lies on.
    pub fn label(self, met: bool) -> &'static str {
        match (self, met) {
            (Outcome::Met, _) => "met",
            (Outcome::Missed, _) => "MISSED",
            (Outcome::Undecided, true) => "undecided (leans met)",
            (Outcome::Undecided, false) => "undecided (leans missed)",
        }
    }
}

/// How many targets came out each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    /// Met, decided.
    pub met: usize,
    /// Missed, decided.
    pub missed: usize,
    /// Undecided, whichever way they lean.
    pub undecided: usize,
    /// Without a value to judge by (no data, or only `0/0`).
    pub not_judged: usize,
}

impl OutcomeCounts {
    /// Counts one target's outcome (`None`: not judged).
    pub fn add(&mut self, outcome: Option<Outcome>) {
        *match outcome {
            Some(Outcome::Met) => &mut self.met,
            Some(Outcome::Missed) => &mut self.missed,
            Some(Outcome::Undecided) => &mut self.undecided,
            None => &mut self.not_judged,
        } += 1;
    }

    /// Every target counted.
    pub fn targets(&self) -> usize {
        self.met + self.missed + self.undecided + self.not_judged
    }
}
