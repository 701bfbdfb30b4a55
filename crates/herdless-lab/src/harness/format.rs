//! How the lab writes numbers: medians with a few significant digits (and
//! `k`/`M`/`G` when large), spreads as a percentage of the median, ratios
//! with a `×`, bounds as `≥ 2.00×`.
//!
//! Every text output (terminal tables, compare, summary, HTML, narrative)
//! formats through here, so a number reads the same everywhere. The JSON
//! keeps the raw values.

use super::quotient::Quotient;
use super::spec::Bound;

/// `value` with `digits` significant digits (no exponent, at most 6
/// decimals; integer digits are never rounded away).
pub fn fmt_sig(value: f64, digits: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i64;
    let decimals = (digits as i64 - 1 - magnitude).clamp(0, 6) as usize;
    format!("{value:.decimals$}")
}

/// A median for a table cell: `digits` significant digits, with a `k`, `M`
/// or `G` suffix from 100 000 up (`254.1k`, `1.042M`).
pub fn fmt_num(value: f64, digits: usize) -> String {
    const SUFFIXES: [(f64, &str); 3] = [(1e9, "G"), (1e6, "M"), (1e3, "k")];
    let large = value.abs() >= 1e5 && value.is_finite();
    match SUFFIXES
        .iter()
        .find(|(scale, _)| large && value.abs() >= *scale)
    {
        Some((scale, suffix)) => format!("{}{suffix}", fmt_sig(value / scale, digits)),
        None => fmt_sig(value, digits),
    }
}

/// A spread next to its median: `±5%` (a percentage of the median; one
/// decimal below 1%), or the absolute spread `±2.2` when the median is 0.
pub fn fmt_spread(median: f64, spread: f64) -> String {
    if median == 0.0 {
        return if spread == 0.0 {
            "±0".to_string()
        } else {
            format!("±{}", fmt_sig(spread, 2))
        };
    }
    let pct = spread / median.abs() * 100.0;
    if pct < 0.05 {
        "±0%".to_string()
    } else if pct < 1.0 {
        format!("±{pct:.1}%")
    } else {
        format!("±{pct:.0}%")
    }
}

/// A ratio with three significant digits and a `×` (`∞×` for x/0).
pub fn fmt_ratio(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "∞×" } else { "−∞×" }.to_string();
    }
    format!("{}×", fmt_sig(value, 3))
}

/// A ratio value: `1.36×`, `∞×` (x/0, x > 0) or `0/0` (both medians 0).
pub fn fmt_quotient(q: Quotient) -> String {
    match q {
        Quotient::Value(v) => fmt_ratio(v),
        Quotient::BothZero => "0/0".to_string(),
    }
}

/// `≥ 10.0×` or `≤ 1.10×`.
pub fn describe_bound(bound: Bound) -> String {
    match bound {
        Bound::AtLeast(b) => format!("≥ {}", fmt_ratio(b)),
        Bound::AtMost(b) => format!("≤ {}", fmt_ratio(b)),
    }
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

    #[test]
    fn large_medians_get_a_suffix() {
        assert_eq!(fmt_num(22411.0, 4), "22411");
        assert_eq!(fmt_num(254082.0, 4), "254.1k");
        assert_eq!(fmt_num(1042488.0, 4), "1.042M");
        assert_eq!(fmt_num(1042488.0, 3), "1.04M");
        assert_eq!(fmt_num(3.2e9, 3), "3.20G");
        assert_eq!(fmt_num(10.52, 4), "10.52");
    }

    #[test]
    fn spreads_are_a_percentage_of_the_median() {
        assert_eq!(fmt_spread(100.0, 5.0), "±5%");
        assert_eq!(fmt_spread(100.0, 0.4), "±0.4%");
        assert_eq!(fmt_spread(100.0, 0.0), "±0%");
        assert_eq!(fmt_spread(10.0, 11.2), "±112%");
        assert_eq!(fmt_spread(0.0, 2.25), "±2.2");
        assert_eq!(fmt_spread(0.0, 0.0), "±0");
    }

    #[test]
    fn ratios_and_quotients() {
        assert_eq!(fmt_ratio(1.357), "1.36×");
        assert_eq!(fmt_quotient(Quotient::Value(f64::INFINITY)), "∞×");
        assert_eq!(fmt_quotient(Quotient::BothZero), "0/0");
        assert_eq!(describe_bound(Bound::AtMost(1.1)), "≤ 1.10×");
    }
}
