//! The lab's one error type.

use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

/// Everything that can go wrong in a lab run. Variants of experiments return
/// it from a measurement; the runner records it and goes on with the others.
#[derive(Debug, Error)]
pub enum LabError {
    /// The command line named an experiment the lab does not have.
    #[error("unknown experiment \"{name}\"; known: {known}, all, list")]
    UnknownExperiment {
        /// What was asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A request the lab cannot carry out (e.g. a results file holding no
    /// tables).
    #[error("{0}")]
    Usage(String),
    /// A results file was written with another JSON schema.
    #[error("{}: schema {found}, this lab reads schema {expected}", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// Its schema number.
        found: u32,
        /// The schema this lab writes and reads.
        expected: u32,
    },
    /// An experiment's definition is inconsistent (a bug in the lab).
    #[error("bad experiment definition: {0}")]
    Definition(String),
    /// A measurement did not make progress in time.
    #[error("{what}: no progress after {after:?}")]
    Stuck {
        /// What was being waited for.
        what: String,
        /// How long the lab waited.
        after: Duration,
    },
    /// A thread of a measurement panicked.
    #[error("{0} panicked")]
    Panicked(String),
    /// A variant this machine cannot run (a resource it lacks: hugepages
    /// that cannot be reserved...): the runner records the cell as
    /// skipped, with this reason, and does not count it as an error.
    #[error("skipped: {0}")]
    Unavailable(String),
    /// A sample broke the section's metric declaration.
    #[error("bad sample: {0}")]
    Sample(String),
    /// A system call failed.
    #[error("{what}: {source}")]
    Os {
        /// What the lab was doing.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A file could not be written or read.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A results file parses but is inconsistent (e.g. a table without
    /// metrics, or a ratio with more values than cases).
    #[error("{}: inconsistent results: {message}", path.display())]
    Inconsistent {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A results file's JSON could not be encoded or decoded.
    #[error("{}: JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What serde_json said.
        source: serde_json::Error,
    },
    /// Drawing a chart failed.
    #[error("plot {}: {message}", path.display())]
    Plot {
        /// The chart file.
        path: PathBuf,
        /// What the plotting library said.
        message: String,
    },
}

impl LabError {
    /// Whether this is a write to a closed pipe (`| head` exited): the
    /// reader has what it wanted, so the lab stops quietly.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, LabError::Os { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// A failed read or write of `path`, for `map_err`.
    pub fn file(path: &Path) -> impl Fn(std::io::Error) -> Self + '_ {
        |source| LabError::File {
            path: path.to_path_buf(),
            source,
        }
    }

    /// An OS error while doing `what`.
    pub fn os(what: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Os {
            what: what.into(),
            source,
        }
    }
}
