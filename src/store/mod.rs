//! Durable state: definitions, default pointers, runs, tool-call outcomes, deferred records,
//! usage counts, per-user OAuth state (sealed tokens, consents in progress, registered
//! clients) and text embeddings for hybrid search, behind domain-level methods so no sqlx type
//! leaves this module.
//!
//! Two backends with the same behaviour, chosen by the store URL:
//! - `sqlite://FILE` (or `sqlite::memory:`): the embedded store, one file (`sqlite.rs`);
//! - `postgres://USER:PASSWORD@HOST:PORT/DB`: one database shared by several replicas
//!   (`postgres.rs`); its schema is migrated at start-up, safely when replicas start at once.
//!
//! Nothing here caches: every read (the default version of an agent in particular) asks the
//! database, so a change made through one replica is seen by every other at its next request.

mod calls;
mod postgres;
mod sqlite;

pub use sqlite::LEGACY_LEASE_MS;

use calls::CallWriter;

use crate::telemetry::metrics::store_timer;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported store URL {0:?}: use sqlite://FILE (or sqlite::memory:) or postgres://USER:PASSWORD@HOST:PORT/DB")]
    BadUrl(String),
    /// The database server could not be reached or refused the connection (at start-up).
    #[error("cannot connect to the PostgreSQL server at {target}: {reason}")]
    Unreachable { target: String, reason: String },
    #[error("store error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("store error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A store task on the blocking pool failed (panicked or was cancelled).
    #[error("store error: {0}")]
    Blocking(String),
    /// A write batched with others failed (the statement, or the batch's commit).
    #[error("store error: {0}")]
    Batch(String),
    /// The store's writer task is gone (the runtime is shutting down).
    #[error("store closed")]
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRecord {
    pub agent_id: String,
    pub version: u32,
    pub is_default: bool,
    pub definition: String,
    pub create_time: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRecord {
    pub agent_id: String,
    pub default_version: u32,
    pub latest_version: u32,
    pub create_time: i64,
    pub update_time: i64,
}

/// A tool call's identity: (tenant, agent, run, tool call id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub tenant: String,
    pub agent_id: String,
    pub run_id: String,
    pub call_id: String,
}

impl CallKey {
    pub fn new(tenant: &str, agent_id: &str, run_id: &str, call_id: &str) -> Self {
        Self { tenant: tenant.into(), agent_id: agent_id.into(), run_id: run_id.into(), call_id: call_id.into() }
    }
}

/// A claim of a tool call by one process instance, under a lease it renews while the call
/// runs (SPEC §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// What the call is (tool and arguments): a reused tool call id with another one is told
    /// apart from a retry.
    pub fingerprint: String,
    /// The claiming process (replica and instance).
    pub owner: String,
    pub now: i64,
    pub lease_until: i64,
}

/// A deferred record's holder while a resolution runs: the owner and its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease<'a> {
    pub owner: &'a str,
    pub until: i64,
}

/// How many rows one retention pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub calls: u64,
    pub deferred: u64,
    pub runs: u64,
}

impl Purged {
    pub fn total(&self) -> u64 {
        self.calls + self.deferred + self.runs
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredRow {
    pub deferred_id: String,
    pub agent_id: String,
    pub version: u32,
    pub run_id: String,
    pub state: String,
    pub record: String,
    pub resolution: Option<String>,
    pub result: Option<String>,
    pub create_time: i64,
    pub resolve_time: Option<i64>,
    /// While `executing`: until when its holder's lease runs.
    pub lease_until: Option<i64>,
    /// A pending record not resolved by then expires.
    pub expire_time: Option<i64>,
}

/// A user's tokens for one MCP source, sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    pub user_id: String,
    pub source_id: String,
    /// The MCP server URL the tokens were issued for: they are used for this URL only.
    pub server_url: String,
    /// Sealed JSON of the tokens (access, refresh, token endpoint, client): base64 text.
    pub sealed: String,
    /// When the access token expires (ms since the epoch), if the server said.
    pub expires_at: Option<i64>,
    /// Last write (ms); also the TTL's clock.
    pub updated: i64,
}

/// A consent in progress: the `state` sent to the authorization server, hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentRow {
    /// Hex SHA-256 of the state (the state itself is never stored).
    pub state_hash: String,
    pub user_id: String,
    pub agent_id: String,
    pub source_id: String,
    /// The deferred record the consent resolves ("" when none).
    pub deferred_id: String,
    /// Sealed JSON: PKCE verifier, client, token endpoint, redirect URI, resource, server URL.
    pub sealed: String,
    pub create_time: i64,
    pub expire_time: i64,
}

/// A client registered with an authorization server (dynamic client registration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClientRow {
    pub issuer: String,
    pub redirect_uri: String,
    pub client_id: String,
    /// Sealed client secret ("" for a public client).
    pub sealed_secret: String,
    pub create_time: i64,
}

/// Outcome of claiming a tool call id. `fingerprint` is the claim's (`None` for rows written
/// before fingerprints were kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// First time: the caller executes.
    New,
    /// Another caller is executing it (claimed at `since`, its lease running until
    /// `lease_until`, unix ms).
    Running { since: i64, lease_until: i64, fingerprint: Option<String> },
    /// Done: the stored outcome.
    Done { outcome: String, fingerprint: Option<String> },
}

/// Outcome of moving a deferred record out of `pending`.
#[allow(clippy::large_enum_variant)] // returned once per resolution; the row is needed whole
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    Moved,
    /// Not pending: the row as it is.
    Already(DeferredRow),
    Missing,
}

#[derive(Clone, Debug)]
pub struct Store {
    backend: Backend,
    /// Writes the claims and outcomes of tool calls in batches (PostgreSQL: a round trip
    /// each would cost more than the statement; SQLite writes them on the calling thread).
    calls: Option<CallWriter>,
}

#[derive(Clone, Debug)]
enum Backend {
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::PgStore),
}

/// Calls the same method on whichever backend this store uses.
macro_rules! dispatch {
    ($self:ident . $method:ident ( $($arg:expr),* $(,)? )) => {
        match &$self.backend {
            Backend::Sqlite(s) => s.$method($($arg),*).await,
            Backend::Postgres(p) => p.$method($($arg),*).await,
        }
    };
}

impl Store {
    /// Opens (and creates) the store named by `url` and applies the schema.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite(sqlite::SqliteStore::open(url).await?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres(postgres::PgStore::open(url).await?)
        } else {
            return Err(StoreError::BadUrl(redact_url(url)));
        };
        let calls = match &backend {
            Backend::Postgres(p) => Some(CallWriter::start(p.clone())),
            Backend::Sqlite(_) => None,
        };
        Ok(Store { backend, calls })
    }

    /// Holds the SQLite writer until the returned guard is dropped (tests of queued writes).
    #[cfg(test)]
    pub(crate) async fn hold_sqlite_writer(&self) -> Box<dyn Send + '_> {
        match &self.backend {
            Backend::Sqlite(s) => s.hold_writer().await,
            Backend::Postgres(_) => panic!("a SQLite store was expected"),
        }
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Is the store reachable?
    pub async fn ping(&self) -> Result<(), StoreError> {
        let _timer = store_timer("ping");
        dispatch!(self.ping())
    }

    // ----- agent definitions -----

    /// Creates the next version, or returns the latest one when its definition is
    /// byte-identical (then `created` is false). One transaction: a crash leaves either the
    /// old state or the new version.
    pub async fn create_version(
        &self,
        tenant: &str,
        agent_id: &str,
        definition: &str,
        make_default: bool,
        now: i64,
    ) -> Result<(VersionRecord, bool), StoreError> {
        let _timer = store_timer("create_version");
        dispatch!(self.create_version(tenant, agent_id, definition, make_default, now))
    }

    /// The version asked for (`None` = the default one).
    pub async fn get_version(&self, tenant: &str, agent_id: &str, version: Option<u32>) -> Result<Option<VersionRecord>, StoreError> {
        let _timer = store_timer("get_version");
        dispatch!(self.get_version(tenant, agent_id, version))
    }

    /// The default version number of an agent, if the agent exists.
    pub async fn default_version(&self, tenant: &str, agent_id: &str) -> Result<Option<u32>, StoreError> {
        let _timer = store_timer("default_version");
        dispatch!(self.default_version(tenant, agent_id))
    }

    /// Agents with an id after `after` (byte order), ascending.
    pub async fn list_agents(&self, tenant: &str, after: &str, limit: u32) -> Result<Vec<AgentRecord>, StoreError> {
        let _timer = store_timer("list_agents");
        dispatch!(self.list_agents(tenant, after, limit))
    }

    /// Versions after `after`, ascending; `None` if the agent does not exist.
    pub async fn list_versions(&self, tenant: &str, agent_id: &str, after: u32, limit: u32) -> Result<Option<Vec<VersionRecord>>, StoreError> {
        let _timer = store_timer("list_versions");
        dispatch!(self.list_versions(tenant, agent_id, after, limit))
    }

    /// Moves the default pointer; `None` if the agent or version does not exist.
    pub async fn set_default(&self, tenant: &str, agent_id: &str, version: u32, now: i64) -> Result<Option<VersionRecord>, StoreError> {
        let _timer = store_timer("set_default");
        dispatch!(self.set_default(tenant, agent_id, version, now))
    }

    /// Deletes an agent, its versions and runs; false if it did not exist.
    pub async fn delete_agent(&self, tenant: &str, agent_id: &str) -> Result<bool, StoreError> {
        let _timer = store_timer("delete_agent");
        dispatch!(self.delete_agent(tenant, agent_id))
    }

    // ----- runs -----

    /// The version a run is pinned to, pinning `version` if the run is new or expired
    /// (idle since before `expired_before`).
    pub async fn pin_run(&self, tenant: &str, agent_id: &str, run_id: &str, version: u32, now: i64, expired_before: i64) -> Result<u32, StoreError> {
        let _timer = store_timer("pin_run");
        dispatch!(self.pin_run(tenant, agent_id, run_id, version, now, expired_before))
    }

    /// The version a live run is pinned to.
    pub async fn run_version(&self, tenant: &str, agent_id: &str, run_id: &str, expired_before: i64) -> Result<Option<u32>, StoreError> {
        let _timer = store_timer("run_version");
        dispatch!(self.run_version(tenant, agent_id, run_id, expired_before))
    }

    /// Runs of a tenant across its agents (for the per-tenant run limit): a counter kept with
    /// the runs, read in O(1). Runs idle past their expiry count until the sweeper forgets them.
    pub async fn live_runs(&self, tenant: &str) -> Result<u64, StoreError> {
        let _timer = store_timer("live_runs");
        dispatch!(self.live_runs(tenant))
    }

    /// The hot tools frozen for a run at its first `GetModelTools`, if any.
    pub async fn run_hot(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<Option<String>, StoreError> {
        let _timer = store_timer("run_hot");
        dispatch!(self.run_hot(tenant, agent_id, run_id))
    }

    /// Freezes a run's hot tools unless another request did first; returns the frozen ones
    /// (`None` if the run is gone).
    pub async fn freeze_run_hot(&self, tenant: &str, agent_id: &str, run_id: &str, hot: &str) -> Result<Option<String>, StoreError> {
        let _timer = store_timer("freeze_run_hot");
        dispatch!(self.freeze_run_hot(tenant, agent_id, run_id, hot))
    }

    pub async fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<bool, StoreError> {
        let _timer = store_timer("end_run");
        dispatch!(self.end_run(tenant, agent_id, run_id))
    }

    /// Forgets at most `limit` runs idle since before `expired_before`; returns how many.
    pub async fn expire_runs(&self, expired_before: i64, limit: u32) -> Result<u64, StoreError> {
        let _timer = store_timer("expire_runs");
        dispatch!(self.expire_runs(expired_before, limit))
    }

    // ----- tool-call idempotency -----

    /// Claims a tool call for execution under a lease, or reports who has it.
    pub async fn claim_call(&self, key: &CallKey, req: &ClaimRequest) -> Result<Claim, StoreError> {
        let _timer = store_timer("claim_call");
        match &self.calls {
            Some(calls) => calls.claim(key.clone(), req.clone()).await,
            None => dispatch!(self.claim_call(key, req)),
        }
    }

    pub async fn call_state(&self, key: &CallKey) -> Result<Option<Claim>, StoreError> {
        let _timer = store_timer("call_state");
        dispatch!(self.call_state(key))
    }

    /// Stores the outcome of a claimed call (only once).
    pub async fn finish_call(&self, key: &CallKey, outcome: &str, now: i64) -> Result<(), StoreError> {
        let _timer = store_timer("finish_call");
        match &self.calls {
            Some(calls) => calls.finish(key.clone(), outcome.to_string(), now).await,
            None => dispatch!(self.finish_call(key, outcome, now)),
        }
    }

    /// Drops an unfinished claim, so the call can run again.
    pub async fn release_call(&self, key: &CallKey) -> Result<(), StoreError> {
        let _timer = store_timer("release_call");
        dispatch!(self.release_call(key))
    }

    /// Extends the leases of `owner`'s unfinished claims among `keys` to `lease_until`.
    pub async fn renew_calls(&self, owner: &str, keys: &[CallKey], lease_until: i64) -> Result<u64, StoreError> {
        let _timer = store_timer("renew_calls");
        dispatch!(self.renew_calls(owner, keys, lease_until))
    }

    /// Gives an unfinished claim `outcome` (the uncertain one): only once its lease ran out
    /// before `lease_before` (its owner is gone), or whatever the lease when `None` (the
    /// owner itself gives up). Returns whether it did.
    pub async fn expire_call(&self, key: &CallKey, outcome: &str, now: i64, lease_before: Option<i64>) -> Result<bool, StoreError> {
        let _timer = store_timer("expire_call");
        dispatch!(self.expire_call(key, outcome, now, lease_before))
    }

    // ----- deferred records -----

    pub async fn insert_deferred(&self, tenant: &str, row: &DeferredRow) -> Result<(), StoreError> {
        let _timer = store_timer("insert_deferred");
        dispatch!(self.insert_deferred(tenant, row))
    }

    pub async fn get_deferred(&self, tenant: &str, id: &str) -> Result<Option<DeferredRow>, StoreError> {
        let _timer = store_timer("get_deferred");
        dispatch!(self.get_deferred(tenant, id))
    }

    /// Moves a pending, unexpired record to `executing` with `resolution`, held by `lease`,
    /// only if it is still pending.
    pub async fn transition_deferred(&self, tenant: &str, id: &str, resolution: &str, now: i64, lease: Lease<'_>) -> Result<Transition, StoreError> {
        let _timer = store_timer("transition_deferred");
        dispatch!(self.transition_deferred(tenant, id, resolution, now, lease))
    }

    /// Extends the leases of `owner`'s executing records among `ids` (tenant, id).
    pub async fn renew_deferred(&self, owner: &str, ids: &[(String, String)], lease_until: i64) -> Result<u64, StoreError> {
        let _timer = store_timer("renew_deferred");
        dispatch!(self.renew_deferred(owner, ids, lease_until))
    }

    /// Records the result of a resolution and marks the record resolved, if it is still
    /// executing (the first result wins) and, with `lease_before`, only if its holder's lease
    /// ran out before then (the holder is gone); returns whether it did.
    pub async fn complete_deferred(&self, tenant: &str, id: &str, result: &str, now: i64, lease_before: Option<i64>) -> Result<bool, StoreError> {
        let _timer = store_timer("complete_deferred");
        dispatch!(self.complete_deferred(tenant, id, result, now, lease_before))
    }

    /// Marks at most `limit` pending records whose expiry passed as `expired`; returns how many.
    pub async fn expire_deferred(&self, now: i64, limit: u32) -> Result<u64, StoreError> {
        let _timer = store_timer("expire_deferred");
        dispatch!(self.expire_deferred(now, limit))
    }

    /// Turns a pending, unresolved record into one the client executes: stores its new
    /// `record` and the approving `resolution`; it stays pending.
    pub async fn hand_to_client(&self, tenant: &str, id: &str, record: &str, resolution: &str) -> Result<Transition, StoreError> {
        let _timer = store_timer("hand_to_client");
        dispatch!(self.hand_to_client(tenant, id, record, resolution))
    }

    /// Records of an agent (and run / state: `pending`, `executing` or `resolved`), oldest
    /// first, after the `(create_time, id)` cursor.
    pub async fn list_deferred(
        &self,
        tenant: &str,
        agent_id: &str,
        run_id: Option<&str>,
        state: Option<&str>,
        after: (i64, &str),
        limit: u32,
    ) -> Result<Vec<DeferredRow>, StoreError> {
        let _timer = store_timer("list_deferred");
        dispatch!(self.list_deferred(tenant, agent_id, run_id, state, after, limit))
    }

    /// Number of pending deferred records (all tenants), for metrics.
    pub async fn count_pending(&self) -> Result<u64, StoreError> {
        let _timer = store_timer("count_pending");
        dispatch!(self.count_pending())
    }

    // ----- per-user OAuth tokens, consents and registered clients -----

    /// Inserts or replaces the row of (tenant, user_id, source_id).
    pub async fn put_token(&self, tenant: &str, row: &TokenRow) -> Result<(), StoreError> {
        let _timer = store_timer("put_token");
        dispatch!(self.put_token(tenant, row))
    }

    pub async fn get_token(&self, tenant: &str, user_id: &str, source_id: &str) -> Result<Option<TokenRow>, StoreError> {
        let _timer = store_timer("get_token");
        dispatch!(self.get_token(tenant, user_id, source_id))
    }

    /// Replaces the row only if its `updated` is still `expected_updated` (a refresh that raced
    /// another replica's loses; so does one whose row was deleted meanwhile: nothing is
    /// re-created). True when replaced. `row.updated` should differ from `expected_updated`
    /// (a later time), or a second refresh holding the same expectation would also win.
    pub async fn replace_token(&self, tenant: &str, row: &TokenRow, expected_updated: i64) -> Result<bool, StoreError> {
        let _timer = store_timer("replace_token");
        dispatch!(self.replace_token(tenant, row, expected_updated))
    }

    /// Deletes a user's tokens for one source, or for every source (None). Returns how many.
    pub async fn delete_tokens(&self, tenant: &str, user_id: &str, source_id: Option<&str>) -> Result<u64, StoreError> {
        let _timer = store_timer("delete_tokens");
        dispatch!(self.delete_tokens(tenant, user_id, source_id))
    }

    /// Stores a consent in progress (its state hash is unique: a second insert of it fails).
    pub async fn insert_consent(&self, tenant: &str, row: &ConsentRow) -> Result<(), StoreError> {
        let _timer = store_timer("insert_consent");
        dispatch!(self.insert_consent(tenant, row))
    }

    /// Single use: deletes the row as it reads it (DELETE ... RETURNING): of concurrent takers
    /// exactly one gets it. Returns (tenant, row), also when expired (the caller checks
    /// expire_time and refuses).
    pub async fn take_consent(&self, state_hash: &str) -> Result<Option<(String, ConsentRow)>, StoreError> {
        let _timer = store_timer("take_consent");
        dispatch!(self.take_consent(state_hash))
    }

    pub async fn get_oauth_client(&self, tenant: &str, issuer: &str, redirect_uri: &str) -> Result<Option<OAuthClientRow>, StoreError> {
        let _timer = store_timer("get_oauth_client");
        dispatch!(self.get_oauth_client(tenant, issuer, redirect_uri))
    }

    /// Keeps the first registration: inserts unless one exists; returns the stored row.
    pub async fn put_oauth_client(&self, tenant: &str, row: &OAuthClientRow) -> Result<OAuthClientRow, StoreError> {
        let _timer = store_timer("put_oauth_client");
        dispatch!(self.put_oauth_client(tenant, row))
    }

    // ----- text embeddings (hybrid search) -----

    /// The stored embeddings of `model` for the texts whose hex SHA-256 are `hashes`, in the
    /// order of `hashes`: `None` where absent, or where the stored blob is not `4 * dims`
    /// bytes long (such a row is overwritten by the next [`Store::put_embeddings`] of it).
    /// Reads 500 hashes per statement (`EMBEDDING_CHUNK`). Rows found whose `used_at` is more
    /// than a day before `now` get `used_at = now`, so the rows of a live catalog outlive
    /// [`Store::purge_embeddings`] at the cost of at most one write per row per day; a failed
    /// touch is logged, not returned (the vectors were read; the next read touches again).
    pub async fn get_embeddings(&self, model: &str, hashes: &[String], now: i64) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let _timer = store_timer("get_embeddings");
        dispatch!(self.get_embeddings(model, hashes, now))
    }

    /// Stores embeddings of `model`: (hex SHA-256 of the text, vector) with `used_at = now`.
    /// The first writer of a (model, hash) wins (`ON CONFLICT DO NOTHING`, except that a
    /// stored blob of the wrong length is replaced); one transaction per 500 rows
    /// (`EMBEDDING_CHUNK`). Empty `rows` write nothing.
    pub async fn put_embeddings(&self, model: &str, rows: &[(String, Vec<f32>)], now: i64) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let _timer = store_timer("put_embeddings");
        dispatch!(self.put_embeddings(model, rows, now))
    }

    // ----- retention -----

    /// Deletes at most `limit` rows of each kind older than the cut-off: finished tool-call
    /// records (and claims abandoned that long ago) and resolved or expired deferred records.
    /// The embedded store then checkpoints and truncates its WAL when it deleted anything.
    pub async fn purge(&self, before: i64, limit: u32) -> Result<Purged, StoreError> {
        let _timer = store_timer("purge");
        dispatch!(self.purge(before, limit))
    }

    /// Deletes at most `limit` consents whose `expire_time` is before `now` and at most
    /// `limit` tokens last written before `tokens_updated_before` (every tenant); returns
    /// (consents, tokens). Called from the retention sweeper like [`Store::purge`], in batches
    /// until fewer than `limit` go.
    pub async fn purge_oauth(&self, now: i64, tokens_updated_before: i64, limit: u32) -> Result<(u64, u64), StoreError> {
        let _timer = store_timer("purge_oauth");
        dispatch!(self.purge_oauth(now, tokens_updated_before, limit))
    }

    /// Deletes at most `limit` embeddings (every model) whose `used_at` is before
    /// `used_before`; returns how many. Called from the retention sweeper like
    /// [`Store::purge`], in batches until fewer than `limit` go.
    pub async fn purge_embeddings(&self, used_before: i64, limit: u32) -> Result<u64, StoreError> {
        let _timer = store_timer("purge_embeddings");
        dispatch!(self.purge_embeddings(used_before, limit))
    }

    // ----- auto-pin usage -----

    /// Adds one successful call to a decayed count (`half_life_ms`).
    pub async fn record_use(&self, tenant: &str, agent_id: &str, user: &str, tool: &str, now: i64, half_life_ms: i64) -> Result<(), StoreError> {
        let _timer = store_timer("record_use");
        dispatch!(self.record_use(tenant, agent_id, user, tool, now, half_life_ms))
    }

    /// Decayed counts of a user's tools at `now`, highest first.
    pub async fn usage(&self, tenant: &str, agent_id: &str, user: &str, now: i64, half_life_ms: i64) -> Result<Vec<(String, f64)>, StoreError> {
        let _timer = store_timer("usage");
        dispatch!(self.usage(tenant, agent_id, user, now, half_life_ms))
    }
}

/// Hashes (or rows) of embeddings per statement: a catalog version can have 100k tools.
const EMBEDDING_CHUNK: usize = 500;

/// A read moves an embedding's `used_at` forward once it is older than this (a day).
const EMBEDDING_TOUCH_AFTER_MS: i64 = 86_400_000;

/// The stored form of a vector: its f32s, little-endian.
fn vector_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The vector of a stored blob, bit for bit; `None` unless the blob is `4 * dims` bytes long.
fn vector_from_bytes(dims: i64, bytes: &[u8]) -> Option<Vec<f32>> {
    if dims < 0 || (dims as u64).checked_mul(4) != Some(bytes.len() as u64) {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

/// `score` halved every `half_life_ms` since `then`.
pub fn decay(score: f64, then: i64, now: i64, half_life_ms: i64) -> f64 {
    let age = (now - then).max(0) as f64;
    score * 0.5f64.powf(age / half_life_ms.max(1) as f64)
}

/// A store URL fit for logs and errors: the password (in the user info or a `password=`
/// parameter) replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?']).map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@').map(|i| rest + i)
            && let Some(colon) = out[rest..at].find(':').map(|i| rest + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}
