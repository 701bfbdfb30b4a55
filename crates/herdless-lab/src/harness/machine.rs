//! What machine a run was measured on: cores, kernel release, CPU model and
//! the lab's version, for the report's header and for `compare` to notice
//! two runs from different machines.
//!
//! How busy the machine was while measuring is another question, answered
//! by [`disturbance`](super::disturbance).

use procfs::Current;
use serde::{Deserialize, Serialize};

/// The machine a report was measured on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// `std::thread::available_parallelism`.
    pub cores: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// The lab's version.
    pub lab_version: String,
}

impl Machine {
    /// Describes this machine: cores, kernel release, CPU model.
    pub fn detect() -> Machine {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        // The first `model name` (x86) or `Model`/`CPU part` (arm).
        let cpuinfo = procfs::CpuInfo::current().ok();
        let cpu_model = cpuinfo
            .as_ref()
            .and_then(|c| {
                c.model_name(0)
                    .or(c.fields.get("Model").map(String::as_str))
            })
            .or_else(|| cpuinfo.as_ref()?.get_field(0, "CPU part"))
            .unwrap_or("unknown")
            .to_string();
        Machine {
            cores,
            kernel,
            cpu_model,
            lab_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// "1 core" or "N cores": the CPUs the lab may run on (fewer than
    /// the machine has under `taskset`).
    pub fn cores_text(&self) -> String {
        match self.cores {
            1 => "1 core".to_string(),
            n => format!("{n} cores"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_has_a_core_and_a_kernel() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty() && m.cpu_model != "unknown");
    }

    #[test]
    fn one_core_is_said_in_the_singular() {
        let mut m = Machine::detect();
        m.cores = 1;
        assert_eq!(m.cores_text(), "1 core");
        m.cores = 16;
        assert_eq!(m.cores_text(), "16 cores");
    }
}
