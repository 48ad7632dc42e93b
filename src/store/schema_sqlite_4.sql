-- Migration 4: text embeddings for hybrid search, one per (embedding model, distinct text),
-- shared by every version, tenant and process that meets the same text again. `text_hash`
-- is the hex SHA-256 of the text, `vector` its `dims` little-endian f32s; `used_at` (ms) is
-- moved forward by reads at most once a day and is the clock of the retention of texts no
-- catalog has used for a while.
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL,
    used_at INTEGER NOT NULL,
    PRIMARY KEY (model, text_hash)
);
CREATE INDEX IF NOT EXISTS embeddings_by_used_at ON embeddings (used_at);
