//! The agent registry: versioned definitions in the store, compiled catalogs cached per
//! immutable version.

pub mod catalogs;
pub mod embeddings;

use std::sync::Arc;

use catalogs::{CatalogCache, CatalogKey};
use embeddings::Embeddings;

use crate::cache::{self, VersionCache};
use crate::call::RunContext;
use crate::catalog::{AgentDefinition, Catalog, validate};
use crate::clock::Clock;
use crate::error::{Error, FieldViolation, Result};
use crate::store::{AgentRecord, Store, StoreError, VersionRecord};
use crate::upstream::{Listing, Secrets, ToolLister};

#[derive(Debug, Clone)]
pub struct Version {
    pub agent_id: String,
    pub version: u32,
    pub is_default: bool,
    pub definition: AgentDefinition,
    pub create_time: i64,
}

/// How long a catalog with upstream-listed tools is used before it is prepared again, unless
/// configured otherwise ([`Registry::with_listed_tools_ttl`]).
pub const LISTED_TOOLS_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a catalog whose listing failed for some source is used before it is prepared
/// again (the source may be back), unless configured otherwise.
pub const LISTING_FAILURE_TTL: std::time::Duration = std::time::Duration::from_secs(5);

/// Default bytes of compiled catalogs kept per replica.
pub const CATALOG_CACHE_BYTES: usize = 512 * 1024 * 1024;

/// What compiling makes of a version, reserved before it compiles: about this many bytes
/// per byte of its tools' text (names, descriptions, schemas) plus this many per tool.
/// Fitted to what an allocator saw 100,000 tools keep, with short and with long texts (~3.1
/// KB and ~6.7 KB per tool; `tests/catalog_size.rs` checks the compiled figure). Validators
/// and the natural index, built on first use, are charged when built.
const COMPILED_BYTES_PER_TEXT_BYTE: usize = 8;
const COMPILED_BYTES_PER_TOOL: usize = 1536;

pub struct Registry {
    store: Store,
    clock: Arc<dyn Clock>,
    lister: Option<Arc<dyn ToolLister>>,
    catalogs: CatalogCache,
    max_definition_bytes: usize,
    /// Default versions and run pins, trusted for a bounded time (`crate::cache`).
    defaults: VersionCache,
    pins: VersionCache,
    /// Executor endpoints and MCP URLs must match it at registration (SPEC §9).
    outbound: Arc<crate::outbound::Policy>,
    /// Secrets named by MCP header bindings must be usable by the tenant at registration.
    secrets: Arc<Secrets>,
    listed_tools_ttl: std::time::Duration,
    listing_failure_ttl: std::time::Duration,
    /// Hybrid search's embeddings, with `--embedding-model`.
    embeddings: Option<Arc<Embeddings>>,
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::BadUrl(u) => Error::Internal(format!("bad store URL {u}")),
            StoreError::Unreachable { .. }
            | StoreError::Closed
            | StoreError::Db(_)
            | StoreError::Sqlite(_)
            | StoreError::Blocking(_)
            | StoreError::Batch(_) => Error::Unavailable(format!("store unavailable: {e}")),
        }
    }
}

fn not_found(agent_id: &str) -> Error {
    Error::NotFound(format!("agent {agent_id:?} not found"))
}

fn check_agent_id(agent_id: &str) -> Result<()> {
    match crate::catalog::names::agent_id_problem(agent_id) {
        Some(p) => Err(Error::invalid("agent_id", p)),
        None => Ok(()),
    }
}

impl Registry {
    pub fn new(store: Store, clock: Arc<dyn Clock>, max_definition_bytes: usize) -> Self {
        Self {
            store,
            clock,
            lister: None,
            catalogs: CatalogCache::new(CATALOG_CACHE_BYTES),
            max_definition_bytes,
            defaults: VersionCache::new(std::time::Duration::ZERO),
            pins: VersionCache::new(std::time::Duration::ZERO),
            outbound: Arc::new(crate::outbound::Policy::default()),
            secrets: Arc::new(Secrets::default()),
            listed_tools_ttl: LISTED_TOOLS_TTL,
            listing_failure_ttl: LISTING_FAILURE_TTL,
            embeddings: None,
        }
    }

    /// Embeds catalogs in the background and queries on demand (hybrid search).
    pub fn with_embeddings(mut self, embeddings: Arc<Embeddings>) -> Self {
        self.embeddings = Some(embeddings);
        self
    }

    pub fn embeddings(&self) -> Option<&Arc<Embeddings>> {
        self.embeddings.as_ref()
    }

    /// The query's vector for a natural-language search of `catalog`, when its embeddings are
    /// complete; `None` means lexical search (also for a query discovery refuses as too long).
    pub async fn query_vector(&self, catalog: &Catalog, query: &str) -> Option<Arc<[f32]>> {
        let e = self.embeddings.as_ref()?;
        if catalog.vectors().is_none() || query.trim().is_empty() || query.len() > crate::control::discovery::MAX_QUERY_BYTES {
            return None;
        }
        e.query(query).await
    }

    /// Whether a version's embeddings are complete on this replica (compiling its catalog,
    /// which queues them, if it is not compiled here). Always false without a model.
    pub async fn embeddings_ready(&self, tenant: &str, agent_id: &str, version: u32) -> bool {
        if self.embeddings.is_none() {
            return false;
        }
        self.catalog(tenant, agent_id, version).await.is_ok_and(|c| c.vectors().is_some())
    }

    /// Trusts default versions and run pins read from the store for `refresh` (zero:
    /// never). This bounds how late a promotion or an `EndRun` made through another replica
    /// is seen here.
    pub fn with_cache_refresh(mut self, refresh: std::time::Duration) -> Self {
        self.defaults = VersionCache::new(refresh);
        self.pins = VersionCache::new(refresh);
        self
    }

    pub fn with_outbound(mut self, policy: Arc<crate::outbound::Policy>) -> Self {
        self.outbound = policy;
        self
    }

    pub fn with_secrets(mut self, secrets: Arc<Secrets>) -> Self {
        self.secrets = secrets;
        self
    }

    pub fn with_listed_tools_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.listed_tools_ttl = ttl;
        self
    }

    /// How long a catalog whose listing failed for some source is used.
    pub fn with_listing_failure_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.listing_failure_ttl = ttl;
        self
    }

    /// Bounds the compiled catalogs kept in bytes.
    pub fn with_catalog_cache_bytes(mut self, bytes: usize) -> Self {
        self.catalogs = CatalogCache::new(bytes);
        self
    }

    pub fn with_lister(mut self, lister: Arc<dyn ToolLister>) -> Self {
        self.lister = Some(lister);
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Validates and stores a new version (or returns the identical latest one).
    pub async fn create_version(
        &self,
        tenant: &str,
        agent_id: &str,
        def: &AgentDefinition,
        make_default: bool,
        encoded_len: usize,
    ) -> Result<Version> {
        check_agent_id(agent_id)?;
        if encoded_len > self.max_definition_bytes {
            return Err(Error::invalid(
                "definition",
                format!("the definition is {encoded_len} bytes, over the {}-byte limit", self.max_definition_bytes),
            ));
        }
        validate::validate(def).map_err(Error::InvalidArgument)?;
        let mut refused = crate::outbound::violations(&self.outbound, def);
        refused.extend(crate::upstream::secrets::violations(&self.secrets, tenant, def));
        if !refused.is_empty() {
            return Err(Error::InvalidArgument(refused));
        }
        let text = serde_json::to_string(def).map_err(|e| Error::Internal(e.to_string()))?;
        let (rec, _) = self.store.create_version(tenant, agent_id, &text, make_default, self.clock.now_ms()).await?;
        self.defaults.forget(&cache::key(&[tenant, agent_id]));
        decode(rec)
    }

    pub async fn get_version(&self, tenant: &str, agent_id: &str, version: u32) -> Result<Version> {
        let v = (version != 0).then_some(version);
        match self.store.get_version(tenant, agent_id, v).await? {
            Some(rec) => decode(rec),
            None if version == 0 => Err(not_found(agent_id)),
            None => match self.store.default_version(tenant, agent_id).await? {
                Some(_) => Err(Error::NotFound(format!("agent {agent_id:?} has no version {version}"))),
                None => Err(not_found(agent_id)),
            },
        }
    }

    pub async fn list_agents(&self, tenant: &str, page_token: &str, page_size: u32) -> Result<(Vec<AgentRecord>, String)> {
        let size = page_size_or_default(page_size);
        let after = decode_token(page_token, "page_token")?;
        let rows = self.store.list_agents(tenant, &after, size + 1).await?;
        Ok(paginate(rows, size, |r| r.agent_id.clone()))
    }

    pub async fn list_versions(&self, tenant: &str, agent_id: &str, page_token: &str, page_size: u32) -> Result<(Vec<Version>, String)> {
        let size = page_size_or_default(page_size);
        let after: u32 = if page_token.is_empty() {
            0
        } else {
            decode_token(page_token, "page_token")?.parse().map_err(|_| Error::invalid("page_token", "not a token from this API"))?
        };
        let rows = self.store.list_versions(tenant, agent_id, after, size + 1).await?.ok_or_else(|| not_found(agent_id))?;
        let (rows, next) = paginate(rows, size, |r| r.version.to_string());
        Ok((rows.into_iter().map(decode).collect::<Result<_>>()?, next))
    }

    pub async fn set_default(&self, tenant: &str, agent_id: &str, version: u32) -> Result<Version> {
        if version == 0 {
            return Err(Error::invalid("version", "name the version to make default (1, 2, …)"));
        }
        let set = self.store.set_default(tenant, agent_id, version, self.clock.now_ms()).await?;
        self.defaults.forget(&cache::key(&[tenant, agent_id]));
        match set {
            Some(rec) => decode(rec),
            None => Err(self.get_version(tenant, agent_id, version).await.err().unwrap_or_else(|| not_found(agent_id))),
        }
    }

    pub async fn delete_agent(&self, tenant: &str, agent_id: &str) -> Result<()> {
        if !self.store.delete_agent(tenant, agent_id).await? {
            return Err(not_found(agent_id));
        }
        let agent = cache::key(&[tenant, agent_id]);
        self.defaults.forget(&agent);
        self.pins.forget_prefix(&agent);
        self.catalogs.retain(|k, _| !(k.tenant == tenant && k.agent_id == agent_id));
        Ok(())
    }

    /// The version a request names (0 = default). A default read from the store is trusted
    /// for the cache refresh time: a promotion through this replica is served at once, one
    /// through another replica sharing the database within that time. Catalogs are cached
    /// per immutable version.
    pub async fn resolve_version(&self, tenant: &str, agent_id: &str, version: u32) -> Result<u32> {
        if version != 0 {
            return Ok(version);
        }
        let key = cache::key(&[tenant, agent_id]);
        let now = self.clock.now_ms();
        if let Some(v) = self.defaults.get(&key, now, i64::MAX) {
            return Ok(v);
        }
        let generation = self.defaults.generation();
        let v = self.store.default_version(tenant, agent_id).await?.ok_or_else(|| not_found(agent_id))?;
        self.defaults.put(key, v, now, generation);
        Ok(v)
    }

    /// The version a run is pinned to (SPEC §8), pinning the requested one (0: the default)
    /// on the run's first call or once it was idle for `idle`. A pin read within the cache
    /// refresh time, and less than a tenth of the idle time ago, is used without asking the
    /// store (whose copy records when the run was last seen: so a run served from memory
    /// looks idle at most that much longer than it is).
    pub async fn pin_run(&self, tenant: &str, agent_id: &str, version: u32, run_id: &str, idle: std::time::Duration) -> Result<u32> {
        let key = cache::key(&[tenant, agent_id, run_id]);
        let now = self.clock.now_ms();
        let idle = idle.as_millis() as i64;
        if let Some(pinned) = self.pins.get(&key, now, idle / 10) {
            return Ok(pinned);
        }
        let generation = self.pins.generation();
        let requested = self.resolve_version(tenant, agent_id, version).await?;
        let pinned = self.store.pin_run(tenant, agent_id, run_id, requested, now, now - idle).await?;
        self.pins.put(key, pinned, now, generation);
        Ok(pinned)
    }

    /// Ends a run: its next call pins the default again.
    pub async fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<()> {
        self.store.end_run(tenant, agent_id, run_id).await?;
        self.pins.forget(&cache::key(&[tenant, agent_id, run_id]));
        Ok(())
    }

    /// The compiled catalog of a version, built once and cached.
    pub async fn catalog(&self, tenant: &str, agent_id: &str, version: u32) -> Result<Arc<Catalog>> {
        self.catalog_keyed(tenant, agent_id, version, 0, None).await
    }

    /// The catalog a run sees: the version's shared one, unless upstream listings depend on
    /// the run (MCP headers bound to the run context), then one per distinct header set.
    pub async fn catalog_for_run(&self, tenant: &str, agent_id: &str, version: u32, run: &RunContext) -> Result<Arc<Catalog>> {
        let base = self.catalog(tenant, agent_id, version).await?;
        match self.run_key(&base, tenant, run) {
            None => Ok(base),
            Some(k) => self.catalog_keyed(tenant, agent_id, version, k, Some(run)).await,
        }
    }

    fn run_key(&self, base: &Catalog, tenant: &str, run: &RunContext) -> Option<u64> {
        self.lister.as_ref().and_then(|l| l.run_key(&base.sources, tenant, run))
    }

    /// Prepares a run's catalog again (a call named a tool the listing lacks), unless it
    /// was prepared less than `min_age` ago. Returns whether it was dropped.
    pub fn refresh_for_run(
        &self,
        tenant: &str,
        agent_id: &str,
        version: u32,
        base: &Catalog,
        run: &RunContext,
        min_age: std::time::Duration,
    ) -> bool {
        let key = CatalogKey { tenant: tenant.into(), agent_id: agent_id.into(), version, run_key: self.run_key(base, tenant, run).unwrap_or(0) };
        let old_enough =
            self.catalogs.get(&key).is_some_and(|s| s.prepared.lock().unwrap_or_else(|e| e.into_inner()).is_none_or(|t| t.elapsed() >= min_age));
        if old_enough {
            self.catalogs.forget(&key);
        }
        old_enough
    }

    async fn catalog_keyed(&self, tenant: &str, agent_id: &str, version: u32, run_key: u64, run: Option<&RunContext>) -> Result<Arc<Catalog>> {
        let key = CatalogKey { tenant: tenant.into(), agent_id: agent_id.into(), version, run_key };
        let slot = self.catalogs.slot(&key);
        let mut compiled = false;
        let result = slot
            .cell
            // Boxed: preparing is rare, and its future would otherwise sit inside every call's.
            .get_or_try_init(|| {
                compiled = true;
                Box::pin(self.prepare(&key, &slot, run))
            })
            .await
            .cloned();
        match &result {
            Ok(c) => {
                // The compile that filled the slot charges its bytes (reserved until now); a
                // lookup of a cached catalog leaves the cache alone (checking it walks every
                // entry), catalogs that grow since are seen by the periodic check.
                if compiled {
                    self.catalogs.settle(&key);
                }
                if let Some(e) = &self.embeddings {
                    e.ensure(c);
                }
            }
            Err(_) => self.catalogs.forget(&key),
        }
        result
    }

    /// Lists a version's upstream tools and compiles its catalog, within the cache's bytes.
    /// A source whose listing failed is named in the diagnostics, and the catalog is used
    /// only briefly before it is prepared again.
    async fn prepare(&self, key: &CatalogKey, slot: &catalogs::Slot, run: Option<&RunContext>) -> Result<Arc<Catalog>> {
        let v = self.get_version(&key.tenant, &key.agent_id, key.version).await?;
        let listing = match &self.lister {
            Some(l) => l.list(&v.definition, &key.tenant, &key.agent_id, run).await,
            None => Listing::default(),
        };
        *slot.prepared.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
        let mut diagnostics = Vec::new();
        for (source, why) in &listing.failed {
            tracing::warn!(agent = %key.agent_id, source = %source, error = %why, "listing a source's tools failed; its tools are unavailable until it answers");
            diagnostics.push(format!("source {source:?}: {why}"));
        }
        let ttl =
            if !listing.failed.is_empty() { Some(self.listing_failure_ttl) } else { (!listing.tools.is_empty()).then_some(self.listed_tools_ttl) };
        *slot.expires.lock().unwrap_or_else(|e| e.into_inner()) = ttl.map(|t| std::time::Instant::now() + t);
        let estimate = estimate_bytes(&v.definition, &listing);
        let def = v.definition;
        let failed: Vec<String> = listing.failed.into_iter().map(|(s, _)| s).collect();
        let tools = listing.tools;
        // Another version of the agent already compiled here: its schemas are reused.
        let previous = self.catalogs.predecessor(key);
        self.catalogs
            .compile(key, slot, estimate, async move || {
                let mut catalog = tokio::task::spawn_blocking(move || Catalog::compile_from(&def, &tools, previous.as_deref()))
                    .await
                    .map_err(|e| Error::Internal(e.to_string()))?;
                diagnostics.append(&mut catalog.diagnostics);
                catalog.diagnostics = diagnostics;
                catalog.unavailable = failed;
                Ok(catalog)
            })
            .await
    }

    /// Drops a cached catalog so the next use prepares it again (tools listed upstream
    /// changed).
    pub fn invalidate_listings(&self, tenant: &str, agent_id: &str) {
        self.catalogs.retain(|k, s| !(k.tenant == tenant && k.agent_id == agent_id && s.expires.lock().unwrap_or_else(|e| e.into_inner()).is_some()));
    }

    pub fn invalidate(&self, tenant: &str, agent_id: &str, version: u32) {
        self.catalogs.retain(|k, _| !(k.tenant == tenant && k.agent_id == agent_id && k.version == version));
    }

    /// Bytes of compiled catalogs charged now, and how many are kept (metrics, tests).
    pub fn catalog_usage(&self) -> (usize, usize) {
        self.catalogs.usage()
    }
}

/// What a catalog is reserved before it is compiled: its tools' text times what compiling
/// makes of each byte.
fn estimate_bytes(def: &AgentDefinition, listing: &Listing) -> usize {
    let text = |t: &crate::catalog::ToolDeclaration| t.name.len() + t.description.len() + t.input_schema.len() + t.output_schema.len() + 64;
    let declared = def.sources.iter().flat_map(|s| s.kind.declared_tools());
    let (tools, text) = declared.chain(listing.tools.values().flatten()).fold((0usize, 0usize), |(n, b), t| (n + 1, b + text(t)));
    catalogs::cost(text.saturating_mul(COMPILED_BYTES_PER_TEXT_BYTE) + tools.saturating_mul(COMPILED_BYTES_PER_TOOL) + 64 * 1024)
}

fn decode(rec: VersionRecord) -> Result<Version> {
    let definition = serde_json::from_str(&rec.definition)
        .map_err(|e| Error::Internal(format!("stored definition of {:?} v{} is unreadable: {e}", rec.agent_id, rec.version)))?;
    Ok(Version { agent_id: rec.agent_id, version: rec.version, is_default: rec.is_default, definition, create_time: rec.create_time })
}

pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 1000;

pub fn page_size_or_default(n: u32) -> u32 {
    if n == 0 { DEFAULT_PAGE_SIZE } else { n.min(MAX_PAGE_SIZE) }
}

/// Page tokens are opaque to clients: hex of the last key seen.
pub fn encode_token(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

pub fn decode_token(token: &str, field: &str) -> Result<String> {
    let bad = || Error::InvalidArgument(vec![FieldViolation::new(field, "not a token from this API")]);
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Option<Vec<u8>> = (0..token.len()).step_by(2).map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes.ok_or_else(bad)?).map_err(|_| bad())
}

/// Trims a `size + 1` fetch to `size` and makes the next token.
pub fn paginate<T>(mut rows: Vec<T>, size: u32, key: impl Fn(&T) -> String) -> (Vec<T>, String) {
    if rows.len() > size as usize {
        rows.truncate(size as usize);
        let next = rows.last().map(|r| encode_token(&key(r))).unwrap_or_default();
        (rows, next)
    } else {
        (rows, String::new())
    }
}
