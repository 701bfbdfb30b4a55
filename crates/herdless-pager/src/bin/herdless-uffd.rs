//! `herdless-uffd`: a page-fault handler for restoring Firecracker
//! snapshots, a drop-in for Firecracker's example handlers
//! (`herdless-uffd <SOCKET> <MEMORY_FILE>`), served by herdless-pager's
//! handler threads with fault-around, working-set record and prefetch.
//! The logic is the library's `restore` module; this file is the command
//! line, the log and the exit status.
//!
//! Exit status: 0 when the VMM went away and every fault was served; 3
//! when it went away but some faults could not be served from the memory
//! file (poisoned: a file that shrank, a fault outside every mapping) or
//! errors were reported; 1 when the handler refused (files, socket, peer,
//! handoff: one line on standard error says why) or its handlers failed;
//! 2 for a usage error (an option's value or a combination that can never
//! work, an output path naming an input or the other output); 128 + the
//! signal on `SIGINT`/`SIGTERM`, at any stage (the socket removed, no
//! output written).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use herdless_pager::restore::{
    Ending, Populate, Restore, RestoreError, RestoreOptions, DEFAULT_SOCKET_MODE,
};

/// Serve a Firecracker snapshot's memory over the UFFD handoff.
///
/// Listens on SOCKET (give its path to Firecracker's snapshot load as
/// mem_backend {"backend_type": "Uffd", "backend_path": SOCKET}), receives
/// the VMM's guest memory mappings and userfaultfd, and serves every page
/// fault from MEMORY_FILE until the VMM exits. MEMORY_FILE (and the
/// --prefetch, --populate and --record traces) may be an object URL,
/// s3://BUCKET/KEY (or gs://, az://, http(s)://, file://), read in chunks
/// through a host cache; the store's endpoint, region and credentials come
/// from the environment (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,
/// AWS_SECRET_ACCESS_KEY, AWS_ALLOW_HTTP...). Needs root, or access to
/// /dev/userfaultfd for the VMM; runs as any user that can read the
/// memory file and reach the socket.
#[derive(Debug, Parser)]
#[command(
    name = "herdless-uffd",
    version,
    max_term_width = 100,
    after_help = "Exit status: 0 served and clean; 3 served, some faults not from the file; \
                  1 refused (why: one line on standard error); 2 usage error; 128 + N stopped \
                  by signal N (SIGINT, SIGTERM: at any stage, the socket removed, nothing \
                  written)."
)]
struct Cli {
    /// Unix socket to create and listen on (must not exist).
    socket: PathBuf,
    /// The snapshot's guest memory file, or its object URL.
    memory_file: PathBuf,
    /// Fault-around window in bytes (a power of two, one page to 2 MiB;
    /// default one page: off, as Firecracker's example handler, and what
    /// --record needs). Accepts K and M suffixes. Regions of 2 MiB
    /// hugepages are served one whole page per fault.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    fault_around: Option<usize>,
    /// Handler threads.
    #[arg(long, value_name = "N", default_value_t = 1)]
    handlers: usize,
    /// Write the pages faulted on, in first-touch order, to this trace
    /// file when the VMM exits (record with --fault-around 4096), and
    /// their bytes, in that order, to TRACE.pages beside it (the trace's
    /// pack).
    #[arg(long, value_name = "TRACE")]
    record: Option<PathBuf>,
    /// Install the pages of this trace in the background from the start,
    /// demand faults first; their bytes from the trace's pack TRACE.pages
    /// when it is there and belongs to this trace and memory (a few large
    /// reads or range GETs), else from the memory file.
    #[arg(long, value_name = "TRACE")]
    prefetch: Option<PathBuf>,
    /// Neither write a pack with --record nor read one with --prefetch.
    #[arg(long)]
    no_pack: bool,
    /// Threads installing the --prefetch trace side by side (copying is
    /// CPU-bound in the kernel: up to one per CPU the handler may use).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "prefetch")]
    prefetch_threads: usize,
    /// Copy every page, in the background from the handoff on, while the
    /// handlers serve faults (a fault waits at most for the 2 MiB run in
    /// flight); Firecracker's fault_all_handler copies everything first.
    #[arg(long, conflicts_with = "prefetch")]
    copy_all: bool,
    /// Read the memory file into the page cache and map it before the VMM
    /// connects: all of it, as Firecracker's example handlers do
    /// (MAP_POPULATE), or, as --populate=TRACE, only the pages of TRACE.
    /// --prefetch does it for its trace's pages.
    #[arg(long, value_name = "TRACE", num_args = 0..=1, require_equals = true)]
    populate: Option<Option<PathBuf>>,
    /// Write the figures as JSON to this file when the VMM exits.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<PathBuf>,
    /// Accept only a peer with this user id (others are logged and turned
    /// away before anything is read from them).
    #[arg(long, value_name = "UID")]
    allow_uid: Option<u32>,
    /// Permission bits of the socket, in octal.
    #[arg(long, value_name = "OCTAL", default_value = "600", value_parser = parse_mode)]
    socket_mode: u32,
    /// Give up if no VMM connects within this many seconds (default: wait
    /// forever).
    #[arg(long, value_name = "SECS")]
    accept_timeout: Option<f64>,
    /// Give up if the VMM, once connected, sends no complete handoff
    /// message within this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    handoff_timeout: f64,
    /// Log nothing but errors and the summary.
    #[arg(long)]
    quiet: bool,
    #[cfg(feature = "object-store")]
    #[command(flatten)]
    object: ObjectArgs,
}

/// Reading an object URL.
#[cfg(feature = "object-store")]
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Object stores (an object URL as MEMORY_FILE)")]
struct ObjectArgs {
    /// Bytes per range GET (a multiple of 4096; K and M suffixes).
    #[arg(long, value_name = "BYTES", default_value = "2M", value_parser = parse_bytes)]
    chunk_size: usize,
    /// The host chunk cache, shared by every herdless-uffd on the host
    /// [default: /var/cache/herdless-uffd for root, else
    /// $XDG_CACHE_HOME/herdless-uffd]
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Use no host cache: fetch every chunk from the store.
    #[arg(long)]
    no_cache: bool,
    /// Bytes the host cache may hold, all objects together, least recently
    /// used evicted first (K, M and G suffixes).
    #[arg(long, value_name = "BYTES", default_value = "8G", value_parser = parse_bytes)]
    cache_max: usize,
    /// Chunks the prefetch fetches at once (a fault's chunk is fetched at
    /// once, ahead of them).
    #[arg(long, value_name = "N", default_value_t = herdless_pager::object::DEFAULT_FETCH_CONCURRENCY)]
    fetch_concurrency: usize,
    /// Chunks of the prefetch trace's pack asked for in the round trip
    /// that opens it, before its size is known (0: none; no more than
    /// --fetch-concurrency are): its pages arrive a round trip
    /// sooner. Not done where the host cache holds the pack already.
    #[arg(long, value_name = "N", default_value_t = herdless_pager::object::DEFAULT_FETCH_AHEAD)]
    fetch_ahead: usize,
    /// Tries after the first for a GET that fails (5xx, the network);
    /// then the chunk's pages are poisoned (SIGBUS in the guest).
    #[arg(long, value_name = "N", default_value_t = 4)]
    fetch_retries: u32,
}

fn parse_bytes(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (s, 1),
        Some((i, _)) => {
            let unit = s[i..].to_ascii_lowercase();
            let mult = match unit.as_str() {
                "k" | "kib" | "kb" => 1 << 10,
                "m" | "mib" | "mb" => 1 << 20,
                "g" | "gib" | "gb" => 1 << 30,
                _ => return Err(format!("unknown unit {:?} (use K, M or G)", &s[i..])),
            };
            (&s[..i], mult)
        }
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a byte count"))
}

fn parse_mode(s: &str) -> Result<u32, String> {
    let m = u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .map_err(|_| format!("{s:?} is not an octal mode"))?;
    if m > 0o777 {
        return Err(format!("{s:?}: only permission bits (at most 777)"));
    }
    Ok(m)
}

fn seconds(s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("{s} is not a number of seconds"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let usage = |msg: String| {
        eprintln!("herdless-uffd: error: {msg}");
        ExitCode::from(2)
    };
    let accept_timeout = match cli.accept_timeout.map(seconds).transpose() {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let handoff_timeout = match seconds(cli.handoff_timeout) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let defaults = RestoreOptions::new(&cli.socket, &cli.memory_file);
    let opts = RestoreOptions {
        fault_around: cli.fault_around.unwrap_or(defaults.fault_around),
        handlers: cli.handlers,
        record: cli.record,
        prefetch: cli.prefetch,
        pack: !cli.no_pack,
        prefetch_threads: cli.prefetch_threads,
        copy_all: cli.copy_all,
        populate: match cli.populate {
            None => Populate::Nothing,
            Some(None) => Populate::All,
            Some(Some(trace)) => Populate::Trace(trace),
        },
        stats_json: cli.stats_json,
        allow_uid: cli.allow_uid,
        socket_mode: cli.socket_mode,
        accept_timeout,
        handoff_timeout,
        stop_on_signals: true,
        quiet: cli.quiet,
        #[cfg(feature = "object-store")]
        object: herdless_pager::object::ObjectOptions {
            chunk_size: cli.object.chunk_size as u64,
            cache_dir: if cli.object.no_cache {
                None
            } else {
                Some(
                    cli.object
                        .cache_dir
                        .unwrap_or_else(herdless_pager::object::default_cache_dir),
                )
            },
            cache_max: cli.object.cache_max as u64,
            fetch_concurrency: cli.object.fetch_concurrency,
            fetch_ahead: cli.object.fetch_ahead,
            retries: cli.object.fetch_retries,
            ..herdless_pager::object::ObjectOptions::default()
        },
        ..defaults
    };
    debug_assert_eq!(DEFAULT_SOCKET_MODE, 0o600);
    let restore = match Restore::bind(opts) {
        Ok(r) => r,
        Err(e) if e.is_usage() => return usage(e.to_string()),
        // Nothing has listened yet: no VMM can have connected.
        Err(e) => return refused(&e, false),
    };
    if !cli.quiet {
        eprintln!(
            "herdless-uffd: listening on {}",
            restore.socket_path().display()
        );
    }
    match restore.run() {
        Ok(summary) => {
            for e in summary.errors.iter().take(20) {
                eprintln!("herdless-uffd: {e}");
            }
            if summary.errors.len() > 20 {
                eprintln!(
                    "herdless-uffd: ... {} more errors",
                    summary.errors.len() - 20
                );
            }
            println!("{}", summary.line());
            if matches!(summary.ending, Ending::Signal(_)) {
                vmm_left_waiting();
            }
            match summary.ending {
                Ending::Signal(s) => by_signal(s),
                Ending::HandlersFailed => ExitCode::from(1),
                Ending::VmmClosed | Ending::VmmGone if summary.clean() => ExitCode::SUCCESS,
                Ending::VmmClosed | Ending::VmmGone => ExitCode::from(3),
            }
        }
        Err(e) => refused(&e, e.leaves_vmm_waiting()),
    }
}

/// The exit status for a stop by `signal`: 128 + it, as a shell reports a
/// process the signal killed.
fn by_signal(signal: i32) -> ExitCode {
    ExitCode::from((128 + signal).clamp(0, 255) as u8)
}

/// Says why the restore did not serve (and, if `vmm_waiting`, that the
/// VMM which connected is left without a handler), and exits 1 (128 + N
/// for a signal).
fn refused(e: &RestoreError, vmm_waiting: bool) -> ExitCode {
    let signal = e.signal();
    if signal.is_some() {
        eprintln!("herdless-uffd: {e}");
    } else {
        eprintln!("herdless-uffd: error: {e}");
    }
    if vmm_waiting {
        vmm_left_waiting();
    }
    signal.map_or(ExitCode::from(1), by_signal)
}

/// Says that the VMM which connected is left without a handler.
fn vmm_left_waiting() {
    eprintln!(
        "herdless-uffd: note: the VMM that connected has no page-fault handler now; \
         if it resumed its VM, the VM hangs at its first page fault: stop it"
    );
}
