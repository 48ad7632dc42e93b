//! Deferred records (SPEC §4, §7): approval-gated calls and client tools become durable
//! records the host resolves later; resolving is idempotent, a conflicting second resolution
//! is refused, and an accepted resolution runs to its end even if its request is cancelled.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::execute::Invocation;
use super::once::RunToEnd;
use super::validate::check_arguments;
use super::{CallTarget, DeferredCall, DeferredKind, DeferredRecord, DeferredState, Outcome, Resolved, Router, TargetDefinition};
use crate::admission::{CallContext, RequestContext};
use crate::call::{ModelFault, Reply, ToolCall, ToolResult, Unavailable};
use crate::catalog::{Catalog, ToolKind};
use crate::error::{Error, Result};
use crate::registry::{decode_token, encode_token, page_size_or_default};
use crate::store::{DeferredRow, Transition};

/// How a host resolves a deferred record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    Approve { arguments_json: Option<String> },
    Deny { message: String },
    ClientResult { content_json: String, is_error: bool },
}

impl Resolution {
    fn name(&self) -> &'static str {
        match self {
            Resolution::Approve { .. } => "approved",
            Resolution::Deny { .. } => "denied",
            Resolution::ClientResult { .. } => "client_result",
        }
    }
}

/// What an accepted resolution came to: the model's result, or (an approved client tool)
/// the call handed to the client, whose result the host sends next under the same id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The result, and the model's call it answers.
    Done {
        reply: Reply,
        call: ToolCall,
    },
    HandedToClient(Box<DeferredCall>),
}

impl Settled {
    /// The result text for hosts that read only the result.
    pub fn reply(&self) -> Reply {
        match self {
            Settled::Done { reply, .. } => reply.clone(),
            Settled::HandedToClient(call) => client_execution_pending(call).into(),
        }
    }
}

/// `ListDeferred`: the records of an agent, optionally of one run and in one state.
#[derive(Debug, Clone, Default)]
pub struct ListDeferred {
    pub agent_id: String,
    pub run_id: String,
    pub state: Option<DeferredState>,
    pub page_token: String,
    pub page_size: u32,
}

/// An accepted approval's target: the catalog it runs in and the tool, if still offered.
type ApprovedTarget = Option<(Arc<Catalog>, Option<u32>)>;

impl Router {
    /// Stores a pending record for a call that waits for a person or the client.
    pub(super) async fn defer(&self, cx: &CallContext, r: &Resolved, call: &ToolCall, i: u32, arguments: &Value) -> Result<Outcome> {
        let tool = r.catalog.tool(i);
        let kind = if tool.requires_approval { DeferredKind::Approval } else { DeferredKind::ClientExecution };
        let deferred = DeferredCall {
            deferred_id: new_id(),
            kind,
            target: call_target(&r.catalog, i, arguments),
            original_call: call.clone(),
            consent_url: String::new(),
        };
        let expire_time = r.catalog.deferred_ttl.map(|ttl| self.now().saturating_add(ttl.as_millis() as i64));
        self.store_deferred(cx, r.version, deferred, expire_time).await
    }

    /// Stores a new pending record of the call's run.
    pub(super) async fn store_deferred(&self, cx: &CallContext, version: u32, deferred: DeferredCall, expire_time: Option<i64>) -> Result<Outcome> {
        let now = self.now();
        let record = DeferredRecord {
            call: deferred.clone(),
            agent_id: cx.agent_id.clone(),
            version,
            run: cx.run.clone(),
            state: DeferredState::Pending,
            resolution: String::new(),
            result: None,
            create_time: now,
            resolve_time: None,
            expire_time,
        };
        let row = DeferredRow {
            deferred_id: deferred.deferred_id.clone(),
            agent_id: cx.agent_id.clone(),
            version,
            run_id: cx.run.run_id.clone(),
            state: DeferredState::Pending.as_str().into(),
            record: serde_json::to_string(&record).map_err(|e| Error::Internal(e.to_string()))?,
            resolution: None,
            result: None,
            create_time: now,
            resolve_time: None,
            lease_until: None,
            expire_time,
        };
        self.registry.store().insert_deferred(&cx.tenant, &row).await?;
        crate::telemetry::metrics::deferred_changed();
        Ok(Outcome::Deferred(deferred))
    }

    /// `ResolveDeferred`: idempotent; a conflicting second resolution is refused.
    pub async fn resolve_deferred(self: &Arc<Self>, rq: &RequestContext, id: &str, resolution: Resolution) -> Result<Settled> {
        self.resolve_as(rq, id, resolution, false).await
    }

    /// Resolves a record; `consented`: the user's consent (its callback) runs a consent
    /// record's call, which hosts cannot do (they may only deny it).
    pub(super) async fn resolve_as(self: &Arc<Self>, rq: &RequestContext, id: &str, resolution: Resolution, consented: bool) -> Result<Settled> {
        let tenant = rq.tenant.as_str();
        let store = self.registry.store();
        let row = store.get_deferred(tenant, id).await?.ok_or_else(|| not_found(id))?;
        let resolution_text = serde_json::to_string(&resolution).map_err(|e| Error::Internal(e.to_string()))?;
        if expired(&row, self.now()) {
            return Err(expired_error(id));
        }
        // Already resolved: the same resolution gets the stored result, another is refused.
        let record: DeferredRecord = serde_json::from_str(&row.record).map_err(|e| Error::Internal(e.to_string()))?;
        let original = record.call.original_call.clone();
        let done = |reply| Settled::Done { reply, call: original.clone() };
        if row.state != DeferredState::Pending.as_str() {
            return self.await_resolution(tenant, id, row, &resolution_text).await.map(done);
        }
        match (&resolution, record.call.kind) {
            (Resolution::ClientResult { .. }, DeferredKind::Approval) => {
                return Err(Error::FailedPrecondition(format!("deferred call {id:?} awaits approval: approve or deny it")));
            }
            // The approval that turned it into a client execution, again: the same answer.
            (Resolution::Approve { .. }, DeferredKind::ClientExecution) if row.resolution.as_deref() == Some(resolution_text.as_str()) => {
                return Ok(Settled::HandedToClient(Box::new(record.call)));
            }
            (Resolution::Approve { .. }, DeferredKind::ClientExecution) => {
                return Err(Error::FailedPrecondition(format!("deferred call {id:?} is a client execution: send its client_result (or deny it)")));
            }
            (Resolution::Approve { .. } | Resolution::ClientResult { .. }, DeferredKind::Consent) if !consented => {
                return Err(Error::FailedPrecondition(format!(
                    "deferred call {id:?} waits for the user's consent: the user opens its consent_url (or deny it to give up)"
                )));
            }
            _ => {}
        }
        let mut arguments = record.call.target.arguments_json.clone();
        let mut target = None;
        if let Resolution::Approve { arguments_json } = &resolution {
            if record.call.target.definition.kind == ToolKind::Client.as_str() {
                return self.approve_client_tool(tenant, id, record, arguments_json.as_deref(), &resolution_text).await;
            }
            let catalog = self.registry.catalog_for_run(tenant, &record.agent_id, record.version, &record.run).await?;
            let i = catalog.by_canonical(&record.call.target.name).or_else(|| catalog.direct_tool(&record.call.target.name));
            // Replacement arguments are checked before anything changes.
            if let (Some(a), Some(i)) = (arguments_json, i) {
                let value: Value = serde_json::from_str(a).map_err(|e| Error::invalid("approve.arguments_json", format!("not valid JSON: {e}")))?;
                if let Err(fault) = check_arguments(catalog.tool(i), &value) {
                    return Err(Error::invalid("approve.arguments_json", fault.render().content_json));
                }
                arguments = value.to_string();
            }
            target = Some((catalog, i));
        }
        // Like a claimed tool call, the accepted resolution runs to its end even if this
        // request is cancelled (its context's copy keeps it counted in flight), so a retry
        // finds the stored result instead of a record stuck executing.
        // `Ok(Err(row))`: another resolution was stored first; it is compared below.
        let this = self.clone();
        let (rq, owned_id, text) = (rq.clone(), id.to_string(), resolution_text.clone());
        let work = async move {
            let (tenant, id) = (rq.tenant.as_str(), owned_id.as_str());
            // Held (its lease renewed) from before the transition until its result is stored.
            let _held = this.leases.hold_deferred(tenant, id);
            let now = this.now();
            match this.registry.store().transition_deferred(tenant, id, &text, now, this.leases.from(now)).await? {
                Transition::Moved => crate::telemetry::metrics::deferred_changed(),
                Transition::Missing => return Err(not_found(id)),
                Transition::Already(row) => return Ok(Err(row)),
            }
            this.complete_resolution(tenant, id, resolution, record, target, arguments).await.map(Ok)
        };
        match RunToEnd::new(crate::telemetry::in_span(work, &tracing::Span::current())).await? {
            Ok(result) => Ok(done(result)),
            Err(row) => self.await_resolution(tenant, id, row, &resolution_text).await.map(done),
        }
    }

    /// Approving an approval-gated client tool hands it to the client: the record becomes a
    /// pending CLIENT_EXECUTION record (same id), finished by the client's result. The
    /// client validates its arguments, so replacement arguments need only be a JSON object.
    async fn approve_client_tool(
        &self,
        tenant: &str,
        id: &str,
        mut record: DeferredRecord,
        replacement: Option<&str>,
        resolution: &str,
    ) -> Result<Settled> {
        if let Some(a) = replacement {
            let value: Value = serde_json::from_str(a).map_err(|e| Error::invalid("approve.arguments_json", format!("not valid JSON: {e}")))?;
            if !value.is_object() {
                return Err(Error::invalid("approve.arguments_json", "the arguments must be a JSON object"));
            }
            record.call.target.arguments_json = value.to_string();
        }
        record.call.kind = DeferredKind::ClientExecution;
        let text = serde_json::to_string(&record).map_err(|e| Error::Internal(e.to_string()))?;
        match self.registry.store().hand_to_client(tenant, id, &text, resolution).await? {
            Transition::Moved => Ok(Settled::HandedToClient(Box::new(record.call))),
            Transition::Missing => Err(not_found(id)),
            // A concurrent identical approval did it first.
            Transition::Already(row) if row.state == DeferredState::Pending.as_str() && row.resolution.as_deref() == Some(resolution) => {
                Ok(Settled::HandedToClient(Box::new(record.call)))
            }
            Transition::Already(row) => {
                let call = record.call.original_call;
                self.await_resolution(tenant, id, row, resolution).await.map(|reply| Settled::Done { reply, call })
            }
        }
    }

    /// Runs an accepted resolution and stores its result; the first stored result wins.
    async fn complete_resolution(
        &self,
        tenant: &str,
        id: &str,
        resolution: Resolution,
        record: DeferredRecord,
        target: ApprovedTarget,
        arguments: String,
    ) -> Result<Reply> {
        let name = &record.call.target.name;
        let reply = match (&resolution, target) {
            (Resolution::Approve { .. }, Some((catalog, Some(i)))) => {
                let invocation = Invocation {
                    tenant,
                    agent_id: &record.agent_id,
                    run: &record.run,
                    catalog: &catalog,
                    tool: i,
                    arguments_json: &arguments,
                    tool_call_id: &record.call.original_call.tool_call_id,
                };
                self.execute(&invocation).await
            }
            // Gone since it was deferred (an MCP server stopped offering it).
            (Resolution::Approve { .. }, _) => ModelFault::Unavailable { tool: name.clone(), reason: Unavailable::Removed }.into(),
            (Resolution::Deny { message }, _) => ModelFault::Denied { tool: name.clone(), message: message.clone() }.into(),
            (Resolution::ClientResult { content_json, is_error }, _) => ToolResult { content_json: content_json.clone(), is_error: *is_error }.into(),
        };
        self.store_resolution_result(tenant, id, reply, None).await
    }

    /// Stores the result of an executing record unless one is there already (with
    /// `lease_before`: only if its holder's lease ran out before then), and returns the
    /// stored one.
    async fn store_resolution_result(&self, tenant: &str, id: &str, reply: Reply, lease_before: Option<i64>) -> Result<Reply> {
        let store = self.registry.store();
        let text = serde_json::to_string(&reply).map_err(|e| Error::Internal(e.to_string()))?;
        let written = store.complete_deferred(tenant, id, &text, self.now(), lease_before).await?;
        crate::telemetry::metrics::deferred_changed();
        if written {
            return Ok(reply);
        }
        let row = store.get_deferred(tenant, id).await?.ok_or_else(|| not_found(id))?;
        let stored = row.result.ok_or_else(|| Error::Internal(format!("deferred call {id:?} has no result")))?;
        Reply::decode(&stored).map_err(|e| Error::Internal(e.to_string()))
    }

    /// Waits for the result of a resolution accepted earlier (the same resolution asked
    /// again) and refuses a different one. A record still executing after its holder's lease
    /// ran out lost its executor (a crash): its outcome is unknown, and that becomes its
    /// result. The store is read at most five times a second meanwhile.
    async fn await_resolution(&self, tenant: &str, id: &str, mut row: DeferredRow, resolution: &str) -> Result<Reply> {
        let store = self.registry.store();
        let mut pause = Duration::from_millis(50);
        loop {
            if row.state == DeferredState::Expired.as_str() || expired(&row, self.now()) {
                return Err(expired_error(id));
            }
            if row.resolution.as_deref() != Some(resolution) {
                return Err(Error::FailedPrecondition(format!(
                    "deferred call {id:?} was already {}; a different resolution is refused",
                    row.resolution.as_deref().map(resolution_name).unwrap_or("resolved")
                )));
            }
            if let Some(result) = &row.result {
                return Reply::decode(result).map_err(|e| Error::Internal(e.to_string()));
            }
            let now = self.now();
            let lease_until = row.lease_until.unwrap_or_else(|| row.resolve_time.unwrap_or(row.create_time) + crate::store::LEGACY_LEASE_MS);
            if row.state == DeferredState::Executing.as_str() && now > lease_until {
                let name = serde_json::from_str::<DeferredRecord>(&row.record).map(|r| r.call.target.name).unwrap_or_default();
                let lost = ModelFault::uncertain(&name, "the replica that ran the approved call stopped before it reported its end");
                return self.store_resolution_result(tenant, id, lost.into(), Some(now)).await;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
            row = store.get_deferred(tenant, id).await?.ok_or_else(|| not_found(id))?;
        }
    }

    /// Where a deferred record stands now: `Some` with its result once resolved (or, for an
    /// approved client tool, what approving it answers), `None` while pending or executing;
    /// an error once it expired or for an unknown id.
    pub async fn deferred_result(&self, tenant: &str, id: &str) -> Result<Option<Reply>> {
        let row = self.registry.store().get_deferred(tenant, id).await?.ok_or_else(|| not_found(id))?;
        if expired(&row, self.now()) {
            return Err(expired_error(id));
        }
        if row.result.is_none() && row.state == DeferredState::Pending.as_str() && row.resolution.is_some() {
            let record: DeferredRecord = serde_json::from_str(&row.record).map_err(|e| Error::Internal(e.to_string()))?;
            return Ok(Some(client_execution_pending(&record.call).into()));
        }
        row.result.as_deref().map(Reply::decode).transpose().map_err(|e| Error::Internal(e.to_string()))
    }

    /// The agent and run a deferred record belongs to, if the tenant has it.
    pub async fn deferred_owner(&self, tenant: &str, id: &str) -> Result<Option<(String, String)>> {
        Ok(self.registry.store().get_deferred(tenant, id).await?.map(|row| (row.agent_id, row.run_id)))
    }

    /// `ListDeferred`: records of an agent, optionally one run and one state, oldest first.
    pub async fn list_deferred(&self, rq: &RequestContext, q: &ListDeferred) -> Result<(Vec<DeferredRecord>, String)> {
        let tenant = rq.tenant.as_str();
        if q.agent_id.is_empty() {
            return Err(Error::invalid("agent_id", "name the agent"));
        }
        self.registry.resolve_version(tenant, &q.agent_id, 0).await?;
        let size = page_size_or_default(q.page_size);
        let cursor = if q.page_token.is_empty() { String::new() } else { decode_token(&q.page_token, "page_token")? };
        let (after_time, after_id) = match cursor.split_once(' ') {
            Some((t, id)) => (t.parse().map_err(|_| Error::invalid("page_token", "not a token from this API"))?, id.to_string()),
            None => (i64::MIN, String::new()),
        };
        let run = (!q.run_id.is_empty()).then_some(q.run_id.as_str());
        let now = self.now();
        // Records past their expiry that the sweeper has not marked yet are not pending any
        // more: mark them first when the listing filters on it.
        if matches!(q.state, Some(DeferredState::Pending | DeferredState::Expired)) {
            self.registry.store().expire_deferred(now, 1_000).await?;
        }
        let state = q.state.map(DeferredState::as_str);
        let rows = self.registry.store().list_deferred(tenant, &q.agent_id, run, state, (after_time, &after_id), size + 1).await?;
        let more = rows.len() > size as usize;
        let rows = &rows[..rows.len().min(size as usize)];
        let next =
            if more { rows.last().map(|r| encode_token(&format!("{} {}", r.create_time, r.deferred_id))).unwrap_or_default() } else { String::new() };
        let records = rows.iter().map(|row| listed_record(row, now)).collect::<Result<Vec<_>>>()?;
        Ok((records, next))
    }

    /// One deferred record as `ListDeferred` shows it (state, resolution, result), if the
    /// tenant has it.
    pub async fn deferred_record(&self, tenant: &str, id: &str) -> Result<Option<DeferredRecord>> {
        let now = self.now();
        self.registry.store().get_deferred(tenant, id).await?.map(|row| listed_record(&row, now)).transpose()
    }
}

/// A stored row as a listed record: the state the row says (expired once past its expiry),
/// the resolution's name and the result.
fn listed_record(row: &DeferredRow, now: i64) -> Result<DeferredRecord> {
    let mut rec: DeferredRecord = serde_json::from_str(&row.record).map_err(|e| Error::Internal(e.to_string()))?;
    rec.state = DeferredState::parse(&row.state).ok_or_else(|| Error::Internal(format!("unknown deferred state {:?}", row.state)))?;
    if expired(row, now) {
        rec.state = DeferredState::Expired;
    }
    rec.resolution = row.resolution.as_deref().map(resolution_name).unwrap_or("").to_string();
    rec.result = row.result.as_deref().and_then(|r| Reply::decode(r).ok());
    rec.resolve_time = row.resolve_time;
    rec.expire_time = row.expire_time;
    Ok(rec)
}

/// The actual target of a deferred call, with its complete definition.
pub(super) fn call_target(catalog: &Catalog, i: u32, arguments: &Value) -> CallTarget {
    let t = catalog.tool(i);
    CallTarget {
        group: t.group.clone().unwrap_or_default(),
        tool: t.local.clone(),
        name: t.name.clone(),
        source_id: catalog.sources[t.source].id.clone(),
        arguments_json: arguments.to_string(),
        definition: TargetDefinition {
            description: t.description.clone(),
            parameters_json_schema: t.input_schema_json().get().to_string(),
            output_schema_json: t.output_schema_json.as_ref().map(|r| r.get().to_string()).unwrap_or_default(),
            instructions: crate::control::discovery::tool_instructions(catalog, t).unwrap_or_default().to_string(),
            kind: t.kind.as_str().into(),
            requires_approval: t.requires_approval,
        },
    }
}

/// Is a pending record past its expiry (whether or not the sweeper marked it yet)?
fn expired(row: &DeferredRow, now: i64) -> bool {
    row.state == DeferredState::Expired.as_str() || (row.state == DeferredState::Pending.as_str() && row.expire_time.is_some_and(|t| t <= now))
}

fn expired_error(id: &str) -> Error {
    Error::FailedPrecondition(format!("deferred call {id:?} expired before it was resolved; it can no longer be resolved"))
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("deferred call {id:?} not found"))
}

/// What approving a client tool answers: the host runs it and sends its result.
fn client_execution_pending(call: &DeferredCall) -> ToolResult {
    let content = serde_json::json!({
        "status": "client_execution_pending",
        "deferred_id": call.deferred_id,
        "tool": call.target.name,
        "arguments": serde_json::from_str::<Value>(&call.target.arguments_json).unwrap_or(Value::Null),
        "message": "Approved. Run this client tool and send its result with ResolveDeferred(client_result) under the same deferred id.",
    });
    ToolResult { content_json: content.to_string(), is_error: false }
}

fn resolution_name(stored: &str) -> &'static str {
    serde_json::from_str::<Resolution>(stored).map(|r| r.name()).unwrap_or("resolved")
}

pub(super) fn new_id() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
