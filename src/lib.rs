//! toolrouter: routes LLM tool calls (see README.md and SPEC). The modules, in the order a
//! call flows through them:
//!
//! - edges: [`api`] (gRPC services), [`http`] (health, metrics, the MCP endpoint), with
//!   [`auth`] (who is calling), [`listen`] (connection limits) and [`tls`] on the listeners;
//! - [`admission`]: the caller's tenant, the run quota, in-flight accounting, the deadline;
//! - [`invoke`]: runs, routing, exactly-once, deferral, execution;
//! - [`upstream`] (executors and MCP servers, through [`outbound`]) and [`store`];
//! - [`registry`] (versions and their compiled catalogs), [`control`] (the model-facing
//!   control tools), [`provider`] (providers' wire shapes), [`catalog`] and [`search`].
//!
//! Shared below them: [`call`] (a call and what goes back), [`error`] (the one error
//! vocabulary), [`telemetry`], [`clock`], [`mem`] (heap sizes), [`threads`] (work split
//! across threads), [`pb`] (generated code).
//! Above them: [`config`], [`server`] (wiring and shutdown) and [`cli`].

pub mod api;
pub mod auth;
pub mod http;
pub mod listen;
pub mod tls;

pub mod admission;

pub mod invoke;

pub mod outbound;
pub mod store;
pub mod upstream;

pub mod cache;
pub mod catalog;
pub mod control;
pub mod provider;
pub mod registry;
pub mod search;

pub mod call;
pub mod clock;
pub mod error;
pub mod mem;
pub mod pb;
pub mod telemetry;
pub mod threads;

pub mod cli;
pub mod config;
pub mod demo;
pub mod server;

/// Lets the other tasks of a current-thread test runtime run until they wait.
#[cfg(test)]
pub(crate) async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}
