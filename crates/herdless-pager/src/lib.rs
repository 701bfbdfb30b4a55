//! pager
