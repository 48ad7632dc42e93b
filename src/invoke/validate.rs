//! Arguments validation with the target's own JSON Schema, reported for the model.

use serde_json::{Map, Value, json};

use crate::catalog::PreparedTool;
use crate::control::ToolResult;

/// At most this many schema errors are listed for the model.
const MAX_ERRORS: usize = 5;

/// Checks `arguments` against the tool's schema; on failure, the model-visible result naming
/// each failing JSON pointer and what the schema expected.
pub fn check_arguments(tool: &PreparedTool, arguments: &Value) -> Result<(), ToolResult> {
    let validator = match tool.validator() {
        Ok(v) => v,
        Err(e) => {
            return Err(ToolResult::error(
                "tool_unavailable",
                &format!("{} cannot be called: its schema does not compile ({e}). Tell the operator.", tool.name),
            ));
        }
    };
    let errors: Vec<Value> = validator
        .iter_errors(arguments)
        .take(MAX_ERRORS)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            json!({"pointer": if pointer.is_empty() { "/".to_string() } else { pointer }, "expected": e.masked().to_string()})
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let first = &errors[0];
    let message = format!(
        "The arguments do not match the parameters schema of {}: at {} {}. Fix the arguments (describe the tool for its complete schema if needed) and call again.",
        tool.name,
        first["pointer"].as_str().unwrap_or("/"),
        first["expected"].as_str().unwrap_or(""),
    );
    let mut extra = Map::new();
    extra.insert("errors".into(), Value::Array(errors));
    Err(ToolResult::error_with("invalid_arguments", &message, extra))
}
