//! The MCP endpoint of every agent definition (SPEC §6): `/mcp/agents/{agent}` (default
//! version) and `/mcp/agents/{agent}/versions/{n}`, streamable HTTP. `tools/list` is
//! `GetModelTools`; `tools/call` is `HandleToolCall` (same router path, deferred records
//! included). The MCP session id is the run id.
//!
//! rmcp serves every request statelessly (nothing per session in memory); sessions are
//! runs in the store, opened and closed by the [`gate`], remembered briefly per replica by
//! [`sessions`]. So a session costs a few hundred bytes here, and any replica can serve it.

pub mod approve;
pub mod deferred;
pub mod gate;
pub mod sessions;

use std::sync::Arc;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock, DiscoverResult, ErrorData, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use crate::admission::{Addressed, Admission, CallContext, Principal};
use crate::auth::Authenticator;
use crate::auth::limits::Limits;
use crate::auth::limits::RateLimiter;
use crate::call::{RunContext, ToolCall};
use crate::error::Error;
use crate::invoke::{DeferredKind, Outcome, Router};
use crate::provider::calls::MCP_CALL_ID_META;

/// What the gRPC listener enforces, applied to the MCP endpoint too (SPEC §9): the caller's
/// credentials and the tenant's request rate (one budget shared with gRPC), the arguments
/// size, and admission (drain, live-runs limit) through the same [`Admission`].
#[derive(Clone)]
pub struct EndpointGuard {
    pub auth: Authenticator,
    pub rate: Arc<RateLimiter>,
    pub limits: Arc<Limits>,
    pub admission: Arc<Admission>,
}

#[derive(Debug, Clone)]
pub struct McpEndpointConfig {
    /// `Host` values accepted (rmcp refuses others: DNS-rebinding protection). Add the
    /// Kubernetes Service name here. Empty = loopback names only.
    pub allowed_hosts: Vec<String>,
    /// A request body not read completely within this is refused.
    pub body_timeout: std::time::Duration,
    /// Sessions remembered per replica: caps and idle time.
    pub sessions: sessions::SessionLimits,
}

impl Default for McpEndpointConfig {
    fn default() -> Self {
        Self { allowed_hosts: Vec::new(), body_timeout: std::time::Duration::from_secs(30), sessions: Default::default() }
    }
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The routes to merge into the HTTP listener.
pub fn routes(
    router: Arc<Router>,
    config: &McpEndpointConfig,
    cancel: tokio_util::sync::CancellationToken,
    guard: EndpointGuard,
    sessions: Arc<sessions::Sessions>,
) -> axum::Router {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    hosts.extend(config.allowed_hosts.iter().cloned());
    let handler = AgentMcp { router: router.clone(), guard: guard.clone() };
    let cancel_for_gate = cancel.clone();
    let server_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(guard.limits.max_message_bytes)
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let service: StreamableHttpService<AgentMcp, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Default::default(), server_config);
    let gate =
        Arc::new(gate::Gate { router, guard, body_timeout: config.body_timeout, sessions, stop: cancel_for_gate, waiting: Default::default() });
    axum::Router::new().route_service("/mcp/agents/{agent}", service.clone()).route_service("/mcp/agents/{agent}/versions/{version}", service).layer(
        axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
            let gate = gate.clone();
            async move { gate.pass(req, next).await }
        }),
    )
}

/// The agent and version (0 = the default) an endpoint path addresses.
pub(super) fn addressed(path: &str) -> Result<(String, u32), Error> {
    let rest = path.strip_prefix("/mcp/agents/").unwrap_or_default();
    match rest.split_once("/versions/") {
        Some((a, v)) => {
            let version = v
                .parse::<u32>()
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| Error::invalid("version", format!("{v:?} is not a version number (1, 2, …)")))?;
            Ok((a.to_string(), version))
        }
        None => Ok((rest.trim_end_matches('/').to_string(), 0)),
    }
}

#[derive(Clone)]
struct AgentMcp {
    router: Arc<Router>,
    guard: EndpointGuard,
}

/// The `_meta` key a request names its run with (stateless clients; a session is its run).
pub const RUN_ID_META: &str = "io.toolrouter/run_id";
/// The header a request may name its run with instead.
pub const RUN_ID_HEADER: &str = "toolrouter-run-id";
/// How long a listing that cannot change may be kept (a day: versions are immutable).
const STABLE_LIST_TTL_MS: u64 = 24 * 3600 * 1000;
/// Longest run or tool call id, as on gRPC.
const MAX_ID_BYTES: usize = 256;

/// A string `_meta` entry of the request, checked like the gRPC field it stands for.
fn meta_id<'a>(cx: &'a RequestContext<RoleServer>, key: &str) -> Result<Option<&'a str>, ErrorData> {
    match cx.meta.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_ID_BYTES => Ok(Some(s)),
        Some(Value::String(_)) => Err(mcp_error(Error::invalid(format!("_meta.{key}"), format!("at most {MAX_ID_BYTES} bytes")))),
        Some(_) => Err(mcp_error(Error::invalid(format!("_meta.{key}"), "must be a string"))),
    }
}

/// The run a request belongs to: its session (older protocol versions), else the run its
/// `_meta` or `Toolrouter-Run-Id` header names; none (empty) makes the request its own run.
fn run_of(parts: &http::request::Parts, cx: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
    let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).filter(|s| !s.is_empty());
    let header = match parts.headers.get(RUN_ID_HEADER) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(s) if s.len() <= MAX_ID_BYTES => Some(s).filter(|s| !s.is_empty()),
            _ => return Err(mcp_error(Error::invalid("Toolrouter-Run-Id", format!("a visible ASCII id of at most {MAX_ID_BYTES} bytes")))),
        },
    };
    let named = match (meta_id(cx, RUN_ID_META)?, header) {
        (Some(m), Some(h)) if m != h => {
            return Err(mcp_error(Error::invalid(format!("_meta.{RUN_ID_META}"), "names another run than the Toolrouter-Run-Id header")));
        }
        (m, h) => m.or(h),
    };
    match (session, named) {
        (Some(s), Some(n)) if s != n => Err(mcp_error(Error::invalid(
            format!("_meta.{RUN_ID_META}"),
            "names another run than the session's (a session is its run: leave the run id out)",
        ))),
        (Some(s), _) => Ok(s.to_string()),
        (None, n) => Ok(n.unwrap_or_default().to_string()),
    }
}

/// Admits an MCP request as a call: the agent and version of its path, the run of its
/// session (or the one it names), the identity of its credential.
async fn admit(admission: &Admission, cx: &RequestContext<RoleServer>) -> Result<CallContext, ErrorData> {
    let parts =
        cx.extensions.get::<http::request::Parts>().ok_or_else(|| mcp_error(Error::Internal("the MCP endpoint is served over HTTP only".into())))?;
    let (agent_id, version) = addressed(parts.uri.path()).map_err(mcp_error)?;
    let run_id = run_of(parts, cx)?;
    // The run's identity is the credential's claims (MCP requests carry no RunContext).
    let run = RunContext { run_id, ..Default::default() };
    let principal = parts.extensions.get::<Principal>().cloned().unwrap_or_else(Principal::anonymous);
    let to = Addressed { agent_id, version, run, timeout: None };
    admission.call(&principal, to).await.map_err(mcp_error)
}

/// The JSON-RPC error code of a call that waits for the user's consent (the Foundry
/// convention): the URL the user opens is in `data`.
pub const CONSENT_REQUIRED: i32 = -32007;

pub(super) fn consent_required(d: &crate::invoke::DeferredCall) -> ErrorData {
    let data = json!({
        "consent_url": d.consent_url,
        "deferred_id": d.deferred_id,
        "tool": d.target.name,
        "message": "Open consent_url in a browser and allow access, then call the tool again.",
    });
    ErrorData::new(rmcp::model::ErrorCode(CONSENT_REQUIRED), "CONSENT_REQUIRED", Some(data))
}

/// An error as a JSON-RPC error (the one vocabulary's MCP code).
fn mcp_error(e: Error) -> ErrorData {
    if let Error::Internal(m) = &e {
        tracing::error!(error = %m, "internal error");
    }
    ErrorData::new(rmcp::model::ErrorCode(e.code().jsonrpc()), e.public_message(), None)
}

fn schema_object(text: &str) -> JsonObject {
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        _ => JsonObject::from_iter([("type".to_string(), Value::String("object".into()))]),
    }
}

impl ServerHandler for AgentMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("toolrouter", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(&self, request: InitializeRequestParams, cx: RequestContext<RoleServer>) -> Result<InitializeResult, ErrorData> {
        let mut call = admit(&self.guard.admission, &cx).await?;
        // The handshake belongs to no run yet: it reads the default (or named) version.
        call.run = RunContext::default();
        // An unknown agent fails the handshake with a clear message.
        let instructions = self.router.model_tools(&call).await.map_err(mcp_error)?.instructions;
        cx.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if !instructions.is_empty() {
            result.instructions = Some(instructions);
        }
        Ok(result)
    }

    /// The 2026-07-28 handshake: like `initialize`, an unknown agent (or another tenant's)
    /// fails it, and it carries the definition's instructions.
    async fn discover(&self, cx: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        let mut call = admit(&self.guard.admission, &cx).await?;
        call.run = RunContext { identity: call.run.identity, ..Default::default() };
        let listed = self.router.model_tools(&call).await.map_err(mcp_error)?;
        let mut result = DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), self.get_info());
        if !listed.instructions.is_empty() {
            result.instructions = Some(listed.instructions);
        }
        // A named version's instructions never change; the default version's do on promotion.
        let (_, version) = request_parts(&cx).map(|p| addressed(p.uri.path())).transpose().map_err(mcp_error)?.unwrap_or_default();
        result.ttl_ms = if version != 0 { STABLE_LIST_TTL_MS } else { 0 };
        result.cache_scope = rmcp::model::CacheScope::Private;
        Ok(result)
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, cx: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        let call = admit(&self.guard.admission, &cx).await?;
        let listed = self.router.model_tools(&call).await.map_err(mcp_error)?;
        let tools = listed.tools.into_iter().map(|m| Tool::new(m.name, m.description, schema_object(&m.input_schema_json))).collect();
        // Cache hints (SEP-2549) that hold: a listing fixed by its version (or its run's
        // pin) stays; the default version's changes on promotion, so it is stale at once.
        // Private: listings are per tenant (and per user).
        // Only in 2026-07-28: older versions have no such fields.
        let result = ListToolsResult::with_all_items(tools);
        if !modern(&cx) {
            return Ok(result);
        }
        let ttl = if listed.stable { STABLE_LIST_TTL_MS } else { 0 };
        Ok(result.with_ttl_ms(ttl).with_cache_scope(rmcp::model::CacheScope::Private))
    }

    async fn call_tool(&self, request: CallToolRequestParams, rq: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map(|a| Value::Object(a).to_string()).unwrap_or_else(|| "{}".into());
        let max = self.guard.limits.max_arguments_bytes;
        if arguments.len() > max {
            return Err(mcp_error(Error::invalid("arguments", format!("arguments are {} bytes, over the limit of {max}", arguments.len()))));
        }
        let cx = admit(&self.guard.admission, &rq).await?;
        // The second round of a consent link: the call's result once the user consented.
        if let Some(state) = request.request_state.as_deref().filter(|s| deferred::is_consent_state(s)) {
            return deferred::answer_consent_retry(&self.router, &cx, state).await;
        }
        // The second round of an approval question: the answer resolves the record.
        if let Some(state) = &request.request_state {
            return deferred::answer_retry(&self.router, &cx, (&request.name, &arguments), state, request.input_responses.as_ref()).await;
        }
        // A call named by `_meta` (the model's tool call id, relayed by the host) is retried
        // exactly once within its run; an unnamed one is a call of its own.
        let tool_call_id = match meta_id(&rq, MCP_CALL_ID_META)? {
            Some(id) => id.to_string(),
            None => format!("mcp-{:032x}", rand::random::<u128>()),
        };
        let call = ToolCall { tool_call_id, tool_name: request.name.to_string(), arguments_json: arguments };
        let outcome = self.router.handle(&cx, &call).await.map_err(mcp_error)?;
        if let Outcome::Deferred(d) = &outcome
            && d.kind == DeferredKind::Consent
        {
            // A client that opens links for the user gets the link to open; others the error.
            if takes_without_session(&rq).is_some_and(|t| t.url_elicitation) && d.consent_url.starts_with("http") {
                return Ok(CallToolResponse::InputRequired(deferred::consent_input(d)));
            }
            return Err(consent_required(d));
        }
        if let Outcome::Deferred(d) = &outcome
            && let Some(takes) = takes_without_session(&rq)
            && let Some(answer) = deferred::answer_deferred(&self.router, &cx, d, takes).await?
        {
            return Ok(answer);
        }
        if let Outcome::Deferred(d) = &outcome
            && d.kind == DeferredKind::Approval
            && let Some(parts) = request_parts(&rq)
            && let Some(slot) = parts.extensions.get::<approve::ApprovalSlot>()
        {
            let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
            if approve::client_elicits(session) {
                slot.fill(d.clone());
            }
        }
        Ok(CallToolResponse::from(call_result(outcome)))
    }

    async fn get_task(&self, request: GetTaskParams, rq: RequestContext<RoleServer>) -> Result<GetTaskResult, ErrorData> {
        let cx = admit(&self.guard.admission, &rq).await?;
        let record = deferred::task_record(&self.router, &cx, &request.task_id).await?;
        let takes = takes_without_session(&rq).unwrap_or_default();
        Ok(GetTaskResult::new(deferred::task_of(&record, takes)))
    }

    async fn update_task(&self, request: UpdateTaskParams, rq: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let cx = admit(&self.guard.admission, &rq).await?;
        deferred::update_task(&self.router, &cx, &request.task_id, &request.input_responses).await
    }

    async fn cancel_task(&self, request: CancelTaskParams, rq: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let cx = admit(&self.guard.admission, &rq).await?;
        deferred::cancel_task(&self.router, &cx, &request.task_id).await
    }
}

/// What a request of the 2026-07-28 protocol (no session) declared it takes; `None` for
/// session requests and older stateless ones, which can take neither.
fn takes_without_session(cx: &RequestContext<RoleServer>) -> Option<deferred::Takes> {
    let sessionless = request_parts(cx).is_some_and(|p| !p.headers.contains_key("mcp-session-id"));
    if !(sessionless && modern(cx)) {
        return None;
    }
    let caps = cx.meta.client_capabilities().unwrap_or_default();
    let elicitation = caps.elicitation.as_ref().and_then(|e| serde_json::to_value(e).ok());
    let form_elicitation = elicitation.as_ref().is_some_and(approve::form_mode);
    let url_elicitation = elicitation.as_ref().is_some_and(|e| e.get("url").is_some());
    Some(deferred::Takes { form_elicitation, url_elicitation, tasks: caps.supports_tasks() })
}

/// Does the request speak 2026-07-28 (or later)? Session requests carry no version in
/// `_meta`; their session's version predates it.
fn modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.meta.protocol_version().is_some_and(|v| !v.has_initialize())
}

fn request_parts(cx: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    cx.extensions.get::<http::request::Parts>()
}

/// A router outcome as an MCP result: the tool result, or a deferred record described for
/// the client (it resolves it through the host's `ResolveDeferred`).
fn call_result(outcome: Outcome) -> CallToolResult {
    let (content_json, is_error) = match outcome {
        Outcome::Result(r) => (r.content_json, r.is_error),
        Outcome::Found(f) => {
            let r = f.result();
            (r.content_json, r.is_error)
        }
        Outcome::Fault(f) => {
            let r = f.render();
            (r.content_json, r.is_error)
        }
        Outcome::Deferred(d) => {
            let (status, message) = match d.kind {
                DeferredKind::Approval => (
                    "approval_pending",
                    format!(
                        "The call to {} awaits approval by a person (deferred id {}). It has not run yet. The host approves or denies it with ResolveDeferred under this deferred id; its result is then in the record (ListDeferred). Do not call it again meanwhile.",
                        d.target.name, d.deferred_id
                    ),
                ),
                DeferredKind::ClientExecution => (
                    "client_execution_pending",
                    format!("{} is run by the client (deferred id {}); its result comes from the client.", d.target.name, d.deferred_id),
                ),
                DeferredKind::Consent => {
                    let r = d.consent_fault().expect("a consent record").render();
                    return with_content(r.content_json, r.is_error);
                }
            };
            let arguments: Value = serde_json::from_str(&d.target.arguments_json).unwrap_or(Value::Null);
            let body = json!({
                "status": status,
                "deferred_id": d.deferred_id,
                "message": message,
                "target": {"group": d.target.group, "tool": d.target.tool, "name": d.target.name, "source_id": d.target.source_id, "arguments": arguments},
            });
            (body.to_string(), false)
        }
    };
    with_content(content_json, is_error)
}

/// A result's JSON as MCP content (and structured content when it is an object).
fn with_content(content_json: String, is_error: bool) -> CallToolResult {
    let structured = serde_json::from_str::<Value>(&content_json).ok().filter(Value::is_object);
    // A tool that answers plain text reaches the client as that text, not a quoted string.
    let content = vec![ContentBlock::text(crate::provider::result_text(&content_json))];
    let mut r = if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
    r.structured_content = structured;
    r
}
