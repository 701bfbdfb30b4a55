//! The socket file `herdless-uffd` creates, removed when the restore ends
//! however it ends (served, refused after the socket was made, stopped by
//! a signal), and only if the path still names the file it created: a
//! file someone put there since (another handler's socket, after ours was
//! removed by hand) is left alone.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A socket file this process created at `path`; dropping it removes the
/// file if the path still leads to it (same device and inode).
#[derive(Debug)]
pub(super) struct SocketFile {
    path: PathBuf,
    /// `(device, inode)` of the file as created; `None` if it could not be
    /// seen right after `bind` (then it is never removed: it may not be
    /// ours).
    created: Option<(u64, u64)>,
}

impl SocketFile {
    /// The file `bind` just created at `path`.
    pub(super) fn created(path: &Path) -> Self {
        SocketFile {
            path: path.to_path_buf(),
            created: identity(path),
        }
    }
}

/// `(device, inode)` of what `path` itself names (a symlink is not
/// followed).
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        // Checked, then removed: a file put at the path between the two is
        // removed in its stead. Nothing closes that window (no unlink by
        // inode); it is as narrow as two system calls.
        if self.created.is_some() && identity(&self.path) == self.created {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
