//! One measurement of `firecracker`: the case's snapshot restored in a
//! fresh Firecracker through one backend (Firecracker's File backend, one
//! of its example UFFD handlers, or `herdless-uffd` with some options),
//! timed from the `PUT /snapshot/load` request to the guest's first pass
//! over its whole working set, whose checksum must be the snapshot's.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::json;

use super::hugepages::Reservation;
use super::process::{Process, Vm};
use super::scratch::Scratch;
use super::snapshot::{self, check_pass, Snapshot};
use super::tools::{self, Tools};
use super::{Backend, Pages, Params};
use crate::harness::{Case, LabError, Sample};

/// How long a restored guest may take to print its first pass.
const FIRST_PASS_WITHIN: Duration = Duration::from_secs(60);

/// What one restore measured.
struct Restored {
    /// From the load request to the first pass line.
    time: Duration,
    /// The load request's round trip.
    load: Duration,
    /// The first pass, in the guest's TSC cycles.
    pass_cycles: u64,
    /// The vCPU thread's page faults by then.
    vcpu_faults: Option<u64>,
    /// `herdless-uffd --stats-json`, for its runs.
    stats: Option<serde_json::Value>,
}

/// A page-fault handler to start before Firecracker: which program, its
/// arguments after the socket and memory file, and where a herdless-uffd
/// writes its statistics.
struct HandlerRun {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
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
    let scratch = Scratch::new("restore")?;
    let herdless = |extra: &[&str]| {
        let stats = scratch.join("stats.json");
        let mut args: Vec<OsString> = vec!["--stats-json".into(), stats.clone().into()];
        args.extend(extra.iter().map(OsString::from));
        HandlerRun {
            name: "herdless-uffd",
            program: tools.herdless_uffd.clone(),
            args,
            stats: Some(stats),
        }
    };
    let handler = match backend {
        Backend::File => None,
        Backend::FcOnDemand => Some(example("uffd_on_demand_handler", &tools.on_demand)),
        Backend::FcFaultAll => Some(example("uffd_fault_all_handler", &tools.fault_all)),
        Backend::Herdless(extra) => Some(herdless(extra)),
        Backend::HerdlessPrefetch(extra) => {
            let trace = scratch.join("working-set.trace");
            write_file(&trace, &trace_of(tools, &snap, pages, &p)?)?;
            let mut run = herdless(extra);
            run.args.extend(["--prefetch".into(), trace.into()]);
            Some(run)
        }
    };
    let r = restore(tools, &snap, pages, &p, &scratch, handler)?;
    let mut sample = Sample::new()
        .with("time_ms", r.time.as_secs_f64() * 1e3)
        .with("pass_ms", tools::cycles_to_ms(r.pass_cycles))
        .with("load_ms", r.load.as_secs_f64() * 1e3);
    if let Some(faults) = r.vcpu_faults {
        sample = sample.with("vcpu_faults", faults as f64);
    }
    if let Some(stats) = &r.stats {
        let number = |key: &str| stats[key].as_f64();
        if let Some(faults) = number("faults") {
            sample = sample.with("handler_faults", faults);
        }
        if let Some(bytes) = number("bytes_copied") {
            sample = sample.with("copied_mib", bytes / f64::from(1 << 20));
        }
    }
    Ok(sample)
}

fn example(name: &'static str, program: &Path) -> HandlerRun {
    HandlerRun {
        name,
        program: program.to_path_buf(),
        args: Vec::new(),
        stats: None,
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    std::fs::write(path, bytes).map_err(|e| LabError::File {
        path: path.to_path_buf(),
        source: e,
    })
}

/// The working set of case `p` restored into `pages`, as `herdless-uffd
/// --record` writes it: recorded once (an untimed 4 KiB on-demand restore
/// into the same pages) and kept for the lab's lifetime.
fn trace_of(
    tools: &Tools,
    snap: &Snapshot,
    pages: Pages,
    p: &Params,
) -> Result<Arc<Vec<u8>>, LabError> {
    type Traces = Mutex<HashMap<(usize, usize, Pages), Arc<Vec<u8>>>>;
    static TRACES: OnceLock<Traces> = OnceLock::new();
    let key = (p.ws_mib, p.mem_mib, pages);
    let mut traces = TRACES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .map_err(|_| LabError::Panicked("the trace table".into()))?;
    if let Some(t) = traces.get(&key) {
        return Ok(Arc::clone(t));
    }
    let scratch = Scratch::new("record")?;
    let (trace, stats) = (scratch.join("recorded.trace"), scratch.join("stats.json"));
    let run = HandlerRun {
        name: "herdless-uffd",
        program: tools.herdless_uffd.clone(),
        args: vec![
            "--record".into(),
            trace.clone().into(),
            "--stats-json".into(),
            stats.clone().into(),
        ],
        stats: Some(stats),
    };
    restore(tools, snap, pages, p, &scratch, Some(run))?;
    let bytes = std::fs::read(&trace).map_err(|e| LabError::File {
        path: trace,
        source: e,
    })?;
    let bytes = Arc::new(bytes);
    traces.insert(key, Arc::clone(&bytes));
    Ok(bytes)
}

/// Restores `snap` once: the handler (if any) first, then Firecracker,
/// the load, the first pass; then both are stopped and the handler's exit
/// and statistics checked.
fn restore(
    tools: &Tools,
    snap: &Snapshot,
    pages: Pages,
    p: &Params,
    scratch: &Scratch,
    handler: Option<HandlerRun>,
) -> Result<Restored, LabError> {
    let _hugepages = match pages {
        Pages::Huge2M => Some(Reservation::at_least(p.mem_mib as u64 / 2)?),
        Pages::Small4K => None,
    };
    let socket = scratch.join("uffd.sock");
    let mut started = match &handler {
        Some(h) => {
            let mut args: Vec<OsString> =
                vec![socket.clone().into(), snap.memory_path.clone().into()];
            args.extend(h.args.iter().cloned());
            let log = scratch.join("handler.log");
            let mut process = Process::spawn(h.name, &h.program, &args, &log, false)?;
            wait_for_socket(&mut process, &socket, h.name)?;
            Some((h, process))
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
    let handler_said = |started: &Option<(&HandlerRun, Process)>| {
        started
            .as_ref()
            .map(|(h, process)| format!("; {}: [{}]", h.name, process.log_tail(3)))
            .unwrap_or_default()
    };
    let t0 = Instant::now();
    let loaded = vm
        .api
        .put("/snapshot/load", &load, FIRST_PASS_WITHIN)
        .map_err(|e| vm.explain(e));
    let load_time = t0.elapsed();
    let first = loaded.and_then(|()| {
        vm.nudge()?;
        vm.expect("PASS ", FIRST_PASS_WITHIN)
    });
    let (at, line) =
        first.map_err(|e| LabError::Sample(format!("{e}{}", handler_said(&started))))?;
    let pass_cycles = check_pass(&line, snap.checksum)?;
    let vcpu_faults = vm.vcpu_faults();
    vm.kill();
    let stats = match started.as_mut() {
        Some((h, process)) => finish_handler(h, process)?,
        None => None,
    };
    Ok(Restored {
        time: at.duration_since(t0),
        load: load_time,
        pass_cycles,
        vcpu_faults,
        stats,
    })
}

/// Waits for a handler's socket to appear (it binds before it accepts).
fn wait_for_socket(process: &mut Process, socket: &Path, name: &str) -> Result<(), LabError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        if let Some(status) = process.wait_exit(Duration::ZERO)? {
            return Err(LabError::Sample(format!(
                "{name} exited ({status}) before listening: [{}]",
                process.log_tail(3)
            )));
        }
        if Instant::now() >= deadline {
            return Err(LabError::Stuck {
                what: format!("{name}'s socket"),
                after: Duration::from_secs(10),
            });
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// After Firecracker is gone: a herdless-uffd must exit 0 on its own with
/// its statistics written and no error in them; Firecracker's examples do
/// not exit when the VMM does, and are killed.
fn finish_handler(
    h: &HandlerRun,
    process: &mut Process,
) -> Result<Option<serde_json::Value>, LabError> {
    let Some(stats) = &h.stats else {
        process.kill();
        return Ok(None);
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
    let text = std::fs::read_to_string(stats).map_err(|e| LabError::File {
        path: stats.clone(),
        source: e,
    })?;
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
    Ok(Some(json))
}
