//! Consent records (issue 17): a call to an OAuth MCP source by a user without a usable
//! token does not reach the server; it becomes a pending record of kind `Consent` whose URL
//! the user opens. The authorization server sends the browser to `/oauth/callback` (any
//! replica), which exchanges the code, stores the user's tokens and runs the recorded call
//! exactly once, as an approval does. Hosts may only deny such a record.

use std::sync::Arc;

use super::{CallTarget, DeferredCall, DeferredKind, Outcome, Resolution, Resolved, Router, Settled, TargetDefinition};
use crate::admission::{CallContext, RequestContext};
use crate::call::{ModelFault, ToolCall, Unavailable};
use crate::catalog::{McpSource, SourceKind};
use crate::error::{Error, Result};
use crate::upstream::SourceKey;
use crate::upstream::consent::CallbackError;

/// What the user's browser is told after the callback.
#[derive(Debug, Clone)]
pub struct ConsentDone {
    /// The recorded call ran (or was settled otherwise meanwhile).
    pub ran: Option<String>,
}

/// The OAuth source a catalog tool (or, for a tool the listing lacks, a group) belongs to.
fn oauth_source(r: &Resolved, source: usize) -> Option<&McpSource> {
    match &r.catalog.sources.get(source)?.kind {
        SourceKind::Mcp(m) if m.oauth.is_some() => Some(m),
        _ => None,
    }
}

impl Router {
    /// The consent record when the run's user has no usable token for the tool's OAuth source
    /// (`None` otherwise: go on): before an approval-gated call is deferred, and after an
    /// execution that found no token or had it refused.
    pub(super) async fn consent_first(
        &self,
        cx: &CallContext,
        r: &Resolved,
        call: &ToolCall,
        i: u32,
        arguments: &serde_json::Value,
    ) -> Result<Option<Outcome>> {
        let tool = r.catalog.tool(i);
        let Some(m) = oauth_source(r, tool.source) else { return Ok(None) };
        let source_id = r.catalog.sources[tool.source].id.clone();
        let key = SourceKey { tenant: cx.tenant.clone(), agent_id: cx.agent_id.clone(), source_id: source_id.clone() };
        match self.upstream.bearer(&key, m, Some(&cx.run)).await {
            Ok(_) => Ok(None),
            Err(None) => {
                let target = super::defer::call_target(&r.catalog, i, arguments);
                self.defer_consent(cx, r, call, target, &source_id, m).await.map(Some)
            }
            Err(Some(why)) => {
                Ok(Some(Outcome::Fault(ModelFault::Unavailable { tool: tool.name.clone(), reason: Unavailable::NoAuthorization(why) })))
            }
        }
    }

    /// A call into a group whose OAuth source could not be listed for this user (no consent
    /// yet): the consent record, for the tool as the model named it. When the user cannot get
    /// a token at all (no --token-encryption-key-file, a run without a user), the tool is
    /// unavailable with that reason, rather than "unknown tool" (which would send the model
    /// looking for another tool).
    pub(super) async fn consent_for_group(
        &self,
        cx: &CallContext,
        r: &Resolved,
        call: &ToolCall,
        group: &str,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Result<Option<Outcome>> {
        let mut unavailable = None;
        for source in r.catalog.sources.iter().filter(|s| s.group.as_deref() == Some(group)) {
            let SourceKind::Mcp(m) = &source.kind else { continue };
            if m.oauth.is_none() || !r.catalog.unavailable.contains(&source.id) {
                continue;
            }
            let key = SourceKey { tenant: cx.tenant.clone(), agent_id: cx.agent_id.clone(), source_id: source.id.clone() };
            match self.upstream.bearer(&key, m, Some(&cx.run)).await {
                Ok(_) => {}
                // Another source of the group may still ask for consent: that comes first.
                Err(Some(why)) => {
                    unavailable.get_or_insert(why);
                }
                Err(None) => {
                    let target = CallTarget {
                        group: group.to_string(),
                        tool: tool.to_string(),
                        name: format!("{group}__{tool}"),
                        source_id: source.id.clone(),
                        arguments_json: arguments.to_string(),
                        definition: TargetDefinition { kind: "mcp".into(), ..Default::default() },
                    };
                    return self.defer_consent(cx, r, call, target, &source.id, m).await.map(Some);
                }
            }
        }
        Ok(unavailable.map(|why| {
            let reason = Unavailable::NoAuthorization(why);
            Outcome::Fault(ModelFault::Unavailable { tool: format!("{group}__{tool}"), reason })
        }))
    }

    /// Stores a consent record whose URL the user opens; its callback runs the call.
    async fn defer_consent(
        &self,
        cx: &CallContext,
        r: &Resolved,
        call: &ToolCall,
        target: CallTarget,
        source_id: &str,
        m: &McpSource,
    ) -> Result<Outcome> {
        let consents = self.upstream.consents().ok_or_else(|| Error::FailedPrecondition("per-user authorization is not configured".into()))?;
        let user = cx.run.user().unwrap_or_default();
        let deferred_id = super::defer::new_id();
        let name = target.name.clone();
        let consent_url = match consents.begin(&cx.tenant, user, &cx.agent_id, source_id, m, &deferred_id).await {
            Ok(url) => url,
            Err(why) => {
                tracing::warn!(source = source_id, error = %why, "a consent could not be started");
                let why = format!("its server's authorization could not be started: {why}");
                return Ok(Outcome::Fault(ModelFault::Unavailable { tool: name, reason: Unavailable::NoAuthorization(why) }));
            }
        };
        let deferred = DeferredCall { deferred_id, kind: DeferredKind::Consent, target, original_call: call.clone(), consent_url };
        let expire_time = Some(self.now().saturating_add(consents.config().consent_ttl.as_millis() as i64));
        self.store_deferred(cx, r.version, deferred, expire_time).await
    }

    /// `/oauth/callback`: takes the consent its state names (single use), refuses it when its
    /// record is no longer pending, exchanges the code, stores the user's tokens and runs the
    /// recorded call exactly once. An `error` from the authorization server (the user said
    /// no) denies the record. An `iss` that is not the consent's issuer (RFC 9207) is refused
    /// before anything else. Each refusal changes nothing else.
    pub async fn consent_callback(
        self: &Arc<Self>,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
        iss: Option<&str>,
    ) -> std::result::Result<ConsentDone, CallbackError> {
        let consents = self.upstream.consents().ok_or(CallbackError::UnknownState)?;
        let taken = consents.take(state, iss).await?;
        // The browser carries no credential: the consent names the tenant.
        let principal = crate::admission::Principal { tenant: taken.tenant.clone(), identity: Default::default() };
        let record_rq = self.admission.request(&principal).map_err(|e| CallbackError::Internal(e.public_message()))?;
        if !taken.deferred_id.is_empty() {
            let pending = match self.deferred_record(&taken.tenant, &taken.deferred_id).await {
                Ok(Some(r)) => r.state == super::DeferredState::Pending,
                Ok(None) => false,
                Err(e) => return Err(CallbackError::Internal(e.to_string())),
            };
            if !pending {
                return Err(CallbackError::Expired);
            }
        }
        if let Some(error) = error {
            if !taken.deferred_id.is_empty() {
                let deny = Resolution::Deny { message: format!("The user did not grant access ({error}).") };
                let _ = self.resolve_as(&record_rq, &taken.deferred_id, deny, true).await;
            }
            return Err(CallbackError::Refused(error.to_string()));
        }
        let code = code.ok_or_else(|| CallbackError::Exchange("the callback carries no code".into()))?;
        consents.finish(&taken, code).await?;
        // The user's listing failed without a token: list again with it.
        self.registry.invalidate_listings(&taken.tenant, &taken.agent_id);
        if taken.deferred_id.is_empty() {
            return Ok(ConsentDone { ran: None });
        }
        // An approval-gated tool still needs its person: consent does not run it. A tool asked
        // for before its source could be listed is looked up in the listing the token allows now.
        if let Ok(Some(record)) = self.deferred_record(&taken.tenant, &taken.deferred_id).await
            && self.needs_approval(&taken.tenant, &record).await
        {
            let content = serde_json::json!({
                "status": "consent_granted",
                "message": format!("The user granted access. {} was not run: it needs approval. Call it again to ask for approval.", record.call.target.name),
            });
            let granted = Resolution::ClientResult { content_json: content.to_string(), is_error: false };
            let _ = self.resolve_as(&record_rq, &taken.deferred_id, granted, true).await;
            return Ok(ConsentDone { ran: None });
        }
        match self.resolve_as(&record_rq, &taken.deferred_id, Resolution::Approve { arguments_json: None }, true).await {
            Ok(Settled::Done { call, .. }) => Ok(ConsentDone { ran: Some(call.tool_name) }),
            Ok(Settled::HandedToClient(c)) => Ok(ConsentDone { ran: Some(c.original_call.tool_name) }),
            // Tokens are stored: the next call works; the record says what became of it.
            Err(e) => {
                tracing::warn!(error = %e, "running the call a consent was given for failed");
                Ok(ConsentDone { ran: None })
            }
        }
    }

    /// Does the record's tool need a person's approval (as recorded, or as listed now)?
    async fn needs_approval(&self, tenant: &str, record: &super::DeferredRecord) -> bool {
        if record.call.target.definition.requires_approval {
            return true;
        }
        // Unknown (the catalog could not be read): fail closed, the model's next call asks.
        let Ok(catalog) = self.registry.catalog_for_run(tenant, &record.agent_id, record.version, &record.run).await else { return true };
        let name = &record.call.target.name;
        catalog.by_canonical(name).or_else(|| catalog.direct_tool(name)).is_some_and(|i| catalog.tool(i).requires_approval)
    }

    /// `RevokeTokens`: deletes a user's tokens for a source (or all of them).
    pub async fn revoke_tokens(&self, rq: &RequestContext, user_id: &str, source_id: &str) -> Result<u32> {
        if user_id.is_empty() || user_id.len() > 256 {
            return Err(Error::invalid("user_id", "name the user (1 to 256 bytes)"));
        }
        if source_id.len() > 256 {
            return Err(Error::invalid("source_id", "at most 256 bytes"));
        }
        let Some(consents) = self.upstream.consents() else { return Ok(0) };
        let source = (!source_id.is_empty()).then_some(source_id);
        let n = consents.revoke(&rq.tenant, user_id, source).await.map_err(Error::Internal)?;
        Ok(n.min(u32::MAX as u64) as u32)
    }
}
