//! Opening the userfaultfd with the features the pager needs, mapping the
//! region (anonymous, or the source's shared memory in minor mode) and the
//! doorbell pages, and registering them.

use linux_raw_sys::general as uapi;

use super::mapping::Mapping;
use crate::handler;
use crate::source::GuardedSource;
use crate::uffd::{self, Uffd};
use crate::{HandlerMode, PagerError};

/// A userfaultfd with the region and the doorbell registered.
pub(super) struct Registered {
    pub(super) uffd: Uffd,
    pub(super) region: Mapping,
    /// One page per handler (`BlockingRead` only): see `pager/mod.rs`.
    pub(super) doorbell: Option<Mapping>,
    /// `UFFDIO_POISON` works on the region.
    pub(super) can_poison: bool,
}

/// Opens the userfaultfd (non-blocking for `Poll` handlers) with the
/// features the pager asks for, checking those it cannot do without.
pub(super) fn open(
    mode: HandlerMode,
    user_mode_only: bool,
    minor: bool,
) -> Result<Uffd, PagerError> {
    let uffd = Uffd::open(
        mode == HandlerMode::Poll,
        user_mode_only,
        handler::wanted_features(minor),
    )
    .map_err(|e| {
        if uffd::is_refusal(&e) {
            PagerError::UserfaultfdUnavailable { source: e }
        } else {
            PagerError::syscall("userfaultfd API handshake", e)
        }
    })?;
    let need = |bit: u32, feature, needed_for| {
        if uffd.features & u64::from(bit) == 0 {
            Err(PagerError::FeatureUnsupported {
                feature,
                needed_for,
            })
        } else {
            Ok(())
        }
    };
    need(
        uapi::UFFD_FEATURE_EVENT_REMOVE,
        "UFFD_FEATURE_EVENT_REMOVE",
        "discard handling",
    )?;
    if minor {
        need(
            uapi::UFFD_FEATURE_MINOR_SHMEM,
            "UFFD_FEATURE_MINOR_SHMEM",
            "minor-fault mode",
        )?;
    }
    Ok(uffd)
}

/// Maps the `len`-byte region (and, for `BlockingRead`, one doorbell page
/// per handler) and registers them with `uffd`.
pub(super) fn map_and_register(
    uffd: Uffd,
    len: usize,
    source: &GuardedSource,
    minor: bool,
    mode: HandlerMode,
    handlers: usize,
) -> Result<Registered, PagerError> {
    let page = rustix::param::page_size();
    let region = if minor {
        let fd = source
            .shared_memory()
            .ok_or(PagerError::MinorNeedsSharedMemory)?;
        Mapping::shared(fd, len)?
    } else {
        Mapping::anonymous(len)?
    };
    let register_mode = if minor {
        uapi::UFFDIO_REGISTER_MODE_MINOR
    } else {
        uapi::UFFDIO_REGISTER_MODE_MISSING
    };
    let ioctls = uffd
        .register(region.addr(), len, u64::from(register_mode))
        .map_err(|e| PagerError::syscall("UFFDIO_REGISTER", e))?;
    let has = |nr: u32| ioctls & (1u64 << nr) != 0;
    if minor && !has(uapi::_UFFDIO_CONTINUE) {
        return Err(PagerError::FeatureUnsupported {
            feature: "UFFDIO_CONTINUE",
            needed_for: "minor-fault mode",
        });
    }
    let can_poison = !minor
        && uffd.features & u64::from(uapi::UFFD_FEATURE_POISON) != 0
        && has(uapi::_UFFDIO_POISON);

    let doorbell = if mode == HandlerMode::BlockingRead {
        let d = Mapping::anonymous(handlers * page)?;
        uffd.register(
            d.addr(),
            d.len,
            u64::from(uapi::UFFDIO_REGISTER_MODE_MISSING),
        )
        .map_err(|e| PagerError::syscall("UFFDIO_REGISTER (doorbell)", e))?;
        Some(d)
    } else {
        None
    };
    Ok(Registered {
        uffd,
        region,
        doorbell,
        can_poison,
    })
}
