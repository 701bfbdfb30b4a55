//! Firecracker's memory mappings (`GuestRegionUffdMapping`, sent as a JSON
//! array in the handoff message), parsed and checked against the memory
//! file before anything is served.
//!
//! Each element says where a guest memory region lives in the VMM
//! (`base_host_virt_addr`, `size`) and where its bytes are in the memory
//! file (`offset`). Its page size is `page_size`, in bytes; Firecracker
//! sent it first (1.7 to 1.10) as `page_size_kib`, which despite its name
//! also held bytes (Firecracker's CHANGELOG, 1.11), and still sends both.
//! Both are accepted; a `page_size_kib` whose value is only a valid page
//! size in KiB (4 for 4 KiB) is read as KiB; neither (Firecracker before
//! 1.7, 4 KiB pages only) means the host page size. If both are sent they
//! must agree.
//!
//! Served page sizes: the host's (4 KiB), and 2 MiB ([`HUGE_PAGE`]: a
//! hugetlbfs region, Firecracker's `"huge_pages": "2M"`), each region in
//! its own, mixed freely in one list.
//!
//! Refused, each with the index of the mapping: a zero size; a base, size
//! or offset not aligned to the page size; another page size;
//! `offset + size` past the file's end or overflowing; host ranges that
//! overlap; file ranges that overlap (Firecracker lays the regions out back
//! to back in the file, so two regions never share bytes). And an empty
//! list, and sizes summing past the file.

use serde::Deserialize;

use super::RestoreError;

/// Firecracker's `GuestRegionUffdMapping`, as sent.
#[derive(Debug, Deserialize)]
struct Wire {
    base_host_virt_addr: u64,
    size: u64,
    offset: u64,
    #[serde(default)]
    page_size: Option<u64>,
    #[serde(default)]
    page_size_kib: Option<u64>,
}

/// One checked mapping (from [`parse`]).
///
/// # Examples
/// ```
/// use herdless_pager::restore::mappings::{self, GuestMapping};
/// let msg = br#"[{"base_host_virt_addr": 1073741824, "size": 8192, "offset": 4096, "page_size": 4096}]"#;
/// let m = mappings::parse(msg, 16384, 4096)?;
/// assert_eq!(m, [GuestMapping { base: 1 << 30, size: 8192, offset: 4096, page_size: 4096 }]);
/// # Ok::<(), herdless_pager::restore::RestoreError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestMapping {
    /// The region's first byte in the VMM's address space.
    pub base: usize,
    /// Its length in bytes.
    pub size: usize,
    /// Where its bytes start in the memory file.
    pub offset: u64,
    /// Its page size in bytes: the host's, or [`HUGE_PAGE`].
    pub page_size: usize,
}

/// The page size of a hugetlbfs region served besides the host's: 2 MiB.
///
/// # Examples
/// A region of Firecracker's `"huge_pages": "2M"`:
/// ```
/// use herdless_pager::restore::mappings::{self, HUGE_PAGE};
/// let msg = br#"[{"base_host_virt_addr": 1073741824, "size": 4194304, "offset": 0, "page_size": 2097152}]"#;
/// assert_eq!(mappings::parse(msg, 4 << 20, 4096)?[0].page_size, HUGE_PAGE);
/// # Ok::<(), herdless_pager::restore::RestoreError>(())
/// ```
pub const HUGE_PAGE: usize = crate::space::HUGE_PAGE;

/// The most mappings a message may list (Firecracker sends one per guest
/// memory region: a handful).
///
/// # Examples
/// ```
/// use herdless_pager::restore::{mappings, RestoreError};
/// let one = r#"{"base_host_virt_addr": 0, "size": 4096, "offset": 0}"#;
/// let many = format!("[{}]", vec![one; mappings::MAX_MAPPINGS + 1].join(","));
/// let e = mappings::parse(many.as_bytes(), 1 << 40, 4096).err().unwrap();
/// assert!(matches!(e, RestoreError::WrongShape(_)), "{e}");
/// ```
pub const MAX_MAPPINGS: usize = 4096;

/// Parses the handoff message `body` and checks it against a memory file
/// of `file_len` bytes, served in pages of `host_page` bytes (module doc:
/// what is accepted and what is refused).
///
/// # Errors
/// [`RestoreError::NotJson`] (not JSON, or not UTF-8),
/// [`RestoreError::WrongShape`] (JSON, but not a list of mappings, or
/// more than [`MAX_MAPPINGS`]), [`RestoreError::NoMappings`] (an empty
/// list), [`RestoreError::Mapping`] (one mapping unusable: its index and
/// why), [`RestoreError::SizesExceedFile`] (more bytes than the file).
///
/// # Examples
/// Firecracker's message for a guest of two regions around the x86 MMIO
/// gap (sizes shortened), and a memory file one page too short for it:
/// ```
/// use herdless_pager::restore::{mappings, RestoreError};
/// let msg = br#"[
///     {"base_host_virt_addr": 140000000000000, "size": 65536, "offset": 0, "page_size": 4096, "page_size_kib": 4096},
///     {"base_host_virt_addr": 140000000131072, "size": 32768, "offset": 65536, "page_size": 4096, "page_size_kib": 4096}
/// ]"#;
/// let m = mappings::parse(msg, 98304, 4096)?;
/// assert_eq!((m.len(), m[1].offset, m[1].size), (2, 65536, 32768));
/// let short = mappings::parse(msg, 98304 - 4096, 4096).err().unwrap();
/// assert!(matches!(short, RestoreError::Mapping { index: 1, .. }), "{short}");
/// assert!(short.to_string().contains("start herdless-uffd with the memory file written with this snapshot"));
/// # Ok::<(), RestoreError>(())
/// ```
pub fn parse(
    body: &[u8],
    file_len: u64,
    host_page: usize,
) -> Result<Vec<GuestMapping>, RestoreError> {
    let wire: Vec<Wire> = serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => RestoreError::WrongShape(e.to_string()),
            Category::Io | Category::Syntax | Category::Eof => RestoreError::NotJson(e.to_string()),
        }
    })?;
    if wire.is_empty() {
        return Err(RestoreError::NoMappings);
    }
    if wire.len() > MAX_MAPPINGS {
        return Err(RestoreError::WrongShape(format!(
            "{} mappings, more than the {MAX_MAPPINGS} accepted",
            wire.len()
        )));
    }
    let mut out = Vec::with_capacity(wire.len());
    let mut total: u64 = 0;
    for (i, w) in wire.iter().enumerate() {
        let page = page_size_of(w).map_err(|r| RestoreError::mapping(i, r))?;
        if page != host_page as u64 && page != HUGE_PAGE as u64 {
            return Err(RestoreError::mapping(
                i,
                format!(
                    "page size {page} is not served: this handler serves {host_page}-byte pages \
                     and {HUGE_PAGE}-byte hugetlbfs pages"
                ),
            ));
        }
        if w.size == 0 {
            return Err(RestoreError::mapping(i, "size is zero"));
        }
        for (field, value) in [
            ("base_host_virt_addr", w.base_host_virt_addr),
            ("size", w.size),
            ("offset", w.offset),
        ] {
            if value % page != 0 {
                return Err(RestoreError::mapping(
                    i,
                    format!("{field} {value:#x} is not a multiple of the page size {page}"),
                ));
            }
        }
        let host_end = w.base_host_virt_addr.checked_add(w.size);
        let file_end = w.offset.checked_add(w.size);
        let (Some(host_end), Some(file_end)) = (host_end, file_end) else {
            return Err(RestoreError::mapping(
                i,
                "base or offset plus size overflows",
            ));
        };
        if usize::try_from(host_end).is_err() {
            return Err(RestoreError::mapping(
                i,
                "the region ends past the address space",
            ));
        }
        if file_end > file_len {
            return Err(RestoreError::mapping(
                i,
                format!(
                    "offset {:#x} + size {:#x} ends at byte {file_end}, past the memory file's \
                     {file_len}: it is not this snapshot's memory file (or it was cut short); \
                     start herdless-uffd with the memory file written with this snapshot",
                    w.offset, w.size
                ),
            ));
        }
        total = total.saturating_add(w.size);
        out.push(GuestMapping {
            base: w.base_host_virt_addr as usize,
            size: w.size as usize,
            offset: w.offset,
            page_size: page as usize,
        });
    }
    if total > file_len {
        return Err(RestoreError::SizesExceedFile { total, file_len });
    }
    check_disjoint(&out, |m| (m.base as u64, m.size as u64), "host")?;
    check_disjoint(&out, |m| (m.offset, m.size as u64), "file")?;
    Ok(out)
}

/// Refuses two mappings whose `range` (start, length) overlap; `what`
/// names the ranges in the message.
fn check_disjoint(
    maps: &[GuestMapping],
    range: impl Fn(&GuestMapping) -> (u64, u64),
    what: &str,
) -> Result<(), RestoreError> {
    let mut order: Vec<usize> = (0..maps.len()).collect();
    order.sort_by_key(|&i| range(&maps[i]).0);
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let (a_start, a_len) = range(&maps[a]);
        if range(&maps[b]).0 < a_start + a_len {
            let (first, second) = (a.min(b), a.max(b));
            return Err(RestoreError::mapping(
                second,
                format!("its {what} range overlaps mapping {first}'s"),
            ));
        }
    }
    Ok(())
}

/// The page size a mapping declares (module doc).
fn page_size_of(w: &Wire) -> Result<u64, String> {
    let host = rustix::param::page_size() as u64;
    let kib = w.page_size_kib.map(|v| {
        // Bytes, as Firecracker sends it; a value that is a page size only
        // in KiB was written by someone who took the name literally.
        if !is_page_size(v) && is_page_size(v.saturating_mul(1024)) {
            v * 1024
        } else {
            v
        }
    });
    match (w.page_size, kib) {
        (Some(a), Some(b)) if a != b => Err(format!(
            "page_size {a} and page_size_kib {} disagree",
            w.page_size_kib.unwrap_or(0)
        )),
        (Some(a), _) | (None, Some(a)) => {
            if is_page_size(a) {
                Ok(a)
            } else {
                Err(format!("page size {a} is not a page size"))
            }
        }
        (None, None) => Ok(host),
    }
}

/// 4 KiB or larger, a power of two.
fn is_page_size(v: u64) -> bool {
    v >= 4096 && v.is_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: usize = 4096;

    fn err(body: &str, file_len: u64) -> String {
        parse(body.as_bytes(), file_len, P).unwrap_err().to_string()
    }

    #[test]
    fn firecracker_messages_old_and_new_parse() {
        // As Firecracker 1.11+ sends it: both fields, in bytes.
        let new = r#"[{"base_host_virt_addr":139637976727552,"size":16384,"offset":0,"page_size":4096,"page_size_kib":4096},
                      {"base_host_virt_addr":139637977776128,"size":8192,"offset":16384,"page_size":4096,"page_size_kib":4096}]"#;
        let m = parse(new.as_bytes(), 24576, P).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].offset, 16384);
        // 1.7-1.10: page_size_kib only, holding bytes.
        let old = r#"[{"base_host_virt_addr":4096,"size":4096,"offset":0,"page_size_kib":4096}]"#;
        assert_eq!(parse(old.as_bytes(), 4096, P).unwrap()[0].base, 4096);
        // Taken literally: 4 KiB.
        let kib = r#"[{"base_host_virt_addr":4096,"size":4096,"offset":0,"page_size_kib":4}]"#;
        assert!(parse(kib.as_bytes(), 4096, P).is_ok());
        // Before 1.7: no page size at all.
        let none = r#"[{"base_host_virt_addr":4096,"size":4096,"offset":0}]"#;
        assert!(parse(none.as_bytes(), 4096, P).is_ok());
        // "huge_pages": "2M" beside a 4 KiB region, in one list.
        let mixed = r#"[{"base_host_virt_addr":1073741824,"size":4194304,"offset":0,"page_size":2097152,"page_size_kib":2097152},
                        {"base_host_virt_addr":4096,"size":8192,"offset":4194304,"page_size":4096}]"#;
        let m = parse(mixed.as_bytes(), 4194304 + 8192, P).unwrap();
        assert_eq!((m[0].page_size, m[1].page_size), (HUGE_PAGE, P));
    }

    #[test]
    fn unusable_mappings_are_refused_with_their_index_and_reason() {
        let one = |b: u64, s: u64, o: u64, ps: u64| {
            format!(r#"[{{"base_host_virt_addr":{b},"size":{s},"offset":{o},"page_size":{ps}}}]"#)
        };
        assert!(err(&one(4096, 0, 0, 4096), 1 << 20).contains("size is zero"));
        assert!(err(&one(4097, 4096, 0, 4096), 1 << 20).contains("base_host_virt_addr 0x1001"));
        assert!(err(&one(4096, 100, 0, 4096), 1 << 20).contains("size 0x64"));
        assert!(err(&one(4096, 4096, 5, 4096), 1 << 20).contains("offset 0x5"));
        assert!(err(&one(0x20_0000, 0x20_0000, 0, 0x40_0000), 1 << 22).contains("hugetlbfs"));
        assert!(err(&one(0x20_0000, 0x10_0000, 0, 0x20_0000), 1 << 22).contains("size 0x100000"));
        assert!(err(&one(0x30_0000, 0x20_0000, 0, 0x20_0000), 1 << 22).contains("base_host"));
        assert!(err(&one(4096, 4096, 0, 3000), 1 << 20).contains("not a page size"));
        assert!(err(&one(4096, 8192, 4096, 4096), 8192).contains("past the memory file"));
        assert!(err(&one(u64::MAX - 4095, 8192, 0, 4096), 1 << 20).contains("overflows"));
        let both = r#"[{"base_host_virt_addr":4096,"size":4096,"offset":0,"page_size":4096,"page_size_kib":8192}]"#;
        assert!(err(both, 1 << 20).contains("disagree"));
        let host = r#"[{"base_host_virt_addr":4096,"size":8192,"offset":0},{"base_host_virt_addr":8192,"size":4096,"offset":8192}]"#;
        assert!(err(host, 1 << 20).starts_with("mapping 1: its host range overlaps mapping 0"));
        let file = r#"[{"base_host_virt_addr":4096,"size":8192,"offset":0},{"base_host_virt_addr":65536,"size":4096,"offset":4096}]"#;
        assert!(err(file, 1 << 20).contains("file range overlaps"));
        assert!(err("[]", 4096).contains("no memory mappings"));
        // Each fits, together they need more than the file holds.
        let sum = r#"[{"base_host_virt_addr":4096,"size":8192,"offset":0},{"base_host_virt_addr":65536,"size":8192,"offset":4096}]"#;
        assert!(err(sum, 12288).contains("need 16384 bytes, more than the memory file's 12288"));
    }

    #[test]
    fn messages_that_are_not_mapping_lists_say_which_they_are() {
        assert!(err("hello", 4096).starts_with("the handoff message is not JSON"));
        assert!(err("[{\"base_host_virt_addr\":1", 4096).contains("not JSON"));
        assert!(err(r#"{"a":1}"#, 4096).contains("not a list of memory mappings"));
        assert!(err(r#"[{"size":4096,"offset":0}]"#, 4096).contains("base_host_virt_addr"));
        assert!(err(
            r#"[{"base_host_virt_addr":-1,"size":4096,"offset":0}]"#,
            4096
        )
        .contains("not a list"));
    }
}
