//! Which tool a model call names (SPEC §4–§6): control tools answered here, `call_tool`
//! resolved to a grouped tool, direct and pinned tools by their exposed names; then the checks
//! a target passes before it runs (caller, arguments object, JSON Schema).

use serde_json::Value;

use super::validate::check_arguments;
use crate::call::{Caller, ModelFault, Reply, RunContext, ToolCall};
use crate::catalog::{Catalog, PreparedTool, ToolKind};
use crate::control::{self, CallRef, ControlCall};

/// A call's arguments, parsed once: the JSON value, or what was wrong with the text.
pub type Arguments = std::result::Result<Value, String>;

/// Empty text is taken as `{}` (models often send nothing for tools without parameters).
fn parse_arguments(call: &ToolCall) -> Arguments {
    if call.arguments_json.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(&call.arguments_json).map_err(|e| e.to_string())
}

/// A call's arguments and, when it calls a control tool of the catalog, that call: each read
/// once per call.
pub struct Parsed {
    pub arguments: Arguments,
    /// `None`: not a control tool of the catalog (or arguments that are not JSON).
    control: Option<Result<ControlCall, String>>,
}

impl Parsed {
    pub fn new(catalog: &Catalog, call: &ToolCall) -> Self {
        Self::with(catalog, call, parse_arguments(call))
    }

    /// The same arguments, read as a call of `catalog` (a catalog prepared again).
    pub fn again(&self, catalog: &Catalog, call: &ToolCall) -> Self {
        Self::with(catalog, call, self.arguments.clone())
    }

    fn with(catalog: &Catalog, call: &ToolCall, arguments: Arguments) -> Self {
        let control = arguments.as_ref().ok().and_then(|a| control::parse_control_call(catalog, &call.tool_name, a));
        Self { arguments, control }
    }
}

/// The answer to a discovery control tool (pure: nothing runs), or `None` for any other call.
/// `qv`: the embedding of the call's search text (see [`search_text`]), for hybrid ranking.
pub fn answer_control(catalog: &Catalog, parsed: &Parsed, qv: Option<&[f32]>) -> Option<Reply> {
    match parsed.control.as_ref()? {
        Err(message) => Some(Reply::Fault(ModelFault::invalid_arguments(message.clone()))),
        Ok(control) => control::answer_discovery(catalog, control, qv),
    }
}

/// The search text of a discovery call ranked by the natural-language ranker: `tool_search`
/// always, `discover_tools` when the definition chose it.
pub fn search_text<'a>(catalog: &Catalog, parsed: &'a Parsed) -> Option<&'a str> {
    match parsed.control.as_ref()? {
        Ok(ControlCall::Discover(req)) if catalog.control.ranking == crate::catalog::Ranking::Natural => Some(&req.query),
        Ok(ControlCall::Search { query, .. }) => Some(query),
        _ => None,
    }
}

/// Where a call goes.
pub enum Route<'a> {
    /// A tool of the catalog, with the arguments meant for it.
    Tool { index: u32, arguments: &'a Value },
    /// Nothing to run: the model must correct its call.
    Fault(ModelFault),
}

/// Resolves the target of a call that is not a discovery call (`parsed` read for `catalog`).
pub fn target<'a>(catalog: &Catalog, call: &ToolCall, parsed: &'a Parsed) -> Route<'a> {
    let c = &catalog.control;
    let arguments = match &parsed.arguments {
        Ok(v) => v,
        Err(e) => {
            let message = format!("The arguments of {} are not valid JSON ({e}). Send a JSON object.", call.tool_name);
            return Route::Fault(ModelFault::invalid_arguments(message));
        }
    };
    if catalog.has_grouped() && call.tool_name == c.call {
        let Some(Ok(ControlCall::Call { target, arguments })) = &parsed.control else {
            let message = match &parsed.control {
                Some(Err(m)) => m.clone(),
                _ => format!("Invalid arguments for {}.", call.tool_name),
            };
            return Route::Fault(ModelFault::invalid_arguments(message));
        };
        let found = match target {
            CallRef::Grouped { group, tool } => {
                if catalog.group(group).is_none() {
                    let message =
                        format!("There is no tool group {group:?}. Call {} to see the groups, then {} to find the tool.", c.list_groups, c.discover);
                    return Route::Fault(ModelFault::UnknownGroup { message });
                }
                catalog.grouped_tool(group, tool).ok_or_else(|| {
                    format!(
                        "There is no tool {tool:?} in group {group:?} (it may have been removed). Refresh discovery with {} and use a tool it returns.",
                        c.discover
                    )
                })
            }
            CallRef::Canonical(name) => catalog.by_canonical(name).ok_or_else(|| {
                format!("There is no tool named {name:?} (it may have been removed). Search again with {} and use a name it returns.", c.search)
            }),
        };
        return match found {
            Ok(index) => Route::Tool { index, arguments },
            Err(message) => Route::Fault(ModelFault::UnknownTool { message }),
        };
    }
    if let Some(index) = catalog.direct_tool(&call.tool_name).or_else(|| catalog.by_canonical(&call.tool_name)) {
        return Route::Tool { index, arguments };
    }
    let hint = if catalog.has_grouped() {
        format!(" Use {} to find grouped tools and {} to call them.", c.exposed_names()[0], c.call)
    } else {
        " Call only the tools you were given, by their exact names.".to_string()
    };
    Route::Fault(ModelFault::UnknownTool { message: format!("There is no tool named {:?}.{hint}", call.tool_name) })
}

/// The group and tool a `call_tool` call names, whether or not the catalog has them, and the
/// arguments for the tool.
pub fn named_target<'a>(catalog: &Catalog, call: &ToolCall, parsed: &'a Parsed) -> Option<(&'a str, &'a str, &'a Value)> {
    if !catalog.has_grouped() || call.tool_name != catalog.control.call {
        return None;
    }
    match parsed.control.as_ref()? {
        Ok(ControlCall::Call { target: CallRef::Grouped { group, tool }, arguments }) => Some((group, tool, arguments)),
        Ok(ControlCall::Call { target: CallRef::Canonical(name), arguments }) => name.split_once("__").map(|(g, t)| (g, t, arguments)),
        _ => None,
    }
}

/// What a target must pass before it runs or is deferred: a caller allowed to call it, an
/// arguments object, and (for tools toolrouter sends, not client tools) its JSON Schema.
pub fn check(tool: &PreparedTool, run: &RunContext, arguments: &Value) -> Result<(), ModelFault> {
    if run.caller == Caller::Code && !tool.codeact_callable {
        return Err(ModelFault::NotCallableFromCode { tool: tool.name.clone() });
    }
    if !arguments.is_object() {
        return Err(ModelFault::invalid_arguments(format!("The arguments of {} must be a JSON object.", tool.name)));
    }
    // Client tools keep external-tool semantics: the client validates.
    if tool.kind == ToolKind::Client {
        return Ok(());
    }
    check_arguments(tool, arguments)
}
