//! `herdless-uffd`'s output files (`--record`, `--stats-json`): checked
//! before anything else happens, written only when complete, and never
//! over one of its inputs (issue 22).
//!
//! - [`check`] runs in [`Restore::bind`](super::Restore::bind), before the
//!   memory file is read or the socket created, and opens nothing for
//!   writing: an output that names the memory file, a trace being read,
//!   the socket or the other output (by its real path, through symlinks
//!   and `./x` spellings, or by device and inode when it exists: a hard
//!   link) is a usage error; one whose directory is missing or not
//!   writable, that is a directory or another non-regular file, or a
//!   dangling symlink, is refused too.
//! - [`write_beside`] writes the bytes to a new temporary file in the
//!   target's directory, syncs it, and renames it over the target: a crash
//!   or a refusal at any point leaves the old file as it was. An output
//!   that is a symlink to a file has that file replaced (the link stays).

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::RestoreError;

/// What a path names, as far as can be told: where it is (its directory
/// resolved, the name kept), where it leads (through symlinks) and, when it
/// exists, its device and inode.
#[derive(Debug)]
struct Identity {
    /// The path with its directory made canonical (a final symlink kept).
    located: PathBuf,
    /// The path with every symlink resolved, if it exists.
    real: Option<PathBuf>,
    /// `(device, inode)` of what it leads to, if it exists.
    inode: Option<(u64, u64)>,
}

impl Identity {
    fn of(path: &Path) -> Identity {
        let located = match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) => {
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                std::fs::canonicalize(dir).map_or_else(|_| absolute(path), |d| d.join(name))
            }
            _ => absolute(path),
        };
        Identity {
            located,
            real: std::fs::canonicalize(path).ok(),
            inode: std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino())),
        }
    }

    /// Whether `self` and `other` may be the same file.
    fn same_as(&self, other: &Identity) -> bool {
        let paths = |i: &Identity| -> Vec<PathBuf> {
            std::iter::once(i.located.clone())
                .chain(i.real.clone())
                .collect()
        };
        let theirs = paths(other);
        paths(self).iter().any(|p| theirs.contains(p))
            || (self.inode.is_some() && self.inode == other.inode)
    }
}

/// `path` made absolute against the current directory (no resolution).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// One output to check: its option's name and path.
pub(crate) struct Wanted<'a> {
    /// The option, as the command line spells it (`--record`).
    pub(crate) option: &'static str,
    /// The path given.
    pub(crate) path: &'a Path,
}

/// Checks the outputs against every input (`(what it is, path)`: the
/// memory file, the traces read, the socket) and each other, then each
/// output's place on the file system; returns, for each, the file to
/// write (the path itself, or the file its symlink leads to). Opens
/// nothing for writing.
pub(crate) fn check(
    outputs: &[Wanted<'_>],
    inputs: &[(&'static str, &Path)],
) -> Result<Vec<PathBuf>, RestoreError> {
    let ids: Vec<Identity> = outputs.iter().map(|o| Identity::of(o.path)).collect();
    for (i, (out, id)) in outputs.iter().zip(&ids).enumerate() {
        for &(what, input) in inputs {
            if id.same_as(&Identity::of(input)) {
                return Err(RestoreError::OutputCollides {
                    option: out.option,
                    path: out.path.to_path_buf(),
                    other: what.to_string(),
                    other_path: input.to_path_buf(),
                });
            }
        }
        for (other, other_id) in outputs.iter().zip(&ids).take(i) {
            if id.same_as(other_id) {
                return Err(RestoreError::OutputCollides {
                    option: out.option,
                    path: out.path.to_path_buf(),
                    other: format!("the {} output", other.option),
                    other_path: other.path.to_path_buf(),
                });
            }
        }
    }
    outputs
        .iter()
        .map(|o| target_of(o.option, o.path))
        .collect()
}

/// The file an output is written to, if it can be: an existing regular
/// file (through symlinks), or a new name in an existing directory this
/// process may create files in.
fn target_of(option: &'static str, path: &Path) -> Result<PathBuf, RestoreError> {
    let refuse = |reason: String| RestoreError::Output {
        option,
        path: path.to_path_buf(),
        reason,
    };
    let Some(name) = path.file_name() else {
        return Err(refuse("not a file name".into()));
    };
    let target = match std::fs::symlink_metadata(path) {
        Ok(_) => match std::fs::metadata(path) {
            Ok(m) if m.is_file() => std::fs::canonicalize(path)
                .map_err(|e| refuse(format!("cannot resolve it: {e}")))?,
            Ok(m) if m.is_dir() => return Err(refuse("is a directory".into())),
            Ok(_) => {
                return Err(refuse(
                    "is not a regular file (outputs are written to a new file beside it and \
                     renamed over it)"
                        .into(),
                ))
            }
            Err(e) => return Err(refuse(format!("a symlink to nothing ({e})"))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let dir = std::fs::canonicalize(dir)
                .map_err(|e| refuse(format!("its directory {}: {e}", dir.display())))?;
            if !dir.is_dir() {
                return Err(refuse(format!("{} is not a directory", dir.display())));
            }
            dir.join(name)
        }
        Err(e) => return Err(refuse(e.to_string())),
    };
    let dir = target.parent().unwrap_or(Path::new("/"));
    rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .map_err(|e| {
        refuse(format!(
            "cannot create a file in its directory {}: {e}",
            dir.display()
        ))
    })?;
    Ok(target)
}

/// Writes `bytes` to a new file beside `target` and renames it over
/// `target` once written and synced (module doc); the new file takes the
/// old one's permission bits, if there was one.
pub(crate) fn write_beside(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let mode = std::fs::metadata(target).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let (tmp, mut file) = loop {
        let tmp = dir.join(format!(
            ".{name}.herdless-uffd-{}-{}.tmp",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)))
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, target));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename itself, durable (best effort: not every file system can
    // sync a directory).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("herdless-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_output_over_an_input_is_refused_however_it_is_spelled() {
        let d = dir("spelled");
        let mem = d.join("vm.mem");
        std::fs::write(&mem, b"snapshot").unwrap();
        std::os::unix::fs::symlink(&mem, d.join("link")).unwrap();
        std::fs::hard_link(&mem, d.join("hard")).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        let inputs = [("the memory file", mem.as_path())];
        for spelled in [
            mem.clone(),
            d.join("./vm.mem"),
            d.join("sub/../vm.mem"),
            d.join("link"),
            d.join("hard"),
        ] {
            let out = [Wanted {
                option: "--record",
                path: &spelled,
            }];
            let e = check(&out, &inputs).unwrap_err();
            assert!(e.is_usage(), "{spelled:?}: {e}");
            assert!(e.to_string().contains("the memory file"), "{e}");
        }
        // Two outputs that do not exist yet, one name.
        let a = d.join("out");
        let b = d.join("sub/../out");
        let outs = [
            Wanted {
                option: "--record",
                path: &a,
            },
            Wanted {
                option: "--stats-json",
                path: &b,
            },
        ];
        let e = check(&outs, &inputs).unwrap_err();
        assert!(e.to_string().contains("the --record output"), "{e}");
        assert_eq!(std::fs::read(&mem).unwrap(), b"snapshot");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn outputs_go_to_the_file_a_symlink_leads_to_and_replace_it_whole() {
        let d = dir("beside");
        let real = d.join("real.json");
        std::fs::write(&real, b"old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink(&real, d.join("link.json")).unwrap();
        let link = d.join("link.json");
        let out = [Wanted {
            option: "--stats-json",
            path: &link,
        }];
        let targets = check(&out, &[]).unwrap();
        assert_eq!(targets, vec![std::fs::canonicalize(&real).unwrap()]);
        write_beside(&targets[0], b"new").unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // Nothing else left in the directory (no temporary file).
        let names: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn outputs_where_no_file_can_be_written_are_refused() {
        let d = dir("nowhere");
        std::os::unix::fs::symlink(d.join("gone"), d.join("dangling")).unwrap();
        let cases = [
            (d.join("missing/out"), "its directory"),
            (d.clone(), "is a directory"),
            (d.join("dangling"), "a symlink to nothing"),
            (PathBuf::from("/dev/null"), "not a regular file"),
        ];
        for (path, what) in cases {
            let out = [Wanted {
                option: "--record",
                path: &path,
            }];
            let e = check(&out, &[]).unwrap_err();
            assert!(
                !e.is_usage() && e.to_string().contains(what),
                "{path:?}: {e}"
            );
        }
        let _ = std::fs::remove_dir_all(d);
    }
}
