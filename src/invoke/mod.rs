//! Invocation: routing model tool calls to executors, deferred records, exactly-once per
//! tool call id, runs and auto-pinning (SPEC §4, §6–§8).

pub mod executor;
pub mod router;
pub mod validate;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::control::ToolResult;
pub use router::{Resolution, Router, RouterConfig};

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

/// The model's call, as it came.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub arguments_json: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeferredKind {
    Approval,
    ClientExecution,
}

/// The complete definition of a call's target, kept with deferred records so hosts can show
/// what will run even after the version is gone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetDefinition {
    pub description: String,
    pub parameters_json_schema: String,
    pub output_schema_json: String,
    pub instructions: String,
    pub kind: String,
    pub requires_approval: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTarget {
    pub group: String,
    pub tool: String,
    pub name: String,
    pub source_id: String,
    pub arguments_json: String,
    pub definition: TargetDefinition,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredCall {
    pub deferred_id: String,
    pub kind: DeferredKind,
    pub target: CallTarget,
    pub original_call: ToolCall,
}

/// Exactly one of: a result for the model, or a deferred record for the host.
#[allow(clippy::large_enum_variant)] // boxing the common result would cost an allocation per call
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Result(ToolResult),
    Deferred(DeferredCall),
}

/// Where a deferred record is: waiting for the host (an approval or the client's result),
/// being carried out (a resolution was accepted; its result follows), or done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferredState {
    #[default]
    Pending,
    Executing,
    Resolved,
}

impl DeferredState {
    /// The store's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            DeferredState::Pending => "pending",
            DeferredState::Executing => "executing",
            DeferredState::Resolved => "resolved",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        [DeferredState::Pending, DeferredState::Executing, DeferredState::Resolved].into_iter().find(|s| s.as_str() == stored)
    }
}

/// A deferred record as stored and listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredRecord {
    pub call: DeferredCall,
    pub agent_id: String,
    pub version: u32,
    pub run: RunContext,
    /// Set when listed (the store's row says it); not part of the stored record.
    #[serde(default, skip_serializing)]
    pub state: DeferredState,
    pub resolution: String,
    pub result: Option<ToolResult>,
    pub create_time: i64,
    pub resolve_time: Option<i64>,
}
