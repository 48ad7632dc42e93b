-- Migration 2: leases on claims and executing records, fingerprints of calls, expiry of
-- pending records, a run counter per tenant, frozen hot tools per run, and the indexes
-- retention needs. Leases of rows from earlier versions stay NULL (read as their last update
-- plus the old claim timeout).
ALTER TABLE tool_calls ADD COLUMN owner TEXT;
ALTER TABLE tool_calls ADD COLUMN lease_until INTEGER;
ALTER TABLE tool_calls ADD COLUMN fingerprint TEXT;
CREATE INDEX IF NOT EXISTS tool_calls_by_time ON tool_calls (update_time);
ALTER TABLE deferred ADD COLUMN owner TEXT;
ALTER TABLE deferred ADD COLUMN lease_until INTEGER;
ALTER TABLE deferred ADD COLUMN expire_time INTEGER;
CREATE INDEX IF NOT EXISTS deferred_done_by_time ON deferred (resolve_time) WHERE state IN ('resolved', 'expired');
CREATE INDEX IF NOT EXISTS deferred_expiring ON deferred (expire_time) WHERE state = 'pending' AND expire_time IS NOT NULL;
ALTER TABLE runs ADD COLUMN hot TEXT;
CREATE INDEX IF NOT EXISTS runs_by_last_seen ON runs (last_seen);
CREATE TABLE IF NOT EXISTS tenant_runs (tenant TEXT PRIMARY KEY, runs INTEGER NOT NULL);
INSERT INTO tenant_runs (tenant, runs) SELECT tenant, COUNT(*) FROM runs GROUP BY tenant;
