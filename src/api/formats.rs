//! The provider formats on the gRPC edge: `ToolFormat` in, provider calls read, and results
//! rendered into `provider_json` / `provider_results_json` (issue 16).

use serde_json::Value;
use tonic::Status;

use super::status::invalid;
use crate::call::{Reply, ToolCall};
use crate::invoke::Outcome;
use crate::pb;
use crate::provider::results::{self, Answer};
use crate::provider::{Format, calls};

/// A request's `format` field (`path` names it in errors).
pub fn format(value: i32, path: &str) -> Result<Option<Format>, Status> {
    Ok(match pb::ToolFormat::try_from(value) {
        Ok(pb::ToolFormat::Unspecified) => None,
        Ok(pb::ToolFormat::OpenaiChat) => Some(Format::OpenAiChat),
        Ok(pb::ToolFormat::OpenaiResponses) => Some(Format::OpenAiResponses),
        Ok(pb::ToolFormat::Anthropic) => Some(Format::Anthropic),
        Ok(pb::ToolFormat::Gemini) => Some(Format::Gemini),
        Ok(pb::ToolFormat::Mcp) => Some(Format::Mcp),
        Err(_) => return Err(invalid(path, format!("unknown format {value}"))),
    })
}

/// The calls of `provider_calls_json`, in the format's shape; a part that is not is refused
/// with its path.
pub fn provider_calls(format: Option<Format>, text: &str) -> Result<Vec<ToolCall>, Status> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let Some(format) = format else {
        return Err(invalid("format", "name the provider format that provider_calls_json is in"));
    };
    calls::parse_calls(format, text)
        .map_err(|e| invalid(&format!("provider_calls_json{}", e.path), format!("not a {} tool-call part: {}", format.as_str(), e.message)))
}

/// One outcome's result in the provider's shape (none for a deferred call).
pub fn provider_part(format: Format, call: &ToolCall, outcome: &Outcome) -> Option<Value> {
    match outcome {
        Outcome::Result(r) => Some(results::part(format, call, &Answer::Result(r))),
        Outcome::Fault(f) => Some(results::part(format, call, &Answer::Result(&f.render()))),
        Outcome::Found(f) => Some(results::part(format, call, &Answer::Found { names: &f.names, tools_json: f.tools_json.as_deref() })),
        // The model is told to have the user consent; other deferred calls wait for the host.
        Outcome::Deferred(d) => d.consent_fault().map(|f| results::part(format, call, &Answer::Result(&f.render()))),
    }
}

/// A resolved record's result in the provider's shape, for the call the model made.
pub fn provider_reply(format: Format, call: &ToolCall, reply: &Reply) -> String {
    results::part(format, call, &Answer::Result(&reply.render())).to_string()
}

/// What to append to the conversation for the finished calls.
pub fn provider_results(format: Format, parts: Vec<Value>) -> String {
    results::message(format, parts).to_string()
}
