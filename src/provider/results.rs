//! Results as what the host appends to the conversation, in the provider's shape.

use serde_json::{Value, json};

use super::calls::GEMINI_ID_PREFIX;
use super::{Format, gemini_name, result_text};
use crate::call::{ToolCall, ToolResult};

/// What answered a call.
pub enum Answer<'a> {
    Result(&'a ToolResult),
    /// A tool search's hits: the tools' names and, for Responses, their definitions as the
    /// tools parameter lists them (a JSON array).
    Found {
        names: &'a [String],
        tools_json: Option<&'a str>,
    },
}

/// One call's result: a Chat `role: tool` message, a Responses `function_call_output` (or
/// `tool_search_output`) item, an Anthropic `tool_result` block, a Gemini `functionResponse`
/// part, an MCP `CallToolResult`.
pub fn part(format: Format, call: &ToolCall, answer: &Answer) -> Value {
    let id = call.tool_call_id.as_str();
    match (format, answer) {
        (Format::OpenAiResponses, Answer::Found { tools_json, .. }) => {
            let tools: Value = tools_json.and_then(|t| serde_json::from_str(t).ok()).unwrap_or_else(|| json!([]));
            json!({"type": "tool_search_output", "call_id": id, "execution": "client", "status": "completed", "tools": tools})
        }
        (Format::Anthropic, Answer::Found { names, .. }) if !names.is_empty() => {
            let refs: Vec<Value> = names.iter().map(|n| json!({"type": "tool_reference", "tool_name": n})).collect();
            json!({"type": "tool_result", "tool_use_id": id, "content": refs})
        }
        _ => {
            let (content_json, is_error) = match answer {
                Answer::Result(r) => (r.content_json.clone(), r.is_error),
                Answer::Found { names, .. } => (found_text(names), false),
            };
            text_part(format, call, &content_json, is_error)
        }
    }
}

fn found_text(names: &[String]) -> String {
    if names.is_empty() {
        return json!("No tools matched. Search again with other words.").to_string();
    }
    json!({ "tools": names }).to_string()
}

fn text_part(format: Format, call: &ToolCall, content_json: &str, is_error: bool) -> Value {
    let id = call.tool_call_id.as_str();
    match format {
        Format::OpenAiChat => json!({"role": "tool", "tool_call_id": id, "content": result_text(content_json)}),
        Format::OpenAiResponses => json!({"type": "function_call_output", "call_id": id, "output": result_text(content_json)}),
        Format::Anthropic => {
            // Anthropic refuses an error result without content.
            let text = match result_text(content_json) {
                t if t.trim().is_empty() && is_error => "The tool failed without a message.".to_string(),
                t => t,
            };
            let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": text});
            if is_error {
                block["is_error"] = Value::Bool(true);
            }
            block
        }
        Format::Gemini => {
            // `response` is an object: the result under "output", or a fault under "error".
            let value = serde_json::from_str::<Value>(content_json).unwrap_or_else(|_| Value::String(content_json.to_string()));
            let response = if is_error { json!({ "error": value }) } else { json!({ "output": value }) };
            let mut fr = serde_json::Map::new();
            // An id toolrouter made up is not the model's: Gemini matches such calls by name.
            if !id.is_empty() && !id.starts_with(GEMINI_ID_PREFIX) {
                fr.insert("id".into(), json!(id));
            }
            fr.insert("name".into(), json!(gemini_name(&call.tool_name)));
            fr.insert("response".into(), response);
            json!({ "functionResponse": fr })
        }
        Format::Mcp => {
            let mut r = json!({"content": [{"type": "text", "text": result_text(content_json)}], "isError": is_error});
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(content_json) {
                r["structuredContent"] = v;
            }
            r
        }
    }
}

/// The parts of every finished call as what to append: Chat messages, Responses items,
/// Gemini parts and MCP results as arrays; Anthropic as one `user` message (null if none).
pub fn message(format: Format, parts: Vec<Value>) -> Value {
    match format {
        Format::Anthropic if parts.is_empty() => Value::Null,
        Format::Anthropic => json!({"role": "user", "content": parts}),
        _ => Value::Array(parts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall { tool_call_id: id.into(), tool_name: name.into(), arguments_json: "{}".into() }
    }

    #[test]
    fn a_result_renders_in_each_providers_shape() {
        let ok = ToolResult { content_json: r#"{"name":"Ada"}"#.into(), is_error: false };
        let c = call("c1", "crm__find");
        let a = Answer::Result(&ok);
        assert_eq!(part(Format::OpenAiChat, &c, &a), json!({"role": "tool", "tool_call_id": "c1", "content": r#"{"name":"Ada"}"#}));
        assert_eq!(part(Format::OpenAiResponses, &c, &a), json!({"type": "function_call_output", "call_id": "c1", "output": r#"{"name":"Ada"}"#}));
        assert_eq!(part(Format::Anthropic, &c, &a), json!({"type": "tool_result", "tool_use_id": "c1", "content": r#"{"name":"Ada"}"#}));
        assert_eq!(
            part(Format::Gemini, &c, &a),
            json!({"functionResponse": {"id": "c1", "name": "crm__find", "response": {"output": {"name": "Ada"}}}})
        );
        assert_eq!(
            part(Format::Mcp, &c, &a),
            json!({"content": [{"type": "text", "text": r#"{"name":"Ada"}"#}], "isError": false, "structuredContent": {"name": "Ada"}})
        );
    }

    #[test]
    fn plain_text_stays_text_and_errors_are_marked() {
        let text = ToolResult { content_json: r#""sunny""#.into(), is_error: true };
        let c = call("c1", "1weather");
        let a = Answer::Result(&text);
        assert_eq!(part(Format::Anthropic, &c, &a), json!({"type": "tool_result", "tool_use_id": "c1", "content": "sunny", "is_error": true}));
        assert_eq!(part(Format::Mcp, &c, &a), json!({"content": [{"type": "text", "text": "sunny"}], "isError": true}));
        assert_eq!(part(Format::Gemini, &c, &a), json!({"functionResponse": {"id": "c1", "name": "_1weather", "response": {"error": "sunny"}}}));
    }

    #[test]
    fn search_hits_are_tool_references_for_anthropic_and_loaded_tools_for_responses() {
        let names = vec!["crm__find".to_string()];
        let c = call("t1", "tool_search");
        let found = Answer::Found { names: &names, tools_json: Some(r#"[{"type":"function","name":"crm__find"}]"#) };
        assert_eq!(
            part(Format::Anthropic, &c, &found),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "tool_reference", "tool_name": "crm__find"}]})
        );
        assert_eq!(part(Format::OpenAiResponses, &c, &found)["tools"][0]["name"], "crm__find");
        assert_eq!(message(Format::Anthropic, vec![]), Value::Null);
    }
}
