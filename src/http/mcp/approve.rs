//! Approvals through MCP elicitation (issue 16): a session client that declared form
//! elicitation is asked, in the stream of its `tools/call`, whether an approval-gated call may
//! run. The question's JSON-RPC id names the deferred record, so the client's answer (a POST
//! that any replica may receive) resolves the durable record, if it comes from the session
//! the record belongs to; the stream waits for the record, not for a reply in this replica's
//! memory, and ends with the call's result. Other clients get a result saying the approval is
//! pending and how it gets resolved. Stateless requests (no session, so no run to bind an
//! answer to) are not asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::admission::RequestContext;
use crate::invoke::{DeferredCall, Outcome, Resolution, Router};

/// The id prefix of toolrouter's approval questions.
const QUESTION_ID_PREFIX: &str = "toolrouter-approval-";
/// A session id ending so was opened by a client that takes form elicitation: any replica
/// reads the capability off the id, with no lookup.
pub const ELICITS_SUFFIX: &str = "-e";
/// How long a `tools/call` stream waits for the person's answer before it ends with the
/// pending result (the record stays pending: the host can still resolve it).
const WAIT_FOR_ANSWER: Duration = Duration::from_secs(10 * 60);
/// A comment line this often keeps proxies from closing the waiting stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Questions waiting at once, per replica and per tenant; beyond, the pending answer.
const MAX_WAITING: usize = 1_000;
const MAX_WAITING_PER_TENANT: usize = 100;

/// The approval streams open on this replica.
#[derive(Default)]
pub struct Waiting(Mutex<HashMap<String, usize>>);

/// A place among the waiting streams, given back when dropped.
struct Place {
    waiting: Arc<Waiting>,
    tenant: String,
}

impl Waiting {
    fn enter(self: &Arc<Self>, tenant: &str) -> Option<Place> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = m.values().sum();
        let mine = m.get(tenant).copied().unwrap_or(0);
        if total >= MAX_WAITING || mine >= MAX_WAITING_PER_TENANT {
            return None;
        }
        m.insert(tenant.to_string(), mine + 1);
        Some(Place { waiting: self.clone(), tenant: tenant.to_string() })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut m = self.waiting.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.tenant);
            }
        }
    }
}

/// Set by the `tools/call` handler when its call awaits an approval the client can give.
#[derive(Clone, Default)]
pub struct ApprovalSlot(Arc<Mutex<Option<DeferredCall>>>);

impl ApprovalSlot {
    pub fn fill(&self, call: DeferredCall) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(call);
    }

    pub fn is_filled(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn take(&self) -> Option<DeferredCall> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Did the session's client declare form elicitation at `initialize` (its id says so)?
pub fn client_elicits(session: Option<&str>) -> bool {
    session.is_some_and(|s| s.ends_with(ELICITS_SUFFIX))
}

/// An elicitation capability with form mode (an empty one means form, for older clients).
pub fn form_mode(elicitation: &Value) -> bool {
    match elicitation.as_object() {
        Some(e) => e.contains_key("form") || !e.contains_key("url"),
        None => false,
    }
}

/// The approval question's `elicitation/create` params (form mode).
pub(super) fn question_params(call: &DeferredCall) -> Value {
    let arguments: Value = serde_json::from_str(&call.target.arguments_json).unwrap_or(Value::Null);
    let message = format!(
        "The assistant wants to call {} ({}) with these arguments: {arguments}. Allow it?",
        call.target.name,
        crate::control::discovery::summary_description(&call.target.definition.description)
    );
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "approve": {"type": "boolean", "title": "Allow", "description": "Run this call.", "default": false},
                "reason": {"type": "string", "title": "Reason", "description": "If not allowed: why (the assistant is told)."}
            },
            "required": ["approve"]
        }
    })
}

/// The question for a deferred approval, as a request in the `tools/call` stream.
fn question(call: &DeferredCall) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": format!("{QUESTION_ID_PREFIX}{}", call.deferred_id),
        "method": "elicitation/create",
        "params": question_params(call),
    })
}

/// What an answer to the approval question (an `ElicitResult`) resolves: accepted with
/// `approve` runs the call, accepted without it or declined denies it; cancelled (dismissed)
/// or missing leaves it pending (`None`).
pub(super) fn resolution_of(answer: Option<&Value>) -> Option<Resolution> {
    let action = answer.and_then(|r| r.get("action")).and_then(Value::as_str).unwrap_or("cancel");
    let content = answer.and_then(|r| r.get("content"));
    match action {
        "accept" if content.and_then(|c| c.get("approve")) == Some(&Value::Bool(true)) => Some(Resolution::Approve { arguments_json: None }),
        "accept" => {
            let reason = content.and_then(|c| c.get("reason")).and_then(Value::as_str).unwrap_or("").to_string();
            Some(Resolution::Deny { message: reason })
        }
        "decline" => Some(Resolution::Deny { message: "The user declined.".into() }),
        _ => None,
    }
}

/// The deferred record a client's JSON-RPC response answers, if it answers one of ours.
pub fn answered(id: &Value) -> Option<&str> {
    id.as_str()?.strip_prefix(QUESTION_ID_PREFIX).filter(|d| !d.is_empty())
}

/// Applies the client's answer: accepted with `approve` runs the call (exactly once, like
/// `ResolveDeferred`), accepted without it or declined denies it; cancelled (dismissed)
/// leaves it pending. Only the session the record belongs to (its run, agent and tenant),
/// opened by a client that elicits, may answer; others get 404. The client gets 202 whatever
/// the resolution came to: the question's stream carries the outcome.
pub async fn apply_answer(
    router: &Arc<Router>,
    rq: &RequestContext,
    to: (&str, Option<&str>),
    deferred_id: &str,
    result: Option<&Value>,
) -> Response {
    let (agent_id, session) = to;
    let owner = router.deferred_owner(&rq.tenant, deferred_id).await.ok().flatten();
    let asked = client_elicits(session) && owner.is_some_and(|(agent, run)| agent == agent_id && Some(run.as_str()) == session);
    if !asked {
        return (http::StatusCode::NOT_FOUND, "no such question in this session").into_response();
    }
    let resolution = resolution_of(result);
    if let Some(resolution) = resolution
        && let Err(e) = router.resolve_deferred(rq, deferred_id, resolution).await
    {
        tracing::debug!(error = %e, "an MCP client's approval answer was not applied");
    }
    http::StatusCode::ACCEPTED.into_response()
}

/// The `tools/call` answer for a call awaiting approval from a client that elicits: an SSE
/// stream with the question, then (once the record is resolved, by this client or the host)
/// the call's result; the pending result if nobody answers in time or the server stops.
pub fn stream(
    router: Arc<Router>,
    waiting: &Arc<Waiting>,
    tenant: String,
    slot: &ApprovalSlot,
    request_id: Value,
    pending: bytes::Bytes,
    stop: CancellationToken,
) -> Option<Response> {
    let call = slot.take()?;
    let place = waiting.enter(&tenant)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::convert::Infallible>>(4);
    tokio::spawn(async move {
        let _place = place;
        let event = |v: &Value| bytes::Bytes::from(format!("event: message\ndata: {v}\n\n"));
        if tx.send(Ok(event(&question(&call)))).await.is_err() {
            return;
        }
        let deadline = tokio::time::Instant::now() + WAIT_FOR_ANSWER;
        let mut pause = Duration::from_millis(50);
        let mut last_sign = tokio::time::Instant::now();
        let reply = loop {
            tokio::select! {
                _ = stop.cancelled() => break None,
                // The client went away: nobody to tell.
                _ = tx.closed() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            match router.deferred_result(&tenant, &call.deferred_id).await {
                Ok(Some(reply)) => break Some(reply),
                Ok(None) => {}
                Err(_) => break None,
            }
            if tokio::time::Instant::now() >= deadline {
                break None;
            }
            if last_sign.elapsed() >= KEEP_ALIVE {
                if tx.send(Ok(bytes::Bytes::from_static(b": waiting for approval\n\n"))).await.is_err() {
                    return;
                }
                last_sign = tokio::time::Instant::now();
            }
            pause = (pause * 2).min(Duration::from_secs(1));
        };
        let last = match reply {
            Some(reply) => {
                let result = super::call_result(Outcome::Result(reply.render()));
                json!({"jsonrpc": "2.0", "id": request_id, "result": result})
            }
            None => serde_json::from_slice(&pending).unwrap_or(Value::Null),
        };
        let _ = tx.send(Ok(event(&last))).await;
    });
    let body = axum::body::Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Some(([(http::header::CONTENT_TYPE, "text/event-stream"), (http::header::CACHE_CONTROL, "no-cache")], body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_elicitation_is_read_from_the_session_id() {
        assert!(client_elicits(Some("abc-e")));
        assert!(!client_elicits(Some("abc")));
        assert!(!client_elicits(None));
        assert!(form_mode(&json!({})) && form_mode(&json!({"form": {}, "url": {}})) && !form_mode(&json!({"url": {}})));
        assert_eq!(answered(&json!("toolrouter-approval-d1")), Some("d1"));
        assert_eq!(answered(&json!(7)), None);
    }

    #[test]
    fn waiting_questions_are_capped_per_tenant_and_given_back() {
        let w = Arc::new(Waiting::default());
        let places: Vec<Place> = (0..MAX_WAITING_PER_TENANT).map(|_| w.enter("t").expect("room")).collect();
        assert!(w.enter("t").is_none(), "the tenant's cap");
        assert!(w.enter("u").is_some(), "another tenant has room");
        drop(places);
        assert!(w.0.lock().unwrap().is_empty(), "every place given back");
    }
}
