//! What every request to the MCP endpoint passes before rmcp sees it: the caller's
//! credentials and rate, admission (refused while draining, counted in flight), the session
//! it names (known here or in the store, else 404 so the client initializes again), a bounded
//! body that is a JSON-RPC message, and for `initialize` a new session: a run of the tenant,
//! within the session caps and the live-runs limit. `DELETE` ends the session's run.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::sessions::{Full, Sessions, new_id};
use super::{EndpointGuard, addressed, approve};
use crate::admission::{Addressed, Principal, RequestContext};
use crate::auth::UNAUTHENTICATED_MESSAGE;
use crate::call::RunContext;
use crate::error::{Error, ErrorCode};
use crate::invoke::Router;

/// Largest answer of rmcp's read back here: an `initialize` (did the handshake succeed?), a
/// `tools/call` whose call awaits approval (the pending answer the question's stream may end with).
const MAX_ANSWER_READ: usize = 1 << 20;

pub struct Gate {
    pub router: Arc<Router>,
    pub guard: EndpointGuard,
    pub body_timeout: std::time::Duration,
    pub sessions: Arc<Sessions>,
    /// Cancelled when the server stops: approval streams end with the pending result.
    pub stop: tokio_util::sync::CancellationToken,
    pub waiting: Arc<approve::Waiting>,
}

/// A POST's body: a JSON-RPC message for rmcp, or a client's answer to one of toolrouter's
/// approval questions (handled here: it resolves a durable record, whichever replica asked).
enum Incoming {
    Message(Box<rmcp::model::ClientJsonRpcMessage>),
    Answer { deferred_id: String, result: Option<Value> },
}

/// The HTTP status of an error code.
fn status(code: ErrorCode) -> http::StatusCode {
    http::StatusCode::from_u16(code.http()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
}

/// A JSON-RPC error for a request rmcp never saw.
fn jsonrpc_error(http_status: http::StatusCode, id: Value, code: i32, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    (http_status, [(http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

impl Gate {
    pub async fn pass(&self, mut req: axum::extract::Request, next: axum::middleware::Next) -> Response {
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
        // A POST's body is read first: a client that never finishes sending it is cut off by
        // the body timeout without holding up a drain as a request in flight.
        let mut message = None;
        let mut answer = None;
        if req.method() == http::Method::POST {
            let (parts, body) = req.into_parts();
            let (bytes, m) = match self.read_message(body).await {
                Ok(m) => m,
                Err(refusal) => return refusal,
            };
            req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
            match m {
                Incoming::Message(m) => message = Some(*m),
                Incoming::Answer { deferred_id, result } => answer = Some((deferred_id, result)),
            }
        }
        // Every request (session set-up, listings, calls, DELETE) is admitted like a gRPC
        // request: refused while draining, counted in flight while it runs.
        let request = match guard.admission.request(&principal) {
            Ok(r) => r,
            Err(e) => return (status(e.code()), e.public_message()).into_response(),
        };
        let (agent_id, version) = match addressed(req.uri().path()) {
            Ok(a) => a,
            Err(e) => return (status(e.code()), e.public_message()).into_response(),
        };
        let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
        match (&session, req.method()) {
            (Some(id), method) => {
                if !self.session_known(&principal, &agent_id, id).await {
                    return (http::StatusCode::NOT_FOUND, "Session not found: initialize again").into_response();
                }
                if method == http::Method::DELETE {
                    return self.close(&request, &agent_id, id).await;
                }
            }
            (None, &http::Method::DELETE) => {
                return (http::StatusCode::BAD_REQUEST, "DELETE needs the Mcp-Session-Id of the session to close").into_response();
            }
            (None, _) => {}
        }
        if let Some((deferred_id, result)) = answer {
            return approve::apply_answer(&self.router, &request, (&agent_id, session.as_deref()), &deferred_id, result.as_ref()).await;
        }
        let mut opening = None;
        if session.is_none()
            && let Some(rmcp::model::ClientJsonRpcMessage::Request(r)) = &message
            && let rmcp::model::ClientRequest::InitializeRequest(init) = &r.request
        {
            let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
            let elicits =
                init.params.capabilities.elicitation.as_ref().and_then(|e| serde_json::to_value(e).ok()).is_some_and(|e| approve::form_mode(&e));
            match self.open(&principal, &agent_id, version, elicits).await {
                Ok(session) => opening = Some(session),
                Err(e) => return jsonrpc_error(http::StatusCode::OK, id, e.code().jsonrpc(), &e.public_message()),
            }
        }
        if let Some(id) = &opening {
            // The handshake is served as a request of the new session (its run).
            req.headers_mut().insert("mcp-session-id", http::HeaderValue::from_str(id).expect("ASCII"));
        }
        req.extensions_mut().insert(principal.clone());
        // A `tools/call` whose call awaits an approval the client can give is answered with
        // the question, then the call's result (see [`approve`]).
        let slot = approve::ApprovalSlot::default();
        let call_id = match &message {
            Some(rmcp::model::ClientJsonRpcMessage::Request(r)) if matches!(r.request, rmcp::model::ClientRequest::CallToolRequest(_)) => {
                req.extensions_mut().insert(slot.clone());
                serde_json::to_value(&r.id).ok()
            }
            _ => None,
        };
        let response = next.run(req).await;
        if let Some(call_id) = call_id
            && slot.is_filled()
        {
            return self.ask(response, &principal, slot, call_id).await;
        }
        match opening {
            Some(id) => self.opened(response, &request, &principal, &agent_id, id).await,
            None => response,
        }
    }

    /// Replaces the pending answer of a `tools/call` by the approval question's stream.
    async fn ask(&self, response: Response, principal: &Principal, slot: approve::ApprovalSlot, call_id: Value) -> Response {
        use http_body_util::BodyExt;
        let (parts, body) = response.into_parts();
        let pending = match http_body_util::Limited::new(body, MAX_ANSWER_READ).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => bytes::Bytes::new(),
        };
        let asked =
            parts.status.is_success() && parts.headers.get(http::header::CONTENT_TYPE).is_some_and(|c| c.as_bytes().starts_with(b"application/json"));
        match asked
            .then(|| {
                approve::stream(self.router.clone(), &self.waiting, principal.tenant.clone(), &slot, call_id, pending.clone(), self.stop.clone())
            })
            .flatten()
        {
            Some(streamed) => streamed,
            None => Response::from_parts(parts, axum::body::Body::from(pending)),
        }
    }

    /// Reads a POST's body (bounded in size and time) and checks it is a JSON-RPC message:
    /// malformed JSON is a JSON-RPC parse error (-32700), another shape an invalid request
    /// (-32600), both with HTTP 400.
    async fn read_message(&self, body: axum::body::Body) -> Result<(bytes::Bytes, Incoming), Response> {
        use http_body_util::BodyExt;
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
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes)
            && v.get("method").is_none()
            && let Some(deferred_id) = v.get("id").and_then(approve::answered)
        {
            let answer = Incoming::Answer { deferred_id: deferred_id.to_string(), result: v.get("result").cloned() };
            return Ok((bytes, answer));
        }
        match serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&bytes) {
            Ok(m) => Ok((bytes, Incoming::Message(Box::new(m)))),
            Err(e) if e.is_syntax() || e.is_eof() => {
                Err(jsonrpc_error(http::StatusCode::BAD_REQUEST, Value::Null, -32700, &format!("Parse error: {e}")))
            }
            Err(e) => Err(jsonrpc_error(http::StatusCode::BAD_REQUEST, Value::Null, -32600, &format!("Invalid request: {e}"))),
        }
    }

    /// Is `id` a live session (run) of this tenant and agent? Remembered here, or in the store
    /// (opened on another replica, or forgotten here while idle).
    async fn session_known(&self, principal: &Principal, agent_id: &str, id: &str) -> bool {
        if self.sessions.knows(id, &principal.tenant, agent_id) {
            return true;
        }
        match self.router.run_is_live(&principal.tenant, agent_id, id).await {
            Ok(true) => {
                self.sessions.remember(id, &principal.tenant, agent_id);
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::warn!(error = %e, "looking an MCP session up failed");
                false
            }
        }
    }

    /// Opens a session for an `initialize`: within the caps, a new run of the tenant (the
    /// live-runs limit), pinned to the version the path names (an unknown agent fails here).
    async fn open(&self, principal: &Principal, agent_id: &str, version: u32, elicits: bool) -> Result<String, Error> {
        self.sessions.room_for(&principal.tenant).map_err(|full| {
            Error::ResourceExhausted(match full {
                Full::Replica(n) => {
                    format!("this replica has {n} MCP sessions open, its limit (--max-mcp-sessions): close idle sessions or retry later")
                }
                Full::Tenant(n) => {
                    format!("this tenant has {n} MCP sessions open on this replica, its limit: close idle sessions (DELETE) or retry later")
                }
            })
        })?;
        let id = if elicits { format!("{}{}", new_id(), approve::ELICITS_SUFFIX) } else { new_id() };
        let to = Addressed { agent_id: agent_id.to_string(), version, run: RunContext { run_id: id.clone(), ..Default::default() }, timeout: None };
        let cx = self.guard.admission.call(principal, to).await?;
        self.router.resolve(&cx).await?;
        Ok(id)
    }

    /// After rmcp answered an `initialize`: a successful handshake gets its session id (and
    /// is remembered); a failed one gives its run back.
    async fn opened(&self, response: Response, request: &RequestContext, principal: &Principal, agent_id: &str, id: String) -> Response {
        use http_body_util::BodyExt;
        let (mut parts, body) = response.into_parts();
        let bytes = match http_body_util::Limited::new(body, MAX_ANSWER_READ).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => bytes::Bytes::new(),
        };
        let succeeded = parts.status.is_success() && serde_json::from_slice::<Value>(&bytes).is_ok_and(|v| v.get("result").is_some());
        if succeeded {
            self.sessions.remember(&id, &principal.tenant, agent_id);
            parts.headers.insert("mcp-session-id", http::HeaderValue::from_str(&id).expect("ASCII"));
        } else if let Err(e) = self.router.end_run(request, agent_id, &id).await {
            tracing::debug!(error = %e, "giving back the run of a failed MCP handshake failed");
        }
        Response::from_parts(parts, axum::body::Body::from(bytes))
    }

    /// `DELETE`: the session's run ends through `Router::end_run`, the same path as `EndRun`.
    async fn close(&self, request: &RequestContext, agent_id: &str, id: &str) -> Response {
        self.sessions.forget(id);
        if let Err(e) = self.router.end_run(request, agent_id, id).await {
            return (status(e.code()), e.public_message()).into_response();
        }
        http::StatusCode::NO_CONTENT.into_response()
    }
}
