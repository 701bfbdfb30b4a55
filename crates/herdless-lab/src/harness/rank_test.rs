//! Whether two sets of repetitions differ by more than chance: the
//! Mann-Whitney rank-sum test, exact (the permutation distribution of the
//! rank sum, ties given mid-ranks), two-sided.
//!
//! `compare` asks it before calling a cell faster or slower, so that two
//! runs of the same code do not disagree on noise alone. It needs no
//! assumption about the shape of the noise (timings are skewed, with
//! outliers), only that repetitions are exchangeable.

/// The two-sided p-value of "`a` and `b` come from the same distribution":
/// the probability, over every way of splitting the pooled samples into
/// groups of `a.len()` and `b.len()`, of a rank sum at least as far from
/// its mean as the one observed. 1 when either set is empty.
pub fn p_value(a: &[f64], b: &[f64]) -> f64 {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return 1.0;
    }
    // Doubled mid-ranks of the pooled samples (integers even with ties).
    let mut pooled: Vec<(f64, bool)> =
        a.iter().map(|&x| (x, true)).chain(b.iter().map(|&x| (x, false))).collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total = m + n;
    let mut ranks2 = vec![0usize; total];
    let mut i = 0;
    while i < total {
        let mut j = i;
        while j + 1 < total && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        // Positions i..=j (1-based i+1..=j+1) share the mean rank; doubled:
        // (i + 1) + (j + 1).
        for r in &mut ranks2[i..=j] {
            *r = i + j + 2;
        }
        i = j + 1;
    }
    let observed: usize = (0..total).filter(|&k| pooled[k].1).map(|k| ranks2[k]).sum();
    // counts[c][s]: ways to choose c of the items seen so far with doubled
    // rank sum s.
    let max_sum: usize = ranks2.iter().sum();
    let mut counts = vec![vec![0f64; max_sum + 1]; m + 1];
    counts[0][0] = 1.0;
    for &r in &ranks2 {
        for c in (1..=m).rev() {
            let (lower, upper) = counts.split_at_mut(c);
            for s in (r..=max_sum).rev() {
                upper[0][s] += lower[c - 1][s - r];
            }
        }
    }
    // Mean of the doubled rank sum: m × (N + 1).
    let mean = (m * (total + 1)) as f64;
    let distance = (observed as f64 - mean).abs();
    let all: f64 = counts[m].iter().sum();
    let extreme: f64 = counts[m]
        .iter()
        .enumerate()
        .filter(|(s, _)| (*s as f64 - mean).abs() >= distance - 1e-9)
        .map(|(_, c)| c)
        .sum();
    (extreme / all).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_separation_of_five_and_five_is_two_in_252() {
        let p = p_value(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        // Order within the groups does not matter, direction does not.
        let q = p_value(&[10.0, 7.0, 9.0, 6.0, 8.0], &[3.0, 1.0, 5.0, 2.0, 4.0]);
        assert!((p - q).abs() < 1e-12);
    }

    #[test]
    fn interleaved_samples_are_no_evidence_of_a_difference() {
        let p = p_value(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!(p > 0.5, "{p}");
    }

    #[test]
    fn identical_constant_samples_tie_completely() {
        assert_eq!(p_value(&[2.0; 7], &[2.0; 7]), 1.0);
        // Two constant groups, different values: as separated as can be.
        let p = p_value(&[1.0; 7], &[2.0; 7]);
        assert!((p - 2.0 / 3432.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn two_samples_each_can_never_be_significant() {
        assert!(p_value(&[1.0, 2.0], &[10.0, 20.0]) > 0.3);
        assert_eq!(p_value(&[], &[1.0]), 1.0);
    }
}
