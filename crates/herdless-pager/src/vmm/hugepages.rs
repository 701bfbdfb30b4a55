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
/// # Examples
/// Guest memory of 2 MiB pages, as Firecracker's `"huge_pages": "2M"`
/// (skipped, with the reason, where the pool cannot be grown: not root):
/// ```
/// use herdless_pager::vmm::{GuestMemory, Hugepages, HUGE_PAGE};
/// # // Doc tests run side by side in processes of their own: one at a time on the pool.
/// # let lock = std::env::temp_dir().join("herdless-doc-hugepages.lock");
/// # let lock = std::fs::File::options().append(true).create(true).open(&lock).or_else(|_| std::fs::File::open(&lock))?;
/// # rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
/// let pool = match Hugepages::reserve(1) {
///     Ok(pool) => pool,
///     Err(why) => { eprintln!("skipped: {why}"); return Ok(()) }
/// };
/// let guest = match GuestMemory::with_page_sizes(&[(HUGE_PAGE, HUGE_PAGE)]) {
///     Ok(guest) => guest,
///     Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Ok(()), // no userfaultfd: skip
///     Err(e) => return Err(e),
/// };
/// assert_eq!(guest.regions()[0].page_size, HUGE_PAGE);
/// drop(guest);
/// drop(pool); // the pool as it was
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Hugepages {
    growth: Growth,
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

/// What one reservation did to the pool.
#[derive(Clone, Copy, Debug, Default)]
struct Growth {
    /// The pool's size before, and as this set it (equal: not grown).
    before: u64,
    set: u64,
}

impl Growth {
    /// Grows the pool until `pages` are free for new mappings (module doc).
    fn to(pages: u64) -> Result<Growth, String> {
        let have = available().map_err(|e| format!("no 2 MiB hugepages on this kernel ({e})"))?;
        let before = read(NR)?;
        if have >= pages {
            return Ok(Growth {
                before,
                set: before,
            });
        }
        let want = before + (pages - have);
        write(NR, want).map_err(|e| {
            format!(
                "{pages} free 2 MiB hugepages needed, {have} free, and the pool cannot be grown \
                 ({e}; as root: sysctl vm.nr_hugepages={want})"
            )
        })?;
        // The kernel may have grown the pool by less than asked.
        let g = Growth {
            before,
            set: read(NR).unwrap_or(want),
        };
        match available() {
            Ok(now) if now >= pages => Ok(g),
            now => {
                g.undo();
                Err(format!(
                    "{pages} free 2 MiB hugepages needed; the kernel found memory for only {} \
                     (memory too fragmented; try `echo 1 > /proc/sys/vm/compact_memory`)",
                    now.unwrap_or(0)
                ))
            }
        }
    }

    /// Takes back what [`to`](Self::to) added: the old size if nobody
    /// resized the pool meanwhile, else the current size less the addition.
    fn undo(self) {
        let added = self.set.saturating_sub(self.before);
        if added == 0 {
            return;
        }
        let target = match read(NR) {
            Ok(now) if now == self.set => self.before,
            Ok(now) => now.saturating_sub(added),
            Err(_) => return,
        };
        let _ = write(NR, target);
    }
}

impl Hugepages {
    /// Makes at least `pages` 2 MiB hugepages available, raising
    /// `vm.nr_hugepages` if needed (root only), until this is dropped.
    ///
    /// # Errors
    /// Why it cannot, as one line for a skip message: no 2 MiB hugepages
    /// on this kernel, not root, the kernel could not find the memory
    /// (fragmented), or this thread holds a reservation already.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::vmm::Hugepages;
    /// # let lock = std::env::temp_dir().join("herdless-doc-hugepages.lock");
    /// # let lock = std::fs::File::options().append(true).create(true).open(&lock).or_else(|_| std::fs::File::open(&lock))?;
    /// # rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
    /// match Hugepages::reserve(1) {
    ///     Ok(pool) => {
    ///         // One reservation per thread at a time.
    ///         let again = Hugepages::reserve(1).err().unwrap();
    ///         assert!(again.contains("holds a reservation already"), "{again}");
    ///         drop(pool);
    ///     }
    ///     Err(why) => eprintln!("skipped: {why}"), // not root, and no free hugepages
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reserve(pages: u64) -> Result<Hugepages, String> {
        if HOLDING.get() {
            return Err("this thread holds a reservation already: drop it first".into());
        }
        let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
        let growth = Growth::to(pages)?;
        HOLDING.set(true);
        Ok(Hugepages {
            growth,
            _turn: turn,
        })
    }

    /// Makes at least `pages` 2 MiB hugepages available until this process
    /// exits (it gives back what it added then, from an `atexit` hook; a
    /// process killed by a signal leaves the pool grown). For a
    /// measurement repeated many times: a pool shrunk and grown again gets
    /// pages the machine must find afresh, and in a VM (free page
    /// reporting) their first touch costs a fault in the host each, which
    /// a host with its hugepages reserved at boot never pays. Calls may
    /// ask for more; the pool only grows.
    ///
    /// # Errors
    /// As [`reserve`](Self::reserve).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::vmm::Hugepages;
    /// # let lock = std::env::temp_dir().join("herdless-doc-hugepages.lock");
    /// # let lock = std::fs::File::options().append(true).create(true).open(&lock).or_else(|_| std::fs::File::open(&lock))?;
    /// # rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
    /// if let Err(why) = Hugepages::reserve_until_exit(1) {
    ///     eprintln!("skipped: {why}"); // not root, and no free hugepages
    ///     return Ok(());
    /// }
    /// Hugepages::reserve_until_exit(1)?; // there already: nothing to do
    /// // ... many measurements on 2 MiB pages; the pool shrinks back at exit.
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_until_exit(pages: u64) -> Result<(), String> {
        static HELD: Mutex<Option<(u64, Growth)>> = Mutex::new(None);
        extern "C" fn give_back() {
            let held = HELD.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some((_, g)) = held {
                g.undo();
            }
        }
        let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        match *held {
            Some((n, _)) if n >= pages && available().is_ok_and(|a| a >= pages) => Ok(()),
            Some((_, old)) => {
                let more = Growth::to(pages)?;
                *held = Some((
                    pages,
                    Growth {
                        before: old.before,
                        set: old.set + more.set.saturating_sub(more.before),
                    },
                ));
                Ok(())
            }
            None => {
                let g = Growth::to(pages)?;
                // SAFETY: `give_back` is an `extern "C" fn()` that does not
                // unwind (no panicking call in it); registering it has no
                // other precondition.
                if unsafe { libc::atexit(give_back) } != 0 {
                    g.undo();
                    return Err("could not register the pool's give-back at exit".into());
                }
                *held = Some((pages, g));
                Ok(())
            }
        }
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        // The turn is released after this body, by its guard's drop.
        HOLDING.set(false);
        self.growth.undo();
    }
}
