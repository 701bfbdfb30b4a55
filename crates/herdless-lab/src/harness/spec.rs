//! What an experiment is, as data: sections (one table each), their cases per
//! suite, metrics, variants and the ratios to report.
//!
//! An experiment never times, repeats, aggregates or prints anything itself:
//! each [`Variant`] measures one [`Case`] once and returns a [`Sample`]; the
//! runner (`runner.rs`) does the rest, the same way for every experiment.

use std::collections::BTreeMap;
use std::sync::Arc;

use itertools::Itertools;
use serde::{Deserialize, Serialize};

pub use super::ratio::{Bound, Ratio};
use super::LabError;

/// How much work a run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// Tiny parameters, one or two repetitions: checks that the lab runs.
    Smoke,
    /// The default: the seed's parameters scaled to the machine.
    Quick,
    /// The quick parameters (or larger), with more repetitions.
    Full,
}

impl Suite {
    /// Repetitions kept for the statistics unless `--reps` says otherwise.
    pub fn default_reps(self) -> usize {
        match self {
            Suite::Smoke => 2,
            Suite::Quick => 7,
            Suite::Full => 21,
        }
    }

    /// Repetitions run first and thrown away (caches, thread stacks, lazy
    /// tables).
    pub fn warmup_reps(self) -> usize {
        match self {
            Suite::Smoke => 0,
            Suite::Quick | Suite::Full => 1,
        }
    }

    /// The suite's name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Smoke => "smoke",
            Suite::Quick => "quick",
            Suite::Full => "full",
        }
    }
}

/// One value per suite.
#[derive(Clone, Debug)]
pub struct PerSuite<T> {
    /// For `--smoke`.
    pub smoke: T,
    /// For `--quick` (the default).
    pub quick: T,
    /// For `--full`.
    pub full: T,
}

impl<T> PerSuite<T> {
    /// The value for `suite`.
    pub fn get(&self, suite: Suite) -> &T {
        match suite {
            Suite::Smoke => &self.smoke,
            Suite::Quick => &self.quick,
            Suite::Full => &self.full,
        }
    }
}

/// What a variant stands for in the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// herdless with the seed's change off.
    Before,
    /// herdless with the seed's change on.
    After,
    /// The kernel's own mechanism, driven from user space.
    Kernel,
    /// The best library doing the same job.
    Peer,
}

/// A measured quantity of a section, as its declaration and the report
/// name it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Metric {
    /// Key in every [`Sample`] (e.g. `"per_wake_us"`).
    pub name: String,
    /// Unit shown in the table header (e.g. `"µs"`).
    pub unit: String,
    /// Whether smaller values are better (times) or larger (throughputs).
    pub lower_is_better: bool,
}

impl Metric {
    /// A metric where smaller is better.
    pub fn lower(name: &str, unit: &str) -> Self {
        Metric {
            name: name.to_string(),
            unit: unit.to_string(),
            lower_is_better: true,
        }
    }

    /// A metric where larger is better.
    pub fn higher(name: &str, unit: &str) -> Self {
        Metric {
            lower_is_better: false,
            ..Metric::lower(name, unit)
        }
    }

    /// `time_ms (ms, lower is better)`: how every output names a metric.
    pub fn heading(&self) -> String {
        let better = if self.lower_is_better {
            "lower"
        } else {
            "higher"
        };
        format!("{} ({}, {better} is better)", self.name, self.unit)
    }
}

/// One row of a section's table: a label and the parameters a variant needs.
#[derive(Clone, Debug)]
pub struct Case<P> {
    /// Row label (e.g. `"64"`, `"2 shared"`).
    pub label: String,
    /// Parameters handed to each variant; serialised into the JSON report.
    pub params: P,
}

impl<P> Case<P> {
    /// A case labelled `label`.
    pub fn new(label: impl Into<String>, params: P) -> Self {
        Case {
            label: label.into(),
            params,
        }
    }

    /// One case per value of `values`, labelled by the value (`"8"`), with
    /// the parameters `params` makes of it.
    pub fn each<T: Copy + std::fmt::Display>(values: &[T], params: impl Fn(T) -> P) -> Vec<Self> {
        Case::list(values, |v| (v.to_string(), params(v)))
    }

    /// One case per row of `rows`, with the label and parameters `case`
    /// makes of it.
    pub fn list<T: Copy>(rows: &[T], case: impl Fn(T) -> (String, P)) -> Vec<Self> {
        let case = |&row| {
            let (label, params) = case(row);
            Case::new(label, params)
        };
        rows.iter().map(case).collect()
    }
}

/// One repetition of one variant on one case: metric name → value.
///
/// A sample must hold the section's primary metric and may hold any of its
/// other metrics (a peer may lack a counter herdless has).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample(BTreeMap<&'static str, f64>);

impl Sample {
    /// An empty sample.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `metric = value`.
    pub fn with(mut self, metric: &'static str, value: f64) -> Self {
        self.0.insert(metric, value);
        self
    }

    /// The value of `metric`, if measured.
    pub fn get(&self, metric: &str) -> Option<f64> {
        self.0.get(metric).copied()
    }

    /// All `(metric, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.0.iter().map(|(k, v)| (*k, *v))
    }
}

/// Measures one case once.
pub type RunFn<P> = Box<dyn Fn(&Case<P>) -> Result<Sample, LabError> + Send + Sync>;

/// One column of a section's table: an implementation under test.
pub struct Variant<P> {
    /// Column label and JSON key (e.g. `"waiter-count"`).
    pub name: &'static str,
    /// What it stands for.
    pub role: Role,
    /// Measures one case once.
    pub run: RunFn<P>,
}

impl<P> Variant<P> {
    /// A variant that measures a case with `run`.
    pub fn new(
        name: &'static str,
        role: Role,
        run: impl Fn(&Case<P>) -> Result<Sample, LabError> + Send + Sync + 'static,
    ) -> Self {
        Variant {
            name,
            role,
            run: Box::new(run),
        }
    }
}

/// A variant's name and role: how a section declares a column.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantInfo {
    /// Column name.
    pub name: String,
    /// Before, after, kernel or peer.
    pub role: Role,
}

/// Measures case `c` of `suite` once: a variant, its cases' type erased.
type ErasedRun = Box<dyn Fn(Suite, usize) -> Result<Sample, LabError> + Send + Sync>;

/// One table: a workload swept over one parameter, for several variants.
/// Built with typed cases and variants; an experiment holds its
/// [`SectionPlan`].
pub struct Section<P> {
    plan: SectionPlan,
    cases: Arc<PerSuite<Vec<Case<P>>>>,
}

/// A section with its case parameters erased, so that one experiment can
/// hold sections with different case parameters: what the runner runs.
pub struct SectionPlan {
    /// Table title (e.g. `"wake one at a time"`).
    pub title: &'static str,
    /// What the rows vary (e.g. `"threads"`).
    pub param: &'static str,
    /// `(label, parameters as JSON)` of every case, per suite.
    pub cases: PerSuite<Vec<(String, serde_json::Value)>>,
    /// Measured quantities; the first is the primary one (ratios, plots).
    pub metrics: Vec<Metric>,
    /// The columns, in display order.
    pub variants: Vec<VariantInfo>,
    /// Ratio columns: those declared, or after/before, then kernel/after
    /// and peer/after.
    pub ratios: Vec<Ratio>,
    /// The counted metrics that explain the result (e.g. wasted wakeups per
    /// item): the report's paragraph quotes them at the deciding case.
    pub evidence: Vec<&'static str>,
    runs: Vec<ErasedRun>,
}

impl<P: Serialize + Send + Sync + 'static> Section<P> {
    /// A section with no metrics, variants or ratios yet.
    pub fn new(title: &'static str, param: &'static str, cases: PerSuite<Vec<Case<P>>>) -> Self {
        let erase = |cases: &[Case<P>]| {
            let json = |p| serde_json::to_value(p).unwrap_or(serde_json::Value::Null);
            cases
                .iter()
                .map(|c| (c.label.clone(), json(&c.params)))
                .collect()
        };
        let plan = SectionPlan {
            title,
            param,
            cases: PerSuite {
                smoke: erase(&cases.smoke),
                quick: erase(&cases.quick),
                full: erase(&cases.full),
            },
            metrics: Vec::new(),
            variants: Vec::new(),
            ratios: Vec::new(),
            evidence: Vec::new(),
            runs: Vec::new(),
        };
        Section {
            plan,
            cases: Arc::new(cases),
        }
    }

    /// Adds a variant (a column).
    pub fn variant(mut self, variant: Variant<P>) -> Self {
        let (cases, run) = (self.cases.clone(), variant.run);
        self.plan.variants.push(VariantInfo {
            name: variant.name.to_string(),
            role: variant.role,
        });
        self.plan
            .runs
            .push(Box::new(move |suite, c| run(&cases.get(suite)[c])));
        self
    }

    /// Adds one variant per `(name, role, how)` of `list`, each measuring a
    /// case with `measure(how, case)`.
    pub fn variants<H: Copy + Send + Sync + 'static>(
        mut self,
        measure: impl Fn(H, &Case<P>) -> Result<Sample, LabError> + Clone + Send + Sync + 'static,
        list: impl IntoIterator<Item = (&'static str, Role, H)>,
    ) -> Self {
        for (name, role, how) in list {
            let measure = measure.clone();
            self = self.variant(Variant::new(name, role, move |case| measure(how, case)));
        }
        self
    }
}

impl<P> Section<P> {
    /// Adds a metric; the first one added is the primary metric.
    pub fn metric(mut self, metric: Metric) -> Self {
        self.plan.metrics.push(metric);
        self
    }

    /// Adds a ratio column.
    pub fn ratio(mut self, ratio: Ratio) -> Self {
        self.plan.ratios.push(ratio);
        self
    }

    /// Names the metrics that explain the section's result (each must be
    /// declared with [`Section::metric`]).
    pub fn evidence(mut self, metrics: &[&'static str]) -> Self {
        self.plan.evidence.extend_from_slice(metrics);
        self
    }
}

impl SectionPlan {
    /// Measures case `case` of `suite` with variant `variant`, once.
    pub fn run(&self, suite: Suite, case: usize, variant: usize) -> Result<Sample, LabError> {
        (self.runs[variant])(suite, case)
    }

    /// Without declared ratios, the defaults derived from the roles:
    /// after/before, kernel/after, peer/after.
    fn default_ratios(&mut self) {
        let first = |role| self.variants.iter().find(|v| v.role == role);
        let (true, Some(after)) = (self.ratios.is_empty(), first(Role::After)) else {
            return;
        };
        let before = first(Role::Before).map(|b| Ratio::of(&after.name, &b.name));
        let outside = self
            .variants
            .iter()
            .filter(|v| matches!(v.role, Role::Kernel | Role::Peer));
        let ratios = before
            .into_iter()
            .chain(outside.map(|v| Ratio::of(&v.name, &after.name)))
            .collect();
        self.ratios = ratios;
    }

    /// Checks the definition is consistent: metrics and variants present and
    /// uniquely named, ratios naming existing variants, cases in every suite.
    pub fn validate(&self) -> Result<(), String> {
        let fail = |what: String| Err(format!("section \"{}\": {what}", self.title));
        if self.metrics.is_empty() {
            return fail("no metrics".into());
        }
        if self.variants.is_empty() {
            return fail("no variants".into());
        }
        if let Some(v) = self.variants.iter().map(|v| &v.name).duplicates().next() {
            return fail(format!("variant \"{v}\" declared twice"));
        }
        if let Some(m) = self.metrics.iter().map(|m| &m.name).duplicates().next() {
            return fail(format!("metric \"{m}\" declared twice"));
        }
        for &name in &self.evidence {
            if !self.metrics.iter().any(|m| m.name == name) {
                return fail(format!("evidence names unknown metric \"{name}\""));
            }
        }
        const SUITES: [Suite; 3] = [Suite::Smoke, Suite::Quick, Suite::Full];
        for suite in SUITES {
            if self.cases.get(suite).is_empty() {
                return fail(format!("no cases for the {} suite", suite.name()));
            }
        }
        for r in &self.ratios {
            for name in [&r.num, &r.den] {
                if !self.variants.iter().any(|v| &v.name == name) {
                    return fail(format!("ratio names unknown variant \"{name}\""));
                }
            }
            if let Some(metric) = &r.metric {
                if !self.metrics.iter().any(|m| &m.name == metric) {
                    return fail(format!("ratio names unknown metric \"{metric}\""));
                }
            }
            for label in &r.at {
                let known = SUITES
                    .iter()
                    .any(|&s| self.cases.get(s).iter().any(|c| &c.0 == label));
                if !known {
                    return fail(format!("ratio target names unknown case \"{label}\""));
                }
            }
        }
        Ok(())
    }
}

/// A seed's experiment: a name, the seed's claim, and its tables.
pub struct Experiment {
    /// Command-line name (e.g. `"futex-wake"`).
    pub name: &'static str,
    /// One line: which kernel patch, and its headline claim.
    pub seed: &'static str,
    /// The seed's headline figure, as the patch states it (the report's
    /// "what the seed claimed").
    pub claim: &'static str,
    /// The seed's mechanism in a sentence or two.
    pub mechanism: &'static str,
    /// The tables, in order.
    pub sections: Vec<SectionPlan>,
    /// What the experiment needs from the machine beyond what the lab
    /// always has (a hypervisor, an outside program): `Err(reason)` when
    /// it is missing, and the run then skips the experiment with the
    /// reason instead of measuring it.
    pub requires: Option<fn() -> Result<(), String>>,
}

impl Experiment {
    /// An experiment with no sections yet.
    pub fn new(name: &'static str, seed: &'static str) -> Self {
        Experiment {
            name,
            seed,
            claim: "",
            mechanism: "",
            sections: Vec::new(),
            requires: None,
        }
    }

    /// Sets the seed's headline figure.
    pub fn claim(mut self, claim: &'static str) -> Self {
        self.claim = claim;
        self
    }

    /// Sets the seed's mechanism.
    pub fn mechanism(mut self, mechanism: &'static str) -> Self {
        self.mechanism = mechanism;
        self
    }

    /// Sets what the experiment needs from the machine (see
    /// [`Experiment::unavailable`]).
    pub fn requires(mut self, check: fn() -> Result<(), String>) -> Self {
        self.requires = Some(check);
        self
    }

    /// Why the experiment cannot run on this machine, if it cannot: the
    /// run skips it, printing the reason.
    pub fn unavailable(&self) -> Option<String> {
        self.requires.and_then(|check| check().err())
    }

    /// Adds a section (a table).
    pub fn section<P: Serialize + Send + Sync + 'static>(mut self, section: Section<P>) -> Self {
        let mut plan = section.plan;
        plan.default_ratios();
        self.sections.push(plan);
        self
    }

    /// Checks every section's definition.
    pub fn validate(&self) -> Result<(), LabError> {
        for s in &self.sections {
            s.validate()
                .map_err(|msg| LabError::Definition(format!("{}: {msg}", self.name)))?;
        }
        Ok(())
    }
}
