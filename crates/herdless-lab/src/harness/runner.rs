//! The one runner every experiment goes through: repetitions, interleaving,
//! warm-up, error isolation and aggregation.
//!
//! For each repetition, for each case, every variant runs once, in the same
//! process; the order of the variants rotates by one each repetition so no
//! variant always runs first (after an idle machine) or last (after a
//! thread-heavy one). The first `warmup` repetitions are run and thrown
//! away. A variant that fails on a case records the error and is not run on
//! that case again; the other variants go on.

use super::progress::Progress;
use super::report::{
    CaseReport, Cell, ExperimentReport, MetricInfo, RatioReport, SectionReport, VariantInfo,
};
use super::spec::{Experiment, Metric, Sample, SectionPlan, Suite};
use super::stats::Summary;
use super::LabError;

/// How to run.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Which cases.
    pub suite: Suite,
    /// Repetitions kept.
    pub reps: usize,
    /// Repetitions run first and discarded.
    pub warmup: usize,
    /// Show a progress bar on stderr (only drawn when stderr is a
    /// terminal; see `progress.rs`).
    pub progress: bool,
}

impl RunOptions {
    /// The suite's default repetitions, without a progress bar.
    pub fn new(suite: Suite) -> Self {
        RunOptions {
            suite,
            reps: suite.default_reps(),
            warmup: suite.warmup_reps(),
            progress: false,
        }
    }
}

/// Runs every section of `experiment`.
pub fn run_experiment(
    experiment: &Experiment,
    opts: &RunOptions,
) -> Result<ExperimentReport, LabError> {
    experiment.validate()?;
    let rounds = (opts.warmup + opts.reps) as u64;
    let steps: u64 = experiment
        .sections
        .iter()
        .map(|s| (s.cases(opts.suite).len() * s.variants().len()) as u64 * rounds)
        .sum();
    let bar = Progress::new(experiment.name, steps, opts.progress);
    let sections = experiment
        .sections
        .iter()
        .map(|s| run_section(s.as_ref(), opts, &bar))
        .collect();
    bar.finish();
    Ok(ExperimentReport {
        name: experiment.name.to_string(),
        seed: experiment.seed.to_string(),
        claim: experiment.claim.to_string(),
        mechanism: experiment.mechanism.to_string(),
        sections,
    })
}

fn run_section(plan: &dyn SectionPlan, opts: &RunOptions, bar: &Progress) -> SectionReport {
    let cases = plan.cases(opts.suite);
    let variants = plan.variants();
    let metrics = plan.metrics();
    let (nc, nv) = (cases.len(), variants.len());
    let rounds = opts.warmup + opts.reps;
    let mut kept: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); nv]; nc];
    let mut errors: Vec<Vec<Vec<String>>> = vec![vec![Vec::new(); nv]; nc];

    for rep in 0..rounds {
        for c in 0..nc {
            for k in 0..nv {
                let v = (k + rep) % nv;
                bar.doing(format!(
                    "{} · {} {} · {} · rep {}/{rounds}",
                    plan.title(),
                    plan.param(),
                    cases[c].0,
                    variants[v].0,
                    rep + 1
                ));
                if errors[c][v].is_empty() {
                    let sample = plan
                        .run(opts.suite, c, v)
                        .and_then(|s| check_sample(s, metrics));
                    match sample {
                        Ok(s) if rep >= opts.warmup => kept[c][v].push(s),
                        Ok(_) => {}
                        Err(e) => errors[c][v].push(format!("repetition {}: {e}", rep + 1)),
                    }
                }
                bar.step();
            }
        }
    }

    let cases = cases
        .into_iter()
        .enumerate()
        .map(|(c, (label, params))| CaseReport {
            label,
            params,
            cells: variants
                .iter()
                .enumerate()
                .map(|(v, (name, _))| Cell {
                    variant: name.to_string(),
                    metrics: summarise(&kept[c][v], metrics),
                    errors: std::mem::take(&mut errors[c][v]),
                })
                .collect(),
        })
        .collect();
    let mut report = SectionReport {
        title: plan.title().to_string(),
        param: plan.param().to_string(),
        metrics: metrics
            .iter()
            .map(|m| MetricInfo {
                name: m.name.to_string(),
                unit: m.unit.to_string(),
                lower_is_better: m.lower_is_better,
            })
            .collect(),
        variants: variants
            .iter()
            .map(|(name, role)| VariantInfo {
                name: name.to_string(),
                role: *role,
            })
            .collect(),
        cases,
        ratios: plan
            .ratios()
            .into_iter()
            .map(|r| RatioReport {
                num: r.num.to_string(),
                den: r.den.to_string(),
                target: r.target,
                at: r.at.iter().map(|l| l.to_string()).collect(),
                metric: r.metric.map(str::to_string),
                values: Vec::new(),
                met: None,
            })
            .collect(),
        evidence: plan.evidence().iter().map(|m| m.to_string()).collect(),
    };
    report.compute_ratios();
    report
}

/// A sample must hold the primary metric, only declared metrics, and only
/// finite values (JSON has no NaN).
fn check_sample(sample: Sample, metrics: &[Metric]) -> Result<Sample, LabError> {
    let primary = metrics[0].name;
    if sample.get(primary).is_none() {
        return Err(LabError::Sample(format!(
            "primary metric \"{primary}\" missing"
        )));
    }
    for (name, value) in sample.iter() {
        if !metrics.iter().any(|m| m.name == name) {
            return Err(LabError::Sample(format!("undeclared metric \"{name}\"")));
        }
        if !value.is_finite() {
            return Err(LabError::Sample(format!("{name} = {value}")));
        }
    }
    Ok(sample)
}

fn summarise(
    samples: &[Sample],
    metrics: &[Metric],
) -> std::collections::BTreeMap<String, Summary> {
    metrics
        .iter()
        .filter_map(|m| {
            let values: Vec<f64> = samples.iter().filter_map(|s| s.get(m.name)).collect();
            Summary::of(&values).map(|s| (m.name.to_string(), s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::spec::{Case, PerSuite, Ratio, Role, Section, Variant};
    use std::sync::Mutex;

    fn cases() -> PerSuite<Vec<Case<u32>>> {
        let c = vec![Case::new("1", 1), Case::new("2", 2)];
        PerSuite {
            smoke: c.clone(),
            quick: c.clone(),
            full: c,
        }
    }

    #[test]
    fn variants_interleave_and_rotate_and_warmup_is_dropped() {
        static ORDER: Mutex<Vec<(&str, u32)>> = Mutex::new(Vec::new());
        let variant = |name: &'static str, role, value: f64| {
            Variant::new(name, role, move |c: &Case<u32>| {
                ORDER.lock().unwrap().push((name, c.params));
                Ok(Sample::new().with("t", value * c.params as f64))
            })
        };
        let exp = Experiment::new("toy", "none").section(
            Section::new("toy", "n", cases())
                .metric(Metric::lower("t", "s"))
                .variant(variant("a", Role::Before, 10.0))
                .variant(variant("b", Role::After, 2.0))
                .ratio(Ratio::of("a", "b").at_least(4.0)),
        );
        let opts = RunOptions {
            suite: Suite::Quick,
            reps: 2,
            warmup: 1,
            progress: false,
        };
        let report = run_experiment(&exp, &opts).unwrap();
        let order = ORDER.lock().unwrap().clone();
        assert_eq!(
            order,
            vec![
                ("a", 1),
                ("b", 1),
                ("a", 2),
                ("b", 2), // warm-up
                ("b", 1),
                ("a", 1),
                ("b", 2),
                ("a", 2), // rotated
                ("a", 1),
                ("b", 1),
                ("a", 2),
                ("b", 2),
            ]
        );
        let s = &report.sections[0];
        assert_eq!(s.cases[1].cells[0].metrics["t"].samples, vec![20.0, 20.0]);
        assert_eq!(s.ratios[0].values, vec![Some(5.0), Some(5.0)]);
        assert_eq!(s.ratios[0].met, Some(true));
    }

    #[test]
    fn one_ratio_column_judges_several_named_cases_by_the_worst() {
        // a/b is 5 at case 1 and 2.5 at case 2.
        let exp = Experiment::new("toy", "none").section(
            Section::new("toy", "n", cases())
                .metric(Metric::lower("t", "s"))
                .variant(Variant::new("a", Role::Before, |c: &Case<u32>| {
                    Ok(Sample::new().with("t", if c.params == 1 { 10.0 } else { 5.0 }))
                }))
                .variant(Variant::new("b", Role::After, |_: &Case<u32>| {
                    Ok(Sample::new().with("t", 2.0))
                }))
                .ratio(Ratio::of("a", "b").at_least(4.0).at_case("1").at_case("2"))
                .ratio(Ratio::of("a", "b").at_least(4.0).at_case("1")),
        );
        let report = run_experiment(&exp, &RunOptions::new(Suite::Smoke)).unwrap();
        let s = &report.sections[0];
        assert_eq!(s.ratios[0].at, ["1", "2"]);
        assert_eq!(s.ratios[0].met, Some(false), "2.5 at case 2 decides");
        assert_eq!(s.ratios[1].met, Some(true));
        assert!(s.verdict().contains("at 1, 2: MISSED (worst 2.50×"));
        // JSON: a list for several cases, a plain label for one (as schema 1
        // always wrote), and both read back.
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(json["ratios"][0]["at"], serde_json::json!(["1", "2"]));
        assert_eq!(json["ratios"][1]["at"], serde_json::json!("1"));
        let back: crate::harness::report::SectionReport = serde_json::from_value(json).unwrap();
        assert_eq!(back.ratios[0].at, ["1", "2"]);
        assert_eq!(back.ratios[1].at, ["1"]);
    }

    #[test]
    fn a_failing_variant_is_recorded_and_not_rerun_and_others_go_on() {
        static CALLS: Mutex<usize> = Mutex::new(0);
        let exp = Experiment::new("toy", "none").section(
            Section::new("toy", "n", cases())
                .metric(Metric::lower("t", "s"))
                .variant(Variant::new("bad", Role::Before, |_: &Case<u32>| {
                    *CALLS.lock().unwrap() += 1;
                    Err(LabError::Sample("boom".into()))
                }))
                .variant(Variant::new("good", Role::After, |_: &Case<u32>| {
                    Ok(Sample::new().with("t", 1.0))
                })),
        );
        let report = run_experiment(&exp, &RunOptions::new(Suite::Quick)).unwrap();
        assert_eq!(*CALLS.lock().unwrap(), 2, "once per case");
        let row = &report.sections[0].cases[0];
        assert_eq!(row.cells[0].errors.len(), 1);
        assert!(row.cells[0].metrics.is_empty());
        assert_eq!(
            row.cells[1].metrics["t"].samples.len(),
            Suite::Quick.default_reps()
        );
        assert_eq!(report.sections[0].ratios[0].values, vec![None, None]);
    }

    #[test]
    fn samples_must_hold_the_primary_metric_and_only_declared_ones() {
        let metrics = [Metric::lower("t", "s"), Metric::lower("u", "s")];
        assert!(check_sample(Sample::new().with("t", 1.0), &metrics).is_ok());
        assert!(check_sample(Sample::new().with("u", 1.0), &metrics).is_err());
        assert!(check_sample(Sample::new().with("t", 1.0).with("x", 1.0), &metrics).is_err());
        assert!(check_sample(Sample::new().with("t", f64::NAN), &metrics).is_err());
    }

    #[test]
    fn a_ratio_naming_an_unknown_variant_is_a_definition_error() {
        let exp = Experiment::new("toy", "none").section(
            Section::new("toy", "n", cases())
                .metric(Metric::lower("t", "s"))
                .variant(Variant::new("a", Role::After, |_: &Case<u32>| {
                    Ok(Sample::new().with("t", 1.0))
                }))
                .ratio(Ratio::of("a", "nope")),
        );
        let err = run_experiment(&exp, &RunOptions::new(Suite::Smoke)).unwrap_err();
        assert!(matches!(err, LabError::Definition(_)), "{err}");
    }
}
