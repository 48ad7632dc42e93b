//! The MCP endpoint of every agent definition (SPEC §6): `/mcp/agents/{agent}` (default
//! version) and `/mcp/agents/{agent}/versions/{n}`, streamable HTTP. `tools/list` is
//! `GetModelTools`; `tools/call` is `HandleToolCall` (same router path, deferred records
//! included). The MCP session id is the run id.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, InitializeRequestParams,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServerHandler;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::api::quota::RunQuota;
use crate::auth::limits::RateLimiter;
use crate::auth::{Authenticator, Principal, UNAUTHENTICATED_MESSAGE};
use crate::config::Limits;
use crate::error::Error;
use crate::invoke::{DeferredKind, Outcome, Router, RunContext, ToolCall};

/// What the gRPC listener enforces, applied to the MCP endpoint too (SPEC §9): the caller's
/// credentials, the tenant's request rate (one budget shared with gRPC), the arguments size
/// and the live-runs limit.
#[derive(Clone)]
pub struct EndpointGuard {
    pub auth: Authenticator,
    pub rate: Arc<RateLimiter>,
    pub limits: Arc<Limits>,
    pub runs: Arc<RunQuota>,
}

#[derive(Debug, Clone, Default)]
pub struct McpEndpointConfig {
    /// `Host` values accepted (rmcp refuses others: DNS-rebinding protection). Add the
    /// Kubernetes Service name here. Empty = loopback names only.
    pub allowed_hosts: Vec<String>,
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The routes to merge into the HTTP listener.
pub fn routes(
    router: Arc<Router>,
    config: &McpEndpointConfig,
    drain: Arc<crate::server::Drain>,
    cancel: tokio_util::sync::CancellationToken,
    guard: EndpointGuard,
) -> axum::Router {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    hosts.extend(config.allowed_hosts.iter().cloned());
    let router_for_end = router.clone();
    let handler = AgentMcp { router, guard: guard.clone() };
    let service: StreamableHttpService<AgentMcp, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Default::default(),
        StreamableHttpServerConfig::default().with_allowed_hosts(hosts).with_cancellation_token(cancel),
    );
    let ends = router_for_end.clone();
    axum::Router::new()
        .route_service("/mcp/agents/{agent}", service.clone())
        .route_service("/mcp/agents/{agent}/versions/{version}", service)
        .layer(axum::middleware::from_fn(move |mut req: axum::extract::Request, next: axum::middleware::Next| {
            let (router, drain, guard) = (ends.clone(), drain.clone(), guard.clone());
            async move {
                // Shutting down: new MCP requests are refused like gRPC calls.
                if drain.is_draining() {
                    return (http::StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
                }
                // Waits for a JWKS fetch on an unknown `kid`, as gRPC calls do.
                let principal = match guard.auth.authenticate_waiting(req.headers()).await {
                    Ok(p) => p,
                    Err(_) => {
                        let challenge = [(http::header::WWW_AUTHENTICATE, "Bearer")];
                        return (http::StatusCode::UNAUTHORIZED, challenge, UNAUTHENTICATED_MESSAGE).into_response();
                    }
                };
                if let Err(wait) = guard.rate.check(&principal.tenant) {
                    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
                    let retry = [(http::header::RETRY_AFTER, secs.to_string())];
                    return (http::StatusCode::TOO_MANY_REQUESTS, retry, "request rate limit of this tenant reached").into_response();
                }
                req.extensions_mut().insert(principal);
                end_run_on_delete(router, req, next).await
            }
        }))
}

/// A client that terminates its MCP session (HTTP DELETE) ends the run: its pin and its
/// MCP sessions upstream are released, as with `EndRun`.
async fn end_run_on_delete(router: Arc<Router>, req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let ended = (req.method() == http::Method::DELETE)
        .then(|| {
            let session = req.headers().get("mcp-session-id")?.to_str().ok()?.to_string();
            let agent = req.uri().path().strip_prefix("/mcp/agents/")?.split('/').next()?.to_string();
            Some((tenant_of(req.extensions()), agent, session))
        })
        .flatten();
    let response = next.run(req).await;
    if let Some((tenant, agent, session)) = ended
        && response.status().is_success()
        && let Err(e) = router.end_run(&tenant, &agent, &session).await
    {
        tracing::debug!(error = %e, "ending the run of a closed MCP session failed");
    }
    response
}

/// The tenant of an MCP request: the authenticated principal's, which the endpoint's
/// middleware put in the request (tenant `default` when authentication is off).
pub fn tenant_of(extensions: &http::Extensions) -> String {
    extensions.get::<Principal>().map(|p| p.tenant.clone()).unwrap_or_else(|| Principal::anonymous().tenant)
}

#[derive(Clone)]
struct AgentMcp {
    router: Arc<Router>,
    guard: EndpointGuard,
}

/// What a request addresses: tenant, agent, version (0 = default), and its run.
struct Target {
    tenant: String,
    agent_id: String,
    version: u32,
    run: RunContext,
}

fn target(cx: &RequestContext<RoleServer>) -> Result<Target, ErrorData> {
    let parts = cx
        .extensions
        .get::<http::request::Parts>()
        .ok_or_else(|| ErrorData::internal_error("the MCP endpoint is served over HTTP only", None))?;
    let path = parts.uri.path();
    let rest = path.strip_prefix("/mcp/agents/").unwrap_or_default();
    let (agent_id, version) = match rest.split_once("/versions/") {
        Some((a, v)) => (a, v.parse::<u32>().ok().filter(|v| *v > 0).ok_or_else(|| ErrorData::invalid_params(format!("{v:?} is not a version number (1, 2, …)"), None))?),
        None => (rest.trim_end_matches('/'), 0),
    };
    let run_id = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    // The run's identity is the credential's claims (MCP requests carry no RunContext).
    let mut run = RunContext { run_id, ..Default::default() };
    if let Some(p) = parts.extensions.get::<Principal>() {
        p.merge_identity(&mut run.identity);
    }
    Ok(Target { tenant: tenant_of(&parts.extensions), agent_id: agent_id.to_string(), version, run })
}

fn mcp_error(e: Error) -> ErrorData {
    match e {
        Error::NotFound(m) => ErrorData::invalid_params(m, None),
        Error::InvalidArgument(_) | Error::FailedPrecondition(_) => ErrorData::invalid_request(e.to_string(), None),
        Error::ResourceExhausted(m) | Error::Unavailable(m) => ErrorData::internal_error(m, None),
        Error::Internal(_) => ErrorData::internal_error("internal error", None),
    }
}

fn schema_object(text: &str) -> JsonObject {
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        _ => JsonObject::from_iter([("type".to_string(), Value::String("object".into()))]),
    }
}

impl ServerHandler for AgentMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("toolrouter", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(&self, request: InitializeRequestParams, cx: RequestContext<RoleServer>) -> Result<InitializeResult, ErrorData> {
        let t = target(&cx)?;
        // An unknown agent fails the handshake with a clear message.
        let (_, _, instructions, _) = self.router.model_tools(&t.tenant, &t.agent_id, t.version, &RunContext::default()).await.map_err(mcp_error)?;
        cx.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if !instructions.is_empty() {
            result.instructions = Some(instructions);
        }
        Ok(result)
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, cx: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        let t = target(&cx)?;
        self.guard.runs.admit(&t.tenant, &t.agent_id, &t.run.run_id).await.map_err(mcp_error)?;
        let (_, tools, _, _) = self.router.model_tools(&t.tenant, &t.agent_id, t.version, &t.run).await.map_err(mcp_error)?;
        let tools = tools.into_iter().map(|m| Tool::new(m.name, m.description, schema_object(&m.input_schema_json))).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(&self, request: CallToolRequestParams, cx: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let t = target(&cx)?;
        let arguments = request.arguments.map(|a| Value::Object(a).to_string()).unwrap_or_else(|| "{}".into());
        let max = self.guard.limits.max_arguments_bytes;
        if arguments.len() > max {
            return Err(ErrorData::invalid_params(format!("arguments are {} bytes, over the limit of {max}", arguments.len()), None));
        }
        self.guard.runs.admit(&t.tenant, &t.agent_id, &t.run.run_id).await.map_err(mcp_error)?;
        // MCP has no tool call ids: each tools/call is a call of its own.
        let call = ToolCall { tool_call_id: format!("mcp-{:032x}", rand::random::<u128>()), tool_name: request.name.to_string(), arguments_json: arguments };
        let outcome = self.router.handle(&t.tenant, &t.agent_id, t.version, &t.run, &call).await.map_err(mcp_error)?;
        Ok(CallToolResponse::from(call_result(outcome)))
    }
}

/// A router outcome as an MCP result: the tool result, or a deferred record described for
/// the client (it resolves it through the host's `ResolveDeferred`).
fn call_result(outcome: Outcome) -> CallToolResult {
    let (content_json, is_error) = match outcome {
        Outcome::Result(r) => (r.content_json, r.is_error),
        Outcome::Deferred(d) => {
            let (status, message) = match d.kind {
                DeferredKind::Approval => (
                    "approval_pending",
                    format!("The call to {} awaits approval by a person (deferred id {}). It has not run yet; its result comes once it is approved or denied.", d.target.name, d.deferred_id),
                ),
                DeferredKind::ClientExecution => (
                    "client_execution_pending",
                    format!("{} is run by the client (deferred id {}); its result comes from the client.", d.target.name, d.deferred_id),
                ),
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
    let structured = serde_json::from_str::<Value>(&content_json).ok().filter(Value::is_object);
    let content = vec![ContentBlock::text(content_json)];
    let mut r = if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
    r.structured_content = structured;
    r
}
