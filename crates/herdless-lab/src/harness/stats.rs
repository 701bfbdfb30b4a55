//! Summary statistics of the repetitions of one (case, variant, metric):
//! median and spread.
//!
//! The spread is half the interquartile range (p75 − p25) / 2 when there are
//! at least [`MIN_FOR_IQR`] samples, and half the range (max − min) / 2 below
//! that, where quartiles mean little. Quantiles interpolate linearly between
//! order statistics (the "type 7" definition of R and NumPy).

use serde::{Deserialize, Serialize};

/// Fewest samples for which the spread is the half-IQR.
pub const MIN_FOR_IQR: usize = 4;

/// How a [`Summary`]'s spread was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpreadKind {
    /// (p75 − p25) / 2.
    HalfIqr,
    /// (max − min) / 2, with fewer than [`MIN_FOR_IQR`] samples.
    HalfRange,
}

impl SpreadKind {
    /// The spread for `n` samples.
    pub fn for_samples(n: usize) -> Self {
        if n >= MIN_FOR_IQR {
            SpreadKind::HalfIqr
        } else {
            SpreadKind::HalfRange
        }
    }

    /// How a table header names it.
    pub fn describe(self) -> &'static str {
        match self {
            SpreadKind::HalfIqr => "± half IQR",
            SpreadKind::HalfRange => "± half range (max−min)/2",
        }
    }
}

/// Median and spread of a set of samples, with the samples themselves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Every kept repetition, in the order measured.
    pub samples: Vec<f64>,
    /// The median.
    pub median: f64,
    /// The 25th percentile.
    pub p25: f64,
    /// The 75th percentile.
    pub p75: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// Half-IQR or half-range, see `spread_kind`.
    pub spread: f64,
    /// How `spread` was computed.
    pub spread_kind: SpreadKind,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let (p25, median, p75) =
            (quantile(&sorted, 0.25), quantile(&sorted, 0.5), quantile(&sorted, 0.75));
        let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
        let spread_kind = SpreadKind::for_samples(sorted.len());
        let spread = match spread_kind {
            SpreadKind::HalfIqr => (p75 - p25) / 2.0,
            SpreadKind::HalfRange => (max - min) / 2.0,
        };
        Some(Summary { samples: samples.to_vec(), median, p25, p75, min, max, spread, spread_kind })
    }
}

/// The `q`-quantile (0 ≤ q ≤ 1) of ascending, non-empty `sorted`.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty() && (0.0..=1.0).contains(&q));
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn median(samples: &[f64]) -> Option<f64> {
        Summary::of(samples).map(|s| s.median)
    }

    #[test]
    fn median_of_odd_count_is_middle_value() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
    }

    #[test]
    fn median_of_even_count_is_mean_of_middle_pair() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn median_of_nothing_is_none() {
        assert_eq!(median(&[]), None);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn single_sample_has_zero_spread() {
        let s = Summary::of(&[7.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.spread), (7.0, 7.0, 7.0, 0.0));
        assert_eq!(s.spread_kind, SpreadKind::HalfRange);
    }

    #[test]
    fn fewer_than_four_samples_use_half_range() {
        let s = Summary::of(&[1.0, 10.0, 4.0]).unwrap();
        assert_eq!(s.spread_kind, SpreadKind::HalfRange);
        assert_eq!(s.spread, 4.5);
        assert_eq!(s.median, 4.0);
    }

    #[test]
    fn four_or_more_samples_use_half_iqr() {
        // sorted 1..=9: p25 = 3, p75 = 7 (type 7), half IQR = 2.
        let s = Summary::of(&[9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.spread_kind, SpreadKind::HalfIqr);
        assert_eq!((s.p25, s.median, s.p75), (3.0, 5.0, 7.0));
        assert_eq!(s.spread, 2.0);
        assert_eq!((s.min, s.max), (1.0, 9.0));
    }

    #[test]
    fn quartiles_interpolate_between_order_statistics() {
        // sorted [1, 2, 3, 4]: p25 at position 0.75 → 1.75; p75 at 2.25 → 3.25.
        let s = Summary::of(&[4.0, 3.0, 2.0, 1.0]).unwrap();
        assert_eq!((s.p25, s.p75, s.spread), (1.75, 3.25, 0.75));
    }

    #[test]
    fn an_outlier_moves_the_median_less_than_the_mean() {
        let s = Summary::of(&[10.0, 11.0, 10.5, 10.2, 1000.0]).unwrap();
        assert_eq!(s.median, 10.5);
        assert!(s.spread < 1.0, "half IQR ignores the outlier: {}", s.spread);
    }

    #[test]
    fn samples_are_kept_in_measured_order() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(s.samples, vec![3.0, 1.0, 2.0]);
    }
}
