//! 2 MiB hugetlbfs pages for a restore with `"huge_pages": "2M"`: enough
//! free pages in the kernel's pool, reserved for one restore and given
//! back after it.
//!
//! A [`Reservation`] raises `vm.nr_hugepages` by only the pages missing
//! (root) and lowers it by the same number when dropped, so whatever the
//! pool held before (another program's pages included) is left as it was,
//! and a lab that stops never leaves memory locked away for longer than
//! one restore.

use crate::harness::LabError;

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

/// Pages added to the pool for one restore, removed again on drop.
#[derive(Debug)]
pub(crate) struct Reservation {
    added: u64,
}

impl Reservation {
    /// Makes sure `pages` 2 MiB pages are free, adding the missing ones to
    /// the pool.
    pub(crate) fn at_least(pages: u64) -> Result<Reservation, LabError> {
        if meminfo("Hugepagesize:") != Some(2048) {
            return Err(LabError::Sample(
                "the kernel's default huge page is not 2 MiB (Hugepagesize in /proc/meminfo)"
                    .into(),
            ));
        }
        let free = meminfo("HugePages_Free:").unwrap_or(0);
        if free >= pages {
            return Ok(Reservation { added: 0 });
        }
        let missing = pages - free;
        let total = read_total()?;
        write_total(total + missing).map_err(|e| {
            LabError::Sample(format!(
                "{missing} more free 2 MiB pages are needed and {NR_HUGEPAGES} cannot be \
                 raised ({e}); as root: sysctl vm.nr_hugepages={}",
                total + missing
            ))
        })?;
        let reservation = Reservation { added: missing };
        let now = meminfo("HugePages_Free:").unwrap_or(0);
        if now < pages {
            // Dropping it gives back what the kernel did add.
            return Err(LabError::Sample(format!(
                "the kernel found only {now} of {pages} free 2 MiB pages (memory too fragmented \
                 or too small)"
            )));
        }
        Ok(reservation)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.added > 0 {
            if let Ok(total) = read_total() {
                let _ = write_total(total.saturating_sub(self.added));
            }
        }
    }
}

fn read_total() -> Result<u64, LabError> {
    std::fs::read_to_string(NR_HUGEPAGES)
        .map_err(|e| LabError::os(format!("reading {NR_HUGEPAGES}"), e))?
        .trim()
        .parse()
        .map_err(|_| LabError::Sample(format!("{NR_HUGEPAGES} is not a number")))
}

fn write_total(total: u64) -> std::io::Result<()> {
    std::fs::write(NR_HUGEPAGES, format!("{total}\n"))
}

/// The number on the `/proc/meminfo` line starting with `key`.
fn meminfo(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text, key)
}

fn parse_meminfo(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_lines_are_read_by_their_key() {
        let text =
            "HugePages_Total:       4\nHugePages_Free:        3\nHugepagesize:       2048 kB\n";
        assert_eq!(parse_meminfo(text, "HugePages_Free:"), Some(3));
        assert_eq!(parse_meminfo(text, "Hugepagesize:"), Some(2048));
        assert_eq!(parse_meminfo(text, "HugePages_Rsvd:"), None);
    }
}
