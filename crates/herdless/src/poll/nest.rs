//! Pollers watching pollers: loop detection and the nesting limit (kernel:
//! `ep_loop_check`, `EP_MAX_NESTS`, and the upward depth check added in
//! 2023).
//!
//! Every "poller P watches poller C" edge is recorded in one process-wide
//! graph, under one mutex (kernel: `epnested_mutex`), taken only by `add`,
//! `delete` and the drop of a poller that watched other pollers: never on
//! an event path. Edges are recorded when `add` succeeds and removed when
//! the watch is deleted or its poller dropped; a watched poller is kept
//! alive by its watcher, so no identifier in the graph is stale.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::error::PollError;

/// The longest chain of pollers watching pollers, in edges: at most
/// `MAX_NESTING + 1` pollers, one inside the next (epoll's `EP_MAX_NESTS`).
pub const MAX_NESTING: usize = 4;

/// A unique poller identity (addresses can be reused, these cannot).
pub(crate) fn next_id() -> u64 {
    // Relaxed: uniqueness only needs the RMW's atomicity.
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

struct Graph {
    /// parent -> children, one entry per edge.
    children: BTreeMap<u64, Vec<u64>>,
}

impl Graph {
    fn reaches(&self, from: u64, to: u64) -> bool {
        if from == to {
            return true;
        }
        self.children
            .get(&from)
            .is_some_and(|cs| cs.iter().any(|&c| self.reaches(c, to)))
    }

    /// Longest chain of edges below `node`.
    fn height(&self, node: u64) -> usize {
        self.children.get(&node).map_or(0, |cs| {
            cs.iter().map(|&c| 1 + self.height(c)).max().unwrap_or(0)
        })
    }

    /// Longest chain of edges above `node`.
    fn depth(&self, node: u64) -> usize {
        self.children
            .iter()
            .filter(|(_, cs)| cs.contains(&node))
            .map(|(&p, _)| 1 + self.depth(p))
            .max()
            .unwrap_or(0)
    }
}

static GRAPH: Mutex<Graph> = Mutex::new(Graph {
    children: BTreeMap::new(),
});

fn graph() -> std::sync::MutexGuard<'static, Graph> {
    // The graph stays consistent across a panic (each change is one
    // insertion or removal), so a poisoned lock is still usable.
    GRAPH.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records "`parent` watches `child`", unless it would make a loop or a
/// chain longer than [`MAX_NESTING`].
pub(crate) fn link(parent: u64, child: u64) -> Result<(), PollError> {
    let mut graph = graph();
    if graph.reaches(child, parent) {
        return Err(PollError::Loop);
    }
    if graph.depth(parent) + 1 + graph.height(child) > MAX_NESTING {
        return Err(PollError::TooDeep { limit: MAX_NESTING });
    }
    graph.children.entry(parent).or_default().push(child);
    Ok(())
}

/// Removes one "`parent` watches `child`" edge recorded by [`link`].
pub(crate) fn unlink(parent: u64, child: u64) {
    let mut graph = graph();
    if let Some(children) = graph.children.get_mut(&parent) {
        if let Some(i) = children.iter().position(|&c| c == child) {
            children.swap_remove(i);
        }
        if children.is_empty() {
            graph.children.remove(&parent);
        }
    }
}
