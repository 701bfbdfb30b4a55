//! [`ZeroSource`]: a source of zeros (an anonymous region served lazily).

use std::io;

use super::PageSource;

/// `len` zero bytes.
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
