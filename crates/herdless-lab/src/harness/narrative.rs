//! The report's paragraph per section, generated from the data: whether the
//! seed's effect reproduced (each ratio target met, missed or undecided,
//! with the value that decides it), the counted metrics that explain it at
//! the deciding case, and how the kernel and the library peers compare.
//!
//! A target left undecided (low confidence: noise alone could turn it,
//! `verdict.rs`) counts neither as met nor as missed, so a section is
//! "reproduced" only when every target is met with confidence.
//!
//! Plain text: the HTML writer escapes it.

use std::fmt::Write as _;

use super::format::{fmt_ratio, fmt_sig};
use super::report::SectionReport;
use super::spec::Role;

/// Whether a section's targets were met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every target met.
    Reproduced,
    /// Some targets met, some missed (others may be undecided).
    Partly,
    /// Every target with data missed.
    NotReproduced,
    /// Some targets undecided, and the others all met or all missed: the
    /// undecided ones could make it either way.
    Undecided,
    /// The section declares no target.
    NoTarget,
    /// Targets, but no value to judge any of them by.
    NoData,
}

impl Outcome {
    /// Judges `s` from its targets' verdicts.
    pub fn of(s: &SectionReport) -> Outcome {
        let n = s.outcome_counts();
        if n.targets() == 0 {
            Outcome::NoTarget
        } else if n.met + n.missed + n.undecided == 0 {
            Outcome::NoData
        } else if n.met > 0 && n.missed > 0 {
            Outcome::Partly
        } else if n.undecided > 0 {
            Outcome::Undecided
        } else if n.missed == 0 {
            Outcome::Reproduced
        } else {
            Outcome::NotReproduced
        }
    }

    /// A short label (`reproduced`, `partly reproduced`, ...).
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Reproduced => "reproduced",
            Outcome::Partly => "partly reproduced",
            Outcome::NotReproduced => "not reproduced",
            Outcome::Undecided => "undecided",
            Outcome::NoTarget => "no target",
            Outcome::NoData => "no data",
        }
    }
}

/// The paragraph for section `s`.
pub fn paragraph(s: &SectionReport) -> String {
    let outcome = Outcome::of(s);
    let n = s.outcome_counts();
    let targets = n.targets();
    // "1 of 2 targets met", and how many are undecided where any are.
    let met = {
        let mut text =
            format!("{} of {targets} target{} met", n.met, if targets == 1 { "" } else { "s" });
        if n.undecided > 0 {
            let _ = write!(
                text,
                ", {} undecided (noise alone could turn {})",
                n.undecided,
                if n.undecided == 1 { "it" } else { "them" }
            );
        }
        text
    };
    let mut out = match outcome {
        Outcome::Reproduced => format!("The seed's effect reproduced: {met}"),
        Outcome::Partly => format!("The seed's effect partly reproduced: {met}"),
        Outcome::NotReproduced => format!("The seed's effect did not reproduce: {met}"),
        Outcome::Undecided => format!("Whether the seed's effect reproduced is undecided: {met}"),
        Outcome::NoTarget => "This table checks no target".to_string(),
        Outcome::NoData => {
            "The targets could not be judged in this run: the cases they name were not measured"
                .to_string()
        }
    };
    let _ = write!(out, " ({}).", s.verdict());
    if let Some(evidence) = evidence(s) {
        out.push(' ');
        out.push_str(&evidence);
    }
    if let Some(peers) = peers(s) {
        out.push(' ');
        out.push_str(&peers);
    }
    let failed =
        s.cases.iter().flat_map(|c| &c.cells).filter(|cell| !cell.errors.is_empty()).count();
    if failed > 0 {
        let _ = write!(out, " {failed} measurement(s) failed; the tables say which.");
    }
    out
}

/// The case the evidence is quoted at: the one deciding the first target
/// with data, else the last case.
fn evidence_case(s: &SectionReport) -> Option<usize> {
    s.ratios
        .iter()
        .find_map(|r| s.deciding(r).map(|(c, _)| c))
        .or_else(|| s.cases.len().checked_sub(1))
}

/// "Counted at readers 16: wasted_per_item (per item, lower is better):
/// wake-all 14.9, wake-one 0.01; ...".
fn evidence(s: &SectionReport) -> Option<String> {
    let case = evidence_case(s)?;
    let mut parts = Vec::new();
    for name in &s.evidence {
        let Some(metric) = s.metrics.iter().find(|m| &m.name == name) else {
            continue;
        };
        let values: Vec<String> = s
            .variants
            .iter()
            .filter_map(|v| {
                let m = s.median(case, &v.name, name)?;
                Some(format!("{} {}", v.name, fmt_sig(m, 3)))
            })
            .collect();
        if !values.is_empty() {
            parts.push(format!("{}: {}", metric.heading(), values.join(", ")));
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "The counted mechanism, at {} {}: {}.",
        s.param,
        s.cases[case].label,
        parts.join("; ")
    ))
}

/// "Against the kernel and the peers: kernel/waiter-count from 1.02× to
/// 1.3×; ...", over the ratios naming a kernel or peer variant.
fn peers(s: &SectionReport) -> Option<String> {
    let role = |name: &str| s.variants.iter().find(|v| v.name == name).map(|v| v.role);
    let outside = |name: &str| matches!(role(name), Some(Role::Kernel | Role::Peer));
    let parts: Vec<String> = s
        .ratios
        .iter()
        .filter(|r| outside(&r.num) || outside(&r.den))
        .filter_map(|r| {
            let (lo, hi) = r.range()?;
            Some(if fmt_ratio(lo) == fmt_ratio(hi) {
                format!("{} {}", r.name(), fmt_ratio(lo))
            } else {
                format!("{} from {} to {}", r.name(), fmt_ratio(lo), fmt_ratio(hi))
            })
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!("Against the kernel and the peers: {}.", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::toy::Toy;

    fn toy(target: f64) -> SectionReport {
        Toy { target, ..Toy::default() }.section()
    }

    #[test]
    fn a_met_target_reads_reproduced_with_the_evidence_at_the_deciding_case() {
        let s = toy(5.0);
        assert_eq!(Outcome::of(&s), Outcome::Reproduced);
        let text = paragraph(&s);
        assert!(
            text.starts_with(
                "The seed's effect reproduced: 1 of 1 target met (old/new ≥ 5.00× at 4: met (10.0× at n 4), high confidence)."
            ),
            "{text}"
        );
        assert!(
            text.contains("at n 4: wasted (per item, lower is better): old 12.0, new 0, kern 0."),
            "{text}"
        );
        assert!(text.contains("Against the kernel and the peers: kern/new 2.00×."), "{text}");
    }

    #[test]
    fn a_missed_target_reads_did_not_reproduce() {
        let s = toy(20.0);
        assert_eq!(Outcome::of(&s), Outcome::NotReproduced);
        assert!(paragraph(&s).starts_with("The seed's effect did not reproduce: 0 of 1 target met"));
    }

    #[test]
    fn a_target_at_the_bound_within_the_spread_reads_undecided() {
        // old/new is 10× at n 4 against ≥ 10, new's spread there ±25%.
        let mut s = toy(10.0);
        s.cases[1].cells[1].metrics.get_mut("t").unwrap().spread = 1.0;
        s.compute_ratios();
        assert_eq!(Outcome::of(&s), Outcome::Undecided);
        assert_eq!(Outcome::Undecided.label(), "undecided");
        let text = paragraph(&s);
        assert!(
            text.starts_with(
                "Whether the seed's effect reproduced is undecided: 0 of 1 target met, 1 undecided \
                 (noise alone could turn it) (old/new ≥ 10.0× at 4: undecided (leans met) (10.0× \
                 at n 4), low confidence: the bound is within the spread)."
            ),
            "{text}"
        );
    }
}
