//! The embedded backend: one SQLite file (WAL, `synchronous=NORMAL`, busy timeout).
//! Every write goes through one writer connection, so writers queue in the pool instead of
//! sleeping in SQLite's busy handler; reads use a pool of their own (WAL readers don't block
//! the writer). `BEGIN IMMEDIATE` keeps read-then-write transactions free of concurrent change
//! even when another process opens the same file.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Row;

use super::{decay, AgentRecord, CallKey, Claim, DeferredRow, StoreError, Transition, VersionRecord};

#[derive(Clone, Debug)]
pub struct SqliteStore {
    /// Reads (several connections; the writer's pool for an in-memory database).
    read: SqlitePool,
    /// Writes: one connection.
    write: SqlitePool,
}

const SCHEMA: &str = include_str!("schema_sqlite.sql");

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 2 * super::calls::MAX_BATCH + 100;

impl SqliteStore {
    /// Opens (and creates) the store named by `url` and applies the schema.
    pub async fn open(url: &str) -> Result<SqliteStore, StoreError> {
        let memory = url == "sqlite::memory:" || url == "sqlite://:memory:";
        if !url.starts_with("sqlite:") {
            return Err(StoreError::BadUrl(url.to_string()));
        }
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::BadUrl(url.to_string()))?
            .create_if_missing(true)
            .journal_mode(if memory { SqliteJournalMode::Memory } else { SqliteJournalMode::Wal })
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // An in-memory database lives in one connection. The pools skip the ping before each
        // use: a broken connection fails its statement, which reports the error anyway.
        // Room for the batched call statements (one text per batch size) besides the others.
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .test_before_acquire(false)
            .connect_with(opts.clone().statement_cache_capacity(STATEMENT_CACHE))
            .await?;
        let mut tx = write.begin_with("BEGIN IMMEDIATE").await?;
        for stmt in SCHEMA.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            sqlx::query(sqlx::AssertSqlSafe(stmt.to_string())).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        let read = if memory {
            write.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(4)
                .min_connections(1)
                .test_before_acquire(false)
                .connect_with(opts.read_only(true))
                .await?
        };
        Ok(SqliteStore { read, write })
    }

    /// Is the store reachable?
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
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
        let mut tx = self.write.begin_with("BEGIN IMMEDIATE").await?;
        let agent = sqlx::query("SELECT default_version, latest_version FROM agents WHERE tenant = ? AND agent_id = ?")
            .bind(tenant)
            .bind(agent_id)
            .fetch_optional(&mut *tx)
            .await?;
        let (default, latest) = match &agent {
            Some(r) => (r.get::<i64, _>(0) as u32, r.get::<i64, _>(1) as u32),
            None => (0, 0),
        };
        if latest > 0 {
            let row = sqlx::query("SELECT definition, create_time FROM agent_versions WHERE tenant = ? AND agent_id = ? AND version = ?")
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
                let rec = VersionRecord {
                    agent_id: agent_id.into(),
                    version: latest,
                    is_default,
                    definition: existing,
                    create_time: row.get(1),
                };
                return Ok((rec, false));
            }
        }
        let version = latest + 1;
        sqlx::query("INSERT INTO agent_versions (tenant, agent_id, version, definition, create_time) VALUES (?, ?, ?, ?, ?)")
            .bind(tenant)
            .bind(agent_id)
            .bind(version as i64)
            .bind(definition)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let is_default = make_default || latest == 0;
        let new_default = if is_default { version } else { default };
        if agent.is_some() {
            sqlx::query("UPDATE agents SET default_version = ?, latest_version = ?, update_time = ? WHERE tenant = ? AND agent_id = ?")
                .bind(new_default as i64)
                .bind(version as i64)
                .bind(now)
                .bind(tenant)
                .bind(agent_id)
                .execute(&mut *tx)
                .await?;
        } else {
            sqlx::query("INSERT INTO agents (tenant, agent_id, default_version, latest_version, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?)")
                .bind(tenant)
                .bind(agent_id)
                .bind(new_default as i64)
                .bind(version as i64)
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        let rec = VersionRecord {
            agent_id: agent_id.into(),
            version,
            is_default,
            definition: definition.into(),
            create_time: now,
        };
        Ok((rec, true))
    }

    /// The version asked for (`None` = the default one).
    pub async fn get_version(&self, tenant: &str, agent_id: &str, version: Option<u32>) -> Result<Option<VersionRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT v.version, v.definition, v.create_time, a.default_version FROM agents a \
             JOIN agent_versions v ON v.tenant = a.tenant AND v.agent_id = a.agent_id \
             WHERE a.tenant = ? AND a.agent_id = ? AND v.version = COALESCE(?, a.default_version)",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(version.map(|v| v as i64))
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(|r| version_from_row(agent_id, &r)))
    }

    /// The default version number of an agent, if the agent exists.
    pub async fn default_version(&self, tenant: &str, agent_id: &str) -> Result<Option<u32>, StoreError> {
        let row = sqlx::query("SELECT default_version FROM agents WHERE tenant = ? AND agent_id = ?")
            .bind(tenant)
            .bind(agent_id)
            .fetch_optional(&self.read)
            .await?;
        Ok(row.map(|r| r.get::<i64, _>(0) as u32))
    }

    pub async fn list_agents(&self, tenant: &str, after: &str, limit: u32) -> Result<Vec<AgentRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT agent_id, default_version, latest_version, create_time, update_time FROM agents \
             WHERE tenant = ? AND agent_id > ? ORDER BY agent_id LIMIT ?",
        )
        .bind(tenant)
        .bind(after)
        .bind(limit as i64)
        .fetch_all(&self.read)
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
             WHERE v.tenant = ? AND v.agent_id = ? AND v.version > ? ORDER BY v.version LIMIT ?",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(after as i64)
        .bind(limit as i64)
        .fetch_all(&self.read)
        .await?;
        Ok(Some(rows.iter().map(|r| version_from_row(agent_id, r)).collect()))
    }

    /// Moves the default pointer; `None` if the agent or version does not exist.
    pub async fn set_default(&self, tenant: &str, agent_id: &str, version: u32, now: i64) -> Result<Option<VersionRecord>, StoreError> {
        let mut tx = self.write.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query("SELECT definition, create_time FROM agent_versions WHERE tenant = ? AND agent_id = ? AND version = ?")
            .bind(tenant)
            .bind(agent_id)
            .bind(version as i64)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        set_default_tx(&mut tx, tenant, agent_id, version, now).await?;
        tx.commit().await?;
        Ok(Some(VersionRecord {
            agent_id: agent_id.into(),
            version,
            is_default: true,
            definition: row.get(0),
            create_time: row.get(1),
        }))
    }

    /// Deletes an agent, its versions and runs; false if it did not exist.
    pub async fn delete_agent(&self, tenant: &str, agent_id: &str) -> Result<bool, StoreError> {
        let mut tx = self.write.begin_with("BEGIN IMMEDIATE").await?;
        let n = sqlx::query("DELETE FROM agents WHERE tenant = ? AND agent_id = ?")
            .bind(tenant)
            .bind(agent_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        for table in ["agent_versions", "runs", "tool_usage"] {
            sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {table} WHERE tenant = ? AND agent_id = ?")))
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
    /// (idle since before `expired_before`).
    pub async fn pin_run(&self, tenant: &str, agent_id: &str, run_id: &str, version: u32, now: i64, expired_before: i64) -> Result<u32, StoreError> {
        let row = sqlx::query(
            "INSERT INTO runs (tenant, agent_id, run_id, version, last_seen) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (tenant, agent_id, run_id) DO UPDATE SET \
             version = CASE WHEN runs.last_seen < ? THEN excluded.version ELSE runs.version END, \
             last_seen = excluded.last_seen \
             RETURNING version",
        )
        .bind(tenant)
        .bind(agent_id)
        .bind(run_id)
        .bind(version as i64)
        .bind(now)
        .bind(expired_before)
        .fetch_one(&self.write)
        .await?;
        Ok(row.get::<i64, _>(0) as u32)
    }

    /// The version a live run is pinned to.
    pub async fn run_version(&self, tenant: &str, agent_id: &str, run_id: &str, expired_before: i64) -> Result<Option<u32>, StoreError> {
        let row = sqlx::query("SELECT version FROM runs WHERE tenant = ? AND agent_id = ? AND run_id = ? AND last_seen >= ?")
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .bind(expired_before)
            .fetch_optional(&self.read)
            .await?;
        Ok(row.map(|r| r.get::<i64, _>(0) as u32))
    }

    /// Live runs of a tenant (all agents): not ended, seen since `expired_before`.
    pub async fn count_live_runs(&self, tenant: &str, expired_before: i64) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM runs WHERE tenant = ? AND last_seen >= ?")
            .bind(tenant)
            .bind(expired_before)
            .fetch_one(&self.read)
            .await?;
        Ok(row.get::<i64, _>(0) as u64)
    }

    pub async fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<bool, StoreError> {
        let n = sqlx::query("DELETE FROM runs WHERE tenant = ? AND agent_id = ? AND run_id = ?")
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .execute(&self.write)
            .await?
            .rows_affected();
        Ok(n > 0)
    }

    /// Forgets runs idle since before `expired_before`; returns how many.
    pub async fn expire_runs(&self, expired_before: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM runs WHERE last_seen < ?").bind(expired_before).execute(&self.write).await?.rows_affected())
    }

    // ----- tool-call idempotency -----

    /// Claims (agent, run, tool_call_id) for execution, or reports who has it.
    pub async fn claim_call(&self, tenant: &str, agent_id: &str, run_id: &str, call_id: &str, now: i64) -> Result<Claim, StoreError> {
        // A claim released between our insert and our read is claimed again, never assumed:
        // only the caller whose insert succeeded may execute.
        for _ in 0..3 {
            let inserted = sqlx::query("INSERT INTO tool_calls (tenant, agent_id, run_id, tool_call_id, outcome, update_time) VALUES (?, ?, ?, ?, NULL, ?) ON CONFLICT DO NOTHING")
                .bind(tenant)
                .bind(agent_id)
                .bind(run_id)
                .bind(call_id)
                .bind(now)
                .execute(&self.write)
                .await?
                .rows_affected();
            if inserted == 1 {
                return Ok(Claim::New);
            }
            if let Some(claim) = self.call_state(tenant, agent_id, run_id, call_id).await? {
                return Ok(claim);
            }
        }
        // Still racing with releases: report it as running so the caller waits and asks again.
        Ok(Claim::Running { since: now })
    }

    pub async fn call_state(&self, tenant: &str, agent_id: &str, run_id: &str, call_id: &str) -> Result<Option<Claim>, StoreError> {
        let row = sqlx::query("SELECT outcome, update_time FROM tool_calls WHERE tenant = ? AND agent_id = ? AND run_id = ? AND tool_call_id = ?")
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .bind(call_id)
            .fetch_optional(&self.read)
            .await?;
        Ok(row.map(|r| match r.get::<Option<String>, _>(0) {
            Some(o) => Claim::Done(o),
            None => Claim::Running { since: r.get(1) },
        }))
    }

    /// Stores the outcome of a claimed call (only once).
    pub async fn finish_call(&self, tenant: &str, agent_id: &str, run_id: &str, call_id: &str, outcome: &str, now: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE tool_calls SET outcome = ?, update_time = ? WHERE tenant = ? AND agent_id = ? AND run_id = ? AND tool_call_id = ? AND outcome IS NULL")
            .bind(outcome)
            .bind(now)
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .bind(call_id)
            .execute(&self.write)
            .await?;
        Ok(())
    }

    /// Claims many calls at once; returns the keys it inserted (a key twice in `rows` is
    /// inserted once).
    pub(super) async fn insert_claims(&self, rows: &[(&CallKey, i64)]) -> Result<Vec<CallKey>, StoreError> {
        let values = vec!["(?, ?, ?, ?, NULL, ?)"; rows.len()].join(", ");
        let sql = format!(
            "INSERT INTO tool_calls (tenant, agent_id, run_id, tool_call_id, outcome, update_time) VALUES {values} \
             ON CONFLICT DO NOTHING RETURNING tenant, agent_id, run_id, tool_call_id"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (k, now) in rows {
            q = q.bind(&k.tenant).bind(&k.agent_id).bind(&k.run_id).bind(&k.call_id).bind(*now);
        }
        let inserted = q.fetch_all(&self.write).await?;
        Ok(inserted.iter().map(|r| CallKey { tenant: r.get(0), agent_id: r.get(1), run_id: r.get(2), call_id: r.get(3) }).collect())
    }

    /// Stores the outcomes of many claimed calls (each only once, distinct keys).
    pub(super) async fn finish_calls(&self, rows: &[(&CallKey, &str, i64)]) -> Result<(), StoreError> {
        let values = vec!["(?, ?, ?, ?, ?, ?)"; rows.len()].join(", ");
        let sql = format!(
            "WITH v (tenant, agent_id, run_id, tool_call_id, outcome, update_time) AS (VALUES {values}) \
             UPDATE tool_calls SET outcome = v.outcome, update_time = v.update_time FROM v \
             WHERE tool_calls.tenant = v.tenant AND tool_calls.agent_id = v.agent_id AND tool_calls.run_id = v.run_id \
             AND tool_calls.tool_call_id = v.tool_call_id AND tool_calls.outcome IS NULL"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (k, outcome, now) in rows {
            q = q.bind(&k.tenant).bind(&k.agent_id).bind(&k.run_id).bind(&k.call_id).bind(*outcome).bind(*now);
        }
        q.execute(&self.write).await?;
        Ok(())
    }

    /// Drops an unfinished claim, so the call can run again.
    pub async fn release_call(&self, tenant: &str, agent_id: &str, run_id: &str, call_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM tool_calls WHERE tenant = ? AND agent_id = ? AND run_id = ? AND tool_call_id = ? AND outcome IS NULL")
            .bind(tenant)
            .bind(agent_id)
            .bind(run_id)
            .bind(call_id)
            .execute(&self.write)
            .await?;
        Ok(())
    }

    // ----- deferred records -----

    pub async fn insert_deferred(&self, tenant: &str, row: &DeferredRow) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO deferred (tenant, deferred_id, agent_id, version, run_id, state, record, resolution, result, create_time, resolve_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
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
            .execute(&self.write)
            .await?;
        Ok(())
    }

    pub async fn get_deferred(&self, tenant: &str, id: &str) -> Result<Option<DeferredRow>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("{DEFERRED_SELECT} WHERE tenant = ? AND deferred_id = ?")))
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.read)
            .await?;
        Ok(row.as_ref().map(deferred_from_row))
    }

    /// Moves a pending record to `state` with `resolution`, only if it is still pending.
    pub async fn transition_deferred(&self, tenant: &str, id: &str, state: &str, resolution: &str, now: i64) -> Result<Transition, StoreError> {
        let n = sqlx::query("UPDATE deferred SET state = ?, resolution = ?, resolve_time = ? WHERE tenant = ? AND deferred_id = ? AND state = 'pending'")
            .bind(state)
            .bind(resolution)
            .bind(now)
            .bind(tenant)
            .bind(id)
            .execute(&self.write)
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

    /// Records the result of a resolution and marks the record resolved.
    pub async fn complete_deferred(&self, tenant: &str, id: &str, result: &str, now: i64) -> Result<bool, StoreError> {
        let n = sqlx::query(
            "UPDATE deferred SET state = 'resolved', result = ?, resolve_time = ? WHERE tenant = ? AND deferred_id = ? AND state = 'executing'",
        )
        .bind(result)
        .bind(now)
        .bind(tenant)
        .bind(id)
        .execute(&self.write)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// Hands a pending record to the client: its record (now a client execution) and the
    /// approval that did it are stored, the state stays pending. Only once.
    pub async fn hand_to_client(&self, tenant: &str, id: &str, record: &str, resolution: &str) -> Result<Transition, StoreError> {
        let n = sqlx::query(
            "UPDATE deferred SET record = ?, resolution = ? WHERE tenant = ? AND deferred_id = ? AND state = 'pending' AND resolution IS NULL",
        )
        .bind(record)
        .bind(resolution)
        .bind(tenant)
        .bind(id)
        .execute(&self.write)
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
            "{DEFERRED_SELECT} WHERE tenant = ? AND agent_id = ? AND (? IS NULL OR run_id = ?) \
             AND (? IS NULL OR state = ?) \
             AND (create_time > ? OR (create_time = ? AND deferred_id > ?)) \
             ORDER BY create_time, deferred_id LIMIT ?"
        )))
        .bind(tenant)
        .bind(agent_id)
        .bind(run_id)
        .bind(run_id)
        .bind(state)
        .bind(state)
        .bind(after.0)
        .bind(after.0)
        .bind(after.1)
        .bind(limit as i64)
        .fetch_all(&self.read)
        .await?;
        Ok(rows.iter().map(deferred_from_row).collect())
    }

    /// Number of pending deferred records (all tenants), for metrics.
    pub async fn count_pending(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM deferred WHERE state = 'pending'").fetch_one(&self.read).await?;
        Ok(row.get::<i64, _>(0) as u64)
    }

    // ----- auto-pin usage -----

    /// Adds one successful call to a decayed count (`half_life_ms`).
    pub async fn record_use(&self, tenant: &str, agent_id: &str, user: &str, tool: &str, now: i64, half_life_ms: i64) -> Result<(), StoreError> {
        let mut tx = self.write.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query("SELECT score, last_update FROM tool_usage WHERE tenant = ? AND agent_id = ? AND user_id = ? AND tool_name = ?")
            .bind(tenant)
            .bind(agent_id)
            .bind(user)
            .bind(tool)
            .fetch_optional(&mut *tx)
            .await?;
        let score = match row {
            Some(r) => decay(r.get(0), r.get(1), now, half_life_ms) + 1.0,
            None => 1.0,
        };
        sqlx::query("INSERT INTO tool_usage (tenant, agent_id, user_id, tool_name, score, last_update) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET score = excluded.score, last_update = excluded.last_update")
            .bind(tenant)
            .bind(agent_id)
            .bind(user)
            .bind(tool)
            .bind(score)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Decayed counts of a user's tools at `now`, highest first.
    pub async fn usage(&self, tenant: &str, agent_id: &str, user: &str, now: i64, half_life_ms: i64) -> Result<Vec<(String, f64)>, StoreError> {
        let rows = sqlx::query("SELECT tool_name, score, last_update FROM tool_usage WHERE tenant = ? AND agent_id = ? AND user_id = ?")
            .bind(tenant)
            .bind(agent_id)
            .bind(user)
            .fetch_all(&self.read)
            .await?;
        let mut out: Vec<(String, f64)> =
            rows.iter().map(|r| (r.get::<String, _>(0), decay(r.get(1), r.get(2), now, half_life_ms))).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }
}

const DEFERRED_SELECT: &str = "SELECT deferred_id, agent_id, version, run_id, state, record, resolution, result, create_time, resolve_time FROM deferred";

fn deferred_from_row(r: &sqlx::sqlite::SqliteRow) -> DeferredRow {
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
    }
}

fn version_from_row(agent_id: &str, r: &sqlx::sqlite::SqliteRow) -> VersionRecord {
    let version = r.get::<i64, _>(0) as u32;
    VersionRecord {
        agent_id: agent_id.into(),
        version,
        is_default: r.get::<i64, _>(3) as u32 == version,
        definition: r.get(1),
        create_time: r.get(2),
    }
}

async fn set_default_tx(tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>, tenant: &str, agent_id: &str, version: u32, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE agents SET default_version = ?, update_time = ? WHERE tenant = ? AND agent_id = ?")
        .bind(version as i64)
        .bind(now)
        .bind(tenant)
        .bind(agent_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

