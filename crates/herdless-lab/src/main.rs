//! `herdless-lab`: the command line. `run` (and `all`) measures experiments
//! through the harness, prints their tables and writes `--json`, `--plot`
//! and `--report`; `list` shows what there is; `compare`, `render`,
//! `summary` and `check-json` read results files back. Without a command it
//! prints its help and exits with 2, as cargo and git do: the quick suite
//! takes minutes, and nobody should start it by accident.
//!
//! Usage errors exit with status 2 (clap's), runtime errors with 1 and one
//! line on stderr, as does a run in which a measurement failed. Output
//! paths are claimed before the first measurement. A closed stdout (`|
//! head`) ends the output quietly.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use clap::builder::PossibleValuesParser;
use clap::{Args, CommandFactory, Parser, Subcommand};

use herdless_lab::experiments;
use herdless_lab::harness::console::{note, Console};
use herdless_lab::harness::disturbance::{Conditions, CpuTimes, LoadAverage, Tally};
use herdless_lab::harness::machine::Machine;
use herdless_lab::harness::outcome::{Confidence, Outcome, OutcomeCounts};
use herdless_lab::harness::output::{OutputDir, OutputFile};
use herdless_lab::harness::verdict::Judgement;
use herdless_lab::harness::wrap::{para, WIDTH};
use herdless_lab::harness::{
    compare, html, plot, run_experiment, summary, table, Experiment, LabError, Report, RunOptions,
    Suite,
};

/// Reproduces the seeds' experiments: herdless before and after each
/// kernel patch, next to the kernel's own mechanism and the best library,
/// in one process.
#[derive(Debug, Parser)]
#[command(
    name = "herdless-lab",
    version,
    max_term_width = 100,
    arg_required_else_help = true,
    after_help = "Every experiment's quick suite: `herdless-lab all` (a few minutes)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run experiments and print their tables, verdicts and confidence
    Run(RunArgs),
    /// Run every experiment (the same as `run all`)
    All(RunFlags),
    /// List the experiments, their tables, cases and variants
    List(SuiteFlags),
    /// Compare two results files: targets' verdicts and every cell, B against A
    Compare(CompareArgs),
    /// Write the HTML report of a results file
    Render(RenderArgs),
    /// Print a results file's targets as a Markdown table (the README's "Results")
    Summary(FileArg),
    /// Check that a results file parses against this lab's schema
    CheckJson(FileArg),
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Experiments to run, in order (`all`: every one)
    #[arg(value_name = "EXPERIMENT", required = true, value_parser = experiment_names())]
    experiments: Vec<String>,
    #[command(flatten)]
    flags: RunFlags,
}

#[derive(Debug, Args)]
struct RunFlags {
    #[command(flatten)]
    suite: SuiteFlags,
    /// Repetitions kept per case and variant, instead of the suite's
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: Option<u32>,
    /// How many more times a row too noisy to judge, or undecided, may be
    /// measured (quick and full: 2, smoke: 0)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=10))]
    retries: Option<u32>,
    /// Write the results as JSON to FILE (folders created)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one SVG chart per table into DIR (created)
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Write a self-contained HTML report, DIR/index.html (created)
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Only the tables whose title contains TEXT, ignoring case (repeat for
    /// several), e.g. `run restore --table s3`; `list` shows the titles
    #[arg(long, value_name = "TEXT")]
    table: Vec<String>,
}

#[derive(Debug, Args)]
#[group(multiple = false)]
struct SuiteFlags {
    /// Tiny parameters, 2 repetitions: checks that the lab runs (CI)
    #[arg(long)]
    smoke: bool,
    /// The seeds' parameters scaled to the machine, 7 repetitions (default)
    #[arg(long)]
    quick: bool,
    /// The quick cases (larger where it matters), 21 repetitions
    #[arg(long)]
    full: bool,
}

impl SuiteFlags {
    fn suite(&self) -> Suite {
        if self.smoke {
            Suite::Smoke
        } else if self.full {
            Suite::Full
        } else {
            Suite::Quick
        }
    }
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// The earlier results file
    a: PathBuf,
    /// The later results file, compared against A
    b: PathBuf,
    /// Compare every metric, not only each table's primary one
    #[arg(long)]
    all_metrics: bool,
    /// Exit with status 1 if a primary metric got slower beyond the noise or
    /// a target went from met to missed, both decided (not undecided)
    #[arg(long)]
    fail_on_regression: bool,
}

#[derive(Debug, Args)]
struct RenderArgs {
    /// A results file written by `--json`
    file: PathBuf,
    /// Where to write index.html (created)
    #[arg(long, value_name = "DIR", required = true)]
    report: PathBuf,
}

#[derive(Debug, Args)]
struct FileArg {
    /// A results file written by `--json`
    file: PathBuf,
}

/// The experiments' names and `all`, for clap to check and list.
fn experiment_names() -> PossibleValuesParser {
    let mut names: Vec<&'static str> = experiments::all().iter().map(|e| e.name).collect();
    names.push("all");
    PossibleValuesParser::new(names)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut console = Console::new();
    let result = match cli.command {
        Command::Run(args) => run(&args.experiments, &args.flags, &mut console),
        Command::All(flags) => run(&["all".to_string()], &flags, &mut console),
        Command::List(suite) => list(suite.suite(), &mut console).map(|()| true),
        Command::Compare(args) => compare_files(&args, &mut console),
        Command::Render(args) => render(&args.file, &args.report),
        Command::Summary(arg) => Report::read_json(&arg.file)
            .and_then(|report| console.print(&summary::markdown(&report)))
            .map(|()| true),
        Command::CheckJson(arg) => check_json(&arg.file, &mut console),
        Command::Unknown(words) => unknown_command(&words),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            note(&format!("herdless-lab: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// A usage error for a command clap does not know, pointing at `run` when
/// it names an experiment (the lab's older command line); exits with 2.
fn unknown_command(words: &[String]) -> ! {
    let word = words.first().map_or("", String::as_str);
    let hint = if experiments::find(word).is_ok() {
        format!("to run that experiment: herdless-lab run {word}")
    } else {
        "see herdless-lab --help".to_string()
    };
    Cli::command()
        .error(
            clap::error::ErrorKind::InvalidSubcommand,
            format!("unknown command '{word}'; {hint}"),
        )
        .exit()
}

/// Runs `names` (`all`: every experiment); `Ok(false)` if some
/// measurement failed.
fn run(names: &[String], flags: &RunFlags, console: &mut Console) -> Result<bool, LabError> {
    // In the order named, each once.
    let mut selected: Vec<Experiment> = Vec::new();
    for name in names {
        if name == "all" {
            selected = experiments::all();
            break;
        }
        if !selected.iter().any(|e| e.name == name) {
            selected.push(experiments::find(name)?);
        }
    }
    if !flags.table.is_empty() {
        selected = only_tables(selected, &flags.table, console)?;
    }
    let suite = flags.suite.suite();
    let mut opts = RunOptions::new(suite);
    if let Some(reps) = flags.reps {
        opts.reps = reps as usize;
    }
    if let Some(retries) = flags.retries {
        opts.retries = retries as usize;
    }
    // Drawn only when stderr is a terminal (see `harness::progress`).
    opts.progress = true;
    // The outputs, claimed before measuring.
    let json = flags.json.as_deref().map(OutputFile::claim).transpose()?;
    let index = flags.report.as_deref().map(html::index_of);
    let html = index.as_deref().map(OutputFile::claim).transpose()?;
    let plot = flags.plot.as_deref().map(OutputDir::claim).transpose()?;
    let writes = json.is_some() || html.is_some() || plot.is_some();

    let started = SystemTime::now();
    let clock = Instant::now();
    let machine = Machine::detect();
    let load_at_start = LoadAverage::now();
    let cpu_at_start = CpuTimes::now();
    console.print(&header(&opts, &machine, load_at_start))?;
    let mut reports = Vec::new();
    let mut clean = true;
    for exp in &selected {
        if let Some(reason) = exp.unavailable() {
            console.print(&format!(
                "\n{}",
                para(&format!("{}: skipped: {reason}", exp.name), 4)
            ))?;
            continue;
        }
        let report = run_experiment(exp, &opts)?;
        console.print(&format!("\n{}", table::render_experiment(&report)))?;
        if let Some(dir) = &plot {
            plot::write_plots(&report, dir.path())?
                .iter()
                .for_each(|p| wrote(p));
        }
        clean &= report
            .sections
            .iter()
            .flat_map(|s| &s.cases)
            .flat_map(|c| &c.cells)
            .all(|cell| cell.errors.is_empty());
        reports.push(report);
        if console.is_closed() && !writes {
            return Ok(clean); // nobody reads the tables and nothing is written
        }
    }
    let mut tally = Tally::default();
    if let (Some(before), Some(after)) = (cpu_at_start, CpuTimes::now()) {
        tally.add(&before, &after);
    }
    let mut report = Report::new(machine, &opts, started, reports);
    report.conditions = Conditions {
        load_at_start,
        load_at_end: LoadAverage::now(),
        disturbance: tally.disturbance(),
    };
    console.print(&closing(&report, clock.elapsed().as_secs_f64()))?;
    if let Some(out) = json {
        wrote(&report.write_json_to(out)?);
    }
    if let Some(out) = html {
        wrote(&html::write_report_to(&report, out)?);
    }
    Ok(clean)
}

/// `experiments` with only their tables whose title contains one of
/// `texts` (ignoring case); an experiment left with none is dropped, with a
/// note. A usage error naming every table (exit 2) if nothing is left.
fn only_tables(
    experiments: Vec<Experiment>,
    texts: &[String],
    console: &mut Console,
) -> Result<Vec<Experiment>, LabError> {
    let texts: Vec<String> = texts.iter().map(|t| t.to_lowercase()).collect();
    let wanted = |title: &str| {
        let title = title.to_lowercase();
        texts.iter().any(|t| title.contains(t.as_str()))
    };
    let mut titles = Vec::new();
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for mut exp in experiments {
        titles.extend(
            exp.sections
                .iter()
                .map(|s| format!("{}: {}", exp.name, s.title)),
        );
        exp.sections.retain(|s| wanted(s.title));
        if exp.sections.is_empty() {
            dropped.push(exp.name);
        } else {
            kept.push(exp);
        }
    }
    let asked = texts.join("\", \"");
    if kept.is_empty() {
        // A usage error, as an unknown experiment is: exits with 2.
        Cli::command()
            .error(
                clap::error::ErrorKind::InvalidValue,
                format!(
                    "no table's title contains \"{asked}\" (--table); the tables: {}",
                    titles.join("; ")
                ),
            )
            .exit()
    }
    if !dropped.is_empty() {
        console.print(&para(
            &format!(
                "left out (no table's title contains \"{asked}\"): {}",
                dropped.join(", ")
            ),
            2,
        ))?;
    }
    Ok(kept)
}

/// Says on stderr that `path` was written.
fn wrote(path: &Path) {
    note(&format!("wrote {}", path.display()));
}

/// The run's first lines: suite, machine, load.
fn header(opts: &RunOptions, machine: &Machine, load: Option<LoadAverage>) -> String {
    let stats = if herdless::stats::ENABLED {
        "on"
    } else {
        "off"
    };
    let suite = format!(
        "herdless-lab {} suite: {} repetitions (+{} warm-up), up to {} re-measurements of a noisy \
         row; herdless stats {stats}",
        opts.suite.name(),
        opts.reps,
        opts.warmup,
        opts.retries,
    );
    let mut text = para(&suite, 2);
    let mut machine_line = format!(
        "{}, Linux {}, {}",
        machine.cores_text(),
        machine.kernel,
        machine.cpu_model
    );
    if let Some(load) = load {
        let _ = write!(
            machine_line,
            "; load average {:.2} {:.2} {:.2}{}",
            load.one,
            load.five,
            load.fifteen,
            if load.is_busy(machine.cores) {
                " (busy: expect noisy numbers)"
            } else {
                ""
            }
        );
    }
    text.push_str(&para(&machine_line, 2));
    text
}

/// The run's last lines: how the targets came out (undecided ones apart
/// from met and missed), how long it took and how busy the machine was.
fn closing(report: &Report, seconds: f64) -> String {
    // Every target judged once; the outcome counts come from the same
    // judgements, and a target without one is not judged.
    let targets = report
        .experiments
        .iter()
        .flat_map(|e| &e.sections)
        .flat_map(|s| {
            s.ratios
                .iter()
                .filter(|r| r.target.is_some())
                .map(move |r| s.judge(r))
        });
    let mut outcomes = OutcomeCounts::default();
    let mut judgements: Vec<Judgement> = Vec::new();
    for judgement in targets {
        outcomes.add(judgement.as_ref().map(Judgement::outcome));
        judgements.extend(judgement);
    }
    let count = |f: &dyn Fn(&Judgement) -> bool| judgements.iter().filter(|j| f(j)).count();
    let mut text = format!(
        "\n{} targets: {} met, {} missed, {} undecided",
        outcomes.targets(),
        outcomes.met,
        outcomes.missed,
        outcomes.undecided,
    );
    if outcomes.undecided > 0 {
        let leaning_met = count(&|j| j.outcome() == Outcome::Undecided && j.met);
        let _ = write!(
            text,
            " ({leaning_met} leaning met, {} leaning missed)",
            outcomes.undecided - leaning_met
        );
    }
    let _ = write!(
        text,
        ", {} not judged; confidence {} high, {} medium, {} low. {} in {:.0} s",
        outcomes.not_judged,
        count(&|j| j.confidence == Confidence::High),
        count(&|j| j.confidence == Confidence::Medium),
        count(&|j| j.confidence == Confidence::Low),
        report.suite.name(),
        seconds
    );
    if let Some(d) = report.conditions.disturbance {
        let _ = write!(text, "; {}", d.describe());
    }
    text.push('.');
    para(&text, 2)
}

/// `render FILE --report DIR`: the HTML report of a results file.
fn render(file: &Path, dir: &Path) -> Result<bool, LabError> {
    let out = OutputFile::claim(&html::index_of(dir))?;
    let report = Report::read_json(file)?;
    wrote(&html::write_report_to(&report, out)?);
    Ok(true)
}

/// `compare A B`: B against A; `Ok(false)` (exit status 1) on a
/// regression if `--fail-on-regression`.
fn compare_files(args: &CompareArgs, console: &mut Console) -> Result<bool, LabError> {
    let (ra, rb) = (Report::read_json(&args.a)?, Report::read_json(&args.b)?);
    let result = compare::compare(&ra, &rb, args.all_metrics);
    let mut text = para(&format!("A: {}", args.a.display()), 3);
    text.push_str(&para(&format!("B: {}", args.b.display()), 3));
    text.push_str(&compare::render(&result, args.all_metrics));
    console.print(&text)?;
    Ok(!(args.fail_on_regression && result.regressions() > 0))
}

/// Reads a `--json` results file back and summarises it: the CI check that
/// the lab's output parses against the current schema.
fn check_json(path: &Path, console: &mut Console) -> Result<bool, LabError> {
    let report = Report::read_json(path)?;
    let sections: usize = report.experiments.iter().map(|e| e.sections.len()).sum();
    if sections == 0 {
        return Err(LabError::Usage(format!(
            "{} holds no results",
            path.display()
        )));
    }
    console.print(&para(
        &format!(
            "{}: schema {}, {} experiments, {} tables: ok",
            path.display(),
            report.schema,
            report.experiments.len(),
            sections
        ),
        2,
    ))?;
    Ok(true)
}

/// Prints every experiment, its seed and its tables' cases for `suite`.
fn list(suite: Suite, console: &mut Console) -> Result<(), LabError> {
    let mut text = String::new();
    for exp in experiments::all() {
        text.push_str(&para(&format!("{}: {}", exp.name, exp.seed), 4));
        for s in &exp.sections {
            let cases: Vec<&str> = s.cases.get(suite).iter().map(|c| c.0.as_str()).collect();
            let variants: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
            text.push_str(&para(
                &format!(
                    "  - {}: {} = {} ({} suite); variants {}",
                    s.title,
                    s.param,
                    cases.join(", "),
                    suite.name(),
                    variants.join(", ")
                ),
                6,
            ));
        }
    }
    debug_assert!(text.lines().all(|l| l.chars().count() <= WIDTH));
    console.print(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use herdless_lab::harness::toy::Toy;

    #[test]
    fn the_closing_line_counts_undecided_targets_apart() {
        let words = |text: String| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let text = words(closing(&Toy::default().report(), 1.0));
        assert!(
            text.starts_with("1 targets: 1 met, 0 missed, 0 undecided, 0 not judged;"),
            "{text}"
        );
        // At the bound within the spread (old/new = 10× against ≥ 10).
        let text = words(closing(&Toy::at_bound_report(), 1.0));
        assert!(
            text.starts_with(
                "1 targets: 0 met, 0 missed, 1 undecided (1 leaning met, 0 leaning missed), 0 not \
                 judged; confidence 0 high, 0 medium, 1 low."
            ),
            "{text}"
        );
    }
}
