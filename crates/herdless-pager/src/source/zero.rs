//! [`ZeroSource`]: a source of zeros (an anonymous region served lazily).

use std::io;

use super::PageSource;

/// `len` zero bytes.
///
/// ```
/// use herdless_pager::{PageSource, ZeroSource};
///
/// let src = ZeroSource::new(1 << 30); // 1 GiB of zeros, nothing allocated
/// let mut page = vec![0xaau8; 4096];
/// src.read_at(512 << 20, &mut page)?;
/// assert!(page.iter().all(|&b| b == 0));
/// assert_eq!(src.len(), 1 << 30);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ZeroSource {
    len: u64,
}

impl ZeroSource {
    /// `len` zero bytes.
    pub fn new(len: u64) -> Self {
        ZeroSource { len }
    }
}

impl PageSource for ZeroSource {
    fn may_touch_region(&self) -> bool {
        false
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, _offset: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(0);
        Ok(())
    }
}
