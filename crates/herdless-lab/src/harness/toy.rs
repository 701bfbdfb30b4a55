//! A toy experiment with made-up, deterministic measurements: what the
//! harness's tests (tables, narrative, verdicts, `compare`, the command
//! line) run instead of a real workload, so they check formatting and
//! judging without timing anything.
//!
//! One section, `"toy table"`, over `n` ∈ {1, 4}:
//! - metrics `t` (ns, primary), `wasted` (per item, the evidence) and
//!   `never` (declared, never measured);
//! - variants `old` (before: `t = 10·n`, `wasted = 3·n`), `new` (after:
//!   `t = new_ns·n`, no waste) and `kern` (kernel: `t = 2·n`, no waste);
//! - ratios `old/new ≥ target` at `n = 4`, and `kern/new` without a target.
//!
//! Every repetition measures the same, so every spread is 0.

use std::time::SystemTime;

use super::machine::Machine;
use super::report::{Report, SectionReport};
use super::runner::{run_experiment, RunOptions};
use super::spec::{
    Case, Experiment, Metric, PerSuite, Ratio, Role, Sample, Section, Suite, Variant,
};

/// The toy's knobs.
#[derive(Clone, Copy, Debug)]
pub struct Toy {
    /// `new`'s time per unit of `n`, ns (`old` takes 10, `kern` 2).
    pub new_ns: f64,
    /// The `old/new` target (at least), judged at `n = 4`.
    pub target: f64,
    /// Repetitions kept per cell.
    pub reps: usize,
}

impl Default for Toy {
    fn default() -> Self {
        Toy { new_ns: 1.0, target: 5.0, reps: 5 }
    }
}

impl Toy {
    /// The experiment, as data.
    pub fn experiment(&self) -> Experiment {
        let cases = vec![Case::new("1", 1.0), Case::new("4", 4.0)];
        let fixed = |name, role, t: f64, wasted: f64| {
            Variant::new(name, role, move |c: &Case<f64>| {
                Ok(Sample::new().with("t", t * c.params).with("wasted", wasted * c.params))
            })
        };
        Experiment::new("toy", "seed 999: a toy (deterministic measurements)")
            .claim("old takes 10 ns per item")
            .mechanism("new takes fewer")
            .section(
                Section::new(
                    "toy table",
                    "n",
                    PerSuite { smoke: cases.clone(), quick: cases.clone(), full: cases },
                )
                .metric(Metric::lower("t", "ns"))
                .metric(Metric::lower("wasted", "per item"))
                .metric(Metric::lower("never", "ns"))
                .evidence(&["wasted"])
                .variant(fixed("old", Role::Before, 10.0, 3.0))
                .variant(fixed("new", Role::After, self.new_ns, 0.0))
                .variant(fixed("kern", Role::Kernel, 2.0, 0.0))
                .ratio(Ratio::of("old", "new").at_least(self.target).at_case("4"))
                .ratio(Ratio::of("kern", "new")),
            )
    }

    /// The options the toy runs with: the smoke suite, `reps` repetitions,
    /// no warm-up, no progress bar.
    pub fn options(&self) -> RunOptions {
        RunOptions { reps: self.reps, warmup: 0, ..RunOptions::new(Suite::Smoke) }
    }

    /// A whole report of one run, on a made-up machine.
    pub fn report(&self) -> Report {
        let opts = self.options();
        let result = run_experiment(&self.experiment(), &opts).expect("the toy is well defined");
        let machine = Machine {
            cores: 2,
            kernel: "toy".into(),
            cpu_model: "toy CPU".into(),
            lab_version: env!("CARGO_PKG_VERSION").into(),
        };
        Report::new(machine, &opts, SystemTime::UNIX_EPOCH, vec![result])
    }

    /// A report whose one target is undecided, leaning met: `old/new` is
    /// 10× against a bound of 10×, with a spread at `n = 4` that holds the
    /// bound.
    pub fn at_bound_report() -> Report {
        let mut report = Toy { target: 10.0, ..Toy::default() }.report();
        let s = &mut report.experiments[0].sections[0];
        s.cases[1].cells[1].metrics.get_mut("t").expect("the toy measures t").spread = 1.0;
        s.compute_ratios();
        report
    }

    /// The toy's one table.
    pub fn section(&self) -> SectionReport {
        self.report().experiments.remove(0).sections.remove(0)
    }
}
