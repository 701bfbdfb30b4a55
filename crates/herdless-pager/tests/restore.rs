//! `herdless-uffd` restoring a snapshot for a client that plays
//! Firecracker's VMM side exactly (`herdless_pager::vmm`): every byte
//! served from the memory file, from several threads, in two regions;
//! discarded ranges read zeros; the older message format; working-set
//! record and prefetch; copying everything up front; the VMM's memory
//! going away.

mod restore_support;

use restore_support::*;

/// Two regions (as Firecracker lays out memory around the x86 MMIO gap),
/// checked byte for byte from 4 threads, then a range of each discarded
/// (the balloon) and checked for zeros; then the VMM closes and the
/// handler exits 0 with its summary.
fn serve_two_regions(args: &[&str], seed: u64) {
    let sizes = [96 * PAGE, 64 * PAGE];
    let Some(mem) = guest_memory(&sizes) else {
        return;
    };
    let dir = test_dir(&format!("two-regions-{seed}"));
    let (memory, file) = memory_file(&dir, sizes.iter().sum(), seed);
    let stats = dir.join("stats.json");
    let mut all = vec!["--stats-json", stats.to_str().unwrap()];
    all.extend_from_slice(args);
    let handler = start(&dir.join("sock"), &memory, &all);
    let conn = mem.handoff(&handler.socket).unwrap();
    mem.check_against(&file, 4, &|_| false)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    // The balloon: a range inside each region, discarded; it reads zeros,
    // the rest still reads the file.
    let r = mem.regions().to_vec();
    let discarded = [(r[0].base + 10 * PAGE, 7 * PAGE), (r[1].base, 3 * PAGE)];
    for (addr, len) in discarded {
        mem.discard(addr, len).unwrap();
    }
    let zero = |a: usize| discarded.iter().any(|&(s, l)| a >= s && a < s + l);
    mem.check_against(&file, 3, &zero)
        .unwrap_or_else(|e| panic!("{args:?} after the discards: {e}"));
    drop(conn); // the VMM exits
    let (status, out, err) = handler.finish();
    eprintln!("{args:?}: {out}");
    assert_eq!(status.code(), Some(0), "{args:?}\n{out}\n{err}");
    assert!(
        out.contains("faults served") && out.contains("the VMM closed the connection"),
        "{out}"
    );
    assert!(
        err.contains(&format!("connection from pid {}", std::process::id())),
        "{err}"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    let pages = (sizes.iter().sum::<usize>() / PAGE) as u64;
    let copied = json["pages_copied"].as_u64().unwrap();
    assert_eq!(copied, pages, "every page copied once: {json}");
    assert_eq!(json["pages_discarded"].as_u64(), Some(10), "{json}");
    assert_eq!(json["zero_pages"].as_u64(), Some(10), "{json}");
    assert_eq!(json["poisoned_pages"].as_u64(), Some(0), "{json}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_firecracker_vmm_is_served_every_byte_and_its_discarded_ranges_read_zeros() {
    serve_two_regions(&[], 1);
}

#[test]
fn several_handlers_with_fault_around_serve_the_same_bytes() {
    serve_two_regions(&["--handlers", "3", "--fault-around", "64K"], 2);
}
