//! The `sync` shim: every atomic, `Arc`, `UnsafeCell` and thread-local the
//! primitives use comes from here, so that under `--cfg loom` the real code is
//! what the model checker runs (the tokio model).
//!
//! Outside loom these are `std` types; `UnsafeCell` gets loom's closure API
//! (`with`, `with_mut`) so both builds share one source.

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::{
        atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    thread_local,
};

#[cfg(not(loom))]
pub(crate) use std::{
    sync::{
        atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    thread_local,
};

#[cfg(not(loom))]
pub(crate) use self::std_cell::UnsafeCell;

#[cfg(not(loom))]
mod std_cell {
    /// `std::cell::UnsafeCell` with loom's access API.
    #[derive(Debug, Default)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}
