//! The `--json` output: the [`Report`] written and read back with
//! serde_json, every error naming the file.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::disturbance::Conditions;
use super::machine::Machine;
use super::outcome::Outcome;
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
        let text = std::fs::read_to_string(path).map_err(LabError::file(path))?;
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
        let mut report: Report = serde_json::from_str(&text).map_err(json)?;
        report.fill_outcomes();
        report
            .check_shape()
            .map_err(|message| LabError::Inconsistent {
                path: path.to_path_buf(),
                message,
            })?;
        Ok(report)
    }

    /// Gives every judged ratio without an `outcome` (files of labs before
    /// it was written) the one its `met` and `confidence` make.
    fn fill_outcomes(&mut self) {
        let ratios = self
            .experiments
            .iter_mut()
            .flat_map(|e| &mut e.sections)
            .flat_map(|s| &mut s.ratios);
        for r in ratios.filter(|r| r.outcome.is_none()) {
            r.outcome = r.met.zip(r.confidence).map(|(met, c)| Outcome::of(met, c));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::outcome::Confidence;
    use crate::harness::toy::Toy;

    #[test]
    fn a_file_without_outcomes_reads_with_them_derived() {
        let mut report = Toy::default().report();
        let ratio = &mut report.experiments[0].sections[0].ratios[0];
        assert_eq!(ratio.outcome, Some(Outcome::Met));
        // As an earlier lab wrote it: a low-confidence verdict, no outcome.
        ratio.confidence = Some(Confidence::Low);
        let mut json = serde_json::to_value(&report).unwrap();
        let ratios = json["experiments"][0]["sections"][0]["ratios"]
            .as_array_mut()
            .unwrap();
        for r in ratios.iter_mut() {
            r.as_object_mut().unwrap().remove("outcome");
        }
        let path =
            std::env::temp_dir().join(format!("herdless-lab-{}-outcomes.json", std::process::id()));
        std::fs::write(&path, json.to_string()).unwrap();
        let back = Report::read_json(&path);
        std::fs::remove_file(&path).unwrap();
        let ratios = &back.unwrap().experiments[0].sections[0].ratios;
        assert_eq!(ratios[0].outcome, Some(Outcome::Undecided));
        assert_eq!(ratios[1].outcome, None, "no target, no outcome");
    }
}
