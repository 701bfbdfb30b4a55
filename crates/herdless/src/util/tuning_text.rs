//! The text of the tuning variables (`HERDLESS_MUTEX_TUNING`,
//! `HERDLESS_RWSEM_TUNING`): `name=value` pairs separated by commas, each
//! value a `u32`, applied over the defaults for the machine's CPU count.
//! Used by experiments to try a setting without rebuilding.

/// The `(name, value)` pairs of `text`, trimmed, in order; a pair without
/// `=` or with a value that is not a `u32` is skipped (a tuning variable
/// never stops a program).
pub(crate) fn pairs(text: &str) -> impl Iterator<Item = (&str, u32)> {
    text.split(',').filter_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        Some((name.trim(), value.trim().parse().ok()?))
    })
}

/// The settings a process runs with: `defaults` for this machine's CPU
/// count, with the text of the variable `var` applied by `apply` where it
/// is set (read once by each setting's `OnceLock`).
pub(crate) fn from_env<T>(
    var: &str,
    defaults: impl FnOnce(usize) -> T,
    apply: impl FnOnce(&mut T, &str),
) -> T {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut settings = defaults(cpus);
    if let Ok(text) = std::env::var(var) {
        apply(&mut settings, &text);
    }
    settings
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
