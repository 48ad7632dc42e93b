//! Per-tenant request rate: one token bucket per tenant, in this replica.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Requests per second and burst; `per_second == 0` turns the limit off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

impl RateLimit {
    pub const OFF: RateLimit = RateLimit { per_second: 0.0, burst: 0 };

    pub fn is_off(&self) -> bool {
        self.per_second <= 0.0
    }
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

pub struct RateLimiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// Tenants come from the key file, so the map is small; still, past this many idle buckets
/// are dropped (a dropped bucket comes back full, which only forgives a burst).
const MAX_BUCKETS: usize = 100_000;

impl RateLimiter {
    pub fn new(limit: RateLimit) -> Self {
        Self { limit, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one token from the tenant's bucket, or says how long until one is available.
    pub fn check(&self, tenant: &str) -> Result<(), Duration> {
        self.check_at(tenant, Instant::now())
    }

    fn check_at(&self, tenant: &str, now: Instant) -> Result<(), Duration> {
        if self.limit.is_off() {
            return Ok(());
        }
        let rate = self.limit.per_second;
        let burst = f64::from(self.limit.burst.max(1));
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(tenant) {
            buckets.retain(|_, b| now.duration_since(b.last).as_secs_f64() * rate < burst);
        }
        let b = buckets.entry(tenant.to_string()).or_insert(Bucket { tokens: burst, last: now });
        b.tokens = (b.tokens + now.saturating_duration_since(b.last).as_secs_f64() * rate).min(burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - b.tokens) / rate).max(Duration::from_millis(1)))
        }
    }
}

/// Request limits (SPEC §9). The query limit is fixed: `control::discovery::MAX_QUERY_BYTES`.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub max_message_bytes: usize,
    pub max_schema_bytes: usize,
    pub max_schema_depth: usize,
    pub max_arguments_bytes: usize,
    pub rate: RateLimit,
    pub max_runs_per_tenant: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // Room for a definition at the default 16 MiB limit and its request envelope.
            max_message_bytes: 17 * 1024 * 1024,
            max_schema_bytes: 256 * 1024,
            max_schema_depth: 64,
            max_arguments_bytes: 1024 * 1024,
            // Above the SPEC's 10,000 calls/s per replica, so one tenant can reach it.
            rate: RateLimit { per_second: 10_000.0, burst: 20_000 },
            max_runs_per_tenant: 100_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_the_rate_per_tenant() {
        let l = RateLimiter::new(RateLimit { per_second: 10.0, burst: 3 });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.check_at("a", t0).is_ok());
        }
        let wait = l.check_at("a", t0).unwrap_err();
        assert!(wait > Duration::from_millis(90) && wait <= Duration::from_millis(100), "{wait:?}");
        assert!(l.check_at("b", t0).is_ok(), "another tenant has its own bucket");
        assert!(l.check_at("a", t0 + Duration::from_millis(100)).is_ok());
        assert!(l.check_at("a", t0 + Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_rate_of_zero_is_no_limit() {
        let l = RateLimiter::new(RateLimit::OFF);
        let t0 = Instant::now();
        for _ in 0..10_000 {
            assert!(l.check_at("a", t0).is_ok());
        }
    }
}
