//! The per-tenant limit on live runs (SPEC §8 runs, §9 limits), checked when a run starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::store::Store;

/// A run this replica saw recently is not looked up again for this long.
const KNOWN_FOR: Duration = Duration::from_secs(30);
/// Past this many remembered runs the memory is cleared (they are only looked up again).
const MAX_KNOWN: usize = 100_000;

type RunKey = (String, String, String);

pub struct RunQuota {
    store: Store,
    /// 0 = no limit.
    max: u64,
    run_idle: Duration,
    clock: Arc<dyn Clock>,
    known: Mutex<HashMap<RunKey, Instant>>,
}

impl RunQuota {
    pub fn new(store: Store, max: u64, run_idle: Duration, clock: Arc<dyn Clock>) -> Self {
        Self { store, max, run_idle, clock, known: Mutex::new(HashMap::new()) }
    }

    /// Lets a call of `run_id` through unless it starts a new run while the tenant is at its
    /// limit. Runs already live always pass. Concurrent first calls of different new runs may
    /// overshoot the limit by their number: it bounds growth, it is not a counter.
    pub async fn admit(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<()> {
        if self.max == 0 || run_id.is_empty() {
            return Ok(());
        }
        let key = (tenant.to_string(), agent_id.to_string(), run_id.to_string());
        let now = Instant::now();
        if self.known.lock().unwrap_or_else(|e| e.into_inner()).get(&key).is_some_and(|t| now.duration_since(*t) < KNOWN_FOR) {
            return Ok(());
        }
        let expired_before = self.clock.now_ms() - self.run_idle.as_millis() as i64;
        if self.store.run_version(tenant, agent_id, run_id, expired_before).await?.is_none() {
            let live = self.store.live_runs(tenant).await?;
            if live >= self.max {
                return Err(Error::ResourceExhausted(format!(
                    "this tenant has {live} live runs, its limit: end finished runs with EndRun or wait for idle runs to expire"
                )));
            }
        }
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() >= MAX_KNOWN {
            known.clear();
        }
        known.insert(key, now);
        Ok(())
    }

    /// The run ended: its next call counts as a new run again.
    pub fn ended(&self, tenant: &str, agent_id: &str, run_id: &str) {
        let key = (tenant.to_string(), agent_id.to_string(), run_id.to_string());
        self.known.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
    }
}
