//! Sending a validated call to its source (SPEC §7): in its `execute_tool` span, retried only
//! when the tool is idempotent and the request surely did not run, with each way an
//! execution can end turned into the model's reply.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::Router;
use crate::call::{ModelFault, Reply, RunContext, ToolResult, Unavailable};
use crate::catalog::{Catalog, SourceKind};
use crate::upstream::{Execution, Request, SourceKey};

/// One validated call of one catalog tool, as the invoke path hands it to execution.
pub struct Invocation<'a> {
    pub tenant: &'a str,
    pub agent_id: &'a str,
    pub run: &'a RunContext,
    pub catalog: &'a Catalog,
    pub tool: u32,
    pub arguments_json: &'a str,
    pub tool_call_id: &'a str,
}

impl Router {
    /// Executes a validated call in its `execute_tool` span; a success counts for
    /// auto-pinning.
    pub(super) async fn execute(&self, inv: &Invocation<'_>) -> Reply {
        let tool = inv.catalog.tool(inv.tool);
        let source = &inv.catalog.sources[tool.source];
        let tool_type = match source.kind {
            SourceKind::Mcp(_) => "extension",
            SourceKind::Function(_) | SourceKind::Client(_) => "function",
        };
        let span = crate::telemetry::execute_tool_span(
            &tool.name,
            tool_type,
            &source.id,
            inv.tool_call_id,
            inv.arguments_json,
            crate::telemetry::trace_arguments(),
        );
        let reply = crate::telemetry::in_span(self.execute_on_source(inv), &span).await;
        match &reply {
            // The tool ran and failed: its own error, not one toolrouter found.
            Reply::Fault(ModelFault::ExecutorStatus { .. } | ModelFault::ToolError { .. }) => {
                crate::telemetry::record_tool_error(&span, "tool_error")
            }
            Reply::Fault(f) => crate::telemetry::record_tool_error(&span, f.code()),
            Reply::Result(r) if r.is_error => crate::telemetry::record_tool_error(&span, "tool_error"),
            Reply::Result(_) => self.count_use(inv),
        }
        reply
    }

    async fn execute_on_source(&self, inv: &Invocation<'_>) -> Reply {
        let tool = inv.catalog.tool(inv.tool);
        let source = &inv.catalog.sources[tool.source];
        let key = SourceKey { tenant: inv.tenant.to_string(), agent_id: inv.agent_id.to_string(), source_id: source.id.clone() };
        let request = Request {
            key: &key,
            source: &source.kind,
            tool: &tool.local,
            arguments_json: inv.arguments_json,
            tool_call_id: inv.tool_call_id,
            run: inv.run,
            timeout: tool.timeout,
        };
        let retries = if tool.idempotent { self.upstream.config().max_retries } else { 0 };
        let name = || tool.name.clone();
        let mut attempt = 0;
        loop {
            let started = Instant::now();
            // Boxed: the client's future is most of a call's state, and every future above
            // it would otherwise hold (and move) a copy of its size.
            let execution = Box::pin(self.upstream.execute(request)).await;
            if execution.reached() {
                let kind = if matches!(source.kind, SourceKind::Mcp(_)) { "mcp" } else { "function" };
                crate::telemetry::metrics::executor_call(kind, started.elapsed());
            }
            return match execution {
                Execution::Done { content_json, is_error } => {
                    // A result that is not JSON reaches the model as a JSON string.
                    let content_json = if serde_json::from_str::<serde::de::IgnoredAny>(&content_json).is_ok() {
                        content_json
                    } else {
                        Value::String(content_json).to_string()
                    };
                    ToolResult { content_json, is_error }.into()
                }
                Execution::Status { code, message } => ModelFault::ExecutorStatus { code, message }.into(),
                Execution::ProtocolError(message) => ModelFault::ToolError { message }.into(),
                // It ran: stored as its outcome, so a retry never runs it again.
                Execution::TooLarge { size } => {
                    let limit = self.upstream.config().max_result_bytes;
                    ModelFault::ResultTooLarge { tool: name(), size: size.unwrap_or(limit + 1), limit }.into()
                }
                Execution::Busy => ModelFault::Busy { tool: name() }.into(),
                Execution::NotSent(e) if attempt < retries => {
                    attempt += 1;
                    tracing::debug!(tool = %tool.name, attempt, error = %e, "retrying idempotent call that was not sent");
                    tokio::time::sleep(backoff(attempt)).await;
                    continue;
                }
                Execution::NotSent(_) => ModelFault::Unavailable { tool: name(), reason: Unavailable::Unreachable }.into(),
                Execution::TimedOut if tool.idempotent => ModelFault::Timeout { tool: name() }.into(),
                Execution::TimedOut => ModelFault::uncertain(&tool.name, "it did not answer before its deadline").into(),
                Execution::Lost(e) if tool.idempotent => ModelFault::Unavailable { tool: name(), reason: Unavailable::FailedBeforeAnswer(e) }.into(),
                Execution::Lost(_) => ModelFault::uncertain(&tool.name, "the connection was lost after the call was sent").into(),
                // Not run: the user's token is missing or was refused (and forgotten). The invoke
                // path turns this into a consent record; elsewhere the model is told to call again.
                Execution::ConsentRequired | Execution::Unauthorized => {
                    ModelFault::ConsentRequired { tool: name(), consent_url: String::new(), deferred_id: String::new() }.into()
                }
                Execution::NoAuthorization(why) => ModelFault::Unavailable { tool: name(), reason: Unavailable::NoAuthorization(why) }.into(),
                Execution::Vanished => {
                    // Discovery must stop offering it: prepare the listings again.
                    self.registry.invalidate_listings(inv.tenant, inv.agent_id);
                    ModelFault::Unavailable { tool: name(), reason: Unavailable::Vanished }.into()
                }
            };
        }
    }
}

/// Jittered exponential backoff between retries of a call that was not sent.
fn backoff(attempt: u32) -> Duration {
    let base = 20u64 << attempt.min(6);
    Duration::from_millis(base + rand::random::<u64>() % base)
}
