//! `herdless-uffd` never destroys a file it was given (issue 22): an
//! output (`--record`, `--stats-json`) that names the memory file, a trace
//! it reads, the socket or the other output is a usage error (exit 2), in
//! any spelling; a refusal for any other reason leaves every output as it
//! was; a handler killed while serving leaves the old outputs whole; a
//! finished one replaces them whole. Every file is checked byte for byte.
//! And every usage error exits 2.

mod restore_support;

use std::path::Path;
use std::process::Command;

use restore_support::files::Files;
use restore_support::*;

/// Runs `herdless-uffd args...` in `dir`, giving up on a VMM after a
/// moment (a refusal exits long before); its exit status and standard
/// error.
fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_herdless-uffd"))
        .current_dir(dir)
        .args(args)
        .args(["--accept-timeout", "1"])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_issue_repro_an_output_over_the_memory_file_is_refused_and_it_stays_whole() {
    let files = Files::new("repro");
    // herdless-uffd taken.sock vm.mem --record vm.mem
    for option in ["--record", "--stats-json"] {
        let (code, err) = run_in(&files.dir, &["taken.sock", "vm.mem", option, "vm.mem"]);
        assert_eq!(code, Some(2), "{option}: {err}");
        assert!(
            err.contains(&format!("{option} vm.mem: that is the memory file")),
            "{err}"
        );
        files.intact(option, &[]);
    }
    let _ = std::fs::remove_dir_all(&files.dir);
}

#[test]
fn an_output_naming_an_input_or_the_other_output_is_a_usage_error_in_any_spelling() {
    let files = Files::new("collisions");
    let d = &files.dir;
    std::os::unix::fs::symlink("vm.mem", d.join("mem-link")).unwrap();
    std::fs::hard_link(d.join("vm.mem"), d.join("mem-hard")).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    let abs_mem = d.join("vm.mem");
    let abs_mem = abs_mem.to_str().unwrap();
    let cases: [(&[&str], &str); 11] = [
        (&["s", "vm.mem", "--record", "./vm.mem"], "the memory file"),
        (&["s", "vm.mem", "--record", abs_mem], "the memory file"),
        (
            &["s", "./vm.mem", "--record", "sub/../vm.mem"],
            "the memory file",
        ),
        (
            &["s", "vm.mem", "--stats-json", "mem-link"],
            "the memory file",
        ),
        (
            &["s", "mem-link", "--stats-json", "vm.mem"],
            "the memory file",
        ),
        (&["s", "vm.mem", "--record", "mem-hard"], "the memory file"),
        (
            &[
                "s",
                "vm.mem",
                "--prefetch",
                "ws.trace",
                "--record",
                "./ws.trace",
            ],
            "the --prefetch trace",
        ),
        (
            &[
                "s",
                "vm.mem",
                "--populate=ws.trace",
                "--stats-json",
                "ws.trace",
            ],
            "the --populate trace",
        ),
        (&["s", "vm.mem", "--record", "s"], "the socket"),
        (
            &["taken.sock", "vm.mem", "--record", "taken.sock"],
            "the socket",
        ),
        (
            &[
                "s",
                "vm.mem",
                "--record",
                "old.json",
                "--stats-json",
                "./old.json",
            ],
            "the --record output",
        ),
    ];
    for (args, what) in cases {
        let (code, err) = run_in(d, args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains("refusing to write over it") && err.contains(what),
            "{args:?}: {err}"
        );
        files.intact(&format!("{args:?}"), &["mem-link", "mem-hard", "sub"]);
    }
    let _ = std::fs::remove_dir_all(&files.dir);
}

#[test]
fn a_refusal_for_any_other_reason_leaves_every_output_as_it_was() {
    let files = Files::new("other-refusals");
    let d = &files.dir;
    let outputs = ["--record", "ws.trace", "--stats-json", "old.json"];
    let with = |head: &[&str]| -> Vec<String> {
        head.iter()
            .chain(outputs.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let cases: [(Vec<String>, i32, &str); 6] = [
        (with(&["taken.sock", "vm.mem"]), 1, "already exists"),
        (with(&["s", "no-such.mem"]), 1, "memory file"),
        (
            with(&["s", "vm.mem", "--prefetch", "nope.trace"]),
            1,
            "trace nope.trace",
        ),
        (
            with(&["s", "vm.mem", "--handlers", "0"]),
            2,
            "at least one handler",
        ),
        (
            with(&["s", "vm.mem", "--fault-around", "3000"]),
            2,
            "not a power of two",
        ),
        // A mistyped output path: refused, nothing created.
        (
            vec!["s", "vm.mem", "--record", "no-such-dir/ws.trace"]
                .into_iter()
                .map(String::from)
                .collect(),
            1,
            "its directory",
        ),
    ];
    for (args, want, what) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err) = run_in(d, &args);
        assert_eq!(code, Some(want), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
        files.intact(&format!("{args:?}"), &[]);
    }
    let _ = std::fs::remove_dir_all(&files.dir);
}

#[test]
fn a_handler_killed_while_serving_leaves_the_old_outputs_and_a_finished_one_replaces_them() {
    let Some(mem) = guest_memory(&[256 * PAGE]) else {
        return;
    };
    let files = Files::new("killed");
    let d = &files.dir;
    let (memory, bytes) = (d.join("vm.mem"), files.kept[0].1.clone());
    let args = ["--record", "ws.trace", "--stats-json", "old.json"];
    let abs = |name: &str| d.join(name).to_str().unwrap().to_string();
    let (trace, stats) = (abs("ws.trace"), abs("old.json"));
    let args_abs = ["--record", &trace, "--stats-json", &stats];
    assert_eq!(args.len(), args_abs.len());

    // Killed (SIGKILL) in the middle of serving: the old files stand.
    let handler = start(&d.join("sock"), &memory, &args_abs);
    let conn = mem.handoff(&handler.socket).unwrap();
    let mut buf = vec![0u8; PAGE];
    let base = mem.regions()[0].base;
    for p in [3, 9, 200] {
        mem.read(base + p * PAGE, &mut buf).unwrap();
        assert!(buf == bytes[p * PAGE..(p + 1) * PAGE]);
    }
    let pid = rustix::process::Pid::from_raw(handler.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let (status, _, _) = handler.finish();
    assert_eq!(status.code(), None, "killed");
    drop(conn);
    std::fs::remove_file(d.join("sock")).unwrap();
    files.intact("killed while serving", &[]);
    drop(mem);

    // Finished: both replaced whole, nothing left beside them.
    let Some(mem) = guest_memory(&[256 * PAGE]) else {
        return;
    };
    let handler = start(&d.join("sock"), &memory, &args_abs);
    let conn = mem.handoff(&handler.socket).unwrap();
    let base = mem.regions()[0].base;
    for p in [5, 6, 100] {
        mem.read(base + p * PAGE, &mut buf).unwrap();
    }
    drop(conn);
    handler.finish_ok();
    let t = herdless_pager::restore::Trace::read(Path::new(&trace)).unwrap();
    let want = herdless_pager::restore::Trace::from_offsets(
        PAGE as u64,
        bytes.len() as u64,
        [5, 6, 100].map(|p| (p * PAGE) as u64),
    );
    assert_eq!(t, want);
    let json = read_json(Path::new(&stats));
    assert_eq!(json["recorded_pages"].as_u64(), Some(3), "{json}");
    let names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(names.is_empty(), "temporary files left: {names:?}");
    assert_eq!(std::fs::read(&memory).unwrap(), bytes, "the memory file");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn every_usage_error_exits_2() {
    let files = Files::new("usage");
    let cases: [&[&str]; 9] = [
        &["s", "vm.mem", "--fault-around", "3000"],
        &["s", "vm.mem", "--fault-around", "4M"],
        &["s", "vm.mem", "--fault-around", "64x"],
        &["s", "vm.mem", "--handlers", "0"],
        &["s", "vm.mem", "--handlers", "100000"],
        &[
            "s",
            "vm.mem",
            "--prefetch",
            "ws.trace",
            "--prefetch-threads",
            "0",
        ],
        &["s", "vm.mem", "--prefetch", "ws.trace", "--copy-all"],
        &["s", "vm.mem", "--socket-mode", "1777"],
        &["s", "vm.mem", "--handoff-timeout", "-1"],
    ];
    for args in cases {
        let (code, err) = run_in(&files.dir, args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("error"), "{args:?}: {err}");
        files.intact(&format!("{args:?}"), &[]);
    }
    let _ = std::fs::remove_dir_all(&files.dir);
}

#[test]
fn populate_takes_a_trace_only_after_an_equals_sign() {
    let files = Files::new("populate");
    // `--populate SOCKET MEMORY_FILE`: the socket is the socket.
    let (code, err) = run_in(&files.dir, &["--populate", "s", "vm.mem"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("listening on s") && err.contains("no VMM connected"),
        "{err}"
    );
    let (code, err) = run_in(&files.dir, &["--populate=ws.trace", "s", "vm.mem"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("listening on s"), "{err}");
    files.intact("populate", &[]);
    let _ = std::fs::remove_dir_all(&files.dir);
}

#[test]
fn the_pack_a_record_writes_is_checked_like_any_output_and_never_replaces_an_input() {
    let mut files = Files::new("pack-outputs");
    let d = files.dir.clone();
    // A pack being read (beside the prefetch trace), and a memory file
    // named as a pack would be.
    files.keep("ws.trace.pages", b"a pack".to_vec());
    std::os::unix::fs::symlink("vm.mem", d.join("rec.pages")).unwrap();
    let cases: [(&[&str], &str); 5] = [
        // --record rec writes rec.pages, which is the memory file.
        (
            &["s", "vm.mem", "--record", "rec"],
            "--record's pages rec.pages: that is the memory file",
        ),
        (
            &["s", "rec.pages", "--record", "rec"],
            "that is the memory file",
        ),
        // Over the pack the prefetch reads.
        (
            &[
                "s",
                "vm.mem",
                "--prefetch",
                "ws.trace",
                "--stats-json",
                "ws.trace.pages",
            ],
            "the --prefetch trace's pages",
        ),
        // Over the other outputs and the socket.
        (
            &[
                "s",
                "vm.mem",
                "--record",
                "new.trace",
                "--stats-json",
                "new.trace.pages",
            ],
            "the --record's pages output",
        ),
        (&["x.pages", "vm.mem", "--record", "x"], "the socket"),
    ];
    for (args, what) in cases {
        let (code, err) = run_in(&d, args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains("refusing to write over it") && err.contains(what),
            "{args:?}: {err}"
        );
        files.intact(&format!("{args:?}"), &["rec.pages"]);
    }
    // With --no-pack none is written or read: not a collision (it waits
    // for a VMM that never comes, and writes nothing).
    let (code, err) = run_in(&d, &["s", "vm.mem", "--record", "rec", "--no-pack"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no VMM connected"), "{err}");
    files.intact("--no-pack", &["rec.pages"]);
    let _ = std::fs::remove_dir_all(&d);
}
