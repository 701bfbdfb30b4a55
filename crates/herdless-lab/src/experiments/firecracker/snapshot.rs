//! The one snapshot every restore of a case starts from: the lab's guest
//! booted in Firecracker (with a balloon device if the case balloons), its
//! working set filled and read once, paused between two passes and
//! snapshotted (`Full`). Taken once per case and
//! kept for the lab's lifetime as two unlinked files (in `/dev/shm` when
//! there is one), reachable by path through `/proc/<lab>/fd`, so nothing
//! is left behind when the lab exits.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::guest::{self, GAP};
use super::process::Vm;
use super::tools::{self, Tools};
use super::Params;
use crate::harness::scratch::{self, scratch_dir, Memo};
use crate::harness::LabError;

/// A snapshot of the guest.
pub(crate) struct Snapshot {
    _state: File,
    _memory: File,
    /// The VM state file, as a path Firecracker can open.
    pub(crate) state_path: PathBuf,
    /// The guest memory file, as a path the handlers can open.
    pub(crate) memory_path: PathBuf,
    /// The working set's checksum every pass after a restore must print
    /// (the ballooned tail, if any, reading zeros).
    pub(crate) checksum: u64,
}

/// The snapshot of case `p`, taken on first use.
pub(crate) fn snapshot(p: &Params) -> Result<Arc<Snapshot>, LabError> {
    static SNAPSHOTS: Memo<(usize, usize, usize), Arc<Snapshot>> = Memo::new();
    SNAPSHOTS.get((p.ws_mib, p.mem_mib, p.balloon_mib), || {
        let tools = tools::tools_for_measuring()?;
        let checksum = guest::checksum(p.ws_mib, 0);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match take(tools, p, checksum) {
                Ok(s) => return Ok(Arc::new(s)),
                Err(Taken::Late(ms)) if attempt < 3 => eprintln!(
                    "firecracker: paused {ms:.0} ms after a pass line, maybe mid-pass; again"
                ),
                Err(Taken::Late(ms)) => {
                    return Err(LabError::Sample(format!(
                        "three boots paused the guest too late after a pass ({ms:.0} ms): \
                         machine too busy to snapshot between two passes"
                    )))
                }
                Err(Taken::Failed(e)) => return Err(e),
            }
        }
    })
}

enum Taken {
    /// The pause came so long after a pass ended that it may have stopped
    /// the next pass half-way (ms after the line).
    Late(f64),
    Failed(LabError),
}

impl From<LabError> for Taken {
    fn from(e: LabError) -> Self {
        Taken::Failed(e)
    }
}

fn take(tools: &Tools, p: &Params, checksum: u64) -> Result<Snapshot, Taken> {
    let scratch = scratch_dir("fc-boot")?;
    let mut vm = Vm::start(&tools.firecracker, scratch.path())?;
    let api_time = Duration::from_secs(10);
    vm.api.put(
        "/boot-source",
        &json!({"kernel_image_path": tools.guest, "boot_args": guest::boot_args(p)}),
        api_time,
    )?;
    vm.api.put(
        "/machine-config",
        &json!({"vcpu_count": 1, "mem_size_mib": p.mem_mib}),
        api_time,
    )?;
    if p.balloon_mib > 0 {
        // The target is set now; the guest inflates only when the lab
        // nudges it after a restore.
        vm.api.put(
            "/balloon",
            &json!({"amount_mib": p.balloon_mib, "deflate_on_oom": false,
                    "stats_polling_interval_s": 0}),
            api_time,
        )?;
    }
    vm.api.put(
        "/actions",
        &json!({"action_type": "InstanceStart"}),
        api_time,
    )?;
    let (_, ready) = vm.expect("READY ", Duration::from_secs(60))?;
    let printed = ready.split_whitespace().nth(1).unwrap_or("");
    if printed != format!("{checksum:016x}") {
        return Err(vm
            .explain(LabError::Sample(format!(
                "the guest's working set sums to {printed}, the lab computes {checksum:016x}: \
                 another guest program? ({})",
                tools.guest.display()
            )))
            .into());
    }
    let first = vm.expect("PASS ", GAP * 20)?;
    guest::pass(&first.1, checksum).map_err(|e| vm.explain(e))?;
    // Pause right after a pass, in the guest's busy-wait before the next.
    let (line_at, _) = vm.expect("PASS ", GAP * 20)?;
    let pause = json!({"state": "Paused"});
    vm.api
        .send(Method::PATCH, "/vm", &pause, api_time, &mut || Ok(()))?;
    let late = line_at.elapsed();
    if late > GAP / 2 {
        return Err(Taken::Late(late.as_secs_f64() * 1e3));
    }
    let dir = scratch::tmpfs_dir();
    let name = scratch
        .path()
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let state = dir.join(format!("{name}.vmstate"));
    let memory = dir.join(format!("{name}.mem"));
    vm.api.put(
        "/snapshot/create",
        &json!({"snapshot_type": "Full", "snapshot_path": state, "mem_file_path": memory}),
        Duration::from_secs(120),
    )?;
    vm.kill();
    let (state_file, state_path) = keep_unlinked(&state)?;
    let (memory_file, memory_path) = keep_unlinked(&memory)?;
    Ok(Snapshot {
        _state: state_file,
        _memory: memory_file,
        state_path,
        memory_path,
        checksum: guest::checksum(p.ws_mib, p.balloon_mib),
    })
}

/// Opens `path`, unlinks it, and returns the file and a path to it through
/// `/proc/<lab>/fd` (another process can open that while the lab lives).
fn keep_unlinked(path: &Path) -> Result<(File, PathBuf), LabError> {
    let file = File::open(path).map_err(LabError::file(path))?;
    std::fs::remove_file(path).map_err(LabError::file(path))?;
    let proc_path = scratch::fd_path(&file);
    Ok((file, proc_path))
}
