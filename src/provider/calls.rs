//! The model's tool-call parts, as the provider returned them, read into calls. Parts that
//! are not tool calls (text, thinking, server tools) are skipped; a tool-call part that is
//! not the format's shape is refused with its path, never guessed at.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{Format, ShapeError, from_gemini_name};
use crate::call::ToolCall;

/// The prefix of the ids toolrouter makes for Gemini calls that came without one: derived
/// from the call, so the same parts sent again are the same calls (exactly-once holds).
pub const GEMINI_ID_PREFIX: &str = "gemini-auto-";

/// The `_meta` key an MCP `tools/call` names its call id with.
pub const MCP_CALL_ID_META: &str = "io.toolrouter/tool_call_id";

/// The tool name a Responses `tool_search_call` (the client-executed tool search) is read
/// with: no tool can have it (tool names are letters, digits, `_` and `-`).
pub const RESPONSES_TOOL_SEARCH: &str = "<tool_search_call>";

/// Reads `text` (see the proto's `provider_calls_json` for the shapes each format takes).
pub fn parse_calls(format: Format, text: &str) -> Result<Vec<ToolCall>, ShapeError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ShapeError::new("", format!("not JSON: {e}")))?;
    let (parts, base) = parts(format, &value)?;
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let at = format!("{base}[{i}]");
        let obj = part.as_object().ok_or_else(|| ShapeError::new(&at, "a part is a JSON object"))?;
        let call = match format {
            Format::OpenAiChat => chat(obj, &at)?,
            Format::OpenAiResponses => responses(obj, &at)?,
            Format::Anthropic => anthropic(obj, &at)?,
            Format::Gemini => gemini(obj, &at, i, parts)?,
            Format::Mcp => mcp(obj, &at)?,
        };
        out.extend(call);
    }
    Ok(out)
}

/// The list of parts: the array itself, or the list inside the message (or response) object
/// the provider returned.
fn parts(format: Format, v: &Value) -> Result<(&Vec<Value>, &'static str), ShapeError> {
    if let Value::Array(a) = v {
        return Ok((a, ""));
    }
    let obj = v.as_object().ok_or_else(|| ShapeError::new("", "an array of parts, or the message that holds them"))?;
    let key = match format {
        Format::OpenAiChat => "tool_calls",
        Format::OpenAiResponses => "output",
        Format::Anthropic => "content",
        Format::Gemini => "parts",
        Format::Mcp => {
            return Err(ShapeError::new("", "an array of tools/call params"));
        }
    };
    match obj.get(key) {
        Some(Value::Array(a)) => Ok((a, field_path(key))),
        // A Chat message without tool calls; an Anthropic message whose content is a string.
        None | Some(Value::Null) if format == Format::OpenAiChat => Ok((empty(), "")),
        Some(Value::String(_)) if format == Format::Anthropic => Ok((empty(), "")),
        _ => Err(ShapeError::new(format!(".{key}"), format!("the message's {key} must be an array"))),
    }
}

fn field_path(key: &str) -> &'static str {
    match key {
        "tool_calls" => ".tool_calls",
        "output" => ".output",
        "content" => ".content",
        _ => ".parts",
    }
}

fn empty() -> &'static Vec<Value> {
    static EMPTY: Vec<Value> = Vec::new();
    &EMPTY
}

fn string<'a>(obj: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a str, ShapeError> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(ShapeError::new(format!("{at}.{key}"), "must not be empty")),
        Some(_) => Err(ShapeError::new(format!("{at}.{key}"), "must be a string")),
        None => Err(ShapeError::new(format!("{at}.{key}"), "is required")),
    }
}

/// Arguments as a JSON object's text (the provider's own string is kept as it came).
fn arguments_text(obj: &Map<String, Value>, key: &str, at: &str) -> Result<String, ShapeError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(ShapeError::new(format!("{at}.{key}"), "must be a string of JSON")),
        None => Err(ShapeError::new(format!("{at}.{key}"), "is required")),
    }
}

fn object_text(obj: &Map<String, Value>, key: &str, at: &str, required: bool) -> Result<String, ShapeError> {
    match obj.get(key) {
        Some(v @ Value::Object(_)) => Ok(v.to_string()),
        None | Some(Value::Null) if !required => Ok("{}".into()),
        None => Err(ShapeError::new(format!("{at}.{key}"), "is required")),
        Some(_) => Err(ShapeError::new(format!("{at}.{key}"), "must be an object")),
    }
}

fn plain(tool_call_id: &str, tool_name: &str, arguments_json: String) -> Option<ToolCall> {
    Some(ToolCall { tool_call_id: tool_call_id.into(), tool_name: tool_name.into(), arguments_json })
}

/// Chat `message.tool_calls[]`: `{id, type: "function", function: {name, arguments}}`.
fn chat(obj: &Map<String, Value>, at: &str) -> Result<Option<ToolCall>, ShapeError> {
    match obj.get("type") {
        Some(Value::String(t)) if t == "function" => {}
        // Custom tools and kinds yet to come are not ours.
        Some(Value::String(_)) => return Ok(None),
        _ => return Err(ShapeError::new(format!("{at}.type"), "must be \"function\"")),
    }
    let id = string(obj, "id", at)?;
    let f = match obj.get("function") {
        Some(Value::Object(f)) => f,
        _ => return Err(ShapeError::new(format!("{at}.function"), "must be an object {name, arguments}")),
    };
    let fat = format!("{at}.function");
    Ok(plain(id, string(f, "name", &fat)?, arguments_text(f, "arguments", &fat)?))
}

/// Responses output items: `function_call {call_id, name, arguments}`, and the client
/// tool search's `tool_search_call {call_id, execution: "client", arguments}`.
fn responses(obj: &Map<String, Value>, at: &str) -> Result<Option<ToolCall>, ShapeError> {
    match obj.get("type").and_then(Value::as_str) {
        Some("function_call") => Ok(plain(string(obj, "call_id", at)?, string(obj, "name", at)?, arguments_text(obj, "arguments", at)?)),
        Some("tool_search_call") if obj.get("execution").and_then(Value::as_str) == Some("client") => {
            let id = match obj.get("call_id") {
                Some(Value::String(s)) if !s.is_empty() => s.as_str(),
                _ => string(obj, "id", at)?,
            };
            let arguments = object_text(obj, "arguments", at, true)?;
            Ok(plain(id, RESPONSES_TOOL_SEARCH, arguments))
        }
        Some(_) => Ok(None),
        None => Err(ShapeError::new(format!("{at}.type"), "is required (an output item's type)")),
    }
}

/// Anthropic content blocks: `tool_use {id, name, input}`.
fn anthropic(obj: &Map<String, Value>, at: &str) -> Result<Option<ToolCall>, ShapeError> {
    match obj.get("type").and_then(Value::as_str) {
        Some("tool_use") => Ok(plain(string(obj, "id", at)?, string(obj, "name", at)?, object_text(obj, "input", at, true)?)),
        Some(_) => Ok(None),
        None => Err(ShapeError::new(format!("{at}.type"), "is required (a content block's type)")),
    }
}

/// Gemini parts: `{functionCall: {id?, name, args?}}` (or the SDKs' `function_call`).
fn gemini(obj: &Map<String, Value>, at: &str, index: usize, all: &[Value]) -> Result<Option<ToolCall>, ShapeError> {
    let (key, fc) = match (obj.get("functionCall"), obj.get("function_call")) {
        (Some(fc), _) => ("functionCall", fc),
        (None, Some(fc)) => ("function_call", fc),
        (None, None) => return Ok(None),
    };
    let fat = format!("{at}.{key}");
    let fc = fc.as_object().ok_or_else(|| ShapeError::new(&fat, "must be an object {name, args}"))?;
    let name = from_gemini_name(string(fc, "name", &fat)?);
    let args = object_text(fc, "args", &fat, false)?;
    let id = match fc.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => gemini_id(index, name, &args, all),
        Some(_) => return Err(ShapeError::new(format!("{fat}.id"), "must be a string")),
    };
    Ok(plain(&id, name, args))
}

/// A Gemini call without an id: named by the response's thought signature (unique to a
/// response, when the model thinks), its place among the parts, its name and arguments.
fn gemini_id(index: usize, name: &str, args: &str, all: &[Value]) -> String {
    let signature = all.iter().find_map(|p| p.get("thoughtSignature").or_else(|| p.get("thought_signature")).and_then(Value::as_str)).unwrap_or("");
    let mut h = Sha256::new();
    for piece in [signature, &index.to_string(), name, args] {
        h.update((piece.len() as u64).to_le_bytes());
        h.update(piece.as_bytes());
    }
    let digest = h.finalize();
    format!("{GEMINI_ID_PREFIX}{}", digest[..12].iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// MCP `tools/call` params: `{name, arguments?, _meta?}`; the call id, if any, is in
/// `_meta["io.toolrouter/tool_call_id"]`.
fn mcp(obj: &Map<String, Value>, at: &str) -> Result<Option<ToolCall>, ShapeError> {
    // A whole JSON-RPC request is taken for its params.
    if let Some(method) = obj.get("method") {
        if method != "tools/call" {
            return Ok(None);
        }
        let params = obj.get("params").and_then(Value::as_object).ok_or_else(|| ShapeError::new(format!("{at}.params"), "must be an object"))?;
        return mcp(params, &format!("{at}.params"));
    }
    let id = match obj.get("_meta").and_then(|m| m.get(MCP_CALL_ID_META)) {
        Some(Value::String(s)) => s.as_str(),
        None => "",
        Some(_) => return Err(ShapeError::new(format!("{at}._meta.{MCP_CALL_ID_META}"), "must be a string")),
    };
    Ok(plain(id, string(obj, "name", at)?, object_text(obj, "arguments", at, false)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(format: Format, text: &str) -> Vec<ToolCall> {
        parse_calls(format, text).unwrap()
    }

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall { tool_call_id: id.into(), tool_name: name.into(), arguments_json: args.into() }
    }

    #[test]
    fn each_format_reads_its_tool_calls_and_skips_other_parts() {
        let chat = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}},{"id":"c2","type":"custom","custom":{"name":"g","input":"x"}}]}"#;
        assert_eq!(calls(Format::OpenAiChat, chat), vec![call("c1", "a", r#"{"x":1}"#)]);
        let responses = r#"[{"type":"reasoning","id":"r"},{"type":"function_call","id":"fc","call_id":"c1","name":"a","arguments":"{}"}]"#;
        assert_eq!(calls(Format::OpenAiResponses, responses), vec![call("c1", "a", "{}")]);
        let anthropic = r#"[{"type":"text","text":"hm"},{"type":"tool_use","id":"t1","name":"a","input":{"x":1}}]"#;
        assert_eq!(calls(Format::Anthropic, anthropic), vec![call("t1", "a", r#"{"x":1}"#)]);
        let gemini = r#"{"role":"model","parts":[{"text":"hm"},{"functionCall":{"id":"g1","name":"_1a","args":{"x":1}}}]}"#;
        assert_eq!(calls(Format::Gemini, gemini), vec![call("g1", "1a", r#"{"x":1}"#)]);
        let mcp = r#"[{"name":"a","arguments":{"x":1},"_meta":{"io.toolrouter/tool_call_id":"m1"}},{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b"}}]"#;
        assert_eq!(calls(Format::Mcp, mcp), vec![call("m1", "a", r#"{"x":1}"#), call("", "b", "{}")]);
    }

    #[test]
    fn a_gemini_call_without_an_id_gets_the_same_id_each_time_it_is_sent() {
        let parts = r#"[{"functionCall":{"name":"a","args":{"x":1}}},{"functionCall":{"name":"a","args":{"x":1}}}]"#;
        let first = calls(Format::Gemini, parts);
        assert_eq!(first, calls(Format::Gemini, parts));
        assert!(first[0].tool_call_id.starts_with(GEMINI_ID_PREFIX));
        assert_ne!(first[0].tool_call_id, first[1].tool_call_id, "two identical calls in one response are two calls");
        let signed = r#"[{"functionCall":{"name":"a","args":{"x":1}},"thoughtSignature":"c2ln"},{"functionCall":{"name":"a","args":{"x":1}}}]"#;
        assert_ne!(calls(Format::Gemini, signed)[0].tool_call_id, first[0].tool_call_id, "another response is another call");
    }

    #[test]
    fn a_tool_call_part_of_the_wrong_shape_is_refused_with_its_path() {
        for (format, text, path) in [
            (Format::OpenAiChat, r#"[{"id":"c1","type":"function","function":{"name":"a","arguments":{"x":1}}}]"#, "[0].function.arguments"),
            (Format::OpenAiChat, r#"[{"id":"c1","function":{"name":"a","arguments":"{}"}}]"#, "[0].type"),
            (Format::OpenAiResponses, r#"{"output":[{"type":"function_call","name":"a","arguments":"{}"}]}"#, ".output[0].call_id"),
            (Format::Anthropic, r#"{"content":[{"type":"text"},{"type":"tool_use","id":"t","name":"a","input":"x"}]}"#, ".content[1].input"),
            (Format::Gemini, r#"[{"functionCall":{"args":{}}}]"#, "[0].functionCall.name"),
            (Format::Mcp, r#"[{"arguments":{}}]"#, "[0].name"),
            (Format::Anthropic, r#""tool_use""#, ""),
            (Format::Gemini, r#"[1]"#, "[0]"),
        ] {
            let e = parse_calls(format, text).unwrap_err();
            assert_eq!(e.path, path, "{format:?} {text}: {e:?}");
        }
    }

    #[test]
    fn a_client_tool_search_call_is_a_call_of_the_search_tool() {
        let items = r#"[{"type":"tool_search_call","id":"ts","call_id":"c9","execution":"client","arguments":{"query":"crm"},"status":"completed"},{"type":"tool_search_call","id":"ts2","execution":"server","arguments":{}}]"#;
        assert_eq!(calls(Format::OpenAiResponses, items), vec![call("c9", RESPONSES_TOOL_SEARCH, r#"{"query":"crm"}"#)]);
    }
}
