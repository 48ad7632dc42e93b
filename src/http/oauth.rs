//! `/oauth/callback` (issue 17): where authorization servers send a user's browser back after
//! consent. The `state` names the consent (single use, expiring, bound to tenant, user,
//! source and deferred record); no credential is needed, and every refusal is a short page
//! that says what to do, never an internal detail or a token.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};

use crate::invoke::Router;
use crate::upstream::consent::CallbackError;

/// The callback's query: RFC 6749 §4.1.2 (`code`, `state`) or §4.1.2.1 (`error`), and
/// RFC 9207's `iss`.
#[derive(Debug, Default)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    iss: Option<String>,
}

impl Callback {
    fn parse(query: Option<&str>) -> Self {
        let mut c = Callback::default();
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let slot = match k.as_ref() {
                "code" => &mut c.code,
                "state" => &mut c.state,
                "error" => &mut c.error,
                "iss" => &mut c.iss,
                _ => continue,
            };
            slot.get_or_insert_with(|| v.into_owned());
        }
        c
    }
}

/// Longest `state` or `code` read (ours are 64 hex characters; codes are opaque but short).
const MAX_PARAM: usize = 4096;

pub fn routes(router: Arc<Router>) -> axum::Router {
    axum::Router::new().route("/oauth/callback", axum::routing::get(callback)).with_state(router)
}

fn page(status: http::StatusCode, title: &str, text: &str) -> Response {
    let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let (title, text) = (escape(title), escape(text));
    let body =
        format!("<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>");
    (status, [(http::header::CACHE_CONTROL, "no-store")], Html(body)).into_response()
}

async fn callback(State(router): State<Arc<Router>>, uri: http::Uri) -> Response {
    let q = Callback::parse(uri.query());
    let Some(state) = q.state.filter(|s| !s.is_empty() && s.len() <= MAX_PARAM) else {
        return page(
            http::StatusCode::BAD_REQUEST,
            "Not a consent",
            "This page is where an authorization server sends you back; it needs the state it was given.",
        );
    };
    let code = q.code.filter(|c| !c.is_empty() && c.len() <= MAX_PARAM);
    let error = q.error.map(|e| e.chars().filter(|c| c.is_ascii_graphic()).take(64).collect::<String>());
    match router.consent_callback(&state, code.as_deref(), error.as_deref(), q.iss.as_deref()).await {
        Ok(_) => page(http::StatusCode::OK, "Access granted", "You can close this window and go back to the assistant."),
        Err(e) => {
            let status = match e {
                CallbackError::Expired => http::StatusCode::GONE,
                CallbackError::Internal(_) => http::StatusCode::INTERNAL_SERVER_ERROR,
                _ => http::StatusCode::BAD_REQUEST,
            };
            if let CallbackError::Internal(m) = &e {
                tracing::error!(error = %m, "a consent callback failed");
                return page(status, "Something went wrong", "The authorization could not be completed. Start again from the assistant.");
            }
            page(status, "Access not granted", &e.to_string())
        }
    }
}
