//! MCP sessions of the endpoint (protocol versions before 2026-07-28). A session is a run:
//! `initialize` opens a run whose id is the session id (so it counts against the tenant's
//! live-runs limit and lives in the store, where every replica finds it), and `DELETE` ends
//! it like `EndRun`. rmcp serves every request statelessly; this module only remembers, per
//! replica, which sessions it has seen recently: a few hundred bytes each, capped in total
//! and per tenant, forgotten when idle. A session this replica has forgotten, or never seen,
//! is looked up in the store.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sessions a replica remembers, and how long an idle one is remembered.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub max_total: usize,
    pub max_per_tenant: usize,
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self { max_total: 100_000, max_per_tenant: 10_000, idle: Duration::from_secs(15 * 60) }
    }
}

/// Why a new session was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    Replica(usize),
    Tenant(usize),
}

struct Known {
    tenant: String,
    agent_id: String,
    last_use: Instant,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Known>,
    per_tenant: HashMap<String, usize>,
}

impl State {
    fn remove(&mut self, id: &str) -> Option<Known> {
        let known = self.sessions.remove(id)?;
        if let Some(n) = self.per_tenant.get_mut(&known.tenant) {
            *n -= 1;
            if *n == 0 {
                self.per_tenant.remove(&known.tenant);
            }
        }
        Some(known)
    }
}

pub struct Sessions {
    limits: SessionLimits,
    state: Mutex<State>,
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self { limits, state: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Is there room for a new session of `tenant`? (Idle sessions are forgotten by a
    /// periodic sweep, `forget_idle`.)
    pub fn room_for(&self, tenant: &str) -> Result<(), Full> {
        let state = self.lock();
        if state.sessions.len() >= self.limits.max_total {
            return Err(Full::Replica(self.limits.max_total));
        }
        if state.per_tenant.get(tenant).copied().unwrap_or(0) >= self.limits.max_per_tenant {
            return Err(Full::Tenant(self.limits.max_per_tenant));
        }
        Ok(())
    }

    /// Remembers a session (opened here, or found in the store), or marks it used.
    pub fn remember(&self, id: &str, tenant: &str, agent_id: &str) {
        let mut state = self.lock();
        if let Some(known) = state.sessions.get_mut(id) {
            known.last_use = Instant::now();
            return;
        }
        state.sessions.insert(id.to_string(), Known { tenant: tenant.to_string(), agent_id: agent_id.to_string(), last_use: Instant::now() });
        *state.per_tenant.entry(tenant.to_string()).or_default() += 1;
    }

    /// Is `id` a session of this tenant and agent that this replica remembers? (Marks it used.)
    pub fn knows(&self, id: &str, tenant: &str, agent_id: &str) -> bool {
        let mut state = self.lock();
        match state.sessions.get_mut(id) {
            Some(k) if k.tenant == tenant && k.agent_id == agent_id => {
                k.last_use = Instant::now();
                true
            }
            _ => false,
        }
    }

    pub fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Forgets sessions idle longer than the limit (their runs stay in the store).
    pub fn forget_idle(&self) -> usize {
        let mut state = self.lock();
        let idle: Vec<String> = state.sessions.iter().filter(|(_, k)| k.last_use.elapsed() >= self.limits.idle).map(|(id, _)| id.clone()).collect();
        for id in &idle {
            state.remove(id);
        }
        idle.len()
    }

    /// Sessions remembered now.
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A new session id: 128 random bits.
pub fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_capped_in_total_and_per_tenant_and_forgotten_when_idle() {
        let s = Sessions::new(SessionLimits { max_total: 3, max_per_tenant: 2, idle: Duration::from_millis(30) });
        s.remember("a1", "a", "crm");
        s.remember("a2", "a", "crm");
        assert_eq!(s.room_for("a"), Err(Full::Tenant(2)));
        s.remember("b1", "b", "crm");
        assert_eq!(s.room_for("c"), Err(Full::Replica(3)));
        assert!(s.knows("a1", "a", "crm") && !s.knows("a1", "b", "crm") && !s.knows("a1", "a", "billing"));
        s.forget("a1");
        assert_eq!(s.room_for("a"), Ok(()));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(s.forget_idle(), 2);
        assert!(s.is_empty());
    }
}
