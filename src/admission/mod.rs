//! Admission: the one gate every request passes before it reaches the invoke path, whichever
//! edge it came through (typed gRPC calls, the JSON control tools behind them, the MCP
//! endpoint). It knows the caller's tenant ([`Principal`]), applies the per-tenant run quota,
//! counts the request in flight for the SIGTERM drain ([`Gate`]) and carries its deadline.
//! A [`CallContext`] can only be made here.

pub mod gate;
pub mod quota;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use gate::{Gate, Ticket};
pub use quota::RunQuota;

use crate::call::RunContext;
use crate::error::{Error, Result};

/// The tenant of every caller when authentication is off (SPEC §2).
pub const DEFAULT_TENANT: &str = "default";

/// What a request refused while draining is told.
pub const SHUTTING_DOWN: &str = "the server is shutting down; retry on another replica";

/// Who is calling: the tenant they act for and the identity claims their credential carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: String,
    /// Claims bound to the credential (for an API key, its `identity` object plus
    /// `tenant_id`); empty for the anonymous principal.
    pub identity: BTreeMap<String, String>,
}

impl Principal {
    /// The caller when authentication is off.
    pub fn anonymous() -> Self {
        Self { tenant: DEFAULT_TENANT.to_string(), identity: BTreeMap::new() }
    }

    /// Merges the claims a host sent in a `RunContext` with the credential's: the
    /// credential's claims win, so a host can add claims (`user_id` of an end user, say) but
    /// never replace one its credential carries, and `tenant_id` is always the
    /// authenticated tenant.
    pub fn merge_identity(&self, sent: &mut BTreeMap<String, String>) {
        for (k, v) in &self.identity {
            sent.insert(k.clone(), v.clone());
        }
    }
}

/// What a request addresses: an agent (version 0 = the default, or the run's pin) and the
/// run as the host (or the MCP session) names it.
#[derive(Debug, Clone, Default)]
pub struct Addressed {
    pub agent_id: String,
    pub version: u32,
    pub run: RunContext,
    /// How long the caller waits for the answer, if it said.
    pub timeout: Option<Duration>,
}

/// An admitted request that is not a tool call: its tenant. It (and every clone) holds the
/// request's place in flight until dropped, so work that outlives its request (a claimed
/// call run to its end) is still waited for by the drain.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub tenant: String,
    _ticket: Arc<Ticket>,
}

/// An admitted call: its tenant, agent, version and run, and its deadline. Like
/// [`RequestContext`] it holds the request's place in flight.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub tenant: String,
    pub agent_id: String,
    /// The version asked for (0 = the default, or the run's pin).
    pub version: u32,
    /// The run, with the credential's claims merged into its identity.
    pub run: RunContext,
    pub deadline: Option<Instant>,
    _ticket: Arc<Ticket>,
}

impl CallContext {
    /// The same admission, as a plain request of its tenant.
    pub fn request(&self) -> RequestContext {
        RequestContext { tenant: self.tenant.clone(), _ticket: self._ticket.clone() }
    }

    /// Time left before the caller's deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }
}

pub struct Admission {
    gate: Arc<Gate>,
    runs: RunQuota,
}

impl Admission {
    pub fn new(gate: Arc<Gate>, runs: RunQuota) -> Self {
        Self { gate, runs }
    }

    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    fn ticket(&self) -> Result<Arc<Ticket>> {
        self.gate.enter().map(Arc::new).ok_or_else(|| Error::Unavailable(SHUTTING_DOWN.into()))
    }

    /// A request of `principal` that is not a tool call (registry changes, deferred records,
    /// MCP session set-up): refused while draining, counted in flight while it runs.
    pub fn request(&self, principal: &Principal) -> Result<RequestContext> {
        Ok(RequestContext { tenant: principal.tenant.clone(), _ticket: self.ticket()? })
    }

    /// Admits a call of `principal` to what `to` addresses: in flight, within its deadline,
    /// and within the tenant's live-runs limit when it starts a new run.
    pub async fn call(&self, principal: &Principal, to: Addressed) -> Result<CallContext> {
        let ticket = self.ticket()?;
        let deadline = match to.timeout {
            Some(t) if t.is_zero() => return Err(Error::DeadlineExceeded("the request's deadline had passed when it arrived".into())),
            Some(t) => Some(Instant::now() + t),
            None => None,
        };
        let mut run = to.run;
        principal.merge_identity(&mut run.identity);
        self.runs.admit(&principal.tenant, &to.agent_id, &run.run_id).await?;
        Ok(CallContext { tenant: principal.tenant.clone(), agent_id: to.agent_id, version: to.version, run, deadline, _ticket: ticket })
    }

    /// The run ended: its next call counts as a new run again.
    pub fn run_ended(&self, tenant: &str, agent_id: &str, run_id: &str) {
        self.runs.ended(tenant, agent_id, run_id);
    }
}
