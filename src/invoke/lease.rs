//! Leases (SPEC §8): a tool call this process claimed, or a resolution it carries out, is
//! held under a lease it renews while the work runs. A retry on any replica that finds the
//! lease run out knows the holder is gone and answers the uncertain outcome instead of
//! waiting (the call never runs twice). At the end of the shutdown grace, what is still held
//! gets its uncertain outcome written by the holder itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::store::{CallKey, Lease};

/// What this process holds in the store, and its name there.
pub struct Leases {
    owner: String,
    lease: Duration,
    calls: Mutex<HashMap<CallKey, usize>>,
    deferred: Mutex<HashMap<(String, String), usize>>,
}

impl Leases {
    /// `owner` names the process (replica and instance); `lease` is how long a claim stays
    /// held without a renewal.
    pub fn new(owner: String, lease: Duration) -> Self {
        Self { owner, lease, calls: Mutex::default(), deferred: Mutex::default() }
    }

    /// A name for this process: the replica (its host name) and a random instance id.
    pub fn instance_name() -> String {
        let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "toolrouter".into());
        format!("{host}/{}/{:016x}", std::process::id(), rand::random::<u64>())
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn duration(&self) -> Duration {
        self.lease
    }

    /// The lease of a claim made at `now_ms`.
    pub fn from(&self, now_ms: i64) -> Lease<'_> {
        Lease { owner: &self.owner, until: now_ms + self.lease.as_millis() as i64 }
    }

    /// How often held leases are renewed: three times per lease, so one late renewal does
    /// not lose one.
    pub fn renew_every(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(50))
    }

    /// Holds a claimed call until the guard is dropped (its outcome is stored, or it was
    /// released).
    pub fn hold_call(self: &Arc<Self>, key: CallKey) -> Held {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner()).entry(key.clone()).or_default() += 1;
        Held { leases: self.clone(), what: Holding::Call(key) }
    }

    /// Holds an executing deferred record (tenant, id) until the guard is dropped.
    pub fn hold_deferred(self: &Arc<Self>, tenant: &str, id: &str) -> Held {
        let key = (tenant.to_string(), id.to_string());
        *self.deferred.lock().unwrap_or_else(|e| e.into_inner()).entry(key.clone()).or_default() += 1;
        Held { leases: self.clone(), what: Holding::Deferred(key) }
    }

    /// The calls and records held now.
    pub fn held(&self) -> (Vec<CallKey>, Vec<(String, String)>) {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        let deferred = self.deferred.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        (calls, deferred)
    }
}

enum Holding {
    Call(CallKey),
    Deferred((String, String)),
}

/// One hold on a call or record; the lease is renewed while any hold on it lives.
pub struct Held {
    leases: Arc<Leases>,
    what: Holding,
}

impl Drop for Held {
    fn drop(&mut self) {
        fn release<K: std::hash::Hash + Eq>(map: &Mutex<HashMap<K, usize>>, key: &K) {
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = map.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(key);
                }
            }
        }
        match &self.what {
            Holding::Call(k) => release(&self.leases.calls, k),
            Holding::Deferred(k) => release(&self.leases.deferred, k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_lasts_until_its_last_guard_is_dropped() {
        let leases = Arc::new(Leases::new("me".into(), Duration::from_secs(15)));
        let key = CallKey::new("t", "a", "r", "c");
        let first = leases.hold_call(key.clone());
        let second = leases.hold_call(key.clone());
        let record = leases.hold_deferred("t", "d1");
        assert_eq!(leases.held(), (vec![key.clone()], vec![("t".to_string(), "d1".to_string())]));
        drop(first);
        assert_eq!(leases.held().0, vec![key]);
        drop(second);
        drop(record);
        assert_eq!(leases.held(), (vec![], vec![]));
        assert_eq!(leases.from(1_000).until, 16_000);
        assert_eq!(leases.renew_every(), Duration::from_secs(5));
    }
}
