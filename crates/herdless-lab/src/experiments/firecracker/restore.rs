//! One measurement of `firecracker`: the case's snapshot restored in a
//! fresh Firecracker through one backend (Firecracker's File backend, one
//! of its example UFFD handlers, or `herdless-uffd` with some options),
//! timed from the `PUT /snapshot/load` request to the guest's first pass
//! over its whole working set, whose checksum must be the snapshot's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herdless_pager::vmm::Hugepages;
use serde_json::json;

use super::api::reworded;
use super::guest;
use super::process::{Process, Vm};
use super::snapshot::{self, Snapshot};
use super::tools::{self, Tools};
use super::{Backend, Pages, Params};
use crate::harness::scratch::{scratch_dir, Memo};
use crate::harness::{Case, LabError, Sample};
use tempfile::TempDir;

/// Bytes of one userfaultfd message (`struct uffd_msg`).
const UFFD_MSG: u64 = 32;

/// How long a restored guest may take to print its first pass.
const FIRST_PASS_WITHIN: Duration = Duration::from_secs(60);

/// A page-fault handler to start before Firecracker: which program, its
/// arguments after the socket and memory file, and where a herdless-uffd
/// writes its statistics.
pub(super) struct HandlerRun {
    name: &'static str,
    program: PathBuf,
    pub(super) args: Vec<OsString>,
    /// The memory it serves, instead of the snapshot's file (an object
    /// URL).
    pub(super) memory: Option<OsString>,
    /// Added to its environment (an object store's endpoint and keys).
    pub(super) env: Vec<(String, String)>,
    stats: Option<PathBuf>,
}

/// Measures case `case` restored through `backend` into `pages`.
pub(crate) fn measure(
    backend: Backend,
    pages: Pages,
    case: &Case<Params>,
) -> Result<Sample, LabError> {
    let p = case.params;
    let tools = tools::tools_for_measuring()?;
    let snap = snapshot::snapshot(&p)?;
    let scratch = scratch_dir("fc-restore")?;
    let herdless = |extra: &[&str]| {
        let mut run = herdless_uffd(tools, scratch.path().join("stats.json"));
        run.args.extend(extra.iter().map(OsString::from));
        run
    };
    let handler = match backend {
        Backend::File => None,
        Backend::FcOnDemand => Some(example("uffd_on_demand_handler", &tools.on_demand)),
        Backend::FcFaultAll => Some(example("uffd_fault_all_handler", &tools.fault_all)),
        Backend::Herdless(extra) => Some(herdless(extra)),
        Backend::HerdlessPrefetch(extra) => {
            let trace = scratch.path().join("working-set.trace");
            let recorded = trace_of(tools, &snap, pages, &p)?;
            std::fs::write(&trace, &*recorded).map_err(LabError::file(&trace))?;
            let mut run = herdless(extra);
            run.args.extend(["--prefetch".into(), trace.into()]);
            Some(run)
        }
    };
    restore(tools, &snap, pages, &p, &scratch, handler)
}

fn example(name: &'static str, program: &Path) -> HandlerRun {
    HandlerRun {
        name,
        program: program.to_path_buf(),
        args: Vec::new(),
        memory: None,
        env: Vec::new(),
        stats: None,
    }
}

/// `herdless-uffd`, writing its statistics to `stats`.
pub(super) fn herdless_uffd(tools: &Tools, stats: PathBuf) -> HandlerRun {
    HandlerRun {
        name: "herdless-uffd",
        program: tools.herdless_uffd.clone(),
        args: vec!["--stats-json".into(), stats.clone().into()],
        memory: None,
        env: Vec::new(),
        stats: Some(stats),
    }
}

/// The working set of case `p` restored into `pages`, as `herdless-uffd
/// --record` writes it: recorded once (an untimed 4 KiB on-demand restore
/// into the same pages) and kept for the lab's lifetime.
pub(super) fn trace_of(
    tools: &Tools,
    snap: &Snapshot,
    pages: Pages,
    p: &Params,
) -> Result<Arc<Vec<u8>>, LabError> {
    static TRACES: Memo<(usize, usize, usize, Pages), Arc<Vec<u8>>> = Memo::new();
    TRACES.get((p.ws_mib, p.mem_mib, p.balloon_mib, pages), || {
        let scratch = scratch_dir("fc-record")?;
        let (trace, stats) = (
            scratch.path().join("recorded.trace"),
            scratch.path().join("stats.json"),
        );
        let mut run = herdless_uffd(tools, stats);
        run.args
            .splice(0..0, ["--record".into(), trace.clone().into()]);
        restore(tools, snap, pages, p, &scratch, Some(run))?;
        let bytes = std::fs::read(&trace).map_err(LabError::file(&trace))?;
        Ok(Arc::new(bytes))
    })
}

/// Restores `snap` once: the handler (if any) first, then Firecracker,
/// the load, the first pass; then both are stopped and the handler's exit
/// and statistics checked. The sample is timed from the load request to
/// the first pass line.
pub(super) fn restore(
    tools: &Tools,
    snap: &Snapshot,
    pages: Pages,
    p: &Params,
    scratch: &TempDir,
    handler: Option<HandlerRun>,
) -> Result<Sample, LabError> {
    if pages == Pages::Huge2M {
        // Reserved for the rest of the lab's run: a pool shrunk and grown
        // again between restores hands out pages this VM's host must fault
        // in afresh (free page reporting), which a host with a boot-time
        // pool never pays.
        let needed = (p.mem_mib / 2) as u64;
        Hugepages::reserve_until_exit(needed).map_err(|why| {
            LabError::Unavailable(format!("{needed} free 2 MiB hugepages needed: {why}"))
        })?;
    }
    let socket = scratch.path().join("uffd.sock");
    // The whole restore, as whoever starts it sees it: from the first
    // process started (the handler, or Firecracker) to the first pass.
    let spawned = Instant::now();
    let mut started = match &handler {
        Some(h) => {
            let memory = h.memory.clone().unwrap_or(snap.memory_path.clone().into());
            let mut args: Vec<OsString> = vec![socket.clone().into(), memory];
            args.extend(h.args.iter().cloned());
            let log = scratch.path().join("handler.log");
            let mut process =
                Process::spawn_with_env(h.name, &h.program, &args, &h.env, &log, false)?;
            wait_for_socket(&mut process, &socket, h.name)?;
            // What it read starting up (the loader reading libraries...).
            let read_before = process.bytes_read();
            Some((h, process, read_before))
        }
        None => None,
    };
    let mut vm = Vm::start(&tools.firecracker, scratch.path())?;
    let backend = match &handler {
        Some(_) => json!({"backend_type": "Uffd", "backend_path": socket}),
        None => json!({"backend_type": "File", "backend_path": snap.memory_path}),
    };
    let mut load =
        json!({"snapshot_path": snap.state_path, "mem_backend": backend, "resume_vm": true});
    if pages == Pages::Huge2M {
        load["huge_pages"] = json!("2M");
    }
    let handler_said = |started: &Option<(&HandlerRun, Process, Option<u64>)>| {
        started
            .as_ref()
            .map(|(h, process, _)| format!("; {}: [{}]", h.name, process.log_tail(3)))
            .unwrap_or_default()
    };
    // Firecracker resumes the VM whether or not the handler took the
    // handoff: a handler that refused (and exited) would leave the load,
    // then the guest, waiting forever.
    let mut handler_alive = || match started.as_mut() {
        Some((h, process, _)) => match process.wait_exit(Duration::ZERO)? {
            Some(status) => Err(LabError::Sample(format!("{} exited ({status})", h.name))),
            None => Ok(()),
        },
        None => Ok(()),
    };
    let t0 = Instant::now();
    let loaded = vm
        .api
        .send(
            reqwest::Method::PUT,
            "/snapshot/load",
            &load,
            FIRST_PASS_WITHIN,
            &mut handler_alive,
        )
        .map_err(|e| vm.explain(e));
    let load_time = t0.elapsed();
    // The nudge starts the first pass (and, with a balloon, the inflation
    // right before it).
    let mut inflate_cycles = None;
    let first = loaded.and_then(|()| {
        vm.nudge()?;
        if p.balloon_mib > 0 {
            let (_, line) =
                vm.expect_watching("BALLOON ", FIRST_PASS_WITHIN, &mut handler_alive)?;
            inflate_cycles = Some(guest::balloon(&line, (p.balloon_mib as u64) << 8)?);
        }
        vm.expect_watching("PASS ", FIRST_PASS_WITHIN, &mut handler_alive)
    });
    let (at, line) =
        first.map_err(|e| reworded(e, |e| format!("{e}{}", handler_said(&started))))?;
    let pass = guest::pass(&line, snap.checksum)?;
    let vcpu_faults = vm.vcpu_faults();
    vm.kill();
    let mut sample = Sample::new()
        .with("time_ms", at.duration_since(t0).as_secs_f64() * 1e3)
        .with("start_ms", at.duration_since(spawned).as_secs_f64() * 1e3)
        .with("pass_ms", tools::cycles_to_ms(pass.cycles))
        .with("load_ms", load_time.as_secs_f64() * 1e3);
    if let Some(cycles) = inflate_cycles {
        sample = sample
            .with("inflate_ms", tools::cycles_to_ms(cycles))
            .with("zero_read_ms", tools::cycles_to_ms(pass.tail_cycles));
    }
    // The File backend's faults are the kernel's (page-cache faults of the
    // vCPU thread); a UFFD handler's are the fault messages it answered
    // (KVM resolves a fault on userfaultfd memory in its async page-fault
    // worker, so the vCPU thread's count misses those).
    let figures = match started.as_mut() {
        Some((h, process, read_before)) => finish_handler(h, process, *read_before)?,
        None => HandlerFigures {
            faults: vcpu_faults.map(|n| n as f64),
            ..HandlerFigures::default()
        },
    };
    let ms = |s: f64| s * 1e3;
    let figures = [
        ("faults", figures.faults),
        ("copied_mib", figures.copied.map(|b| b / f64::from(1 << 20))),
        ("setup_ms", figures.set_up_s.map(ms)),
        ("handoff_ms", figures.handed_off_s.map(ms)),
    ];
    for (name, value) in figures {
        if let Some(v) = value {
            sample = sample.with(name, v);
        }
    }
    Ok(sample)
}

/// Waits until a handler listens on its socket. The file appears at
/// `bind`, and Firecracker connecting between `bind` and `listen` is
/// refused (and gives up); probing with a connection of our own would be
/// taken for the VMM's, so the kernel's table of Unix sockets says.
fn wait_for_socket(process: &mut Process, socket: &Path, name: &str) -> Result<(), LabError> {
    let within = Duration::from_secs(30);
    let deadline = Instant::now() + within;
    while !listening(socket) {
        if let Some(status) = process.wait_exit(Duration::ZERO)? {
            return Err(LabError::Sample(format!(
                "{name} exited ({status}) before listening: [{}]",
                process.log_tail(3)
            )));
        }
        if Instant::now() >= deadline {
            return Err(LabError::Stuck {
                what: format!("{name} listening on {}", socket.display()),
                after: within,
            });
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// Whether a socket listens at `path`: its line in `/proc/net/unix` has
/// `__SO_ACCEPTCON` (0x10000) in its flags.
fn listening(path: &Path) -> bool {
    std::fs::read_to_string("/proc/net/unix").is_ok_and(|table| listens_in(&table, path))
}

fn listens_in(table: &str, path: &Path) -> bool {
    const ACCEPTING: u32 = 0x1_0000;
    let path = path.to_string_lossy();
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() >= 8
            && fields[7..].join(" ") == path
            && u32::from_str_radix(fields[3], 16).is_ok_and(|flags| flags & ACCEPTING != 0)
    })
}

/// After Firecracker is gone: a herdless-uffd must exit 0 on its own with
/// its statistics written and no error in them. Firecracker's examples do
/// not exit when the VMM does, and are killed. They count nothing, but
/// read each event with one `read(2)` of one 32-byte `uffd_msg` and read
/// nothing else once started (the memory file is mapped, the handoff is a
/// `recvmsg`), so the bytes the kernel counts them reading since they
/// listened, over 32, are the fault messages they answered. Returns the
/// fault messages it answered and (herdless-uffd only) the rest of
/// [`HandlerFigures`], where known.
fn finish_handler(
    h: &HandlerRun,
    process: &mut Process,
    read_before: Option<u64>,
) -> Result<HandlerFigures, LabError> {
    let Some(stats) = &h.stats else {
        let read = process.bytes_read().zip(read_before).map(|(a, b)| a - b);
        process.kill();
        return Ok(HandlerFigures {
            faults: read.map(|bytes| (bytes / UFFD_MSG) as f64),
            ..HandlerFigures::default()
        });
    };
    let status = process.wait_exit(Duration::from_secs(10))?;
    if !status.is_some_and(|s| s.success()) {
        let what = status.map_or("did not exit after the VMM did".into(), |s| s.to_string());
        return Err(LabError::Sample(format!(
            "{}: {what}: [{}]",
            h.name,
            process.log_tail(3)
        )));
    }
    let text = std::fs::read_to_string(stats).map_err(LabError::file(stats))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| LabError::Json {
        path: stats.clone(),
        source: e,
    })?;
    let errors = json["errors"].as_array().map_or(0, Vec::len);
    if errors > 0 {
        return Err(LabError::Sample(format!(
            "{} reported errors: {}",
            h.name, json["errors"]
        )));
    }
    Ok(HandlerFigures {
        faults: json["faults"].as_f64(),
        copied: json["bytes_copied"].as_f64(),
        set_up_s: json["set_up_for_s"].as_f64(),
        handed_off_s: json["handed_off_after_s"].as_f64(),
    })
}

/// What a handler's run showed, where known.
#[derive(Default)]
struct HandlerFigures {
    /// Fault messages answered.
    faults: Option<f64>,
    /// Bytes copied into guest memory (herdless-uffd).
    copied: Option<f64>,
    /// From its start to listening (herdless-uffd's `set_up_for_s`).
    set_up_s: Option<f64>,
    /// From listening to Firecracker's handoff (`handed_off_after_s`).
    handed_off_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_listening_socket_listens() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                     0000000001: 00000002 00000000 00000000 0001 01 11 /tmp/a/bound.sock\n\
                     0000000002: 00000002 00000000 00010000 0001 01 12 /tmp/a/uffd.sock\n";
        assert!(listens_in(table, Path::new("/tmp/a/uffd.sock")));
        assert!(!listens_in(table, Path::new("/tmp/a/bound.sock")));
        assert!(!listens_in(table, Path::new("/tmp/a/uffd")));
    }

    #[test]
    fn a_listener_of_this_process_is_seen() {
        let dir = crate::harness::scratch::scratch_dir("fc-listen-test").unwrap();
        let path = dir.path().join("s.sock");
        assert!(!listening(&path));
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(listening(&path));
    }
}
