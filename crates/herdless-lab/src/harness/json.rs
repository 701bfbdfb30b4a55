//! The `--json` output: the [`Report`] with the machine it ran on, written
//! and read back with serde_json.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::report::{ExperimentReport, Machine, Report, SCHEMA};
use super::runner::RunOptions;
use super::LabError;

impl Machine {
    /// Describes this machine: cores, kernel release, CPU model.
    pub fn detect() -> Machine {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| cpu_model(&text))
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cores,
            kernel,
            cpu_model,
            lab_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// The first `model name` (x86) or `Model`/`CPU part` (arm) of a cpuinfo.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "CPU part"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == *key).then(|| v.trim().to_string())
        })
    })
}

impl Report {
    /// A report of `experiments`, run on `machine` with `opts`, started at
    /// `started`.
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
            experiments,
        }
    }

    /// Writes the report as pretty-printed JSON.
    pub fn write_json(&self, path: &Path) -> Result<(), LabError> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").map_err(|source| LabError::File {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads a report written by [`Report::write_json`].
    pub fn read_json(path: &Path) -> Result<Report, LabError> {
        let text = std::fs::read_to_string(path).map_err(|source| LabError::File {
            path: path.to_path_buf(),
            source,
        })?;
        // Look at the schema number first, so that a file of another
        // schema gets that error rather than a field-level decoding error.
        #[derive(serde::Deserialize)]
        struct Header {
            schema: u32,
        }
        let header: Header = serde_json::from_str(&text)?;
        if header.schema != SCHEMA {
            return Err(LabError::Schema {
                path: path.to_path_buf(),
                found: header.schema,
                expected: SCHEMA,
            });
        }
        let report: Report = serde_json::from_str(&text)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_is_read_from_the_first_model_name() {
        let text = "processor\t: 0\nmodel name\t: Example CPU @ 3GHz\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(text).as_deref(), Some("Example CPU @ 3GHz"));
        assert_eq!(cpu_model("nothing here"), None);
    }

    #[test]
    fn this_machine_has_a_core_and_a_kernel() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty());
    }
}
