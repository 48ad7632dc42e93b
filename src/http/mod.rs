//! The HTTP listener: liveness, readiness, Prometheus metrics, and the MCP endpoint of every
//! agent definition ([`mcp`]).

pub mod mcp;
pub mod oauth;
pub mod serve;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use sha2::Digest;

use crate::admission::Gate;
use crate::store::Store;
use crate::telemetry::metrics::Metrics;

#[derive(Clone)]
pub struct HttpState {
    pub store: Store,
    pub gate: Arc<Gate>,
    pub metrics: Metrics,
    /// The SHA-256 of the bearer token `/metrics` requires (`None`: open).
    pub metrics_token: Option<[u8; 32]>,
}

/// Probes, and `/metrics` when `with_metrics` (false when an admin listener serves it).
pub fn router(state: HttpState, with_metrics: bool) -> Router {
    let probes = Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(ready));
    let router = if with_metrics { probes.route("/metrics", get(metrics)) } else { probes };
    router.with_state(state)
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

async fn metrics(State(s): State<HttpState>, headers: axum::http::HeaderMap) -> axum::response::Response {
    if let Some(expected) = &s.metrics_token {
        let presented = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        // Compared as hashes: the comparison's time says nothing about the token.
        let digest: Option<[u8; 32]> = presented.map(|t| sha2::Sha256::digest(t.as_bytes()).into());
        if digest.as_ref() != Some(expected) {
            return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], crate::error::UNAUTHENTICATED_MESSAGE).into_response();
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.render()).into_response()
}
