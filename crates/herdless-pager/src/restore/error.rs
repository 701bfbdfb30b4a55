//! Every way `herdless-uffd` refuses its arguments, its peer or the
//! handoff, as one error type whose message is the one line the binary
//! prints before it exits with a non-zero status.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::PagerError;

/// Why a restore could not start (or stopped).
///
/// Each message is the one line `herdless-uffd` prints;
/// [`is_usage`](Self::is_usage) (exit 2), [`signal`](Self::signal) (exit
/// 128 + N) and [`leaves_vmm_waiting`](Self::leaves_vmm_waiting) (a VM now
/// hangs) sort them.
///
/// # Examples
/// ```
/// use herdless_pager::restore::{Restore, RestoreError, RestoreOptions};
/// let dir = std::env::temp_dir().join(format!("restore-error-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("taken.sock"), "a file")?;
/// std::fs::write(dir.join("vm.mem"), [0u8; 4096])?;
/// let opts = RestoreOptions::new(dir.join("taken.sock"), dir.join("vm.mem"));
/// match Restore::bind(opts) {
///     Err(e @ RestoreError::SocketExists { .. }) => {
///         assert!(e.to_string().ends_with("remove it first (it is never deleted for you)"));
///         assert!(!e.is_usage() && !e.leaves_vmm_waiting() && e.signal().is_none());
///     }
///     other => panic!("expected SocketExists, got {:?}", other.err()),
/// }
/// assert_eq!(std::fs::read(dir.join("taken.sock"))?, b"a file"); // untouched
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Error)]
pub enum RestoreError {
    /// A pager option is out of range (window, handler count) or serving
    /// could not start (threads, memory).
    #[error(transparent)]
    Pager(#[from] PagerError),
    /// The memory object (or a trace object) could not be opened or read.
    #[cfg(feature = "object-store")]
    #[error(transparent)]
    Object(#[from] crate::object::ObjectError),
    /// The memory file cannot be opened, or is not a regular file.
    #[error("memory file {}: {source}", path.display())]
    MemoryFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Something already exists at the socket path (a stale socket from an
    /// earlier run, or another file): it is never removed for the user.
    #[error("socket path {} already exists; remove it first (it is never deleted for you)", path.display())]
    SocketExists {
        /// The path.
        path: PathBuf,
    },
    /// The socket could not be created, bound, listened on or given its
    /// mode.
    #[error("socket {}: {what}: {source}", path.display())]
    Socket {
        /// The path.
        path: PathBuf,
        /// The step that failed.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
    /// An option's value is out of range, or options contradict each
    /// other: a usage error (the binary exits 2).
    #[error("{0}")]
    Usage(String),
    /// An output file (`--record`, `--stats-json`) names one of the
    /// inputs, the socket, or the other output: a usage error (the binary
    /// exits 2). Nothing was written.
    #[error(
        "{option} {}: that is {other} ({}); refusing to write over it",
        path.display(),
        other_path.display()
    )]
    OutputCollides {
        /// The option (`--record`, `--stats-json`).
        option: &'static str,
        /// The output path given.
        path: PathBuf,
        /// What it collides with ("the memory file", "the --record output").
        other: String,
        /// That file's path, as given.
        other_path: PathBuf,
    },
    /// An output file cannot be written where it is asked for (a missing
    /// or read-only directory, a directory, a special file, a dangling
    /// symlink). Nothing was written.
    #[error("{option} {}: {reason}", path.display())]
    Output {
        /// The option (`--record`, `--stats-json`).
        option: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A working-set trace cannot be read or is malformed.
    #[error("trace {}: {reason}", path.display())]
    Trace {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line number where it applies.
        reason: String,
    },
    /// Nobody connected within `--accept-timeout`.
    #[error("no VMM connected within {0:?}")]
    AcceptTimeout(Duration),
    /// The peer connected but sent no complete message within
    /// `--handoff-timeout`.
    #[error("the VMM connected but sent no complete handoff message within {0:?}")]
    HandoffTimeout(Duration),
    /// The peer closed the connection before its message was complete.
    #[error("the VMM closed the connection before sending its memory mappings")]
    ClosedBeforeHandoff,
    /// The message is larger than any mapping list needs.
    #[error("the handoff message exceeds {max} bytes")]
    MessageTooLarge {
        /// The limit.
        max: usize,
    },
    /// The message came without a file descriptor.
    #[error("the handoff message carries no file descriptor (expected the userfaultfd, sent with SCM_RIGHTS)")]
    NoFileDescriptor,
    /// The message came with more than one file descriptor.
    #[error("the handoff message carries {count} file descriptors (expected exactly one: the userfaultfd)")]
    TooManyFileDescriptors {
        /// How many (at least).
        count: usize,
    },
    /// The file descriptor is not a userfaultfd.
    #[error("the file descriptor received is not a userfaultfd (it is {what})")]
    NotUserfaultfd {
        /// What it is, as `/proc/self/fd` names it.
        what: String,
    },
    /// The userfaultfd was never initialised (`UFFDIO_API`).
    #[error("the userfaultfd received was not initialised with UFFDIO_API by the VMM")]
    UserfaultfdNotInitialised,
    /// The message is not JSON (or not UTF-8).
    #[error("the handoff message is not JSON: {0}")]
    NotJson(String),
    /// The message is JSON, but not an array of `GuestRegionUffdMapping`.
    #[error("the handoff message is not a list of memory mappings: {0}")]
    WrongShape(String),
    /// The mapping list is empty.
    #[error("the handoff message lists no memory mappings")]
    NoMappings,
    /// One mapping is unusable.
    #[error("mapping {index}: {reason}")]
    Mapping {
        /// Its position in the list (from 0).
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The mappings together need more bytes than the memory file has.
    #[error(
        "the mappings need {total} bytes, more than the memory file's {file_len}: it is not this \
         snapshot's memory file (or it was cut short); start herdless-uffd with the memory file \
         written with this snapshot"
    )]
    SizesExceedFile {
        /// Sum of the sizes.
        total: u64,
        /// The memory file's length.
        file_len: u64,
    },
    /// `SIGINT` or `SIGTERM` (with
    /// [`stop_on_signals`](super::RestoreOptions::stop_on_signals)) before
    /// serving began; the socket, if it was created, is removed and no
    /// output written. (A signal once serving has begun ends it with an
    /// [`Ending::Signal`](super::Ending::Signal) summary instead.)
    #[error("stopped by signal {signal} while {during}")]
    Stopped {
        /// The signal's number.
        signal: i32,
        /// What the restore was doing.
        during: StoppedDuring,
    },
    /// A system call of the handoff or of the serving loop failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
}

/// What a restore was doing when a signal stopped it before serving
/// ([`RestoreError::Stopped`]).
///
/// # Examples
/// ```
/// use herdless_pager::restore::{RestoreError, StoppedDuring};
/// let e = RestoreError::Stopped { signal: 15, during: StoppedDuring::WaitingForTheVmm };
/// assert_eq!(e.to_string(), "stopped by signal 15 while waiting for the VMM to connect");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoppedDuring {
    /// Reading the memory file into the page cache (`--populate`,
    /// `--copy-all`, `--prefetch`), before the socket is created.
    ReadingAhead,
    /// Listening, before any VMM connected.
    WaitingForTheVmm,
    /// Connected to a VMM, waiting for its handoff message.
    WaitingForTheHandoff,
}

impl std::fmt::Display for StoppedDuring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoppedDuring::ReadingAhead => "reading the memory file ahead",
            StoppedDuring::WaitingForTheVmm => "waiting for the VMM to connect",
            StoppedDuring::WaitingForTheHandoff => "waiting for the VMM's handoff message",
        })
    }
}

impl RestoreError {
    /// Whether this is a usage error (a bad option value or combination,
    /// an output over an input): the command line can never work as
    /// given, whatever the files and the VMM do. `herdless-uffd` exits 2
    /// for these and 1 for every other refusal.
    ///
    /// ```
    /// use herdless_pager::restore::{Restore, RestoreOptions};
    /// let mut opts = RestoreOptions::new("/tmp/never.sock", "/tmp/never.mem");
    /// opts.handlers = 0;
    /// let e = Restore::bind(opts).err().unwrap();
    /// assert!(e.is_usage(), "{e}");
    /// ```
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RestoreError::Usage(_) | RestoreError::OutputCollides { .. }
        )
    }

    /// Whether a VMM had connected when this refusal came (its handoff
    /// was refused, or serving could not start): Firecracker sends its
    /// handoff and goes on, so a VM loaded with `resume_vm` is running
    /// with nobody to serve its faults and hangs at the first one. Whoever
    /// started the restore must stop it (the handler's exit status 1 is
    /// the signal to watch).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::{RestoreError, StoppedDuring};
    /// assert!(RestoreError::NoMappings.leaves_vmm_waiting()); // the VMM sent a bad message
    /// assert!(!RestoreError::AcceptTimeout(std::time::Duration::from_secs(1)).leaves_vmm_waiting());
    /// let waiting = StoppedDuring::WaitingForTheHandoff; // connected, then stopped
    /// assert!(RestoreError::Stopped { signal: 2, during: waiting }.leaves_vmm_waiting());
    /// ```
    pub fn leaves_vmm_waiting(&self) -> bool {
        // The memory object and the traces are opened before the socket
        // listens.
        #[cfg(feature = "object-store")]
        if matches!(self, RestoreError::Object(_)) {
            return false;
        }
        !matches!(
            self,
            RestoreError::Usage(_)
                | RestoreError::OutputCollides { .. }
                | RestoreError::Output { .. }
                | RestoreError::MemoryFile { .. }
                | RestoreError::SocketExists { .. }
                | RestoreError::Socket { .. }
                | RestoreError::Trace { .. }
                | RestoreError::AcceptTimeout(_)
                | RestoreError::Stopped {
                    during: StoppedDuring::ReadingAhead | StoppedDuring::WaitingForTheVmm,
                    ..
                }
        )
    }

    /// The signal that stopped the restore before it served
    /// ([`RestoreError::Stopped`]), if that is what this is:
    /// `herdless-uffd` exits 128 + it.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::{RestoreError, StoppedDuring};
    /// let e = RestoreError::Stopped { signal: 15, during: StoppedDuring::ReadingAhead };
    /// assert_eq!(e.signal(), Some(15));
    /// assert_eq!(RestoreError::NoFileDescriptor.signal(), None);
    /// ```
    pub fn signal(&self) -> Option<i32> {
        match self {
            RestoreError::Stopped { signal, .. } => Some(*signal),
            _ => None,
        }
    }

    pub(crate) fn io(what: &'static str, source: impl Into<io::Error>) -> Self {
        RestoreError::Io {
            what,
            source: source.into(),
        }
    }

    pub(crate) fn mapping(index: usize, reason: impl Into<String>) -> Self {
        RestoreError::Mapping {
            index,
            reason: reason.into(),
        }
    }
}
