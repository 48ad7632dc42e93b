//! Protobuf ⇄ domain conversions. Generated types stop here.

use std::collections::BTreeMap;

use crate::catalog::*;
use crate::error::{Error, FieldViolation};
use crate::pb;
use crate::pb::convert::{duration, pb_duration, pb_tool_decl, timestamp, tool_decls};

/// Converts a request's definition; malformed shapes (an unset oneof, a bad duration) are
/// reported with field paths like the rules of SPEC §3.
pub fn definition(d: pb::AgentDefinition) -> Result<AgentDefinition, Error> {
    let mut v = Vec::new();
    let mut sources = Vec::with_capacity(d.sources.len());
    for (i, s) in d.sources.into_iter().enumerate() {
        let path = format!("definition.sources[{i}]");
        let kind = match s.kind {
            Some(pb::tool_source::Kind::Function(f)) => {
                let p = format!("{path}.function");
                SourceKind::Function(FunctionSource {
                    tools: tool_decls(f.tools, &p, &mut v),
                    timeout: duration(&f.timeout, &format!("{p}.timeout"), &mut v),
                    endpoint: f.endpoint,
                    max_concurrency: f.max_concurrency,
                })
            }
            Some(pb::tool_source::Kind::Client(c)) => {
                SourceKind::Client(ClientSource { tools: tool_decls(c.tools, &format!("{path}.client"), &mut v) })
            }
            Some(pb::tool_source::Kind::Mcp(m)) => {
                let p = format!("{path}.mcp");
                let mut headers = BTreeMap::new();
                for (name, b) in m.headers {
                    let value = match b.value {
                        Some(pb::header_binding::Value::From(f)) => HeaderValue::From(f),
                        Some(pb::header_binding::Value::Secret(s)) => HeaderValue::Secret(s),
                        None => {
                            v.push(FieldViolation::new(format!("{p}.headers[{name:?}]"), "set from or secret"));
                            continue;
                        }
                    };
                    headers.insert(name, HeaderBinding { value, prefix: b.prefix });
                }
                SourceKind::Mcp(McpSource {
                    timeout: duration(&m.timeout, &format!("{p}.timeout"), &mut v),
                    url: m.url,
                    headers,
                    allowed_tools: m.allowed_tools,
                    max_concurrency: m.max_concurrency,
                    approval_required: m.approval_required,
                    idempotent_tools: m.idempotent_tools,
                    codeact_callable: m.codeact_callable,
                    oauth: m.oauth.map(|o| McpOAuth { client_id: o.client_id, scopes: o.scopes, client_secret: o.client_secret }),
                })
            }
            None => {
                v.push(FieldViolation::new(format!("{path}.kind"), "set one of function, mcp or client"));
                SourceKind::default()
            }
        };
        sources.push(ToolSource {
            id: s.id,
            instructions: s.instructions,
            tool_configs: s
                .tool_configs
                .into_iter()
                .map(|(k, c)| (k, ToolConfig { pin: c.pin, additional_search_text: c.additional_search_text }))
                .collect(),
            kind,
        });
    }
    let groups = d.groups.into_iter().map(|(k, g)| (k, ToolGroup { description: g.description, source_ids: g.source_ids })).collect();
    let c = d.control.unwrap_or_default();
    let names = c.names.unwrap_or_default();
    let auto = c.auto_pin.unwrap_or_default();
    let profile = match pb::Profile::try_from(c.profile) {
        Ok(pb::Profile::Grouped) => Profile::Grouped,
        Ok(pb::Profile::Flat) => Profile::Flat,
        Err(_) => {
            v.push(FieldViolation::new("definition.control.profile", "unknown profile"));
            Profile::Grouped
        }
    };
    let ranking = match pb::Ranking::try_from(c.ranking) {
        Ok(pb::Ranking::Keyword) => Ranking::Keyword,
        Ok(pb::Ranking::Natural) => Ranking::Natural,
        Err(_) => {
            v.push(FieldViolation::new("definition.control.ranking", "unknown ranking"));
            Ranking::Keyword
        }
    };
    let control = ControlConfig {
        names: ControlNames {
            discover: names.discover,
            describe: names.describe,
            call: names.call,
            list_tools: names.list_tools,
            list_groups: names.list_groups,
            search: names.search,
        },
        max_results: c.max_results,
        max_search_bytes: c.max_search_bytes,
        disable_instructions: c.disable_instructions,
        profile,
        ranking,
        auto_pin: AutoPinConfig {
            disabled: auto.disabled,
            warmup_calls: auto.warmup_calls,
            max_hot: auto.max_hot,
            half_life: duration(&auto.half_life, "definition.control.auto_pin.half_life", &mut v),
        },
    };
    let deferred_ttl = duration(&d.deferred_ttl, "definition.deferred_ttl", &mut v);
    if !v.is_empty() {
        return Err(Error::InvalidArgument(v));
    }
    Ok(AgentDefinition { sources, groups, control, instructions: d.instructions, deferred_ttl })
}

/// The definition as stored. MCP header bindings only name their sources (run context or
/// an operator secret), so nothing secret is in here.
pub fn pb_definition(d: &AgentDefinition) -> pb::AgentDefinition {
    let sources = d
        .sources
        .iter()
        .map(|s| pb::ToolSource {
            id: s.id.clone(),
            instructions: s.instructions.clone(),
            tool_configs: s
                .tool_configs
                .iter()
                .map(|(k, c)| (k.clone(), pb::ToolConfig { pin: c.pin, additional_search_text: c.additional_search_text.clone() }))
                .collect(),
            kind: Some(match &s.kind {
                SourceKind::Function(f) => pb::tool_source::Kind::Function(pb::FunctionSource {
                    endpoint: f.endpoint.clone(),
                    tools: f.tools.iter().map(pb_tool_decl).collect(),
                    timeout: pb_duration(f.timeout),
                    max_concurrency: f.max_concurrency,
                }),
                SourceKind::Client(c) => pb::tool_source::Kind::Client(pb::ClientSource { tools: c.tools.iter().map(pb_tool_decl).collect() }),
                SourceKind::Mcp(m) => pb::tool_source::Kind::Mcp(pb::McpSource {
                    url: m.url.clone(),
                    headers: m
                        .headers
                        .iter()
                        .map(|(k, b)| {
                            let value = match &b.value {
                                HeaderValue::From(f) => pb::header_binding::Value::From(f.clone()),
                                HeaderValue::Secret(s) => pb::header_binding::Value::Secret(s.clone()),
                            };
                            (k.clone(), pb::HeaderBinding { value: Some(value), prefix: b.prefix.clone() })
                        })
                        .collect(),
                    allowed_tools: m.allowed_tools.clone(),
                    timeout: pb_duration(m.timeout),
                    max_concurrency: m.max_concurrency,
                    approval_required: m.approval_required.clone(),
                    idempotent_tools: m.idempotent_tools.clone(),
                    codeact_callable: m.codeact_callable.clone(),
                    oauth: m.oauth.as_ref().map(|o| pb::McpOAuth {
                        client_id: o.client_id.clone(),
                        scopes: o.scopes.clone(),
                        client_secret: o.client_secret.clone(),
                    }),
                }),
            }),
        })
        .collect();
    let c = &d.control;
    pb::AgentDefinition {
        sources,
        groups: d
            .groups
            .iter()
            .map(|(k, g)| (k.clone(), pb::ToolGroup { description: g.description.clone(), source_ids: g.source_ids.clone() }))
            .collect(),
        control: Some(pb::ControlConfig {
            names: Some(pb::ControlNames {
                discover: c.names.discover.clone(),
                describe: c.names.describe.clone(),
                call: c.names.call.clone(),
                list_tools: c.names.list_tools.clone(),
                list_groups: c.names.list_groups.clone(),
                search: c.names.search.clone(),
            }),
            max_results: c.max_results,
            max_search_bytes: c.max_search_bytes,
            disable_instructions: c.disable_instructions,
            profile: match c.profile {
                Profile::Grouped => pb::Profile::Grouped,
                Profile::Flat => pb::Profile::Flat,
            } as i32,
            ranking: match c.ranking {
                Ranking::Keyword => pb::Ranking::Keyword,
                Ranking::Natural => pb::Ranking::Natural,
            } as i32,
            auto_pin: Some(pb::AutoPinConfig {
                disabled: c.auto_pin.disabled,
                warmup_calls: c.auto_pin.warmup_calls,
                max_hot: c.auto_pin.max_hot,
                half_life: pb_duration(c.auto_pin.half_life),
            }),
        }),
        instructions: d.instructions.clone(),
        deferred_ttl: pb_duration(d.deferred_ttl),
    }
}

pub fn pb_version(v: &crate::registry::Version) -> pb::AgentVersion {
    pb::AgentVersion {
        agent_id: v.agent_id.clone(),
        version: v.version,
        is_default: v.is_default,
        definition: Some(pb_definition(&v.definition)),
        create_time: Some(timestamp(v.create_time)),
        embeddings_ready: false,
    }
}

pub fn pb_tool_kind(k: ToolKind) -> pb::ToolKind {
    match k {
        ToolKind::Function => pb::ToolKind::Function,
        ToolKind::Mcp => pb::ToolKind::Mcp,
        ToolKind::Client => pb::ToolKind::Client,
    }
}

/// A typed tool entry; `full` adds schemas and instructions.
pub fn pb_entry(catalog: &Catalog, i: u32, full: bool) -> pb::ToolEntry {
    use crate::control::discovery::{summary_description, tool_instructions};
    let t = catalog.tool(i);
    let mut e = pb::ToolEntry {
        group: t.group.clone().unwrap_or_default(),
        tool: t.local.clone(),
        name: t.name.clone(),
        kind: pb_tool_kind(t.kind) as i32,
        requires_approval: t.requires_approval,
        ..Default::default()
    };
    if full {
        e.description = t.description.clone();
        e.parameters_json_schema = t.input_schema_json().get().to_string();
        e.output_schema_json = t.output_schema_json.as_ref().map(|r| r.get().to_string()).unwrap_or_default();
        e.instructions = tool_instructions(catalog, t).unwrap_or_default().to_string();
    } else {
        e.description = summary_description(&t.description).into_owned();
    }
    e
}
