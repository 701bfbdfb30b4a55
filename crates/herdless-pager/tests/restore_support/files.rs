//! A snapshot directory whose files the restore tests check byte for
//! byte after `herdless-uffd` was refused, killed or stopped: nothing it
//! was given may change, and nothing may be left beside it.

use std::path::PathBuf;

use super::{memory_file, test_dir, PAGE};

/// The files of a snapshot directory, and their bytes.
pub struct Files {
    /// The directory.
    pub dir: PathBuf,
    /// Each file and the bytes it must still hold (`vm.mem` first).
    pub kept: Vec<(PathBuf, Vec<u8>)>,
}

impl Files {
    /// `vm.mem` (1 MiB of a pattern), a trace of it (`ws.trace`), an old
    /// figures file (`old.json`) and an existing socket path
    /// (`taken.sock`, a plain file).
    pub fn new(name: &str) -> Files {
        Files::with_memory(name, 1 << 20)
    }

    /// As [`new`](Self::new), with a `vm.mem` of `len` bytes.
    pub fn with_memory(name: &str, len: usize) -> Files {
        let dir = test_dir(name);
        let (mem, bytes) = memory_file(&dir, len, 22);
        let vm = dir.join("vm.mem");
        std::fs::rename(&mem, &vm).unwrap();
        let trace = herdless_pager::restore::Trace::from_offsets(
            PAGE as u64,
            bytes.len() as u64,
            [0, 4096, 65536],
        );
        let mut files = Files {
            dir,
            kept: Vec::new(),
        };
        files.keep("vm.mem", bytes);
        files.keep("ws.trace", trace.to_text().into_bytes());
        files.keep("old.json", b"{\"faults\": 1}\n".to_vec());
        files.keep("taken.sock", b"not a socket".to_vec());
        files
    }

    /// Writes `bytes` to `name` in the directory, to be checked by
    /// [`intact`](Self::intact).
    pub fn keep(&mut self, name: &str, bytes: Vec<u8>) {
        let path = self.dir.join(name);
        std::fs::write(&path, &bytes).unwrap();
        self.kept.push((path, bytes));
    }

    /// Every file is as it was, byte for byte, and nothing else is in the
    /// directory but `allowed` (links made by the test).
    pub fn intact(&self, case: &str, allowed: &[&str]) {
        for (path, bytes) in &self.kept {
            let now = std::fs::read(path).unwrap_or_else(|e| panic!("{case}: {path:?}: {e}"));
            assert!(now == *bytes, "{case}: {path:?} changed");
        }
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let known = self.kept.iter().any(|(p, _)| p.ends_with(&name));
            assert!(
                known || allowed.contains(&name.as_str()),
                "{case}: {name} was left behind"
            );
        }
    }
}
