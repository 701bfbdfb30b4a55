//! The text of the tuning variables (`HERDLESS_MUTEX_TUNING`,
//! `HERDLESS_RWSEM_TUNING`): `name=value` pairs separated by commas, each
//! value a `u32`. Used by experiments to try a setting without rebuilding.

/// The `(name, value)` pairs of `text`, trimmed, in order; a pair without
/// `=` or with a value that is not a `u32` is skipped (a tuning variable
/// never stops a program).
pub(crate) fn pairs(text: &str) -> impl Iterator<Item = (&str, u32)> {
    text.split(',').filter_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        Some((name.trim(), value.trim().parse().ok()?))
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_trimmed_and_malformed_ones_skipped() {
        let got: Vec<_> = pairs(" a=1, b = 2 ,c,d=x,e=-1,f=3").collect();
        assert_eq!(got, [("a", 1), ("b", 2), ("f", 3)]);
    }
}
