//! What machine a run was measured on: cores, kernel release, CPU model and
//! the lab's version, for the report's header and for `compare` to notice
//! two runs from different machines.
//!
//! How busy the machine was while measuring is another question, answered
//! by [`disturbance`](super::disturbance).

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
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| cpu_model(&text))
            .unwrap_or_else(|| "unknown".into());
        Machine { cores, kernel, cpu_model, lab_version: env!("CARGO_PKG_VERSION").to_string() }
    }
}

/// The first `model name` (x86) or `Model`/`CPU part` (arm) of a cpuinfo.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "CPU part"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == *key).then(|| v.trim().to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_is_read_from_the_first_model_name() {
        let text = "processor\t: 0\nmodel name\t: Example CPU @ 3GHz\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(text).as_deref(), Some("Example CPU @ 3GHz"));
        assert_eq!(cpu_model("nothing here"), None);
    }

    #[test]
    fn this_machine_has_a_core_and_a_kernel() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty());
    }
}
