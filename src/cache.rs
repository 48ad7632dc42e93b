//! Per-replica memory of store values that another replica may change (default versions,
//! run pins), trusted for a bounded time so the hot path does not ask the store on every
//! call. Changes made through this replica drop their entries at once; changes made through
//! another replica are seen within `refresh`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Past this many entries, stale ones are dropped (and all of them if none is stale).
const MAX_ENTRIES: usize = 100_000;

pub struct VersionCache {
    refresh: Duration,
    entries: Mutex<HashMap<String, Entry>>,
    /// Bumped by every forget: a value read from the store before a forget may be older than
    /// the change that caused it, and is not put back (see [`VersionCache::generation`]).
    generation: AtomicU64,
}

#[derive(Clone, Copy)]
struct Entry {
    version: u32,
    /// When the store last confirmed it (real time: freshness is not domain time).
    checked: Instant,
    /// Domain time of that confirmation (unix ms), for values that expire in domain time.
    at_ms: i64,
}

impl VersionCache {
    /// `refresh` zero: nothing is remembered, every lookup misses.
    pub fn new(refresh: Duration) -> Self {
        Self { refresh, entries: Mutex::new(HashMap::new()), generation: AtomicU64::new(0) }
    }

    /// The remembered version, if the store confirmed it less than `refresh` ago and less
    /// than `max_age_ms` of domain time before `now_ms`.
    pub fn get(&self, key: &str, now_ms: i64, max_age_ms: i64) -> Option<u32> {
        if self.refresh.is_zero() {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let e = entries.get(key)?;
        (e.checked.elapsed() < self.refresh && now_ms - e.at_ms < max_age_ms).then_some(e.version)
    }

    /// Taken before reading a value from the store, and handed to [`VersionCache::put`].
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Remembers a value read from the store after [`VersionCache::generation`] returned
    /// `generation`, unless something was forgotten since (the read may predate that change).
    pub fn put(&self, key: String, version: u32, now_ms: i64, generation: u64) {
        if self.refresh.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            let refresh = self.refresh;
            entries.retain(|_, e| e.checked.elapsed() < refresh);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, Entry { version, checked: Instant::now(), at_ms: now_ms });
    }

    /// Call after the change is in the store.
    pub fn forget(&self, key: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.remove(key);
    }

    /// Forgets every entry whose key starts with `prefix` (see [`key`]).
    pub fn forget_prefix(&self, prefix: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.retain(|k, _| !k.starts_with(prefix));
    }
}

/// An unambiguous key for a sequence of parts (each length-prefixed), so that any string,
/// a run id with separators in it included, names one entry. A key of parts `a` is a prefix
/// of the key of parts `a + b`.
pub fn key(parts: &[&str]) -> String {
    use std::fmt::Write;
    let mut k = String::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for p in parts {
        // Into the key itself: this runs on every call.
        let _ = write!(k, "{}:", p.len());
        k.push_str(p);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_different_parts_never_collide() {
        assert_ne!(key(&["a", "b:c"]), key(&["a:b", "c"]));
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]));
        assert!(key(&["t", "agent", "run"]).starts_with(&key(&["t", "agent"])));
    }

    #[test]
    fn an_entry_is_trusted_until_refresh_or_max_age() {
        let c = VersionCache::new(Duration::from_secs(60));
        c.put("k".into(), 3, 1_000, 0);
        assert_eq!(c.get("k", 1_500, 1_000), Some(3));
        assert_eq!(c.get("k", 2_000, 1_000), None, "older than max_age in domain time");
        let short = VersionCache::new(Duration::from_millis(1));
        short.put("k".into(), 3, 0, 0);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(short.get("k", 0, i64::MAX), None, "older than refresh in real time");
    }

    #[test]
    fn a_value_read_before_a_forget_is_not_put_back() {
        let c = VersionCache::new(Duration::from_secs(60));
        let before = c.generation();
        c.forget("k"); // a promotion committed while the old default was being read
        c.put("k".into(), 1, 0, before);
        assert_eq!(c.get("k", 0, i64::MAX), None);
        c.put("k".into(), 2, 0, c.generation());
        assert_eq!(c.get("k", 0, i64::MAX), Some(2));
    }

    #[test]
    fn zero_refresh_remembers_nothing() {
        let c = VersionCache::new(Duration::ZERO);
        c.put("k".into(), 1, 0, 0);
        assert_eq!(c.get("k", 0, i64::MAX), None);
    }

    #[test]
    fn forget_prefix_drops_an_agents_entries_only() {
        let c = VersionCache::new(Duration::from_secs(60));
        c.put(key(&["t", "a", "r1"]), 1, 0, 0);
        c.put(key(&["t", "a", "r2"]), 1, 0, 0);
        c.put(key(&["t", "ab", "r1"]), 1, 0, 0);
        c.forget_prefix(&key(&["t", "a"]));
        assert_eq!(c.get(&key(&["t", "a", "r1"]), 0, i64::MAX), None);
        assert_eq!(c.get(&key(&["t", "ab", "r1"]), 0, i64::MAX), Some(1));
    }
}
