//! Reading a page that may be poisoned, from user space, without dying of
//! its `SIGBUS`: what a test needs where a system call cannot do the read
//! for it (with `UFFD_USER_MODE_ONLY`, a system call touching a missing
//! page gets `EFAULT` before the pager sees a fault).
//!
//! While [`read_or_sigbus`] runs, a `SIGBUS` handler is installed for the
//! one page being read: a `SIGBUS` there is recorded and the page replaced
//! by a fresh zero page (`mmap(MAP_FIXED)`), so the read resumes and returns
//! 0. The page thus leaves the pager's registered range: the caller must
//! not expect the pager to serve it afterwards. A `SIGBUS` anywhere else
//! gets the default action, as without the handler.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The page being read (0: none). Written before the handler is installed
/// and read only by the handler, which runs on the reading thread: SeqCst
/// (a compiler fence as well) keeps these accesses on their side of the
/// read that may raise the signal.
static ARMED_PAGE: AtomicUsize = AtomicUsize::new(0);
/// The address the last caught `SIGBUS` reported (0: none).
static CAUGHT_AT: AtomicUsize = AtomicUsize::new(0);
/// One reader at a time: the signal disposition is process-wide.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const PAGE: usize = 4096;

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // `si_addr` is the faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = ARMED_PAGE.load(Ordering::SeqCst);
    if page != 0 && addr & !(PAGE - 1) == page {
        CAUGHT_AT.store(addr, Ordering::SeqCst);
        // SAFETY: `page` is the page the caller of `read_or_sigbus` owns and
        // allowed us to replace; mmap is async-signal-safe in practice (a
        // plain system call).
        unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
    } else {
        // Not ours: return with the default action, so that re-executing the
        // access raises the signal again and terminates as it would have.
        // SAFETY: signal() with SIG_DFL is async-signal-safe.
        unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
    }
}

/// Reads the byte at `at` (inside a 4 KiB page the caller owns and that
/// stays mapped): `Ok(byte)`, or `Err(address)` when the read raised
/// `SIGBUS` at `address` (the page then reads as zeros, outside the pager).
///
/// # Safety
/// `at` must point into a mapping that stays mapped during the call and
/// that no Rust reference aliases; the caller accepts that the page is
/// replaced by a zero page if it raises `SIGBUS`.
pub unsafe fn read_or_sigbus(at: *const u8) -> Result<u8, usize> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    CAUGHT_AT.store(0, Ordering::SeqCst);
    ARMED_PAGE.store(at as usize & !(PAGE - 1), Ordering::SeqCst);
    // SAFETY: a zeroed sigaction is a valid starting point; the handler has
    // the SA_SIGINFO signature; `old` receives the previous disposition,
    // restored below.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut act.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGBUS, &act, &mut old), 0);
    }
    // SAFETY: the caller guarantees `at` is mapped and unaliased; a volatile
    // read makes the access (and any fault) happen here.
    let byte = unsafe { std::ptr::read_volatile(at) };
    // SAFETY: restores the disposition saved above.
    unsafe { assert_eq!(libc::sigaction(libc::SIGBUS, &old, std::ptr::null_mut()), 0) };
    ARMED_PAGE.store(0, Ordering::SeqCst);
    match CAUGHT_AT.swap(0, Ordering::SeqCst) {
        0 => Ok(byte),
        addr => Err(addr),
    }
}
