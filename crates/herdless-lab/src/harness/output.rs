//! Output paths checked before measuring: `--json FILE`, `--report DIR`
//! and `--plot DIR` are claimed (folders created, a file opened beside the
//! target) before the first measurement, so a bad path fails in a second
//! instead of after a whole run.
//!
//! An [`OutputFile`] never touches the file it names until the output is
//! complete: the claim opens a temporary file in the same folder, and
//! [`OutputFile::write`] fills it and renames it over the target. An
//! unwritten claim removes its temporary file and leaves the target as it
//! was; a reader never sees a half-written file.

use std::fs::Permissions;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use super::LabError;

/// A file the run will write: a temporary file beside it, already open.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    temp: NamedTempFile,
}

impl OutputFile {
    /// Creates `path`'s folder if missing and opens a temporary file in it;
    /// fails if `path` is a folder.
    pub fn claim(path: &Path) -> Result<OutputFile, LabError> {
        if path.is_dir() {
            return Err(LabError::file(path)(
                std::io::ErrorKind::IsADirectory.into(),
            ));
        }
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(folder).map_err(LabError::file(folder))?;
        let temp = tempfile::Builder::new()
            .prefix(".herdless-lab-")
            .permissions(Permissions::from_mode(0o666)) // less the umask, as `File::create`
            .tempfile_in(folder)
            .map_err(LabError::file(path))?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            temp,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` and renames them over the file; returns its path.
    pub fn write(mut self, bytes: &[u8]) -> Result<PathBuf, LabError> {
        let fail = LabError::file(&self.path);
        self.temp.write_all(bytes).map_err(&fail)?;
        self.temp.as_file().sync_all().map_err(&fail)?;
        self.temp.persist(&self.path).map_err(|e| fail(e.error))?;
        drop(fail); // (it borrows the path)
        Ok(self.path)
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
        std::fs::create_dir_all(path).map_err(LabError::file(path))?;
        tempfile::tempfile_in(path).map_err(LabError::file(path))?;
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
        assert!(path.parent().unwrap().is_dir());
        assert!(!path.exists(), "the target is written only when complete");
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
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.json"], "no temporary file left");
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
