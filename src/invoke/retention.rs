//! Retention (SPEC §8): everything a run leaves behind — call records, resolved and expired
//! deferred records, idle runs — is deleted after its time, in small batches so no pass holds
//! the store for long; pending records past their expiry become expired. Exactly-once holds
//! within the retention time. Stored text embeddings no catalog has read for a while go too.

use std::time::Duration;

use super::Router;
use crate::error::Result;

/// Rows one statement deletes, and statements of each kind one pass runs at most (the next
/// pass goes on where it stopped).
const BATCH: u32 = 1_000;
const MAX_BATCHES: u32 = 100;

/// Stored text embeddings unused this long are deleted. The rows of live catalogs never get
/// this old: every read of them by `get_embeddings` moves their `used_at` forward (at most
/// once a day); a forgotten text that comes back is only embedded again.
const EMBEDDING_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub runs: u64,
    pub expired_deferred: u64,
    pub calls: u64,
    pub deferred: u64,
    pub embeddings: u64,
}

impl Router {
    /// One maintenance pass: forgets idle runs, expires pending records past their expiry,
    /// deletes records older than `retention`, and embeddings unused for
    /// `EMBEDDING_RETENTION`.
    pub async fn sweep(&self, retention: Duration) -> Result<Swept> {
        let store = self.registry.store();
        let mut swept = Swept::default();
        let idle_before = self.now() - self.config.run_idle.as_millis() as i64;
        for _ in 0..MAX_BATCHES {
            let n = store.expire_runs(idle_before, BATCH).await?;
            swept.runs += n;
            if n < BATCH as u64 {
                break;
            }
        }
        for _ in 0..MAX_BATCHES {
            let n = store.expire_deferred(self.now(), BATCH).await?;
            swept.expired_deferred += n;
            if n < BATCH as u64 {
                break;
            }
        }
        if swept.expired_deferred > 0 {
            crate::telemetry::metrics::deferred_changed();
        }
        let before = self.now().saturating_sub(retention.as_millis() as i64);
        for _ in 0..MAX_BATCHES {
            let purged = store.purge(before, BATCH).await?;
            swept.calls += purged.calls;
            swept.deferred += purged.deferred;
            if purged.calls < BATCH as u64 && purged.deferred < BATCH as u64 {
                break;
            }
        }
        // Expired consents and users' tokens unused past their TTL.
        if let Some(consents) = self.upstream.consents() {
            for _ in 0..MAX_BATCHES {
                let (c, t) = consents.purge(BATCH).await.map_err(crate::error::Error::Internal)?;
                if c < BATCH as u64 && t < BATCH as u64 {
                    break;
                }
            }
        }
        let unused_before = self.now().saturating_sub(EMBEDDING_RETENTION.as_millis() as i64);
        for _ in 0..MAX_BATCHES {
            let n = store.purge_embeddings(unused_before, BATCH).await?;
            swept.embeddings += n;
            if n < BATCH as u64 {
                break;
            }
        }
        Ok(swept)
    }
}
