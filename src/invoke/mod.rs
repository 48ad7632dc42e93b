//! Invocation (SPEC §4, §6–§8): what happens to an admitted call. In the order a call takes:
//!
//! - [`runs`]: the run's pinned version and the catalog it sees; ending and expiring runs;
//! - [`route`]: control-tool answers, and the target tool of a call with its checks;
//! - [`once`]: exactly one outcome per (agent, run, tool call id), under [`lease`]s;
//! - [`defer`]: approval and client-execution records, and their resolutions;
//! - [`execute`]: sending a validated call upstream, with retries only where safe;
//! - [`usage`]: auto-pinning (usage counts and the hot set);
//! - [`retention`]: deleting what runs leave behind, after its time.

pub mod consent;
pub mod defer;
pub mod execute;
pub mod lease;
pub mod once;
pub mod retention;
pub mod route;
pub mod runs;
pub mod surface;
pub mod usage;
pub mod validate;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::admission::{Admission, CallContext};
use crate::call::{ModelFault, Reply, RunContext, ToolCall, ToolResult};
use crate::error::Result;
use crate::provider::Format;
use crate::registry::Registry;
use crate::store::CallKey;
use crate::upstream::Upstream;

pub use defer::{ListDeferred, Resolution, Settled};
pub use runs::{ModelTools, Resolved, ToolsView};
pub use surface::Found;

#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// Runs idle this long are forgotten (their next call pins the default again).
    pub run_idle: Duration,
    /// How long a claimed call or an executing resolution stays held without a renewal of
    /// its lease: a retry learns the holder is gone within this (plus a poll).
    pub claim_lease: Duration,
    /// Auto-pinning on/off for the whole server (definitions can turn it off too).
    pub auto_pin: bool,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self { run_idle: Duration::from_secs(24 * 3600), claim_lease: Duration::from_secs(15), auto_pin: true }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeferredKind {
    Approval,
    ClientExecution,
    /// The user authorizes toolrouter at an OAuth MCP source first (issue 17).
    Consent,
}

/// The complete definition of a call's target, kept with deferred records so hosts can show
/// what will run even after the version is gone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetDefinition {
    pub description: String,
    pub parameters_json_schema: String,
    pub output_schema_json: String,
    pub instructions: String,
    pub kind: String,
    pub requires_approval: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTarget {
    pub group: String,
    pub tool: String,
    pub name: String,
    pub source_id: String,
    pub arguments_json: String,
    pub definition: TargetDefinition,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredCall {
    pub deferred_id: String,
    pub kind: DeferredKind,
    pub target: CallTarget,
    pub original_call: ToolCall,
    /// `Consent`: where the user authorizes toolrouter.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub consent_url: String,
}

impl DeferredCall {
    /// A consent record as the model is told of it: `consent_required`, with the URL.
    pub fn consent_fault(&self) -> Option<crate::call::ModelFault> {
        (self.kind == DeferredKind::Consent).then(|| crate::call::ModelFault::ConsentRequired {
            tool: self.target.name.clone(),
            consent_url: self.consent_url.clone(),
            deferred_id: self.deferred_id.clone(),
        })
    }
}

/// Exactly one of: an answer for the model, a fault for the model (rendered at the edge), or
/// a deferred record for the host. Stored as is by exactly-once.
#[allow(clippy::large_enum_variant)] // boxing the common result would cost an allocation per call
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Result(ToolResult),
    Fault(ModelFault),
    Deferred(DeferredCall),
    /// The deferred-loading tool search's hits (never stored: a search is pure).
    Found(Found),
}

impl From<Reply> for Outcome {
    fn from(r: Reply) -> Self {
        match r {
            Reply::Result(r) => Outcome::Result(r),
            Reply::Fault(f) => Outcome::Fault(f),
        }
    }
}

impl Outcome {
    /// The `outcome` label of the tool-call metrics.
    fn label(&self) -> &'static str {
        match self {
            Outcome::Deferred(_) => "deferred",
            Outcome::Found(_) => "result",
            Outcome::Fault(ModelFault::OutcomeUnknown { .. }) => "uncertain",
            Outcome::Fault(_) => "error",
            Outcome::Result(r) if r.is_error => "error",
            Outcome::Result(_) => "result",
        }
    }
}

/// Where a deferred record is: waiting for the host (an approval or the client's result),
/// being carried out (a resolution was accepted; its result follows), or done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferredState {
    #[default]
    Pending,
    Executing,
    Resolved,
    /// Not resolved before its expiry; it can no longer be resolved.
    Expired,
}

impl DeferredState {
    /// The store's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            DeferredState::Pending => "pending",
            DeferredState::Executing => "executing",
            DeferredState::Resolved => "resolved",
            DeferredState::Expired => "expired",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        [DeferredState::Pending, DeferredState::Executing, DeferredState::Resolved, DeferredState::Expired].into_iter().find(|s| s.as_str() == stored)
    }
}

/// A deferred record as stored and listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredRecord {
    pub call: DeferredCall,
    pub agent_id: String,
    pub version: u32,
    pub run: RunContext,
    /// Set when listed (the store's row says it); not part of the stored record.
    #[serde(default, skip_serializing)]
    pub state: DeferredState,
    #[serde(default, skip_serializing)]
    pub resolution: String,
    /// Set when listed, from the store's row.
    #[serde(default, skip_serializing)]
    pub result: Option<Reply>,
    pub create_time: i64,
    #[serde(default, skip_serializing)]
    pub resolve_time: Option<i64>,
    /// When a pending record expires (`None`: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_time: Option<i64>,
}

/// The invoke path of one replica.
pub struct Router {
    registry: Arc<Registry>,
    upstream: Arc<Upstream>,
    admission: Arc<Admission>,
    config: RouterConfig,
    /// What this process holds in the store, under leases.
    leases: Arc<lease::Leases>,
    /// Calls executing in this process, for duplicates to wait on.
    inflight: Mutex<std::collections::HashMap<CallKey, watch::Receiver<Option<Outcome>>>>,
}

impl Router {
    pub fn new(registry: Arc<Registry>, upstream: Arc<Upstream>, admission: Arc<Admission>, config: RouterConfig) -> Self {
        let leases = Arc::new(lease::Leases::new(lease::Leases::instance_name(), config.claim_lease));
        Self { registry, upstream, admission, config, leases, inflight: Mutex::new(Default::default()) }
    }

    pub fn leases(&self) -> &Arc<lease::Leases> {
        &self.leases
    }

    /// Renews the leases of what this process holds; called every `Leases::renew_every`.
    pub async fn renew_leases(&self) -> Result<()> {
        let (calls, deferred) = self.leases.held();
        let until = self.leases.from(self.now()).until;
        let store = self.registry.store();
        if !calls.is_empty() {
            store.renew_calls(self.leases.owner(), &calls, until).await?;
        }
        if !deferred.is_empty() {
            store.renew_deferred(self.leases.owner(), &deferred, until).await?;
        }
        Ok(())
    }

    /// At the end of the shutdown grace: what this process still holds gets the uncertain
    /// outcome now, so retries elsewhere need not wait for the leases to run out. Returns how
    /// many calls and records it gave up.
    pub async fn abandon_held(&self) -> (usize, usize) {
        let (calls, deferred) = self.leases.held();
        let store = self.registry.store();
        let now = self.now();
        let why = "the replica running it shut down before it finished";
        let lost = |tool: &str| once::encode(&Outcome::Fault(ModelFault::uncertain(tool, why)));
        let mut given_up = (0, 0);
        for key in &calls {
            match store.expire_call(key, &lost("the call"), now, None).await {
                Ok(true) => given_up.0 += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "writing the uncertain outcome of a call cut off by shutdown failed"),
            }
        }
        for (tenant, id) in &deferred {
            let reply = Reply::Fault(ModelFault::uncertain("the approved call", why));
            let text = serde_json::to_string(&reply).unwrap_or_default();
            match store.complete_deferred(tenant, id, &text, now, None).await {
                Ok(true) => given_up.1 += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "writing the uncertain outcome of a resolution cut off by shutdown failed"),
            }
        }
        given_up
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn upstream(&self) -> &Arc<Upstream> {
        &self.upstream
    }

    fn now(&self) -> i64 {
        self.registry.clock().now_ms()
    }

    /// `HandleToolCall`.
    pub async fn handle(self: &Arc<Self>, cx: &CallContext, call: &ToolCall) -> Result<Outcome> {
        self.handle_as(cx, call, None).await
    }

    /// `HandleToolCall` from a host that speaks `format` (its deferred-loading search tool
    /// is answered too).
    pub async fn handle_as(self: &Arc<Self>, cx: &CallContext, call: &ToolCall, format: Option<Format>) -> Result<Outcome> {
        let r = self.resolve(cx).await?;
        self.handle_resolved(cx, &r, call, format).await
    }

    /// `HandleToolCalls`: concurrently, outcomes in request order.
    pub async fn handle_many(self: &Arc<Self>, cx: &CallContext, calls: &[ToolCall]) -> Result<Vec<Outcome>> {
        self.handle_many_as(cx, calls, None).await
    }

    pub async fn handle_many_as(self: &Arc<Self>, cx: &CallContext, calls: &[ToolCall], format: Option<Format>) -> Result<Vec<Outcome>> {
        let r = self.resolve(cx).await?;
        futures::future::join_all(calls.iter().map(|c| self.handle_resolved(cx, &r, c, format))).await.into_iter().collect()
    }

    /// One call of a resolved run, timed and counted by its outcome.
    async fn handle_resolved(self: &Arc<Self>, cx: &CallContext, r: &Resolved, call: &ToolCall, format: Option<Format>) -> Result<Outcome> {
        let started = Instant::now();
        let searched = match format {
            Some(f) => self.answer_tool_search(cx, &r.catalog, call, f).await,
            None => None,
        };
        let outcome = match searched {
            Some(o) => Ok(o),
            None => self.answer(cx, r, call).await,
        };
        if let Ok(o) = &outcome {
            crate::telemetry::metrics::tool_call(o.label(), started.elapsed());
        }
        outcome
    }

    async fn answer(self: &Arc<Self>, cx: &CallContext, r: &Resolved, call: &ToolCall) -> Result<Outcome> {
        let parsed = route::Parsed::new(&r.catalog, call);
        // Hybrid ranking needs the search text's embedding, computed (or cached) first.
        let qv = match self.registry.embeddings().is_some() && r.catalog.vectors().is_some() {
            true => match route::search_text(&r.catalog, &parsed) {
                Some(q) => self.registry.query_vector(&r.catalog, q).await,
                None => None,
            },
            false => None,
        };
        // Discovery answers are pure: no need to remember them.
        if let Some(reply) = route::answer_control(&r.catalog, &parsed, qv.as_deref()) {
            return Ok(reply.into());
        }
        if call.tool_call_id.is_empty() || cx.run.run_id.is_empty() {
            return self.route(cx, r, call, &parsed).await;
        }
        self.exactly_once(cx, r, call, parsed).await
    }

    /// Finds the call's target (preparing a catalog with MCP sources again when the tool is
    /// unknown, SPEC §7) and runs or defers it.
    async fn route(&self, cx: &CallContext, r: &Resolved, call: &ToolCall, parsed: &route::Parsed) -> Result<Outcome> {
        let mut routed = route::target(&r.catalog, call, parsed);
        let mut refreshed = None;
        if matches!(routed, route::Route::Fault(ModelFault::UnknownTool { .. }))
            && r.catalog.has_mcp_sources()
            && self.registry.refresh_for_run(&cx.tenant, &cx.agent_id, r.version, &r.catalog, &cx.run, self.upstream.config().refresh_min_age)
        {
            let catalog = Box::pin(self.registry.catalog_for_run(&cx.tenant, &cx.agent_id, r.version, &cx.run)).await?;
            // Read again for the new listing: whether it has grouped tools decides the parse.
            let again = parsed.again(&catalog, call);
            refreshed = Some((Resolved { version: r.version, catalog }, again));
        }
        let (r, parsed) = refreshed.as_ref().map_or((r, parsed), |(r, p)| (r, p));
        if refreshed.is_some() {
            routed = route::target(&r.catalog, call, parsed);
        }
        // A tool the listing lacks because its OAuth source lists nothing without the user's
        // token: the user consents first.
        if let route::Route::Fault(ModelFault::UnknownTool { .. } | ModelFault::UnknownGroup { .. }) = &routed
            && let Some((group, tool, tool_arguments)) = route::named_target(&r.catalog, call, parsed)
            && let Some(consent) = Box::pin(self.consent_for_group(cx, r, call, group, tool, tool_arguments)).await?
        {
            return Ok(consent);
        }
        match routed {
            route::Route::Fault(f) => Ok(Outcome::Fault(f)),
            route::Route::Tool { index, arguments } => self.dispatch(cx, r, call, index, arguments).await,
        }
    }

    /// Defers what needs a person or the client; executes the rest.
    async fn dispatch(&self, cx: &CallContext, r: &Resolved, call: &ToolCall, i: u32, arguments: &serde_json::Value) -> Result<Outcome> {
        let tool = r.catalog.tool(i);
        // Nulls a strict-mode schema made the model send for optional properties.
        let arguments = &*crate::catalog::adapt::omitted_restored(arguments, tool.input_schema());
        if let Err(f) = route::check(tool, &cx.run, arguments) {
            return Ok(Outcome::Fault(f));
        }
        if tool.requires_approval || tool.kind == crate::catalog::ToolKind::Client {
            // A user without a token for an OAuth source consents before anyone approves.
            if let Some(consent) = Box::pin(self.consent_first(cx, r, call, i, arguments)).await? {
                return Ok(consent);
            }
            return Box::pin(self.defer(cx, r, call, i, arguments)).await;
        }
        let invocation = execute::Invocation {
            tenant: &cx.tenant,
            agent_id: &cx.agent_id,
            run: &cx.run,
            catalog: &r.catalog,
            tool: i,
            arguments_json: &arguments.to_string(),
            tool_call_id: &call.tool_call_id,
        };
        // The token is read once, by the execution: a user without one (or whose token the
        // server refused, and which is forgotten now) consents, and the call waits for it.
        let reply = self.execute(&invocation).await;
        if let crate::call::Reply::Fault(ModelFault::ConsentRequired { consent_url, .. }) = &reply
            && consent_url.is_empty()
            && let Some(consent) = Box::pin(self.consent_first(cx, r, call, i, arguments)).await?
        {
            return Ok(consent);
        }
        Ok(reply.into())
    }
}
