//! The `--json` output: the [`Report`] written and read back with
//! serde_json, every error naming the file.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::disturbance::Conditions;
use super::machine::Machine;
use super::output::OutputFile;
use super::report::{ExperimentReport, Report, SCHEMA};
use super::runner::RunOptions;
use super::LabError;

impl Report {
    /// A report of `experiments`, run on `machine` with `opts`, started at
    /// `started`; its [`Conditions`] unknown until set.
    pub fn new(
        machine: Machine,
        opts: &RunOptions,
        started: SystemTime,
        experiments: Vec<ExperimentReport>,
    ) -> Report {
        Report {
            schema: SCHEMA,
            machine,
            suite: opts.suite,
            reps: opts.reps,
            warmup_reps: opts.warmup,
            herdless_stats: herdless::stats::ENABLED,
            started_unix: started
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            conditions: Conditions::default(),
            experiments,
        }
    }

    /// Writes the report as pretty-printed JSON to `path` (its folder
    /// created if missing).
    pub fn write_json(&self, path: &Path) -> Result<(), LabError> {
        self.write_json_to(OutputFile::claim(path)?).map(drop)
    }

    /// Writes the report as pretty-printed JSON into a claimed file.
    pub fn write_json_to(&self, out: OutputFile) -> Result<std::path::PathBuf, LabError> {
        let text = serde_json::to_string_pretty(self).map_err(|source| LabError::Json {
            path: out.path().to_path_buf(),
            source,
        })?;
        out.write((text + "\n").as_bytes())
    }

    /// Reads a report written by [`Report::write_json`].
    pub fn read_json(path: &Path) -> Result<Report, LabError> {
        let text = std::fs::read_to_string(path).map_err(|source| LabError::File {
            path: path.to_path_buf(),
            source,
        })?;
        let json = |source| LabError::Json {
            path: path.to_path_buf(),
            source,
        };
        // Look at the schema number first, so that a file of another
        // schema gets that error rather than a field-level decoding error.
        #[derive(serde::Deserialize)]
        struct Header {
            schema: u32,
        }
        let header: Header = serde_json::from_str(&text).map_err(json)?;
        if header.schema != SCHEMA {
            return Err(LabError::Schema {
                path: path.to_path_buf(),
                found: header.schema,
                expected: SCHEMA,
            });
        }
        let report: Report = serde_json::from_str(&text).map_err(json)?;
        report
            .check_shape()
            .map_err(|message| LabError::Inconsistent {
                path: path.to_path_buf(),
                message,
            })?;
        Ok(report)
    }

    /// Checks what the renderers rely on and serde cannot: every section
    /// has a metric, one cell per variant in each case, and one ratio
    /// value per case.
    pub fn check_shape(&self) -> Result<(), String> {
        for e in &self.experiments {
            for s in &e.sections {
                let at = |what: String| Err(format!("{} / {}: {what}", e.name, s.title));
                if s.metrics.is_empty() {
                    return at("no metrics".into());
                }
                for c in &s.cases {
                    if c.cells.len() != s.variants.len() {
                        return at(format!(
                            "case {}: {} cells for {} variants",
                            c.label,
                            c.cells.len(),
                            s.variants.len()
                        ));
                    }
                }
                for r in &s.ratios {
                    if r.values.len() != s.cases.len() {
                        return at(format!(
                            "ratio {}: {} values for {} cases",
                            r.name(),
                            r.values.len(),
                            s.cases.len()
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
