//! The compiled catalogs of one replica (SPEC §10), bounded in bytes: each catalog is charged
//! what it owns (`Catalog::heap_bytes`, which grows as validators and the natural index are
//! built on first use), a compile reserves its estimate before it starts, and at most
//! [`COMPILES`] run at once, so the cache and the compiles in progress stay within the
//! configured bytes.
//!
//! Fair share: with `n` tenants cached, each may keep `capacity / n`. A tenant over its share
//! evicts its own least recently used catalogs; a tenant within it evicts from the tenant
//! most over its share (then the least recently used anywhere). So one tenant registering
//! huge versions can neither evict the others' working sets nor keep them from the cache. A
//! catalog larger than its tenant's share is served but not kept, if the bytes it needs can
//! be had from its tenant's own catalogs, free room or tenants over their shares; otherwise
//! it is refused for now (RESOURCE_EXHAUSTED), as is one larger than the whole cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OnceCell, Semaphore};

use crate::catalog::Catalog;

/// Compiles in progress at once (each holds its reservation).
pub const COMPILES: usize = 2;

/// What `bytes` of catalog cost the process: the allocator's size classes, and pages that
/// evicted catalogs leave partly used, add about a third (the real binary's RSS measured by
/// `benches/catalog_memory.rs` with many catalogs compiled and evicted).
pub fn cost(bytes: usize) -> usize {
    bytes.saturating_add(bytes / 3)
}

/// How often a lookup checks the cache against its bytes (catalogs grow after they are
/// cached, as validators and indexes are built on first use).
const RECHECK: Duration = Duration::from_millis(250);

/// A catalog's place: (tenant, agent, version, run key: 0 = the version's shared catalog).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CatalogKey {
    pub tenant: String,
    pub agent_id: String,
    pub version: u32,
    pub run_key: u64,
}

/// One cached (or compiling) catalog.
#[derive(Default)]
pub struct Slot {
    pub cell: OnceCell<Arc<Catalog>>,
    /// Set for catalogs whose tools were listed upstream: they are prepared again after it.
    pub expires: Mutex<Option<Instant>>,
    pub prepared: Mutex<Option<Instant>>,
    /// Bytes reserved while compiling (the estimate), 0 once compiled.
    reserved: AtomicUsize,
    last_use: AtomicU64,
}

impl Slot {
    /// The bytes this slot is charged.
    fn charged(&self) -> usize {
        match self.cell.get() {
            Some(c) => cost(c.heap_bytes()),
            None => self.reserved.load(Ordering::Relaxed),
        }
    }

    /// Compiling: its bytes are in use whatever the cache decides.
    fn compiling(&self) -> bool {
        self.cell.get().is_none() && self.reserved.load(Ordering::Relaxed) > 0
    }

    pub fn is_expired(&self) -> bool {
        self.expires.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|t| t <= Instant::now())
    }
}

/// Why a catalog cannot be served from this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    pub bytes: usize,
    pub capacity: usize,
}

pub struct CatalogCache {
    capacity: usize,
    entries: Mutex<HashMap<CatalogKey, Arc<Slot>>>,
    clock: AtomicU64,
    started: Instant,
    /// When (ms after `started`) a lookup checks the cache's bytes next.
    next_check: AtomicU64,
    compiles: Semaphore,
}

impl CatalogCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
            started: Instant::now(),
            next_check: AtomicU64::new(RECHECK.as_millis() as u64),
            compiles: Semaphore::new(COMPILES),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CatalogKey, Arc<Slot>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot of `key`, new if it had none (or its listing expired), marked used.
    pub fn slot(&self, key: &CatalogKey) -> Arc<Slot> {
        let slot = {
            let mut entries = self.lock();
            match entries.get(key) {
                // Found without copying the key: this runs once per call.
                Some(s) if !s.is_expired() => s.clone(),
                _ => {
                    let s = Arc::<Slot>::default();
                    entries.insert(key.clone(), s.clone());
                    s
                }
            }
        };
        slot.last_use.store(self.clock.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        // One lookup in each RECHECK period checks the cache's bytes; the others read one
        // shared value.
        let now = self.started.elapsed().as_millis() as u64;
        let next = self.next_check.load(Ordering::Relaxed);
        if now >= next && self.next_check.compare_exchange(next, now + RECHECK.as_millis() as u64, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.make_room(None);
        }
        slot
    }

    /// Compiles `key`'s catalog with `compile`, within the cache's bytes: its `estimate` is
    /// reserved first (making room), the compile waits for one of the [`COMPILES`] places,
    /// and the result is charged what it owns. A catalog that does not fit its tenant's
    /// share is returned without being kept.
    pub async fn compile(
        &self,
        key: &CatalogKey,
        slot: &Slot,
        estimate: usize,
        compile: impl AsyncFnOnce() -> crate::error::Result<Catalog>,
    ) -> crate::error::Result<Arc<Catalog>> {
        if estimate > self.capacity {
            return Err(too_large(estimate, self.capacity));
        }
        slot.reserved.store(estimate.max(1), Ordering::Relaxed);
        if !self.make_room(Some(key)) {
            slot.reserved.store(0, Ordering::Relaxed);
            self.forget(key);
            return Err(no_room(estimate, self.capacity));
        }
        let compiled = {
            let _place = self.compiles.acquire().await.map_err(|_| crate::error::Error::Unavailable("shutting down".into()))?;
            compile().await
        };
        let catalog = match compiled {
            Ok(c) => Arc::new(c),
            Err(e) => {
                slot.reserved.store(0, Ordering::Relaxed);
                return Err(e);
            }
        };
        let bytes = cost(catalog.heap_bytes());
        slot.reserved.store(0, Ordering::Relaxed);
        if bytes > self.capacity {
            self.forget(key);
            return Err(too_large(bytes, self.capacity));
        }
        Ok(catalog)
    }

    /// After a compile: charges the catalog and evicts as the fair share says (the new one
    /// too, if it alone is over its tenant's share).
    pub fn settle(&self, key: &CatalogKey) {
        self.make_room(Some(key));
    }

    /// Drops one catalog.
    pub fn forget(&self, key: &CatalogKey) {
        self.lock().remove(key);
    }

    /// Drops the catalogs `drop` selects.
    pub fn retain(&self, keep: impl Fn(&CatalogKey, &Slot) -> bool) {
        self.lock().retain(|k, s| keep(k, s));
    }

    pub fn get(&self, key: &CatalogKey) -> Option<Arc<Slot>> {
        self.lock().get(key).cloned()
    }

    /// A compiled catalog of the same tenant's agent other than `key`'s, the highest version
    /// first: what a new compile of `key` can reuse (`Catalog::compile_from`).
    pub fn predecessor(&self, key: &CatalogKey) -> Option<Arc<Catalog>> {
        let entries = self.lock();
        entries
            .iter()
            .filter(|(k, _)| k.tenant == key.tenant && k.agent_id == key.agent_id && *k != key)
            .filter_map(|(k, s)| Some((k.version, k.run_key, s.cell.get()?.clone())))
            .max_by_key(|(version, run_key, _)| (*version, *run_key))
            .map(|(_, _, catalog)| catalog)
    }

    /// Bytes charged now, and catalogs kept.
    pub fn usage(&self) -> (usize, usize) {
        let entries = self.lock();
        (entries.values().map(|s| s.charged()).sum(), entries.len())
    }

    /// Evicts until the charged bytes fit, by the fair share. `arriving`, if given, is the
    /// catalog just reserved or compiled: it is evicted only when it alone puts its tenant
    /// over its share (then it is served once, not kept). False when a reservation cannot
    /// fit: the others are within their shares, and its compile must not push the replica
    /// over its bytes (other compiles in progress hold their own reservations).
    fn make_room(&self, arriving: Option<&CatalogKey>) -> bool {
        let mut entries = self.lock();
        let mut total: usize = entries.values().map(|s| s.charged()).sum();
        while total > self.capacity {
            let mut per_tenant: HashMap<&str, usize> = HashMap::new();
            for (k, s) in entries.iter() {
                *per_tenant.entry(k.tenant.as_str()).or_default() += s.charged();
            }
            let share = self.capacity / per_tenant.len().max(1);
            let evictable = |k: &CatalogKey, s: &Slot| !s.compiling() && Some(k) != arriving;
            let lru_of = |tenant: Option<&str>| {
                entries
                    .iter()
                    .filter(|(k, s)| evictable(k, s) && tenant.is_none_or(|t| k.tenant == t))
                    .min_by_key(|(_, s)| s.last_use.load(Ordering::Relaxed))
                    .map(|(k, _)| k.clone())
            };
            let arriving_tenant = arriving.map(|k| k.tenant.as_str());
            let most_over = |except: Option<&str>| {
                per_tenant.iter().filter(|(t, used)| **used > share && Some(**t) != except).max_by_key(|(_, used)| **used).map(|(t, _)| t.to_string())
            };
            let victim = match arriving_tenant {
                // The arriving tenant is over its share: it makes room from its own, then
                // (its new catalog compiled) by not keeping that one; while it is still
                // compiling, from another tenant over its share.
                Some(t) if per_tenant.get(t).copied().unwrap_or(0) > share => lru_of(Some(t))
                    .or_else(|| arriving.filter(|k| entries.get(*k).is_some_and(|s| !s.compiling())).cloned())
                    .or_else(|| most_over(Some(t)).as_deref().and_then(|o| lru_of(Some(o)))),
                _ => most_over(None).as_deref().and_then(|t| lru_of(Some(t))).or_else(|| lru_of(None)),
            };
            let Some(victim) = victim else { break };
            if let Some(slot) = entries.remove(&victim) {
                total = total.saturating_sub(slot.charged());
            }
        }
        let reserving = arriving.and_then(|k| entries.get(k)).is_some_and(|s| s.compiling());
        let other_compiles: usize = entries.iter().filter(|(k, s)| s.compiling() && Some(*k) != arriving).map(|(_, s)| s.charged()).sum();
        !reserving || total.saturating_sub(other_compiles) <= self.capacity
    }
}

fn no_room(bytes: usize, capacity: usize) -> crate::error::Error {
    crate::error::Error::ResourceExhausted(format!(
        "this version's compiled catalog needs about {} MiB, more than this tenant's share of this replica's catalog cache ({} MiB in all, --catalog-cache-bytes, shared with other tenants) can give now: try again later, split its tools over several agents or ask the operator for a larger cache",
        bytes >> 20,
        capacity >> 20
    ))
}

fn too_large(bytes: usize, capacity: usize) -> crate::error::Error {
    crate::error::Error::ResourceExhausted(format!(
        "this version's compiled catalog takes about {} MiB, more than this replica's whole catalog cache ({} MiB, --catalog-cache-bytes): split its tools over several agents or ask the operator for a larger cache",
        bytes >> 20,
        capacity >> 20
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{AgentDefinition, ClientSource, SourceKind, ToolDeclaration, ToolSource};

    fn key(tenant: &str, version: u32) -> CatalogKey {
        CatalogKey { tenant: tenant.into(), agent_id: "a".into(), version, run_key: 0 }
    }

    /// A catalog of `tools` client tools (about 1 KiB each once compiled).
    fn catalog(tools: usize) -> Catalog {
        // Distinct schemas: a catalog keeps one copy of each distinct schema.
        let tools = (0..tools)
            .map(|i| ToolDeclaration {
                name: format!("tool_{i}"),
                description: "Does one thing.".into(),
                input_schema: format!(r#"{{"type":"object","description":"Input {i}: {}"}}"#, "words ".repeat(100)),
                ..Default::default()
            })
            .collect();
        let def = AgentDefinition {
            sources: vec![ToolSource { id: "s".into(), kind: SourceKind::Client(ClientSource { tools }), ..Default::default() }],
            ..Default::default()
        };
        Catalog::compile(&def, &Default::default())
    }

    async fn cache_one(cache: &CatalogCache, key: &CatalogKey, tools: usize) -> crate::error::Result<Arc<Catalog>> {
        let slot = cache.slot(key);
        let c = cache.compile(key, &slot, 1, async || Ok(catalog(tools))).await?;
        let _ = slot.cell.set(c.clone());
        cache.settle(key);
        Ok(c)
    }

    fn kept(cache: &CatalogCache, key: &CatalogKey) -> bool {
        cache.get(key).is_some_and(|s| s.cell.get().is_some())
    }

    #[tokio::test]
    async fn a_compile_reuses_the_latest_compiled_version_of_the_same_agent_only() {
        let cache = CatalogCache::new(1 << 30);
        assert!(cache.predecessor(&key("a", 3)).is_none(), "nothing compiled yet");
        let v1 = cache_one(&cache, &key("a", 1), 5).await.unwrap();
        let v2 = cache_one(&cache, &key("a", 2), 5).await.unwrap();
        cache_one(&cache, &key("b", 9), 5).await.unwrap();
        let found = cache.predecessor(&key("a", 3)).expect("a version of a");
        assert!(Arc::ptr_eq(&found, &v2), "the highest version");
        assert!(Arc::ptr_eq(&cache.predecessor(&key("a", 2)).expect("v1"), &v1), "never the key itself");
        let reserved = cache.slot(&key("a", 4));
        assert!(
            reserved.cell.get().is_none() && Arc::ptr_eq(&cache.predecessor(&key("a", 5)).unwrap(), &v2),
            "a compile in progress is no predecessor"
        );
    }

    #[tokio::test]
    async fn the_cache_stays_within_its_bytes_and_a_greedy_tenant_evicts_only_its_own() {
        let one = cost(catalog(20).heap_bytes());
        let cache = CatalogCache::new(one * 6);
        for v in 1..=2 {
            cache_one(&cache, &key("quiet", v), 20).await.unwrap();
        }
        for v in 1..=10 {
            cache_one(&cache, &key("greedy", v), 20).await.unwrap();
            assert!(cache.usage().0 <= one * 6 + one, "{:?}", cache.usage());
        }
        assert!(kept(&cache, &key("quiet", 1)) && kept(&cache, &key("quiet", 2)), "the quiet tenant keeps its share");
        assert!(kept(&cache, &key("greedy", 10)) && !kept(&cache, &key("greedy", 1)), "the greedy one evicted its own oldest");
    }

    #[tokio::test]
    async fn a_tenant_over_its_share_makes_room_from_its_own_and_a_catalog_over_the_cache_is_refused() {
        let one = cost(catalog(20).heap_bytes());
        let cache = CatalogCache::new(one * 4);
        cache_one(&cache, &key("a", 1), 20).await.unwrap();
        cache_one(&cache, &key("b", 1), 20).await.unwrap();
        // b's share is half the cache: its catalog of three quarters pushes out its own first.
        let big = cache_one(&cache, &key("b", 2), 60).await.expect("served");
        assert!(big.heap_bytes() > one * 2);
        assert!(kept(&cache, &key("a", 1)) && !kept(&cache, &key("b", 1)));
        // a, within its share, takes its room back from b, the tenant most over its share.
        cache_one(&cache, &key("a", 2), 20).await.unwrap();
        assert!(kept(&cache, &key("a", 1)) && kept(&cache, &key("a", 2)) && !kept(&cache, &key("b", 2)));
        let refused = cache_one(&cache, &key("b", 3), 200).await.expect_err("over the whole cache");
        assert!(matches!(refused, crate::error::Error::ResourceExhausted(_)), "{refused:?}");
        assert!(cache.usage().0 <= one * 4);
    }

    async fn cache_reserving(cache: &CatalogCache, key: &CatalogKey, tools: usize, estimate: usize) -> crate::error::Result<Arc<Catalog>> {
        let slot = cache.slot(key);
        let c = cache.compile(key, &slot, estimate, async || Ok(catalog(tools))).await?;
        let _ = slot.cell.set(c.clone());
        cache.settle(key);
        Ok(c)
    }

    #[tokio::test]
    async fn a_compile_makes_room_from_tenants_over_their_share_and_is_refused_when_every_other_is_within() {
        let one = cost(catalog(20).heap_bytes());
        let cache = CatalogCache::new(one * 4);
        cache_reserving(&cache, &key("a", 1), 60, one * 3).await.expect("alone, a may use the whole cache");
        // b's compile is over its half and it has nothing to evict: a, over its half too, gives way.
        cache_reserving(&cache, &key("b", 1), 60, one * 3).await.expect("room made from a");
        assert!(!kept(&cache, &key("a", 1)) && kept(&cache, &key("b", 1)));
        assert!(cache.usage().0 <= one * 4, "{:?}", cache.usage());

        let cache = CatalogCache::new(one * 4);
        cache_reserving(&cache, &key("a", 1), 20, one).await.unwrap();
        cache_reserving(&cache, &key("b", 1), 20, one).await.unwrap();
        cache_reserving(&cache, &key("b", 2), 20, one).await.unwrap();
        // c needs three quarters; b is over its third and gives one back, a is within: no room.
        let refused = cache_reserving(&cache, &key("c", 1), 60, one * 3).await.expect_err("no room within the bytes");
        assert!(matches!(&refused, crate::error::Error::ResourceExhausted(m) if m.contains("share")), "{refused:?}");
        assert!(kept(&cache, &key("a", 1)) && kept(&cache, &key("b", 2)), "tenants within their shares keep their catalogs");
        assert!(cache.get(&key("c", 1)).is_none(), "the refused reservation is released");
        assert!(cache.usage().0 <= one * 4, "{:?}", cache.usage());
    }
}
