//! The lab guest's side (`crates/herdless-lab/firecracker/guest/guest.c`):
//! its command line, the lines it prints on the serial console, and the
//! checksum of its working set, computed here the same way so that a page
//! restored wrong fails the measurement.

use std::time::Duration;

use super::tools;
use super::Params;
use crate::harness::LabError;

/// Where the guest's working set starts in guest-physical memory.
pub(crate) const WS_BASE_MIB: usize = 64;
/// The guest's busy-wait between two passes, in which the VM is paused.
pub(crate) const GAP: Duration = Duration::from_millis(100);

/// The guest command line for case `p`.
pub(crate) fn boot_args(p: &Params) -> String {
    format!(
        "ws_mib={} ws_base_mib={WS_BASE_MIB} gap_ms={} tsc_khz={} balloon_mib={}",
        p.ws_mib,
        GAP.as_millis(),
        tools::tsc_khz(),
        p.balloon_mib
    )
}

/// A `PASS <n> <checksum> <cycles> <tail cycles>` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pass {
    /// TSC cycles of the whole pass.
    pub(crate) cycles: u64,
    /// Of those, the cycles reading the ballooned tail.
    pub(crate) tail_cycles: u64,
}

/// Parses a pass line and checks its checksum against `checksum`.
pub(crate) fn pass(line: &str, checksum: u64) -> Result<Pass, LabError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let ["PASS", _, sum, cycles, tail] = fields[..] else {
        return Err(LabError::Sample(format!("not a pass line: {line:?}")));
    };
    let (Ok(cycles), Ok(tail_cycles)) = (cycles.parse(), tail.parse()) else {
        return Err(LabError::Sample(format!("not a pass line: {line:?}")));
    };
    if sum != format!("{checksum:016x}") {
        return Err(LabError::Sample(format!(
            "the guest read {sum} from its working set, the snapshot holds {checksum:016x}: \
             a page was restored wrong"
        )));
    }
    Ok(Pass { cycles, tail_cycles })
}

/// The TSC cycles of a `BALLOON <pages> <cycles>` line, checked to name
/// `pages` pages.
pub(crate) fn balloon(line: &str, pages: u64) -> Result<u64, LabError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    match fields[..] {
        ["BALLOON", n, cycles] if n.parse() == Ok(pages) => {
            cycles.parse().map_err(|_| LabError::Sample(format!("not a balloon line: {line:?}")))
        }
        _ => Err(LabError::Sample(format!(
            "the guest ballooned otherwise than asked ({pages} pages): {line:?}"
        ))),
    }
}

/// Word `i` of the guest's working set (guest.c's `pattern`).
fn pattern(i: u64) -> u64 {
    let mut z = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i + 1);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

/// FNV-1a over the working set's words (guest.c's `checksum`), the last
/// `zero_tail_mib` MiB reading as zeros (ballooned).
pub(crate) fn checksum(ws_mib: usize, zero_tail_mib: usize) -> u64 {
    let words = (ws_mib as u64) << 17;
    let kept = words - ((zero_tail_mib.min(ws_mib) as u64) << 17);
    (0..words).fold(0xcbf2_9ce4_8422_2325u64, |h, i| {
        let word = if i < kept { pattern(i) } else { 0 };
        (h ^ word).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_changes_when_a_word_reads_zero() {
        // Every word is odd, so a page of zeros always shows.
        assert!((0..100_000).all(|i| pattern(i) & 1 == 1));
        assert_ne!(checksum(1, 0), checksum(2, 0));
        assert_ne!(checksum(2, 0), checksum(2, 1));
        assert_eq!(checksum(2, 5), checksum(2, 2), "at most all of it");
    }

    #[test]
    fn a_pass_line_is_checked_against_the_snapshot() {
        let sum = checksum(1, 0);
        let line = format!("PASS 3 {sum:016x} 1234 56");
        let want = Pass { cycles: 1234, tail_cycles: 56 };
        assert_eq!(pass(&line, sum).unwrap(), want);
        let wrong = pass(&format!("PASS 3 {:016x} 1234 0", sum ^ 1), sum);
        assert!(wrong.unwrap_err().to_string().contains("restored wrong"));
        assert!(pass("PASS 3", sum).is_err());
        assert!(pass(&format!("PASS 3 {sum:016x} x 0"), sum).is_err());
        assert!(pass("READY 0 0", sum).is_err());
    }

    #[test]
    fn a_balloon_line_must_name_the_pages_asked_for() {
        assert_eq!(balloon("BALLOON 4096 777", 4096).unwrap(), 777);
        assert!(balloon("BALLOON 4095 777", 4096).is_err());
        assert!(balloon("PASS 1", 4096).is_err());
    }
}
