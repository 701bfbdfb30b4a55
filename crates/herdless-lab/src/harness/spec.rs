//! What an experiment is, as data: sections (one table each), their cases per
//! suite, metrics, variants and the ratios to report.
//!
//! An experiment never times, repeats, aggregates or prints anything itself:
//! each [`Variant`] measures one [`Case`] once and returns a [`Sample`]; the
//! runner (`runner.rs`) does the rest, the same way for every experiment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

/// A measured quantity of a section.
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    /// Key in every [`Sample`] (e.g. `"per_wake_us"`).
    pub name: &'static str,
    /// Unit shown in the table header (e.g. `"µs"`).
    pub unit: &'static str,
    /// Whether smaller values are better (times) or larger (throughputs).
    pub lower_is_better: bool,
}

impl Metric {
    /// A metric where smaller is better.
    pub const fn lower(name: &'static str, unit: &'static str) -> Self {
        Metric {
            name,
            unit,
            lower_is_better: true,
        }
    }

    /// A metric where larger is better.
    pub const fn higher(name: &'static str, unit: &'static str) -> Self {
        Metric {
            name,
            unit,
            lower_is_better: false,
        }
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
        values
            .iter()
            .map(|&v| Case::new(v.to_string(), params(v)))
            .collect()
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

/// A bound a ratio should meet.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The ratio should be at least this.
    AtLeast(f64),
    /// The ratio should be at most this.
    AtMost(f64),
}

impl Bound {
    /// Whether `value` meets the bound.
    pub fn holds(self, value: f64) -> bool {
        match self {
            Bound::AtLeast(b) => value >= b,
            Bound::AtMost(b) => value <= b,
        }
    }
}

/// A ratio column: the primary metric's median of `num` over that of `den`,
/// with an optional target the section's verdict checks.
#[derive(Clone, Debug)]
pub struct Ratio {
    /// Numerator variant name.
    pub num: &'static str,
    /// Denominator variant name.
    pub den: &'static str,
    /// The claim to check, if any.
    pub target: Option<Bound>,
    /// The case labels the target applies to; empty: every case.
    pub at: Vec<&'static str>,
    /// The metric whose medians are divided; `None`: the primary one.
    pub metric: Option<&'static str>,
}

impl Ratio {
    /// `num / den`, reported without a target.
    pub fn of(num: &'static str, den: &'static str) -> Self {
        Ratio {
            num,
            den,
            target: None,
            at: Vec::new(),
            metric: None,
        }
    }

    /// Claims the ratio is at least `bound`.
    pub fn at_least(mut self, bound: f64) -> Self {
        self.target = Some(Bound::AtLeast(bound));
        self
    }

    /// Claims the ratio is at most `bound`.
    pub fn at_most(mut self, bound: f64) -> Self {
        self.target = Some(Bound::AtMost(bound));
        self
    }

    /// Divides the medians of `metric` instead of the primary metric's (for
    /// a claim about a counted mechanism rather than the headline figure).
    pub fn on_metric(mut self, metric: &'static str) -> Self {
        self.metric = Some(metric);
        self
    }

    /// Checks the target only on the case labelled `label`; called again,
    /// on each of the cases named (one column, judged by the worst of
    /// them).
    pub fn at_case(mut self, label: &'static str) -> Self {
        self.at.push(label);
        self
    }
}

/// One table: a workload swept over one parameter, for several variants.
pub struct Section<P> {
    /// Table title (e.g. `"wake one at a time"`).
    pub title: &'static str,
    /// What the rows vary (e.g. `"threads"`).
    pub param: &'static str,
    /// The rows, per suite.
    pub cases: PerSuite<Vec<Case<P>>>,
    /// Measured quantities; the first is the primary one (ratios, plots).
    pub metrics: Vec<Metric>,
    /// The columns, in display order.
    pub variants: Vec<Variant<P>>,
    /// Ratio columns. Empty: after/before, then kernel/after and peer/after.
    pub ratios: Vec<Ratio>,
    /// The counted metrics that explain the result (e.g. wasted wakeups per
    /// item): the report's paragraph quotes them at the deciding case.
    pub evidence: Vec<&'static str>,
}

impl<P> Section<P> {
    /// A section with no metrics, variants or ratios yet.
    pub fn new(title: &'static str, param: &'static str, cases: PerSuite<Vec<Case<P>>>) -> Self {
        Section {
            title,
            param,
            cases,
            metrics: Vec::new(),
            variants: Vec::new(),
            ratios: Vec::new(),
            evidence: Vec::new(),
        }
    }

    /// Adds a metric; the first one added is the primary metric.
    pub fn metric(mut self, metric: Metric) -> Self {
        self.metrics.push(metric);
        self
    }

    /// Adds a variant (a column).
    pub fn variant(mut self, variant: Variant<P>) -> Self {
        self.variants.push(variant);
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
            self.variants
                .push(Variant::new(name, role, move |case| measure(how, case)));
        }
        self
    }

    /// Adds a ratio column.
    pub fn ratio(mut self, ratio: Ratio) -> Self {
        self.ratios.push(ratio);
        self
    }

    /// Names the metrics that explain the section's result (each must be
    /// declared with [`Section::metric`]).
    pub fn evidence(mut self, metrics: &[&'static str]) -> Self {
        self.evidence.extend_from_slice(metrics);
        self
    }

    /// The ratio columns: the declared ones, or the defaults derived from
    /// the roles (after/before, kernel/after, peer/after).
    pub fn effective_ratios(&self) -> Vec<Ratio> {
        if !self.ratios.is_empty() {
            return self.ratios.clone();
        }
        let first = |role| self.variants.iter().find(|v| v.role == role);
        let (Some(after), before) = (first(Role::After), first(Role::Before)) else {
            return Vec::new();
        };
        let mut ratios: Vec<Ratio> = before
            .map(|b| Ratio::of(after.name, b.name))
            .into_iter()
            .collect();
        for v in &self.variants {
            if matches!(v.role, Role::Kernel | Role::Peer) {
                ratios.push(Ratio::of(v.name, after.name));
            }
        }
        ratios
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
        for (i, v) in self.variants.iter().enumerate() {
            if self.variants[..i].iter().any(|w| w.name == v.name) {
                return fail(format!("variant \"{}\" declared twice", v.name));
            }
        }
        for (i, m) in self.metrics.iter().enumerate() {
            if self.metrics[..i].iter().any(|n| n.name == m.name) {
                return fail(format!("metric \"{}\" declared twice", m.name));
            }
        }
        for &name in &self.evidence {
            if !self.metrics.iter().any(|m| m.name == name) {
                return fail(format!("evidence names unknown metric \"{name}\""));
            }
        }
        for suite in [Suite::Smoke, Suite::Quick, Suite::Full] {
            if self.cases.get(suite).is_empty() {
                return fail(format!("no cases for the {} suite", suite.name()));
            }
        }
        for r in &self.ratios {
            for name in [r.num, r.den] {
                if !self.variants.iter().any(|v| v.name == name) {
                    return fail(format!("ratio names unknown variant \"{name}\""));
                }
            }
            if let Some(metric) = r.metric {
                if !self.metrics.iter().any(|m| m.name == metric) {
                    return fail(format!("ratio names unknown metric \"{metric}\""));
                }
            }
            for &label in &r.at {
                let known = [Suite::Smoke, Suite::Quick, Suite::Full]
                    .iter()
                    .any(|&s| self.cases.get(s).iter().any(|c| c.label == label));
                if !known {
                    return fail(format!("ratio target names unknown case \"{label}\""));
                }
            }
        }
        Ok(())
    }
}

/// The runner's view of a [`Section`], with its parameter type erased, so
/// one experiment can hold sections with different case parameters.
pub trait SectionPlan: Send + Sync {
    /// Table title.
    fn title(&self) -> &'static str;
    /// What the rows vary.
    fn param(&self) -> &'static str;
    /// The metrics, primary first.
    fn metrics(&self) -> &[Metric];
    /// `(name, role)` of every variant, in display order.
    fn variants(&self) -> Vec<(&'static str, Role)>;
    /// The ratio columns (declared or default).
    fn ratios(&self) -> Vec<Ratio>;
    /// The metrics that explain the result.
    fn evidence(&self) -> &[&'static str];
    /// `(label, parameters as JSON)` of every case of `suite`.
    fn cases(&self, suite: Suite) -> Vec<(String, serde_json::Value)>;
    /// Measures case `case` of `suite` with variant `variant`, once.
    fn run(&self, suite: Suite, case: usize, variant: usize) -> Result<Sample, LabError>;
    /// See [`Section::validate`].
    fn validate(&self) -> Result<(), String>;
}

impl<P: Serialize + Send + Sync> SectionPlan for Section<P> {
    fn title(&self) -> &'static str {
        self.title
    }

    fn param(&self) -> &'static str {
        self.param
    }

    fn metrics(&self) -> &[Metric] {
        &self.metrics
    }

    fn variants(&self) -> Vec<(&'static str, Role)> {
        self.variants.iter().map(|v| (v.name, v.role)).collect()
    }

    fn ratios(&self) -> Vec<Ratio> {
        self.effective_ratios()
    }

    fn evidence(&self) -> &[&'static str] {
        &self.evidence
    }

    fn cases(&self, suite: Suite) -> Vec<(String, serde_json::Value)> {
        self.cases
            .get(suite)
            .iter()
            .map(|c| {
                let params = serde_json::to_value(&c.params).unwrap_or(serde_json::Value::Null);
                (c.label.clone(), params)
            })
            .collect()
    }

    fn run(&self, suite: Suite, case: usize, variant: usize) -> Result<Sample, LabError> {
        (self.variants[variant].run)(&self.cases.get(suite)[case])
    }

    fn validate(&self) -> Result<(), String> {
        Section::validate(self)
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
    pub sections: Vec<Box<dyn SectionPlan>>,
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
        self.sections.push(Box::new(section));
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
