//! Talking to tool sources (SPEC §7): gRPC `ToolExecutor` endpoints ([`function`]) and MCP
//! servers over streamable HTTP ([`mcp`]) are two variants of one thing. This module owns what
//! they share: the per-source concurrency limit and its wait, the call's deadline, the
//! outbound policy (checked by each variant's connector), the connection and session caches,
//! and the typed [`SourceKey`] that names a source for all of them.

pub mod consent;
pub mod function;
pub mod mcp;
pub mod oauth;
pub mod secrets;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::call::RunContext;
use crate::catalog::{AgentDefinition, PreparedSource, SourceKind, ToolDeclaration};

pub use secrets::{Secret, SecretSource, Secrets};

#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Deadline when neither the tool nor the source sets one.
    pub default_timeout: Duration,
    /// Concurrency limit when the source sets none.
    pub default_max_concurrency: u32,
    /// How long a call waits for a free slot before it is "busy".
    pub queue_wait: Duration,
    /// Deadline of connecting to an executor.
    pub connect_timeout: Duration,
    /// Retries of idempotent calls that surely did not run.
    pub max_retries: u32,
    /// Deadline of opening an MCP session (initialize) and of listing tools.
    pub mcp_handshake_timeout: Duration,
    /// A run's MCP session unused this long is closed (the run's next call opens a new one).
    pub session_idle: Duration,
    /// A call naming a tool the listing lacks lists again, at most this often per listing.
    pub refresh_min_age: Duration,
    /// Largest tool result kept (bytes of its JSON); a larger one is dropped and the model
    /// told so (`result_too_large`).
    pub max_result_bytes: usize,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(30),
            default_max_concurrency: 64,
            queue_wait: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(3),
            max_retries: 2,
            mcp_handshake_timeout: Duration::from_secs(10),
            session_idle: Duration::from_secs(15 * 60),
            refresh_min_age: Duration::from_secs(1),
            max_result_bytes: 4 * 1024 * 1024,
        }
    }
}

/// One source of one agent, as one tenant registered it: the key of its concurrency limit
/// and of its MCP sessions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceKey {
    pub tenant: String,
    pub agent_id: String,
    pub source_id: String,
}

/// How one execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Execution {
    /// The tool answered (`is_error`: it says it failed).
    Done { content_json: String, is_error: bool },
    /// The executor answered with a gRPC status instead of a result: it ran or refused.
    Status { code: String, message: String },
    /// The MCP server answered the call with a protocol error.
    ProtocolError(String),
    /// The tool answered, but its result (`size` bytes, when known) was over the limit.
    TooLarge { size: Option<usize> },
    /// The concurrency limit stayed full for the whole wait.
    Busy,
    /// The request surely did not reach the tool's source.
    NotSent(String),
    /// Sent, but no answer within the deadline.
    TimedOut,
    /// Sent, then the connection was lost or the source failed without an answer.
    Lost(String),
    /// The tool is no longer offered upstream (an MCP server dropped it).
    Vanished,
    /// An OAuth source and a user without a usable token: not sent; the user consents first.
    ConsentRequired,
    /// The server refused the user's token (revoked, say): not run; it was forgotten.
    Unauthorized,
    /// An OAuth source whose user's authorization cannot be had (not configured, no user):
    /// not sent.
    NoAuthorization(String),
}

impl Execution {
    /// Did the request reach the source? (Busy waits and failed connects did not.)
    pub fn reached(&self) -> bool {
        !matches!(self, Execution::Busy | Execution::NotSent(_) | Execution::ConsentRequired | Execution::NoAuthorization(_))
    }
}

/// One call to send upstream.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub key: &'a SourceKey,
    pub source: &'a SourceKind,
    pub tool: &'a str,
    pub arguments_json: &'a str,
    pub tool_call_id: &'a str,
    pub run: &'a RunContext,
    /// The tool's (else the source's) deadline.
    pub timeout: Option<Duration>,
}

/// The tools listed upstream for a definition's sources.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Tools per source id, for the sources whose tools come from upstream (a source that
    /// failed is listed empty).
    pub tools: BTreeMap<String, Vec<ToolDeclaration>>,
    /// (source id, why) of each source whose listing failed.
    pub failed: Vec<(String, String)>,
}

/// Lists tools that a definition does not declare (executor `ListTools`, MCP `tools/list`).
#[async_trait::async_trait]
pub trait ToolLister: Send + Sync {
    /// The tools of the sources whose tools come from upstream, as the tenant sees them
    /// (operator secrets in MCP headers are scoped to tenants).
    async fn list(&self, def: &AgentDefinition, tenant: &str, agent_id: &str, run: Option<&RunContext>) -> Listing;

    /// A key for what a run's listing depends on (MCP headers bound to the run context);
    /// `None`: the version's shared catalog serves the run.
    fn run_key(&self, _sources: &[PreparedSource], _tenant: &str, _run: &RunContext) -> Option<u64> {
        None
    }
}

/// A listing failure meaning the run's user has not authorized toolrouter at the source yet.
pub const CONSENT_NEEDED: &str = "the user has not authorized access to this source yet (consent required)";

/// Past this many per-source limits, idle ones are forgotten.
const MAX_LIMITS: usize = 10_000;

/// The per-source concurrency limits. The limit is part of the key: a version that changes
/// it gets its own semaphore instead of the first version's.
/// A source's semaphores, one per limit it was declared with (a version may change it).
type PerLimit = Vec<(u32, Arc<Semaphore>)>;

#[derive(Default)]
struct Limits {
    semaphores: Mutex<HashMap<SourceKey, PerLimit>>,
}

impl Limits {
    fn get(&self, key: &SourceKey, max: u32) -> Arc<Semaphore> {
        let mut map = self.semaphores.lock().unwrap_or_else(|e| e.into_inner());
        // Found without copying the key: this runs once per call.
        if let Some((_, s)) = map.get(key).and_then(|limits| limits.iter().find(|(m, _)| *m == max)) {
            return s.clone();
        }
        if map.len() >= MAX_LIMITS {
            // A semaphore no call holds and nobody waits on carries no state worth keeping.
            map.retain(|_, limits| {
                limits.retain(|(max, s)| Arc::strong_count(s) > 1 || s.available_permits() < *max as usize);
                !limits.is_empty()
            });
        }
        let s = Arc::new(Semaphore::new(max as usize));
        map.entry(key.clone()).or_default().push((max, s.clone()));
        s
    }
}

/// The one client of every tool source.
pub struct Upstream {
    config: UpstreamConfig,
    limits: Limits,
    functions: function::Executors,
    mcp: mcp::McpClients,
    /// Users' tokens for OAuth MCP sources (set once the store is open).
    consents: std::sync::OnceLock<Arc<consent::Consents>>,
}

impl Upstream {
    pub fn new(config: UpstreamConfig, outbound: &crate::outbound::Outbound, secrets: Arc<Secrets>) -> Self {
        Self {
            functions: function::Executors::new(&config, outbound.clone()),
            mcp: mcp::McpClients::new(&config, secrets, outbound),
            limits: Limits::default(),
            consents: std::sync::OnceLock::new(),
            config,
        }
    }

    /// Gives the upstream its users' tokens (once, at start-up).
    pub fn set_consents(&self, consents: Arc<consent::Consents>) {
        let _ = self.consents.set(consents);
    }

    pub fn consents(&self) -> Option<&Arc<consent::Consents>> {
        self.consents.get()
    }

    /// The token a call or listing of an OAuth source carries for the run's user: `Ok(None)`
    /// for other sources, `Err(None)` when the user must consent first, `Err(Some(why))` when
    /// it cannot be had (no user, no key, a refresh that failed).
    pub async fn bearer(
        &self,
        key: &SourceKey,
        source: &crate::catalog::McpSource,
        run: Option<&RunContext>,
    ) -> Result<Option<String>, Option<String>> {
        if source.oauth.is_none() {
            return Ok(None);
        }
        let Some(consents) = self.consents.get() else {
            return Err(Some("per-user authorization is not configured on this server".into()));
        };
        let Some(user) = run.and_then(|r| r.user()) else {
            return Err(Some(format!("source {:?} acts as each end user: the run names no user (identity user_id)", key.source_id)));
        };
        match consents.bearer(&key.tenant, user, &key.source_id, source).await {
            Ok(consent::Access::Bearer(b)) => Ok(Some(b)),
            Ok(consent::Access::NeedsConsent) => Err(None),
            Err(e) => Err(Some(e)),
        }
    }

    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// A slot within the source's concurrency limit, waiting at most `queue_wait`.
    async fn slot(&self, key: &SourceKey, max: u32) -> Option<OwnedSemaphorePermit> {
        let max = if max == 0 { self.config.default_max_concurrency } else { max };
        let semaphore = self.limits.get(key, max);
        // Mostly free: taken without setting up the wait's timer.
        match semaphore.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(tokio::sync::TryAcquireError::Closed) => None,
            Err(tokio::sync::TryAcquireError::NoPermits) => tokio::time::timeout(self.config.queue_wait, semaphore.acquire_owned()).await.ok()?.ok(),
        }
    }

    /// Sends one call to its source, within the source's limit and the call's deadline.
    pub async fn execute(&self, req: Request<'_>) -> Execution {
        let max = match req.source {
            SourceKind::Function(f) => f.max_concurrency,
            SourceKind::Mcp(m) => m.max_concurrency,
            SourceKind::Client(_) => return Execution::NotSent("client tools are run by the host".into()),
        };
        let Some(_slot) = self.slot(req.key, max).await else {
            return Execution::Busy;
        };
        let deadline = req.timeout.unwrap_or(self.config.default_timeout);
        let execution = match req.source {
            SourceKind::Function(f) => self.functions.execute(&f.endpoint, &req, deadline).await,
            // Boxed: keeps the MCP client's large future out of every function call's.
            SourceKind::Mcp(m) => {
                let bearer = match self.bearer(req.key, m, Some(req.run)).await {
                    Ok(b) => b,
                    Err(None) => return Execution::ConsentRequired,
                    Err(Some(e)) => return Execution::NoAuthorization(e),
                };
                let execution = Box::pin(self.mcp.execute(m, &req, deadline, bearer.as_deref())).await;
                if matches!(execution, Execution::Unauthorized)
                    && let (Some(c), Some(user)) = (self.consents.get(), req.run.user())
                {
                    c.forget(&req.key.tenant, user, &req.key.source_id).await;
                }
                execution
            }
            SourceKind::Client(_) => unreachable!("returned above"),
        };
        match execution {
            Execution::Done { content_json, .. } if content_json.len() > self.config.max_result_bytes => {
                Execution::TooLarge { size: Some(content_json.len()) }
            }
            other => other,
        }
    }

    /// `EndRun`: closes the run's MCP sessions.
    pub fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> usize {
        self.mcp.end_run(tenant, agent_id, run_id)
    }

    /// Closes MCP sessions idle longer than the configured time; returns how many.
    pub fn expire_idle(&self) -> usize {
        self.mcp.expire_idle()
    }

    /// Open MCP sessions (for tests and metrics).
    pub fn open_sessions(&self) -> usize {
        self.mcp.open_sessions()
    }
}

#[async_trait::async_trait]
impl ToolLister for Upstream {
    async fn list(&self, def: &AgentDefinition, tenant: &str, agent_id: &str, run: Option<&RunContext>) -> Listing {
        let jobs = def.sources.iter().filter_map(|s| {
            let key = SourceKey { tenant: tenant.to_string(), agent_id: agent_id.to_string(), source_id: s.id.clone() };
            match &s.kind {
                SourceKind::Function(f) if f.tools.is_empty() => Some(futures::future::Either::Left(async move {
                    let listed = self.functions.list_tools(&key.source_id, &f.endpoint).await.map_err(|e| format!("ListTools failed: {e}"));
                    (key.source_id, listed)
                })),
                SourceKind::Mcp(m) => Some(futures::future::Either::Right(async move {
                    let listed = match self.bearer(&key, m, run).await {
                        Ok(bearer) => self
                            .mcp
                            .list_tools(&key, m, run, bearer.as_deref())
                            .await
                            .map_err(|e| if mcp::unauthorized(&e) { CONSENT_NEEDED.to_string() } else { format!("MCP tools/list failed: {e}") }),
                        Err(None) => Err(CONSENT_NEEDED.to_string()),
                        Err(Some(e)) => Err(e),
                    };
                    (key.source_id, listed)
                })),
                _ => None,
            }
        });
        let mut listing = Listing::default();
        for (id, r) in futures::future::join_all(jobs).await {
            match r {
                Ok(tools) => {
                    listing.tools.insert(id, tools);
                }
                Err(e) => {
                    // Listed as empty: the source's tools are unavailable until the next preparation.
                    listing.tools.insert(id.clone(), Vec::new());
                    listing.failed.push((id, e));
                }
            }
        }
        listing
    }

    fn run_key(&self, sources: &[PreparedSource], tenant: &str, run: &RunContext) -> Option<u64> {
        mcp::McpClients::run_key(sources, tenant, run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(source: &str) -> SourceKey {
        SourceKey { tenant: "t".into(), agent_id: "a".into(), source_id: source.into() }
    }

    #[test]
    fn a_source_keeps_one_semaphore_per_limit_and_idle_ones_are_forgotten_past_the_cap() {
        let limits = Limits::default();
        let a = limits.get(&key("a"), 2);
        assert!(Arc::ptr_eq(&a, &limits.get(&key("a"), 2)));
        assert!(!Arc::ptr_eq(&a, &limits.get(&key("a"), 3)), "a changed limit gets its own semaphore");
        let held = a.clone().try_acquire_owned().expect("a slot");
        for i in 0..MAX_LIMITS {
            limits.get(&key(&format!("s{i}")), 1);
        }
        let map = limits.semaphores.lock().unwrap();
        assert!(map.len() <= MAX_LIMITS, "{}", map.len());
        assert!(map[&key("a")].iter().any(|(max, s)| *max == 2 && Arc::ptr_eq(s, &a)), "a semaphore in use is kept");
        drop(held);
    }
}
