//! Free 2 MiB hugepages for a test or a measurement that maps guest memory
//! with `MAP_HUGETLB` (Firecracker's `"huge_pages": "2M"`): taken from the
//! pool as it is, or reserved by raising `vm.nr_hugepages` (root only) and
//! given back when done. Where neither works, the reason, for a skip.
//!
//! The pool is the machine's: other processes may use or resize it too.
//! This only ever adds the pages it lacks, and when done takes back what it
//! added (setting the old value if nobody changed the pool meanwhile, else
//! subtracting its own addition), so it never shrinks a pool someone else
//! grew. Within one process, users take turns (one reservation at a time).

use std::sync::{Mutex, MutexGuard};

/// The pool's size (pages the kernel holds for hugetlb).
const NR: &str = "/proc/sys/vm/nr_hugepages";
/// Of those, pages not in use nor reserved by a mapping.
const FREE: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
/// Reserved by mappings but not yet faulted in.
const RESV: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages";

/// One reservation at a time in this process.
static TURN: Mutex<()> = Mutex::new(());

std::thread_local! {
    /// Whether this thread holds the turn (a second `reserve` from it
    /// would wait for itself forever).
    static HOLDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// At least `pages` free 2 MiB hugepages while this lives (see the module
/// doc). Dropping it gives back the pages it added to the pool.
///
/// ```no_run
/// use herdless_pager::vmm::{GuestMemory, Hugepages, HUGE_PAGE};
/// let Ok(_pool) = Hugepages::reserve(4) else { return Ok(()) };
/// let mem = GuestMemory::with_page_sizes(&[(4 * HUGE_PAGE, HUGE_PAGE)])?;
/// assert_eq!(mem.regions()[0].page_size, HUGE_PAGE);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Hugepages {
    /// Pages this added to the pool (0: it had enough).
    added: u64,
    /// The pool's size before, and as this set it.
    before: u64,
    set: u64,
    _turn: MutexGuard<'static, ()>,
}

fn read(path: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    text.trim()
        .parse()
        .map_err(|_| format!("{path}: {text:?} is not a number"))
}

fn write(path: &str, value: u64) -> Result<(), String> {
    std::fs::write(path, value.to_string()).map_err(|e| format!("writing {value} to {path}: {e}"))
}

/// Pages free for a new mapping: free, less those reserved by mappings
/// not yet faulted in.
fn available() -> Result<u64, String> {
    Ok(read(FREE)?.saturating_sub(read(RESV)?))
}

impl Hugepages {
    /// Makes at least `pages` 2 MiB hugepages available, raising
    /// `vm.nr_hugepages` if needed (root only).
    ///
    /// # Errors
    /// Why it cannot, as one line for a skip message: no 2 MiB hugepages
    /// on this kernel, not root, or the kernel could not find the memory
    /// (fragmented).
    pub fn reserve(pages: u64) -> Result<Hugepages, String> {
        if HOLDING.get() {
            return Err("this thread holds a reservation already: drop it first".into());
        }
        let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
        HOLDING.set(true);
        let have = available().map_err(|e| format!("no 2 MiB hugepages on this kernel ({e})"))?;
        let before = read(NR)?;
        if have >= pages {
            return Ok(Hugepages {
                added: 0,
                before,
                set: before,
                _turn: turn,
            });
        }
        let set = before + (pages - have);
        write(NR, set).map_err(|e| {
            format!(
                "{pages} free 2 MiB hugepages needed, {have} free, and the pool cannot be grown \
                 ({e}; as root: sysctl vm.nr_hugepages={set})"
            )
        })?;
        // The kernel may have grown the pool by less than asked.
        let set = read(NR).unwrap_or(set);
        let r = Hugepages {
            added: set.saturating_sub(before),
            before,
            set,
            _turn: turn,
        };
        let now = available()?;
        if now < pages {
            // Dropping `r` gives back what was added.
            return Err(format!(
                "{pages} free 2 MiB hugepages needed; the kernel found memory for only {now} \
                 (memory too fragmented; try `echo 1 > /proc/sys/vm/compact_memory`)"
            ));
        }
        Ok(r)
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        // The turn is released after this body, by its guard's drop.
        HOLDING.set(false);
        if self.added == 0 {
            return;
        }
        let target = match read(NR) {
            Ok(now) if now == self.set => self.before,
            Ok(now) => now.saturating_sub(self.added),
            Err(_) => return,
        };
        let _ = write(NR, target);
    }
}
