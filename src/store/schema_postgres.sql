-- The PostgreSQL schema of toolrouter, as numbered migrations. At start-up each replica
-- applies the ones its database lacks, in one transaction holding an advisory lock, and
-- records them in schema_migrations (see postgres.rs). Append new migrations at the end
-- under a new "-- migration N: …" line; never edit one that has shipped.
--
-- The same tables and columns as schema_sqlite.sql: BIGINT where SQLite has INTEGER, DOUBLE
-- PRECISION for the usage score, and COLLATE "C" on the text keys, so that ordering and
-- paging compare bytes as SQLite does, whatever the database's locale.

-- migration 1: agents, versions, runs, tool calls, deferred records, usage counts
CREATE TABLE agents (
    tenant TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    default_version BIGINT NOT NULL,
    latest_version BIGINT NOT NULL,
    create_time BIGINT NOT NULL,
    update_time BIGINT NOT NULL,
    PRIMARY KEY (tenant, agent_id)
);
CREATE TABLE agent_versions (
    tenant TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    definition TEXT NOT NULL,
    create_time BIGINT NOT NULL,
    PRIMARY KEY (tenant, agent_id, version)
);
CREATE TABLE runs (
    tenant TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    run_id TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    PRIMARY KEY (tenant, agent_id, run_id)
);
CREATE INDEX runs_by_last_seen ON runs (last_seen);
CREATE TABLE tool_calls (
    tenant TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    run_id TEXT COLLATE "C" NOT NULL,
    tool_call_id TEXT COLLATE "C" NOT NULL,
    outcome TEXT,
    update_time BIGINT NOT NULL,
    PRIMARY KEY (tenant, agent_id, run_id, tool_call_id)
);
CREATE TABLE deferred (
    tenant TEXT COLLATE "C" NOT NULL,
    deferred_id TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    run_id TEXT COLLATE "C" NOT NULL,
    state TEXT COLLATE "C" NOT NULL,
    record TEXT NOT NULL,
    resolution TEXT,
    result TEXT,
    create_time BIGINT NOT NULL,
    resolve_time BIGINT,
    PRIMARY KEY (tenant, deferred_id)
);
CREATE INDEX deferred_by_agent ON deferred (tenant, agent_id, create_time, deferred_id);
CREATE INDEX deferred_pending ON deferred (state) WHERE state = 'pending';
CREATE TABLE tool_usage (
    tenant TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    tool_name TEXT COLLATE "C" NOT NULL,
    score DOUBLE PRECISION NOT NULL,
    last_update BIGINT NOT NULL,
    PRIMARY KEY (tenant, agent_id, user_id, tool_name)
);

-- migration 2: leases on claims and executing records, fingerprints of calls, expiry of pending records, run counters, frozen hot tools, retention indexes
-- Leases of rows from earlier versions stay NULL (read as their last update plus the old
-- claim timeout), so a rolling upgrade never expires a call an older replica still runs.
ALTER TABLE tool_calls ADD COLUMN owner TEXT;
ALTER TABLE tool_calls ADD COLUMN lease_until BIGINT;
ALTER TABLE tool_calls ADD COLUMN fingerprint TEXT;
CREATE INDEX tool_calls_by_time ON tool_calls (update_time);
ALTER TABLE deferred ADD COLUMN owner TEXT;
ALTER TABLE deferred ADD COLUMN lease_until BIGINT;
ALTER TABLE deferred ADD COLUMN expire_time BIGINT;
CREATE INDEX deferred_done_by_time ON deferred (resolve_time) WHERE state IN ('resolved', 'expired');
CREATE INDEX deferred_expiring ON deferred (expire_time) WHERE state = 'pending' AND expire_time IS NOT NULL;
ALTER TABLE runs ADD COLUMN hot TEXT;
CREATE TABLE tenant_runs (tenant TEXT COLLATE "C" PRIMARY KEY, runs BIGINT NOT NULL);
INSERT INTO tenant_runs (tenant, runs) SELECT tenant, COUNT(*) FROM runs GROUP BY tenant;

-- migration 3: per-user OAuth consent for MCP sources: tokens, consents in progress, registered clients
-- Everything secret arrives sealed (opaque base64 text). Consents are found by the hash of
-- their state alone (the redirect back carries no tenant) and taken once (DELETE … RETURNING).
CREATE TABLE oauth_tokens (
    tenant TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    source_id TEXT COLLATE "C" NOT NULL,
    server_url TEXT NOT NULL,
    sealed TEXT NOT NULL,
    expires_at BIGINT,
    updated BIGINT NOT NULL,
    PRIMARY KEY (tenant, user_id, source_id)
);
CREATE INDEX oauth_tokens_by_updated ON oauth_tokens (updated);
CREATE TABLE oauth_consents (
    state_hash TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    tenant TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    source_id TEXT COLLATE "C" NOT NULL,
    deferred_id TEXT COLLATE "C" NOT NULL,
    sealed TEXT NOT NULL,
    create_time BIGINT NOT NULL,
    expire_time BIGINT NOT NULL
);
CREATE INDEX oauth_consents_by_expiry ON oauth_consents (expire_time);
CREATE TABLE oauth_clients (
    tenant TEXT COLLATE "C" NOT NULL,
    issuer TEXT COLLATE "C" NOT NULL,
    redirect_uri TEXT COLLATE "C" NOT NULL,
    client_id TEXT NOT NULL,
    sealed_secret TEXT NOT NULL,
    create_time BIGINT NOT NULL,
    PRIMARY KEY (tenant, issuer, redirect_uri)
);

-- migration 4: text embeddings for hybrid search, one per (embedding model, hex SHA-256 of the text)
-- Shared by every version, tenant and replica that meets the same text again. `vector` holds
-- `dims` little-endian f32s; reads move `used_at` (ms) forward at most once a day, and it is
-- the clock of the retention of texts no catalog has used for a while.
CREATE TABLE embeddings (
    model TEXT COLLATE "C" NOT NULL,
    text_hash TEXT COLLATE "C" NOT NULL,
    dims INTEGER NOT NULL,
    vector BYTEA NOT NULL,
    used_at BIGINT NOT NULL,
    PRIMARY KEY (model, text_hash)
);
CREATE INDEX embeddings_by_used_at ON embeddings (used_at);
