//! The command line as a user meets it: each verb takes only its own flags
//! (usage errors exit with 2), bad output paths fail before anything is
//! measured, `--json` creates its folders, a closed stdout ends the output
//! quietly with status 0, and nothing printed is wider than 100 columns.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const WIDTH: usize = 100;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herdless-lab-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herdless-lab"))
        .args(args)
        .output()
        .expect("the lab binary runs")
}

/// The lines of `text` wider than [`WIDTH`] columns (characters, not
/// bytes: `µ`, `×`, `±` are one column each).
fn too_wide(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .map(|l| (l.chars().count(), l))
        .filter(|(w, _)| *w > WIDTH)
        .collect()
}

#[test]
fn a_smoke_run_of_every_experiment_fits_100_columns_and_json_creates_its_folders() {
    let dir = scratch("width");
    let json = dir.join("not/yet/there/out.json");
    let out = lab(&["all", "--smoke", "--json", json.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(too_wide(&stdout), Vec::<(usize, &str)>::new());
    assert!(
        stdout.contains("verdicts:") && stdout.contains("targets:"),
        "{stdout}"
    );
    assert!(json.is_file(), "--json created not/yet/there/");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn help_and_listings_fit_100_columns() {
    let mut texts = Vec::new();
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["all", "--help"],
        &["list", "--help"],
        &["compare", "--help"],
        &["render", "--help"],
        &["summary", "--help"],
        &["check-json", "--help"],
        &["list"],
        &["list", "--full"],
    ] {
        let out = lab(args);
        assert!(out.status.success(), "{args:?}");
        texts.push((args, String::from_utf8(out.stdout).unwrap()));
    }
    for (args, text) in &texts {
        assert_eq!(too_wide(text), Vec::<(usize, &str)>::new(), "{args:?}");
    }
    let help = &texts[0].1;
    for verb in [
        "run",
        "all",
        "list",
        "compare",
        "render",
        "summary",
        "check-json",
    ] {
        assert!(help.contains(&format!("  {verb} ")), "{help}");
    }
}

#[test]
fn usage_errors_exit_with_2_and_each_verb_takes_only_its_own_flags() {
    for args in [
        &["run"][..],
        &["run", "no-such-experiment"],
        &["run", "herd", "--smoke", "--full"],
        &["run", "herd", "--reps", "0"],
        &["run", "herd", "--all-metrics"],
        &["all", "herd"],
        &["list", "--json", "x.json"],
        &["compare", "a.json", "b.json", "--smoke"],
        &["compare", "a.json"],
        &["check-json", "a.json", "--report", "dir"],
        &["summary"],
        &["render", "a.json"],
        &["--smoke"],
    ] {
        let out = lab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = lab(&["run", "no-such-experiment"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("futex-wake") && stderr.contains("all"),
        "{stderr}"
    );
}

/// `herdless-lab` alone starts nothing (the quick suite takes minutes): it
/// prints the help on stderr and exits with 2, as cargo and git do.
#[test]
fn no_command_prints_the_help_and_exits_with_2() {
    let out = lab(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing measured, no table printed");
    assert!(
        stderr.starts_with("Reproduces the seeds' experiments"),
        "{stderr}"
    );
    for verb in ["run", "all", "list", "compare"] {
        assert!(stderr.contains(&format!("  {verb} ")), "{stderr}");
    }
    assert!(stderr.contains("herdless-lab all"), "{stderr}");
    assert_eq!(too_wide(&stderr), Vec::<(usize, &str)>::new());
}

#[test]
fn an_experiment_named_as_a_command_points_at_run() {
    let out = lab(&["futex-wake", "--smoke"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("herdless-lab run futex-wake"), "{stderr}");
    let out = lab(&["frobnicate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown command 'frobnicate'"), "{stderr}");
}

#[test]
fn bad_output_paths_fail_before_anything_is_measured() {
    let dir = scratch("bad-paths");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("out.json");
    // (flag, path, the path the error names)
    let cases = [
        ("--json", under_file.clone(), file.clone()),
        ("--json", dir.clone(), dir.clone()),
        ("--plot", file.join("plots"), file.join("plots")),
        ("--report", file.join("report"), file.join("report")),
    ];
    for (flag, path, named) in &cases {
        let out = lab(&["run", "all", "--smoke", flag, path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{flag} {}: {stderr}",
            path.display()
        );
        // The header is printed when measuring starts: nothing was.
        assert!(out.stdout.is_empty(), "{flag}: measured before failing");
        assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
        assert!(
            stderr.starts_with(&format!("herdless-lab: {}: ", named.display())),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A pipe whose reading end is already closed: the first write to the
/// other end fails with `EPIPE`, as when `head` has exited.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for `pipe` to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: `pipe` returned two fresh descriptors this test now owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

#[test]
fn writing_into_a_closed_pipe_exits_quietly_with_0() {
    let dir = scratch("closed-stdout");
    let json = dir.join("out.json");
    for args in [
        &["list"][..],
        &["run", "herd", "--smoke"],
        // With a file to write, the run goes on and writes it.
        &["run", "herd", "--smoke", "--json", json.to_str().unwrap()],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_herdless-lab"))
            .args(args)
            .stdout(Stdio::from(closed_pipe()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("pipe") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
    assert!(json.is_file(), "the JSON was written all the same");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn table_keeps_only_the_tables_it_names_and_a_miss_names_every_table() {
    let dir = scratch("table");
    let json = dir.join("out.json");
    let out = lab(&[
        "run",
        "locks",
        "rwsem",
        "--smoke",
        "--reps",
        "1",
        "--table",
        "MUTEX THROUGHPUT",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("left out"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let tables: Vec<(&str, &str)> = report["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| {
            e["sections"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |s| (e["name"].as_str().unwrap(), s["title"].as_str().unwrap()))
        })
        .collect();
    assert_eq!(tables.len(), 1, "{tables:?}");
    assert_eq!(tables[0].0, "locks");
    assert!(tables[0].1.starts_with("mutex throughput"), "{tables:?}");

    let out = lab(&["run", "locks", "--smoke", "--table", "no such table"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "measured before failing");
    assert!(
        stderr.contains("\"no such table\"") && stderr.contains("locks: bounded queue"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
