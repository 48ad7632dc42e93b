//! Authentication (SPEC §9): who is calling, and which tenant they act for.
//!
//! An [`Authenticator`] reads the `authorization: Bearer <key>` header of a request (gRPC
//! metadata or a plain HTTP request: it only sees an [`http::HeaderMap`]) and answers the
//! caller's [`Principal`]. Keys are kept as SHA-256 hashes only, loaded from a JSON file that
//! is re-read when it changes ([`keys`]); JWTs are checked against a JWKS file or URL ([`jwt`]).
//! With authentication off (local development) every
//! caller is the anonymous principal of tenant `default`.
//!
//! The gRPC side is [`grpc::GrpcAuth`]: it authenticates every call except health and
//! reflection, applies the per-tenant rate limit, and puts the principal in the request's
//! extensions, where the services read it.

pub mod grpc;
pub mod jwks_url;
pub mod jwt;
pub mod keys;
pub mod limits;
pub mod reload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use crate::admission::{DEFAULT_TENANT, Principal};
pub use grpc::GrpcAuth;
pub use keys::KeySet;

/// The identity claim that always carries the authenticated tenant.
pub const TENANT_CLAIM: &str = "tenant_id";

pub use crate::error::UNAUTHENTICATED_MESSAGE;

/// Why a request was refused. All become `UNAUTHENTICATED` with the same message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("{UNAUTHENTICATED_MESSAGE}")]
    Missing,
    #[error("{UNAUTHENTICATED_MESSAGE}")]
    Invalid,
    /// A JWT naming a key the JWKS URL did not list yet (perhaps one just added). A caller
    /// that can wait calls [`Authenticator::refresh_keys`] and authenticates again.
    #[error("{UNAUTHENTICATED_MESSAGE}")]
    UnknownKey,
}

/// How callers authenticate.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    /// The API key file (JSON array of `{"tenant", "sha256", "identity"}`); `None` = no keys.
    pub api_keys: Option<PathBuf>,
    /// Allow running without authentication on a non-loopback address.
    pub insecure_no_auth: bool,
    /// How often the key file is checked for changes (0 = the default, 1 s).
    pub reload_interval: Duration,
    /// JWT bearer tokens, checked when a token is not an API key.
    pub jwt: Option<jwt::JwtConfig>,
}

impl AuthConfig {
    pub fn reload_interval(&self) -> Duration {
        if self.reload_interval.is_zero() { Duration::from_secs(1) } else { self.reload_interval }
    }
}

/// Authenticates requests from their headers. Cheap to clone.
#[derive(Clone)]
pub struct Authenticator {
    keys: Option<Arc<KeySet>>,
    jwt: Option<Arc<jwt::JwtVerifier>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("enabled", &self.enabled()).finish()
    }
}

impl Authenticator {
    /// No authentication: every caller is [`Principal::anonymous`].
    pub fn off() -> Self {
        Self { keys: None, jwt: None }
    }

    /// From the configuration: loads the key file (it must be valid at start-up) and keeps
    /// re-reading it until `stop` is cancelled.
    pub async fn from_config(cfg: &AuthConfig, stop: CancellationToken) -> anyhow::Result<Self> {
        let keys = match &cfg.api_keys {
            None => None,
            Some(path) => Some(KeySet::load(path.clone(), cfg.reload_interval(), stop.clone()).await?),
        };
        let jwt = match &cfg.jwt {
            None => None,
            Some(j) => Some(jwt::JwtVerifier::load(j.clone(), cfg.reload_interval(), stop).await?),
        };
        Ok(Self { keys, jwt })
    }

    /// From a key set already loaded (tests, embedders).
    pub fn with_keys(keys: Arc<KeySet>) -> Self {
        Self { keys: Some(keys), jwt: None }
    }

    /// Is any credential required?
    pub fn enabled(&self) -> bool {
        self.keys.is_some() || self.jwt.is_some()
    }

    /// The caller of a request with these headers.
    pub fn authenticate(&self, headers: &http::HeaderMap) -> Result<Principal, AuthError> {
        if !self.enabled() {
            return Ok(Principal::anonymous());
        }
        let token = bearer_token(headers)?;
        if let Some(p) = self.keys.as_ref().and_then(|k| k.principal(token)) {
            return Ok(p);
        }
        // A JWT has three dot-separated parts; anything else can only have been a key.
        if let Some(jwt) = &self.jwt
            && token.bytes().filter(|&b| b == b'.').count() == 2
        {
            return jwt.verify(token).map_err(|r| match r {
                jwt::Rejection::UnknownKey => AuthError::UnknownKey,
                jwt::Rejection::Invalid => AuthError::Invalid,
            });
        }
        Err(AuthError::Invalid)
    }

    /// [`Authenticator::authenticate`] for callers that can wait: a JWT naming a key the
    /// JWKS URL did not list yet waits for the keys to be fetched again, then is checked
    /// once more (what the gRPC layer does).
    pub async fn authenticate_waiting(&self, headers: &http::HeaderMap) -> Result<Principal, AuthError> {
        match self.authenticate(headers) {
            Err(AuthError::UnknownKey) => {
                self.refresh_keys().await;
                self.authenticate(headers)
            }
            other => other,
        }
    }

    /// After [`AuthError::UnknownKey`]: fetches the issuer's keys again (rate-limited, one
    /// fetch shared by concurrent callers), so a token signed with a key the issuer has just
    /// added is accepted on its first use.
    pub async fn refresh_keys(&self) {
        if let Some(jwt) = &self.jwt {
            jwt.refresh_for_unknown_key().await;
        }
    }
}

/// The credential of `authorization: Bearer <token>` (scheme case-insensitive).
fn bearer_token(headers: &http::HeaderMap) -> Result<&str, AuthError> {
    let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthError::Missing)?;
    if values.next().is_some() {
        return Err(AuthError::Invalid);
    }
    let value = value.to_str().map_err(|_| AuthError::Invalid)?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::Invalid)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthError::Invalid);
    }
    Ok(token)
}

/// Refuses to serve without authentication on anything but loopback, unless the operator
/// insists; warns loudly whenever authentication is off.
pub fn check_listeners(auth: &Authenticator, cfg: &AuthConfig, addrs: &[SocketAddr]) -> anyhow::Result<()> {
    if auth.enabled() {
        return Ok(());
    }
    let exposed: Vec<String> = addrs.iter().filter(|a| !a.ip().is_loopback()).map(|a| a.to_string()).collect();
    if !exposed.is_empty() && !cfg.insecure_no_auth {
        anyhow::bail!(
            "refusing to listen on {} without authentication: configure API keys (--api-keys FILE / TOOLROUTER_API_KEYS) \
             or JWT (--jwt-issuer, --jwt-audience, --jwt-jwks or --jwt-jwks-url), listen on a loopback address, or pass --insecure-no-auth",
            exposed.join(", ")
        );
    }
    let where_ = if exposed.is_empty() { "on loopback only".to_string() } else { format!("ON {} (--insecure-no-auth)", exposed.join(", ")) };
    tracing::warn!(
        "AUTHENTICATION IS OFF: every caller is tenant {DEFAULT_TENANT:?}, listening {where_}. For local development only; configure --api-keys for anything else."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn headers(v: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, v.parse().unwrap());
        h
    }

    #[test]
    fn a_bearer_token_is_read_case_insensitively_and_other_schemes_are_invalid() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Ok("abc"));
        assert_eq!(bearer_token(&headers("bearer abc")), Ok("abc"));
        assert_eq!(bearer_token(&headers("Basic abc")), Err(AuthError::Invalid));
        assert_eq!(bearer_token(&headers("Bearer ")), Err(AuthError::Invalid));
        assert_eq!(bearer_token(&http::HeaderMap::new()), Err(AuthError::Missing));
    }

    #[test]
    fn credential_claims_win_over_claims_sent_in_the_run() {
        let p = Principal {
            tenant: "acme".into(),
            identity: [("tenant_id".to_string(), "acme".to_string()), ("user_id".to_string(), "svc".to_string())].into(),
        };
        let mut sent: BTreeMap<String, String> =
            [("tenant_id".to_string(), "other".to_string()), ("user_id".to_string(), "eve".to_string()), ("team".to_string(), "t1".to_string())]
                .into();
        p.merge_identity(&mut sent);
        assert_eq!(sent["tenant_id"], "acme");
        assert_eq!(sent["user_id"], "svc");
        assert_eq!(sent["team"], "t1");
    }

    #[test]
    fn without_keys_only_loopback_listeners_are_allowed() {
        let off = Authenticator::off();
        let cfg = AuthConfig::default();
        let lo: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let lo6: SocketAddr = "[::1]:1".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        assert!(check_listeners(&off, &cfg, &[lo, lo6]).is_ok());
        assert!(check_listeners(&off, &cfg, &[lo, any]).is_err());
        let insecure = AuthConfig { insecure_no_auth: true, ..Default::default() };
        assert!(check_listeners(&off, &insecure, &[any]).is_ok());
    }
}
