//! `herdless-lab`: the command line. Picks the experiments and the suite,
//! runs them through the harness, prints the tables and writes `--json` and
//! `--plot` outputs.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::Parser;

use herdless_lab::experiments;
use herdless_lab::harness::report::Machine;
use herdless_lab::harness::{
    plot, run_experiment, summary, table, LabError, Report, RunOptions, Suite,
};

/// Reproduces the seeds' experiments: herdless before and after each patch,
/// the kernel's own mechanism and the best library, in one run.
#[derive(Debug, Parser)]
#[command(name = "herdless-lab", version)]
struct Cli {
    /// An experiment name, `all` to run every experiment, `list`,
    /// `check-json FILE` to validate a results file written by `--json`, or
    /// `summary FILE` to print its targets as a Markdown table.
    experiment: String,
    /// The results file that `check-json` reads.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// The default suite: the seeds' parameters scaled to the machine.
    #[arg(long, group = "suite")]
    quick: bool,
    /// Tiny parameters, 1–2 repetitions: checks that the lab runs (CI).
    #[arg(long, group = "suite")]
    smoke: bool,
    /// More repetitions (and larger parameters where they matter).
    #[arg(long, group = "suite")]
    full: bool,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one SVG chart per table into DIR.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Repetitions per (case, variant), instead of the suite's default.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    reps: Option<u32>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e @ LabError::UnknownExperiment { .. }) => {
            eprintln!("herdless-lab: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("herdless-lab: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs what `cli` asks; `Ok(false)` if some measurement failed.
fn run(cli: &Cli) -> Result<bool, LabError> {
    let suite = if cli.smoke {
        Suite::Smoke
    } else if cli.full {
        Suite::Full
    } else {
        Suite::Quick
    };
    if cli.experiment == "list" {
        list(suite)?;
        return Ok(true);
    }
    if cli.experiment == "check-json" {
        return check_json(cli.file.as_deref());
    }
    if cli.experiment == "summary" {
        let path = cli
            .file
            .as_deref()
            .ok_or_else(|| LabError::Usage("summary needs a FILE".into()))?;
        emit(&summary::markdown(&Report::read_json(path)?))?;
        return Ok(true);
    }
    if let Some(file) = &cli.file {
        return Err(LabError::Usage(format!(
            "unexpected argument {} (only `check-json` and `summary` take a file)",
            file.display()
        )));
    }
    let selected = if cli.experiment == "all" {
        experiments::all()
    } else {
        vec![experiments::find(&cli.experiment)?]
    };
    let mut opts = RunOptions::new(suite);
    if let Some(reps) = cli.reps {
        opts.reps = reps as usize;
    }
    opts.progress = suite != Suite::Smoke && std::io::stderr().is_terminal();

    let started = SystemTime::now();
    let machine = Machine::detect();
    emit(&format!(
        "herdless-lab {} suite: {} repetitions (+{} warm-up) | {} cores, Linux {}, {} | herdless stats {}\n",
        suite.name(),
        opts.reps,
        opts.warmup,
        machine.cores,
        machine.kernel,
        machine.cpu_model,
        if herdless::stats::ENABLED { "on" } else { "off" }
    ))?;
    let mut reports = Vec::new();
    let mut clean = true;
    for exp in &selected {
        let report = run_experiment(exp, &opts)?;
        emit(&format!("\n{}", table::render_experiment(&report)))?;
        if let Some(dir) = &cli.plot {
            for path in plot::write_plots(&report, dir)? {
                eprintln!("wrote {}", path.display());
            }
        }
        clean &= report
            .sections
            .iter()
            .flat_map(|s| &s.cases)
            .flat_map(|c| &c.cells)
            .all(|cell| cell.errors.is_empty());
        reports.push(report);
    }
    if let Some(path) = &cli.json {
        Report::new(machine, &opts, started, reports).write_json(path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(clean)
}

/// Reads a `--json` results file back and summarises it: the CI check that
/// the lab's output parses against the current schema.
fn check_json(file: Option<&std::path::Path>) -> Result<bool, LabError> {
    let path = file.ok_or_else(|| LabError::Usage("check-json needs a FILE".into()))?;
    let report = Report::read_json(path)?;
    let sections: usize = report.experiments.iter().map(|e| e.sections.len()).sum();
    if sections == 0 {
        return Err(LabError::Usage(format!(
            "{} holds no results",
            path.display()
        )));
    }
    emit(&format!(
        "{}: schema {}, {} experiments, {} tables: ok\n",
        path.display(),
        report.schema,
        report.experiments.len(),
        sections
    ))?;
    Ok(true)
}

/// Writes `text` to stdout; a closed pipe (`| head`) is an error, not a
/// panic.
fn emit(text: &str) -> Result<(), LabError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| LabError::os("writing to stdout", e))
}

/// Prints every experiment, its seed and its tables' cases for `suite`.
fn list(suite: Suite) -> Result<(), LabError> {
    let mut text = String::new();
    for exp in experiments::all() {
        let _ = writeln!(text, "{:<14} {}", exp.name, exp.seed);
        for s in &exp.sections {
            let cases: Vec<String> = s.cases(suite).into_iter().map(|(label, _)| label).collect();
            let variants: Vec<&str> = s.variants().into_iter().map(|(name, _)| name).collect();
            let _ = writeln!(
                text,
                "{:<14}   {}: {} = {} ({} suite); {}",
                "",
                s.title(),
                s.param(),
                cases.join(", "),
                suite.name(),
                variants.join(", ")
            );
        }
    }
    emit(&text)
}
