//! toolrouter: routes LLM tool calls (see README.md and SPEC).
pub mod catalog;
pub mod error;
pub mod pb;
pub mod search;
pub mod control;
pub mod store;
pub mod clock;
pub mod registry;
pub mod invoke;
pub mod api;
pub mod config;
pub mod demo;
pub mod http;
pub mod server;
pub mod cli;
pub mod telemetry;
