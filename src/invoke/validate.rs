//! Arguments validation with the target's own JSON Schema, reported for the model.

use serde_json::Value;

use crate::call::{ArgumentError, ModelFault, Unavailable};
use crate::catalog::PreparedTool;

/// At most this many schema errors are listed for the model.
const MAX_ERRORS: usize = 5;

/// Checks `arguments` against the tool's schema; on failure, the fault naming each failing
/// JSON pointer and what the schema expected.
pub fn check_arguments(tool: &PreparedTool, arguments: &Value) -> Result<(), ModelFault> {
    let validator = tool.validator().map_err(|e| ModelFault::Unavailable { tool: tool.name.clone(), reason: Unavailable::BrokenSchema(e) })?;
    // The common case, without building errors (and their iterator) for nothing.
    if validator.is_valid(arguments) {
        return Ok(());
    }
    let errors: Vec<ArgumentError> = validator
        .iter_errors(arguments)
        .take(MAX_ERRORS)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            ArgumentError { pointer: if pointer.is_empty() { "/".to_string() } else { pointer }, expected: e.masked().to_string() }
        })
        .collect();
    let Some(first) = errors.first() else {
        return Ok(());
    };
    let message = format!(
        "The arguments do not match the parameters schema of {}: at {} {}. Fix the arguments (describe the tool for its complete schema if needed) and call again.",
        tool.name, first.pointer, first.expected,
    );
    Err(ModelFault::InvalidArguments { message, errors })
}
