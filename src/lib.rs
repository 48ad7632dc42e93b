//! toolrouter: routes LLM tool calls (see README.md and SPEC).
pub mod catalog;
pub mod eval;
pub mod pb;
pub mod search;
