//! JSON Schema handling: parsing the host's text, checking it is a schema, building validators.

use jsonschema::{PatternOptions, Validator};
use serde_json::Value;

const KNOWN_DRAFTS: &[&str] =
    &["https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema", "http://json-schema.org/draft-07/schema"];

/// Parses schema text; empty text means "any object".
pub fn parse(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(serde_json::json!({"type": "object"}));
    }
    serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
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
