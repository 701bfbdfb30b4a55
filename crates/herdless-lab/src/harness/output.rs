//! Output paths checked before measuring: `--json FILE`, `--report DIR`
//! and `--plot DIR` are claimed (folders created, files opened for writing)
//! before the first measurement, so a bad path fails in a second instead of
//! after a whole run.
//!
//! An [`OutputFile`] is opened without truncating it: an existing file is
//! only replaced when [`OutputFile::write`] is called, and a file the claim
//! created is removed again if nothing is ever written to it.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::LabError;

/// A file the run will write, already opened.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    file: Option<File>,
    /// Whether the claim created it (then an unwritten claim removes it).
    created: bool,
}

impl OutputFile {
    /// Creates `path`'s folder if missing and opens `path` for writing
    /// (creating it, keeping an existing file's contents for now).
    pub fn claim(path: &Path) -> Result<OutputFile, LabError> {
        let fail = |source| LabError::File {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| LabError::File {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let existed = path.exists();
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(fail)?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            file: Some(file),
            created: !existed,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file's contents with `bytes`; returns its path.
    pub fn write(mut self, bytes: &[u8]) -> Result<PathBuf, LabError> {
        let mut file = self.file.take().expect("an unwritten claim holds its file");
        let result = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(bytes))
            .and_then(|()| file.flush());
        self.created = false;
        result.map_err(|source| LabError::File {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.path.clone())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.created && self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A folder the run will write files into, already created and found
/// writable.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
}

impl OutputDir {
    /// Creates `path` if missing and checks a file can be created in it.
    pub fn claim(path: &Path) -> Result<OutputDir, LabError> {
        let fail = |source| LabError::File {
            path: path.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(path).map_err(fail)?;
        let probe = path.join(format!(".herdless-lab-probe-{}", std::process::id()));
        File::create(&probe).map_err(fail)?;
        let _ = std::fs::remove_file(&probe);
        Ok(OutputDir {
            path: path.to_path_buf(),
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("herdless-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_claim_creates_missing_folders_and_the_write_replaces_the_contents() {
        let dir = scratch("file");
        let path = dir.join("a/b/out.json");
        let claim = OutputFile::claim(&path).unwrap();
        assert!(path.exists());
        claim.write(b"long contents").unwrap();
        OutputFile::claim(&path).unwrap().write(b"short").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "short");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unwritten_claim_leaves_nothing_behind_and_keeps_an_old_file() {
        let dir = scratch("unwritten");
        let path = dir.join("out.json");
        drop(OutputFile::claim(&path).unwrap());
        assert!(!path.exists());
        std::fs::write(&path, "old").unwrap();
        drop(OutputFile::claim(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_path_that_cannot_be_written_is_a_file_error_naming_it() {
        let dir = scratch("bad");
        std::fs::create_dir_all(&dir).unwrap();
        // A folder where the file should be, and a file where a folder
        // should be.
        let err = OutputFile::claim(&dir).unwrap_err();
        assert!(
            matches!(&err, LabError::File { path, .. } if path == &dir),
            "{err}"
        );
        let file = dir.join("plain");
        std::fs::write(&file, "x").unwrap();
        let err = OutputFile::claim(&file.join("out.json")).unwrap_err();
        assert!(err.to_string().contains("plain"), "{err}");
        let err = OutputDir::claim(&file.join("plots")).unwrap_err();
        assert!(err.to_string().contains("plain"), "{err}");
        let ok = OutputDir::claim(&dir.join("plots")).unwrap();
        assert_eq!(
            std::fs::read_dir(ok.path()).unwrap().count(),
            0,
            "no probe left"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
