//! JSON Schema handling: parsing the host's text, checking it is a schema, building validators.

use jsonschema::{PatternOptions, Validator};
use serde_json::Value;
use serde_json::value::RawValue;

const KNOWN_DRAFTS: &[&str] =
    &["https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema", "http://json-schema.org/draft-07/schema"];

/// Parses schema text; empty text means "any object".
pub fn parse(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(serde_json::json!({"type": "object"}));
    }
    serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
}

/// `text`, parsed as `value` by [`parse`], without the whitespace between tokens: the tokens
/// as declared (escapes and number forms kept), found in one pass over the bytes rather than
/// by serializing `value`. Text that repeats a key in an object (parsing kept one of them) and
/// empty text are serialized from `value` instead.
pub fn compact(text: &str, value: &Value) -> Box<RawValue> {
    let (minified, members) = without_whitespace(text);
    if minified.is_empty() || members != object_members(value) {
        return raw(serde_json::to_string(value).unwrap_or_default());
    }
    raw(minified)
}

/// [`compact`] of text known to be one JSON value that repeats no key in an object.
pub fn compact_unique(text: &str) -> Box<RawValue> {
    raw(without_whitespace(text).0)
}

/// `json` as a raw value (`{}` if it were not JSON, which the callers rule out).
fn raw(json: String) -> Box<RawValue> {
    RawValue::from_string(json).unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("valid JSON"))
}

/// JSON text without whitespace outside strings, and its count of object members (colons
/// outside strings).
fn without_whitespace(text: &str) -> (String, usize) {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let (mut members, mut at) = (0, 0);
    while at < bytes.len() {
        match bytes[at] {
            b' ' | b'\t' | b'\n' | b'\r' => at += 1,
            b'"' => {
                // To the closing quote: the first one not escaped (a backslash skips a byte).
                let start = at;
                at += 1;
                loop {
                    let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[at.min(bytes.len())..]) else {
                        at = bytes.len();
                        break;
                    };
                    at += found + 1;
                    if bytes[at - 1] == b'"' {
                        break;
                    }
                    at += 1;
                }
                out.extend_from_slice(&bytes[start..at]);
            }
            b => {
                members += usize::from(b == b':');
                out.push(b);
                at += 1;
            }
        }
    }
    // Whole strings and ASCII bytes were copied from valid UTF-8 at char boundaries.
    (String::from_utf8(out).unwrap_or_default(), members)
}

/// Members of every object in `value`.
fn object_members(value: &Value) -> usize {
    match value {
        Value::Object(map) => map.len() + map.values().map(object_members).sum::<usize>(),
        Value::Array(items) => items.iter().map(object_members).sum(),
        _ => 0,
    }
}

/// Checks that `schema` is a JSON Schema we can use offline: a known draft (2020-12 by
/// default; 2019-09 and 7 when declared with `$schema`), valid against its meta-schema, and
/// compilable (patterns, local `$ref`s).
pub fn check(schema: &Value) -> Result<(), String> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err("a JSON Schema is an object or a boolean".into());
    }
    if let Some(declared) = schema.get("$schema") {
        let uri = declared.as_str().ok_or("\"$schema\" must be a string")?;
        let uri = uri.trim_end_matches('#');
        if !KNOWN_DRAFTS.contains(&uri) {
            return Err(format!("unsupported \"$schema\" {uri:?}: use draft 2020-12, 2019-09 or 7"));
        }
    }
    jsonschema::meta::validate(schema).map_err(|e| format!("not a valid JSON Schema at {}: {}", e.instance_path(), e.masked()))?;
    build(schema).map(|_| ())
}

/// Checks that an input schema describes an object (tool arguments are always an object).
pub fn check_input(schema: &Value) -> Result<(), String> {
    check(schema)?;
    match schema.get("type") {
        None => Ok(()),
        Some(Value::String(t)) if t == "object" => Ok(()),
        Some(Value::Array(ts)) if ts.iter().any(|t| t == "object") => Ok(()),
        Some(_) => Err("an input schema must describe an object (\"type\": \"object\")".into()),
    }
}

/// Compiles a validator: offline (remote `$ref`s are refused) and with the linear-time regex
/// engine, since schemas come from tenants.
pub fn build(schema: &Value) -> Result<Validator, String> {
    jsonschema::options()
        .offline()
        .with_pattern_options(PatternOptions::regex())
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| format!("cannot compile the schema: {}", e.masked()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compacted(text: &str) -> String {
        let value = parse(text).expect("valid JSON");
        let compact = compact(text, &value);
        assert_eq!(serde_json::from_str::<Value>(compact.get()).expect("compact text is JSON"), value, "{text:?}");
        compact.get().to_owned()
    }

    #[test]
    fn compact_text_drops_whitespace_between_tokens_and_keeps_it_in_strings() {
        let text =
            " {\n  \"type\" : \"object\",\r\n\t\"properties\": { \"a b\": {\"description\": \" x : \\\" y \\\\\"}}, \"enum\": [ 1 , 2.50 , null ] } ";
        assert_eq!(compacted(text), r#"{"type":"object","properties":{"a b":{"description":" x : \" y \\"}},"enum":[1,2.50,null]}"#);
    }

    #[test]
    fn compact_text_keeps_escapes_and_non_ascii_as_declared() {
        assert_eq!(compacted(r#"{ "d": "caf\u00e9 \/ café", "e": "" }"#), r#"{"d":"caf\u00e9 \/ café","e":""}"#);
    }

    #[test]
    fn compact_text_of_a_repeated_key_is_the_parsed_value() {
        assert_eq!(compacted(r#"{"type": "string", "type": "object"}"#), r#"{"type":"object"}"#);
        assert_eq!(compacted(r#"{"a": {"k": 1, "k": 2}, "b": 3}"#), r#"{"a":{"k":2},"b":3}"#);
    }

    #[test]
    fn compact_text_of_empty_text_is_any_object() {
        assert_eq!(compacted("  "), r#"{"type":"object"}"#);
        assert_eq!(compacted(""), r#"{"type":"object"}"#);
    }
}
