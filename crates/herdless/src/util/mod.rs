//! Plumbing shared by every wait list: the intrusive list that holds waiters
//! and the wake list that defers wakeups until after the lock is dropped.

pub(crate) mod linked_list;
pub(crate) mod slot_pool;
pub(crate) mod waiter;
pub(crate) mod wake_list;
