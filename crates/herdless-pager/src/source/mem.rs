//! [`MemSource`]: bytes held in memory.

use std::io;
use std::sync::Arc;

use super::PageSource;

/// Bytes in memory (shared, so many pagers can serve one snapshot).
///
/// ```
/// use herdless_pager::{MemSource, PageSource};
///
/// let snapshot = MemSource::new(vec![7u8; 8192]);
/// let for_another_pager = snapshot.clone(); // the bytes are shared, not copied
/// let mut page = [0u8; 4096];
/// for_another_pager.read_at(4096, &mut page)?;
/// assert!(page.iter().all(|&b| b == 7));
/// assert_eq!(snapshot.bytes().len(), 8192);
/// // Reading past the end is an error, never a short read.
/// assert!(snapshot.read_at(8192, &mut page).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MemSource {
    bytes: Arc<[u8]>,
}

impl MemSource {
    /// A source holding `bytes`.
    pub fn new(bytes: impl Into<Arc<[u8]>>) -> Self {
        MemSource {
            bytes: bytes.into(),
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl PageSource for MemSource {
    fn may_touch_region(&self) -> bool {
        false
    }

    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.bytes.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn memory(&self) -> Option<*const u8> {
        Some(self.bytes.as_ptr())
    }

    fn with_bytes(&self, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        let Ok(start) = usize::try_from(offset) else {
            return false;
        };
        match start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
        {
            Some(b) => {
                f(b);
                true
            }
            None => false,
        }
    }
}
