//! What `herdless-uffd` is asked to do: [`RestoreOptions`] (its command
//! line, checked by [`Restore::bind`](super::Restore::bind)) and
//! [`Populate`].

use std::path::PathBuf;
use std::time::Duration;

#[cfg(doc)]
use super::{Ending, Restore, RestoreError};
use super::{DEFAULT_HANDOFF_TIMEOUT, DEFAULT_SOCKET_MODE};

/// What `herdless-uffd` is asked to do (its command line). Start from
/// [`RestoreOptions::new`] and set what differs; [`Restore::bind`] checks
/// it.
///
/// # Examples
/// `herdless-uffd uffd.sock vm.mem --handlers 2 --fault-around 64K
/// --prefetch vm.trace --stats-json restore.json`:
/// ```
/// use herdless_pager::restore::RestoreOptions;
/// let opts = RestoreOptions {
///     handlers: 2,
///     fault_around: 64 << 10,
///     prefetch: Some("vm.trace".into()),
///     stats_json: Some("restore.json".into()),
///     ..RestoreOptions::new("uffd.sock", "vm.mem")
/// };
/// assert!(!opts.copy_all && opts.record.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    /// The socket to listen on (Firecracker's `mem_backend.backend_path`).
    pub socket: PathBuf,
    /// The snapshot's memory file, or (feature `object-store`) an object
    /// URL: `s3://BUCKET/KEY`, `gs://`, `az://`, `http(s)://`, `file://`.
    pub memory_file: PathBuf,
    /// Fault-around window in bytes. Default one page: off, as
    /// Firecracker's example handler, unlike a [`Pager`](crate::Pager)'s
    /// 64 KiB (why: [`DEFAULT_FAULT_AROUND`](crate::DEFAULT_FAULT_AROUND)).
    pub fault_around: usize,
    /// Handler threads.
    pub handlers: usize,
    /// Write the pages faulted on, in first-touch order, to this trace.
    pub record: Option<PathBuf>,
    /// Prefetch the pages of this trace in the background (from its pack
    /// `TRACE.pages`, when there is one and [`pack`](Self::pack) is on).
    pub prefetch: Option<PathBuf>,
    /// Working-set pages files ([`pack`](super::pack)): `record` also
    /// writes the recorded pages to `TRACE.pages` beside the trace, and
    /// `prefetch` reads them from there when it is present and matches
    /// (else from the memory, as without one). On by default
    /// (`--no-pack`: off).
    pub pack: bool,
    /// Threads installing the trace side by side (page population is
    /// CPU-bound in the kernel: one per CPU the handler may use).
    pub prefetch_threads: usize,
    /// Copy every page in the background from the handoff on, beside the
    /// handlers (Firecracker's `fault_all_handler` copies everything before
    /// it answers the first fault; here a fault waits at most for the run
    /// in flight).
    pub copy_all: bool,
    /// What of the memory file to read into the page cache and map before
    /// the VMM connects, so that no fill waits for the file
    /// (`--prefetch` does it for its trace's pages and `--copy-all` for the
    /// whole file anyway).
    pub populate: Populate,
    /// Write the figures as JSON to this file at the end.
    pub stats_json: Option<PathBuf>,
    /// Only a peer of this user id may connect.
    pub allow_uid: Option<u32>,
    /// Permission bits of the socket.
    pub socket_mode: u32,
    /// How long to wait for the VMM to connect (`None`: forever).
    pub accept_timeout: Option<Duration>,
    /// How long to wait for the handoff message once connected.
    pub handoff_timeout: Duration,
    /// Stop on `SIGINT` or `SIGTERM` at any stage, writing no output:
    /// before serving, [`bind`](Restore::bind) or [`run`](Restore::run)
    /// returns [`RestoreError::Stopped`]; once serving, `run` returns the
    /// figures so far with [`Ending::Signal`]. Either way the socket is
    /// removed. `bind` blocks the two signals in the calling thread (and
    /// so in the threads it starts) for good, before it opens anything:
    /// for the binary, whose process ends with the restore; a library
    /// user handles its own signals.
    pub stop_on_signals: bool,
    /// Log nothing (connections, refusals, warnings) to standard error.
    pub quiet: bool,
    /// How an object URL is read (chunks, host cache, fetching); the
    /// store's settings and credentials come from the environment.
    #[cfg(feature = "object-store")]
    pub object: crate::object::ObjectOptions,
}

impl RestoreOptions {
    /// The defaults for `socket` and `memory_file`: fault-around off, one
    /// handler, socket mode 0600, a 10 s handoff timeout, no accept
    /// timeout, nothing recorded, prefetched or written, signals left
    /// alone, warnings logged.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::{Populate, RestoreOptions, DEFAULT_SOCKET_MODE};
    /// let opts = RestoreOptions::new("/run/fc/uffd.sock", "/snapshots/vm.mem");
    /// assert_eq!(opts.fault_around, rustix::param::page_size()); // off
    /// assert_eq!((opts.handlers, opts.socket_mode), (1, DEFAULT_SOCKET_MODE));
    /// assert_eq!(opts.populate, Populate::Nothing);
    /// assert!(opts.accept_timeout.is_none() && !opts.stop_on_signals);
    /// ```
    pub fn new(socket: impl Into<PathBuf>, memory_file: impl Into<PathBuf>) -> Self {
        RestoreOptions {
            socket: socket.into(),
            memory_file: memory_file.into(),
            fault_around: rustix::param::page_size(),
            handlers: 1,
            record: None,
            prefetch: None,
            pack: true,
            prefetch_threads: 1,
            copy_all: false,
            populate: Populate::Nothing,
            stats_json: None,
            allow_uid: None,
            socket_mode: DEFAULT_SOCKET_MODE,
            accept_timeout: None,
            handoff_timeout: DEFAULT_HANDOFF_TIMEOUT,
            stop_on_signals: false,
            quiet: false,
            #[cfg(feature = "object-store")]
            object: crate::object::ObjectOptions::default(),
        }
    }
}

/// What of the memory file `herdless-uffd` maps before the VMM connects.
///
/// # Examples
/// `--populate` and `--populate=vm.trace`:
/// ```
/// use herdless_pager::restore::{Populate, RestoreOptions};
/// let all = RestoreOptions { populate: Populate::All, ..RestoreOptions::new("s", "vm.mem") };
/// let ws = RestoreOptions {
///     populate: Populate::Trace("vm.trace".into()),
///     ..RestoreOptions::new("s", "vm.mem")
/// };
/// assert_ne!(all.populate, ws.populate);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Populate {
    /// Nothing ahead: each page is read when first copied.
    #[default]
    Nothing,
    /// The whole file, as Firecracker's example handlers do
    /// (`MAP_POPULATE`).
    All,
    /// The pages of this working-set trace.
    Trace(PathBuf),
}
