//! The progress bar `run_experiment` draws: one bar per experiment, one
//! step per measurement (case × variant × repetition, warm-up included).
//!
//! The bar is drawn on stderr, and only when [`RunOptions::progress`] asks
//! for it and stderr is a terminal: piped or redirected output (CI logs,
//! `--json`) stays clean. When the experiment ends the bar is replaced by
//! one line saying how many measurements it took and how long.
//!
//! [`RunOptions::progress`]: super::RunOptions::progress

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One experiment's bar; hidden unless asked for and stderr is a terminal.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar named `name` over `steps` measurements, drawn if `visible` and
    /// stderr is a terminal.
    pub fn new(name: &str, steps: u64, visible: bool) -> Progress {
        if !visible || !std::io::stderr().is_terminal() {
            return Progress { bar: ProgressBar::hidden() };
        }
        let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{prefix:.bold} [{bar:30}] {pos}/{len} {elapsed_precise} (eta {eta}) {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(name.to_string());
        Progress { bar }
    }

    /// Says what is being measured now.
    pub fn doing(&self, what: String) {
        if !self.bar.is_hidden() {
            self.bar.set_message(what);
        }
    }

    /// `steps` more measurements than announced (a row measured again).
    pub fn more(&self, steps: u64) {
        self.bar.inc_length(steps);
    }

    /// One measurement done.
    pub fn step(&self) {
        self.bar.inc(1);
    }

    /// Replaces the bar with a one-line summary.
    pub fn finish(&self) {
        if self.bar.is_hidden() {
            return;
        }
        let style = ProgressStyle::with_template("{prefix:.bold}: {pos} measurements in {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        self.bar.set_style(style);
        self.bar.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_bar_counts_silently() {
        let p = Progress::new("toy", 3, false);
        p.doing("case 1".into());
        p.step();
        p.finish();
        assert!(p.bar.is_hidden());
        assert_eq!(p.bar.position(), 1);
    }
}
