//! The vocabulary of one model tool call: what arrives (the call and the run it belongs to)
//! and what goes back (the tool's answer, or a [`ModelFault`] toolrouter found). Faults stay
//! typed from where they arise to the edge, which renders them as the model's tool result
//! text (SPEC §4); nothing decides behaviour by reading result JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Caller {
    #[default]
    Model,
    Code,
}

/// The run a call belongs to, as the host names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunContext {
    pub run_id: String,
    pub identity: BTreeMap<String, String>,
    pub attributes: BTreeMap<String, String>,
    pub caller: Caller,
}

impl RunContext {
    /// The end user the run acts for (identity claim `user_id`), if any.
    pub fn user(&self) -> Option<&str> {
        self.identity.get("user_id").map(String::as_str).filter(|u| !u.is_empty())
    }
}

/// The model's call, as it came.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub arguments_json: String,
}

/// An answer given to the model as it is: a tool's own result (errors included: the tool
/// said so) or a discovery page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub content_json: String,
    pub is_error: bool,
}

impl ToolResult {
    pub fn ok(content_json: String) -> Self {
        Self { content_json, is_error: false }
    }
}

/// One schema violation of a call's arguments: where, and what the schema expected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgumentError {
    pub pointer: String,
    pub expected: String,
}

/// Why a tool could not be run (it was not run in any of these cases but the last).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// Its executor or server could not be reached.
    Unreachable,
    /// Its MCP server no longer lists it.
    Vanished,
    /// It was approved after its source stopped offering it.
    Removed,
    /// Its input schema does not compile (an operator must fix the definition).
    BrokenSchema(String),
    /// An idempotent call failed after it was sent; safe to retry.
    FailedBeforeAnswer(String),
    /// It acts as the user, and their authorization cannot be had (not configured, no user,
    /// its authorization server unreachable or refused): not sent.
    NoAuthorization(String),
}

/// A model-level fault (SPEC §4): the model gets a tool result with `is_error` that says what
/// was wrong and what to do next. Where the advice names control tools or depends on the
/// catalog, the message is written where the fault arises; the code is always typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelFault {
    /// Arguments that are not JSON, not an object, or do not match the parameters schema.
    InvalidArguments {
        message: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        errors: Vec<ArgumentError>,
    },
    UnknownGroup {
        message: String,
    },
    UnknownTool {
        message: String,
    },
    /// A full definition over the discovery byte budget.
    TooLarge {
        message: String,
    },
    NotCallableFromCode {
        tool: String,
    },
    /// The source's concurrency limit stayed full; not run.
    Busy {
        tool: String,
    },
    Unavailable {
        tool: String,
        reason: Unavailable,
    },
    /// An idempotent call passed its deadline; safe to retry.
    Timeout {
        tool: String,
    },
    /// A call that may or may not have taken effect.
    OutcomeUnknown {
        tool: String,
        why: String,
    },
    Denied {
        tool: String,
        message: String,
    },
    /// The executor answered with a gRPC status (its name, e.g. `NotFound`, is the code).
    ExecutorStatus {
        code: String,
        message: String,
    },
    /// The MCP server answered the call with a protocol error.
    ToolError {
        message: String,
    },
    /// A tool call id of the run used again for another tool or other arguments (the typed
    /// RPCs refuse it with FAILED_PRECONDITION instead).
    ToolCallIdReused {
        tool_call_id: String,
    },
    /// The tool ran, but its result was over the size limit and was dropped.
    ResultTooLarge {
        tool: String,
        size: usize,
        limit: usize,
    },
    /// The user must authorize toolrouter at the tool's server first (an OAuth MCP source):
    /// not run; the host shows `consent_url` to the user.
    ConsentRequired {
        tool: String,
        consent_url: String,
        deferred_id: String,
    },
}

impl ModelFault {
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        ModelFault::InvalidArguments { message: message.into(), errors: Vec::new() }
    }

    pub fn uncertain(tool: &str, why: &str) -> Self {
        ModelFault::OutcomeUnknown { tool: tool.to_string(), why: why.to_string() }
    }

    /// The `error` code the model sees.
    pub fn code(&self) -> &str {
        match self {
            ModelFault::InvalidArguments { .. } => "invalid_arguments",
            ModelFault::UnknownGroup { .. } => "unknown_group",
            ModelFault::UnknownTool { .. } => "unknown_tool",
            ModelFault::TooLarge { .. } => "too_large",
            ModelFault::NotCallableFromCode { .. } => "not_callable_from_code",
            ModelFault::Busy { .. } => "busy",
            ModelFault::Unavailable { .. } => "tool_unavailable",
            ModelFault::Timeout { .. } => "timeout",
            ModelFault::OutcomeUnknown { .. } => "outcome_unknown",
            ModelFault::Denied { .. } => "denied",
            ModelFault::ExecutorStatus { code, .. } => code,
            ModelFault::ToolError { .. } => "tool_error",
            ModelFault::ToolCallIdReused { .. } => "tool_call_id_reused",
            ModelFault::ResultTooLarge { .. } => "result_too_large",
            ModelFault::ConsentRequired { .. } => "consent_required",
        }
    }

    /// What was wrong and what to do next, written for the model.
    pub fn message(&self) -> String {
        match self {
            ModelFault::InvalidArguments { message, .. }
            | ModelFault::UnknownGroup { message }
            | ModelFault::UnknownTool { message }
            | ModelFault::TooLarge { message }
            | ModelFault::ExecutorStatus { message, .. }
            | ModelFault::ToolError { message } => message.clone(),
            ModelFault::NotCallableFromCode { tool } => format!("{tool} cannot be called from code. Call it as an ordinary tool call instead."),
            ModelFault::Busy { tool } => format!("{tool} is busy (too many calls at once). It was not run; try again later."),
            ModelFault::Unavailable { tool, reason } => match reason {
                Unavailable::Unreachable => {
                    format!("{tool} is unavailable right now (its executor could not be reached). It was not run; try again later.")
                }
                Unavailable::Vanished => {
                    format!("{tool} is no longer offered by its server. It was not run. Refresh discovery and use a tool it returns.")
                }
                Unavailable::Removed => format!("{tool} is no longer available. It was not run. Refresh discovery and use a tool it returns."),
                Unavailable::BrokenSchema(e) => format!("{tool} cannot be called: its schema does not compile ({e}). Tell the operator."),
                Unavailable::FailedBeforeAnswer(e) => format!("{tool} failed before answering ({e}). It is safe to retry."),
                Unavailable::NoAuthorization(e) => {
                    format!("{tool} acts as the user and cannot be used now: {e}. It was not run. Tell the user; retrying will not help.")
                }
            },
            ModelFault::Timeout { tool } => format!("{tool} did not answer in time. It is safe to retry."),
            ModelFault::OutcomeUnknown { tool, why } => format!(
                "The outcome of {tool} is unknown: {why}. It may or may not have taken effect. Inspect the state it would have changed before retrying; do not blindly repeat it."
            ),
            ModelFault::Denied { tool, message } if message.trim().is_empty() => {
                format!("The call to {tool} was denied. Do not retry it; ask the user how to proceed.")
            }
            ModelFault::Denied { tool, message } => format!("The call to {tool} was denied: {message}"),
            ModelFault::ToolCallIdReused { tool_call_id } => format!(
                "The tool call id {tool_call_id:?} was already used in this run for another call. Nothing was run. Give every tool call its own id."
            ),
            ModelFault::ConsentRequired { tool, consent_url, .. } if consent_url.is_empty() => {
                format!(
                    "{tool} was not run: the user's permission to use it is missing or was withdrawn. Call it again to get a consent link for the user."
                )
            }
            ModelFault::ConsentRequired { tool, .. } => format!(
                "{tool} needs the user's permission first: the user must open the consent link (consent_url) and allow access. It was not run. Tell the user to open the link, then call it again once they have."
            ),
            ModelFault::ResultTooLarge { tool, size, limit } => format!(
                "{tool} ran, but its result ({size} bytes) was over the {limit}-byte limit and was dropped. Do not call it again the same way: ask for less (a narrower query, a page, fewer fields)."
            ),
        }
    }

    /// The tool result the model receives: `{"error": code, "message": text, ...}`.
    pub fn render(&self) -> ToolResult {
        let mut obj = Map::new();
        obj.insert("error".into(), self.code().into());
        obj.insert("message".into(), self.message().into());
        if let ModelFault::InvalidArguments { errors, .. } = self
            && !errors.is_empty()
        {
            let errors = errors.iter().map(|e| serde_json::json!({"pointer": e.pointer, "expected": e.expected})).collect();
            obj.insert("errors".into(), Value::Array(errors));
        }
        if let ModelFault::ConsentRequired { consent_url, deferred_id, .. } = self
            && !consent_url.is_empty()
        {
            obj.insert("consent_url".into(), consent_url.clone().into());
            obj.insert("deferred_id".into(), deferred_id.clone().into());
        }
        ToolResult { content_json: Value::Object(obj).to_string(), is_error: true }
    }
}

/// What goes back to the model for a call that was answered: the answer as it is, or a fault
/// that the edge renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Result(ToolResult),
    Fault(ModelFault),
}

impl Reply {
    pub fn fault(&self) -> Option<&ModelFault> {
        match self {
            Reply::Fault(f) => Some(f),
            Reply::Result(_) => None,
        }
    }

    pub fn is_error(&self) -> bool {
        match self {
            Reply::Result(r) => r.is_error,
            Reply::Fault(_) => true,
        }
    }

    /// The model's tool result.
    pub fn render(&self) -> ToolResult {
        match self {
            Reply::Result(r) => r.clone(),
            Reply::Fault(f) => f.render(),
        }
    }

    /// Reads a stored reply; rows written before faults were typed hold a plain result.
    pub fn decode(text: &str) -> serde_json::Result<Reply> {
        serde_json::from_str::<Reply>(text).or_else(|_| serde_json::from_str::<ToolResult>(text).map(Reply::Result))
    }
}

impl From<ModelFault> for Reply {
    fn from(f: ModelFault) -> Self {
        Reply::Fault(f)
    }
}

impl From<ToolResult> for Reply {
    fn from(r: ToolResult) -> Self {
        Reply::Result(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_renders_as_an_error_result_with_its_code_first() {
        let r = ModelFault::Busy { tool: "crm__lookup".into() }.render();
        assert!(r.is_error);
        assert!(r.content_json.starts_with(r#"{"error":"busy","message":"crm__lookup is busy"#), "{}", r.content_json);
        let e =
            ModelFault::InvalidArguments { message: "m".into(), errors: vec![ArgumentError { pointer: "/a".into(), expected: "x".into() }] }.render();
        assert_eq!(e.content_json, r#"{"error":"invalid_arguments","message":"m","errors":[{"pointer":"/a","expected":"x"}]}"#);
    }

    #[test]
    fn stored_replies_of_either_form_read_back() {
        let fault = Reply::Fault(ModelFault::uncertain("t", "why"));
        assert_eq!(Reply::decode(&serde_json::to_string(&fault).unwrap()).unwrap(), fault);
        let old = r#"{"content_json":"{\"error\":\"denied\"}","is_error":true}"#;
        assert_eq!(Reply::decode(old).unwrap(), Reply::Result(ToolResult { content_json: r#"{"error":"denied"}"#.into(), is_error: true }));
    }
}
