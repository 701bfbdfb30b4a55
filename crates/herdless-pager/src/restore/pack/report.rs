//! What the pack did in a restore: whether it was used (and why not), the
//! bytes it served, the parts that failed their check, and the pack
//! object's fetches; its part of the one-line summary and of
//! `--stats-json`.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use serde_json::json;

use super::PackCounters;

/// The pack's figures in a [`RestoreSummary`](crate::restore::RestoreSummary)
/// (a restore with `--prefetch`, the pack not turned off).
///
/// # Examples
/// ```
/// use herdless_pager::restore::pack::PackSummary;
/// let s = PackSummary {
///     path: "s3://snaps/vm.trace.pages".into(),
///     not_used: None,
///     bytes: 25 << 20,
///     served_bytes: 25 << 20,
///     ..PackSummary::default()
/// };
/// assert!(s.line().starts_with("pack: 25.0 MiB served of 25.0 MiB"));
/// assert_eq!(s.to_json()["used"], true);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackSummary {
    /// The pages file (a URL without credentials, or a path).
    pub path: String,
    /// Why it was not used (`None`: it was).
    pub not_used: Option<String>,
    /// Bytes of pages it holds.
    pub bytes: u64,
    /// Bytes installed from it.
    pub served_bytes: u64,
    /// Bytes it holds that were read from the memory instead (their part
    /// failed its check, or its fetch).
    pub fell_back_bytes: u64,
    /// Parts whose checksum matched.
    pub parts_good: u64,
    /// Parts that failed their check or could not be fetched.
    pub parts_bad: u64,
    /// How it was bound to the memory (module doc of
    /// [`pack`](super)): the memory object's ETag, or sampled pages.
    pub bound_by: String,
    /// The pack object's fetches, if it is an object.
    #[cfg(feature = "object-store")]
    pub object: Option<crate::object::ObjectStats>,
}

/// Where a restore keeps what it will say of the pack: the fixed part,
/// and the counters and pack object to read at the end.
pub(crate) struct PackFigures {
    pub(crate) summary: PackSummary,
    pub(crate) counters: Option<Arc<PackCounters>>,
    #[cfg(feature = "object-store")]
    pub(crate) object: Option<crate::object::ObjectSource>,
}

impl PackFigures {
    /// A pack not used, and why.
    pub(crate) fn not_used(path: &Path, why: String) -> Self {
        PackFigures {
            summary: PackSummary {
                path: path.display().to_string(),
                not_used: Some(why),
                ..PackSummary::default()
            },
            counters: None,
            #[cfg(feature = "object-store")]
            object: None,
        }
    }

    /// The figures now.
    pub(crate) fn summary(&self) -> PackSummary {
        let mut s = self.summary.clone();
        if let Some(c) = &self.counters {
            s.served_bytes = c.served.load(Relaxed);
            s.fell_back_bytes = c.fell_back.load(Relaxed);
            s.parts_good = c.parts_good.load(Relaxed);
            s.parts_bad = c.parts_bad.load(Relaxed);
        }
        #[cfg(feature = "object-store")]
        {
            s.object = self.object.as_ref().map(crate::object::ObjectSource::stats);
        }
        s
    }
}

impl PackSummary {
    /// Its part of the one-line summary (no trailing separator).
    pub fn line(&self) -> String {
        let mib = |b: u64| b as f64 / f64::from(1 << 20);
        if let Some(why) = &self.not_used {
            return format!("pack: not used ({why})");
        }
        #[cfg(feature = "object-store")]
        let gets = self
            .object
            .as_ref()
            .map(|o| {
                let ahead = if o.ahead_gets > 0 {
                    format!(
                        " ({} of {} asked for ahead used)",
                        o.ahead_used, o.ahead_gets
                    )
                } else {
                    String::new()
                };
                format!(", {} GETs{ahead}", o.fetches)
            })
            .unwrap_or_default();
        #[cfg(not(feature = "object-store"))]
        let gets = String::new();
        format!(
            "pack: {:.1} MiB served of {:.1} MiB{gets}, {} parts failed",
            mib(self.served_bytes),
            mib(self.bytes),
            self.parts_bad
        )
    }

    /// Its figures as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        #[cfg(feature = "object-store")]
        let object = self.object.as_ref().map_or(serde_json::Value::Null, |o| {
            json!({
                "fetches": o.fetches,
                "fetched_bytes": o.fetched_bytes,
                "host_hits": o.host_hits,
                "ahead_gets": o.ahead_gets,
                "ahead_used": o.ahead_used,
                "fetch_retries": o.fetch_retries,
                "chunks_failed": o.chunks_failed,
            })
        });
        #[cfg(not(feature = "object-store"))]
        let object = serde_json::Value::Null;
        json!({
            "path": self.path,
            "used": self.not_used.is_none(),
            "not_used": self.not_used,
            "bound_by": self.bound_by,
            "bytes": self.bytes,
            "served_bytes": self.served_bytes,
            "fell_back_bytes": self.fell_back_bytes,
            "parts_good": self.parts_good,
            "parts_bad": self.parts_bad,
            "object": object,
        })
    }
}
