//! The checks every pager configuration passes before anything is mapped
//! or started: each bad value is a typed [`PagerError`]. `herdless-uffd`
//! runs its window and handler count through the same checks.

use super::{MAX_FAULT_AROUND, MAX_HANDLERS};
use crate::PagerError;

/// A region length: non-zero, a multiple of the page size.
pub(crate) fn check_length(len: usize, page: usize) -> Result<(), PagerError> {
    if len == 0 {
        return Err(PagerError::ZeroLength);
    }
    if !len.is_multiple_of(page) {
        return Err(PagerError::LengthNotPageMultiple { len, page });
    }
    Ok(())
}

/// A fault-around window in bytes: a power of two, from one page to
/// [`MAX_FAULT_AROUND`](crate::MAX_FAULT_AROUND).
pub(crate) fn check_window(window: usize, page: usize) -> Result<(), PagerError> {
    if !window.is_power_of_two() {
        return Err(PagerError::WindowNotPowerOfTwo { window });
    }
    if window < page {
        return Err(PagerError::WindowTooSmall { window, page });
    }
    if window > MAX_FAULT_AROUND {
        return Err(PagerError::WindowTooLarge {
            window,
            max: MAX_FAULT_AROUND,
        });
    }
    Ok(())
}

/// The window in pages, capped at `pages` (rounded up to a power of two):
/// a window past the region would only size buffers.
pub(crate) fn window_pages(window: usize, page: usize, pages: usize) -> usize {
    (window / page).min(pages.next_power_of_two())
}

/// A handler count: from 1 to [`MAX_HANDLERS`](crate::MAX_HANDLERS).
pub(crate) fn check_handlers(handlers: usize) -> Result<(), PagerError> {
    if handlers == 0 {
        return Err(PagerError::NoHandlers);
    }
    if handlers > MAX_HANDLERS {
        return Err(PagerError::TooManyHandlers {
            asked: handlers,
            max: MAX_HANDLERS,
        });
    }
    Ok(())
}
