//! [`RwSem`]: a read-mostly routing table with a writer that updates it.
//!
//! Four readers each make `LOOKUPS` lookups under read guards, many at a
//! time; meanwhile one writer publishes new versions of the table under the
//! write guard, then *downgrades* to a read guard to check what it wrote
//! without letting another writer in between. Readers are latency-bound:
//! they use `read_timeout`, whose error is typed. Both sides yield
//! (standing in for real work), so they queue behind each other. The
//! semaphore uses the seed's "after" configuration (`AtomicCount` counting,
//! grants woken after the wait lock is dropped); its counters show how
//! often threads queued and were woken.
//!
//! ```sh
//! cargo run --release -p herdless --example rwsem --features stats
//! ```

use std::collections::HashMap;
use std::error::Error;
use std::thread;
use std::time::Duration;

use herdless::rwsem::{RwSem, RwSemExt, RwSemWriteGuard};
use herdless::variants::RwSemConfig;
use herdless::variants::{Counting, WakeTiming};

const ROUTES: u32 = 64;
const LOOKUPS: u32 = 2_000;
const READERS: usize = 4;

/// Destination -> next hop; version `v` of the table routes `dst` via
/// `dst + v`, so a reader can tell which version it sees, and whether it
/// sees one version throughout.
type Table = HashMap<u32, u32>;

/// Makes `LOOKUPS` lookups; returns the versions seen (first, last) and
/// how many attempts timed out.
fn reader(table: &RwSem<Table>) -> Result<(u32, u32, u32), String> {
    let (mut seen, mut timeouts) = (Vec::new(), 0);
    for dst in (0..ROUTES).cycle().take(LOOKUPS as usize) {
        let Ok(routes) = table.read_timeout(Duration::from_millis(50)) else {
            timeouts += 1; // a real caller would serve a cached answer
            continue;
        };
        let version = routes[&dst] - dst;
        if routes[&0] != version {
            return Err(format!(
                "torn read: route {dst} at version {version}, route 0 at {}",
                routes[&0]
            ));
        }
        seen.push(version);
        drop(routes);
        thread::yield_now(); // the caller uses the route, lock released
    }
    Ok((seen[0], seen[seen.len() - 1], timeouts))
}

fn main() -> Result<(), Box<dyn Error>> {
    let config = RwSemConfig::new(Counting::AtomicCount, WakeTiming::WakeAfterUnlock);
    let table = RwSem::with_config(config, (0..ROUTES).map(|d| (d, d)).collect::<Table>());

    let (per_reader, versions) = thread::scope(|s| -> Result<_, Box<dyn Error>> {
        let table = &table;
        let readers: Vec<_> = (0..READERS)
            .map(|_| s.spawn(move || reader(table)))
            .collect();
        let mut version = 0;
        // Publish until every reader is through (or has failed).
        while readers.iter().any(|r| !r.is_finished()) {
            version += 1;
            let mut routes = table.write();
            for hop in routes.values_mut() {
                *hop += 1;
            }
            thread::yield_now();
            // Keep read access to what we wrote; no writer can get in between.
            let routes = RwSemWriteGuard::downgrade(routes);
            if routes.iter().any(|(dst, hop)| hop - dst != version) {
                return Err(format!("version {version} was not applied to every route").into());
            }
        }
        let mut results = Vec::new();
        for r in readers {
            results.push(r.join().map_err(|_| "a reader panicked")??);
        }
        Ok((results, version))
    })?;

    let timeouts: u32 = per_reader.iter().map(|&(_, _, t)| t).sum();
    let spans: Vec<String> = per_reader
        .iter()
        .map(|&(a, b, _)| format!("{a}..={b}"))
        .collect();
    println!(
        "{READERS} readers x {LOOKUPS} consistent lookups while the writer published {versions} versions"
    );
    println!(
        "versions each reader saw: {}; {timeouts} lookups timed out",
        spans.join(", ")
    );
    println!("configuration: {}", table.config().name());
    if cfg!(feature = "stats") {
        let st = table.stats();
        println!(
            "stats: {} threads queued, {} wakeups (grants and writer nudges), {} timed out; \
             wait lock taken {} times ({} contended)",
            st.waits,
            st.wakeups,
            st.timeouts,
            st.wait_lock_acquisitions,
            st.contended_wait_lock_acquisitions
        );
    } else {
        println!("(run with `--features stats` for the semaphore's event counters)");
    }
    Ok(())
}
