//! `herdless-lab`: the command line. Picks the experiments and the suite,
//! runs them through the harness, prints the tables and writes `--json` and
//! `--plot` and `--report` outputs; reads results files back for
//! `check-json`, `render` and `compare`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use clap::Parser;

use herdless_lab::experiments;
use herdless_lab::harness::report::Machine;
use herdless_lab::harness::{
    compare, html, plot, run_experiment, summary, table, LabError, Report, RunOptions, Suite,
};

/// Reproduces the seeds' experiments: herdless before and after each patch,
/// the kernel's own mechanism and the best library, in one run.
#[derive(Debug, Parser)]
#[command(name = "herdless-lab", version)]
struct Cli {
    /// An experiment name, `all` to run every experiment, `list`,
    /// `check-json FILE` to validate a results file written by `--json`,
    /// `summary FILE` to print its targets as a Markdown table,
    /// `render FILE --report DIR` to write the HTML report of a results
    /// file, or `compare A B` to compare two results files.
    experiment: String,
    /// The results files: one for `check-json` and `render`, two (A, then
    /// B) for `compare`.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
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
    /// Write a self-contained HTML report, DIR/index.html (charts inline,
    /// no script, no network).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// `compare`: every metric, not only the primary one.
    #[arg(long)]
    all_metrics: bool,
    /// `compare`: exit with status 1 if a primary metric got worse by more
    /// than the spreads.
    #[arg(long)]
    fail_on_regression: bool,
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
    match cli.experiment.as_str() {
        "check-json" => return check_json(one_file(cli, "check-json FILE")?),
        "render" => return render(cli, one_file(cli, "render FILE --report DIR")?),
        "compare" => return compare_files(cli),
        "summary" => {
            let path = one_file(cli, "summary FILE")?;
            emit(&summary::markdown(&Report::read_json(path)?))?;
            return Ok(true);
        }
        _ => {}
    }
    if let Some(file) = cli.files.first() {
        return Err(LabError::Usage(format!(
            "unexpected argument {} (only `check-json`, `summary`, `render` and `compare` take files)",
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
    // Drawn only when stderr is a terminal (see `harness::progress`).
    opts.progress = true;

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
    if cli.json.is_some() || cli.report.is_some() {
        let report = Report::new(machine, &opts, started, reports);
        if let Some(path) = &cli.json {
            report.write_json(path)?;
            eprintln!("wrote {}", path.display());
        }
        if let Some(dir) = &cli.report {
            eprintln!("wrote {}", html::write_report(&report, dir)?.display());
        }
    }
    Ok(clean)
}

/// The one file a command takes, or a usage error showing `usage`.
fn one_file<'c>(cli: &'c Cli, usage: &str) -> Result<&'c Path, LabError> {
    match cli.files.as_slice() {
        [file] => Ok(file),
        _ => Err(LabError::Usage(format!("usage: herdless-lab {usage}"))),
    }
}

/// `render FILE --report DIR`: the HTML report of a results file.
fn render(cli: &Cli, file: &Path) -> Result<bool, LabError> {
    let dir = cli
        .report
        .as_deref()
        .ok_or_else(|| LabError::Usage("usage: herdless-lab render FILE --report DIR".into()))?;
    let report = Report::read_json(file)?;
    eprintln!("wrote {}", html::write_report(&report, dir)?.display());
    Ok(true)
}

/// `compare A B`: B against A; `Ok(false)` (exit status 1) on a
/// regression if `--fail-on-regression`.
fn compare_files(cli: &Cli) -> Result<bool, LabError> {
    let [a, b] = cli.files.as_slice() else {
        return Err(LabError::Usage(
            "usage: herdless-lab compare A.json B.json [--all-metrics] [--fail-on-regression]"
                .into(),
        ));
    };
    let (ra, rb) = (Report::read_json(a)?, Report::read_json(b)?);
    let result = compare::compare(&ra, &rb, cli.all_metrics);
    emit(&format!(
        "A: {}\nB: {}\n{}",
        a.display(),
        b.display(),
        compare::render(&result, cli.all_metrics)
    ))?;
    Ok(!(cli.fail_on_regression && result.regressions() > 0))
}

/// Reads a `--json` results file back and summarises it: the CI check that
/// the lab's output parses against the current schema.
fn check_json(path: &Path) -> Result<bool, LabError> {
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
