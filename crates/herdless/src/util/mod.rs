//! Plumbing shared by every wait list: the intrusive list that holds waiters,
//! the waiter record, who sleeps in it (a thread or a task), and the wake
//! list that defers wakeups until after the lock is dropped; and the text of
//! the tuning variables.

pub(crate) mod linked_list;
pub(crate) mod sleeper;
pub(crate) mod slot_pool;
pub(crate) mod tuning_text;
pub(crate) mod waiter;
pub(crate) mod wake_list;
