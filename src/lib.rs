//! toolrouter: routes LLM tool calls (see README.md and SPEC).
pub mod api;
pub mod auth;
pub mod cache;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod demo;
pub mod error;
pub mod eval;
pub mod http;
pub mod invoke;
pub mod mcp;
pub mod outbound;
pub mod pb;
pub mod registry;
pub mod search;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod tls;

/// Lets the other tasks of a current-thread test runtime run until they wait.
#[cfg(test)]
pub(crate) async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}
