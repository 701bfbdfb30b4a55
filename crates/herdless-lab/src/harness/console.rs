//! Writing the lab's text to stdout and its notes to stderr, so that
//! `herdless-lab … | head` behaves: once the reader has closed the pipe,
//! nothing more is written and nothing is reported, the way `cat` or
//! `ripgrep` stop.
//!
//! The Rust runtime ignores `SIGPIPE`, so a write to a closed pipe returns
//! `BrokenPipe`; [`Console`] turns that into "closed" instead of an error.

use std::io::Write;

use super::LabError;

/// Stdout, remembering whether its reader went away.
#[derive(Debug, Default)]
pub struct Console {
    closed: bool,
}

impl Console {
    /// A console on this process's stdout.
    pub fn new() -> Console {
        Console::default()
    }

    /// Writes `text` to stdout and flushes it; a closed pipe marks the
    /// console closed (this and later writes are dropped), any other error
    /// is returned.
    pub fn print(&mut self, text: &str) -> Result<(), LabError> {
        if self.closed {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(LabError::os("writing to stdout", e)),
        }
    }

    /// Whether stdout's reader has gone away.
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

/// Writes one line to stderr (`wrote FILE`, a warning); errors are
/// ignored: stderr is where errors would go.
pub fn note(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
