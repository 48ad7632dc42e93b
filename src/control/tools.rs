//! The fixed control tools and the generated guidance. Both depend only on the control
//! configuration, never on the inventory, so they are byte-identical across definitions with
//! the same configuration (model prompt caches stay warm).

use crate::catalog::{Profile, ResolvedControl};

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlTool {
    pub name: String,
    pub description: String,
    pub input_schema_json: String,
}

/// The control tools of the profile, in model-tool order.
pub fn control_tools(c: &ResolvedControl) -> Vec<ControlTool> {
    match c.profile {
        Profile::Grouped => vec![
            ControlTool {
                name: c.discover.clone(),
                description: format!(
                    "Search the grouped tools with short keywords (not a sentence). Returns {{detail, tools, total, next_offset}}. Pass group to search one domain (see {}); an empty query browses. detail=auto returns full definitions only for a single exact-name match; otherwise summaries, which you describe with {} before calling. Follow next_offset with the same query, group and detail to page.",
                    c.list_groups, c.describe
                ),
                input_schema_json: r#"{"type":"object","properties":{"query":{"type":"string","description":"Short keywords or an exact tool name; empty to browse."},"group":{"type":["string","null"],"description":"Only search this group."},"detail":{"type":["string","null"],"enum":["auto","summary","full",null],"description":"auto (default), summary or full."},"limit":{"type":["integer","null"],"minimum":1,"description":"Maximum number of tools to return."},"offset":{"type":["integer","null"],"minimum":0,"description":"Index of the first result: the next_offset of the previous page."}},"required":["query"],"additionalProperties":false}"#.into(),
            },
            ControlTool {
                name: c.describe.clone(),
                description: format!(
                    "Return the complete current definition of one grouped tool (description, parameters JSON Schema, instructions) as {{tool}}. Use the group and tool returned by {} or {}.",
                    c.discover, c.list_tools
                ),
                input_schema_json: r#"{"type":"object","properties":{"group":{"type":"string","description":"The tool's group."},"tool":{"type":"string","description":"The tool's local name within the group."}},"required":["group","tool"],"additionalProperties":false}"#.into(),
            },
            ControlTool {
                name: c.call.clone(),
                description: "Call a grouped tool by its group and local tool name with an arguments object that matches its complete parameters schema. Returns the tool's result.".into(),
                input_schema_json: r#"{"type":"object","properties":{"group":{"type":"string","description":"The tool's group."},"tool":{"type":"string","description":"The tool's local name within the group."},"arguments":{"type":"object","description":"Arguments matching the tool's parameters schema."}},"required":["group","tool","arguments"],"additionalProperties":false}"#.into(),
            },
            ControlTool {
                name: c.list_groups.clone(),
                description: "List the tool groups (domains) with their descriptions and tool counts as {groups, total, next_offset}. Follow next_offset to page.".into(),
                input_schema_json: r#"{"type":"object","properties":{"limit":{"type":["integer","null"],"minimum":1,"description":"Maximum number of groups to return."},"offset":{"type":["integer","null"],"minimum":0,"description":"Index of the first group: the next_offset of the previous page."}},"additionalProperties":false}"#.into(),
            },
            ControlTool {
                name: c.list_tools.clone(),
                description: "List every grouped tool (of one group, if given) by name as {detail, tools, total, next_offset}, as summaries (default) or full definitions. Keep the same options and follow next_offset until it is null.".into(),
                input_schema_json: r#"{"type":"object","properties":{"group":{"type":["string","null"],"description":"Only list this group."},"detail":{"type":["string","null"],"enum":["summary","full",null],"description":"summary (default) or full."},"limit":{"type":["integer","null"],"minimum":1,"description":"Maximum number of tools to return."},"offset":{"type":["integer","null"],"minimum":0,"description":"Index of the first tool: the next_offset of the previous page."}},"additionalProperties":false}"#.into(),
            },
        ],
        Profile::Flat => vec![
            ControlTool {
                name: c.search.clone(),
                description: "Find tools for a capability you need: describe it in natural language. Returns the matching tools' complete definitions; call one with call_tool by its name.".replace("call_tool", &c.call),
                input_schema_json: r#"{"type":"object","properties":{"query":{"type":"string","description":"Natural-language description of the capability or task you need a tool for."},"limit":{"type":["integer","null"],"minimum":1,"description":"Maximum number of tools to return."}},"required":["query"],"additionalProperties":false}"#.into(),
            },
            ControlTool {
                name: c.call.clone(),
                description: format!(
                    "Call a tool found with {} by its name, with an arguments object that matches its parameters schema.",
                    c.search
                ),
                input_schema_json: r#"{"type":"object","properties":{"name":{"type":"string","description":"The tool's name as returned by the search."},"arguments":{"type":"object","description":"Arguments matching the tool's parameters schema."}},"required":["name","arguments"],"additionalProperties":false}"#.into(),
            },
        ],
    }
}

/// The generated guidance shown with the control tools (SPEC §4).
pub fn guidance(c: &ResolvedControl) -> String {
    match c.profile {
        Profile::Grouped => format!(
            "Some tools are grouped by domain behind {discover}, {describe}, {call}, {groups} and {list}.\n\
             1. Pick a domain ({groups} shows them) and find candidates with {discover} using short keywords. Read the response's detail: when it is \"summary\", call {describe} for the tool you chose unless you already know its complete current definition.\n\
             2. Call it with {call}, passing the returned group and tool (local name) and an arguments object that matches the complete parameters schema.\n\
             3. Reuse a schema you already know instead of searching again before every call.\n\
             4. Follow next_offset to see more results. If a tool is reported unavailable or unknown, refresh discovery before retrying.\n\
             5. If a call's outcome is uncertain (for example it timed out), inspect the state it would have changed before retrying; never blindly repeat a mutation.",
            discover = c.discover,
            describe = c.describe,
            call = c.call,
            groups = c.list_groups,
            list = c.list_tools,
        ),
        Profile::Flat => format!(
            "More tools are available than are listed. When you need a capability that is not in your current tools, call {search} with a description of what you need before concluding it is unavailable, then call the returned tool with {call} by its name and an arguments object that matches its schema. Tools found stay callable without searching again. If a tool is reported unknown, search again. If a call's outcome is uncertain, inspect the state it would have changed before retrying; never blindly repeat a mutation.",
            search = c.search,
            call = c.call,
        ),
    }
}
