//! The HTTP listener: liveness and readiness.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::store::Store;

pub fn router(store: Store) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(store)
}

async fn ready(State(store): State<Store>) -> (StatusCode, &'static str) {
    match store.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "store unreachable"),
    }
}
