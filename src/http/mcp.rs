//! The MCP endpoint of every agent definition (SPEC §6): `/mcp/agents/{agent}` (default
//! version) and `/mcp/agents/{agent}/versions/{n}`, streamable HTTP. `tools/list` is
//! `GetModelTools`; `tools/call` is `HandleToolCall` (same router path, deferred records
//! included). The MCP session id is the run id.

use std::sync::Arc;

use axum::response::IntoResponse;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, InitializeRequestParams, InitializeResult,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use crate::admission::{Addressed, Admission, CallContext, Principal};
use crate::auth::limits::Limits;
use crate::auth::limits::RateLimiter;
use crate::auth::{Authenticator, UNAUTHENTICATED_MESSAGE};
use crate::call::{RunContext, ToolCall};
use crate::error::{Error, ErrorCode};
use crate::invoke::{DeferredKind, Outcome, Router};

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
}

impl Default for McpEndpointConfig {
    fn default() -> Self {
        Self { allowed_hosts: Vec::new(), body_timeout: std::time::Duration::from_secs(30) }
    }
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The routes to merge into the HTTP listener.
pub fn routes(router: Arc<Router>, config: &McpEndpointConfig, cancel: tokio_util::sync::CancellationToken, guard: EndpointGuard) -> axum::Router {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    hosts.extend(config.allowed_hosts.iter().cloned());
    let handler = AgentMcp { router: router.clone(), guard: guard.clone() };
    let server_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(guard.limits.max_message_bytes);
    let service: StreamableHttpService<AgentMcp, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Default::default(), server_config);
    let gate = Arc::new(Gate { router, guard, body_timeout: config.body_timeout });
    axum::Router::new().route_service("/mcp/agents/{agent}", service.clone()).route_service("/mcp/agents/{agent}/versions/{version}", service).layer(
        axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
            let gate = gate.clone();
            async move { gate.pass(req, next).await }
        }),
    )
}

/// What every request to the endpoint passes before rmcp sees it.
struct Gate {
    router: Arc<Router>,
    guard: EndpointGuard,
    body_timeout: std::time::Duration,
}

impl Gate {
    async fn pass(&self, mut req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
        let guard = &self.guard;
        // Waits for a JWKS fetch on an unknown `kid`, as gRPC calls do.
        let principal = match guard.auth.authenticate_waiting(req.headers()).await {
            Ok(p) => p,
            Err(_) => {
                let challenge = [(http::header::WWW_AUTHENTICATE, "Bearer")];
                return (status(ErrorCode::Unauthenticated), challenge, UNAUTHENTICATED_MESSAGE).into_response();
            }
        };
        if let Err(wait) = guard.rate.check(&principal.tenant) {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            let retry = [(http::header::RETRY_AFTER, secs.to_string())];
            return (status(ErrorCode::ResourceExhausted), retry, "request rate limit of this tenant reached").into_response();
        }
        // Every request (session set-up, listings, calls, DELETE) is admitted like a gRPC
        // request: refused while draining, counted in flight while it runs.
        let request = match guard.admission.request(&principal) {
            Ok(r) => r,
            Err(e) => return (status(e.code()), e.public_message()).into_response(),
        };
        if req.method() == http::Method::POST {
            req = match self.checked_post(req, &principal).await {
                Ok(req) => req,
                Err(refusal) => return refusal,
            };
        }
        req.extensions_mut().insert(principal);
        let ended = ended_run(&req);
        let mut response = next.run(req).await;
        if let Some((agent, session)) = ended
            && response.status().is_success()
        {
            if let Err(e) = self.router.end_run(&request, &agent, &session).await {
                tracing::debug!(error = %e, "ending the run of a closed MCP session failed");
            }
            // The session is gone, nothing follows (rmcp answers 202; clients expect 200 or 204).
            *response.status_mut() = http::StatusCode::NO_CONTENT;
            *response.body_mut() = axum::body::Body::empty();
        }
        response
    }

    /// Reads a POST's body (bounded in size and time) and checks it is a JSON-RPC message
    /// before rmcp parses it again: malformed JSON is a JSON-RPC parse error (-32700) and
    /// another shape an invalid request (-32600), both HTTP 400. An `initialize` for an agent
    /// the caller cannot see is refused here with the JSON-RPC error the handshake would give.
    async fn checked_post(&self, req: axum::extract::Request, principal: &Principal) -> Result<axum::extract::Request, axum::response::Response> {
        use http_body_util::BodyExt;
        let (parts, body) = req.into_parts();
        let max = self.guard.limits.max_message_bytes;
        let collected = tokio::time::timeout(self.body_timeout, http_body_util::Limited::new(body, max).collect()).await;
        let bytes = match collected {
            Err(_) => return Err((http::StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time").into_response()),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return Err((http::StatusCode::PAYLOAD_TOO_LARGE, format!("the request body is over {max} bytes")).into_response());
            }
            Ok(Err(_)) => return Err((http::StatusCode::BAD_REQUEST, "the request body could not be read").into_response()),
            Ok(Ok(b)) => b.to_bytes(),
        };
        let message = match serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&bytes) {
            Ok(m) => m,
            Err(e) if e.is_syntax() || e.is_eof() => return Err(jsonrpc_refusal(Value::Null, -32700, &format!("Parse error: {e}"))),
            Err(e) => return Err(jsonrpc_refusal(Value::Null, -32600, &format!("Invalid request: {e}"))),
        };
        if let rmcp::model::ClientJsonRpcMessage::Request(r) = &message
            && matches!(r.request, rmcp::model::ClientRequest::InitializeRequest(_))
            && let Err(e) = self.agent_exists(&parts, principal).await
        {
            let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
            let answer = json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code().jsonrpc(), "message": e.public_message()}});
            return Err(([(http::header::CONTENT_TYPE, "application/json")], answer.to_string()).into_response());
        }
        Ok(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes)))
    }

    /// Is the agent (and version) of the path one the caller can use?
    async fn agent_exists(&self, parts: &http::request::Parts, principal: &Principal) -> Result<(), Error> {
        let (agent_id, version) = addressed(parts.uri.path())?;
        let cx = self.guard.admission.call(principal, Addressed { agent_id, version, ..Default::default() }).await?;
        self.router.resolve(&cx).await.map(|_| ())
    }
}

/// A JSON-RPC error for a request rmcp never saw, with HTTP 400.
fn jsonrpc_refusal(id: Value, code: i32, message: &str) -> axum::response::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    (http::StatusCode::BAD_REQUEST, [(http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// The agent and version (0 = the default) an endpoint path addresses.
fn addressed(path: &str) -> Result<(String, u32), Error> {
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

/// The HTTP status of an error code.
fn status(code: ErrorCode) -> http::StatusCode {
    http::StatusCode::from_u16(code.http()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
}

/// A client that terminates its MCP session (HTTP DELETE) ends the run (agent, session id):
/// through `Router::end_run`, the same path as `EndRun`.
fn ended_run(req: &axum::extract::Request) -> Option<(String, String)> {
    if req.method() != http::Method::DELETE {
        return None;
    }
    let session = req.headers().get("mcp-session-id")?.to_str().ok()?.to_string();
    let agent = req.uri().path().strip_prefix("/mcp/agents/")?.split('/').next()?.to_string();
    Some((agent, session))
}

#[derive(Clone)]
struct AgentMcp {
    router: Arc<Router>,
    guard: EndpointGuard,
}

/// Admits an MCP request as a call: the agent and version of its path, the run of its
/// session, the identity of its credential.
async fn admit(admission: &Admission, cx: &RequestContext<RoleServer>) -> Result<CallContext, ErrorData> {
    let parts =
        cx.extensions.get::<http::request::Parts>().ok_or_else(|| mcp_error(Error::Internal("the MCP endpoint is served over HTTP only".into())))?;
    let (agent_id, version) = addressed(parts.uri.path()).map_err(mcp_error)?;
    let run_id = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    // The run's identity is the credential's claims (MCP requests carry no RunContext).
    let run = RunContext { run_id, ..Default::default() };
    let principal = parts.extensions.get::<Principal>().cloned().unwrap_or_else(Principal::anonymous);
    let to = Addressed { agent_id, version, run, timeout: None };
    admission.call(&principal, to).await.map_err(mcp_error)
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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, cx: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        let call = admit(&self.guard.admission, &cx).await?;
        let tools = self.router.model_tools(&call).await.map_err(mcp_error)?.tools;
        let tools = tools.into_iter().map(|m| Tool::new(m.name, m.description, schema_object(&m.input_schema_json))).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(&self, request: CallToolRequestParams, cx: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map(|a| Value::Object(a).to_string()).unwrap_or_else(|| "{}".into());
        let max = self.guard.limits.max_arguments_bytes;
        if arguments.len() > max {
            return Err(mcp_error(Error::invalid("arguments", format!("arguments are {} bytes, over the limit of {max}", arguments.len()))));
        }
        let cx = admit(&self.guard.admission, &cx).await?;
        // MCP has no tool call ids: each tools/call is a call of its own.
        let call =
            ToolCall { tool_call_id: format!("mcp-{:032x}", rand::random::<u128>()), tool_name: request.name.to_string(), arguments_json: arguments };
        let outcome = self.router.handle(&cx, &call).await.map_err(mcp_error)?;
        Ok(CallToolResponse::from(call_result(outcome)))
    }
}

/// A router outcome as an MCP result: the tool result, or a deferred record described for
/// the client (it resolves it through the host's `ResolveDeferred`).
fn call_result(outcome: Outcome) -> CallToolResult {
    let (content_json, is_error) = match outcome {
        Outcome::Result(r) => (r.content_json, r.is_error),
        Outcome::Fault(f) => {
            let r = f.render();
            (r.content_json, r.is_error)
        }
        Outcome::Deferred(d) => {
            let (status, message) = match d.kind {
                DeferredKind::Approval => (
                    "approval_pending",
                    format!(
                        "The call to {} awaits approval by a person (deferred id {}). It has not run yet; its result comes once it is approved or denied.",
                        d.target.name, d.deferred_id
                    ),
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
