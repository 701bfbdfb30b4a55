//! The one runner every experiment goes through: repetitions, interleaving,
//! warm-up, error isolation, re-measuring noisy rows and aggregation (the
//! lab README's "Reading the output" and "Re-measuring" say what a user
//! sees).
//!
//! Each repetition runs every case on every variant, the variants' order
//! rotating by one per repetition (no variant always first or last); the
//! first `warmup` repetitions are thrown away. A variant that fails on a
//! case is not run on it again; the others go on. Between measurements the
//! runner reads the CPU time counters ([`disturbance`](super::disturbance)),
//! so each row knows how much of the machine others took.
//!
//! Before a table is judged, a row is measured again, whole and
//! interleaved, up to [`RunOptions::retries`] times within
//! [`RunOptions::retry_budget`] times the table's first pass, when a
//! target's verdict there is not of high confidence and a judged cell is
//! wider than [`RunOptions::wide_spread`] (or the row was disturbed), or
//! when an undecided target's bound lies within the row's spread
//! ([`verdict`](super::verdict)). The attempt kept is chosen by quality
//! alone, never by values: undisturbed first, then the narrowest.

use std::time::Instant;

use super::disturbance::{CpuTimes, Tally};
use super::format::fmt_ratio;
use super::outcome::{Confidence, Outcome};
use super::progress::Progress;
use super::report::{CaseReport, Cell, ExperimentReport, SectionReport};
use super::spec::{Bound, Experiment, Metric, Ratio, Sample, SectionPlan, Suite};
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
    /// How many more times a noisy row may be measured (0: never).
    pub retries: usize,
    /// The spread, as a share of the median, beyond which a judged cell is
    /// too wide to judge by.
    pub wide_spread: f64,
    /// How long a table's re-measurements may take in all, as a multiple
    /// of its first pass.
    pub retry_budget: f64,
}

impl RunOptions {
    /// The suite's default repetitions, up to two re-measurements of a row
    /// whose judged spread exceeds 10% (none in the smoke suite), without
    /// a progress bar.
    pub fn new(suite: Suite) -> Self {
        RunOptions {
            suite,
            reps: suite.default_reps(),
            warmup: suite.warmup_reps(),
            progress: false,
            retries: match suite {
                Suite::Smoke => 0,
                Suite::Quick | Suite::Full => 2,
            },
            wide_spread: 0.10,
            retry_budget: 1.0,
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
        .map(|s| (s.cases.get(opts.suite).len() * s.variants.len()) as u64 * rounds)
        .sum();
    let bar = Progress::new(experiment.name, steps, opts.progress);
    let sections = experiment
        .sections
        .iter()
        .map(|s| run_section(s, opts, &bar))
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

/// One row's measurements: per variant the kept samples, the errors, or
/// why it cannot run here, and the CPU time the machine spent while they
/// ran.
#[derive(Clone, Debug)]
struct Row {
    samples: Vec<Vec<Sample>>,
    errors: Vec<Vec<String>>,
    skipped: Vec<Option<String>>,
    tally: Tally,
}

impl Row {
    fn new(variants: usize) -> Row {
        Row {
            samples: vec![Vec::new(); variants],
            errors: vec![Vec::new(); variants],
            skipped: vec![None; variants],
            tally: Tally::default(),
        }
    }

    fn failed(&self) -> usize {
        self.errors.iter().filter(|e| !e.is_empty()).count()
    }
}

/// Runs measurements and attributes the machine's CPU time between them to
/// the row measured.
struct Measurer<'a> {
    plan: &'a SectionPlan,
    opts: &'a RunOptions,
    bar: &'a Progress,
    last: Option<CpuTimes>,
}

impl Measurer<'_> {
    /// Measures case `c` with variant `v` once (repetition `rep` of
    /// `rounds`) into `row`, unless that variant already failed there.
    fn once(&mut self, row: &mut Row, c: usize, v: usize, rep: usize, rounds: usize, label: &str) {
        self.bar.doing(format!(
            "{} · {} {} · {} · rep {}/{rounds}",
            self.plan.title,
            self.plan.param,
            label,
            self.plan.variants[v].name,
            rep + 1
        ));
        if row.errors[v].is_empty() && row.skipped[v].is_none() {
            let sample = self
                .plan
                .run(self.opts.suite, c, v)
                .and_then(|s| check_sample(s, &self.plan.metrics));
            match sample {
                Ok(s) if rep >= self.opts.warmup => row.samples[v].push(s),
                Ok(_) => {}
                Err(LabError::Unavailable(why)) => row.skipped[v] = Some(why),
                Err(e) => row.errors[v].push(format!("repetition {}: {e}", rep + 1)),
            }
        }
        let now = CpuTimes::now();
        if let (Some(before), Some(after)) = (&self.last, &now) {
            row.tally.add(before, after);
        }
        self.last = now;
        self.bar.step();
    }
}

fn run_section(plan: &SectionPlan, opts: &RunOptions, bar: &Progress) -> SectionReport {
    let cases = plan.cases.get(opts.suite);
    let nv = plan.variants.len();
    let rounds = opts.warmup + opts.reps;
    let mut rows: Vec<Row> = cases.iter().map(|_| Row::new(nv)).collect();
    let mut m = Measurer {
        plan,
        opts,
        bar,
        last: CpuTimes::now(),
    };
    let started = Instant::now();
    for rep in 0..rounds {
        for (c, row) in rows.iter_mut().enumerate() {
            for k in 0..nv {
                m.once(row, c, (k + rep) % nv, rep, rounds, &cases[c].0);
            }
        }
    }
    let mut section_tally = Tally::default();
    for row in &rows {
        section_tally.merge(&row.tally);
    }
    let mut report = SectionReport {
        title: plan.title.to_string(),
        param: plan.param.to_string(),
        metrics: plan.metrics.clone(),
        variants: plan.variants.clone(),
        cases: rows
            .iter()
            .zip(cases)
            .map(|(row, (label, params))| case_report(plan, label, params, row))
            .collect(),
        ratios: plan.ratios.clone(),
        evidence: plan.evidence.iter().map(|m| m.to_string()).collect(),
        disturbance: section_tally.disturbance(),
    };
    report.compute_ratios();

    let budget = started.elapsed().as_secs_f64() * opts.retry_budget;
    let retrying = Instant::now();
    for c in (0..cases.len()).filter(|_| opts.retries > 0) {
        let Some(reason) = needs_remeasure(&report, c, opts.wide_spread) else {
            continue;
        };
        let mut kept = quality(&report, c);
        let mut attempts = 1;
        while attempts <= opts.retries && retrying.elapsed().as_secs_f64() < budget {
            attempts += 1;
            bar.more((rounds * nv) as u64);
            let mut row = Row::new(nv);
            row.errors.clone_from(&rows[c].errors);
            row.skipped.clone_from(&rows[c].skipped);
            for rep in 0..rounds {
                for k in 0..nv {
                    m.once(&mut row, c, (k + rep) % nv, rep, rounds, &cases[c].0);
                }
            }
            if row.failed() > rows[c].failed() {
                continue; // a variant failed this time: keep what we had
            }
            let mut candidate = report.clone();
            candidate.cases[c] = case_report(plan, &cases[c].0, &cases[c].1, &row);
            candidate.compute_ratios();
            let q = quality(&candidate, c);
            if q < kept {
                kept = q;
                rows[c] = row;
                report = candidate;
            }
            if needs_remeasure(&report, c, opts.wide_spread).is_none() {
                break;
            }
        }
        if attempts > 1 {
            report.cases[c].attempts = attempts as u32;
            report.cases[c].remeasured_for = Some(reason);
        }
    }
    report
}

/// Why row `c` should be measured again before it is judged, if it
/// should: a target judged there without high confidence, and a judged
/// cell wider than `wide` of its median or a disturbed machine; or an
/// undecided target whose bound lies within the row's spread.
fn needs_remeasure(s: &SectionReport, c: usize, wide: f64) -> Option<String> {
    let unsure = s
        .ratios
        .iter()
        .filter(|r| matches!(s.case_confidence(r, c), Some((conf, _)) if conf < Confidence::High));
    for r in unsure {
        if let Some((variant, metric, spread)) = widest(s, c, std::slice::from_ref(r)) {
            if spread > wide {
                return Some(format!(
                    "{variant} {metric} spread {} > {:.0}%",
                    pct(spread),
                    wide * 100.0
                ));
            }
        }
        if let Some(Bound::AtLeast(bound) | Bound::AtMost(bound)) = undecided_at(s, r, c) {
            return Some(format!(
                "undecided: the bound {} is within the spread",
                fmt_ratio(bound)
            ));
        }
        if let Some(d) = s.cases[c].disturbance.filter(|d| d.is_disturbed()) {
            return Some(format!("disturbed: {}", d.describe()));
        }
    }
    None
}

/// `r`'s bound, if its target is undecided and the bound lies within row
/// `c`'s spread: another attempt at the row may decide it.
fn undecided_at(s: &SectionReport, r: &Ratio, c: usize) -> Option<Bound> {
    let undecided = s.judge(r)?.outcome() == Outcome::Undecided;
    (undecided && s.bound_within_spread(r, c)).then_some(r.target?)
}

/// The widest relative spread among the cells `ratios` judge on row `c`:
/// `(variant, metric, spread / median)`; a spread over a zero median is
/// infinitely wide.
fn widest(s: &SectionReport, c: usize, ratios: &[Ratio]) -> Option<(String, String, f64)> {
    ratios
        .iter()
        .filter(|r| r.target.is_some() && r.applies_to(&s.cases[c].label))
        .flat_map(|r| {
            let metric = s.ratio_metric(r).to_string();
            [r.num.clone(), r.den.clone()].map(|v| (v, metric.clone()))
        })
        .filter_map(|(variant, metric)| {
            let sum = s.summary(c, &variant, &metric)?;
            let rel = match (sum.spread == 0.0, sum.median == 0.0) {
                (true, _) => 0.0,
                (false, true) => f64::INFINITY,
                (false, false) => sum.spread / sum.median.abs(),
            };
            Some((variant, metric, rel))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2))
}

/// How good row `c`'s measurement is, smaller better, from its conditions
/// and spreads only (never its values): disturbed or not, then the widest
/// judged spread.
fn quality(s: &SectionReport, c: usize) -> (bool, f64) {
    let disturbed = s.cases[c].disturbance.is_some_and(|d| d.is_disturbed());
    let spread = widest(s, c, &s.ratios).map_or(0.0, |w| w.2);
    (disturbed, spread)
}

fn pct(share: f64) -> String {
    if share.is_finite() {
        format!("{:.0}%", share * 100.0)
    } else {
        "over a zero median".to_string()
    }
}

fn case_report(
    plan: &SectionPlan,
    label: &str,
    params: &serde_json::Value,
    row: &Row,
) -> CaseReport {
    CaseReport {
        label: label.to_string(),
        params: params.clone(),
        cells: plan
            .variants
            .iter()
            .enumerate()
            .map(|(v, variant)| Cell {
                variant: variant.name.clone(),
                metrics: summarise(&row.samples[v], &plan.metrics),
                errors: row.errors[v].clone(),
                skipped: row.skipped[v].clone(),
            })
            .collect(),
        attempts: 1,
        remeasured_for: None,
        disturbance: row.tally.disturbance(),
    }
}

/// A sample must hold the primary metric, only declared metrics, and only
/// finite values (JSON has no NaN).
fn check_sample(sample: Sample, metrics: &[Metric]) -> Result<Sample, LabError> {
    let primary = &metrics[0].name;
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
            let values: Vec<f64> = samples.iter().filter_map(|s| s.get(&m.name)).collect();
            Summary::of(&values).map(|s| (m.name.clone(), s))
        })
        .collect()
}

#[cfg(test)]
mod tests;
