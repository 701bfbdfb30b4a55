//! An intrusive doubly linked FIFO list of waiter records.
//!
//! Waiter records live on the stack of the thread that waits (or, for the
//! futex table, in that thread's record slot); the list only links them. That gives O(1) enqueue, dequeue and cancellation with no
//! allocation on any wait path. The price is the contract below, which every
//! user of the list (futex buckets, wait queues, rwsem) states next to its
//! calls:
//!
//! - A node is pinned from the moment it is pushed until it has been removed
//!   *and* the remover has finished touching it.
//! - All link operations on a list, and on the nodes in it, happen under the
//!   one lock that guards that list.
//! - A node is in at most one list at a time.
//!
//! Links: `next` is always exact; `prev` is exact for every node but the
//! head, whose `prev` is never read (see [`LinkedList::remove`]).

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::sync::UnsafeCell;

/// The links embedded in a node.
#[derive(Debug)]
pub(crate) struct Pointers<T> {
    inner: UnsafeCell<Links<T>>,
}

#[derive(Debug)]
struct Links<T> {
    prev: Option<NonNull<T>>,
    next: Option<NonNull<T>>,
}

impl<T> Pointers<T> {
    pub(crate) fn new() -> Self {
        Pointers {
            inner: UnsafeCell::new(Links {
                prev: None,
                next: None,
            }),
        }
    }
}

/// A type that embeds [`Pointers`] to itself.
///
/// # Safety
/// `pointers` must return the address of a `Pointers<Self>` inside `target`
/// that is used by no other list.
pub(crate) unsafe trait Link: Sized {
    /// The node's links.
    ///
    /// # Safety
    /// `target` must point to a live node.
    unsafe fn pointers(target: NonNull<Self>) -> NonNull<Pointers<Self>>;
}

/// The list head. It owns no node.
pub(crate) struct LinkedList<T: Link> {
    head: Option<NonNull<T>>,
    tail: Option<NonNull<T>>,
    len: usize,
    _marker: PhantomData<*const T>,
}

// SAFETY: the list is a set of pointers to nodes that are themselves `Sync`
// (their shared fields are atomics or immutable); moving the head to another
// thread is safe because every access to it and to the links is made under
// the lock that owns the list.
unsafe impl<T: Link + Sync> Send for LinkedList<T> {}

/// Reads a node's links.
///
/// # Safety
/// `node` is live and the caller holds the lock of the list it is in.
unsafe fn links<T: Link, R>(node: NonNull<T>, f: impl FnOnce(&mut Links<T>) -> R) -> R {
    // SAFETY: guaranteed by the caller; the lock makes the access exclusive.
    unsafe {
        let pointers = T::pointers(node);
        pointers.as_ref().inner.with_mut(|p| f(&mut *p))
    }
}

impl<T: Link> LinkedList<T> {
    pub(crate) const fn new() -> Self {
        LinkedList {
            head: None,
            tail: None,
            len: 0,
            _marker: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest node.
    pub(crate) fn front(&self) -> Option<NonNull<T>> {
        self.head
    }

    /// Appends `node`.
    ///
    /// # Safety
    /// `node` is live, pinned, in no list, and stays so until removed (see
    /// the module contract).
    pub(crate) unsafe fn push_back(&mut self, node: NonNull<T>) {
        let tail = self.tail;
        // SAFETY: `node` is live and ours to link (caller contract).
        unsafe {
            links(node, |l| {
                l.prev = tail;
                l.next = None;
            })
        };
        match tail {
            // SAFETY: the tail is in this list, hence live.
            Some(tail) => unsafe { links(tail, |l| l.next = Some(node)) },
            None => self.head = Some(node),
        }
        self.tail = Some(node);
        self.len += 1;
    }

    /// Prepends `node`: it becomes the oldest (a mutex waiter that was
    /// woken and lost the race for the lock goes back to where it was).
    ///
    /// # Safety
    /// As for [`push_back`](Self::push_back).
    pub(crate) unsafe fn push_front(&mut self, node: NonNull<T>) {
        let head = self.head;
        // SAFETY: `node` is live and ours to link (caller contract).
        unsafe {
            links(node, |l| {
                l.prev = None;
                l.next = head;
            })
        };
        match head {
            // SAFETY: the head is in this list, hence live. Its `prev` was
            // left stale when it became the head (see `remove`): set it.
            Some(head) => unsafe { links(head, |l| l.prev = Some(node)) },
            None => self.tail = Some(node),
        }
        self.head = Some(node);
        self.len += 1;
    }

    /// Removes and returns the oldest node.
    pub(crate) fn pop_front(&mut self) -> Option<NonNull<T>> {
        let head = self.head?;
        // SAFETY: `head` is in this list, so it is live.
        unsafe { self.remove(head) };
        Some(head)
    }

    /// The node after `node`.
    ///
    /// # Safety
    /// `node` is in this list.
    pub(crate) unsafe fn next(&self, node: NonNull<T>) -> Option<NonNull<T>> {
        // SAFETY: caller contract; `&self` proves we hold the list's lock.
        unsafe { links(node, |l| l.next) }
    }

    /// Unlinks `node`.
    ///
    /// Removing the head writes nothing into its successor: the head's
    /// `prev` is never read, so it is left stale (it names the node that
    /// left) instead of cleared. A waker that dequeues sleepers one at a
    /// time then touches only the record it takes, not the next sleeper's
    /// line too, a cache line last written by another CPU (lab README,
    /// `futex-wake`).
    ///
    /// # Safety
    /// `node` is in this list.
    pub(crate) unsafe fn remove(&mut self, node: NonNull<T>) {
        // SAFETY: `node` is in this list (caller contract), so it and its
        // neighbours are live and linked under the lock we hold.
        unsafe {
            let (prev, next) = links(node, |l| (l.prev.take(), l.next.take()));
            if self.head == Some(node) {
                // `next` (if any) becomes the head: its stale `prev` is
                // never read.
                self.head = next;
                if next.is_none() {
                    self.tail = None;
                }
            } else {
                // Every node but the head has its predecessor in `prev`.
                let prev = prev.expect("a node behind the head has a predecessor");
                links(prev, |l| l.next = next);
                match next {
                    Some(next) => links(next, |l| l.prev = Some(prev)),
                    None => self.tail = Some(prev),
                }
            }
        }
        self.len -= 1;
    }
}

impl<T: Link> std::fmt::Debug for LinkedList<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkedList")
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Node {
        pointers: Pointers<Node>,
        value: u32,
    }

    // SAFETY: returns the embedded pointers of the node.
    unsafe impl Link for Node {
        unsafe fn pointers(target: NonNull<Self>) -> NonNull<Pointers<Self>> {
            // SAFETY: `target` is live (caller contract); addr_of avoids a reference.
            unsafe { NonNull::new_unchecked(std::ptr::addr_of_mut!((*target.as_ptr()).pointers)) }
        }
    }

    fn node(value: u32) -> Node {
        Node {
            pointers: Pointers::new(),
            value,
        }
    }

    fn values(list: &LinkedList<Node>) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cur = list.front();
        while let Some(n) = cur {
            // SAFETY: the nodes outlive the list in these tests.
            out.push(unsafe { n.as_ref().value });
            cur = unsafe { list.next(n) };
        }
        out
    }

    #[test]
    fn fifo_order_and_removal_from_every_position() {
        let nodes: Vec<Node> = (0..5).map(node).collect();
        let mut list = LinkedList::new();
        for n in &nodes {
            // SAFETY: `nodes` outlives `list` and is not moved.
            unsafe { list.push_back(NonNull::from(n)) };
        }
        assert_eq!(values(&list), [0, 1, 2, 3, 4]);
        // SAFETY: each removed node is in the list.
        unsafe {
            list.remove(NonNull::from(&nodes[2]));
            assert_eq!(values(&list), [0, 1, 3, 4]);
            list.remove(NonNull::from(&nodes[0]));
            list.remove(NonNull::from(&nodes[4]));
        }
        assert_eq!(values(&list), [1, 3]);
        assert_eq!(list.len(), 2);
        let first = list.pop_front().unwrap();
        // SAFETY: node is live.
        assert_eq!(unsafe { first.as_ref().value }, 1);
        list.pop_front().unwrap();
        assert!(list.is_empty() && list.pop_front().is_none());
        // Removing behind a head whose `prev` is stale (its predecessor
        // left by a head removal) relinks only live neighbours.
        // SAFETY: `nodes` outlives `list`; each removed node is in it.
        unsafe {
            for n in &nodes {
                list.push_back(NonNull::from(n));
            }
            list.pop_front().unwrap();
            list.remove(NonNull::from(&nodes[2]));
            assert_eq!(values(&list), [1, 3, 4]);
            list.remove(NonNull::from(&nodes[4]));
            list.remove(NonNull::from(&nodes[1]));
            assert_eq!(values(&list), [3]);
            list.push_back(NonNull::from(&nodes[0]));
            list.remove(NonNull::from(&nodes[0]));
            assert_eq!(values(&list), [3]);
            list.pop_front().unwrap();
        }
        assert!(list.is_empty() && list.front().is_none());
        // A removed node can be pushed again.
        // SAFETY: as above.
        unsafe { list.push_back(NonNull::from(&nodes[2])) };
        assert_eq!(values(&list), [2]);
    }
}
