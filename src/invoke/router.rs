//! `HandleToolCall` and friends: resolve the run's version, answer control tools, route
//! calls to their targets, defer what needs a person or the client, and keep exactly one
//! outcome per (agent, run, tool call id).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument;

use super::executor::{Execution, Executors};
use super::validate::check_arguments;
use super::*;
use crate::catalog::{Catalog, SourceKind};
use crate::control::{self, CallRef, ControlCall, ModelTool};
use crate::error::{Error, Result};
use crate::registry::{Registry, decode_token, encode_token, page_size_or_default};
use crate::store::{Claim, DeferredRow, Transition};
use crate::telemetry;

#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// Runs idle this long are forgotten (their next call pins the default again).
    pub run_idle: Duration,
    /// A claimed call with no outcome after this long is taken as lost.
    pub claim_timeout: Duration,
    /// Auto-pinning on/off for the whole server (definitions can turn it off too).
    pub auto_pin: bool,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            run_idle: Duration::from_secs(24 * 3600),
            claim_timeout: Duration::from_secs(600),
            auto_pin: true,
        }
    }
}

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

type CallKey = (String, String, String, String);

pub struct Router {
    registry: Arc<Registry>,
    executors: Arc<Executors>,
    config: RouterConfig,
    /// Calls executing in this process, for duplicates to wait on.
    inflight: Mutex<HashMap<CallKey, watch::Receiver<Option<Outcome>>>>,
    mcp: Option<Arc<crate::mcp::McpClients>>,
}

/// The version a request resolved to, and its catalog.
#[derive(Clone)]
pub struct Resolved {
    pub version: u32,
    pub catalog: Arc<Catalog>,
}

impl Router {
    pub fn new(registry: Arc<Registry>, executors: Arc<Executors>, config: RouterConfig) -> Self {
        Self { registry, executors, config, inflight: Mutex::new(HashMap::new()), mcp: None }
    }

    /// Routes calls of MCP sources through these clients.
    pub fn with_mcp(mut self, mcp: Arc<crate::mcp::McpClients>) -> Self {
        self.mcp = Some(mcp);
        self
    }

    pub fn mcp(&self) -> Option<&Arc<crate::mcp::McpClients>> {
        self.mcp.as_ref()
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    fn now(&self) -> i64 {
        self.registry.clock().now_ms()
    }

    /// Resolves the version for a request: a run keeps the version its first call pinned.
    pub async fn resolve(&self, tenant: &str, agent_id: &str, version: u32, run: &RunContext) -> Result<Resolved> {
        let version = if run.run_id.is_empty() {
            self.registry.resolve_version(tenant, agent_id, version).await?
        } else {
            let pinned = self.registry.pin_run(tenant, agent_id, version, &run.run_id, self.config.run_idle).await?;
            if version != 0 && pinned != version {
                return Err(Error::FailedPrecondition(format!(
                    "run {:?} is pinned to version {pinned}; start a new run to use version {version}",
                    run.run_id
                )));
            }
            pinned
        };
        let catalog = self.registry.catalog_for_run(tenant, agent_id, version, run).await?;
        Ok(Resolved { version, catalog })
    }

    /// `GetModelTools`: the tools and instructions for this run (hot tools per user).
    pub async fn model_tools(&self, tenant: &str, agent_id: &str, version: u32, run: &RunContext) -> Result<(u32, Vec<ModelTool>, String, Vec<String>)> {
        let r = self.resolve(tenant, agent_id, version, run).await?;
        let hot = self.hot_tools(tenant, agent_id, &r.catalog, run).await?;
        let (tools, instructions) = control::model_tools(&r.catalog, &hot);
        Ok((r.version, tools, instructions, r.catalog.diagnostics.clone()))
    }

    async fn hot_tools(&self, tenant: &str, agent_id: &str, catalog: &Catalog, run: &RunContext) -> Result<Vec<u32>> {
        let (Some(cfg), true, Some(user)) = (catalog.control.auto_pin, self.config.auto_pin, user_of(run)) else {
            return Ok(Vec::new());
        };
        let usage = self
            .registry
            .store()
            .usage(tenant, agent_id, user, self.now(), cfg.half_life.as_millis() as i64)
            .await?;
        Ok(usage
            .into_iter()
            // The count decays from the moment it is recorded, so `warmup_calls` calls made
            // minutes apart sum to slightly less than `warmup_calls`: compare the count rounded
            // to whole calls (a tool stays hot until it decays below warmup − ½).
            .filter(|(_, score)| *score + 0.5 >= cfg.warmup_calls as f64)
            .filter_map(|(name, _)| catalog.by_canonical(&name))
            .filter(|i| !catalog.tool(*i).pin)
            .take(cfg.max_hot as usize)
            .collect())
    }

    /// `HandleToolCall`.
    pub async fn handle(self: &Arc<Self>, tenant: &str, agent_id: &str, version: u32, run: &RunContext, call: &ToolCall) -> Result<Outcome> {
        let r = self.resolve(tenant, agent_id, version, run).await?;
        telemetry::metrics::tool_call(self.handle_resolved(tenant, agent_id, &r, run, call)).await
    }

    /// `HandleToolCalls`: concurrently, outcomes in request order.
    pub async fn handle_many(self: &Arc<Self>, tenant: &str, agent_id: &str, version: u32, run: &RunContext, calls: &[ToolCall]) -> Result<Vec<Outcome>> {
        let r = self.resolve(tenant, agent_id, version, run).await?;
        let futures = calls.iter().map(|c| telemetry::metrics::tool_call(self.handle_resolved(tenant, agent_id, &r, run, c)));
        futures::future::join_all(futures).await.into_iter().collect()
    }

    async fn handle_resolved(self: &Arc<Self>, tenant: &str, agent_id: &str, r: &Resolved, run: &RunContext, call: &ToolCall) -> Result<Outcome> {
        let arguments = parse_arguments(call);
        // Discovery answers are pure: no need to remember them.
        if let Ok(args) = &arguments
            && let Some(parsed) = control::parse_control_call(&r.catalog, &call.tool_name, args)
        {
            match parsed {
                Err(msg) => return Ok(Outcome::Result(ToolResult::error("invalid_arguments", &msg))),
                Ok(other) => {
                    if let Some(answer) = control::answer_discovery(&r.catalog, &other) {
                        return Ok(Outcome::Result(answer));
                    }
                }
            }
        }
        if call.tool_call_id.is_empty() || run.run_id.is_empty() {
            return self.route(tenant, agent_id, r, run, call, &arguments).await;
        }
        self.exactly_once(tenant, agent_id, r, run, call, arguments).await
    }

    /// Runs a call once per (agent, run, tool call id); duplicates get the first outcome.
    async fn exactly_once(self: &Arc<Self>, tenant: &str, agent_id: &str, r: &Resolved, run: &RunContext, call: &ToolCall, arguments: Arguments) -> Result<Outcome> {
        let key: CallKey = (tenant.into(), agent_id.into(), run.run_id.clone(), call.tool_call_id.clone());
        let store = self.registry.store();
        let arguments = Arc::new(arguments);
        loop {
            // The claim and, if it is new, the call and its outcome run to their end even if
            // this request is cancelled (the host's deadline passed, it disconnected): a claim
            // once written must get its outcome, or the host's retry would find it orphaned.
            // The retry waits for the first attempt instead.
            let attempt = {
                let this = self.clone();
                let (key, r, run, call, arguments) = (key.clone(), r.clone(), run.clone(), call.clone(), arguments.clone());
                async move {
                    let store = this.registry.store();
                    let (tenant, agent_id) = (&key.0, &key.1);
                    match store.claim_call(tenant, agent_id, &run.run_id, &call.tool_call_id, this.now()).await? {
                        Claim::New => {}
                        Claim::Done(text) => return Ok(Attempt::Done(text)),
                        Claim::Running { since } => return Ok(Attempt::Running { since }),
                    }
                    let (tx, rx) = watch::channel(None);
                    this.inflight.lock().expect("inflight lock").insert(key.clone(), rx.clone());
                    let _unlist = Unlist { router: &this, key: key.clone(), rx };
                    let outcome = this.route(tenant, agent_id, &r, &run, &call, &arguments).await;
                    let stored = match &outcome {
                        Ok(o) => store.finish_call(tenant, agent_id, &run.run_id, &call.tool_call_id, &encode_outcome(o), this.now()).await,
                        Err(_) => {
                            // A protocol fault is not an outcome: let a retry run it again.
                            store.release_call(tenant, agent_id, &run.run_id, &call.tool_call_id).await
                        }
                    };
                    let _ = tx.send(outcome.as_ref().ok().cloned());
                    stored?;
                    outcome.map(Attempt::Ran)
                }
            };
            match RunToEnd::new(attempt.instrument(tracing::Span::current())).await? {
                Attempt::Ran(outcome) => return Ok(outcome),
                Attempt::Done(text) => return decode_outcome(&text),
                Attempt::Running { since } => {
                    let local = self.inflight.lock().expect("inflight lock").get(&key).cloned();
                    if let Some(mut rx) = local {
                        let outcome = rx.wait_for(|o| o.is_some()).await.ok().and_then(|o| o.clone());
                        if let Some(o) = outcome {
                            return Ok(o);
                        }
                        continue;
                    }
                    if self.now() - since > self.config.claim_timeout.as_millis() as i64 {
                        let lost = Outcome::Result(uncertain(&call.tool_name, "the first attempt with this tool call id never finished"));
                        store.finish_call(tenant, agent_id, &run.run_id, &call.tool_call_id, &encode_outcome(&lost), self.now()).await?;
                        continue;
                    }
                    // Executing elsewhere (another replica, or a process that restarted).
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    /// Resolves the target of a non-control call and runs, defers or refuses it. A tool
    /// name the catalog lacks prepares a catalog with MCP sources again first (SPEC §7).
    async fn route(&self, tenant: &str, agent_id: &str, r: &Resolved, run: &RunContext, call: &ToolCall, arguments: &Arguments) -> Result<Outcome> {
        let outcome = self.route_in(tenant, agent_id, r, run, call, arguments).await?;
        let unknown = matches!(&outcome, Outcome::Result(t) if t.is_error && t.content_json.starts_with(r#"{"error":"unknown_tool""#));
        let min_age = self.mcp.as_ref().map(|m| m.config().refresh_min_age).unwrap_or_default();
        if unknown && crate::mcp::has_mcp(&r.catalog) && self.registry.refresh_for_run(tenant, agent_id, r.version, &r.catalog, run, min_age) {
            let catalog = self.registry.catalog_for_run(tenant, agent_id, r.version, run).await?;
            return Box::pin(self.route_in(tenant, agent_id, &Resolved { version: r.version, catalog }, run, call, arguments)).await;
        }
        Ok(outcome)
    }

    async fn route_in(&self, tenant: &str, agent_id: &str, r: &Resolved, run: &RunContext, call: &ToolCall, arguments: &Arguments) -> Result<Outcome> {
        let catalog = &r.catalog;
        let c = &catalog.control;
        let arguments = match arguments {
            Ok(v) => v,
            Err(e) => {
                return Ok(Outcome::Result(ToolResult::error(
                    "invalid_arguments",
                    &format!("The arguments of {} are not valid JSON ({e}). Send a JSON object.", call.tool_name),
                )));
            }
        };
        let (target, args) = if catalog.has_grouped() && call.tool_name == c.call {
            let parsed = control::parse_control_call(catalog, &call.tool_name, arguments);
            let Some(Ok(ControlCall::Call { target, arguments })) = parsed else {
                let msg = match parsed {
                    Some(Err(m)) => m,
                    _ => format!("Invalid arguments for {}.", call.tool_name),
                };
                return Ok(Outcome::Result(ToolResult::error("invalid_arguments", &msg)));
            };
            let found = match &target {
                CallRef::Grouped { group, tool } => {
                    if catalog.group(group).is_none() {
                        return Ok(Outcome::Result(ToolResult::error(
                            "unknown_group",
                            &format!("There is no tool group {group:?}. Call {} to see the groups, then {} to find the tool.", c.list_groups, c.discover),
                        )));
                    }
                    catalog.grouped_tool(group, tool).ok_or_else(|| {
                        format!("There is no tool {tool:?} in group {group:?} (it may have been removed). Refresh discovery with {} and use a tool it returns.", c.discover)
                    })
                }
                CallRef::Canonical(name) => catalog.by_canonical(name).ok_or_else(|| {
                    format!("There is no tool named {name:?} (it may have been removed). Search again with {} and use a name it returns.", c.search)
                }),
            };
            match found {
                Ok(i) => (i, arguments),
                Err(msg) => return Ok(Outcome::Result(ToolResult::error("unknown_tool", &msg))),
            }
        } else if let Some(i) = catalog.direct_tool(&call.tool_name).or_else(|| catalog.by_canonical(&call.tool_name)) {
            (i, arguments.clone())
        } else {
            let hint = if catalog.has_grouped() {
                format!(" Use {} to find grouped tools and {} to call them.", c.exposed_names()[0], c.call)
            } else {
                " Call only the tools you were given, by their exact names.".to_string()
            };
            return Ok(Outcome::Result(ToolResult::error(
                "unknown_tool",
                &format!("There is no tool named {:?}.{hint}", call.tool_name),
            )));
        };
        self.dispatch(tenant, agent_id, r, run, call, target, args).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn dispatch(&self, tenant: &str, agent_id: &str, r: &Resolved, run: &RunContext, call: &ToolCall, i: u32, args: Value) -> Result<Outcome> {
        let catalog = &r.catalog;
        let tool = catalog.tool(i);
        if run.caller == Caller::Code && !tool.codeact_callable {
            return Ok(Outcome::Result(ToolResult::error(
                "not_callable_from_code",
                &format!("{} cannot be called from code. Call it as an ordinary tool call instead.", tool.name),
            )));
        }
        if !args.is_object() {
            return Ok(Outcome::Result(ToolResult::error(
                "invalid_arguments",
                &format!("The arguments of {} must be a JSON object.", tool.name),
            )));
        }
        let client = tool.kind == crate::catalog::ToolKind::Client;
        // Client tools keep external-tool semantics: the client validates.
        if !client
            && let Err(result) = check_arguments(tool, &args) {
                return Ok(Outcome::Result(result));
            }
        if tool.requires_approval || client {
            let target = self.target(catalog, i, &args);
            let kind = if tool.requires_approval { DeferredKind::Approval } else { DeferredKind::ClientExecution };
            let deferred = DeferredCall { deferred_id: new_id(), kind, target, original_call: call.clone() };
            let now = self.now();
            let record = DeferredRecord {
                call: deferred.clone(),
                agent_id: agent_id.into(),
                version: r.version,
                run: run.clone(),
                state: DeferredState::Pending,
                resolution: String::new(),
                result: None,
                create_time: now,
                resolve_time: None,
            };
            let row = DeferredRow {
                deferred_id: deferred.deferred_id.clone(),
                agent_id: agent_id.into(),
                version: r.version,
                run_id: run.run_id.clone(),
                state: DeferredState::Pending.as_str().into(),
                record: serde_json::to_string(&record).map_err(|e| Error::Internal(e.to_string()))?,
                resolution: None,
                result: None,
                create_time: now,
                resolve_time: None,
            };
            self.registry.store().insert_deferred(tenant, &row).await?;
            telemetry::metrics::deferred_changed();
            return Ok(Outcome::Deferred(deferred));
        }
        let result = self.execute(tenant, agent_id, catalog, i, &args.to_string(), &call.tool_call_id, run).await;
        if !result.is_error {
            self.count_use(tenant, agent_id, catalog, i, run);
        }
        Ok(Outcome::Result(result))
    }

    fn target(&self, catalog: &Catalog, i: u32, args: &Value) -> CallTarget {
        let t = catalog.tool(i);
        CallTarget {
            group: t.group.clone().unwrap_or_default(),
            tool: t.local.clone(),
            name: t.name.clone(),
            source_id: catalog.sources[t.source].id.clone(),
            arguments_json: args.to_string(),
            definition: TargetDefinition {
                description: t.description.clone(),
                parameters_json_schema: t.input_schema_json.get().to_string(),
                output_schema_json: t.output_schema_json.as_ref().map(|r| r.get().to_string()).unwrap_or_default(),
                instructions: control::discovery::tool_instructions(catalog, t).unwrap_or_default().to_string(),
                kind: t.kind.as_str().into(),
                requires_approval: t.requires_approval,
            },
        }
    }

    /// Executes a validated call in its `execute_tool` span.
    #[allow(clippy::too_many_arguments)]
    async fn execute(&self, tenant: &str, agent_id: &str, catalog: &Catalog, i: u32, args: &str, call_id: &str, run: &RunContext) -> ToolResult {
        let span = telemetry::execute_tool_span(catalog, i, call_id, args, telemetry::trace_arguments());
        let result = self.execute_on_source(tenant, agent_id, catalog, i, args, call_id, run).instrument(span.clone()).await;
        telemetry::record_tool_result(&span, &result);
        result
    }

    /// Executes a validated call on its source, with retries only where safe.
    #[allow(clippy::too_many_arguments)]
    async fn execute_on_source(&self, tenant: &str, agent_id: &str, catalog: &Catalog, i: u32, args: &str, call_id: &str, run: &RunContext) -> ToolResult {
        let tool = catalog.tool(i);
        let source = &catalog.sources[tool.source];
        let limit_key = format!("{tenant}\u{0}{agent_id}\u{0}{}", source.id);
        let retries = if tool.idempotent { self.executors.config().max_retries } else { 0 };
        let mut attempt = 0;
        loop {
            let started = std::time::Instant::now();
            let outcome = match (&source.kind, &self.mcp) {
                (SourceKind::Function(f), _) => {
                    self.executors.execute(&f.endpoint, &limit_key, f.max_concurrency, &tool.local, args, call_id, run, tool.timeout).await
                }
                // Boxed: keeps the MCP client's large future out of every function call's.
                (SourceKind::Mcp(m), Some(mcp)) => Box::pin(mcp.execute(tenant, agent_id, &source.id, m, &tool.local, args, run, tool.timeout)).await,
                _ => Execution::NotSent("no client for this source".into()),
            };
            telemetry::metrics::executor_call(&source.id, &outcome, started.elapsed());
            match outcome {
                Execution::Done { content_json, is_error } => {
                    let content_json = if serde_json::from_str::<serde::de::IgnoredAny>(&content_json).is_ok() {
                        content_json
                    } else {
                        Value::String(content_json).to_string()
                    };
                    return ToolResult { content_json, is_error };
                }
                Execution::Busy => {
                    return ToolResult::error(
                        "busy",
                        &format!("{} is busy (too many calls at once). It was not run; try again later.", tool.name),
                    );
                }
                Execution::NotSent(e) if attempt < retries => {
                    attempt += 1;
                    tracing::debug!(tool = %tool.name, attempt, error = %e, "retrying idempotent call that was not sent");
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Execution::NotSent(_) => {
                    return ToolResult::error(
                        "tool_unavailable",
                        &format!("{} is unavailable right now (its executor could not be reached). It was not run; try again later.", tool.name),
                    );
                }
                Execution::TimedOut if tool.idempotent => {
                    return ToolResult::error(
                        "timeout",
                        &format!("{} did not answer in time. It is safe to retry.", tool.name),
                    );
                }
                Execution::TimedOut => return uncertain(&tool.name, "it did not answer before its deadline"),
                Execution::Lost(e) if tool.idempotent => {
                    return ToolResult::error(
                        "tool_unavailable",
                        &format!("{} failed before answering ({e}). It is safe to retry.", tool.name),
                    );
                }
                Execution::Lost(_) => return uncertain(&tool.name, "the connection was lost after the call was sent"),
                Execution::Vanished => {
                    // Discovery must stop offering it: prepare the listings again.
                    self.registry.invalidate_listings(tenant, agent_id);
                    return ToolResult::error(
                        "tool_unavailable",
                        &format!("{} is no longer offered by its server. It was not run. Refresh discovery and use a tool it returns.", tool.name),
                    );
                }
            }
        }
    }

    fn count_use(&self, tenant: &str, agent_id: &str, catalog: &Catalog, i: u32, run: &RunContext) {
        let tool = catalog.tool(i);
        let (Some(cfg), true, Some(user), true) =
            (catalog.control.auto_pin, self.config.auto_pin, user_of(run), tool.group.is_some())
        else {
            return;
        };
        let store = self.registry.store().clone();
        let (tenant, agent, user, name) = (tenant.to_string(), agent_id.to_string(), user.to_string(), tool.name.clone());
        let now = self.now();
        // Off the call path: a lost count only delays a tool becoming hot.
        tokio::spawn(async move {
            if let Err(e) = store.record_use(&tenant, &agent, &user, &name, now, cfg.half_life.as_millis() as i64).await {
                tracing::warn!(error = %e, "auto-pin count not recorded");
            }
        });
    }

    /// Like `count_use`, but awaited (tests and approvals).
    pub async fn record_use_now(&self, tenant: &str, agent_id: &str, user: &str, name: &str, half_life: Duration) -> Result<()> {
        self.registry.store().record_use(tenant, agent_id, user, name, self.now(), half_life.as_millis() as i64).await?;
        Ok(())
    }

    // ----- deferred records -----

    /// `ResolveDeferred`: idempotent; a conflicting second resolution is refused.
    pub async fn resolve_deferred(self: &Arc<Self>, tenant: &str, id: &str, resolution: Resolution) -> Result<ToolResult> {
        let store = self.registry.store();
        let row = store.get_deferred(tenant, id).await?.ok_or_else(|| not_found_deferred(id))?;
        let resolution_text = serde_json::to_string(&resolution).map_err(|e| Error::Internal(e.to_string()))?;
        // Already resolved: the same resolution gets the stored result, another is refused.
        if row.state != "pending" {
            return self.await_resolution(tenant, id, row, &resolution_text).await;
        }
        let record: DeferredRecord = serde_json::from_str(&row.record).map_err(|e| Error::Internal(e.to_string()))?;
        match (&resolution, record.call.kind) {
            (Resolution::ClientResult { .. }, DeferredKind::Approval) => {
                return Err(Error::FailedPrecondition(format!("deferred call {id:?} awaits approval: approve or deny it")));
            }
            // The approval that turned it into a client execution, again: the same answer.
            (Resolution::Approve { .. }, DeferredKind::ClientExecution) if row.resolution.as_deref() == Some(resolution_text.as_str()) => {
                return Ok(client_execution_pending(&record.call));
            }
            (Resolution::Approve { .. }, DeferredKind::ClientExecution) => {
                return Err(Error::FailedPrecondition(format!(
                    "deferred call {id:?} is a client execution: send its client_result (or deny it)"
                )));
            }
            _ => {}
        }
        let mut arguments = record.call.target.arguments_json.clone();
        let mut target = None;
        if let Resolution::Approve { arguments_json } = &resolution {
            if record.call.target.definition.kind == crate::catalog::ToolKind::Client.as_str() {
                return self.approve_client_tool(tenant, id, record, arguments_json.as_deref(), &resolution_text).await;
            }
            let catalog = self.registry.catalog_for_run(tenant, &record.agent_id, record.version, &record.run).await?;
            let i = catalog.by_canonical(&record.call.target.name).or_else(|| catalog.direct_tool(&record.call.target.name));
            // Replacement arguments are checked before anything changes.
            if let (Some(a), Some(i)) = (arguments_json, i) {
                let value: Value = serde_json::from_str(a).map_err(|e| Error::invalid("approve.arguments_json", format!("not valid JSON: {e}")))?;
                if let Err(r) = check_arguments(catalog.tool(i), &value) {
                    return Err(Error::invalid("approve.arguments_json", r.content_json));
                }
                arguments = value.to_string();
            }
            target = Some((catalog, i));
        }
        // Like a claimed tool call, the accepted resolution runs to its end even if this
        // request is cancelled, so a retry finds the stored result instead of a record stuck
        // executing.
        // `Ok(Err(row))`: another resolution was stored first; it is compared below.
        let this = self.clone();
        let (owned_tenant, owned_id, text) = (tenant.to_string(), id.to_string(), resolution_text.clone());
        let work = async move {
            let (tenant, id) = (owned_tenant.as_str(), owned_id.as_str());
            match this.registry.store().transition_deferred(tenant, id, "executing", &text, this.now()).await? {
                Transition::Moved => telemetry::metrics::deferred_changed(),
                Transition::Missing => return Err(not_found_deferred(id)),
                Transition::Already(row) => return Ok(Err(row)),
            }
            this.complete_resolution(tenant, id, resolution, record, target, arguments).await.map(Ok)
        };
        match RunToEnd::new(work.instrument(tracing::Span::current())).await? {
            Ok(result) => Ok(result),
            Err(row) => self.await_resolution(tenant, id, row, &resolution_text).await,
        }
    }

    /// Approving an approval-gated client tool hands it to the client: the record becomes a
    /// pending CLIENT_EXECUTION record (same id), finished by the client's result. The
    /// client validates its arguments, so replacement arguments need only be a JSON object.
    async fn approve_client_tool(&self, tenant: &str, id: &str, mut record: DeferredRecord, replacement: Option<&str>, resolution: &str) -> Result<ToolResult> {
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
            Transition::Moved => Ok(client_execution_pending(&record.call)),
            Transition::Missing => Err(not_found_deferred(id)),
            // A concurrent identical approval did it first.
            Transition::Already(row) if row.state == "pending" && row.resolution.as_deref() == Some(resolution) => Ok(client_execution_pending(&record.call)),
            Transition::Already(row) => self.await_resolution(tenant, id, row, resolution).await,
        }
    }

    /// Runs an accepted resolution and stores its result; the first stored result wins.
    async fn complete_resolution(
        &self,
        tenant: &str,
        id: &str,
        resolution: Resolution,
        record: DeferredRecord,
        target: Option<(Arc<Catalog>, Option<u32>)>,
        arguments: String,
    ) -> Result<ToolResult> {
        let result = match (&resolution, target) {
            (Resolution::Approve { .. }, Some((catalog, Some(i)))) => {
                let r = self.execute(tenant, &record.agent_id, &catalog, i, &arguments, &record.call.original_call.tool_call_id, &record.run).await;
                if !r.is_error {
                    self.count_use(tenant, &record.agent_id, &catalog, i, &record.run);
                }
                r
            }
            // Gone since it was deferred (an MCP server stopped offering it).
            (Resolution::Approve { .. }, _) => ToolResult::error(
                "tool_unavailable",
                &format!("{} is no longer available. It was not run. Refresh discovery and use a tool it returns.", record.call.target.name),
            ),
            (Resolution::Deny { message }, _) => {
                let text = if message.trim().is_empty() {
                    format!("The call to {} was denied. Do not retry it; ask the user how to proceed.", record.call.target.name)
                } else {
                    format!("The call to {} was denied: {message}", record.call.target.name)
                };
                ToolResult::error("denied", &text)
            }
            (Resolution::ClientResult { content_json, is_error }, _) => ToolResult { content_json: content_json.clone(), is_error: *is_error },
        };
        self.store_resolution_result(tenant, id, result).await
    }

    /// Stores the result of an executing record unless one is there already, and returns
    /// the stored one.
    async fn store_resolution_result(&self, tenant: &str, id: &str, result: ToolResult) -> Result<ToolResult> {
        let store = self.registry.store();
        let text = serde_json::to_string(&result).map_err(|e| Error::Internal(e.to_string()))?;
        let written = store.complete_deferred(tenant, id, &text, self.now()).await?;
        telemetry::metrics::deferred_changed();
        if written {
            return Ok(result);
        }
        let row = store.get_deferred(tenant, id).await?.ok_or_else(|| not_found_deferred(id))?;
        let stored = row.result.ok_or_else(|| Error::Internal(format!("deferred call {id:?} has no result")))?;
        serde_json::from_str(&stored).map_err(|e| Error::Internal(e.to_string()))
    }

    /// Waits for the result of a resolution accepted earlier (the same resolution asked
    /// again) and refuses a different one. A record still executing after the claim timeout
    /// lost its executor (a crash): its outcome is unknown, and that becomes its result.
    async fn await_resolution(&self, tenant: &str, id: &str, mut row: DeferredRow, resolution: &str) -> Result<ToolResult> {
        let store = self.registry.store();
        loop {
            if row.resolution.as_deref() != Some(resolution) {
                return Err(Error::FailedPrecondition(format!(
                    "deferred call {id:?} was already {}; a different resolution is refused",
                    row.resolution.as_deref().map(resolution_name).unwrap_or("resolved")
                )));
            }
            if let Some(result) = &row.result {
                return serde_json::from_str(result).map_err(|e| Error::Internal(e.to_string()));
            }
            let since = row.resolve_time.unwrap_or(row.create_time);
            if self.now() - since > self.config.claim_timeout.as_millis() as i64 {
                let name = serde_json::from_str::<DeferredRecord>(&row.record).map(|r| r.call.target.name).unwrap_or_default();
                let lost = uncertain(&name, "the approved call never reported its end");
                return self.store_resolution_result(tenant, id, lost).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            row = store.get_deferred(tenant, id).await?.ok_or_else(|| not_found_deferred(id))?;
        }
    }

    /// `ListDeferred`: records of an agent, optionally one run and one state.
    pub async fn list_deferred(&self, tenant: &str, agent_id: &str, run_id: &str, state: Option<DeferredState>, page_token: &str, page_size: u32) -> Result<(Vec<DeferredRecord>, String)> {
        if agent_id.is_empty() {
            return Err(Error::invalid("agent_id", "name the agent"));
        }
        self.registry.resolve_version(tenant, agent_id, 0).await?;
        let size = page_size_or_default(page_size);
        let cursor = if page_token.is_empty() { String::new() } else { decode_token(page_token, "page_token")? };
        let (after_time, after_id) = match cursor.split_once(' ') {
            Some((t, id)) => (t.parse().map_err(|_| Error::invalid("page_token", "not a token from this API"))?, id.to_string()),
            None => (i64::MIN, String::new()),
        };
        let state = state.map(DeferredState::as_str);
        let run = (!run_id.is_empty()).then_some(run_id);
        let rows = self.registry.store().list_deferred(tenant, agent_id, run, state, (after_time, &after_id), size + 1).await?;
        let more = rows.len() > size as usize;
        let rows = &rows[..rows.len().min(size as usize)];
        let next = if more { rows.last().map(|r| encode_token(&format!("{} {}", r.create_time, r.deferred_id))).unwrap_or_default() } else { String::new() };
        let records = rows
            .iter()
            .map(|row| {
                let mut rec: DeferredRecord = serde_json::from_str(&row.record).map_err(|e| Error::Internal(e.to_string()))?;
                rec.state = DeferredState::parse(&row.state).ok_or_else(|| Error::Internal(format!("unknown deferred state {:?}", row.state)))?;
                rec.resolution = row.resolution.as_deref().map(resolution_name).unwrap_or("").to_string();
                rec.result = row.result.as_deref().and_then(|r| serde_json::from_str(r).ok());
                rec.resolve_time = row.resolve_time;
                Ok(rec)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((records, next))
    }

    /// `EndRun`: the run's next call pins the default version again.
    pub async fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> Result<()> {
        if run_id.is_empty() {
            return Err(Error::invalid("run_id", "name the run to end"));
        }
        self.registry.resolve_version(tenant, agent_id, 0).await?;
        self.registry.end_run(tenant, agent_id, run_id).await?;
        if let Some(mcp) = &self.mcp {
            mcp.end_run(tenant, agent_id, run_id);
        }
        Ok(())
    }

    /// Forgets idle runs; called periodically.
    pub async fn expire_runs(&self) -> Result<u64> {
        let before = self.now() - self.config.run_idle.as_millis() as i64;
        Ok(self.registry.store().expire_runs(before).await?)
    }
}

/// Polls `F` in the caller's task (no hand-off to another task in the common case), and if the
/// caller is dropped before `F` is done (the request was cancelled) spawns the rest, so the
/// work still runs to its end and records its outcome.
struct RunToEnd<F: Future<Output: Send + 'static> + Send + 'static>(Option<Pin<Box<F>>>);

impl<F: Future<Output: Send + 'static> + Send + 'static> RunToEnd<F> {
    fn new(work: F) -> Self {
        Self(Some(Box::pin(work)))
    }
}

impl<F: Future<Output: Send + 'static> + Send + 'static> Future for RunToEnd<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        let work = self.0.as_mut().expect("RunToEnd polled after it finished");
        let out = std::task::ready!(work.as_mut().poll(cx));
        self.0 = None;
        std::task::Poll::Ready(out)
    }
}

impl<F: Future<Output: Send + 'static> + Send + 'static> Drop for RunToEnd<F> {
    fn drop(&mut self) {
        if let Some(rest) = self.0.take() {
            tokio::spawn(rest);
        }
    }
}

/// What a claim attempt found: the call was new and ran here, or another attempt has its
/// outcome already or is running it.
#[allow(clippy::large_enum_variant)] // returned once per call; boxing the common case would allocate
enum Attempt {
    Ran(Outcome),
    Done(String),
    Running { since: i64 },
}

/// Takes a finished (or abandoned) call off the in-process list, unless a newer claim of the
/// same call id has replaced it.
struct Unlist<'a> {
    router: &'a Router,
    key: CallKey,
    rx: watch::Receiver<Option<Outcome>>,
}

impl Drop for Unlist<'_> {
    fn drop(&mut self) {
        let mut inflight = self.router.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if inflight.get(&self.key).is_some_and(|rx| rx.same_channel(&self.rx)) {
            inflight.remove(&self.key);
        }
    }
}

/// A call's arguments, parsed once: the JSON value, or what was wrong with the text.
type Arguments = std::result::Result<Value, String>;

/// Empty text is taken as `{}` (models often send nothing for tools without parameters).
fn parse_arguments(call: &ToolCall) -> Arguments {
    if call.arguments_json.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(&call.arguments_json).map_err(|e| e.to_string())
}

fn not_found_deferred(id: &str) -> Error {
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

fn user_of(run: &RunContext) -> Option<&str> {
    run.identity.get("user_id").map(String::as_str).filter(|u| !u.is_empty())
}

fn uncertain(tool: &str, why: &str) -> ToolResult {
    ToolResult::error(
        "outcome_unknown",
        &format!("The outcome of {tool} is unknown: {why}. It may or may not have taken effect. Inspect the state it would have changed before retrying; do not blindly repeat it."),
    )
}

fn backoff(attempt: u32) -> Duration {
    let base = 20u64 << attempt.min(6);
    Duration::from_millis(base + rand::random::<u64>() % base)
}

fn new_id() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn encode_outcome(o: &Outcome) -> String {
    serde_json::to_string(o).unwrap_or_default()
}

fn decode_outcome(text: &str) -> Result<Outcome> {
    serde_json::from_str(text).map_err(|e| Error::Internal(format!("stored outcome unreadable: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settle;
    use crate::catalog::{AgentDefinition, ClientSource, ToolDeclaration, ToolSource};
    use crate::store::Store;

    #[tokio::test]
    async fn a_call_cancelled_while_its_claim_is_queued_still_runs_and_its_retry_gets_the_outcome() {
        let store = Store::open("sqlite::memory:").await.expect("store");
        let registry = Registry::new(store.clone(), Arc::new(crate::clock::SystemClock), 1 << 20).with_cache_refresh(Duration::from_secs(60));
        let confirm = ToolDeclaration { name: "confirm".into(), description: "Ask the user to confirm.".into(), ..Default::default() };
        let def = AgentDefinition {
            sources: vec![ToolSource { id: "browser".into(), kind: SourceKind::Client(ClientSource { tools: vec![confirm] }), ..Default::default() }],
            ..Default::default()
        };
        registry.create_version("t", "ui", &def, true, 0).await.expect("definition");
        let outbound = crate::outbound::Outbound::from_config(&Default::default()).expect("outbound");
        let router = Arc::new(Router::new(Arc::new(registry), Arc::new(Executors::new(Default::default(), outbound)), RouterConfig::default()));
        let run = RunContext { run_id: "r1".into(), ..Default::default() };
        let call = |id: &str| ToolCall { tool_call_id: id.into(), tool_name: "confirm".into(), arguments_json: "{}".into() };
        // A first call pins the run and loads the catalog, so the next one waits only for its claim.
        router.handle("t", "ui", 0, &run, &call("c0")).await.expect("first call");

        let held = store.hold_sqlite_writer().await;
        let first = {
            let (router, run, call) = (router.clone(), run.clone(), call("c1"));
            tokio::spawn(async move { router.handle("t", "ui", 0, &run, &call).await })
        };
        settle().await;
        first.abort(); // the host gave up while the claim was queued
        settle().await;
        drop(held);

        let retry = tokio::time::timeout(Duration::from_secs(5), router.handle("t", "ui", 0, &run, &call("c1")))
            .await
            .expect("the retry found an orphaned claim and waited for it")
            .expect("retry");
        let Outcome::Deferred(d) = retry else { panic!("expected the client execution record, got {retry:?}") };
        let listed = router.list_deferred("t", "ui", "r1", None, "", 10).await.expect("list").0;
        assert_eq!(listed.iter().filter(|r| r.call.original_call.tool_call_id == "c1").count(), 1, "{listed:?}");
        assert!(listed.iter().any(|r| r.call.deferred_id == d.deferred_id));
    }
}
