//! MCP both ways (SPEC §6, §7): MCP servers as tool sources (`client`), and an MCP endpoint
//! per agent definition on the HTTP listener (`endpoint`).

pub mod client;
pub mod endpoint;
pub mod secrets;

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub use client::{Lister, McpClientConfig, McpClients};
pub use endpoint::{EndpointGuard, McpEndpointConfig, routes};
pub use secrets::{Secret, SecretSource, Secrets};

/// The W3C trace context of the current span (`traceparent`, `tracestate`), empty when
/// there is no sampled span.
pub fn trace_headers() -> HashMap<String, String> {
    let cx = tracing::Span::current().context();
    let mut out = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut out);
    out
}

/// Does the catalog have MCP sources (whose tools can change upstream)?
pub fn has_mcp(catalog: &crate::catalog::Catalog) -> bool {
    catalog.sources.iter().any(|s| matches!(s.kind, crate::catalog::SourceKind::Mcp(_)))
}
