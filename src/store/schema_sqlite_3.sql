-- Migration 3: per-user OAuth consent for MCP sources. Everything secret arrives sealed
-- (opaque base64 text); the store never sees a token or a state in the clear.
-- A user's tokens for one source: (tenant, user, source) is the key, so one user's rows are a
-- prefix of it (disconnecting every source); `updated` is the compare-and-swap of refreshes
-- and the clock of the retention of unused tokens.
CREATE TABLE IF NOT EXISTS oauth_tokens (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    server_url TEXT NOT NULL,
    sealed TEXT NOT NULL,
    expires_at INTEGER,
    updated INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, source_id)
);
CREATE INDEX IF NOT EXISTS oauth_tokens_by_updated ON oauth_tokens (updated);
-- Consents in progress, found by the hash of their state (the redirect back carries no
-- tenant) and taken once.
CREATE TABLE IF NOT EXISTS oauth_consents (
    state_hash TEXT NOT NULL PRIMARY KEY,
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    deferred_id TEXT NOT NULL,
    sealed TEXT NOT NULL,
    create_time INTEGER NOT NULL,
    expire_time INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS oauth_consents_by_expiry ON oauth_consents (expire_time);
-- Clients registered with authorization servers (dynamic client registration): the first
-- registration of (tenant, issuer, redirect URI) is kept.
CREATE TABLE IF NOT EXISTS oauth_clients (
    tenant TEXT NOT NULL,
    issuer TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    client_id TEXT NOT NULL,
    sealed_secret TEXT NOT NULL,
    create_time INTEGER NOT NULL,
    PRIMARY KEY (tenant, issuer, redirect_uri)
);
