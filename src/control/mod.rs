//! The model-facing control surface: control tools, guidance, model tools, and the answers
//! to discovery calls (SPEC §4–§5).

pub mod discovery;
pub mod tools;

use serde_json::Value;

use crate::call::{Reply, ToolResult};
use crate::catalog::{Catalog, Profile};
use discovery::{DetailRequest, DiscoverRequest, DiscoveryError, ListToolsRequest};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelToolKind {
    Control,
    Direct,
    Pinned,
    Hot,
}

/// One entry of `GetModelTools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelTool {
    pub name: String,
    pub description: String,
    pub input_schema_json: String,
    pub kind: ModelToolKind,
    pub group: String,
    pub tool: String,
    pub source_id: String,
    /// The catalog tool (none for control tools).
    pub index: Option<u32>,
}

/// The model tools in SPEC §4 order (control, direct, pinned, then `hot`) and the
/// instructions text.
pub fn model_tools(catalog: &Catalog, hot: &[u32]) -> (Vec<ModelTool>, String) {
    let mut out = Vec::new();
    let controls = catalog.has_grouped();
    if controls {
        for t in tools::control_tools(&catalog.control) {
            out.push(ModelTool {
                name: t.name,
                description: t.description,
                input_schema_json: t.input_schema_json,
                kind: ModelToolKind::Control,
                group: String::new(),
                tool: String::new(),
                source_id: String::new(),
                index: None,
            });
        }
    }
    let entry = |i: u32, kind: ModelToolKind| {
        let t = catalog.tool(i);
        ModelTool {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema_json: t.input_schema_json().get().to_string(),
            kind,
            group: t.group.clone().unwrap_or_default(),
            tool: t.local.clone(),
            source_id: catalog.sources[t.source].id.clone(),
            index: Some(i),
        }
    };
    out.extend(catalog.direct.iter().map(|&i| entry(i, ModelToolKind::Direct)));
    out.extend(catalog.pinned.iter().map(|&i| entry(i, ModelToolKind::Pinned)));
    out.extend(hot.iter().filter(|i| !catalog.pinned.contains(i)).map(|&i| entry(i, ModelToolKind::Hot)));
    let mut instructions = catalog.instructions.clone();
    if controls && catalog.control.instructions {
        if !instructions.is_empty() {
            instructions.push_str("\n\n");
        }
        instructions.push_str(&tools::guidance(&catalog.control));
    }
    (out, instructions)
}

/// Where a `call_tool` call points, as the model named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallRef {
    Grouped { group: String, tool: String },
    Canonical(String),
}

/// A parsed control-tool call.
#[derive(Debug, Clone)]
pub enum ControlCall {
    Discover(DiscoverRequest),
    Describe { group: String, tool: String },
    ListGroups { limit: Option<u32>, offset: u32 },
    ListTools(ListToolsRequest),
    Search { query: String, limit: Option<u32> },
    Call { target: CallRef, arguments: Value },
}

struct Args<'a> {
    obj: &'a serde_json::Map<String, Value>,
    tool: &'a str,
}

impl Args<'_> {
    fn bad(&self, msg: String) -> String {
        format!("Invalid arguments for {}: {msg}. Fix them and call again.", self.tool)
    }

    fn string(&self, key: &str, required: bool) -> Result<Option<String>, String> {
        match self.obj.get(key) {
            None | Some(Value::Null) if required => Err(self.bad(format!("\"{key}\" is required (a string)"))),
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.bad(format!("\"{key}\" must be a string"))),
        }
    }

    fn uint(&self, key: &str) -> Result<Option<u32>, String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) => Ok(Some(v.min(u32::MAX as u64) as u32)),
                None => Err(self.bad(format!("\"{key}\" must be a non-negative integer"))),
            },
            Some(_) => Err(self.bad(format!("\"{key}\" must be a non-negative integer"))),
        }
    }

    fn detail(&self, allow_auto: bool) -> Result<DetailRequest, String> {
        match self.string("detail", false)?.as_deref() {
            None => Ok(if allow_auto { DetailRequest::Auto } else { DetailRequest::Summary }),
            Some("auto") if allow_auto => Ok(DetailRequest::Auto),
            Some("summary") => Ok(DetailRequest::Summary),
            Some("full") => Ok(DetailRequest::Full),
            Some(other) => Err(self.bad(format!(
                "\"detail\" is {other:?}; use {}",
                if allow_auto { "\"auto\", \"summary\" or \"full\"" } else { "\"summary\" or \"full\"" }
            ))),
        }
    }

    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        match self.obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(self.bad(format!("unknown argument \"{k}\" (allowed: {})", allowed.join(", ")))),
            None => Ok(()),
        }
    }
}

/// Parses a call to one of the catalog's control tools. `None` when `tool_name` is not a
/// control tool of this catalog; `Some(Err(message))` for arguments the model must fix.
pub fn parse_control_call(catalog: &Catalog, tool_name: &str, arguments: &Value) -> Option<Result<ControlCall, String>> {
    let c = &catalog.control;
    if !catalog.has_grouped() || !c.exposes(tool_name) {
        return None;
    }
    let Some(obj) = arguments.as_object() else {
        return Some(Err(format!("The arguments of {tool_name} must be a JSON object. Fix them and call again.")));
    };
    let a = Args { obj, tool: tool_name };
    Some((|| {
        let grouped = c.profile == Profile::Grouped;
        if tool_name == c.call {
            let arguments = match obj.get("arguments") {
                Some(v @ Value::Object(_)) => v.clone(),
                None | Some(Value::Null) => {
                    return Err(a.bad("\"arguments\" is required: an object matching the tool's parameters schema (use {} for none)".into()));
                }
                Some(_) => return Err(a.bad("\"arguments\" must be a JSON object, not a string or other value".into())),
            };
            let target = if grouped {
                a.only(&["group", "tool", "arguments"])?;
                CallRef::Grouped { group: a.string("group", true)?.unwrap_or_default(), tool: a.string("tool", true)?.unwrap_or_default() }
            } else {
                a.only(&["name", "arguments"])?;
                CallRef::Canonical(a.string("name", true)?.unwrap_or_default())
            };
            return Ok(ControlCall::Call { target, arguments });
        }
        if !grouped {
            a.only(&["query", "limit"])?;
            return Ok(ControlCall::Search { query: a.string("query", true)?.unwrap_or_default(), limit: a.uint("limit")? });
        }
        if tool_name == c.discover {
            a.only(&["query", "group", "detail", "limit", "offset"])?;
            Ok(ControlCall::Discover(DiscoverRequest {
                query: a.string("query", true)?.unwrap_or_default(),
                group: a.string("group", false)?,
                detail: a.detail(true)?,
                limit: a.uint("limit")?,
                offset: a.uint("offset")?.unwrap_or(0),
            }))
        } else if tool_name == c.describe {
            a.only(&["group", "tool"])?;
            Ok(ControlCall::Describe { group: a.string("group", true)?.unwrap_or_default(), tool: a.string("tool", true)?.unwrap_or_default() })
        } else if tool_name == c.list_groups {
            a.only(&["limit", "offset"])?;
            Ok(ControlCall::ListGroups { limit: a.uint("limit")?, offset: a.uint("offset")?.unwrap_or(0) })
        } else {
            a.only(&["group", "detail", "limit", "offset"])?;
            Ok(ControlCall::ListTools(ListToolsRequest {
                group: a.string("group", false)?,
                full: a.detail(false)? == DetailRequest::Full,
                limit: a.uint("limit")?,
                offset: a.uint("offset")?.unwrap_or(0),
            }))
        }
    })())
}

/// Answers a discovery call as the model's reply; `None` for `Call`, which `invoke` routes.
pub fn answer_discovery(catalog: &Catalog, call: &ControlCall, qv: Option<&[f32]>) -> Option<Reply> {
    let result: Result<String, DiscoveryError> = match call {
        ControlCall::Discover(req) => discovery::discover(catalog, req, qv).map(|p| p.json),
        ControlCall::Describe { group, tool } => discovery::describe(catalog, group, tool).map(|d| d.json),
        ControlCall::ListGroups { limit, offset } => discovery::list_groups(catalog, *limit, *offset).map(|p| p.json),
        ControlCall::ListTools(req) => discovery::list_tools(catalog, req).map(|p| p.json),
        ControlCall::Search { query, limit } => discovery::tool_search(catalog, query, *limit, qv).map(|p| p.json),
        ControlCall::Call { .. } => return None,
    };
    Some(match result {
        Ok(json) => Reply::Result(ToolResult::ok(json)),
        Err(e) => Reply::Fault(e.fault(catalog)),
    })
}
