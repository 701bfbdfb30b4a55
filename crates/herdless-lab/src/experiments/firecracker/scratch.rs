//! A private folder for one boot or restore (sockets, logs, the handler's
//! statistics), removed with everything in it when dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::harness::LabError;

/// A fresh folder under the temp dir, removed on drop.
pub(crate) struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A new empty folder (mode 0700) named after the lab's pid and `what`.
    pub(crate) fn new(what: &str) -> Result<Scratch, LabError> {
        use std::os::unix::fs::DirBuilderExt;
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "herdless-lab-fc-{}-{}-{what}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| LabError::File {
                path: dir.clone(),
                source: e,
            })?;
        Ok(Scratch { dir })
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// `name` in the folder.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
