//! The HTTP listener: liveness, readiness, Prometheus metrics, and the MCP endpoint of every
//! agent definition ([`mcp`]).

pub mod mcp;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::admission::Gate;
use crate::store::Store;
use crate::telemetry::metrics::Metrics;

#[derive(Clone)]
pub struct HttpState {
    pub store: Store,
    pub gate: Arc<Gate>,
    pub metrics: Metrics,
}

pub fn router(state: HttpState) -> Router {
    Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(ready)).route("/metrics", get(metrics)).with_state(state)
}

/// Ready while the store answers, and not once shutdown has begun.
async fn ready(State(s): State<HttpState>) -> (StatusCode, &'static str) {
    if s.gate.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    match s.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "store unreachable"),
    }
}

async fn metrics(State(s): State<HttpState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.render())
}
