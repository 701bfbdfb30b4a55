//! A skipped test is never mistaken for a pass: `common/skip.rs` prints the
//! reason past cargo's capture when the test skips and lists every skipped
//! test when the test binary exits. Checked here on a child run of this
//! binary.

mod common;

use std::process::Command;

use common::skip;

const REASON: &str = "the precondition this helper pretends is missing";

#[test]
#[ignore = "a helper: a_skipped_test_is_printed_when_it_skips_and_listed_when_the_binary_exits \
            runs it in a child process"]
fn a_helper_that_skips() {
    skip::skip(REASON);
    skip::skip("a second reason for the same test"); // still one skipped test
}

/// Runs the helper in a child process of this binary; returns its stdout
/// and stderr.
fn run_helper(extra: &[&str]) -> (String, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "a_helper_that_skips"])
        .args(extra)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    (stdout, stderr)
}

#[test]
fn a_skipped_test_is_printed_when_it_skips_and_listed_when_the_binary_exits() {
    for extra in [&[][..], &["--test-threads=1"][..]] {
        let (stdout, stderr) = run_helper(extra);
        // libtest itself counts it as passed...
        assert!(stdout.contains("test result: ok. 1 passed"), "{stdout}");
        // ...so the skip says so, once when it happens (through the capture)...
        assert!(
            stderr.contains(&format!("skipped: a_helper_that_skips: {REASON}\n")),
            "{extra:?}: {stderr}"
        );
        // ...and once more at the end, counted once, with its first reason.
        let summary = format!(
            "SKIPPED 1 test of skip_report (counted as passed above):\n  \
             a_helper_that_skips: {REASON}\n"
        );
        assert!(stderr.contains(&summary), "{extra:?}: {stderr}");
        assert_eq!(stderr.matches("SKIPPED").count(), 1, "{stderr}");
    }
}

#[test]
fn a_run_without_skips_prints_no_summary() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_refusal_of_an_unknown_mode_names_the_choices",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("SKIPPED"), "{stderr}");
    assert!(!stderr.contains("skipped:"), "{stderr}");
}

#[test]
fn the_refusal_of_an_unknown_mode_names_the_choices() {
    // Also the test the previous one runs: it skips nothing.
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_helper_that_reads_the_mode", "--ignored"])
        .env(skip::UFFD_ENV, "sometimes")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a bad value fails the tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("HERDLESS_TEST_UFFD=\"sometimes\": expected auto, user-mode-only or none"),
        "{stdout}"
    );
}

#[test]
#[ignore = "a helper: the_refusal_of_an_unknown_mode_names_the_choices runs it in a child process"]
fn a_helper_that_reads_the_mode() {
    let _ = skip::unless_userfaultfd();
}
