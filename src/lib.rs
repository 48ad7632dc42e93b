//! toolrouter: routes LLM tool calls (see README.md and SPEC).
pub mod api;
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
pub mod pb;
pub mod registry;
pub mod search;
pub mod server;
pub mod store;
pub mod telemetry;
