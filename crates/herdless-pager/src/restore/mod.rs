//! `herdless-uffd`'s library: serving a Firecracker snapshot restore over
//! the UFFD handoff with the pager's handlers, fault-around, working-set
//! record and prefetch (issue 13), refusing what it should (issue 17).
//!
//! [`Restore::bind`] checks the options and the output paths
//! (`output.rs`: never one of the inputs, written only at the end, beside
//! the target and renamed over it), opens the memory file (and the traces
//! to read) and creates the socket; then
//! [`Restore::run`] accepts the VMM's connection, receives its message
//! (`handoff.rs`), checks the mappings against the memory file
//! (`mappings.rs`), serves faults until the VMM goes away (`server.rs`,
//! with `prefetch.rs`; `signals.rs` for `SIGINT`/`SIGTERM`), writes the
//! trace (`trace.rs`) and returns the figures (`summary.rs`). Every refusal is a [`RestoreError`]
//! (`error.rs`) whose message is one line.
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
mod output;
mod prefetch;
mod server;
mod signals;
mod summary;
pub mod trace;

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::RestoreError;
pub use handoff::{Peer, MAX_MESSAGE};
pub use prefetch::CHUNK_PAGES;
pub use summary::{Ending, RestoreSummary};
pub use trace::{Run, Trace};

use crate::pager::config;
use crate::PagerError;
use memory::MemorySource;

/// Default wait for the handoff message once the VMM has connected.
pub const DEFAULT_HANDOFF_TIMEOUT: Duration = Duration::from_secs(10);

/// Default permission bits of the socket: the owner only.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;

/// What `herdless-uffd` is asked to do (its command line).
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
    /// Prefetch the pages of this trace in the background.
    pub prefetch: Option<PathBuf>,
    /// Threads installing the trace side by side (page population is
    /// CPU-bound in the kernel: one per CPU the handler may use).
    pub prefetch_threads: usize,
    /// Copy every page before serving any fault (Firecracker's
    /// `fault_all_handler`).
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
    /// Stop (with the summary) on `SIGINT` or `SIGTERM`: blocks them in
    /// the calling thread and the threads it starts. For the binary; a
    /// library user handles its own signals.
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
    /// timeout.
    pub fn new(socket: impl Into<PathBuf>, memory_file: impl Into<PathBuf>) -> Self {
        RestoreOptions {
            socket: socket.into(),
            memory_file: memory_file.into(),
            fault_around: rustix::param::page_size(),
            handlers: 1,
            record: None,
            prefetch: None,
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
/// listening. Dropping it removes the socket.
pub struct Restore {
    opts: RestoreOptions,
    listener: UnixListener,
    /// Taken by `run`.
    source: Option<MemorySource>,
    /// The object served, if any (its figures, after `run` took the source).
    #[cfg(feature = "object-store")]
    object: Option<crate::object::ObjectSource>,
    file_len: u64,
    trace: Option<Trace>,
    /// Where `--record` and `--stats-json` are written (checked).
    record_to: Option<PathBuf>,
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
    /// [`RestoreError::is_usage`] tells a usage error from the others.
    pub fn bind(opts: RestoreOptions) -> Result<Self, RestoreError> {
        let page = rustix::param::page_size();
        let usage = |e: PagerError| RestoreError::Usage(e.to_string());
        config::check_window(opts.fault_around, page).map_err(usage)?;
        config::check_handlers(opts.handlers).map_err(usage)?;
        if opts.prefetch_threads == 0 {
            return Err(RestoreError::Usage(
                "--prefetch-threads 0: at least one prefetch thread".into(),
            ));
        }
        let targets = Self::check_outputs(&opts)?;
        let source = MemorySource::open(&opts)?;
        let file_len = source.len();
        // A trace must come from this memory file (a prefetch trace and a
        // populate trace alike); its page sizes need not be the restore's
        // (`trace.rs`: served by bytes).
        let checked = |path: &PathBuf| -> Result<Trace, RestoreError> {
            let t = memory::read_trace(path, &opts)?;
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
        let trace = opts.prefetch.as_ref().map(checked).transpose()?;
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
        // The whole file, or every page of the traces given (the prefetch
        // trace's pages are the ones the handlers copy first).
        let populated = if matches!(opts.populate, Populate::All) || opts.copy_all {
            source.populate(0, file_len)
        } else {
            [trace.as_ref(), populate_trace.as_ref()]
                .into_iter()
                .flatten()
                .flat_map(|t| t.runs.iter())
                .try_for_each(|r| source.populate(r.offset, r.bytes()))
        };
        if let Err(e) = populated {
            log.line(&format!(
                "warning: could not read the memory file ahead: {e}"
            ));
        }
        let listener = handoff::listen(&opts.socket, opts.socket_mode)?;
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
        let stats_to = file(&opts.stats_json).then(|| targets.next()).flatten();
        Ok(Restore {
            opts,
            listener,
            #[cfg(feature = "object-store")]
            object: source.object().cloned(),
            source: Some(source),
            file_len,
            trace,
            record_to,
            stats_to,
            log,
        })
    }

    /// The outputs checked against the inputs and each other
    /// (`output.rs`): the files to write, `--record`'s first.
    fn check_outputs(opts: &RestoreOptions) -> Result<Vec<PathBuf>, RestoreError> {
        let outputs: Vec<output::Wanted<'_>> = [
            ("--record", opts.record.as_deref()),
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

    /// The socket's path.
    pub fn socket_path(&self) -> &Path {
        &self.opts.socket
    }

    /// Accepts the VMM, takes its handoff and serves until it goes away;
    /// the figures, or why it could not start.
    pub fn run(mut self) -> Result<RestoreSummary, RestoreError> {
        let (stream, _peer) = handoff::accept(
            &self.listener,
            self.opts.accept_timeout,
            self.opts.allow_uid,
            &self.log,
        )?;
        let (body, fd) = handoff::receive(&stream, self.opts.handoff_timeout)?;
        let mappings = mappings::parse(&body, self.file_len, rustix::param::page_size())?;
        let uffd = handoff::adopt_uffd(fd, &self.log)?;
        let source = self
            .source
            .take()
            .ok_or(RestoreError::ClosedBeforeHandoff)?;
        server::serve(&mut self, stream, uffd, source, &mappings)
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.opts.socket);
    }
}
