//! This file is long because it holds every store statement of the embedded backend, written
//! out side by side with `postgres.rs` so the two change together.
//!
//! The embedded backend: one SQLite file (WAL, `synchronous=NORMAL`, busy timeout), through
//! rusqlite.
//!
//! Statements run on the calling thread: a small write with WAL and `synchronous=NORMAL` costs
//! tens of microseconds, less than handing it to a database thread and waking the caller again
//! (on a virtual machine with idle cores, each such hand-off costs more than the statement).
//! Reading or writing whole definitions (up to the definition limit) runs on tokio's blocking
//! pool instead. All writes go through one connection behind a mutex, so writers of this
//! process queue on the mutex, never in SQLite's sleeping busy handler; reads use connections
//! of their own (WAL readers don't block the writer). The claims and outcomes of tool calls
//! that arrive while the writer is busy are written together by whoever holds it, in one
//! transaction (group commit). A background thread checkpoints the WAL, so no call pays for
//! copying it back into the database file (and its fsync).
//! `BEGIN IMMEDIATE` keeps read-then-write transactions free of concurrent change even when
//! another process opens the same file.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::oneshot;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior, params};

use super::{
    AgentRecord, CallKey, Claim, ClaimRequest, ConsentRow, DeferredRow, EMBEDDING_CHUNK, EMBEDDING_TOUCH_AFTER_MS, Lease, OAuthClientRow, Purged,
    StoreError, TokenRow, Transition, VersionRecord, decay, vector_from_bytes, vector_to_bytes,
};

/// The schema, as migrations applied in order and counted in `PRAGMA user_version`. The
/// first is the original schema (`IF NOT EXISTS`: files made before versions were counted
/// have it already); append new ones, never edit one that has shipped.
const MIGRATIONS: [&str; 4] = [
    include_str!("schema_sqlite.sql"),
    include_str!("schema_sqlite_2.sql"),
    include_str!("schema_sqlite_3.sql"),
    include_str!("schema_sqlite_4.sql"),
];

/// A claim or executing record written before leases were kept is taken as held this long
/// after its last update (the claim timeout of those versions), so a rolling upgrade never
/// expires a call an older replica still runs.
pub const LEGACY_LEASE_MS: i64 = 600_000;

/// Reader connections of a file database.
const READERS: usize = 4;
/// How often the WAL is checkpointed in the background.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);
/// WAL pages after which a writer checkpoints by itself (a safety net if the background
/// checkpoints fall behind; SQLite's default is 1000).
const AUTOCHECKPOINT_PAGES: i64 = 20_000;
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct SqliteStore {
    db: Arc<Db>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("readers", &self.db.readers.len()).finish()
    }
}

struct Db {
    /// Held only while statements run, never across an await; taken through [`Writer`].
    writer: tokio::sync::Mutex<Connection>,
    /// Claims and outcomes of tool calls waiting to be written together (see [`CallWrite`]).
    pending: Mutex<Vec<CallWrite>>,
    /// Empty for an in-memory database, whose one connection is the writer.
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    /// Transactions of queued claims and outcomes written (tests: how writes are grouped).
    #[cfg(test)]
    batches: AtomicUsize,
}

fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Db {
    fn new(writer: Connection, readers: Vec<Mutex<Connection>>) -> Arc<Db> {
        Arc::new(Db {
            writer: tokio::sync::Mutex::new(writer),
            pending: Mutex::new(Vec::new()),
            readers,
            next_reader: AtomicUsize::new(0),
            #[cfg(test)]
            batches: AtomicUsize::new(0),
        })
    }

    /// The writer, for the blocking pool.
    fn writer(&self) -> Writer<'_> {
        Writer { db: self, conn: Some(self.writer.blocking_lock()) }
    }

    /// The writer, for async callers: while another holds it (for microseconds, or a blocking
    /// task for milliseconds) this task waits in the mutex's queue, the worker thread runs
    /// other tasks.
    async fn writer_async(&self) -> Writer<'_> {
        Writer { db: self, conn: Some(self.writer.lock().await) }
    }

    /// Writes the pending claims and outcomes if the writer is free; if it is not, whoever
    /// holds it writes them when letting go (see `Drop for Writer`).
    fn write_pending_calls(&self) {
        loop {
            if lock_pending(&self.pending).is_empty() {
                return;
            }
            let Ok(mut conn) = self.writer.try_lock() else { return };
            loop {
                let batch = std::mem::take(&mut *lock_pending(&self.pending));
                if batch.is_empty() {
                    break;
                }
                #[cfg(test)]
                self.batches.fetch_add(1, Ordering::Relaxed);
                write_calls(&mut conn, batch);
            }
            // Checked again after letting go: a write queued meanwhile found the writer taken.
        }
    }

    fn reader(&self) -> Reader<'_> {
        if self.readers.is_empty() {
            return Reader::Writer(self.writer());
        }
        self.own_reader()
    }

    async fn reader_async(&self) -> Reader<'_> {
        if self.readers.is_empty() {
            return Reader::Writer(self.writer_async().await);
        }
        self.own_reader()
    }

    fn own_reader(&self) -> Reader<'_> {
        let n = self.readers.len();
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            if let Ok(c) = self.readers[(start + i) % n].try_lock() {
                return Reader::Own(c);
            }
        }
        Reader::Own(lock(&self.readers[start % n]))
    }
}

/// The writer connection; letting go of it writes the claims and outcomes queued meanwhile.
struct Writer<'a> {
    db: &'a Db,
    conn: Option<tokio::sync::MutexGuard<'a, Connection>>,
}

impl std::ops::Deref for Writer<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Writer<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("held until dropped")
    }
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        self.conn = None;
        self.db.write_pending_calls();
    }
}

fn lock_pending(m: &Mutex<Vec<CallWrite>>) -> MutexGuard<'_, Vec<CallWrite>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A claim or an outcome of a tool call, queued to be written with the others that arrive
/// while the writer is busy: one transaction (one commit) for all of them (group commit).
/// Alone, it is written at once by the caller.
enum CallWrite {
    Claim { key: CallKey, req: ClaimRequest, reply: oneshot::Sender<Result<Claim, StoreError>> },
    Finish { key: CallKey, outcome: String, now: i64, reply: oneshot::Sender<Result<(), StoreError>> },
}

/// Writes a batch in one transaction, in queue order (the first claim of a call id wins, the
/// first outcome stays), and answers each. If a statement or the commit fails, every one gets
/// the error and nothing is written.
fn write_calls(c: &mut Connection, batch: Vec<CallWrite>) {
    // A failed statement fails the batch (rolled back as a whole): after some errors (a full
    // disk, I/O) SQLite has already rolled the transaction back, and the statements after it
    // would each commit on their own.
    let written = (|| -> rusqlite::Result<Vec<Option<Claim>>> {
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let done = batch.iter().map(|w| write_call(&tx, w)).collect::<rusqlite::Result<_>>()?;
        tx.commit()?;
        Ok(done)
    })();
    match written {
        Ok(done) => {
            for (w, d) in batch.into_iter().zip(done) {
                match w {
                    CallWrite::Claim { reply, req, .. } => {
                        let running = Claim::Running { since: req.now, lease_until: req.lease_until, fingerprint: Some(req.fingerprint) };
                        drop(reply.send(Ok(d.unwrap_or(running))))
                    }
                    CallWrite::Finish { reply, .. } => drop(reply.send(Ok(()))),
                }
            }
        }
        Err(e) => {
            let text = e.to_string();
            for w in batch {
                match w {
                    CallWrite::Claim { reply, .. } => drop(reply.send(Err(StoreError::Batch(text.clone())))),
                    CallWrite::Finish { reply, .. } => drop(reply.send(Err(StoreError::Batch(text.clone())))),
                }
            }
        }
    }
}

/// One claim (its state: `Some`) or outcome (`None`).
fn write_call(c: &Connection, w: &CallWrite) -> rusqlite::Result<Option<Claim>> {
    match w {
        CallWrite::Claim { key: k, req, .. } => {
            let inserted = c
                .prepare_cached(
                    "INSERT INTO tool_calls (tenant, agent_id, run_id, tool_call_id, outcome, update_time, owner, lease_until, fingerprint) \
                     VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                )?
                .execute(params![k.tenant, k.agent_id, k.run_id, k.call_id, req.now, req.owner, req.lease_until, req.fingerprint])?;
            if inserted == 1 {
                return Ok(Some(Claim::New));
            }
            call_state_on(c, k)
        }
        CallWrite::Finish { key: k, outcome, now, .. } => {
            c.prepare_cached(
                "UPDATE tool_calls SET outcome = ?, update_time = ? WHERE tenant = ? AND agent_id = ? AND run_id = ? AND tool_call_id = ? AND outcome IS NULL",
            )?
            .execute(params![outcome, now, k.tenant, k.agent_id, k.run_id, k.call_id])?;
            Ok(None)
        }
    }
}

enum Reader<'a> {
    Own(MutexGuard<'a, Connection>),
    Writer(Writer<'a>),
}

impl std::ops::Deref for Reader<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        match self {
            Reader::Own(c) => c,
            Reader::Writer(c) => c,
        }
    }
}

/// The file a `sqlite:` URL names (`None`: in memory).
fn file_of(url: &str) -> Result<Option<&str>, StoreError> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).ok_or_else(|| StoreError::BadUrl(url.to_string()))?;
    let path = rest.split('?').next().unwrap_or_default();
    match path {
        "" => Err(StoreError::BadUrl(url.to_string())),
        ":memory:" => Ok(None),
        p => Ok(Some(p)),
    }
}

fn configure(c: &Connection, wal: bool) -> rusqlite::Result<()> {
    c.busy_timeout(BUSY_TIMEOUT)?;
    c.pragma_update(None, "synchronous", "NORMAL")?;
    c.pragma_update(None, "foreign_keys", true)?;
    c.set_prepared_statement_cache_capacity(64);
    if wal {
        c.pragma_update(None, "wal_autocheckpoint", AUTOCHECKPOINT_PAGES)?;
    }
    Ok(())
}

impl SqliteStore {
    /// Opens (and creates) the store named by `url` and applies the schema.
    pub async fn open(url: &str) -> Result<SqliteStore, StoreError> {
        let file = file_of(url)?.map(str::to_string);
        let db =
            tokio::task::spawn_blocking(move || Self::open_blocking(file.as_deref())).await.map_err(|e| StoreError::Blocking(e.to_string()))??;
        Ok(SqliteStore { db })
    }

    fn open_blocking(file: Option<&str>) -> Result<Arc<Db>, StoreError> {
        let Some(file) = file else {
            let mut c = Connection::open_in_memory()?;
            configure(&c, false)?;
            migrate(&mut c)?;
            return Ok(Db::new(c, Vec::new()));
        };
        let mut writer = Connection::open(file)?;
        writer.pragma_update(None, "journal_mode", "WAL")?;
        configure(&writer, true)?;
        migrate(&mut writer)?;
        let open_reader = || -> Result<Mutex<Connection>, StoreError> {
            let c = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
            configure(&c, false)?;
            Ok(Mutex::new(c))
        };
        let readers = (0..READERS).map(|_| open_reader()).collect::<Result<Vec<_>, _>>()?;
        let checkpointer = Connection::open(file)?;
        configure(&checkpointer, false)?;
        let db = Db::new(writer, readers);
        spawn_checkpointer(Arc::downgrade(&db), checkpointer);
        Ok(db)
    }

    /// Runs `f` on tokio's blocking pool with the writer (whole definitions: milliseconds).
    async fn write_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&mut db.writer())).await.map_err(|e| StoreError::Blocking(e.to_string()))?
    }

    async fn read_blocking<T: Send + 'static>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db.reader())).await.map_err(|e| StoreError::Blocking(e.to_string()))?
    }

    /// Is the store reachable?
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.db.reader_async().await.query_row("SELECT 1", [], |_| Ok(()))?;
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
        let (tenant, agent_id, definition) = (tenant.to_string(), agent_id.to_string(), definition.to_string());
        self.write_blocking(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let agent: Option<(i64, i64)> = tx
                .query_row("SELECT default_version, latest_version FROM agents WHERE tenant = ? AND agent_id = ?", params![tenant, agent_id], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            let (default, latest) = agent.map(|(d, l)| (d as u32, l as u32)).unwrap_or((0, 0));
            if latest > 0 {
                let (existing, create_time): (String, i64) = tx.query_row(
                    "SELECT definition, create_time FROM agent_versions WHERE tenant = ? AND agent_id = ? AND version = ?",
                    params![tenant, agent_id, latest],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                if existing == definition {
                    let mut is_default = default == latest;
                    if make_default && !is_default {
                        set_default_tx(&tx, &tenant, &agent_id, latest, now)?;
                        is_default = true;
                    }
                    tx.commit()?;
                    let rec = VersionRecord { agent_id, version: latest, is_default, definition: existing, create_time };
                    return Ok((rec, false));
                }
            }
            let version = latest + 1;
            tx.execute(
                "INSERT INTO agent_versions (tenant, agent_id, version, definition, create_time) VALUES (?, ?, ?, ?, ?)",
                params![tenant, agent_id, version, definition, now],
            )?;
            let is_default = make_default || latest == 0;
            let new_default = if is_default { version } else { default };
            if agent.is_some() {
                tx.execute(
                    "UPDATE agents SET default_version = ?, latest_version = ?, update_time = ? WHERE tenant = ? AND agent_id = ?",
                    params![new_default, version, now, tenant, agent_id],
                )?;
            } else {
                tx.execute(
                    "INSERT INTO agents (tenant, agent_id, default_version, latest_version, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?)",
                    params![tenant, agent_id, new_default, version, now, now],
                )?;
            }
            tx.commit()?;
            Ok((VersionRecord { agent_id, version, is_default, definition, create_time: now }, true))
        })
        .await
    }

    /// The version asked for (`None` = the default one).
    pub async fn get_version(&self, tenant: &str, agent_id: &str, version: Option<u32>) -> Result<Option<VersionRecord>, StoreError> {
        let (tenant, agent_id) = (tenant.to_string(), agent_id.to_string());
        self.read_blocking(move |c| {
            Ok(c.query_row(
                "SELECT v.version, v.definition, v.create_time, a.default_version FROM agents a \
                 JOIN agent_versions v ON v.tenant = a.tenant AND v.agent_id = a.agent_id \
                 WHERE a.tenant = ? AND a.agent_id = ? AND v.version = COALESCE(?, a.default_version)",
                params![tenant, agent_id, version],
                |r| version_from_row(&agent_id, r),
            )
            .optional()?)
        })
        .await
    }

    /// The default version number of an agent, if the agent exists.
    pub async fn default_version(&self, tenant: &str, agent_id: &str) -> Result<Option<u32>, StoreError> {
        Ok(self
            .db
            .reader_async()
            .await
            .prepare_cached("SELECT default_version FROM agents WHERE tenant = ? AND agent_id = ?")?
            .query_row(params![tenant, agent_id], |r| r.get::<_, u32>(0))
            .optional()?)
    }

    pub async fn list_agents(&self, tenant: &str, after: &str, limit: u32) -> Result<Vec<AgentRecord>, StoreError> {
        let c = self.db.reader_async().await;
        let mut stmt = c.prepare_cached(
            "SELECT agent_id, default_version, latest_version, create_time, update_time FROM agents \
             WHERE tenant = ? AND agent_id > ? ORDER BY agent_id LIMIT ?",
        )?;
        let rows = stmt.query_map(params![tenant, after, limit], |r| {
            Ok(AgentRecord {
                agent_id: r.get(0)?,
                default_version: r.get(1)?,
                latest_version: r.get(2)?,
                create_time: r.get(3)?,
                update_time: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Versions after `after`, ascending; `None` if the agent does not exist.
    pub async fn list_versions(&self, tenant: &str, agent_id: &str, after: u32, limit: u32) -> Result<Option<Vec<VersionRecord>>, StoreError> {
        let (tenant, agent_id) = (tenant.to_string(), agent_id.to_string());
        self.read_blocking(move |c| {
            let exists = c.query_row("SELECT 1 FROM agents WHERE tenant = ? AND agent_id = ?", params![tenant, agent_id], |_| Ok(())).optional()?;
            if exists.is_none() {
                return Ok(None);
            }
            let mut stmt = c.prepare(
                "SELECT v.version, v.definition, v.create_time, a.default_version FROM agent_versions v \
                 JOIN agents a ON v.tenant = a.tenant AND v.agent_id = a.agent_id \
                 WHERE v.tenant = ? AND v.agent_id = ? AND v.version > ? ORDER BY v.version LIMIT ?",
            )?;
            let rows = stmt.query_map(params![tenant, agent_id, after, limit], |r| version_from_row(&agent_id, r))?;
            Ok(Some(rows.collect::<Result<_, _>>()?))
        })
        .await
    }

    /// Moves the default pointer; `None` if the agent or version does not exist.
    pub async fn set_default(&self, tenant: &str, agent_id: &str, version: u32, now: i64) -> Result<Option<VersionRecord>, StoreError> {
        let (tenant, agent_id) = (tenant.to_string(), agent_id.to_string());
        self.write_blocking(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let row: Option<(String, i64)> = tx
                .query_row(
                    "SELECT definition, create_time FROM agent_versions WHERE tenant = ? AND agent_id = ? AND version = ?",
                    params![tenant, agent_id, version],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((definition, create_time)) = row else { return Ok(None) };
            set_default_tx(&tx, &tenant, &agent_id, version, now)?;
            tx.commit()?;
            Ok(Some(VersionRecord { agent_id, version, is_default: true, definition, create_time }))
        })
        .await
    }

    /// Deletes an agent, its versions and runs; false if it did not exist.
    pub async fn delete_agent(&self, tenant: &str, agent_id: &str) -> Result<bool, StoreError> {
        let (tenant, agent_id) = (tenant.to_string(), agent_id.to_string());
        self.write_blocking(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let n = tx.execute("DELETE FROM agents WHERE tenant = ? AND agent_id = ?", params![tenant, agent_id])?;
            let runs = tx.execute("DELETE FROM runs WHERE tenant = ? AND agent_id = ?", params![tenant, agent_id])?;
            count_runs(&tx, &tenant, -(runs as i64))?;
            for table in ["agent_versions", "tool_usage"] {
                tx.execute(&format!("DELETE FROM {table} WHERE tenant = ? AND agent_id = ?"), params![tenant, agent_id])?;
            }
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    // ----- runs -----

    /// The version a run is pinned to, pinning `version` if the run is new or expired
    /// (idle since before `expired_before`; then its frozen hot tools are forgotten too). A
    /// new run counts in its tenant's runs.
    pub async fn pin_run(&self, tenant: &str, agent_id: &str, run_id: &str, version: u32, now: i64, expired_before: i64) -> Result<u32, StoreError> {
        let mut c = self.db.writer_async().await;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing: Option<(u32, i64)> = tx
            .prepare_cached("SELECT version, last_seen FROM runs WHERE tenant = ? AND agent_id = ? AND run_id = ?")?
            .query_row(params![tenant, agent_id, run_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let pinned = match existing {
            None => {
                tx.prepare_cached("INSERT INTO runs (tenant, agent_id, run_id, version, last_seen) VALUES (?, ?, ?, ?, ?)")?
                    .execute(params![tenant, agent_id, run_id, version, now])?;
                count_runs(&tx, tenant, 1)?;
                version
            }
            Some((_, last_seen)) if last_seen < expired_before => {
                tx.prepare_cached("UPDATE runs SET version = ?, last_seen = ?, hot = NULL WHERE tenant = ? AND agent_id = ? AND run_id = ?")?
                    .execute(params![version, now, tenant, agent_id, run_id])?;
                version
            }
            Some((pinned, _)) => {
                tx.prepare_cached("UPDATE runs SET last_seen = ? WHERE tenant = ? AND agent_id = ? AND run_id = ?")?
                    .execute(params![now, tenant, agent_id, run_id])?;
                pinned
            }
        };
        tx.commit()?;
        Ok(pinned)
    }

    /// The version a live run is pinned to.
    pub async fn run_version(&self, tenant: &str, agent_id: &str, run_id: &str, expired_before: i64) -> Result<Option<u32>, StoreError> {
        Ok(self
            .db
            .reader_async()
            .await
            .prepare_cached("SELECT version FROM runs WHERE tenant = ? AND agent_id = ? AND run_id = ? AND last_seen >= ?")?
            .query_row(params![tenant, agent_id, run_id, expired_before], |r| r.get(0))
            .optional()?)
    }

    /// Runs of a tenant (all agents): the counter kept with them.
    pub async fn live_runs(&self, tenant: &str) -> Result<u64, StoreError> {
        let n: Option<i64> = self
            .db
            .reader_async()
            .await
            .prepare_cached("SELECT runs FROM tenant_runs WHERE tenant = ?")?
            .query_row(params![tenant], |r| r.get(0))
            .optional()?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    pub async fn run_hot(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<Option<String>, StoreError> {
        let hot: Option<Option<String>> = self
            .db
            .reader_async()
            .await
            .prepare_cached("SELECT hot FROM runs WHERE tenant = ? AND agent_id = ? AND run_id = ?")?
            .query_row(params![tenant, agent_id, run_id], |r| r.get(0))
            .optional()?;
        Ok(hot.flatten())
    }

    pub async fn freeze_run_hot(&self, tenant: &str, agent_id: &str, run_id: &str, hot: &str) -> Result<Option<String>, StoreError> {
        let frozen: Option<Option<String>> = self
            .db
            .writer_async()
            .await
            .prepare_cached("UPDATE runs SET hot = COALESCE(hot, ?) WHERE tenant = ? AND agent_id = ? AND run_id = ? RETURNING hot")?
            .query_row(params![hot, tenant, agent_id, run_id], |r| r.get(0))
            .optional()?;
        Ok(frozen.flatten())
    }

    pub async fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<bool, StoreError> {
        let mut c = self.db.writer_async().await;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let n = tx.prepare_cached("DELETE FROM runs WHERE tenant = ? AND agent_id = ? AND run_id = ?")?.execute(params![tenant, agent_id, run_id])?;
        count_runs(&tx, tenant, -(n as i64))?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// Forgets at most `limit` runs idle since before `expired_before`; returns how many.
    pub async fn expire_runs(&self, expired_before: i64, limit: u32) -> Result<u64, StoreError> {
        let mut c = self.db.writer_async().await;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let tenants: Vec<String> = tx
            .prepare_cached("DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs WHERE last_seen < ? LIMIT ?) RETURNING tenant")?
            .query_map(params![expired_before, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut per_tenant: std::collections::BTreeMap<&str, i64> = Default::default();
        for t in &tenants {
            *per_tenant.entry(t).or_default() += 1;
        }
        for (tenant, n) in per_tenant {
            count_runs(&tx, tenant, -n)?;
        }
        tx.commit()?;
        Ok(tenants.len() as u64)
    }

    // ----- tool-call idempotency -----

    /// Claims a tool call for execution under a lease, or reports who has it: either this
    /// insert made the row (the caller executes) or the row is read in the same transaction,
    /// so a concurrent release cannot slip in between.
    pub async fn claim_call(&self, key: &CallKey, req: &ClaimRequest) -> Result<Claim, StoreError> {
        let (key, req) = (key.clone(), req.clone());
        self.queue_call(|reply| CallWrite::Claim { key, req, reply }).await
    }

    /// Holds the writer until the returned guard is dropped (tests: writes queue meanwhile).
    #[cfg(test)]
    pub(crate) async fn hold_writer(&self) -> Box<dyn Send + '_> {
        Box::new(self.db.writer_async().await)
    }

    /// Queues a claim or an outcome and writes the queue at once if the writer is free. If
    /// it is not, this caller also queues for the writer: whoever lets go of it writes the
    /// queue, but a waiter handed the writer may be cancelled before it holds it, and then
    /// no one would; so the caller takes the writer itself unless its answer comes first.
    async fn queue_call<T>(&self, write: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> CallWrite) -> Result<T, StoreError> {
        let (reply, mut answer) = oneshot::channel();
        lock_pending(&self.db.pending).push(write(reply));
        tokio::task::yield_now().await;
        self.db.write_pending_calls();
        tokio::select! {
            biased;
            answer = &mut answer => return answer.map_err(|_| StoreError::Closed)?,
            // Letting go of it writes the queue, this call's write included.
            writer = self.db.writer_async() => drop(writer),
        }
        answer.await.map_err(|_| StoreError::Closed)?
    }

    pub async fn call_state(&self, key: &CallKey) -> Result<Option<Claim>, StoreError> {
        Ok(call_state_on(&*self.db.reader_async().await, key)?)
    }

    /// Stores the outcome of a claimed call (only once).
    pub async fn finish_call(&self, key: &CallKey, outcome: &str, now: i64) -> Result<(), StoreError> {
        let (key, outcome) = (key.clone(), outcome.to_string());
        self.queue_call(|reply| CallWrite::Finish { key, outcome, now, reply }).await
    }

    /// Drops an unfinished claim, so the call can run again.
    pub async fn release_call(&self, k: &CallKey) -> Result<(), StoreError> {
        self.db
            .writer_async()
            .await
            .prepare_cached("DELETE FROM tool_calls WHERE tenant = ? AND agent_id = ? AND run_id = ? AND tool_call_id = ? AND outcome IS NULL")?
            .execute(params![k.tenant, k.agent_id, k.run_id, k.call_id])?;
        Ok(())
    }

    /// Extends the leases of `owner`'s unfinished claims among `keys`.
    pub async fn renew_calls(&self, owner: &str, keys: &[CallKey], lease_until: i64) -> Result<u64, StoreError> {
        let mut c = self.db.writer_async().await;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut n = 0;
        {
            let mut stmt = tx.prepare_cached(
                "UPDATE tool_calls SET lease_until = ? WHERE tenant = ? AND agent_id = ? AND run_id = ? AND tool_call_id = ? AND owner = ? AND outcome IS NULL",
            )?;
            for k in keys {
                n += stmt.execute(params![lease_until, k.tenant, k.agent_id, k.run_id, k.call_id, owner])? as u64;
            }
        }
        tx.commit()?;
        Ok(n)
    }

    /// Gives an unfinished claim its outcome: once its lease ran out before `lease_before`,
    /// or whatever the lease when `None`.
    pub async fn expire_call(&self, k: &CallKey, outcome: &str, now: i64, lease_before: Option<i64>) -> Result<bool, StoreError> {
        let n = self
            .db
            .writer_async()
            .await
            .prepare_cached(&format!(
                "UPDATE tool_calls SET outcome = ?1, update_time = ?2 \
                 WHERE tenant = ?3 AND agent_id = ?4 AND run_id = ?5 AND tool_call_id = ?6 AND outcome IS NULL \
                 AND (?7 IS NULL OR COALESCE(lease_until, update_time + {LEGACY_LEASE_MS}) < ?7)"
            ))?
            .execute(params![outcome, now, k.tenant, k.agent_id, k.run_id, k.call_id, lease_before])?;
        Ok(n == 1)
    }

    // ----- deferred records -----

    pub async fn insert_deferred(&self, tenant: &str, row: &DeferredRow) -> Result<(), StoreError> {
        self.db
            .writer_async()
            .await
            .prepare_cached(
                "INSERT INTO deferred (tenant, deferred_id, agent_id, version, run_id, state, record, resolution, result, create_time, resolve_time, \
                 expire_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )?
            .execute(params![
                tenant,
                row.deferred_id,
                row.agent_id,
                row.version,
                row.run_id,
                row.state,
                row.record,
                row.resolution,
                row.result,
                row.create_time,
                row.resolve_time,
                row.expire_time
            ])?;
        Ok(())
    }

    pub async fn get_deferred(&self, tenant: &str, id: &str) -> Result<Option<DeferredRow>, StoreError> {
        get_deferred_on(&*self.db.reader_async().await, tenant, id)
    }

    /// Moves a pending, unexpired record to `executing` with `resolution` under `lease`, only
    /// if it is still pending.
    pub async fn transition_deferred(&self, tenant: &str, id: &str, resolution: &str, now: i64, lease: Lease<'_>) -> Result<Transition, StoreError> {
        let c = self.db.writer_async().await;
        let n = c
            .prepare_cached(
                "UPDATE deferred SET state = 'executing', resolution = ?1, resolve_time = ?2, owner = ?3, lease_until = ?4 \
                 WHERE tenant = ?5 AND deferred_id = ?6 AND state = 'pending' AND (expire_time IS NULL OR expire_time > ?2)",
            )?
            .execute(params![resolution, now, lease.owner, lease.until, tenant, id])?;
        moved_or_row(&c, n, tenant, id)
    }

    /// Extends the leases of `owner`'s executing records among `ids`.
    pub async fn renew_deferred(&self, owner: &str, ids: &[(String, String)], lease_until: i64) -> Result<u64, StoreError> {
        let mut c = self.db.writer_async().await;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut n = 0;
        {
            let mut stmt =
                tx.prepare_cached("UPDATE deferred SET lease_until = ? WHERE tenant = ? AND deferred_id = ? AND owner = ? AND state = 'executing'")?;
            for (tenant, id) in ids {
                n += stmt.execute(params![lease_until, tenant, id, owner])? as u64;
            }
        }
        tx.commit()?;
        Ok(n)
    }

    /// Records the result of a resolution and marks the record resolved, if it is still
    /// executing (the first result wins) and, with `lease_before`, its holder's lease ran out
    /// before then; returns whether it did.
    pub async fn complete_deferred(&self, tenant: &str, id: &str, result: &str, now: i64, lease_before: Option<i64>) -> Result<bool, StoreError> {
        let n = self
            .db
            .writer_async()
            .await
            .prepare_cached(&format!(
                "UPDATE deferred SET state = 'resolved', result = ?1, resolve_time = ?2, lease_until = NULL \
                 WHERE tenant = ?3 AND deferred_id = ?4 AND state = 'executing' \
                 AND (?5 IS NULL OR COALESCE(lease_until, resolve_time + {LEGACY_LEASE_MS}) < ?5)"
            ))?
            .execute(params![result, now, tenant, id, lease_before])?;
        Ok(n == 1)
    }

    /// Marks at most `limit` pending records whose expiry passed as expired.
    pub async fn expire_deferred(&self, now: i64, limit: u32) -> Result<u64, StoreError> {
        let n = self
            .db
            .writer_async()
            .await
            .prepare_cached(
                "UPDATE deferred SET state = 'expired', resolve_time = expire_time WHERE rowid IN \
                 (SELECT rowid FROM deferred WHERE state = 'pending' AND expire_time IS NOT NULL AND expire_time <= ? LIMIT ?)",
            )?
            .execute(params![now, limit])?;
        Ok(n as u64)
    }

    /// Hands a pending record to the client: its record (now a client execution) and the
    /// approval that did it are stored, the state stays pending. Only once.
    pub async fn hand_to_client(&self, tenant: &str, id: &str, record: &str, resolution: &str) -> Result<Transition, StoreError> {
        let c = self.db.writer_async().await;
        let n = c
            .prepare_cached(
                "UPDATE deferred SET record = ?, resolution = ? WHERE tenant = ? AND deferred_id = ? AND state = 'pending' AND resolution IS NULL",
            )?
            .execute(params![record, resolution, tenant, id])?;
        moved_or_row(&c, n, tenant, id)
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
        let c = self.db.reader_async().await;
        let mut stmt = c.prepare_cached(&format!(
            "{DEFERRED_SELECT} WHERE tenant = ?1 AND agent_id = ?2 AND (?3 IS NULL OR run_id = ?3) \
             AND (?4 IS NULL OR state = ?4) \
             AND (create_time > ?5 OR (create_time = ?5 AND deferred_id > ?6)) \
             ORDER BY create_time, deferred_id LIMIT ?7"
        ))?;
        let rows = stmt.query_map(params![tenant, agent_id, run_id, state, after.0, after.1, limit], deferred_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Number of pending deferred records (all tenants), for metrics.
    pub async fn count_pending(&self) -> Result<u64, StoreError> {
        Ok(self
            .db
            .reader_async()
            .await
            .prepare_cached("SELECT COUNT(*) FROM deferred WHERE state = 'pending'")?
            .query_row([], |r| r.get::<_, i64>(0))? as u64)
    }

    // ----- per-user OAuth tokens, consents and registered clients -----

    /// Inserts or replaces the row of (tenant, user_id, source_id).
    pub async fn put_token(&self, tenant: &str, row: &TokenRow) -> Result<(), StoreError> {
        self.db
            .writer_async()
            .await
            .prepare_cached(
                "INSERT INTO oauth_tokens (tenant, user_id, source_id, server_url, sealed, expires_at, updated) VALUES (?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (tenant, user_id, source_id) DO UPDATE SET server_url = excluded.server_url, sealed = excluded.sealed, \
                 expires_at = excluded.expires_at, updated = excluded.updated",
            )?
            .execute(params![tenant, row.user_id, row.source_id, row.server_url, row.sealed, row.expires_at, row.updated])?;
        Ok(())
    }

    pub async fn get_token(&self, tenant: &str, user_id: &str, source_id: &str) -> Result<Option<TokenRow>, StoreError> {
        Ok(self
            .db
            .reader_async()
            .await
            .prepare_cached(
                "SELECT user_id, source_id, server_url, sealed, expires_at, updated FROM oauth_tokens \
                 WHERE tenant = ? AND user_id = ? AND source_id = ?",
            )?
            .query_row(params![tenant, user_id, source_id], token_from_row)
            .optional()?)
    }

    /// Replaces the row only if its `updated` is still `expected_updated` (never re-creates a
    /// deleted one). True when replaced.
    pub async fn replace_token(&self, tenant: &str, row: &TokenRow, expected_updated: i64) -> Result<bool, StoreError> {
        let n = self
            .db
            .writer_async()
            .await
            .prepare_cached(
                "UPDATE oauth_tokens SET server_url = ?, sealed = ?, expires_at = ?, updated = ? \
                 WHERE tenant = ? AND user_id = ? AND source_id = ? AND updated = ?",
            )?
            .execute(params![row.server_url, row.sealed, row.expires_at, row.updated, tenant, row.user_id, row.source_id, expected_updated])?;
        Ok(n == 1)
    }

    /// Deletes a user's tokens for one source, or for every source (`None`).
    pub async fn delete_tokens(&self, tenant: &str, user_id: &str, source_id: Option<&str>) -> Result<u64, StoreError> {
        let n = self
            .db
            .writer_async()
            .await
            .prepare_cached("DELETE FROM oauth_tokens WHERE tenant = ?1 AND user_id = ?2 AND (?3 IS NULL OR source_id = ?3)")?
            .execute(params![tenant, user_id, source_id])?;
        Ok(n as u64)
    }

    pub async fn insert_consent(&self, tenant: &str, row: &ConsentRow) -> Result<(), StoreError> {
        self.db
            .writer_async()
            .await
            .prepare_cached(
                "INSERT INTO oauth_consents (state_hash, tenant, user_id, agent_id, source_id, deferred_id, sealed, create_time, expire_time) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )?
            .execute(params![
                row.state_hash,
                tenant,
                row.user_id,
                row.agent_id,
                row.source_id,
                row.deferred_id,
                row.sealed,
                row.create_time,
                row.expire_time
            ])?;
        Ok(())
    }

    /// Deletes the consent as it reads it (one statement on the one writer: single use).
    pub async fn take_consent(&self, state_hash: &str) -> Result<Option<(String, ConsentRow)>, StoreError> {
        Ok(self
            .db
            .writer_async()
            .await
            .prepare_cached(
                "DELETE FROM oauth_consents WHERE state_hash = ? \
                 RETURNING tenant, state_hash, user_id, agent_id, source_id, deferred_id, sealed, create_time, expire_time",
            )?
            .query_row(params![state_hash], |r| {
                Ok((
                    r.get(0)?,
                    ConsentRow {
                        state_hash: r.get(1)?,
                        user_id: r.get(2)?,
                        agent_id: r.get(3)?,
                        source_id: r.get(4)?,
                        deferred_id: r.get(5)?,
                        sealed: r.get(6)?,
                        create_time: r.get(7)?,
                        expire_time: r.get(8)?,
                    },
                ))
            })
            .optional()?)
    }

    pub async fn get_oauth_client(&self, tenant: &str, issuer: &str, redirect_uri: &str) -> Result<Option<OAuthClientRow>, StoreError> {
        Ok(get_oauth_client_on(&*self.db.reader_async().await, tenant, issuer, redirect_uri)?)
    }

    /// Keeps the first registration: inserts unless one exists, then reads the stored row
    /// (on the writer, so the read sees the insert).
    pub async fn put_oauth_client(&self, tenant: &str, row: &OAuthClientRow) -> Result<OAuthClientRow, StoreError> {
        let c = self.db.writer_async().await;
        c.prepare_cached(
            "INSERT INTO oauth_clients (tenant, issuer, redirect_uri, client_id, sealed_secret, create_time) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT (tenant, issuer, redirect_uri) DO NOTHING",
        )?
        .execute(params![tenant, row.issuer, row.redirect_uri, row.client_id, row.sealed_secret, row.create_time])?;
        Ok(get_oauth_client_on(&c, tenant, &row.issuer, &row.redirect_uri)?.unwrap_or_else(|| row.clone()))
    }

    // ----- text embeddings (hybrid search) -----

    /// The embeddings of `model` for `hashes`, in their order (`None`: absent or malformed).
    /// Each chunk is read on a reader on the blocking pool; the rows it found unused for a day
    /// are then touched through the writer.
    pub async fn get_embeddings(&self, model: &str, hashes: &[String], now: i64) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let mut out = Vec::with_capacity(hashes.len());
        for chunk in hashes.chunks(EMBEDDING_CHUNK) {
            let (m, owned) = (model.to_string(), chunk.to_vec());
            let (vectors, stale) = self.read_blocking(move |c| Ok(read_embeddings(c, &m, &owned, now)?)).await?;
            out.extend(vectors);
            if !stale.is_empty() {
                let m = model.to_string();
                if let Err(e) = self.write_blocking(move |c| Ok(touch_embeddings(c, &m, &stale, now)?)).await {
                    tracing::warn!(error = %e, "touching embeddings failed");
                }
            }
        }
        Ok(out)
    }

    /// Inserts the embeddings not stored yet (a malformed stored one is replaced), one
    /// transaction per chunk on the writer (on the blocking pool: a chunk is hundreds of
    /// kilobytes).
    pub async fn put_embeddings(&self, model: &str, rows: &[(String, Vec<f32>)], now: i64) -> Result<(), StoreError> {
        for chunk in rows.chunks(EMBEDDING_CHUNK) {
            let model = model.to_string();
            let chunk: Vec<(String, i64, Vec<u8>)> = chunk.iter().map(|(h, v)| (h.clone(), v.len() as i64, vector_to_bytes(v))).collect();
            self.write_blocking(move |c| {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                {
                    let mut stmt = tx.prepare_cached(
                        "INSERT INTO embeddings (model, text_hash, dims, vector, used_at) VALUES (?, ?, ?, ?, ?) \
                         ON CONFLICT (model, text_hash) DO UPDATE SET dims = excluded.dims, vector = excluded.vector, used_at = excluded.used_at \
                         WHERE length(embeddings.vector) <> 4 * embeddings.dims",
                    )?;
                    for (hash, dims, bytes) in &chunk {
                        stmt.execute(params![model, hash, dims, bytes, now])?;
                    }
                }
                tx.commit()?;
                Ok(())
            })
            .await?;
        }
        Ok(())
    }

    // ----- retention -----

    /// Deletes at most `limit` rows of each kind older than `before`, then checkpoints and
    /// truncates the WAL if anything went.
    pub async fn purge(&self, before: i64, limit: u32) -> Result<Purged, StoreError> {
        let purged = {
            let mut c = self.db.writer_async().await;
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let calls = tx
                .prepare_cached("DELETE FROM tool_calls WHERE rowid IN (SELECT rowid FROM tool_calls WHERE update_time < ? LIMIT ?)")?
                .execute(params![before, limit])?;
            let deferred = tx
                .prepare_cached(
                    "DELETE FROM deferred WHERE rowid IN \
                     (SELECT rowid FROM deferred WHERE state IN ('resolved', 'expired') AND resolve_time < ? LIMIT ?)",
                )?
                .execute(params![before, limit])?;
            tx.commit()?;
            Purged { calls: calls as u64, deferred: deferred as u64, runs: 0 }
        };
        if purged.total() > 0 {
            self.truncate_wal().await;
        }
        Ok(purged)
    }

    /// Deletes at most `limit` consents that expired before `now` and at most `limit` tokens
    /// last written before `tokens_updated_before`, then checkpoints and truncates the WAL if
    /// anything went.
    pub async fn purge_oauth(&self, now: i64, tokens_updated_before: i64, limit: u32) -> Result<(u64, u64), StoreError> {
        let (consents, tokens) = {
            let mut c = self.db.writer_async().await;
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let consents = tx
                .prepare_cached("DELETE FROM oauth_consents WHERE rowid IN (SELECT rowid FROM oauth_consents WHERE expire_time < ? LIMIT ?)")?
                .execute(params![now, limit])?;
            let tokens = tx
                .prepare_cached("DELETE FROM oauth_tokens WHERE rowid IN (SELECT rowid FROM oauth_tokens WHERE updated < ? LIMIT ?)")?
                .execute(params![tokens_updated_before, limit])?;
            tx.commit()?;
            (consents as u64, tokens as u64)
        };
        if consents + tokens > 0 {
            self.truncate_wal().await;
        }
        Ok((consents, tokens))
    }

    /// Deletes at most `limit` embeddings unused since before `used_before`, then checkpoints
    /// and truncates the WAL if any went.
    pub async fn purge_embeddings(&self, used_before: i64, limit: u32) -> Result<u64, StoreError> {
        let n = self
            .db
            .writer_async()
            .await
            .prepare_cached("DELETE FROM embeddings WHERE rowid IN (SELECT rowid FROM embeddings WHERE used_at < ? LIMIT ?)")?
            .execute(params![used_before, limit])?;
        if n > 0 {
            self.truncate_wal().await;
        }
        Ok(n as u64)
    }

    /// Gives the file system back the space the WAL took after a purge (readers in progress
    /// may keep it from truncating all of it this time; the next pass does).
    async fn truncate_wal(&self) {
        if self.db.readers.is_empty() {
            return;
        }
        let db = self.db.clone();
        let truncated = tokio::task::spawn_blocking(move || db.writer().query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))).await;
        if let Ok(Err(e)) = truncated {
            tracing::warn!(error = %e, "WAL truncation failed");
        }
    }

    // ----- auto-pin usage -----

    /// Adds one successful call to a decayed count (`half_life_ms`).
    pub async fn record_use(&self, tenant: &str, agent_id: &str, user: &str, tool: &str, now: i64, half_life_ms: i64) -> Result<(), StoreError> {
        let mut c = self.db.writer_async().await;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let previous: Option<(f64, i64)> = tx
            .prepare_cached("SELECT score, last_update FROM tool_usage WHERE tenant = ? AND agent_id = ? AND user_id = ? AND tool_name = ?")?
            .query_row(params![tenant, agent_id, user, tool], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let score = previous.map_or(1.0, |(s, then)| decay(s, then, now, half_life_ms) + 1.0);
        tx.prepare_cached(
            "INSERT INTO tool_usage (tenant, agent_id, user_id, tool_name, score, last_update) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT DO UPDATE SET score = excluded.score, last_update = excluded.last_update",
        )?
        .execute(params![tenant, agent_id, user, tool, score, now])?;
        tx.commit()?;
        Ok(())
    }

    /// Decayed counts of a user's tools at `now`, highest first.
    pub async fn usage(&self, tenant: &str, agent_id: &str, user: &str, now: i64, half_life_ms: i64) -> Result<Vec<(String, f64)>, StoreError> {
        let c = self.db.reader_async().await;
        let mut stmt = c.prepare_cached("SELECT tool_name, score, last_update FROM tool_usage WHERE tenant = ? AND agent_id = ? AND user_id = ?")?;
        let rows =
            stmt.query_map(params![tenant, agent_id, user], |r| Ok((r.get::<_, String>(0)?, decay(r.get(1)?, r.get(2)?, now, half_life_ms))))?;
        let mut out: Vec<(String, f64)> = rows.collect::<Result<_, _>>()?;
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }
}

/// Checkpoints the WAL every [`CHECKPOINT_EVERY`] on its own connection (`PASSIVE`: it never
/// waits for, nor blocks, readers and the writer) until the database is dropped.
fn spawn_checkpointer(db: Weak<Db>, conn: Connection) {
    let spawned = std::thread::Builder::new().name("sqlite-checkpoint".into()).spawn(move || {
        loop {
            std::thread::sleep(CHECKPOINT_EVERY);
            if db.strong_count() == 0 {
                break;
            }
            if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                tracing::warn!(error = %e, "WAL checkpoint failed");
            }
        }
    });
    if let Err(e) = spawned {
        // The writer's own automatic checkpoints still bound the WAL.
        tracing::warn!(error = %e, "no background WAL checkpoints");
    }
}

fn call_state_on(c: &Connection, k: &CallKey) -> rusqlite::Result<Option<Claim>> {
    c.prepare_cached(&format!(
        "SELECT outcome, update_time, COALESCE(lease_until, update_time + {LEGACY_LEASE_MS}), fingerprint FROM tool_calls \
         WHERE tenant = ? AND agent_id = ? AND run_id = ? AND tool_call_id = ?"
    ))?
    .query_row(params![k.tenant, k.agent_id, k.run_id, k.call_id], |r| {
        let fingerprint = r.get(3)?;
        Ok(match r.get::<_, Option<String>>(0)? {
            Some(outcome) => Claim::Done { outcome, fingerprint },
            None => Claim::Running { since: r.get(1)?, lease_until: r.get(2)?, fingerprint },
        })
    })
    .optional()
}

/// Applies the migrations the file lacks, in one transaction (processes opening the same
/// file at once take turns).
fn migrate(c: &mut Connection) -> Result<(), StoreError> {
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let applied: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for sql in MIGRATIONS.iter().skip(applied.max(0) as usize) {
        tx.execute_batch(sql)?;
    }
    if applied < MIGRATIONS.len() as i64 {
        tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64)?;
    } else if applied > MIGRATIONS.len() as i64 {
        tracing::warn!(file = applied, this_build = MIGRATIONS.len(), "the store's schema is newer than this build knows; running anyway");
    }
    tx.commit()?;
    Ok(())
}

/// Adds `delta` to a tenant's run counter.
fn count_runs(tx: &rusqlite::Transaction<'_>, tenant: &str, delta: i64) -> rusqlite::Result<()> {
    if delta != 0 {
        tx.prepare_cached(
            "INSERT INTO tenant_runs (tenant, runs) VALUES (?1, MAX(?2, 0)) ON CONFLICT (tenant) DO UPDATE SET runs = MAX(runs + ?2, 0)",
        )?
        .execute(params![tenant, delta])?;
    }
    Ok(())
}

const DEFERRED_SELECT: &str = "SELECT deferred_id, agent_id, version, run_id, state, record, resolution, result, create_time, resolve_time, \
     lease_until, expire_time FROM deferred";

fn get_deferred_on(c: &Connection, tenant: &str, id: &str) -> Result<Option<DeferredRow>, StoreError> {
    Ok(c.prepare_cached(&format!("{DEFERRED_SELECT} WHERE tenant = ? AND deferred_id = ?"))?
        .query_row(params![tenant, id], deferred_from_row)
        .optional()?)
}

/// After a conditional update of a deferred record: moved, or the row as it is.
fn moved_or_row(c: &Connection, updated: usize, tenant: &str, id: &str) -> Result<Transition, StoreError> {
    if updated == 1 {
        return Ok(Transition::Moved);
    }
    Ok(match get_deferred_on(c, tenant, id)? {
        Some(row) => Transition::Already(row),
        None => Transition::Missing,
    })
}

fn deferred_from_row(r: &Row<'_>) -> rusqlite::Result<DeferredRow> {
    Ok(DeferredRow {
        deferred_id: r.get(0)?,
        agent_id: r.get(1)?,
        version: r.get(2)?,
        run_id: r.get(3)?,
        state: r.get(4)?,
        record: r.get(5)?,
        resolution: r.get(6)?,
        result: r.get(7)?,
        create_time: r.get(8)?,
        resolve_time: r.get(9)?,
        lease_until: r.get(10)?,
        expire_time: r.get(11)?,
    })
}

fn token_from_row(r: &Row<'_>) -> rusqlite::Result<TokenRow> {
    Ok(TokenRow { user_id: r.get(0)?, source_id: r.get(1)?, server_url: r.get(2)?, sealed: r.get(3)?, expires_at: r.get(4)?, updated: r.get(5)? })
}

fn get_oauth_client_on(c: &Connection, tenant: &str, issuer: &str, redirect_uri: &str) -> rusqlite::Result<Option<OAuthClientRow>> {
    c.prepare_cached(
        "SELECT issuer, redirect_uri, client_id, sealed_secret, create_time FROM oauth_clients WHERE tenant = ? AND issuer = ? AND redirect_uri = ?",
    )?
    .query_row(params![tenant, issuer, redirect_uri], |r| {
        Ok(OAuthClientRow { issuer: r.get(0)?, redirect_uri: r.get(1)?, client_id: r.get(2)?, sealed_secret: r.get(3)?, create_time: r.get(4)? })
    })
    .optional()
}

/// `n` comma-separated `?` placeholders.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// One chunk of [`SqliteStore::get_embeddings`]: the vectors in the order asked (`None`:
/// absent or malformed), and the hashes of the rows to touch.
type ChunkRead = (Vec<Option<Vec<f32>>>, Vec<String>);

fn read_embeddings(c: &Connection, model: &str, hashes: &[String], now: i64) -> rusqlite::Result<ChunkRead> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT text_hash, dims, vector, used_at FROM embeddings WHERE model = ? AND text_hash IN ({})",
        placeholders(hashes.len())
    ))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(std::iter::once(model).chain(hashes.iter().map(String::as_str))))?;
    let mut found = std::collections::HashMap::with_capacity(hashes.len());
    let mut stale = Vec::new();
    while let Some(r) = rows.next()? {
        let hash: String = r.get(0)?;
        let vector = match r.get_ref(2)? {
            rusqlite::types::ValueRef::Blob(bytes) => vector_from_bytes(r.get(1)?, bytes),
            _ => None,
        };
        let Some(vector) = vector else { continue };
        if r.get::<_, i64>(3)? < now - EMBEDDING_TOUCH_AFTER_MS {
            stale.push(hash.clone());
        }
        found.insert(hash, vector);
    }
    Ok((hashes.iter().map(|h| found.get(h).cloned()).collect(), stale))
}

/// Moves `used_at` of the rows of `hashes` still unused for a day to `now`.
fn touch_embeddings(c: &Connection, model: &str, hashes: &[String], now: i64) -> rusqlite::Result<usize> {
    let cutoff = now - EMBEDDING_TOUCH_AFTER_MS;
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![&now, &model, &cutoff];
    values.extend(hashes.iter().map(|h| h as &dyn rusqlite::ToSql));
    c.prepare_cached(&format!("UPDATE embeddings SET used_at = ? WHERE model = ? AND used_at < ? AND text_hash IN ({})", placeholders(hashes.len())))?
        .execute(&*values)
}

fn version_from_row(agent_id: &str, r: &Row<'_>) -> rusqlite::Result<VersionRecord> {
    let version: u32 = r.get(0)?;
    Ok(VersionRecord {
        agent_id: agent_id.into(),
        version,
        is_default: r.get::<_, u32>(3)? == version,
        definition: r.get(1)?,
        create_time: r.get(2)?,
    })
}

fn set_default_tx(tx: &rusqlite::Transaction<'_>, tenant: &str, agent_id: &str, version: u32, now: i64) -> rusqlite::Result<()> {
    tx.execute("UPDATE agents SET default_version = ?, update_time = ? WHERE tenant = ? AND agent_id = ?", params![version, now, tenant, agent_id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settle;

    fn key(call_id: &str) -> CallKey {
        CallKey::new("t", "a", "run", call_id)
    }

    fn request(now: i64) -> ClaimRequest {
        ClaimRequest { fingerprint: "f".into(), owner: "me".into(), now, lease_until: now + 100 }
    }

    /// Starts a claim on a task of its own and lets it reach the queue (the writer is held).
    async fn queued_claim(store: &SqliteStore, call_id: &'static str, now: i64) -> tokio::task::JoinHandle<Result<Claim, StoreError>> {
        let s = store.clone();
        let task = tokio::spawn(async move { s.claim_call(&key(call_id), &request(now)).await });
        settle().await;
        task
    }

    /// Group commit: claims made in one scheduler turn wait for it to end, then share one
    /// transaction, even with the writer free when each is made.
    #[tokio::test(flavor = "current_thread")]
    async fn claims_made_in_one_scheduler_turn_are_written_in_one_transaction() {
        let store = SqliteStore::open("sqlite::memory:").await.expect("open");
        let keys: Vec<CallKey> = (0..8).map(|i| key(&format!("call-{i}"))).collect();
        let req = request(1);
        let before = store.db.batches.load(Ordering::Relaxed);
        let claims = futures::future::join_all(keys.iter().map(|k| store.claim_call(k, &req))).await;
        assert!(claims.iter().all(|c| matches!(c, Ok(Claim::New))), "{claims:?}");
        assert_eq!(store.db.batches.load(Ordering::Relaxed) - before, 1, "eight claims, one transaction");
    }

    #[tokio::test]
    async fn a_queued_claim_is_written_when_the_waiter_handed_the_writer_is_cancelled() {
        let store = SqliteStore::open("sqlite::memory:").await.expect("open");
        let held = store.hold_writer().await;
        // C waits for the writer, then is cancelled after the writer was handed to it.
        let db = store.db.clone();
        let waiter = tokio::spawn(async move { drop(db.writer_async().await) });
        settle().await;
        // A's claim is queued while the writer is taken.
        let claim = queued_claim(&store, "call-1", 1).await;
        drop(held); // hands the writer to C, so the queue cannot be written on letting go
        waiter.abort();
        let claimed = tokio::time::timeout(Duration::from_secs(5), claim).await;
        assert!(matches!(claimed, Ok(Ok(Ok(Claim::New)))), "the claim was never written: {claimed:?}");
    }

    #[tokio::test]
    async fn claims_and_outcomes_queued_together_are_written_in_order() {
        let store = SqliteStore::open("sqlite::memory:").await.expect("open");
        let held = store.hold_writer().await;
        // Queued one after the other while the writer is taken: one batch, in queue order.
        let first = queued_claim(&store, "c1", 1).await;
        let duplicate = queued_claim(&store, "c1", 2).await;
        let s = store.clone();
        let finish = tokio::spawn(async move { s.finish_call(&key("c1"), "outcome", 3).await });
        settle().await;
        let after = queued_claim(&store, "c1", 4).await;
        drop(held);
        assert_eq!(first.await.expect("join").expect("claim"), Claim::New);
        assert_eq!(duplicate.await.expect("join").expect("claim"), Claim::Running { since: 1, lease_until: 101, fingerprint: Some("f".into()) });
        finish.await.expect("join").expect("finish");
        assert_eq!(after.await.expect("join").expect("claim"), Claim::Done { outcome: "outcome".into(), fingerprint: Some("f".into()) });
    }

    /// Rows of a version without leases: the claim is held for the old claim timeout after its
    /// last update, so a rolling upgrade never expires a call an older replica still runs.
    #[tokio::test]
    async fn a_claim_written_before_leases_were_kept_is_held_for_the_old_claim_timeout() {
        let store = SqliteStore::open("sqlite::memory:").await.expect("open");
        store.claim_call(&key("legacy"), &request(1_000)).await.expect("claim");
        store.db.writer_async().await.execute("UPDATE tool_calls SET lease_until = NULL, fingerprint = NULL", []).expect("legacy row");
        let held_until = 1_000 + LEGACY_LEASE_MS;
        assert_eq!(
            store.call_state(&key("legacy")).await.expect("state"),
            Some(Claim::Running { since: 1_000, lease_until: held_until, fingerprint: None })
        );
        assert!(!store.expire_call(&key("legacy"), "lost", held_until - 1, Some(held_until - 1)).await.expect("expire"));
        assert!(store.expire_call(&key("legacy"), "lost", held_until + 1, Some(held_until + 1)).await.expect("expire"));
    }

    #[tokio::test]
    async fn a_file_of_the_first_schema_is_migrated_and_keeps_its_rows() {
        let dir = std::env::temp_dir().join(format!("toolrouter-migrate-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("old.db");
        {
            let c = Connection::open(&file).expect("file");
            c.execute_batch(MIGRATIONS[0]).expect("first schema");
            c.execute("INSERT INTO runs (tenant, agent_id, run_id, version, last_seen) VALUES ('t', 'a', 'r', 1, 5)", []).expect("a run");
        }
        let store = SqliteStore::open(&format!("sqlite://{}", file.display())).await.expect("migrated");
        assert_eq!(store.live_runs("t").await.expect("counted"), 1, "the counter starts from the runs there");
        assert_eq!(store.run_version("t", "a", "r", 0).await.expect("run"), Some(1));
        drop(store);
        SqliteStore::open(&format!("sqlite://{}", file.display())).await.expect("opened again: nothing applied twice");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A database file (in a fresh directory) at schema version `n`: the first `n` migrations.
    fn file_at_schema(n: usize) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("toolrouter-migrate-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join(format!("v{n}.db"));
        let c = Connection::open(&file).expect("file");
        for sql in &MIGRATIONS[..n] {
            c.execute_batch(sql).expect("earlier schema");
        }
        c.pragma_update(None, "user_version", n as i64).expect("version");
        (dir, file)
    }

    /// A file of the previous build (migrations 1 and 2) gains the OAuth tables.
    #[tokio::test]
    async fn a_file_of_the_second_schema_gains_the_oauth_tables() {
        let (dir, file) = file_at_schema(2);
        let store = SqliteStore::open(&format!("sqlite://{}", file.display())).await.expect("migrated");
        let row = TokenRow {
            user_id: "u".into(),
            source_id: "s".into(),
            server_url: "https://mcp.example".into(),
            sealed: "x".into(),
            expires_at: None,
            updated: 1,
        };
        store.put_token("t", &row).await.expect("the token table exists");
        assert_eq!(store.get_token("t", "u", "s").await.expect("read"), Some(row));
        let version: i64 = store.db.writer_async().await.query_row("PRAGMA user_version", [], |r| r.get(0)).expect("version");
        assert_eq!(version, MIGRATIONS.len() as i64);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file of the previous build (migrations 1 to 3) gains the embeddings table and keeps
    /// its OAuth rows.
    #[tokio::test]
    async fn a_file_of_the_third_schema_gains_the_embeddings_table() {
        let (dir, file) = file_at_schema(3);
        Connection::open(&file)
            .expect("file")
            .execute("INSERT INTO oauth_clients VALUES ('t', 'https://as', 'https://cb', 'client', '', 1)", [])
            .expect("a row of migration 3");
        let store = SqliteStore::open(&format!("sqlite://{}", file.display())).await.expect("migrated");
        store.put_embeddings("m", &[("h".into(), vec![1.5, -2.0])], 1).await.expect("the embeddings table exists");
        assert_eq!(store.get_embeddings("m", &["h".into()], 1).await.expect("read"), vec![Some(vec![1.5, -2.0])]);
        assert_eq!(store.get_oauth_client("t", "https://as", "https://cb").await.expect("read").map(|c| c.client_id), Some("client".into()));
        let version: i64 = store.db.writer_async().await.query_row("PRAGMA user_version", [], |r| r.get(0)).expect("version");
        assert_eq!(version, MIGRATIONS.len() as i64);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A stored blob whose length is not `4 * dims` reads as absent, is not touched, and the
    /// next put of its hash replaces it (a well-formed row is never replaced).
    #[tokio::test]
    async fn a_malformed_embedding_reads_as_absent_and_is_replaced_by_the_next_put() {
        let store = SqliteStore::open("sqlite::memory:").await.expect("open");
        store
            .db
            .writer_async()
            .await
            .execute("INSERT INTO embeddings (model, text_hash, dims, vector, used_at) VALUES ('m', 'bad', 3, x'0000803f', 0)", [])
            .expect("a malformed row");
        let day = EMBEDDING_TOUCH_AFTER_MS;
        assert_eq!(store.get_embeddings("m", &["bad".into()], 10 * day).await.expect("read"), vec![None]);
        let used_at: i64 = store.db.writer_async().await.query_row("SELECT used_at FROM embeddings", [], |r| r.get(0)).expect("row");
        assert_eq!(used_at, 0, "an absent row is not touched");
        store.put_embeddings("m", &[("bad".into(), vec![1.0, 2.0, 3.0])], 10 * day).await.expect("put");
        assert_eq!(store.get_embeddings("m", &["bad".into()], 10 * day).await.expect("read"), vec![Some(vec![1.0, 2.0, 3.0])]);
        store.put_embeddings("m", &[("bad".into(), vec![4.0])], 10 * day).await.expect("put");
        assert_eq!(store.get_embeddings("m", &["bad".into()], 10 * day).await.expect("read"), vec![Some(vec![1.0, 2.0, 3.0])], "first wins");
    }

    #[tokio::test]
    async fn a_failed_statement_fails_its_whole_batch_and_writes_nothing() {
        let store = SqliteStore::open("sqlite::memory:").await.expect("open");
        // An insert that fails (the statement aborts; the transaction would go on).
        store
            .db
            .writer_async()
            .await
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON tool_calls WHEN NEW.tool_call_id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END;",
            )
            .expect("trigger");
        let held = store.hold_writer().await;
        let good = queued_claim(&store, "good", 1).await;
        let bad = queued_claim(&store, "bad", 1).await;
        drop(held);
        assert!(matches!(good.await.expect("join"), Err(StoreError::Batch(_))), "the batch failed as a whole");
        assert!(matches!(bad.await.expect("join"), Err(StoreError::Batch(_))));
        assert_eq!(store.call_state(&key("good")).await.expect("state"), None, "nothing of the batch was written");
    }
}
