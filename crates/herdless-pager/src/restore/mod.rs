//! `herdless-uffd`'s library: serving a Firecracker snapshot restore over
//! the UFFD handoff with the pager's handlers, fault-around, working-set
//! record and prefetch (issue 13), refusing what it should (issue 17).
//!
//! [`Restore::bind`] checks the options and the output paths
//! (`output.rs`: never one of the inputs, written only at the end, beside
//! the target and renamed over it), opens the memory file, the prefetch
//! trace and its pack at the same time (from an object store each costs a
//! round trip: made together, the handler listens one round trip after it
//! starts) and creates the socket (`socket_file.rs`: removed when the
//! restore ends, if still the one created); then
//! [`Restore::run`] accepts the VMM's connection, receives its message
//! (`handoff.rs`), checks the mappings against the memory file
//! (`mappings.rs`), serves faults until the VMM goes away (`server.rs`,
//! with `prefetch.rs`; `signals.rs` for `SIGINT`/`SIGTERM` at every
//! stage), writes the trace (`trace.rs`) and returns the figures
//! (`summary.rs`). Every refusal is a [`RestoreError`] (`error.rs`) whose
//! message is one line.
//!
//! The serving is the pager's own (`handler/`): the same threads, claims,
//! fault-around, `REMOVE` handling and poison, over the VMM's regions
//! instead of a region of this process. Two things differ, because the
//! memory is another process's: the handlers poll (the fd is non-blocking
//! and no doorbell page can be registered in the VMM), and a fill racing a
//! discard is prevented rather than repaired (no `madvise` there: reads
//! exclude fills, `handler/discard.rs`).

mod error;
mod handoff;
pub mod mappings;
mod memory;
mod options;
mod output;
pub mod pack;
mod prefetch;
mod server;
mod signals;
mod socket_file;
mod summary;
pub mod trace;

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use error::{RestoreError, StoppedDuring};
pub use handoff::{Peer, MAX_MESSAGE};
pub use options::{Populate, RestoreOptions};
pub use prefetch::CHUNK_PAGES;
pub use summary::{Ending, RestoreSummary};
pub use trace::{Run, Trace};

use crate::pager::config;
use crate::{PageSource, PagerError};
use memory::MemorySource;
use signals::Signals;
use socket_file::SocketFile;

/// Default wait for the handoff message once the VMM has connected.
///
/// # Examples
/// ```
/// use herdless_pager::restore::{RestoreOptions, DEFAULT_HANDOFF_TIMEOUT};
/// let opts = RestoreOptions::new("uffd.sock", "vm.mem");
/// assert_eq!(opts.handoff_timeout, DEFAULT_HANDOFF_TIMEOUT);
/// ```
pub const DEFAULT_HANDOFF_TIMEOUT: Duration = Duration::from_secs(10);

/// Default permission bits of the socket: the owner only.
///
/// # Examples
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// use herdless_pager::restore::{Restore, RestoreOptions, DEFAULT_SOCKET_MODE};
/// let dir = std::env::temp_dir().join(format!("socket-mode-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("vm.mem"), [0u8; 4096])?;
/// let restore = Restore::bind(RestoreOptions::new(dir.join("uffd.sock"), dir.join("vm.mem")))?;
/// let mode = std::fs::metadata(restore.socket_path())?.permissions().mode();
/// assert_eq!(mode & 0o777, DEFAULT_SOCKET_MODE);
/// drop(restore);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;

/// Bytes of the memory file read ahead between two looks for a signal.
const READ_AHEAD_STEP: u64 = 64 << 20;

/// Log lines on standard error, unless quiet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Log {
    quiet: bool,
}

impl Log {
    pub(crate) fn line(&self, msg: &str) {
        if !self.quiet {
            eprintln!("herdless-uffd: {msg}");
        }
    }
}

/// A restore ready to accept the VMM: options checked, files open, socket
/// listening. Dropping it (and so the end of [`run`](Self::run)) removes
/// the socket file, if the path still names the one it created.
///
/// # Examples
/// `herdless-uffd` in a thread, with Firecracker's side played in
/// process (the crate's `vmm` module, feature `test-vmm`: what the tests
/// use; a real Firecracker connects the same way). Without userfaultfd
/// for this process the guest memory cannot be set up, and the example
/// stops there.
/// ```
/// use herdless_pager::restore::{Ending, Restore, RestoreOptions};
/// use herdless_pager::vmm::GuestMemory;
/// let Ok(guest) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
/// let dir = std::env::temp_dir().join(format!("restore-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let snapshot: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
/// std::fs::write(dir.join("vm.mem"), &snapshot)?;
///
/// let mut opts = RestoreOptions::new(dir.join("uffd.sock"), dir.join("vm.mem"));
/// opts.fault_around = 64 << 10;
/// opts.quiet = true;
/// let restore = Restore::bind(opts)?; // the socket exists from here
/// let handler = std::thread::spawn(move || restore.run());
///
/// // The VMM: connects, hands over its memory and userfaultfd, runs.
/// let conn = guest.handoff(&dir.join("uffd.sock"))?;
/// let mut page = vec![0u8; 4096];
/// guest.read(guest.regions()[0].base + 8192, &mut page)?; // a fault, served
/// assert_eq!(page[..], snapshot[8192..8192 + 4096]);
/// drop(conn); // the VMM exits
///
/// let summary = handler.join().unwrap()?;
/// assert_eq!(summary.ending, Ending::VmmClosed);
/// assert!(summary.clean() && summary.stats.faults == 1);
/// assert!(!dir.join("uffd.sock").exists()); // removed at the end
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Restore {
    opts: RestoreOptions,
    listener: UnixListener,
    /// From `bind` until listening (the summary's `set_up_for`).
    set_up_for: std::time::Duration,
    /// When the socket started listening.
    listening_since: std::time::Instant,
    /// From listening until the handoff message arrived (set by `run`).
    handed_off_after: std::time::Duration,
    /// Removes the socket file when the restore is dropped.
    _socket_file: SocketFile,
    /// `SIGINT`/`SIGTERM`, with `stop_on_signals`.
    signals: Option<Signals>,
    /// Taken by `run`.
    source: Option<MemorySource>,
    /// The object served, if any (its figures, after `run` took the source).
    #[cfg(feature = "object-store")]
    object: Option<crate::object::ObjectSource>,
    file_len: u64,
    trace: Option<Trace>,
    /// The prefetch trace's pack, checked (taken by `run`).
    pack: Option<pack::OpenPack>,
    /// What the summary says of the pack.
    pack_figures: Option<pack::PackFigures>,
    /// Where `--record` (its trace and its pack) and `--stats-json` are
    /// written (checked).
    record_to: Option<PathBuf>,
    record_pack_to: Option<PathBuf>,
    stats_to: Option<PathBuf>,
    log: Log,
}

impl Restore {
    /// Checks `opts` (usage errors first: option values, outputs that
    /// name an input or each other; then the files), opens the memory file
    /// and the traces to read, maps what is to be mapped ahead, and
    /// creates the socket (refusing a path that exists). Opens nothing for
    /// writing: the outputs are written when the VMM has gone
    /// (`output.rs`).
    ///
    /// # Errors
    /// Every refusal is a [`RestoreError`] whose message is one line;
    /// [`RestoreError::is_usage`] tells a usage error from the others:
    /// [`RestoreError::Usage`] and [`RestoreError::OutputCollides`] (bad
    /// values, an output over an input); [`RestoreError::Output`] (an
    /// output that cannot be written there); [`RestoreError::MemoryFile`],
    /// [`RestoreError::Trace`] (inputs missing, unreadable, of another
    /// snapshot); [`RestoreError::SocketExists`], [`RestoreError::Socket`];
    /// [`RestoreError::Stopped`] (a signal, with `stop_on_signals`, while
    /// reading the memory file ahead); [`RestoreError::Io`] (blocking the
    /// signals failed).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::{Restore, RestoreError, RestoreOptions};
    /// let dir = std::env::temp_dir().join(format!("bind-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let opts = RestoreOptions::new(dir.join("uffd.sock"), dir.join("vm.mem"));
    /// // No memory file yet: refused, no socket made.
    /// let e = Restore::bind(opts.clone()).err().unwrap();
    /// assert!(matches!(e, RestoreError::MemoryFile { .. }) && !e.is_usage());
    /// assert!(!dir.join("uffd.sock").exists());
    /// // An output over the memory file: a usage error.
    /// std::fs::write(dir.join("vm.mem"), [0u8; 4096])?;
    /// let over = RestoreOptions { record: Some(dir.join("vm.mem")), ..opts.clone() };
    /// assert!(Restore::bind(over).err().unwrap().is_usage());
    /// // Bound: listening until dropped.
    /// let restore = Restore::bind(opts)?;
    /// assert!(dir.join("uffd.sock").exists());
    /// drop(restore);
    /// assert!(!dir.join("uffd.sock").exists());
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind(opts: RestoreOptions) -> Result<Self, RestoreError> {
        let bind_started = std::time::Instant::now();
        let page = rustix::param::page_size();
        let usage = |e: PagerError| RestoreError::Usage(e.to_string());
        config::check_window(opts.fault_around, page).map_err(usage)?;
        config::check_handlers(opts.handlers).map_err(usage)?;
        #[cfg(feature = "object-store")]
        opts.object
            .check()
            .map_err(|e| RestoreError::Usage(e.to_string()))?;
        if opts.prefetch_threads == 0 {
            return Err(RestoreError::Usage(
                "--prefetch-threads 0: at least one prefetch thread".into(),
            ));
        }
        let targets = Self::check_outputs(&opts)?;
        // From here on a signal ends the restore through its exits.
        let signals = opts.stop_on_signals.then(Signals::block).transpose()?;
        // The memory, the prefetch trace and the trace's pack are read
        // at the same time: from an object store each costs a round trip
        // (the memory's HEAD; the trace's GET; the GET of the pack's
        // first 4 KiB, after which its parts are being fetched), so that
        // the handler listens after the slowest of them, not their sum.
        // (A failure of one is reported once all three have answered.)
        let (source, trace, started_pack) = std::thread::scope(|s| {
            let trace = s.spawn(|| {
                let path = opts.prefetch.as_ref()?;
                Some(memory::read_trace(path, &opts))
            });
            let started_pack = s.spawn(|| match &opts.prefetch {
                Some(path) if opts.pack => Some(pack::StartedPack::start(path, &opts)),
                _ => None,
            });
            let source = MemorySource::open(&opts);
            (source, joined(trace), joined(started_pack))
        });
        let source = source?;
        let file_len = source.len();
        // A trace must come from this memory file (a prefetch trace and a
        // populate trace alike); its page sizes need not be the restore's
        // (`trace.rs`: served by bytes).
        let same_memory = |path: &PathBuf, t: Trace| -> Result<Trace, RestoreError> {
            if t.file_len != file_len {
                return Err(RestoreError::Trace {
                    path: path.clone(),
                    reason: format!(
                        "recorded on a {}-byte memory file, {} has {file_len}: another snapshot",
                        t.file_len,
                        opts.memory_file.display()
                    ),
                });
            }
            Ok(t)
        };
        let checked = |path: &PathBuf| same_memory(path, memory::read_trace(path, &opts)?);
        let trace = match (trace, &opts.prefetch) {
            (Some(t), Some(path)) => Some(same_memory(path, t?)?),
            _ => None,
        };
        let populate_trace = match &opts.populate {
            Populate::Trace(path) => Some(checked(path)?),
            Populate::All | Populate::Nothing => None,
        };
        // Before reading the file ahead, which may take long; `listen`
        // checks again.
        if opts.socket.symlink_metadata().is_ok() {
            return Err(RestoreError::SocketExists {
                path: opts.socket.clone(),
            });
        }
        // Before the VMM connects: the pages that will be copied first.
        let log = Log { quiet: opts.quiet };
        // The prefetch trace's pages come from its pack, if it has one
        // that matches (`pack/`): fetched from now on, instead of the
        // memory's chunks holding them.
        let (pack, pack_figures) = match (&trace, &opts.prefetch, started_pack) {
            (Some(t), Some(path), Some(started)) => {
                open_pack(path, started, t, &source, log, signals.as_ref())?
            }
            _ => (None, None),
        };
        let from_memory = trace.as_ref().filter(|_| pack.is_none());
        // The whole file, or every page of the traces given (the prefetch
        // trace's pages are the ones the handlers copy first).
        let ahead: Vec<(u64, u64)> = if matches!(opts.populate, Populate::All) || opts.copy_all {
            vec![(0, file_len)]
        } else {
            [from_memory, populate_trace.as_ref()]
                .into_iter()
                .flatten()
                .flat_map(|t| t.runs.iter())
                .map(|r| (r.offset, r.bytes()))
                .collect()
        };
        if let Err(e) = read_ahead(&source, &ahead, signals.as_ref())? {
            log.line(&format!(
                "warning: could not read the memory file ahead: {e}"
            ));
        }
        let (listener, socket_file) = handoff::listen(&opts.socket, opts.socket_mode)?;
        let listening_since = std::time::Instant::now();
        if opts.record.is_some() && opts.fault_around > page {
            log.line(
                "note: recording with fault-around on records only the pages that faulted, not \
                 the neighbours fault-around filled; record with --fault-around 4096 for the \
                 whole working set",
            );
        }
        let mut targets = targets.into_iter();
        // (An object URL has no file target: `check_outputs` left it out.)
        let file = |p: &Option<PathBuf>| p.as_ref().filter(|p| !memory::is_url(p)).is_some();
        let record_to = file(&opts.record).then(|| targets.next()).flatten();
        let record_pack_to = (opts.pack && record_to.is_some())
            .then(|| targets.next())
            .flatten();
        let stats_to = file(&opts.stats_json).then(|| targets.next()).flatten();
        Ok(Restore {
            opts,
            listener,
            set_up_for: listening_since - bind_started,
            listening_since,
            handed_off_after: std::time::Duration::ZERO,
            _socket_file: socket_file,
            signals,
            #[cfg(feature = "object-store")]
            object: source.object().cloned(),
            source: Some(source),
            file_len,
            trace,
            pack,
            pack_figures,
            record_to,
            record_pack_to,
            stats_to,
            log,
        })
    }

    /// The outputs checked against the inputs and each other
    /// (`output.rs`): the files to write, in this order: `--record`'s
    /// trace and pack, `--stats-json`.
    fn check_outputs(opts: &RestoreOptions) -> Result<Vec<PathBuf>, RestoreError> {
        let packs = |p: &Option<PathBuf>| p.as_deref().filter(|_| opts.pack).map(pack::path_for);
        let (record_pack, prefetch_pack) = (packs(&opts.record), packs(&opts.prefetch));
        let outputs: Vec<output::Wanted<'_>> = [
            ("--record", opts.record.as_deref()),
            ("--record's pages", record_pack.as_deref()),
            ("--stats-json", opts.stats_json.as_deref()),
        ]
        .into_iter()
        .filter_map(|(option, path)| path.map(|path| output::Wanted { option, path }))
        .collect();
        let mut inputs: Vec<(&'static str, &Path)> = vec![
            ("the memory file", &opts.memory_file),
            ("the socket", &opts.socket),
        ];
        if let Some(p) = &opts.prefetch {
            inputs.push(("the --prefetch trace", p));
        }
        if let Some(p) = &prefetch_pack {
            inputs.push(("the --prefetch trace's pages", p));
        }
        if let Populate::Trace(p) = &opts.populate {
            inputs.push(("the --populate trace", p));
        }
        // An object URL is written with one PUT at the end (`memory.rs`):
        // never over an input object; the files are checked as files.
        let (urls, files): (Vec<_>, Vec<_>) =
            outputs.into_iter().partition(|w| memory::is_url(w.path));
        for w in &urls {
            if let Some((what, _)) = inputs.iter().find(|(_, p)| *p == w.path) {
                return Err(RestoreError::Usage(format!(
                    "{} {} is also {what}: an output never replaces an input",
                    w.option,
                    w.path.display()
                )));
            }
        }
        inputs.retain(|(_, p)| !memory::is_url(p));
        output::check(&files, &inputs)
    }

    /// The socket's path (as given in [`RestoreOptions::socket`]).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::{Restore, RestoreOptions};
    /// let dir = std::env::temp_dir().join(format!("socket-path-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("vm.mem"), [0u8; 4096])?;
    /// let restore = Restore::bind(RestoreOptions::new(dir.join("uffd.sock"), dir.join("vm.mem")))?;
    /// println!("listening on {}", restore.socket_path().display());
    /// assert_eq!(restore.socket_path(), dir.join("uffd.sock"));
    /// drop(restore);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn socket_path(&self) -> &Path {
        &self.opts.socket
    }

    /// Accepts the VMM, takes its handoff and serves until it goes away;
    /// the figures, or why it could not start. The socket file is removed
    /// when it returns, either way. (A full restore: [`Restore`]'s
    /// example.)
    ///
    /// # Errors
    /// Before serving: [`RestoreError::AcceptTimeout`] (nobody connected
    /// within [`RestoreOptions::accept_timeout`]),
    /// [`RestoreError::HandoffTimeout`], [`RestoreError::ClosedBeforeHandoff`],
    /// [`RestoreError::MessageTooLarge`], [`RestoreError::NoFileDescriptor`],
    /// [`RestoreError::TooManyFileDescriptors`],
    /// [`RestoreError::NotUserfaultfd`],
    /// [`RestoreError::UserfaultfdNotInitialised`] (the message);
    /// [`RestoreError::NotJson`], [`RestoreError::WrongShape`],
    /// [`RestoreError::NoMappings`], [`RestoreError::Mapping`],
    /// [`RestoreError::SizesExceedFile`] (the mappings);
    /// [`RestoreError::Stopped`] (a signal while waiting, with
    /// [`RestoreOptions::stop_on_signals`]); [`RestoreError::Pager`]
    /// (the handler threads could not start); [`RestoreError::Io`] (a
    /// system call of the wait failed).
    /// [`RestoreError::leaves_vmm_waiting`] tells whether a VMM had
    /// connected. Once serving, errors are the summary's
    /// ([`RestoreSummary::errors`]), and the ending says why it stopped.
    ///
    /// # Examples
    /// Nobody connects within the accept timeout:
    /// ```
    /// use std::time::Duration;
    /// use herdless_pager::restore::{Restore, RestoreError, RestoreOptions};
    /// let dir = std::env::temp_dir().join(format!("run-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("vm.mem"), [0u8; 4096])?;
    /// let mut opts = RestoreOptions::new(dir.join("uffd.sock"), dir.join("vm.mem"));
    /// opts.accept_timeout = Some(Duration::from_millis(10));
    /// let e = Restore::bind(opts)?.run().err().unwrap();
    /// assert!(matches!(e, RestoreError::AcceptTimeout(_)) && !e.leaves_vmm_waiting());
    /// assert!(!dir.join("uffd.sock").exists());
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run(mut self) -> Result<RestoreSummary, RestoreError> {
        let (stream, _peer) = handoff::accept(
            &self.listener,
            self.opts.accept_timeout,
            self.opts.allow_uid,
            &self.log,
            self.signals.as_ref(),
        )?;
        let (body, fd) =
            handoff::receive(&stream, self.opts.handoff_timeout, self.signals.as_ref())?;
        self.handed_off_after = self.listening_since.elapsed();
        let mappings = mappings::parse(&body, self.file_len, rustix::param::page_size())?;
        let uffd = handoff::adopt_uffd(fd, &self.log)?;
        let source = self
            .source
            .take()
            .ok_or(RestoreError::ClosedBeforeHandoff)?;
        // The memory, shared: the handlers read it (behind the pack, if
        // one is used), and `--record` packs the recorded pages from it.
        let memory: Arc<dyn PageSource> = Arc::from(source.boxed());
        let served: Box<dyn PageSource> = match self.pack.take() {
            Some(p) => Box::new(p.into_source(Arc::clone(&memory))),
            None => Box::new(Arc::clone(&memory)),
        };
        server::serve(&mut self, stream, uffd, served, memory, &mappings)
    }
}

/// What a scoped thread returned (its panic goes on in this thread).
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Opens the pack of the prefetch trace at `path` (`pack/`), reads it
/// ahead (an object: queues its parts) and checks it against the memory;
/// what the summary will say of it. A pack that is absent or refused is
/// logged and not used (the prefetch reads the memory); only a signal is
/// an error.
fn open_pack(
    path: &Path,
    started: Result<pack::StartedPack, pack::NotUsed>,
    trace: &Trace,
    memory: &MemorySource,
    log: Log,
    signals: Option<&Signals>,
) -> Result<(Option<pack::OpenPack>, Option<pack::PackFigures>), RestoreError> {
    let not_used = |why: String, warning: bool| {
        let warning = if warning { "warning: " } else { "" };
        log.line(&format!(
            "{warning}{why}: prefetching the trace's pages from the memory"
        ));
        Ok((
            None,
            Some(pack::PackFigures::not_used(&pack::path_for(path), why)),
        ))
    };
    let mut opened = match started.and_then(|p| p.for_trace(trace)) {
        Ok(p) => p,
        Err(pack::NotUsed::Absent(why)) => return not_used(why, false),
        Err(pack::NotUsed::Refused(why)) => return not_used(why, true),
    };
    if let Err(e) = read_ahead(opened.bytes(), &[opened.data_range()], signals)? {
        return not_used(
            format!("the pack {}: cannot read it: {e}", opened.shown),
            true,
        );
    }
    match opened.bind_to(memory) {
        Ok(()) => {
            log.line(&format!(
                "prefetching from the pack {} ({:.1} MiB; bound by {})",
                opened.shown,
                opened.data_range().1 as f64 / f64::from(1 << 20),
                opened.bound_by
            ));
            let figures = opened.figures();
            Ok((Some(opened), Some(figures)))
        }
        Err(why) => not_used(format!("the pack {}: {why}", opened.shown), true),
    }
}

/// Reads `ranges` (offset, length) of the memory file into the page cache
/// and maps them, in steps of [`READ_AHEAD_STEP`], looking for a signal
/// between two steps: `Err` if one came, `Ok` with how reading went
/// otherwise (a failure to read ahead is only a warning).
fn read_ahead(
    source: &MemorySource,
    ranges: &[(u64, u64)],
    signals: Option<&Signals>,
) -> Result<Result<(), PagerError>, RestoreError> {
    let stopped = || {
        signals.and_then(Signals::take).map_or(Ok(()), |signal| {
            Err(RestoreError::Stopped {
                signal,
                during: StoppedDuring::ReadingAhead,
            })
        })
    };
    for &(offset, len) in ranges {
        let end = offset.saturating_add(len);
        let mut at = offset;
        while at < end {
            stopped()?;
            let step = READ_AHEAD_STEP.min(end - at);
            if let Err(e) = source.populate(at, step) {
                return Ok(Err(e));
            }
            at += step;
        }
    }
    stopped()?;
    Ok(Ok(()))
}
