//! The one harness every experiment runs through.
//!
//! An experiment is data ([`spec`]): sections (one table each) with their
//! cases per suite, metrics (the first is primary), variants (closures that
//! measure one case once and return a [`Sample`]) and ratio columns
//! ([`ratio`]) with optional targets. The [`runner`] repeats, interleaves, re-measures noisy
//! rows and aggregates, noting how busy the machine was ([`disturbance`]);
//! the result is a plain [`Report`] ([`report`], [`machine`], its ratio
//! values [`quotient`] and its verdicts' [`outcome`]) that [`verdict`]
//! judges against the targets, that [`table`] (with [`grid`],
//! [`format`](mod@format) and [`wrap`]), [`plot`], [`html`], [`summary`] and [`json`]
//! render, and that [`compare`] compares across runs; [`narrative`] words
//! each section's outcome and [`progress`] draws the bar. [`output`]
//! claims the output paths before a run, [`console`] writes to stdout, and
//! [`toy`] is the deterministic experiment the tests run.
//! [`gang`](mod@gang), [`asleep`], [`rusage`] and [`run_delay`] are the measuring tools
//! variants use, so no experiment writes a timing loop of its own, and
//! [`scratch`] makes the files they read.
//!
//! # Adding an experiment
//! ```text
//! pub fn experiment() -> Experiment {
//!     Experiment::new("herd", "seed 000: <patch title>: <headline claim>")
//!         .claim("<the seed's headline figure>")
//!         .mechanism("<what the seed changes, in a sentence>")
//!         .section(
//!             Section::new("blocking readers", "readers", PerSuite { smoke, quick, full })
//!                 .metric(Metric::lower("time_ms", "ms"))        // primary
//!                 .metric(Metric::lower("wasted_wakeups", "per item"))
//!                 .variant(Variant::new("wake-all", Role::Before, |case| measure(..)))
//!                 .variant(Variant::new("wake-one", Role::After, |case| measure(..)))
//!                 .ratio(Ratio::of("wake-all", "wake-one").at_least(2.0))
//!                 .evidence(&["wasted_wakeups"]),  // quoted by the report
//!         )
//! }
//! ```
//! then list it in `experiments::all()`. Without `.ratio(..)` a section
//! shows after/before, kernel/after and peer/after. A variant that cannot
//! run on this machine (a resource it lacks) returns
//! [`LabError::Unavailable`] and its cells are skipped with the reason; an
//! experiment that needs an outside program or device for everything it
//! measures says so with `.requires(check)` (`Experiment::requires`), and a
//! run skips it whole, printing the reason `check` gives.

pub mod affinity;
pub mod asleep;
pub mod compare;
pub mod console;
pub mod disturbance;
mod error;
pub mod format;
pub mod gang;
pub mod grid;
pub mod html;
pub mod json;
pub mod machine;
pub mod narrative;
pub mod outcome;
pub mod output;
pub mod patience;
pub mod plot;
pub mod progress;
pub mod quotient;
pub mod rank_test;
pub mod ratio;
pub mod report;
pub mod run_delay;
pub mod runner;
pub mod rusage;
pub mod scratch;
pub mod spec;
pub mod stats;
pub mod summary;
pub mod table;
pub mod toy;
pub mod verdict;
pub mod wrap;

pub use error::LabError;
pub use gang::{gang, GangRun};
pub use report::Report;
pub use runner::{run_experiment, RunOptions};
pub use rusage::Usage;
pub use spec::{
    Bound, Case, Experiment, Metric, PerSuite, Ratio, Role, Sample, Section, Suite, Variant,
};
