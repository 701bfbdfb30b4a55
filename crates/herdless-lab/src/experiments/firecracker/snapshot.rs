//! The one snapshot every restore of a case starts from: the lab's guest
//! booted in Firecracker, its working set filled and read once, paused
//! between two passes and snapshotted (`Full`). Taken once per case and
//! kept for the lab's lifetime as two unlinked files (in `/dev/shm` when
//! there is one), reachable by path through `/proc/<lab>/fd`, so nothing
//! is left behind when the lab exits.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::json;

use super::process::Vm;
use super::scratch::Scratch;
use super::tools::{self, Tools};
use super::Params;
use crate::harness::LabError;

/// Where the guest's working set starts in guest-physical memory.
pub(crate) const WS_BASE_MIB: usize = 64;
/// The guest's busy-wait between two passes, in which the VM is paused.
pub(crate) const GAP: Duration = Duration::from_millis(100);

/// A snapshot of the guest.
pub(crate) struct Snapshot {
    _state: File,
    _memory: File,
    /// The VM state file, as a path Firecracker can open.
    pub(crate) state_path: PathBuf,
    /// The guest memory file, as a path the handlers can open.
    pub(crate) memory_path: PathBuf,
    /// The working set's checksum every pass must print.
    pub(crate) checksum: u64,
}

/// The snapshot of case `p`, taken on first use.
pub(crate) fn snapshot(p: &Params) -> Result<Arc<Snapshot>, LabError> {
    type Snapshots = Mutex<HashMap<(usize, usize), Arc<Snapshot>>>;
    static SNAPSHOTS: OnceLock<Snapshots> = OnceLock::new();
    let mut snapshots = SNAPSHOTS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .map_err(|_| LabError::Panicked("the snapshot table".into()))?;
    if let Some(s) = snapshots.get(&(p.ws_mib, p.mem_mib)) {
        return Ok(Arc::clone(s));
    }
    let tools = tools::tools_for_measuring()?;
    let checksum = working_set_checksum(p.ws_mib);
    let mut attempt = 0;
    let snapshot = loop {
        attempt += 1;
        match take(tools, p, checksum) {
            Ok(s) => break Arc::new(s),
            Err(Taken::Late(ms)) if attempt < 3 => {
                eprintln!("firecracker: paused {ms:.0} ms after a pass line, maybe mid-pass; again")
            }
            Err(Taken::Late(ms)) => {
                return Err(LabError::Sample(format!(
                    "three boots paused the guest too late after a pass ({ms:.0} ms): machine \
                     too busy to snapshot between two passes"
                )))
            }
            Err(Taken::Failed(e)) => return Err(e),
        }
    };
    snapshots.insert((p.ws_mib, p.mem_mib), Arc::clone(&snapshot));
    Ok(snapshot)
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

/// The guest command line for case `p`.
pub(crate) fn boot_args(p: &Params) -> String {
    format!(
        "ws_mib={} ws_base_mib={WS_BASE_MIB} gap_ms={} tsc_khz={}",
        p.ws_mib,
        GAP.as_millis(),
        tools::tsc_khz()
    )
}

fn take(tools: &Tools, p: &Params, checksum: u64) -> Result<Snapshot, Taken> {
    let scratch = Scratch::new("boot")?;
    let mut vm = Vm::start(&tools.firecracker, scratch.path())?;
    let api_time = Duration::from_secs(10);
    vm.api.put(
        "/boot-source",
        &json!({"kernel_image_path": tools.guest, "boot_args": boot_args(p)}),
        api_time,
    )?;
    vm.api.put(
        "/machine-config",
        &json!({"vcpu_count": 1, "mem_size_mib": p.mem_mib}),
        api_time,
    )?;
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
    check_pass(&first.1, checksum).map_err(|e| vm.explain(e))?;
    // Pause right after a pass, in the guest's busy-wait before the next.
    let (line_at, _) = vm.expect("PASS ", GAP * 20)?;
    vm.api.patch("/vm", &json!({"state": "Paused"}), api_time)?;
    let late = line_at.elapsed();
    if late > GAP / 2 {
        return Err(Taken::Late(late.as_secs_f64() * 1e3));
    }
    let dir = Path::new("/dev/shm");
    let dir = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        std::env::temp_dir()
    };
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
        checksum,
    })
}

/// Opens `path`, unlinks it, and returns the file and a path to it through
/// `/proc/<lab>/fd` (another process can open that while the lab lives).
fn keep_unlinked(path: &Path) -> Result<(File, PathBuf), LabError> {
    let file = File::open(path).map_err(|e| LabError::File {
        path: path.to_path_buf(),
        source: e,
    })?;
    std::fs::remove_file(path).map_err(|e| LabError::File {
        path: path.to_path_buf(),
        source: e,
    })?;
    let proc_path = PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        file.as_raw_fd()
    ));
    Ok((file, proc_path))
}

/// Checks a `PASS <n> <checksum> <cycles>` line; returns its cycles.
pub(crate) fn check_pass(line: &str, checksum: u64) -> Result<u64, LabError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (sum, cycles) = match fields[..] {
        ["PASS", _, sum, cycles] => (sum, cycles.parse::<u64>().ok()),
        _ => ("", None),
    };
    let Some(cycles) = cycles else {
        return Err(LabError::Sample(format!("not a pass line: {line:?}")));
    };
    if sum != format!("{checksum:016x}") {
        return Err(LabError::Sample(format!(
            "the guest read {sum} from its working set, the snapshot holds {checksum:016x}: \
             a page was restored wrong"
        )));
    }
    Ok(cycles)
}

/// Word `i` of the guest's working set (guest.c's `pattern`).
fn pattern(i: u64) -> u64 {
    let mut z = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i + 1);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

/// FNV-1a over the working set's words (guest.c's `checksum`).
pub(crate) fn working_set_checksum(ws_mib: usize) -> u64 {
    let words = (ws_mib as u64) << 17;
    (0..words).fold(0xcbf2_9ce4_8422_2325u64, |h, i| {
        (h ^ pattern(i)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_changes_when_a_word_reads_zero() {
        // Every word is odd, so a page of zeros always shows.
        assert!((0..100_000).all(|i| pattern(i) & 1 == 1));
        assert_ne!(working_set_checksum(1), working_set_checksum(2));
    }

    #[test]
    fn a_pass_line_is_checked_against_the_snapshot() {
        let sum = working_set_checksum(1);
        assert_eq!(
            check_pass(&format!("PASS 3 {sum:016x} 1234"), sum).unwrap(),
            1234
        );
        let wrong = check_pass(&format!("PASS 3 {:016x} 1234", sum ^ 1), sum);
        assert!(wrong.unwrap_err().to_string().contains("restored wrong"));
        assert!(check_pass("PASS 3", sum).is_err());
        assert!(check_pass("READY 0 0", sum).is_err());
    }
}
