CREATE TABLE IF NOT EXISTS agents (
    tenant TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    default_version INTEGER NOT NULL,
    latest_version INTEGER NOT NULL,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL,
    PRIMARY KEY (tenant, agent_id)
);
CREATE TABLE IF NOT EXISTS agent_versions (
    tenant TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    definition TEXT NOT NULL,
    create_time INTEGER NOT NULL,
    PRIMARY KEY (tenant, agent_id, version)
);
CREATE TABLE IF NOT EXISTS runs (
    tenant TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    PRIMARY KEY (tenant, agent_id, run_id)
);
CREATE TABLE IF NOT EXISTS tool_calls (
    tenant TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    outcome TEXT,
    update_time INTEGER NOT NULL,
    PRIMARY KEY (tenant, agent_id, run_id, tool_call_id)
);
CREATE TABLE IF NOT EXISTS deferred (
    tenant TEXT NOT NULL,
    deferred_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    state TEXT NOT NULL,
    record TEXT NOT NULL,
    resolution TEXT,
    result TEXT,
    create_time INTEGER NOT NULL,
    resolve_time INTEGER,
    PRIMARY KEY (tenant, deferred_id)
);
CREATE INDEX IF NOT EXISTS deferred_by_agent ON deferred (tenant, agent_id, create_time);
CREATE TABLE IF NOT EXISTS tool_usage (
    tenant TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    score REAL NOT NULL,
    last_update INTEGER NOT NULL,
    PRIMARY KEY (tenant, agent_id, user_id, tool_name)
);
