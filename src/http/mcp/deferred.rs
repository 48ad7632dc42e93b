//! Deferred records in MCP's own terms (issue 21), for clients that carry no session.
//!
//! A stateless (2026-07-28) `tools/call` whose call awaits approval, from a client that
//! declared form elicitation, is answered with an `InputRequiredResult` (a multi round-trip
//! request): the approval question, and as `requestState` a handle naming the durable
//! record. The client retries the same `tools/call` with its answer; whichever replica gets
//! the retry resolves the record (exactly once, as `ResolveDeferred`) and answers with the
//! call's result. Nothing is kept in memory between the rounds.
//!
//! Clients that declared the Tasks extension get deferred calls (approvals and client
//! executions) as tasks: the task id is the deferred id, `tasks/get` reads the record (its
//! state, then its result), `tasks/update` answers the approval question, `tasks/cancel`
//! denies the call. A task is visible to the tenant and agent the record belongs to.

use std::sync::Arc;

use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, ErrorData, InputRequest, InputRequests, InputRequiredResult, InputResponses, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use super::{approve, call_result, mcp_error};
use crate::admission::CallContext;
use crate::error::Error;
use crate::invoke::{DeferredCall, DeferredKind, DeferredRecord, DeferredState, Outcome, Resolution, Router, Settled};

/// The key of the approval question among a result's input requests.
pub const APPROVAL_INPUT: &str = "approval";
/// `requestState` of an approval question: this prefix, then the deferred id.
const STATE_PREFIX: &str = "toolrouter-approval-";
/// How often a task's client is asked to poll.
const POLL_INTERVAL_MS: u64 = 1_000;

/// What a client declared it can take, read off the request (or its session).
#[derive(Debug, Clone, Copy, Default)]
pub struct Takes {
    pub form_elicitation: bool,
    pub url_elicitation: bool,
    pub tasks: bool,
}

/// The key of the consent link among a result's input requests.
pub const CONSENT_INPUT: &str = "consent";
/// `requestState` of a consent link: this prefix, then the deferred id.
const CONSENT_PREFIX: &str = "toolrouter-consent-";

/// A consent record for a 2026-07-28 client that takes URL-mode elicitation: the link as an
/// input request (a multi round-trip request). Its retry answers with the call's result once
/// the user has consented, else with the consent error again.
pub fn consent_input(call: &DeferredCall) -> InputRequiredResult {
    let request = json!({"method": "elicitation/create", "params": {
        "mode": "url",
        "message": format!("{} needs your permission: open the link and allow access.", call.target.name),
        "url": call.consent_url,
        "elicitationId": call.deferred_id,
    }});
    let request: InputRequest = serde_json::from_value(request).expect("a URL elicitation is an input request");
    let state = format!("{CONSENT_PREFIX}{}", call.deferred_id);
    InputRequiredResult::new(Some(InputRequests::from([(CONSENT_INPUT.to_string(), request)])), Some(state))
}

/// Is this `requestState` one of a consent link?
pub fn is_consent_state(state: &str) -> bool {
    state.starts_with(CONSENT_PREFIX)
}

/// The retry after a consent link: the record's result once the user consented (the callback
/// ran the call), the consent error while it waits.
pub async fn answer_consent_retry(router: &Arc<Router>, cx: &CallContext, state: &str) -> Result<CallToolResponse, ErrorData> {
    let unknown = || mcp_error(Error::invalid("requestState", "names no consent of this agent: call the tool again without it"));
    let id = state.strip_prefix(CONSENT_PREFIX).filter(|d| !d.is_empty()).ok_or_else(unknown)?;
    let record = router.deferred_record(&cx.tenant, id).await.map_err(mcp_error)?.ok_or_else(unknown)?;
    if record.agent_id != cx.agent_id || record.call.kind != DeferredKind::Consent {
        return Err(unknown());
    }
    match (&record.result, record.state) {
        (Some(reply), _) => Ok(CallToolResponse::Complete(call_result(Outcome::Result(reply.render())))),
        (None, DeferredState::Expired) => {
            Err(mcp_error(Error::FailedPrecondition(format!("the consent for {} expired: call the tool again", record.call.target.name))))
        }
        (None, _) => Err(super::consent_required(&record.call)),
    }
}

/// The approval question as an input request.
fn approval_input(call: &DeferredCall) -> InputRequests {
    let request = json!({"method": "elicitation/create", "params": approve::question_params(call)});
    let request: InputRequest = serde_json::from_value(request).expect("an elicitation request is an input request");
    InputRequests::from([(APPROVAL_INPUT.to_string(), request)])
}

/// A deferred outcome for a client without a session: a task, the approval question (a
/// multi round-trip request), the result when the record was resolved meanwhile (a call id
/// sent again), or `None` (the pending result, as for any client).
pub async fn answer_deferred(router: &Router, cx: &CallContext, call: &DeferredCall, takes: Takes) -> Result<Option<CallToolResponse>, ErrorData> {
    let record = task_record(router, cx, &call.deferred_id).await?;
    if takes.tasks {
        return Ok(Some(CallToolResponse::Task(CreateTaskResult::new(task_of(&record, takes).task))));
    }
    if let Some(reply) = &record.result {
        return Ok(Some(CallToolResponse::Complete(call_result(Outcome::Result(reply.render())))));
    }
    let asks = call.kind == DeferredKind::Approval && record.state == DeferredState::Pending && record.resolution.is_empty();
    if asks && takes.form_elicitation {
        let state = format!("{STATE_PREFIX}{}", call.deferred_id);
        return Ok(Some(CallToolResponse::InputRequired(InputRequiredResult::new(Some(approval_input(call)), Some(state)))));
    }
    Ok(None)
}

/// A retried `tools/call` carrying the answer to an approval question: resolves the record
/// the state names (it must be the tenant's, of this agent, for the same tool and arguments)
/// and answers with the call's result; a dismissed question leaves it pending.
pub async fn answer_retry(
    router: &Arc<Router>,
    cx: &CallContext,
    retried: (&str, &str),
    state: &str,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    let (tool_name, arguments_json) = retried;
    let unknown = || mcp_error(Error::invalid("requestState", "names no approval question of this agent: call the tool again without it"));
    let id = state.strip_prefix(STATE_PREFIX).filter(|d| !d.is_empty()).ok_or_else(unknown)?;
    let record = router.deferred_record(&cx.tenant, id).await.map_err(mcp_error)?.ok_or_else(unknown)?;
    // An approved approval-gated client tool is a client execution now (same record).
    let asked = record.call.kind == DeferredKind::Approval || record.call.target.definition.requires_approval;
    if record.agent_id != cx.agent_id || !asked {
        return Err(unknown());
    }
    if record.call.original_call.tool_name != tool_name {
        return Err(mcp_error(Error::invalid("name", "the retry of a call names the tool of the call it retries")));
    }
    // `call_tool` names its target in its arguments: without this, the answer would run
    // another call than the one the request asked for.
    let same = |a: &str| serde_json::from_str::<Value>(a).ok();
    if same(&record.call.original_call.arguments_json) != same(arguments_json) {
        return Err(mcp_error(Error::invalid("arguments", "the retry of a call carries the arguments of the call it retries")));
    }
    // Handed to the client by an earlier answer: that answer stands (a replay changes nothing).
    if record.call.kind == DeferredKind::ClientExecution {
        if record.state == DeferredState::Expired {
            return Err(mcp_error(Error::FailedPrecondition(format!("deferred call {id:?} expired before it was resolved"))));
        }
        let outcome = match &record.result {
            Some(reply) => Outcome::Result(reply.render()),
            None => Outcome::Deferred(record.call.clone()),
        };
        return Ok(CallToolResponse::Complete(call_result(outcome)));
    }
    let answer = responses.and_then(|r| r.get(APPROVAL_INPUT));
    let rq = cx.request();
    let outcome = match approve::resolution_of(answer) {
        Some(resolution) => match router.resolve_deferred(&rq, id, resolution).await {
            Ok(Settled::Done { reply, .. }) => Outcome::Result(reply.render()),
            Ok(Settled::HandedToClient(call)) => Outcome::Deferred(*call),
            // Resolved otherwise meanwhile (by the host, say): its result stands.
            Err(Error::FailedPrecondition(_)) => settled_or_pending(router, cx, &record).await?,
            Err(e) => return Err(mcp_error(e)),
        },
        None => Outcome::Deferred(record.call.clone()),
    };
    Ok(CallToolResponse::Complete(call_result(outcome)))
}

/// The record's result if it has one, else its pending answer.
async fn settled_or_pending(router: &Arc<Router>, cx: &CallContext, record: &DeferredRecord) -> Result<Outcome, ErrorData> {
    match router.deferred_result(&cx.tenant, &record.call.deferred_id).await.map_err(mcp_error)? {
        Some(reply) => Ok(Outcome::Result(reply.render())),
        None => Ok(Outcome::Deferred(record.call.clone())),
    }
}

/// The record a task id names, if the tenant has it for this agent.
pub async fn task_record(router: &Router, cx: &CallContext, task_id: &str) -> Result<DeferredRecord, ErrorData> {
    match router.deferred_record(&cx.tenant, task_id).await.map_err(mcp_error)? {
        Some(r) if r.agent_id == cx.agent_id => Ok(r),
        _ => Err(mcp_error(Error::invalid("taskId", format!("no task {task_id:?} of this agent")))),
    }
}

/// A record as a task: pending approval is `input_required` (the question) for a client that
/// elicits, else `working` like every record still waiting or executing; a resolved one is
/// `completed` with the call's result; an expired one `cancelled`.
pub fn task_of(record: &DeferredRecord, takes: Takes) -> DetailedTask {
    let call = &record.call;
    let waiting_for_approval = call.kind == DeferredKind::Approval && record.resolution.is_empty();
    let (payload, message) = match record.state {
        DeferredState::Pending if waiting_for_approval && takes.form_elicitation => {
            (TaskPayload::InputRequired { input_requests: approval_input(call) }, "awaits approval".to_string())
        }
        DeferredState::Pending if waiting_for_approval => {
            (TaskPayload::Working, format!("{} awaits approval by a person; the host approves or denies it with ResolveDeferred", call.target.name))
        }
        DeferredState::Pending => (TaskPayload::Working, format!("{} is run by the client; its result comes from the host", call.target.name)),
        DeferredState::Executing => (TaskPayload::Working, "running".to_string()),
        DeferredState::Resolved => {
            let result = match &record.result {
                Some(reply) => call_result(Outcome::Result(reply.render())),
                None => call_result(Outcome::Deferred(call.clone())),
            };
            let result = match serde_json::to_value(&result) {
                Ok(Value::Object(m)) => m,
                _ => JsonObject::new(),
            };
            (TaskPayload::Completed { result }, format!("resolved: {}", record.resolution))
        }
        DeferredState::Expired => (TaskPayload::Cancelled, "expired before it was resolved".to_string()),
    };
    let created = timestamp(record.create_time);
    let updated = timestamp(record.resolve_time.unwrap_or(record.create_time));
    let mut task = Task::new(call.deferred_id.clone(), TaskStatus::Working, created, updated)
        .with_status_message(message)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    if let Some(expire) = record.expire_time {
        task = task.with_ttl_ms(expire.saturating_sub(record.create_time).max(0) as u64);
    }
    DetailedTask::new(task, payload)
}

/// `tasks/update`: the answer to the task's approval question.
pub async fn update_task(router: &Arc<Router>, cx: &CallContext, task_id: &str, responses: &InputResponses) -> Result<(), ErrorData> {
    let record = task_record(router, cx, task_id).await?;
    let Some(answer) = responses.get(APPROVAL_INPUT) else {
        return Err(mcp_error(Error::invalid("inputResponses", format!("answer the input request {APPROVAL_INPUT:?}"))));
    };
    if record.call.kind != DeferredKind::Approval {
        // An approval-gated client tool approved already: answered, the first answer stands.
        if record.call.target.definition.requires_approval {
            return Ok(());
        }
        return Err(mcp_error(Error::invalid("taskId", "this task asks no question: its result comes from the host")));
    }
    if let Some(resolution) = approve::resolution_of(Some(answer)) {
        router.resolve_deferred(&cx.request(), task_id, resolution).await.map_err(mcp_error)?;
    }
    Ok(())
}

/// `tasks/cancel`: the call is denied (a record already resolved keeps its result).
pub async fn cancel_task(router: &Arc<Router>, cx: &CallContext, task_id: &str) -> Result<(), ErrorData> {
    task_record(router, cx, task_id).await?;
    let deny = Resolution::Deny { message: "The client cancelled the call.".into() };
    match router.resolve_deferred(&cx.request(), task_id, deny).await {
        Ok(_) | Err(Error::FailedPrecondition(_)) => Ok(()),
        Err(e) => Err(mcp_error(e)),
    }
}

/// Milliseconds since the epoch as an ISO 8601 timestamp.
fn timestamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_in_utc() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_764_979_200_123), "2025-12-06T00:00:00.123Z");
    }
}
