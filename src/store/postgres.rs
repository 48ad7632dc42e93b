//! This file is long because it holds every store statement of the PostgreSQL backend,
//! written out side by side with `sqlite.rs` so the two change together.
//!
//! The PostgreSQL backend: one database shared by several replicas. Same methods and
//! behaviour as the SQLite backend (sqlite.rs), written side by side: `$n` placeholders,
//! BIGINT columns, byte-order (`COLLATE "C"`) keys. Where SQLite relies on `BEGIN IMMEDIATE`
//! serialising writers, this backend locks the row it reads (`SELECT … FOR UPDATE`), uses a
//! conditional `UPDATE … WHERE state = 'pending'`, or does the read-modify-write in one
//! `INSERT … ON CONFLICT … DO UPDATE` statement; every multi-statement write is one
//! transaction (default READ COMMITTED isolation).
//!
//! Connections are plain TCP: no TLS backend is compiled in (`sslmode=prefer`, the default,
//! falls back to plain; `sslmode=require` fails at start-up with a clear error).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::{Connection, Row};

use super::sqlite::LEGACY_LEASE_MS;
use super::{
    AgentRecord, CallKey, Claim, ClaimRequest, ConsentRow, DeferredRow, EMBEDDING_CHUNK, EMBEDDING_TOUCH_AFTER_MS, Lease, OAuthClientRow, Purged,
    StoreError, TokenRow, Transition, VersionRecord, decay, vector_from_bytes, vector_to_bytes,
};

const SCHEMA: &str = include_str!("schema_postgres.sql");

/// Key of the advisory lock held while migrating (any constant unique to toolrouter).
const MIGRATION_LOCK: i64 = 0x746f_6f6c_726f_7574; // "toolrout"

/// How long start-up waits for the server, and a request for a pooled connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_CONNECTIONS: u32 = 16;

#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to the database named by `url` and applies the pending migrations.
    pub async fn open(url: &str) -> Result<PgStore, StoreError> {
        let mut opts = PgConnectOptions::from_str(url).map_err(|_| StoreError::BadUrl(super::redact_url(url)))?;
        if opts.get_application_name().is_none() {
            opts = opts.application_name("toolrouter");
        }
        let target =
            format!("{}:{}/{} (user {})", opts.get_host(), opts.get_port(), opts.get_database().unwrap_or(opts.get_username()), opts.get_username());
        // One direct connection first: an unreachable server, a wrong password or a missing
        // database is reported at once with its cause, not as a pool timeout after retries.
        let mut conn = match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&opts)).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(StoreError::Unreachable { target, reason: e.to_string() }),
            Err(_) => return Err(StoreError::Unreachable { target, reason: format!("no answer within {CONNECT_TIMEOUT:?}") }),
        };
        migrate(&mut conn).await?;
        let _ = conn.close().await;
        // Room for the batched call statements (one text per batch size) besides the others.
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .min_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(opts.statement_cache_capacity(2 * super::calls::MAX_BATCH + 100))
            .await?;
        Ok(PgStore { pool })
    }

    /// Is the store reachable?
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    // ----- agent definitions -----

    /// Creates the next version, or returns the latest one when its definition is
    /// byte-identical (then `created` is false). One transaction; the agent row, created
    /// first if missing, is locked so that concurrent creates of one agent take turns.
    pub async fn create_version(
        &self,
        tenant: &str,
        agent_id: &str,
        definition: &str,
        make_default: bool,
        now: i64,
    ) -> Result<(VersionRecord, bool), StoreError> {
        let mut tx = self.pool.begin().await?;
        // A new agent starts at version 0 (never committed as such: a version follows in
        // this transaction). A concurrent insert waits here for this one to finish.
        sqlx::query(
            "INSERT INTO agents (tenant, agent_id, default_version, latest_version, create_time, update_time) VALUES ($1, $2, 0, 0, $3, $3) \
             ON CONFLICT (tenant, agent_id) DO NOTHING",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let agent = sqlx::query("SELECT default_version, latest_version FROM agents WHERE tenant = $1 AND agent_id = $2 FOR UPDATE")
            .bind(tenant)
            .bind(agent_id)
            .fetch_one(&mut *tx)
            .await?;
        let (default, latest) = (agent.get::<i64, _>(0) as u32, agent.get::<i64, _>(1) as u32);
        if latest > 0 {
            let row = sqlx::query("SELECT definition, create_time FROM agent_versions WHERE tenant = $1 AND agent_id = $2 AND version = $3")
                .bind(tenant)
                .bind(agent_id)
                .bind(latest as i64)
                .fetch_one(&mut *tx)
                .await?;
            let existing: String = row.get(0);
            if existing == definition {
                let mut is_default = default == latest;
                if make_default && !is_default {
                    set_default_tx(&mut tx, tenant, agent_id, latest, now).await?;
                    is_default = true;
                }
                tx.commit().await?;
                let rec = VersionRecord { agent_id: agent_id.into(), version: latest, is_default, definition: existing, create_time: row.get(1) };
                return Ok((rec, false));
            }
        }
        let version = latest + 1;
        sqlx::query("INSERT INTO agent_versions (tenant, agent_id, version, definition, create_time) VALUES ($1, $2, $3, $4, $5)")
            .bind(tenant)
            .bind(agent_id)
            .bind(version as i64)
            .bind(definition)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let is_default = make_default || latest == 0;
        let new_default = if is_default { version } else { default };
        sqlx::query("UPDATE agents SET default_version = $1, latest_version = $2, update_time = $3 WHERE tenant = $4 AND agent_id = $5")
            .bind(new_default as i64)
            .bind(version as i64)
            .bind(now)
            .bind(tenant)
            .bind(agent_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        let rec = VersionRecord { agent_id: agent_id.into(), version, is_default, definition: definition.into(), create_time: now };
        Ok((rec, true))
    }

    /// The version asked for (`None` = the default one).
    pub async fn get_version(&self, tenant: &str, agent_id: &str, version: Option<u32>) -> Result<Option<VersionRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT v.version, v.definition, v.create_time, a.default_version FROM agents a \
             JOIN agent_versions v ON v.tenant = a.tenant AND v.agent_id = a.agent_id \
             WHERE a.tenant = $1 AND a.agent_id = $2 AND v.version = COALESCE($3::BIGINT, a.default_version)",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(version.map(|v| v as i64))
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| version_from_row(agent_id, &r)))
    }

    /// The default version number of an agent, if the agent exists.
    pub async fn default_version(&self, tenant: &str, agent_id: &str) -> Result<Option<u32>, StoreError> {
        let row = sqlx::query("SELECT default_version FROM agents WHERE tenant = $1 AND agent_id = $2")
            .bind(tenant)
            .bind(agent_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.get::<i64, _>(0) as u32))
    }

    pub async fn list_agents(&self, tenant: &str, after: &str, limit: u32) -> Result<Vec<AgentRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT agent_id, default_version, latest_version, create_time, update_time FROM agents \
             WHERE tenant = $1 AND agent_id > $2 ORDER BY agent_id LIMIT $3",
        )
        .bind(tenant)
        .bind(after)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| AgentRecord {
                agent_id: r.get(0),
                default_version: r.get::<i64, _>(1) as u32,
                latest_version: r.get::<i64, _>(2) as u32,
                create_time: r.get(3),
                update_time: r.get(4),
            })
            .collect())
    }

    /// Versions after `after`, ascending; `None` if the agent does not exist.
    pub async fn list_versions(&self, tenant: &str, agent_id: &str, after: u32, limit: u32) -> Result<Option<Vec<VersionRecord>>, StoreError> {
        if self.default_version(tenant, agent_id).await?.is_none() {
            return Ok(None);
        }
        let rows = sqlx::query(
            "SELECT v.version, v.definition, v.create_time, a.default_version FROM agent_versions v \
             JOIN agents a ON v.tenant = a.tenant AND v.agent_id = a.agent_id \
             WHERE v.tenant = $1 AND v.agent_id = $2 AND v.version > $3 ORDER BY v.version LIMIT $4",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(after as i64)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some(rows.iter().map(|r| version_from_row(agent_id, r)).collect()))
    }

    /// Moves the default pointer; `None` if the agent or version does not exist.
    pub async fn set_default(&self, tenant: &str, agent_id: &str, version: u32, now: i64) -> Result<Option<VersionRecord>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query("SELECT definition, create_time FROM agent_versions WHERE tenant = $1 AND agent_id = $2 AND version = $3")
            .bind(tenant)
            .bind(agent_id)
            .bind(version as i64)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let moved = set_default_tx(&mut tx, tenant, agent_id, version, now).await?;
        if !moved {
            // The agent was deleted meanwhile.
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(VersionRecord { agent_id: agent_id.into(), version, is_default: true, definition: row.get(0), create_time: row.get(1) }))
    }

    /// Deletes an agent, its versions and runs; false if it did not exist.
    pub async fn delete_agent(&self, tenant: &str, agent_id: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("DELETE FROM agents WHERE tenant = $1 AND agent_id = $2")
            .bind(tenant)
            .bind(agent_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let runs =
            sqlx::query("DELETE FROM runs WHERE tenant = $1 AND agent_id = $2").bind(tenant).bind(agent_id).execute(&mut *tx).await?.rows_affected();
        count_runs(&mut tx, tenant, -(runs as i64)).await?;
        for table in ["agent_versions", "tool_usage"] {
            sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {table} WHERE tenant = $1 AND agent_id = $2")))
                .bind(tenant)
                .bind(agent_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    // ----- runs -----

    /// The version a run is pinned to, pinning `version` if the run is new or expired
    /// (idle since before `expired_before`; its frozen hot tools are then forgotten too). One
    /// statement: concurrent first calls of a run (on any replica) agree on one version, and a
    /// new run (`xmax = 0`: inserted, not updated) counts in its tenant's runs.
    pub async fn pin_run(&self, tenant: &str, agent_id: &str, run_id: &str, version: u32, now: i64, expired_before: i64) -> Result<u32, StoreError> {
        let row = sqlx::query(
            "WITH up AS (\
               INSERT INTO runs (tenant, agent_id, run_id, version, last_seen) VALUES ($1, $2, $3, $4, $5) \
               ON CONFLICT (tenant, agent_id, run_id) DO UPDATE SET \
               version = CASE WHEN runs.last_seen < $6 THEN EXCLUDED.version ELSE runs.version END, \
               hot = CASE WHEN runs.last_seen < $6 THEN NULL ELSE runs.hot END, \
               last_seen = EXCLUDED.last_seen \
               RETURNING version, (xmax = 0) AS inserted), \
             counted AS (\
               INSERT INTO tenant_runs (tenant, runs) SELECT $1, 1 FROM up WHERE inserted \
               ON CONFLICT (tenant) DO UPDATE SET runs = tenant_runs.runs + 1) \
             SELECT version FROM up",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(run_id)
        .bind(version as i64)
        .bind(now)
        .bind(expired_before)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.get::<i64, _>(0) as u32)
    }

    /// The version a live run is pinned to.
    pub async fn run_version(&self, tenant: &str, agent_id: &str, run_id: &str, expired_before: i64) -> Result<Option<u32>, StoreError> {
        let row = sqlx::query("SELECT version FROM runs WHERE tenant = $1 AND agent_id = $2 AND run_id = $3 AND last_seen >= $4")
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .bind(expired_before)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.get::<i64, _>(0) as u32))
    }

    /// Runs of a tenant (all agents): the counter kept with them.
    pub async fn live_runs(&self, tenant: &str) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT runs FROM tenant_runs WHERE tenant = $1").bind(tenant).fetch_optional(&self.pool).await?;
        Ok(row.map_or(0, |r| r.get::<i64, _>(0).max(0) as u64))
    }

    pub async fn run_hot(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT hot FROM runs WHERE tenant = $1 AND agent_id = $2 AND run_id = $3")
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.and_then(|r| r.get::<Option<String>, _>(0)))
    }

    pub async fn freeze_run_hot(&self, tenant: &str, agent_id: &str, run_id: &str, hot: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("UPDATE runs SET hot = COALESCE(hot, $1) WHERE tenant = $2 AND agent_id = $3 AND run_id = $4 RETURNING hot")
            .bind(hot)
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.and_then(|r| r.get::<Option<String>, _>(0)))
    }

    pub async fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("DELETE FROM runs WHERE tenant = $1 AND agent_id = $2 AND run_id = $3")
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        count_runs(&mut tx, tenant, -(n as i64)).await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    /// Forgets at most `limit` runs idle since before `expired_before`; returns how many.
    pub async fn expire_runs(&self, expired_before: i64, limit: u32) -> Result<u64, StoreError> {
        let row = sqlx::query(
            "WITH gone AS (DELETE FROM runs WHERE ctid IN (SELECT ctid FROM runs WHERE last_seen < $1 LIMIT $2) RETURNING tenant), \
             per AS (SELECT tenant, COUNT(*) AS n FROM gone GROUP BY tenant), \
             counted AS (UPDATE tenant_runs t SET runs = GREATEST(t.runs - per.n, 0) FROM per WHERE t.tenant = per.tenant) \
             SELECT COALESCE(SUM(n), 0)::BIGINT FROM per",
        )
        .bind(expired_before)
        .bind(limit as i64)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.get::<i64, _>(0) as u64)
    }

    // ----- tool-call idempotency -----

    /// Claims a tool call for execution under a lease, or reports who has it. The primary
    /// key decides between replicas: a concurrent insert waits for the first to commit.
    pub async fn claim_call(&self, k: &CallKey, req: &ClaimRequest) -> Result<Claim, StoreError> {
        for _ in 0..8 {
            let inserted = sqlx::query(
                "INSERT INTO tool_calls (tenant, agent_id, run_id, tool_call_id, outcome, update_time, owner, lease_until, fingerprint) \
                 VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8) ON CONFLICT (tenant, agent_id, run_id, tool_call_id) DO NOTHING",
            )
            .bind(&k.tenant)
            .bind(&k.agent_id)
            .bind(&k.run_id)
            .bind(&k.call_id)
            .bind(req.now)
            .bind(&req.owner)
            .bind(req.lease_until)
            .bind(&req.fingerprint)
            .execute(&self.pool)
            .await?
            .rows_affected();
            if inserted == 1 {
                return Ok(Claim::New);
            }
            // Gone again (its holder released it between the two statements): claim anew.
            if let Some(claim) = self.call_state(k).await? {
                return Ok(claim);
            }
        }
        // Claimed and released over and over: report it busy; the caller asks again.
        Ok(Claim::Running { since: req.now, lease_until: req.lease_until, fingerprint: None })
    }

    pub async fn call_state(&self, k: &CallKey) -> Result<Option<Claim>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT outcome, update_time, COALESCE(lease_until, update_time + {LEGACY_LEASE_MS}), fingerprint FROM tool_calls \
             WHERE tenant = $1 AND agent_id = $2 AND run_id = $3 AND tool_call_id = $4"
        )))
        .bind(&k.tenant)
        .bind(&k.agent_id)
        .bind(&k.run_id)
        .bind(&k.call_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| {
            let fingerprint = r.get(3);
            match r.get::<Option<String>, _>(0) {
                Some(outcome) => Claim::Done { outcome, fingerprint },
                None => Claim::Running { since: r.get(1), lease_until: r.get(2), fingerprint },
            }
        }))
    }

    /// Stores the outcome of a claimed call (only once).
    pub async fn finish_call(&self, k: &CallKey, outcome: &str, now: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE tool_calls SET outcome = $1, update_time = $2 \
             WHERE tenant = $3 AND agent_id = $4 AND run_id = $5 AND tool_call_id = $6 AND outcome IS NULL",
        )
        .bind(outcome)
        .bind(now)
        .bind(&k.tenant)
        .bind(&k.agent_id)
        .bind(&k.run_id)
        .bind(&k.call_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Claims many calls at once; returns the keys it inserted (a key twice in `rows` is
    /// inserted once).
    pub(super) async fn insert_claims(&self, rows: &[(&CallKey, &ClaimRequest)]) -> Result<Vec<CallKey>, StoreError> {
        let values: Vec<String> = (0..rows.len())
            .map(|i| {
                let n = i * 8;
                format!("(${}, ${}, ${}, ${}, NULL, ${}, ${}, ${}, ${})", n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 7, n + 8)
            })
            .collect();
        let sql = format!(
            "INSERT INTO tool_calls (tenant, agent_id, run_id, tool_call_id, outcome, update_time, owner, lease_until, fingerprint) VALUES {} \
             ON CONFLICT (tenant, agent_id, run_id, tool_call_id) DO NOTHING RETURNING tenant, agent_id, run_id, tool_call_id",
            values.join(", ")
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (k, req) in rows {
            q = q
                .bind(&k.tenant)
                .bind(&k.agent_id)
                .bind(&k.run_id)
                .bind(&k.call_id)
                .bind(req.now)
                .bind(&req.owner)
                .bind(req.lease_until)
                .bind(&req.fingerprint);
        }
        let inserted = q.fetch_all(&self.pool).await?;
        Ok(inserted.iter().map(|r| CallKey { tenant: r.get(0), agent_id: r.get(1), run_id: r.get(2), call_id: r.get(3) }).collect())
    }

    /// Stores the outcomes of many claimed calls (each only once, distinct keys).
    pub(super) async fn finish_calls(&self, rows: &[(&CallKey, &str, i64)]) -> Result<(), StoreError> {
        let values: Vec<String> = (0..rows.len())
            .map(|i| {
                let n = i * 6;
                format!("(${}, ${}, ${}, ${}, ${}, ${})", n + 1, n + 2, n + 3, n + 4, n + 5, n + 6)
            })
            .collect();
        let sql = format!(
            "WITH v (tenant, agent_id, run_id, tool_call_id, outcome, update_time) AS (VALUES {}) \
             UPDATE tool_calls t SET outcome = v.outcome, update_time = v.update_time FROM v \
             WHERE t.tenant = v.tenant AND t.agent_id = v.agent_id AND t.run_id = v.run_id \
             AND t.tool_call_id = v.tool_call_id AND t.outcome IS NULL",
            values.join(", ")
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (k, outcome, now) in rows {
            q = q.bind(&k.tenant).bind(&k.agent_id).bind(&k.run_id).bind(&k.call_id).bind(*outcome).bind(*now);
        }
        q.execute(&self.pool).await?;
        Ok(())
    }

    /// Drops an unfinished claim, so the call can run again.
    pub async fn release_call(&self, k: &CallKey) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM tool_calls WHERE tenant = $1 AND agent_id = $2 AND run_id = $3 AND tool_call_id = $4 AND outcome IS NULL")
            .bind(&k.tenant)
            .bind(&k.agent_id)
            .bind(&k.run_id)
            .bind(&k.call_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Extends the leases of `owner`'s unfinished claims among `keys`: one statement.
    pub async fn renew_calls(&self, owner: &str, keys: &[CallKey], lease_until: i64) -> Result<u64, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let column = |f: fn(&CallKey) -> &String| keys.iter().map(|k| f(k).clone()).collect::<Vec<String>>();
        let n = sqlx::query(
            "UPDATE tool_calls t SET lease_until = $1 \
             FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[]) AS v (tenant, agent_id, run_id, tool_call_id) \
             WHERE t.tenant = v.tenant AND t.agent_id = v.agent_id AND t.run_id = v.run_id AND t.tool_call_id = v.tool_call_id \
             AND t.owner = $6 AND t.outcome IS NULL",
        )
        .bind(lease_until)
        .bind(column(|k| &k.tenant))
        .bind(column(|k| &k.agent_id))
        .bind(column(|k| &k.run_id))
        .bind(column(|k| &k.call_id))
        .bind(owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n)
    }

    /// Gives an unfinished claim its outcome: once its lease ran out before `lease_before`,
    /// or whatever the lease when `None`.
    pub async fn expire_call(&self, k: &CallKey, outcome: &str, now: i64, lease_before: Option<i64>) -> Result<bool, StoreError> {
        let n = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE tool_calls SET outcome = $1, update_time = $2 \
             WHERE tenant = $3 AND agent_id = $4 AND run_id = $5 AND tool_call_id = $6 AND outcome IS NULL \
             AND ($7::BIGINT IS NULL OR COALESCE(lease_until, update_time + {LEGACY_LEASE_MS}) < $7)"
        )))
        .bind(outcome)
        .bind(now)
        .bind(&k.tenant)
        .bind(&k.agent_id)
        .bind(&k.run_id)
        .bind(&k.call_id)
        .bind(lease_before)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    // ----- deferred records -----

    pub async fn insert_deferred(&self, tenant: &str, row: &DeferredRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO deferred (tenant, deferred_id, agent_id, version, run_id, state, record, resolution, result, create_time, resolve_time, \
             expire_time) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(tenant)
        .bind(&row.deferred_id)
        .bind(&row.agent_id)
        .bind(row.version as i64)
        .bind(&row.run_id)
        .bind(&row.state)
        .bind(&row.record)
        .bind(&row.resolution)
        .bind(&row.result)
        .bind(row.create_time)
        .bind(row.resolve_time)
        .bind(row.expire_time)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn get_deferred(&self, tenant: &str, id: &str) -> Result<Option<DeferredRow>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("{DEFERRED_SELECT} WHERE tenant = $1 AND deferred_id = $2")))
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(deferred_from_row))
    }

    /// Moves a pending, unexpired record to `executing` with `resolution` under `lease`,
    /// only if it is still pending. One conditional UPDATE: of two replicas resolving at
    /// once, the second waits for the first's row lock, re-checks `state = 'pending'` and
    /// moves nothing.
    pub async fn transition_deferred(&self, tenant: &str, id: &str, resolution: &str, now: i64, lease: Lease<'_>) -> Result<Transition, StoreError> {
        let n = sqlx::query(
            "UPDATE deferred SET state = 'executing', resolution = $1, resolve_time = $2, owner = $3, lease_until = $4 \
             WHERE tenant = $5 AND deferred_id = $6 AND state = 'pending' AND (expire_time IS NULL OR expire_time > $2)",
        )
        .bind(resolution)
        .bind(now)
        .bind(lease.owner)
        .bind(lease.until)
        .bind(tenant)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if n == 1 {
            return Ok(Transition::Moved);
        }
        Ok(match self.get_deferred(tenant, id).await? {
            Some(row) => Transition::Already(row),
            None => Transition::Missing,
        })
    }

    /// Extends the leases of `owner`'s executing records among `ids`: one statement.
    pub async fn renew_deferred(&self, owner: &str, ids: &[(String, String)], lease_until: i64) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let tenants: Vec<String> = ids.iter().map(|(t, _)| t.clone()).collect();
        let deferred: Vec<String> = ids.iter().map(|(_, d)| d.clone()).collect();
        let n = sqlx::query(
            "UPDATE deferred d SET lease_until = $1 FROM unnest($2::TEXT[], $3::TEXT[]) AS v (tenant, deferred_id) \
             WHERE d.tenant = v.tenant AND d.deferred_id = v.deferred_id AND d.owner = $4 AND d.state = 'executing'",
        )
        .bind(lease_until)
        .bind(tenants)
        .bind(deferred)
        .bind(owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n)
    }

    /// Records the result of a resolution and marks the record resolved, if it is still
    /// executing (the first result wins) and, with `lease_before`, its holder's lease ran out
    /// before then.
    pub async fn complete_deferred(&self, tenant: &str, id: &str, result: &str, now: i64, lease_before: Option<i64>) -> Result<bool, StoreError> {
        let n = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE deferred SET state = 'resolved', result = $1, resolve_time = $2, lease_until = NULL \
             WHERE tenant = $3 AND deferred_id = $4 AND state = 'executing' \
             AND ($5::BIGINT IS NULL OR COALESCE(lease_until, resolve_time + {LEGACY_LEASE_MS}) < $5)"
        )))
        .bind(result)
        .bind(now)
        .bind(tenant)
        .bind(id)
        .bind(lease_before)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// Marks at most `limit` pending records whose expiry passed as expired.
    pub async fn expire_deferred(&self, now: i64, limit: u32) -> Result<u64, StoreError> {
        let n = sqlx::query(
            "UPDATE deferred SET state = 'expired', resolve_time = expire_time WHERE ctid IN \
             (SELECT ctid FROM deferred WHERE state = 'pending' AND expire_time IS NOT NULL AND expire_time <= $1 LIMIT $2)",
        )
        .bind(now)
        .bind(limit as i64)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n)
    }

    /// Hands a pending record to the client: its record (now a client execution) and the
    /// approval that did it are stored, the state stays pending. Only once.
    pub async fn hand_to_client(&self, tenant: &str, id: &str, record: &str, resolution: &str) -> Result<Transition, StoreError> {
        let n = sqlx::query(
            "UPDATE deferred SET record = $1, resolution = $2 WHERE tenant = $3 AND deferred_id = $4 AND state = 'pending' AND resolution IS NULL",
        )
        .bind(record)
        .bind(resolution)
        .bind(tenant)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if n == 1 {
            return Ok(Transition::Moved);
        }
        Ok(match self.get_deferred(tenant, id).await? {
            Some(row) => Transition::Already(row),
            None => Transition::Missing,
        })
    }

    /// Records of an agent (and run / state), oldest first, after the `(create_time, id)`
    /// cursor.
    pub async fn list_deferred(
        &self,
        tenant: &str,
        agent_id: &str,
        run_id: Option<&str>,
        state: Option<&str>,
        after: (i64, &str),
        limit: u32,
    ) -> Result<Vec<DeferredRow>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{DEFERRED_SELECT} WHERE tenant = $1 AND agent_id = $2 AND ($3::TEXT IS NULL OR run_id = $3) \
             AND ($4::TEXT IS NULL OR state = $4) \
             AND (create_time > $5 OR (create_time = $5 AND deferred_id > $6)) \
             ORDER BY create_time, deferred_id LIMIT $7"
        )))
        .bind(tenant)
        .bind(agent_id)
        .bind(run_id)
        .bind(state)
        .bind(after.0)
        .bind(after.1)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(deferred_from_row).collect())
    }

    /// Number of pending deferred records (all tenants), for metrics.
    pub async fn count_pending(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM deferred WHERE state = 'pending'").fetch_one(&self.pool).await?;
        Ok(row.get::<i64, _>(0) as u64)
    }

    // ----- per-user OAuth tokens, consents and registered clients -----

    /// Inserts or replaces the row of (tenant, user_id, source_id).
    pub async fn put_token(&self, tenant: &str, row: &TokenRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO oauth_tokens (tenant, user_id, source_id, server_url, sealed, expires_at, updated) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (tenant, user_id, source_id) DO UPDATE SET server_url = EXCLUDED.server_url, sealed = EXCLUDED.sealed, \
             expires_at = EXCLUDED.expires_at, updated = EXCLUDED.updated",
        )
        .bind(tenant)
        .bind(&row.user_id)
        .bind(&row.source_id)
        .bind(&row.server_url)
        .bind(&row.sealed)
        .bind(row.expires_at)
        .bind(row.updated)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn get_token(&self, tenant: &str, user_id: &str, source_id: &str) -> Result<Option<TokenRow>, StoreError> {
        let row = sqlx::query(
            "SELECT user_id, source_id, server_url, sealed, expires_at, updated FROM oauth_tokens \
             WHERE tenant = $1 AND user_id = $2 AND source_id = $3",
        )
        .bind(tenant)
        .bind(user_id)
        .bind(source_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| TokenRow {
            user_id: r.get(0),
            source_id: r.get(1),
            server_url: r.get(2),
            sealed: r.get(3),
            expires_at: r.get(4),
            updated: r.get(5),
        }))
    }

    /// Replaces the row only if its `updated` is still `expected_updated` (never re-creates a
    /// deleted one). One conditional UPDATE: of two replicas refreshing at once, the second
    /// waits for the first's row lock, re-checks `updated` and replaces nothing.
    pub async fn replace_token(&self, tenant: &str, row: &TokenRow, expected_updated: i64) -> Result<bool, StoreError> {
        let n = sqlx::query(
            "UPDATE oauth_tokens SET server_url = $1, sealed = $2, expires_at = $3, updated = $4 \
             WHERE tenant = $5 AND user_id = $6 AND source_id = $7 AND updated = $8",
        )
        .bind(&row.server_url)
        .bind(&row.sealed)
        .bind(row.expires_at)
        .bind(row.updated)
        .bind(tenant)
        .bind(&row.user_id)
        .bind(&row.source_id)
        .bind(expected_updated)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// Deletes a user's tokens for one source, or for every source (`None`).
    pub async fn delete_tokens(&self, tenant: &str, user_id: &str, source_id: Option<&str>) -> Result<u64, StoreError> {
        let n = sqlx::query("DELETE FROM oauth_tokens WHERE tenant = $1 AND user_id = $2 AND ($3::TEXT IS NULL OR source_id = $3)")
            .bind(tenant)
            .bind(user_id)
            .bind(source_id)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(n)
    }

    pub async fn insert_consent(&self, tenant: &str, row: &ConsentRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO oauth_consents (state_hash, tenant, user_id, agent_id, source_id, deferred_id, sealed, create_time, expire_time) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&row.state_hash)
        .bind(tenant)
        .bind(&row.user_id)
        .bind(&row.agent_id)
        .bind(&row.source_id)
        .bind(&row.deferred_id)
        .bind(&row.sealed)
        .bind(row.create_time)
        .bind(row.expire_time)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes the consent as it reads it: of two takers at once, the second waits for the
    /// first's row lock, finds the row gone and gets nothing.
    pub async fn take_consent(&self, state_hash: &str) -> Result<Option<(String, ConsentRow)>, StoreError> {
        let row = sqlx::query(
            "DELETE FROM oauth_consents WHERE state_hash = $1 \
             RETURNING tenant, state_hash, user_id, agent_id, source_id, deferred_id, sealed, create_time, expire_time",
        )
        .bind(state_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| {
            (
                r.get(0),
                ConsentRow {
                    state_hash: r.get(1),
                    user_id: r.get(2),
                    agent_id: r.get(3),
                    source_id: r.get(4),
                    deferred_id: r.get(5),
                    sealed: r.get(6),
                    create_time: r.get(7),
                    expire_time: r.get(8),
                },
            )
        }))
    }

    pub async fn get_oauth_client(&self, tenant: &str, issuer: &str, redirect_uri: &str) -> Result<Option<OAuthClientRow>, StoreError> {
        let row = sqlx::query(
            "SELECT issuer, redirect_uri, client_id, sealed_secret, create_time FROM oauth_clients \
             WHERE tenant = $1 AND issuer = $2 AND redirect_uri = $3",
        )
        .bind(tenant)
        .bind(issuer)
        .bind(redirect_uri)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| OAuthClientRow {
            issuer: r.get(0),
            redirect_uri: r.get(1),
            client_id: r.get(2),
            sealed_secret: r.get(3),
            create_time: r.get(4),
        }))
    }

    /// Keeps the first registration: inserts unless one exists (a concurrent insert of the
    /// same key waits for the first to commit, then does nothing), then reads the stored row.
    pub async fn put_oauth_client(&self, tenant: &str, row: &OAuthClientRow) -> Result<OAuthClientRow, StoreError> {
        sqlx::query(
            "INSERT INTO oauth_clients (tenant, issuer, redirect_uri, client_id, sealed_secret, create_time) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (tenant, issuer, redirect_uri) DO NOTHING",
        )
        .bind(tenant)
        .bind(&row.issuer)
        .bind(&row.redirect_uri)
        .bind(&row.client_id)
        .bind(&row.sealed_secret)
        .bind(row.create_time)
        .execute(&self.pool)
        .await?;
        Ok(self.get_oauth_client(tenant, &row.issuer, &row.redirect_uri).await?.unwrap_or_else(|| row.clone()))
    }

    // ----- text embeddings (hybrid search) -----

    /// The embeddings of `model` for `hashes`, in their order (`None`: absent or malformed):
    /// one `= ANY($2)` statement per chunk, then one UPDATE of the rows it found unused for a
    /// day (their hashes sorted, so replicas touching the same rows lock them in one order).
    pub async fn get_embeddings(&self, model: &str, hashes: &[String], now: i64) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let mut out = Vec::with_capacity(hashes.len());
        for chunk in hashes.chunks(EMBEDDING_CHUNK) {
            let rows = sqlx::query("SELECT text_hash, dims, vector, used_at FROM embeddings WHERE model = $1 AND text_hash = ANY($2)")
                .bind(model)
                .bind(chunk)
                .fetch_all(&self.pool)
                .await?;
            let mut found = std::collections::HashMap::with_capacity(rows.len());
            let mut stale = Vec::new();
            for r in &rows {
                let hash: String = r.get(0);
                let Some(vector) = vector_from_bytes(r.get::<i32, _>(1) as i64, r.get::<&[u8], _>(2)) else { continue };
                if r.get::<i64, _>(3) < now - EMBEDDING_TOUCH_AFTER_MS {
                    stale.push(hash.clone());
                }
                found.insert(hash, vector);
            }
            out.extend(chunk.iter().map(|h| found.get(h).cloned()));
            if !stale.is_empty() {
                stale.sort_unstable();
                let touched = sqlx::query("UPDATE embeddings SET used_at = $1 WHERE model = $2 AND text_hash = ANY($3) AND used_at < $4")
                    .bind(now)
                    .bind(model)
                    .bind(&stale)
                    .bind(now - EMBEDDING_TOUCH_AFTER_MS)
                    .execute(&self.pool)
                    .await;
                if let Err(e) = touched {
                    tracing::warn!(error = %e, "touching embeddings failed");
                }
            }
        }
        Ok(out)
    }

    /// Inserts the embeddings not stored yet (a malformed stored one is replaced): one
    /// `INSERT … SELECT FROM UNNEST` statement (its own transaction) per chunk. The rows are
    /// deduplicated (one command may not upsert a key twice) and sorted by hash, so replicas
    /// inserting overlapping sets wait for each other in one order instead of deadlocking.
    pub async fn put_embeddings(&self, model: &str, rows: &[(String, Vec<f32>)], now: i64) -> Result<(), StoreError> {
        let mut seen = std::collections::HashSet::with_capacity(rows.len());
        let mut rows: Vec<&(String, Vec<f32>)> = rows.iter().filter(|(h, _)| seen.insert(h.as_str())).collect();
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for chunk in rows.chunks(EMBEDDING_CHUNK) {
            let hashes: Vec<&str> = chunk.iter().map(|(h, _)| h.as_str()).collect();
            let dims: Vec<i32> = chunk.iter().map(|(_, v)| v.len() as i32).collect();
            let vectors: Vec<Vec<u8>> = chunk.iter().map(|(_, v)| vector_to_bytes(v)).collect();
            sqlx::query(
                "INSERT INTO embeddings (model, text_hash, dims, vector, used_at) \
                 SELECT $1, h, d, v, $5 FROM UNNEST($2::TEXT[], $3::INTEGER[], $4::BYTEA[]) AS t (h, d, v) \
                 ON CONFLICT (model, text_hash) DO UPDATE SET dims = EXCLUDED.dims, vector = EXCLUDED.vector, used_at = EXCLUDED.used_at \
                 WHERE octet_length(embeddings.vector) <> 4 * embeddings.dims",
            )
            .bind(model)
            .bind(&hashes)
            .bind(&dims)
            .bind(&vectors)
            .bind(now)
            .execute(&self.pool)
            .await?;
        }
        Ok(())
    }

    // ----- retention -----

    /// Deletes at most `limit` rows of each kind older than `before`.
    pub async fn purge(&self, before: i64, limit: u32) -> Result<Purged, StoreError> {
        let calls = self.delete_older("tool_calls", "update_time", before, limit).await?;
        let deferred = sqlx::query(
            "DELETE FROM deferred WHERE ctid IN \
             (SELECT ctid FROM deferred WHERE state IN ('resolved', 'expired') AND resolve_time < $1 LIMIT $2)",
        )
        .bind(before)
        .bind(limit as i64)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(Purged { calls, deferred, runs: 0 })
    }

    /// Deletes at most `limit` consents that expired before `now` and at most `limit` tokens
    /// last written before `tokens_updated_before`.
    pub async fn purge_oauth(&self, now: i64, tokens_updated_before: i64, limit: u32) -> Result<(u64, u64), StoreError> {
        let consents = self.delete_older("oauth_consents", "expire_time", now, limit).await?;
        let tokens = self.delete_older("oauth_tokens", "updated", tokens_updated_before, limit).await?;
        Ok((consents, tokens))
    }

    /// Deletes at most `limit` embeddings unused since before `used_before`.
    pub async fn purge_embeddings(&self, used_before: i64, limit: u32) -> Result<u64, StoreError> {
        self.delete_older("embeddings", "used_at", used_before, limit).await
    }

    /// Deletes at most `limit` rows of `table` whose `column` is below `before` (a batch of a
    /// purge; `table` and `column` are ours, never input).
    async fn delete_older(&self, table: &str, column: &str, before: i64, limit: u32) -> Result<u64, StoreError> {
        let sql = format!("DELETE FROM {table} WHERE ctid IN (SELECT ctid FROM {table} WHERE {column} < $1 LIMIT $2)");
        Ok(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(before).bind(limit as i64).execute(&self.pool).await?.rows_affected())
    }

    // ----- auto-pin usage -----

    /// Adds one successful call to a decayed count (`half_life_ms`). The decay and the
    /// increment happen in one upsert, so concurrent calls on several replicas all count.
    pub async fn record_use(&self, tenant: &str, agent_id: &str, user: &str, tool: &str, now: i64, half_life_ms: i64) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO tool_usage (tenant, agent_id, user_id, tool_name, score, last_update) VALUES ($1, $2, $3, $4, 1.0, $5) \
             ON CONFLICT (tenant, agent_id, user_id, tool_name) DO UPDATE SET \
             score = tool_usage.score * power(0.5, GREATEST(EXCLUDED.last_update - tool_usage.last_update, 0)::DOUBLE PRECISION \
                     / GREATEST($6::BIGINT, 1)::DOUBLE PRECISION) + 1.0, \
             last_update = EXCLUDED.last_update",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(user)
        .bind(tool)
        .bind(now)
        .bind(half_life_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Decayed counts of a user's tools at `now`, highest first.
    pub async fn usage(&self, tenant: &str, agent_id: &str, user: &str, now: i64, half_life_ms: i64) -> Result<Vec<(String, f64)>, StoreError> {
        let rows = sqlx::query("SELECT tool_name, score, last_update FROM tool_usage WHERE tenant = $1 AND agent_id = $2 AND user_id = $3")
            .bind(tenant)
            .bind(agent_id)
            .bind(user)
            .fetch_all(&self.pool)
            .await?;
        let mut out: Vec<(String, f64)> = rows.iter().map(|r| (r.get::<String, _>(0), decay(r.get(1), r.get(2), now, half_life_ms))).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }
}

/// Applies the migrations the database lacks. Replicas starting at once queue on the
/// advisory lock (released at commit); each then finds the others' work recorded in
/// `schema_migrations` and applies nothing twice. A migration and its record commit together.
async fn migrate(conn: &mut PgConnection) -> Result<(), StoreError> {
    let migrations = migrations();
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(MIGRATION_LOCK).execute(&mut *tx).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)").execute(&mut *tx).await?;
    let applied: Vec<i64> = sqlx::query("SELECT version FROM schema_migrations").fetch_all(&mut *tx).await?.iter().map(|r| r.get(0)).collect();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    for (version, sql) in &migrations {
        if applied.contains(version) {
            continue;
        }
        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql)).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)").bind(version).bind(now).execute(&mut *tx).await?;
        tracing::info!(version, "applied PostgreSQL schema migration");
    }
    let known = migrations.last().map_or(0, |m| m.0);
    if let Some(newer) = applied.iter().copied().filter(|v| *v > known).max() {
        tracing::warn!(database = newer, this_build = known, "the database schema is newer than this build knows; running anyway");
    }
    tx.commit().await?;
    Ok(())
}

/// The numbered migrations of schema_postgres.sql (`-- migration N: …` lines), ascending.
fn migrations() -> Vec<(i64, &'static str)> {
    let mut marks = Vec::new();
    let mut offset = 0;
    for line in SCHEMA.split_inclusive('\n') {
        if let Some(tail) = line.strip_prefix("-- migration ") {
            let number = tail.split(':').next().unwrap_or("").trim();
            let n: i64 = number.parse().unwrap_or_else(|_| panic!("schema_postgres.sql: bad migration line {line:?}"));
            marks.push((n, offset, offset + line.len()));
        }
        offset += line.len();
    }
    let mut out = Vec::new();
    for (i, &(n, _, body_start)) in marks.iter().enumerate() {
        assert_eq!(n, i as i64 + 1, "schema_postgres.sql: migrations must be numbered 1, 2, 3, … in order");
        let body_end = marks.get(i + 1).map_or(SCHEMA.len(), |m| m.1);
        out.push((n, &SCHEMA[body_start..body_end]));
    }
    out
}

const DEFERRED_SELECT: &str = "SELECT deferred_id, agent_id, version, run_id, state, record, resolution, result, create_time, resolve_time, \
     lease_until, expire_time FROM deferred";

fn deferred_from_row(r: &PgRow) -> DeferredRow {
    DeferredRow {
        deferred_id: r.get(0),
        agent_id: r.get(1),
        version: r.get::<i64, _>(2) as u32,
        run_id: r.get(3),
        state: r.get(4),
        record: r.get(5),
        resolution: r.get(6),
        result: r.get(7),
        create_time: r.get(8),
        resolve_time: r.get(9),
        lease_until: r.get(10),
        expire_time: r.get(11),
    }
}

/// Adds `delta` to a tenant's run counter.
async fn count_runs(tx: &mut sqlx::Transaction<'static, sqlx::Postgres>, tenant: &str, delta: i64) -> Result<(), StoreError> {
    if delta != 0 {
        sqlx::query(
            "INSERT INTO tenant_runs (tenant, runs) VALUES ($1, GREATEST($2, 0)) \
             ON CONFLICT (tenant) DO UPDATE SET runs = GREATEST(tenant_runs.runs + $2, 0)",
        )
        .bind(tenant)
        .bind(delta)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

fn version_from_row(agent_id: &str, r: &PgRow) -> VersionRecord {
    let version = r.get::<i64, _>(0) as u32;
    VersionRecord {
        agent_id: agent_id.into(),
        version,
        is_default: r.get::<i64, _>(3) as u32 == version,
        definition: r.get(1),
        create_time: r.get(2),
    }
}

/// Points the agent's default at `version`; false if the agent row is gone.
async fn set_default_tx(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    tenant: &str,
    agent_id: &str,
    version: u32,
    now: i64,
) -> Result<bool, StoreError> {
    let n = sqlx::query("UPDATE agents SET default_version = $1, update_time = $2 WHERE tenant = $3 AND agent_id = $4")
        .bind(version as i64)
        .bind(now)
        .bind(tenant)
        .bind(agent_id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(n > 0)
}
