//! The model tools in a provider's shape, and native deferred loading (issue 16): with
//! `defer_loading`, the provider gets the whole exposed catalog marked deferred plus one
//! client-executed search tool, and a call of that tool is answered with the hits as tool
//! references (Anthropic) or loaded tools (Responses). The list depends only on the version
//! and the run's frozen hot set, so it never changes within a run.

use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::{Outcome, Router};
use crate::admission::CallContext;
use crate::call::{ModelFault, ToolCall};
use crate::catalog::adapt::Adapted;
use crate::catalog::validate::MAX_EXPOSED_NAME;
use crate::catalog::{Catalog, Profile};
use crate::control::ModelTool;
use crate::control::discovery;
use crate::provider::Format;
use crate::provider::calls::RESPONSES_TOOL_SEARCH;
use crate::provider::tools::{Rendered, ToolSpec, tools_json};

const SEARCH_DESCRIPTION: &str = "Search the available tools: describe in natural language what you need to do. The best matching tools are loaded, and you then call them directly by name.";
const SEARCH_SCHEMA: &str = r#"{"type":"object","properties":{"query":{"type":"string","description":"Natural-language description of the capability or task you need a tool for."},"limit":{"type":["integer","null"],"minimum":1,"description":"Maximum number of tools to load (default 5)."}},"required":["query"],"additionalProperties":false}"#;

/// The name of the deferred-loading search tool: a control name the profile does not use
/// (the flat profile's search name in the grouped profile, the grouped discover name in the
/// flat one), so it never means two things.
pub fn search_tool_name(catalog: &Catalog) -> &str {
    match catalog.control.profile {
        Profile::Grouped => &catalog.control.search,
        Profile::Flat => &catalog.control.discover,
    }
}

/// The search tool's schema, parsed and adapted once.
static SEARCH: LazyLock<(Value, Arc<Adapted>)> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(SEARCH_SCHEMA).expect("the search schema is JSON");
    let adapted = Arc::new(Adapted::of(&schema));
    (schema, adapted)
});

/// A catalog tool as rendered: borrowed from the version, its adaptation cached with it.
fn catalog_spec(catalog: &Catalog, i: u32, deferred: bool) -> ToolSpec<'_> {
    let t = catalog.tool(i);
    ToolSpec { name: &t.name, description: &t.description, schema: t.input_schema(), adapted: t.adapted(), deferred, search: false }
}

/// The control tools' schemas, parsed and adapted here (a handful of fixed schemas), in
/// model-tool order.
fn control_schemas(tools: &[ModelTool]) -> Vec<(Value, Arc<Adapted>)> {
    tools
        .iter()
        .filter(|m| m.index.is_none())
        .map(|m| {
            let schema: Value = serde_json::from_str(&m.input_schema_json).unwrap_or_else(|_| serde_json::json!({"type": "object"}));
            let adapted = Arc::new(Adapted::of(&schema));
            (schema, adapted)
        })
        .collect()
}

/// `tools_json` for the model tools, or (deferred loading) for the search tool, the model
/// tools that are always loaded (direct, pinned, hot) and every other grouped tool deferred.
pub fn render_tools(catalog: &Catalog, tools: &[ModelTool], format: Format, defer_loading: bool) -> Rendered {
    if !defer_loading {
        let controls = control_schemas(tools);
        let mut control = controls.iter();
        let specs: Vec<ToolSpec> = tools
            .iter()
            .map(|m| match m.index {
                Some(i) => catalog_spec(catalog, i, false),
                None => {
                    let (schema, adapted) = control.next().expect("one schema per control tool");
                    ToolSpec { name: &m.name, description: &m.description, schema, adapted: adapted.clone(), deferred: false, search: false }
                }
            })
            .collect();
        return tools_json(format, &specs);
    }
    let search = search_tool_name(catalog);
    let mut specs = Vec::new();
    let mut extra = Vec::new();
    // Anthropic's search tool is named; a tool of the agent with that name keeps it (and
    // its calls), and there is no search tool. Responses' search tool has no name.
    let taken = catalog.direct_tool(search).is_some() || catalog.by_canonical(search).is_some();
    if taken && format == Format::Anthropic {
        extra.push(format!(
            "defer_loading offers no search tool: a tool of the agent is named {search:?}; rename the control tool (control names) to get one"
        ));
    } else {
        let (schema, adapted) = &*SEARCH;
        specs.push(ToolSpec { name: search, description: SEARCH_DESCRIPTION, schema, adapted: adapted.clone(), deferred: false, search: true });
    }
    let loaded: Vec<u32> = tools.iter().filter_map(|m| m.index).collect();
    specs.extend(loaded.iter().map(|&i| catalog_spec(catalog, i, false)));
    let mut too_long = 0;
    for &i in catalog.grouped_by_name.iter().filter(|i| !loaded.contains(i)) {
        if catalog.tool(i).name.len() > MAX_EXPOSED_NAME {
            too_long += 1;
            continue;
        }
        specs.push(catalog_spec(catalog, i, true));
    }
    if too_long > 0 {
        extra.push(format!(
            "{too_long} grouped tools are not offered with defer_loading: their canonical names are longer than the providers' {MAX_EXPOSED_NAME} characters"
        ));
    }
    let mut rendered = tools_json(format, &specs);
    rendered.diagnostics.extend(extra);
    rendered
}

impl Router {
    /// A call of the deferred-loading search tool, answered with the hits the model may now
    /// call (pure, like discovery); `None` for any other call.
    pub(super) async fn answer_tool_search(&self, cx: &CallContext, catalog: &Catalog, call: &ToolCall, format: Format) -> Option<Outcome> {
        let responses_search = format == Format::OpenAiResponses && call.tool_name == RESPONSES_TOOL_SEARCH;
        // A tool of the catalog with the search tool's name stays that tool.
        let named_search = call.tool_name == search_tool_name(catalog)
            && catalog.direct_tool(&call.tool_name).is_none()
            && catalog.by_canonical(&call.tool_name).is_none();
        if !format.defers_loading() || !(responses_search || named_search) {
            return None;
        }
        let bad = |m: &str| {
            Some(Outcome::Fault(ModelFault::invalid_arguments(format!("Invalid arguments for {}: {m}. Fix them and call again.", call.tool_name))))
        };
        let args: Value = match serde_json::from_str(if call.arguments_json.trim().is_empty() { "{}" } else { &call.arguments_json }) {
            Ok(v) => v,
            Err(e) => return bad(&format!("not valid JSON ({e})")),
        };
        let query = match args.get("query") {
            Some(Value::String(q)) => q.clone(),
            _ => return bad("\"query\" is required (a string)"),
        };
        let limit = match args.get("limit") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(n.min(u32::MAX as u64) as u32),
                None => return bad("\"limit\" must be a positive integer"),
            },
        };
        // Tools already loaded (pinned, hot) are not deferred: a reference to them is refused.
        let hot = self.frozen_hot_tools(cx, catalog).await.unwrap_or_default();
        let qv = self.registry().query_vector(catalog, &query).await;
        let hits = match discovery::tool_search_hits(catalog, &query, limit, qv.as_deref()) {
            Ok(hits) => hits,
            Err(e) => return Some(Outcome::Fault(e.fault(catalog))),
        };
        let hits: Vec<u32> =
            hits.into_iter().filter(|i| !catalog.pinned.contains(i) && !hot.contains(i) && catalog.tool(*i).name.len() <= MAX_EXPOSED_NAME).collect();
        let names = hits.iter().map(|&i| catalog.tool(i).name.clone()).collect();
        let tools_json = (format == Format::OpenAiResponses).then(|| {
            let specs: Vec<ToolSpec> = hits.iter().map(|&i| catalog_spec(catalog, i, true)).collect();
            tools_json(format, &specs).json
        });
        Some(Outcome::Found(Found { names, tools_json }))
    }
}

/// A tool search's hits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Found {
    pub names: Vec<String>,
    /// Responses: the hits as loaded tools (the tools parameter's entries for them).
    pub tools_json: Option<String>,
}

impl Found {
    /// The result for hosts that read only results: the names found.
    pub fn result(&self) -> crate::call::ToolResult {
        crate::call::ToolResult::ok(serde_json::json!({ "tools": self.names }).to_string())
    }
}
