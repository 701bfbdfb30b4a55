//! Threads that must give way: `--copy-all`'s copier beside the handlers,
//! the host cache's writer beside the fetches.

/// Makes the calling thread `by` nicer (Linux's nice value is per thread;
/// at most 19). Best effort: a thread that cannot change it runs as it is.
pub(crate) fn lower_this_threads_priority(by: i32) {
    let me = Some(rustix::thread::gettid());
    if let Ok(now) = rustix::process::getpriority_process(me) {
        let _ = rustix::process::setpriority_process(me, (now + by).min(19));
    }
}
