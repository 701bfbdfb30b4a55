//! What the `firecracker` experiment runs, found from the environment:
//! the Firecracker binary, its two example UFFD handlers, the lab's guest
//! image and the `herdless-uffd` binary of this workspace; and whether this
//! machine can run a VM at all (`/dev/kvm`, userfaultfd for Firecracker).
//! A missing piece is the experiment's skip reason, saying how to get it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::harness::LabError;

/// The Firecracker binary (default: `firecracker` on `PATH`).
pub(crate) const FIRECRACKER_ENV: &str = "HERDLESS_FIRECRACKER";
/// The folder holding `uffd_on_demand_handler` and `uffd_fault_all_handler`
/// (default: the Firecracker binary's folder).
pub(crate) const HANDLERS_ENV: &str = "HERDLESS_FC_HANDLERS_DIR";
/// The guest ELF built by `crates/herdless-lab/firecracker/guest/build-guest.sh`.
pub(crate) const GUEST_ENV: &str = "HERDLESS_FC_GUEST";
/// The `herdless-uffd` binary (default: beside the lab's own binary, where
/// `cargo build --release -p herdless-pager --bin herdless-uffd` puts it).
pub(crate) const UFFD_ENV: &str = "HERDLESS_UFFD";

/// The programs and the guest image of a run.
#[derive(Debug)]
pub(crate) struct Tools {
    /// Firecracker.
    pub(crate) firecracker: PathBuf,
    /// Firecracker's example `uffd_on_demand_handler`.
    pub(crate) on_demand: PathBuf,
    /// Firecracker's example `uffd_fault_all_handler`.
    pub(crate) fault_all: PathBuf,
    /// The guest ELF.
    pub(crate) guest: PathBuf,
    /// `herdless-uffd`.
    pub(crate) herdless_uffd: PathBuf,
}

/// The experiment's `requires` check: `Err(reason)` names everything
/// missing and how to get it.
pub(crate) fn check() -> Result<(), String> {
    tools().map(|_| ())
}

/// The tools, looked up once per process.
pub(crate) fn tools() -> Result<&'static Tools, String> {
    static TOOLS: OnceLock<Result<Tools, String>> = OnceLock::new();
    TOOLS.get_or_init(find).as_ref().map_err(Clone::clone)
}

/// [`tools`] as a measurement's error.
pub(crate) fn tools_for_measuring() -> Result<&'static Tools, LabError> {
    tools().map_err(LabError::Usage)
}

fn find() -> Result<Tools, String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("the lab's guest is an x86-64 program; this is another architecture".into());
    }
    let mut missing = Vec::new();
    if let Err(e) = std::fs::File::options().read(true).write(true).open("/dev/kvm") {
        missing.push(format!("/dev/kvm cannot be opened ({e}): needs a KVM host and root"));
    }
    // Firecracker creates the guest's userfaultfd: root, or access to
    // /dev/userfaultfd.
    if !rustix::process::geteuid().is_root()
        && std::fs::File::options().read(true).write(true).open("/dev/userfaultfd").is_err()
    {
        missing.push("Firecracker needs userfaultfd: run as root".into());
    }
    let firecracker = match env_path(FIRECRACKER_ENV) {
        Some(p) => executable(&p, FIRECRACKER_ENV, &mut missing).then_some(p),
        None => {
            let found = on_path("firecracker");
            if found.is_none() {
                missing.push(format!(
                    "no Firecracker: set {FIRECRACKER_ENV} (build it with \
                     crates/herdless-lab/firecracker/build-firecracker.sh)"
                ));
            }
            found
        }
    };
    let handlers = env_path(HANDLERS_ENV)
        .or_else(|| firecracker.as_deref().and_then(Path::parent).map(Path::to_path_buf));
    let mut handler = |name: &str| {
        let p = handlers.as_ref().map(|d| d.join(name))?;
        executable(&p, HANDLERS_ENV, &mut missing).then_some(p)
    };
    let on_demand = handler("uffd_on_demand_handler");
    let fault_all = handler("uffd_fault_all_handler");
    let guest = match env_path(GUEST_ENV) {
        Some(p) if p.is_file() => Some(p),
        Some(p) => {
            missing.push(format!("{GUEST_ENV}={}: no such file", p.display()));
            None
        }
        None => {
            missing.push(format!(
                "no guest image: set {GUEST_ENV} (build it with \
                 crates/herdless-lab/firecracker/guest/build-guest.sh)"
            ));
            None
        }
    };
    let herdless_uffd = env_path(UFFD_ENV).or_else(|| {
        // Beside the lab's binary; a test binary sits one folder deeper,
        // in `deps/`.
        let exe = std::env::current_exe().ok()?;
        let dir = exe.parent()?;
        let dir = match dir.file_name() {
            Some(name) if name == "deps" => dir.parent()?,
            _ => dir,
        };
        Some(dir.join("herdless-uffd"))
    });
    let herdless_uffd = herdless_uffd.filter(|p| {
        executable(p, UFFD_ENV, &mut missing) || {
            missing.push(
                "build it: cargo build --release -p herdless-pager --bin herdless-uffd".into(),
            );
            false
        }
    });
    match (firecracker, on_demand, fault_all, guest, herdless_uffd) {
        (Some(firecracker), Some(on_demand), Some(fault_all), Some(guest), Some(herdless_uffd))
            if missing.is_empty() =>
        {
            Ok(Tools { firecracker, on_demand, fault_all, guest, herdless_uffd })
        }
        _ => Err(missing.join("; ")),
    }
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Whether `path` is an executable file; if not, says so in `missing`.
fn executable(path: &Path, var: &str, missing: &mut Vec<String>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => true,
        Ok(_) => {
            missing.push(format!("{} is not an executable file ({var})", path.display()));
            false
        }
        Err(e) => {
            missing.push(format!("{}: {e} ({var})", path.display()));
            false
        }
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path: OsString = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// The time-stamp counter's frequency in kHz, measured once against the
/// monotonic clock. The guest prints its times in TSC cycles: under KVM
/// without TSC scaling (Firecracker restores on the host it snapshotted
/// on), the guest's counter runs at the host's rate.
pub(crate) fn tsc_khz() -> u64 {
    static KHZ: OnceLock<u64> = OnceLock::new();
    *KHZ.get_or_init(|| {
        let (t0, c0) = (Instant::now(), rdtsc());
        std::thread::sleep(Duration::from_millis(200));
        let (c1, t1) = (rdtsc(), Instant::now());
        let micros = t1.duration_since(t0).as_micros().max(1) as u64;
        (c1.wrapping_sub(c0)).saturating_mul(1000) / micros
    })
}

/// Milliseconds in `cycles` of the TSC.
pub(crate) fn cycles_to_ms(cycles: u64) -> f64 {
    cycles as f64 / tsc_khz().max(1) as f64
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter; it has no memory
    // effects and every x86-64 CPU has it.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    0 // never used: `find` refuses other architectures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_named_with_the_variable_that_points_at_it() {
        let mut missing = Vec::new();
        assert!(!executable(Path::new("/no/such/firecracker"), FIRECRACKER_ENV, &mut missing));
        assert!(missing[0].contains("/no/such/firecracker"), "{missing:?}");
        assert!(missing[0].contains(FIRECRACKER_ENV), "{missing:?}");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_tsc_runs_at_a_plausible_rate() {
        let khz = tsc_khz();
        assert!((100_000..20_000_000).contains(&khz), "{khz} kHz");
        assert!((cycles_to_ms(khz) - 1.0).abs() < 1e-9);
    }
}
