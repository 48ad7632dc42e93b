//! The gRPC services: proto in, admission, domain call, proto out. No domain logic here.

use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tonic::{Request, Response, Status};

use super::convert::{self, pb_entry, pb_version};
use super::formats;
use super::status::{invalid, to_status};
use crate::admission::{Addressed, Admission, CallContext, Principal, RequestContext};
use crate::auth::limits::Limits;
use crate::call::{self, ModelFault, Reply};
use crate::control::ModelToolKind;
use crate::control::discovery::{self, Detail, DetailRequest, DiscoverRequest, DiscoveryError, ListToolsRequest};
use crate::error::Error;
use crate::invoke::{DeferredKind, DeferredState, ListDeferred, Outcome, Resolution, Router, Settled, ToolsView};
use crate::pb;
use crate::pb::convert::timestamp;
use crate::provider::Format;
use crate::registry::Registry;

/// The caller, as the authentication layer found it (the anonymous principal of tenant
/// `default` when authentication is off). A request that did not pass the layer has none
/// and is refused.
fn principal<T>(req: &Request<T>) -> Result<Principal, Status> {
    req.extensions().get::<Principal>().cloned().ok_or_else(|| to_status(Error::Unauthenticated))
}

/// How long the client waits for the answer (`grpc-timeout`).
fn timeout<T>(req: &Request<T>) -> Option<Duration> {
    super::wire::parse_timeout(req.metadata().get("grpc-timeout")?.to_str().ok()?)
}

/// Admits a request that is not a call.
fn admit_request<T>(admission: &Admission, req: &Request<T>) -> Result<RequestContext, Status> {
    admission.request(&principal(req)?).map_err(to_status)
}

/// Admits a call of `req` to the agent and run it names (the run's identity claims merged
/// with the caller's: those win, see [`Principal::merge_identity`]).
async fn admit_call<T>(
    admission: &Admission,
    req: &Request<T>,
    agent: Option<pb::AgentRef>,
    run: Option<pb::RunContext>,
) -> Result<CallContext, Status> {
    let p = principal(req)?;
    let agent = agent.unwrap_or_default();
    if agent.agent_id.is_empty() {
        return Err(invalid("agent.agent_id", "name the agent"));
    }
    let run = pb::convert::run_context(run).map_err(to_status)?;
    let to = Addressed { agent_id: agent.agent_id, version: agent.version, run, timeout: timeout(req) };
    admission.call(&p, to).await.map_err(to_status)
}

#[derive(Clone)]
pub struct RegistryService {
    pub registry: Arc<Registry>,
    pub limits: Arc<Limits>,
    pub admission: Arc<Admission>,
}

#[tonic::async_trait]
impl pb::agent_registry_server::AgentRegistry for RegistryService {
    async fn create_agent_version(&self, req: Request<pb::CreateAgentVersionRequest>) -> Result<Response<pb::AgentVersion>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let t = &rq.tenant;
        let r = req.into_inner();
        let size = r.definition.as_ref().map(|d| d.encoded_len()).unwrap_or(0);
        let def = convert::definition(r.definition.ok_or_else(|| invalid("definition", "a definition is required"))?).map_err(to_status)?;
        let too_big = crate::catalog::validate::check_schema_limits(&def, self.limits.max_schema_bytes, self.limits.max_schema_depth);
        if !too_big.is_empty() {
            return Err(to_status(crate::error::Error::InvalidArgument(too_big)));
        }
        let v = self.registry.create_version(t, &r.agent_id, &def, r.make_default, size).await.map_err(to_status)?;
        if self.registry.embeddings().is_some() {
            // Embedding starts now, in the background, not at the first search.
            let (registry, tenant, agent, version) = (self.registry.clone(), t.to_string(), v.agent_id.clone(), v.version);
            tokio::spawn(async move { registry.embeddings_ready(&tenant, &agent, version).await });
        }
        Ok(Response::new(pb_version(&v)))
    }

    async fn get_agent_version(&self, req: Request<pb::GetAgentVersionRequest>) -> Result<Response<pb::AgentVersion>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let t = &rq.tenant;
        let r = req.into_inner();
        let v = self.registry.get_version(t, &r.agent_id, r.version).await.map_err(to_status)?;
        let mut out = pb_version(&v);
        out.embeddings_ready = self.registry.embeddings_ready(t, &r.agent_id, v.version).await;
        Ok(Response::new(out))
    }

    async fn list_agents(&self, req: Request<pb::ListAgentsRequest>) -> Result<Response<pb::ListAgentsResponse>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let t = &rq.tenant;
        let r = req.into_inner();
        let (rows, next) = self.registry.list_agents(t, &r.page_token, r.page_size).await.map_err(to_status)?;
        Ok(Response::new(pb::ListAgentsResponse {
            agents: rows
                .into_iter()
                .map(|a| pb::Agent {
                    agent_id: a.agent_id,
                    default_version: a.default_version,
                    latest_version: a.latest_version,
                    create_time: Some(timestamp(a.create_time)),
                    update_time: Some(timestamp(a.update_time)),
                })
                .collect(),
            next_page_token: next,
        }))
    }

    async fn list_agent_versions(&self, req: Request<pb::ListAgentVersionsRequest>) -> Result<Response<pb::ListAgentVersionsResponse>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let t = &rq.tenant;
        let r = req.into_inner();
        let (rows, next) = self.registry.list_versions(t, &r.agent_id, &r.page_token, r.page_size).await.map_err(to_status)?;
        Ok(Response::new(pb::ListAgentVersionsResponse { versions: rows.iter().map(pb_version).collect(), next_page_token: next }))
    }

    async fn set_default_version(&self, req: Request<pb::SetDefaultVersionRequest>) -> Result<Response<pb::AgentVersion>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let t = &rq.tenant;
        let r = req.into_inner();
        let v = self.registry.set_default(t, &r.agent_id, r.version).await.map_err(to_status)?;
        Ok(Response::new(pb_version(&v)))
    }

    async fn delete_agent(&self, req: Request<pb::DeleteAgentRequest>) -> Result<Response<pb::DeleteAgentResponse>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let t = &rq.tenant;
        let r = req.into_inner();
        self.registry.delete_agent(t, &r.agent_id).await.map_err(to_status)?;
        Ok(Response::new(pb::DeleteAgentResponse {}))
    }
}

#[derive(Clone)]
pub struct DiscoveryService {
    pub router: Arc<Router>,
    pub admission: Arc<Admission>,
}

fn pb_detail(d: Detail) -> i32 {
    match d {
        Detail::Summary => pb::Detail::Summary as i32,
        Detail::Full => pb::Detail::Full as i32,
    }
}

fn detail_request(d: i32) -> Result<DetailRequest, Status> {
    match pb::Detail::try_from(d) {
        Ok(pb::Detail::Auto) => Ok(DetailRequest::Auto),
        Ok(pb::Detail::Summary) => Ok(DetailRequest::Summary),
        Ok(pb::Detail::Full) => Ok(DetailRequest::Full),
        Err(_) => Err(invalid("detail", "unknown detail")),
    }
}

fn group_opt(g: String) -> Option<String> {
    (!g.is_empty()).then_some(g)
}

impl DiscoveryService {
    /// The catalog the request's run sees, once the request is admitted.
    async fn catalog<T>(
        &self,
        req: &Request<T>,
        agent: Option<pb::AgentRef>,
        run: Option<pb::RunContext>,
    ) -> Result<Arc<crate::catalog::Catalog>, Status> {
        let cx = admit_call(&self.admission, req, agent, run).await?;
        Ok(self.router.resolve(&cx).await.map_err(to_status)?.catalog)
    }
}

fn fail(catalog: &crate::catalog::Catalog, e: DiscoveryError) -> Status {
    to_status(e.error(catalog))
}

#[tonic::async_trait]
impl pb::discovery_server::Discovery for DiscoveryService {
    async fn discover_tools(&self, req: Request<pb::DiscoverToolsRequest>) -> Result<Response<pb::DiscoverToolsResponse>, Status> {
        let (agent, run) = (req.get_ref().agent.clone(), req.get_ref().run.clone());
        let catalog = self.catalog(&req, agent, run).await?;
        let r = req.into_inner();
        let q = DiscoverRequest { query: r.query, group: group_opt(r.group), detail: detail_request(r.detail)?, limit: r.limit, offset: r.offset };
        let qv = match catalog.control.ranking {
            crate::catalog::Ranking::Natural => self.router.registry().query_vector(&catalog, &q.query).await,
            _ => None,
        };
        let page = discovery::discover(&catalog, &q, qv.as_deref()).map_err(|e| fail(&catalog, e))?;
        let full = page.detail == Detail::Full;
        Ok(Response::new(pb::DiscoverToolsResponse {
            detail: pb_detail(page.detail),
            tools: page.tools.iter().map(|&i| pb_entry(&catalog, i, full)).collect(),
            total: page.total,
            next_offset: page.next_offset,
            content_json: page.json,
        }))
    }

    async fn describe_tool(&self, req: Request<pb::DescribeToolRequest>) -> Result<Response<pb::DescribeToolResponse>, Status> {
        let (agent, run) = (req.get_ref().agent.clone(), req.get_ref().run.clone());
        let catalog = self.catalog(&req, agent, run).await?;
        let r = req.into_inner();
        let d = discovery::describe(&catalog, &r.group, &r.tool).map_err(|e| fail(&catalog, e))?;
        Ok(Response::new(pb::DescribeToolResponse { tool: Some(pb_entry(&catalog, d.tool, true)), content_json: d.json }))
    }

    async fn list_tool_groups(&self, req: Request<pb::ListToolGroupsRequest>) -> Result<Response<pb::ListToolGroupsResponse>, Status> {
        let (agent, run) = (req.get_ref().agent.clone(), req.get_ref().run.clone());
        let catalog = self.catalog(&req, agent, run).await?;
        let r = req.into_inner();
        let page = discovery::list_groups(&catalog, r.limit, r.offset).map_err(|e| fail(&catalog, e))?;
        Ok(Response::new(pb::ListToolGroupsResponse {
            groups: page
                .groups
                .iter()
                .map(|&g| {
                    let g = &catalog.groups[g];
                    pb::GroupEntry { group: g.name.clone(), description: g.description.clone(), tool_count: g.tools.len() as u32 }
                })
                .collect(),
            total: page.total,
            next_offset: page.next_offset,
            content_json: page.json,
        }))
    }

    async fn list_tools(&self, req: Request<pb::ListCatalogToolsRequest>) -> Result<Response<pb::ListCatalogToolsResponse>, Status> {
        let (agent, run) = (req.get_ref().agent.clone(), req.get_ref().run.clone());
        let catalog = self.catalog(&req, agent, run).await?;
        let r = req.into_inner();
        let full = detail_request(r.detail)? == DetailRequest::Full;
        let q = ListToolsRequest { group: group_opt(r.group), full, limit: r.limit, offset: r.offset };
        let page = discovery::list_tools(&catalog, &q).map_err(|e| fail(&catalog, e))?;
        Ok(Response::new(pb::ListCatalogToolsResponse {
            detail: pb_detail(page.detail),
            tools: page.tools.iter().map(|&i| pb_entry(&catalog, i, full)).collect(),
            total: page.total,
            next_offset: page.next_offset,
            content_json: page.json,
        }))
    }
}

#[derive(Clone)]
pub struct RouterService {
    pub router: Arc<Router>,
    pub limits: Arc<Limits>,
    pub admission: Arc<Admission>,
}

/// `path` is written out only when the arguments are refused (this runs on every call).
fn check_arguments_size(text: &str, path: impl std::fmt::Display, max: usize) -> Result<(), Status> {
    if text.len() > max {
        return Err(invalid(&path.to_string(), format!("the arguments are {} bytes, over the {max}-byte limit", text.len())));
    }
    Ok(())
}

/// The model's call; `path` names it in errors (`call`, `calls[2]`).
fn tool_call(c: Option<pb::ToolCall>, path: &str, max_arguments: usize) -> Result<call::ToolCall, Status> {
    let c = c.ok_or_else(|| invalid(path, "the model's tool call is required"))?;
    checked(call::ToolCall { tool_call_id: c.tool_call_id, tool_name: c.tool_name, arguments_json: c.arguments_json }, path, max_arguments)
}

/// A call as the typed RPCs take it: a tool name, an id of at most 256 bytes, arguments within
/// the limit. Calls read from `provider_calls_json` pass the same checks.
fn checked(c: call::ToolCall, path: &str, max_arguments: usize) -> Result<call::ToolCall, Status> {
    if c.tool_name.is_empty() {
        return Err(invalid(&format!("{path}.tool_name"), "the tool name the model called is required"));
    }
    if c.tool_call_id.len() > 256 {
        return Err(invalid(&format!("{path}.tool_call_id"), "at most 256 bytes"));
    }
    check_arguments_size(&c.arguments_json, format_args!("{path}.arguments_json"), max_arguments)?;
    Ok(c)
}

/// A tool call id reused for another call is a protocol fault on the typed RPCs (the host
/// must fix its ids), not a result for the model.
fn refuse_reused(o: &Outcome, path: &str) -> Result<(), Status> {
    match o {
        Outcome::Fault(f @ ModelFault::ToolCallIdReused { .. }) => {
            Err(to_status(Error::FailedPrecondition(format!("{path}.tool_call_id: {}", f.message()))))
        }
        _ => Ok(()),
    }
}

/// The model's tool result: an answer as it is, a fault rendered for the model.
fn pb_result(r: &Reply) -> pb::ToolResult {
    let r = r.render();
    pb::ToolResult { content_json: r.content_json, is_error: r.is_error, ..Default::default() }
}

fn pb_call(c: &call::ToolCall) -> pb::ToolCall {
    pb::ToolCall { tool_call_id: c.tool_call_id.clone(), tool_name: c.tool_name.clone(), arguments_json: c.arguments_json.clone() }
}

fn pb_deferred(d: &crate::invoke::DeferredCall) -> pb::DeferredCall {
    let t = &d.target;
    let def = &t.definition;
    let kind = match def.kind.as_str() {
        "function" => pb::ToolKind::Function,
        "mcp" => pb::ToolKind::Mcp,
        _ => pb::ToolKind::Client,
    };
    pb::DeferredCall {
        deferred_id: d.deferred_id.clone(),
        kind: match d.kind {
            DeferredKind::Approval => pb::DeferredKind::Approval,
            DeferredKind::ClientExecution => pb::DeferredKind::ClientExecution,
            DeferredKind::Consent => pb::DeferredKind::Consent,
        } as i32,
        consent_url: d.consent_url.clone(),
        target: Some(pb::CallTarget {
            group: t.group.clone(),
            tool: t.tool.clone(),
            name: t.name.clone(),
            source_id: t.source_id.clone(),
            arguments_json: t.arguments_json.clone(),
            definition: Some(pb::ToolEntry {
                group: t.group.clone(),
                tool: t.tool.clone(),
                name: t.name.clone(),
                description: def.description.clone(),
                parameters_json_schema: def.parameters_json_schema.clone(),
                output_schema_json: def.output_schema_json.clone(),
                instructions: def.instructions.clone(),
                kind: kind as i32,
                requires_approval: def.requires_approval,
            }),
        }),
        original_call: Some(pb_call(&d.original_call)),
    }
}

/// An outcome; with a format, its result also in the provider's shape (returned apart, for
/// `provider_results_json`).
fn pb_outcome(o: Outcome, format: Option<Format>, call: &call::ToolCall) -> (pb::HandleToolCallResponse, Option<serde_json::Value>) {
    use pb::handle_tool_call_response::Outcome as O;
    let part = format.and_then(|f| formats::provider_part(f, call, &o));
    let provider_json = part.as_ref().map(|p| p.to_string()).unwrap_or_default();
    let outcome = match o {
        Outcome::Result(r) => O::Result(pb::ToolResult { content_json: r.content_json, is_error: r.is_error, provider_json, follow_up: None }),
        Outcome::Fault(f) => O::Result(pb::ToolResult { provider_json, ..pb_result(&Reply::Fault(f)) }),
        Outcome::Found(f) => {
            let r = f.result();
            O::Result(pb::ToolResult { content_json: r.content_json, is_error: r.is_error, provider_json, follow_up: None })
        }
        Outcome::Deferred(d) => O::Deferred(pb_deferred(&d)),
    };
    (pb::HandleToolCallResponse { outcome: Some(outcome) }, part)
}

fn pb_kind(k: ModelToolKind) -> i32 {
    (match k {
        ModelToolKind::Control => pb::ModelToolKind::Control,
        ModelToolKind::Direct => pb::ModelToolKind::Direct,
        ModelToolKind::Pinned => pb::ModelToolKind::Pinned,
        ModelToolKind::Hot => pb::ModelToolKind::Hot,
    }) as i32
}

#[tonic::async_trait]
impl pb::router_server::Router for RouterService {
    async fn get_model_tools(&self, req: Request<pb::GetModelToolsRequest>) -> Result<Response<pb::GetModelToolsResponse>, Status> {
        let view = ToolsView { format: formats::format(req.get_ref().format, "format")?, defer_loading: req.get_ref().defer_loading };
        let (agent, run) = (req.get_ref().agent.clone(), req.get_ref().run.clone());
        let cx = admit_call(&self.admission, &req, agent, run).await?;
        let m = self.router.model_tools_as(&cx, view).await.map_err(to_status)?;
        Ok(Response::new(pb::GetModelToolsResponse {
            tools: m
                .tools
                .into_iter()
                .map(|m| pb::ModelTool {
                    name: m.name,
                    description: m.description,
                    input_schema_json: m.input_schema_json,
                    kind: pb_kind(m.kind),
                    group: m.group,
                    tool: m.tool,
                    source_id: m.source_id,
                })
                .collect(),
            instructions: m.instructions,
            version: m.version,
            diagnostics: m.diagnostics,
            tools_json: m.tools_json,
        }))
    }

    async fn handle_tool_call(&self, mut req: Request<pb::HandleToolCallRequest>) -> Result<Response<pb::HandleToolCallResponse>, Status> {
        let format = formats::format(req.get_ref().format, "format")?;
        // The message's parts are moved out (the request's metadata and extensions stay for
        // admission): no copy of the arguments per call.
        let msg = req.get_mut();
        let (agent, run, call) = (msg.agent.take(), msg.run.take(), msg.call.take());
        let call = tool_call(call, "call", self.limits.max_arguments_bytes)?;
        let cx = admit_call(&self.admission, &req, agent, run).await?;
        let o = self.router.handle_as(&cx, &call, format).await.map_err(to_status)?;
        refuse_reused(&o, "call")?;
        Ok(Response::new(pb_outcome(o, format, &call).0))
    }

    async fn handle_tool_calls(&self, req: Request<pb::HandleToolCallsRequest>) -> Result<Response<pb::HandleToolCallsResponse>, Status> {
        let max = self.limits.max_arguments_bytes;
        let format = formats::format(req.get_ref().format, "format")?;
        let mut calls = req
            .get_ref()
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| tool_call(Some(c.clone()), &format!("calls[{i}]"), max))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, c) in formats::provider_calls(format, &req.get_ref().provider_calls_json)?.into_iter().enumerate() {
            calls.push(checked(c, &format!("provider_calls_json(call {i})"), max)?);
        }
        let (agent, run) = (req.get_ref().agent.clone(), req.get_ref().run.clone());
        let cx = admit_call(&self.admission, &req, agent, run).await?;
        let outcomes = self.router.handle_many_as(&cx, &calls, format).await.map_err(to_status)?;
        let typed = req.get_ref().calls.len();
        for (i, o) in outcomes.iter().enumerate() {
            let path = if i < typed { format!("calls[{i}]") } else { format!("provider_calls_json(call {})", i - typed) };
            refuse_reused(o, &path)?;
        }
        let mut parts = Vec::new();
        let outcomes = outcomes
            .into_iter()
            .zip(&calls)
            .map(|(o, c)| {
                let (o, part) = pb_outcome(o, format, c);
                parts.extend(part);
                o
            })
            .collect();
        let provider_results_json = format.map(|f| formats::provider_results(f, parts)).unwrap_or_default();
        Ok(Response::new(pb::HandleToolCallsResponse { outcomes, provider_results_json }))
    }

    async fn resolve_deferred(&self, req: Request<pb::ResolveDeferredRequest>) -> Result<Response<pb::ToolResult>, Status> {
        use pb::resolve_deferred_request::Resolution as R;
        let rq = admit_request(&self.admission, &req)?;
        let r = req.into_inner();
        let format = formats::format(r.format, "format")?;
        if r.deferred_id.is_empty() {
            return Err(invalid("deferred_id", "name the deferred call"));
        }
        let resolution = match r.resolution {
            Some(R::Approve(a)) => {
                if let Some(text) = &a.arguments_json {
                    check_arguments_size(text, "approve.arguments_json", self.limits.max_arguments_bytes)?;
                }
                Resolution::Approve { arguments_json: a.arguments_json }
            }
            Some(R::Deny(d)) => Resolution::Deny { message: d.message },
            Some(R::ClientResult(c)) => {
                if serde_json::from_str::<serde::de::IgnoredAny>(&c.content_json).is_err() {
                    return Err(invalid("client_result.content_json", "must be JSON text"));
                }
                Resolution::ClientResult { content_json: c.content_json, is_error: c.is_error }
            }
            None => return Err(invalid("resolution", "set one of approve, deny or client_result")),
        };
        let settled = self.router.resolve_deferred(&rq, &r.deferred_id, resolution).await.map_err(to_status)?;
        let mut result = pb_result(&settled.reply());
        match (&settled, format) {
            (Settled::HandedToClient(call), _) => result.follow_up = Some(pb_deferred(call)),
            (Settled::Done { reply, call }, Some(f)) => result.provider_json = formats::provider_reply(f, call, reply),
            (Settled::Done { .. }, None) => {}
        }
        Ok(Response::new(result))
    }

    async fn list_deferred(&self, req: Request<pb::ListDeferredRequest>) -> Result<Response<pb::ListDeferredResponse>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let r = req.into_inner();
        let format = formats::format(r.format, "format")?;
        let state = match pb::DeferredState::try_from(r.state) {
            Ok(pb::DeferredState::Unspecified) => None,
            Ok(pb::DeferredState::Pending) => Some(DeferredState::Pending),
            Ok(pb::DeferredState::Executing) => Some(DeferredState::Executing),
            Ok(pb::DeferredState::Resolved) => Some(DeferredState::Resolved),
            Ok(pb::DeferredState::Expired) => Some(DeferredState::Expired),
            Err(_) => return Err(invalid("state", "unknown state")),
        };
        let query = ListDeferred { agent_id: r.agent_id, run_id: r.run_id, state, page_token: r.page_token, page_size: r.page_size };
        let (records, next) = self.router.list_deferred(&rq, &query).await.map_err(to_status)?;
        Ok(Response::new(pb::ListDeferredResponse {
            records: records
                .into_iter()
                .map(|rec| pb::DeferredRecord {
                    call: Some(pb_deferred(&rec.call)),
                    agent_id: rec.agent_id,
                    version: rec.version,
                    run_id: rec.run.run_id,
                    state: match rec.state {
                        DeferredState::Pending => pb::DeferredState::Pending,
                        DeferredState::Executing => pb::DeferredState::Executing,
                        DeferredState::Resolved => pb::DeferredState::Resolved,
                        DeferredState::Expired => pb::DeferredState::Expired,
                    } as i32,
                    resolution: rec.resolution,
                    result: rec.result.as_ref().map(|reply| {
                        let provider_json = format.map(|f| formats::provider_reply(f, &rec.call.original_call, reply)).unwrap_or_default();
                        pb::ToolResult { provider_json, ..pb_result(reply) }
                    }),
                    create_time: Some(timestamp(rec.create_time)),
                    resolve_time: rec.resolve_time.map(timestamp),
                    expire_time: rec.expire_time.map(timestamp),
                })
                .collect(),
            next_page_token: next,
        }))
    }

    async fn end_run(&self, req: Request<pb::EndRunRequest>) -> Result<Response<pb::EndRunResponse>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let r = req.into_inner();
        self.router.end_run(&rq, &r.agent_id, &r.run_id).await.map_err(to_status)?;
        Ok(Response::new(pb::EndRunResponse {}))
    }

    async fn revoke_tokens(&self, req: Request<pb::RevokeTokensRequest>) -> Result<Response<pb::RevokeTokensResponse>, Status> {
        let rq = admit_request(&self.admission, &req)?;
        let r = req.into_inner();
        let revoked = self.router.revoke_tokens(&rq, &r.user_id, &r.source_id).await.map_err(to_status)?;
        Ok(Response::new(pb::RevokeTokensResponse { revoked }))
    }
}
