//! The processes of one restore: a Firecracker VM (its API, its serial
//! console as timestamped lines, its vCPU thread's page faults) and a
//! page-fault handler, each killed and reaped when dropped, and killed by
//! the kernel if the lab dies first (`PR_SET_PDEATHSIG`), so no VM
//! outlives the lab.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::api::{reworded, Api};
use crate::harness::LabError;

/// A child process, killed and reaped on drop.
pub(crate) struct Process {
    child: Child,
    name: &'static str,
    /// Its standard error (and output, unless piped), for error messages.
    log: PathBuf,
}

impl Process {
    /// Starts `program args`, its standard error (and standard output,
    /// unless `pipes`) into `log`; with `pipes`, its standard input and
    /// output are pipes.
    pub(crate) fn spawn<I, S>(
        name: &'static str,
        program: &Path,
        args: I,
        log: &Path,
        pipes: bool,
    ) -> Result<Process, LabError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::spawn_with_env(name, program, args, &[], log, pipes)
    }

    /// [`spawn`](Self::spawn), with `env` added to its environment.
    pub(crate) fn spawn_with_env<I, S>(
        name: &'static str,
        program: &Path,
        args: I,
        env: &[(String, String)],
        log: &Path,
        pipes: bool,
    ) -> Result<Process, LabError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let os = |what: &str, e| LabError::os(format!("{what} {name} ({})", program.display()), e);
        let err = File::create(log).map_err(|e| os("log file of", e))?;
        let (input, out) = if pipes {
            (Stdio::piped(), Stdio::piped())
        } else {
            let out = err.try_clone().map_err(|e| os("log file of", e))?;
            (Stdio::null(), Stdio::from(out))
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(input)
            .stdout(out)
            .stderr(err);
        // SAFETY: the closure runs in the child between fork and exec and
        // makes one async-signal-safe system call (prctl), touching no
        // memory of the parent's.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let child = cmd.spawn().map_err(|e| os("starting", e))?;
        Ok(Process {
            child,
            name,
            log: log.to_path_buf(),
        })
    }

    /// Its exit status, waiting at most `within` for it to exit.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Result<Option<ExitStatus>, LabError> {
        let deadline = Instant::now() + within;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(Some(status)),
                Ok(None) if Instant::now() >= deadline => return Ok(None),
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(LabError::os(format!("waiting for {}", self.name), e)),
            }
        }
    }

    /// The bytes its `read`-family system calls returned so far (`rchar`
    /// in `/proc/PID/io`), while it runs.
    pub(crate) fn bytes_read(&self) -> Option<u64> {
        Some(
            procfs::process::Process::new(self.child.id() as i32)
                .ok()?
                .io()
                .ok()?
                .rchar,
        )
    }

    /// Kills it (if still running) and reaps it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last `lines` lines of its log.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of the file at `path`, joined with " | ".
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

/// A line of the guest's serial console and when the lab read it.
pub(crate) type Line = (Instant, String);

/// A Firecracker process with its API and its serial console.
pub(crate) struct Vm {
    process: Process,
    /// The serial console's input.
    input: ChildStdin,
    /// Its API.
    pub(crate) api: Api,
    lines: Receiver<Line>,
    /// The console lines read so far (for error messages).
    seen: Vec<String>,
    logger: PathBuf,
}

impl Vm {
    /// Starts Firecracker with its API socket, logger and output in `dir`,
    /// and waits until the API answers.
    pub(crate) fn start(firecracker: &Path, dir: &Path) -> Result<Vm, LabError> {
        let socket = dir.join("api.sock");
        let logger = dir.join("firecracker.log");
        let args: [&OsStr; 7] = [
            "--api-sock".as_ref(),
            socket.as_os_str(),
            // The default filter of a build for the gnu target allows
            // everything anyway; no filter keeps builds comparable.
            "--no-seccomp".as_ref(),
            "--log-path".as_ref(),
            logger.as_os_str(),
            "--level".as_ref(),
            "Warning".as_ref(),
        ];
        let mut process = Process::spawn(
            "firecracker",
            firecracker,
            args,
            &dir.join("firecracker.stderr"),
            true,
        )?;
        let (Some(input), Some(stdout)) = (process.child.stdin.take(), process.child.stdout.take())
        else {
            return Err(LabError::Sample("firecracker's stdio was not piped".into()));
        };
        let (tx, lines) = mpsc::channel();
        std::thread::Builder::new()
            .name("lab-fc-serial".into())
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut buf = Vec::new();
                while matches!(reader.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
                    let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                    if tx.send((Instant::now(), line)).is_err() {
                        break;
                    }
                    buf.clear();
                }
            })
            .map_err(|e| LabError::os("spawning the serial reader", e))?;
        let vm = Vm {
            process,
            input,
            api: Api::new(&socket)?,
            lines,
            seen: Vec::new(),
            logger,
        };
        vm.api
            .wait_ready(Duration::from_secs(10))
            .map_err(|e| vm.explain(e))?;
        Ok(vm)
    }

    /// Sends a byte to the guest's serial input: it ends the guest's wait
    /// between two passes (see guest.c).
    pub(crate) fn nudge(&mut self) -> Result<(), LabError> {
        self.input
            .write_all(b"\n")
            .and_then(|()| self.input.flush())
            .map_err(|e| self.explain(LabError::os("writing to the guest's serial input", e)))
    }

    /// The next console line starting with `prefix` (skipping others),
    /// within `within`; an `ERROR` line from the guest, the console's end or
    /// the time running out is an error saying what the VM last said.
    pub(crate) fn expect(&mut self, prefix: &str, within: Duration) -> Result<Line, LabError> {
        self.expect_watching(prefix, within, &mut || Ok(()))
    }

    /// [`Vm::expect`], calling `watch` every few milliseconds while no line
    /// comes: an error from it ends the wait.
    pub(crate) fn expect_watching(
        &mut self,
        prefix: &str,
        within: Duration,
        watch: &mut dyn FnMut() -> Result<(), LabError>,
    ) -> Result<Line, LabError> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left.min(Duration::from_millis(10))) {
                Ok((at, line)) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return Ok((at, line));
                    }
                    if line.starts_with("ERROR") {
                        return Err(self.explain(LabError::Sample(format!("the guest: {line}"))));
                    }
                }
                Err(RecvTimeoutError::Timeout) if !left.is_zero() => {
                    watch().map_err(|e| self.explain(e))?;
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.explain(LabError::Stuck {
                        what: format!("the guest's {prefix} line"),
                        after: within,
                    }))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.explain(LabError::Sample(format!(
                        "Firecracker exited before the guest's {prefix} line"
                    ))))
                }
            }
        }
    }

    /// `e`, with what the guest and Firecracker said last.
    pub(crate) fn explain(&self, e: LabError) -> LabError {
        let console = self.seen[self.seen.len().saturating_sub(3)..].join(" | ");
        reworded(e, |e| {
            format!(
                "{e}; console: [{console}]; firecracker: [{}] [{}]",
                tail(&self.logger, 3),
                self.process.log_tail(3)
            )
        })
    }

    /// Page faults the vCPU thread took so far (minor + major: a fault a
    /// userfaultfd handler served counts as major), or `None` if the
    /// thread is not found.
    pub(crate) fn vcpu_faults(&self) -> Option<u64> {
        let process = procfs::process::Process::new(self.process.child.id() as i32).ok()?;
        let stat = process.tasks().ok()?.flatten().find_map(|task| {
            let stat = task.stat().ok()?;
            (stat.comm == "fc_vcpu 0").then_some(stat)
        })?;
        Some(stat.minflt + stat.majflt)
    }

    /// Kills Firecracker and reaps it.
    pub(crate) fn kill(&mut self) {
        self.process.kill();
    }
}
