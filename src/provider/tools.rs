//! The model tools as a provider's tools parameter: exactly the JSON value its API takes
//! (Chat Completions `tools`, Responses `tools`, Messages `tools`, Gemini `tools`, the `tools`
//! of an MCP `tools/list` result). Deterministic: the same tools give the same bytes.

use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{Format, gemini_name};
use crate::catalog::adapt::Adapted;

/// Anthropic's limit on tools marked `defer_loading` in one request.
pub const MAX_DEFERRED_ANTHROPIC: usize = 10_000;

/// One tool to render.
pub struct ToolSpec<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// The tool's own input schema.
    pub schema: &'a Value,
    pub adapted: Arc<Adapted>,
    /// Loaded by the provider only when a tool search references it.
    pub deferred: bool,
    /// The client-executed tool search of deferred loading (Responses: a `tool_search`
    /// tool, not a function).
    pub search: bool,
}

/// The tools parameter, and what the host should know about it.
pub struct Rendered {
    pub json: String,
    pub diagnostics: Vec<String>,
}

#[derive(Serialize)]
struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    name: &'a str,
    description: &'a str,
    parameters: &'a RawValue,
    strict: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    defer_loading: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ResponsesTool<'a> {
    Function(Function<'a>),
    Search(ToolSearch<'a>),
}

#[derive(Serialize)]
struct ToolSearch<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    execution: &'static str,
    description: &'a str,
    parameters: &'a RawValue,
}

#[derive(Serialize)]
struct AnthropicTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a RawValue,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    defer_loading: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GeminiDeclaration<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters_json_schema: Option<&'a RawValue>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct McpTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a RawValue,
}

/// Renders the tools in the format's shape.
pub fn tools_json(format: Format, tools: &[ToolSpec]) -> Rendered {
    let mut diagnostics = Vec::new();
    let schemas: Vec<Box<RawValue>> = tools.iter().map(|t| raw(&object_root(t.schema))).collect();
    let json = match format {
        Format::OpenAiChat | Format::OpenAiResponses => {
            let strict: Vec<Option<Box<RawValue>>> = tools
                .iter()
                .map(|t| match &t.adapted.strict {
                    Ok(s) => Some(RawValue::from_string(s.clone()).expect("adapted schemas are JSON")),
                    Err(why) => {
                        diagnostics.push(format!("tool {:?} is offered non-strict: {why}", t.name));
                        None
                    }
                })
                .collect();
            let function = |i: usize, kind: Option<&'static str>| {
                let t = &tools[i];
                Function {
                    kind,
                    name: t.name,
                    description: t.description,
                    parameters: strict[i].as_deref().unwrap_or(&schemas[i]),
                    strict: strict[i].is_some(),
                    defer_loading: t.deferred,
                }
            };
            if format == Format::OpenAiChat {
                let list: Vec<ChatTool> = tools.iter().enumerate().map(|(i, _)| ChatTool { kind: "function", function: function(i, None) }).collect();
                serde_json::to_string(&list)
            } else {
                let list: Vec<ResponsesTool> = tools
                    .iter()
                    .enumerate()
                    .map(|(i, t)| match t.search {
                        true => ResponsesTool::Search(ToolSearch {
                            kind: "tool_search",
                            execution: "client",
                            description: t.description,
                            parameters: &schemas[i],
                        }),
                        false => ResponsesTool::Function(function(i, Some("function"))),
                    })
                    .collect();
                serde_json::to_string(&list)
            }
        }
        Format::Anthropic => {
            let deferred = tools.iter().filter(|t| t.deferred).count();
            if deferred > MAX_DEFERRED_ANTHROPIC {
                diagnostics.push(format!(
                    "{deferred} tools are marked defer_loading, over Anthropic's limit of {MAX_DEFERRED_ANTHROPIC}: the API will refuse this list; narrow the agent's groups"
                ));
            }
            let list: Vec<AnthropicTool> = tools
                .iter()
                .enumerate()
                .map(|(i, t)| AnthropicTool { name: t.name, description: t.description, input_schema: &schemas[i], defer_loading: t.deferred })
                .collect();
            serde_json::to_string(&list)
        }
        Format::Gemini => {
            let subset: Vec<Option<Box<RawValue>>> = tools
                .iter()
                .map(|t| {
                    let cut: Vec<&String> = t
                        .adapted
                        .gemini_notes
                        .iter()
                        .filter(|n| n.starts_with("recursive ") || n.starts_with("unresolved ") || n.starts_with("unsupported "))
                        .collect();
                    if !cut.is_empty() {
                        let cut: Vec<&str> = cut.iter().map(|s| s.as_str()).collect();
                        diagnostics.push(format!(
                            "tool {:?} is offered with parametersJsonSchema: Gemini's schema subset cannot hold it ({})",
                            t.name,
                            cut.join("; ")
                        ));
                        return None;
                    }
                    Some(RawValue::from_string(t.adapted.gemini.clone()).expect("adapted schemas are JSON"))
                })
                .collect();
            let names: Vec<_> = tools.iter().map(|t| gemini_name(t.name)).collect();
            let declarations: Vec<GeminiDeclaration> = tools
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let empty = !t.adapted.gemini_parameters;
                    GeminiDeclaration {
                        name: &names[i],
                        description: t.description,
                        // A function without parameters declares none.
                        parameters: if empty { None } else { subset[i].as_deref() },
                        parameters_json_schema: if subset[i].is_none() { Some(&schemas[i]) } else { None },
                    }
                })
                .collect();
            if declarations.is_empty() {
                Ok("[]".to_string())
            } else {
                serde_json::to_string(&[serde_json::json!({ "functionDeclarations": declarations })])
            }
        }
        Format::Mcp => {
            let list: Vec<McpTool> =
                tools.iter().enumerate().map(|(i, t)| McpTool { name: t.name, description: t.description, input_schema: &schemas[i] }).collect();
            serde_json::to_string(&list)
        }
    };
    Rendered { json: json.expect("tool lists serialize"), diagnostics }
}

/// Every provider wants an object schema with `"type": "object"` at its root; toolrouter
/// takes a root without a type as an object.
fn object_root(schema: &Value) -> std::borrow::Cow<'_, Value> {
    match schema.as_object() {
        Some(o) if o.contains_key("type") => std::borrow::Cow::Borrowed(schema),
        Some(o) => {
            let mut out = Map::with_capacity(o.len() + 1);
            out.insert("type".into(), Value::String("object".into()));
            out.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
            std::borrow::Cow::Owned(Value::Object(out))
        }
        None => std::borrow::Cow::Owned(serde_json::json!({"type": "object"})),
    }
}

fn raw(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).expect("a schema serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_anthropics_limit_of_deferred_tools_the_diagnostics_say_so() {
        let schema = serde_json::json!({"type": "object"});
        let adapted = Arc::new(Adapted::of(&schema));
        let names: Vec<String> = (0..=MAX_DEFERRED_ANTHROPIC).map(|i| format!("t{i}")).collect();
        let spec =
            |name: &'static str, deferred| ToolSpec { name, description: "", schema: &schema, adapted: adapted.clone(), deferred, search: false };
        let mut specs = vec![spec("search", false)];
        specs.extend(names.iter().map(|n| ToolSpec { name: n, ..spec("", true) }));
        let r = tools_json(Format::Anthropic, &specs);
        assert_eq!(r.diagnostics.len(), 1, "{:?}", r.diagnostics);
        assert!(r.diagnostics[0].starts_with("10001 tools are marked defer_loading, over Anthropic's limit of 10000"), "{:?}", r.diagnostics);
        specs.pop();
        assert!(tools_json(Format::Anthropic, &specs).diagnostics.is_empty(), "at the limit: nothing to say");
    }
}
