//! Per-user authorization of OAuth MCP sources (issue 17): each user's tokens, kept sealed in
//! the store per (tenant, user, source), and the consents that obtain them.
//!
//! A consent is an authorization-code flow with PKCE: [`Consents::begin`] finds the server's
//! authorization server (protected-resource metadata), a client (configured, else registered
//! dynamically, once per tenant and authorization server), makes a `state` and a verifier and
//! stores them sealed under the state's hash; the user's browser comes back to
//! `/oauth/callback` on any replica, which takes the consent (single use) and exchanges the
//! code ([`Consents::finish`]). Tokens go only to the server URL they were issued for, are
//! refreshed shortly before they expire, and are forgotten when refused, so the next call asks
//! for consent again instead of looping.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::oauth::client::{ClientAuth, ClientCreds, Discovered, OAuthError, OAuthHttp, authorize_url, pkce};
use super::oauth::seal::Sealer;
use super::secrets::Secrets;
use crate::catalog::McpSource;
use crate::store::{ConsentRow, OAuthClientRow, Store, TokenRow};

/// How consents and tokens behave.
#[derive(Debug, Clone)]
pub struct ConsentConfig {
    /// Where authorization servers send the user's browser back: `<public url>/oauth/callback`.
    pub redirect_uri: String,
    /// How long a consent link stays valid.
    pub consent_ttl: Duration,
    /// Tokens unused (not refreshed or stored again) this long are deleted.
    pub token_ttl: Duration,
}

impl Default for ConsentConfig {
    fn default() -> Self {
        Self {
            redirect_uri: "http://127.0.0.1:8080/oauth/callback".into(),
            consent_ttl: Duration::from_secs(10 * 60),
            token_ttl: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// An access token is refreshed when it has less than this left.
const REFRESH_MARGIN_MS: i64 = 60_000;
/// Discovery results kept per server URL, and for how long.
const MAX_DISCOVERED: usize = 1_000;
const DISCOVERED_TTL: Duration = Duration::from_secs(600);
/// Refresh locks kept before idle ones are dropped; refreshes tried per call when other
/// replicas keep replacing the token meanwhile.
const MAX_REFRESH_LOCKS: usize = 10_000;
const MAX_REFRESH_ROUNDS: usize = 3;

/// What a call to an OAuth source can send.
#[derive(Debug)]
pub enum Access {
    /// The user's access token for this server.
    Bearer(String),
    /// No usable token: the user must consent first.
    NeedsConsent,
}

/// Why a callback was refused. Nothing was stored and no record changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackError {
    /// No consent has this state: forged, or used already.
    UnknownState,
    /// The consent's link expired.
    Expired,
    /// The authorization server said no (the user refused, say).
    Refused(String),
    /// The code exchange failed.
    Exchange(String),
    /// RFC 9207: the response's `iss` is not the consent's authorization server (or is
    /// missing where that server sends it).
    WrongIssuer,
    Internal(String),
}

impl std::fmt::Display for CallbackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallbackError::UnknownState => write!(f, "this consent link is unknown or was used already; start again from the assistant"),
            CallbackError::Expired => write!(f, "this consent link expired; start again from the assistant"),
            CallbackError::Refused(e) => write!(f, "the authorization server did not grant access: {e}"),
            CallbackError::Exchange(e) => write!(f, "the authorization could not be completed: {e}"),
            CallbackError::WrongIssuer => {
                write!(f, "this answer does not come from the authorization server the consent was started with; start again from the assistant")
            }
            CallbackError::Internal(e) => write!(f, "internal error: {e}"),
        }
    }
}

/// A consent taken by its callback: whose, and which deferred record it resolves.
#[derive(Debug, Clone)]
pub struct Taken {
    pub tenant: String,
    pub user_id: String,
    pub agent_id: String,
    pub source_id: String,
    pub deferred_id: String,
    pending: Pending,
}

/// What a consent keeps sealed until its callback.
#[derive(Clone, Serialize, Deserialize)]
struct Pending {
    verifier: String,
    client_id: String,
    client_secret: Option<String>,
    #[serde(default)]
    client_auth: ClientAuth,
    token_endpoint: String,
    redirect_uri: String,
    resource: String,
    server_url: String,
    /// The authorization server's issuer ("" in consents sealed before it was kept).
    #[serde(default)]
    issuer: String,
    /// RFC 9207: the server advertised `iss` in its responses, so it must be there.
    #[serde(default)]
    iss_required: bool,
}

impl Pending {
    fn client(&self) -> ClientCreds {
        ClientCreds { client_id: self.client_id.clone(), client_secret: self.client_secret.clone(), auth: self.client_auth }
    }
}

/// RFC 9207 §2.4: an `iss` present must be the consent's issuer (compared as strings); absent,
/// it is refused only when the server advertised it.
fn check_iss(p: &Pending, iss: Option<&str>) -> Result<(), CallbackError> {
    match iss {
        Some(got) if !p.issuer.is_empty() && got != p.issuer => Err(CallbackError::WrongIssuer),
        None if p.iss_required => Err(CallbackError::WrongIssuer),
        _ => Ok(()),
    }
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("token_endpoint", &self.token_endpoint).field("server_url", &self.server_url).finish_non_exhaustive()
    }
}

/// A user's tokens for one source, as sealed in the store.
#[derive(Serialize, Deserialize)]
struct Held {
    access_token: String,
    refresh_token: Option<String>,
    token_endpoint: String,
    client_id: String,
    client_secret: Option<String>,
    #[serde(default)]
    client_auth: ClientAuth,
    resource: String,
}

/// A dynamically registered client's secret as sealed in the store, with its method. Rows
/// sealed before the method was kept hold the bare secret.
#[derive(Serialize, Deserialize)]
struct SealedSecret {
    client_secret: String,
    auth: ClientAuth,
}

pub struct Consents {
    store: Store,
    /// `None` without `--token-encryption-key-file`: OAuth sources cannot be used.
    sealer: Option<Sealer>,
    http: OAuthHttp,
    secrets: Arc<Secrets>,
    config: ConsentConfig,
    discovered: Mutex<HashMap<String, (Arc<Discovered>, Instant)>>,
    /// Per (tenant, user, source): held while refreshing that token (see [`Consents::bearer`]).
    refreshing: Mutex<HashMap<TokenKey, Arc<tokio::sync::Mutex<()>>>>,
}

/// (tenant, user, source id): whose token for which source.
type TokenKey = (String, String, String);

/// What one refresh came to.
enum Refreshed {
    /// Refreshed and stored: the new access token.
    Token(String),
    /// Refused (or no refresh token): the tokens are forgotten; the user consents again.
    Refused,
    /// The stored row changed meanwhile (another replica refreshed): read it again.
    Raced,
}

/// Does the stored access token have more than the refresh margin left?
fn fresh(row: &TokenRow) -> bool {
    row.expires_at.is_none_or(|at| at - now_ms() > REFRESH_MARGIN_MS)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn hash(state: &str) -> String {
    Sha256::digest(state.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn token_aad(tenant: &str, user: &str, source_id: &str, server_url: &str) -> Vec<u8> {
    format!("token\0{tenant}\0{user}\0{source_id}\0{server_url}").into_bytes()
}

fn consent_aad(state_hash: &str) -> Vec<u8> {
    format!("consent\0{state_hash}").into_bytes()
}

fn client_aad(tenant: &str, issuer: &str, redirect_uri: &str) -> Vec<u8> {
    format!("client\0{tenant}\0{issuer}\0{redirect_uri}").into_bytes()
}

const NO_KEY: &str = "this source needs each user's authorization, and the server has no --token-encryption-key-file to keep tokens with";

impl Consents {
    pub fn new(store: Store, sealer: Option<Sealer>, http: OAuthHttp, secrets: Arc<Secrets>, config: ConsentConfig) -> Self {
        Self { store, sealer, http, secrets, config, discovered: Mutex::new(HashMap::new()), refreshing: Mutex::new(HashMap::new()) }
    }

    pub fn config(&self) -> &ConsentConfig {
        &self.config
    }

    fn sealer(&self) -> Result<&Sealer, String> {
        self.sealer.as_ref().ok_or_else(|| NO_KEY.to_string())
    }

    /// The user's access token for the source, refreshed when it is about to expire; a token
    /// issued for another URL than the source's is never sent (the definition changed).
    pub async fn bearer(&self, tenant: &str, user: &str, source_id: &str, source: &McpSource) -> Result<Access, String> {
        let sealer = self.sealer()?;
        let Some((row, held)) = self.held(sealer, tenant, user, source_id, source).await? else {
            return Ok(Access::NeedsConsent);
        };
        if fresh(&row) {
            return Ok(Access::Bearer(held.access_token));
        }
        // Refresh tokens rotate: a second refresh with the one a concurrent call just used is
        // refused (invalid_grant), and would forget the token that call stored. So one refresh
        // at a time per user and source here, and a call that waited for one uses its token.
        let lock = self.refresh_lock(tenant, user, source_id);
        let _one = lock.lock().await;
        let mut seen = row.updated;
        for _ in 0..MAX_REFRESH_ROUNDS {
            let Some((row, held)) = self.held(sealer, tenant, user, source_id, source).await? else {
                return Ok(Access::NeedsConsent);
            };
            // Refreshed meanwhile (here or by another replica): use it while it is valid.
            if fresh(&row) || (row.updated != seen && row.expires_at.is_none_or(|at| at > now_ms())) {
                return Ok(Access::Bearer(held.access_token));
            }
            seen = row.updated;
            match self.refresh(sealer, tenant, user, source_id, &row, held).await? {
                Refreshed::Token(t) => return Ok(Access::Bearer(t)),
                Refreshed::Refused => return Ok(Access::NeedsConsent),
                // Another replica changed the row first: read it again.
                Refreshed::Raced => {}
            }
        }
        Err("the token could not be refreshed: it kept being replaced concurrently".into())
    }

    /// The user's stored tokens for the source, opened; `None` when absent, issued for another
    /// URL, or sealed with a key no longer configured (the user is asked again).
    async fn held(&self, sealer: &Sealer, tenant: &str, user: &str, source_id: &str, source: &McpSource) -> Result<Option<(TokenRow, Held)>, String> {
        let Some(row) = self.store.get_token(tenant, user, source_id).await.map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        if row.server_url != source.url {
            return Ok(None);
        }
        let aad = token_aad(tenant, user, source_id, &row.server_url);
        let held = sealer.open(&row.sealed, &aad).ok().and_then(|b| serde_json::from_slice::<Held>(&b).ok());
        Ok(held.map(|h| (row, h)))
    }

    /// The lock refreshes of one user's token for one source take in this process.
    fn refresh_lock(&self, tenant: &str, user: &str, source_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut m = self.refreshing.lock().expect("refreshing lock");
        let key = (tenant.to_string(), user.to_string(), source_id.to_string());
        if m.len() >= MAX_REFRESH_LOCKS && !m.contains_key(&key) {
            // A lock nobody holds or waits for carries no state.
            m.retain(|_, l| Arc::strong_count(l) > 1);
        }
        m.entry(key).or_default().clone()
    }

    /// One refresh of `row` (whose tokens are `held`), stored only over that very row.
    async fn refresh(&self, sealer: &Sealer, tenant: &str, user: &str, source_id: &str, row: &TokenRow, held: Held) -> Result<Refreshed, String> {
        let Some(refresh) = held.refresh_token.clone() else {
            return Ok(Refreshed::Refused);
        };
        let client = ClientCreds { client_id: held.client_id.clone(), client_secret: held.client_secret.clone(), auth: held.client_auth };
        match self.http.refresh(&held.token_endpoint, &client, &refresh, &held.resource).await {
            Ok(t) => {
                let next = Held {
                    access_token: t.access_token.clone(),
                    refresh_token: t.refresh_token.clone().or(Some(refresh)),
                    token_endpoint: held.token_endpoint,
                    client_id: held.client_id,
                    client_secret: held.client_secret,
                    client_auth: held.client_auth,
                    resource: held.resource,
                };
                // Strictly later than the row it replaces, so two refreshes never both win.
                let updated = now_ms().max(row.updated + 1);
                let aad = token_aad(tenant, user, source_id, &row.server_url);
                let sealed = sealer.seal(&serde_json::to_vec(&next).map_err(|e| e.to_string())?, &aad);
                let expires_at = t.expires_in.map(|s| updated + (s as i64).saturating_mul(1000));
                let new_row = TokenRow { sealed, expires_at, updated, ..row.clone() };
                // Another replica refreshed first: its token is the one to use.
                if !self.store.replace_token(tenant, &new_row, row.updated).await.map_err(|e| e.to_string())? {
                    return Ok(Refreshed::Raced);
                }
                Ok(Refreshed::Token(t.access_token))
            }
            Err(OAuthError::InvalidGrant(_)) => {
                // Another replica may have refreshed with the same refresh token a moment ago
                // (so ours was rotated away): its token is the one to use.
                let now = self.store.get_token(tenant, user, source_id).await.map_err(|e| e.to_string())?;
                if now.is_some_and(|now| now.updated != row.updated) {
                    return Ok(Refreshed::Raced);
                }
                self.forget(tenant, user, source_id).await;
                Ok(Refreshed::Refused)
            }
            Err(e) => Err(format!("the token could not be refreshed: {e}")),
        }
    }

    /// Forgets a user's tokens for a source (the server refused them).
    pub async fn forget(&self, tenant: &str, user: &str, source_id: &str) {
        if let Err(e) = self.store.delete_tokens(tenant, user, Some(source_id)).await {
            tracing::warn!(error = %e, "forgetting refused tokens failed");
        }
    }

    /// `RevokeTokens`: a user's tokens for one source, or for all.
    pub async fn revoke(&self, tenant: &str, user: &str, source_id: Option<&str>) -> Result<u64, String> {
        self.store.delete_tokens(tenant, user, source_id).await.map_err(|e| e.to_string())
    }

    async fn discover(&self, server_url: &str) -> Result<Arc<Discovered>, String> {
        if let Some((d, at)) = self.discovered.lock().expect("discovered lock").get(server_url)
            && at.elapsed() < DISCOVERED_TTL
        {
            return Ok(d.clone());
        }
        let d = Arc::new(self.http.discover(server_url).await.map_err(|e| e.to_string())?);
        let mut m = self.discovered.lock().expect("discovered lock");
        if m.len() >= MAX_DISCOVERED {
            m.retain(|_, (_, at)| at.elapsed() < DISCOVERED_TTL);
            if m.len() >= MAX_DISCOVERED {
                m.clear();
            }
        }
        m.insert(server_url.to_string(), (d.clone(), Instant::now()));
        Ok(d)
    }

    /// The client toolrouter is at the source's authorization server: the configured one, else
    /// one registered dynamically (once per tenant, authorization server and redirect URI).
    async fn client(&self, tenant: &str, source: &McpSource, d: &Discovered) -> Result<ClientCreds, String> {
        let o = source.oauth.as_ref().ok_or("not an OAuth source")?;
        if !o.client_id.is_empty() {
            let client_secret = if o.client_secret.is_empty() {
                None
            } else {
                Some(self.secrets.read(&o.client_secret, tenant, &source.url).map_err(|e| e.to_string())?)
            };
            return Ok(ClientCreds { client_id: o.client_id.clone(), client_secret, auth: d.client_auth });
        }
        let sealer = self.sealer()?;
        let redirect = &self.config.redirect_uri;
        let aad = client_aad(tenant, &d.issuer, redirect);
        let open = |row: &OAuthClientRow| -> Result<ClientCreds, String> {
            if row.sealed_secret.is_empty() {
                return Ok(ClientCreds { client_id: row.client_id.clone(), client_secret: None, auth: d.client_auth });
            }
            let plain = sealer.open(&row.sealed_secret, &aad).map_err(|_| "the registered client's secret cannot be opened".to_string())?;
            let (secret, auth) = match serde_json::from_slice::<SealedSecret>(&plain) {
                Ok(s) => (s.client_secret, s.auth),
                Err(_) => (String::from_utf8(plain).map_err(|e| e.to_string())?, d.client_auth),
            };
            Ok(ClientCreds { client_id: row.client_id.clone(), client_secret: Some(secret), auth })
        };
        if let Some(row) = self.store.get_oauth_client(tenant, &d.issuer, redirect).await.map_err(|e| e.to_string())? {
            return open(&row);
        }
        if d.registration_endpoint.is_none() {
            return Err("the authorization server has no dynamic client registration: configure oauth.client_id".into());
        }
        let creds = self.http.register(d, redirect).await.map_err(|e| e.to_string())?;
        let sealed_secret = match creds.client_secret {
            Some(client_secret) => {
                let plain = serde_json::to_vec(&SealedSecret { client_secret, auth: creds.auth }).map_err(|e| e.to_string())?;
                sealer.seal(&plain, &aad)
            }
            None => String::new(),
        };
        let row = OAuthClientRow {
            issuer: d.issuer.clone(),
            redirect_uri: redirect.clone(),
            client_id: creds.client_id,
            sealed_secret,
            create_time: now_ms(),
        };
        // A concurrent registration may have won: use the stored one.
        let stored = self.store.put_oauth_client(tenant, &row).await.map_err(|e| e.to_string())?;
        open(&stored)
    }

    /// Starts a consent for a user and source: the URL the user opens. `deferred_id` names the
    /// record its callback resolves ("" for none).
    pub async fn begin(
        &self,
        tenant: &str,
        user: &str,
        agent_id: &str,
        source_id: &str,
        source: &McpSource,
        deferred_id: &str,
    ) -> Result<String, String> {
        let sealer = self.sealer()?;
        let d = self.discover(&source.url).await?;
        let client = self.client(tenant, source, &d).await?;
        let scopes = match source.oauth.as_ref() {
            Some(o) if !o.scopes.is_empty() => o.scopes.clone(),
            _ => d.scopes.clone(),
        };
        let state = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
        let (verifier, challenge) = pkce();
        let url = authorize_url(&d, &client.client_id, &self.config.redirect_uri, &scopes, &state, &challenge);
        let pending = Pending {
            verifier,
            client_id: client.client_id,
            client_secret: client.client_secret,
            client_auth: client.auth,
            token_endpoint: d.token_endpoint.clone(),
            redirect_uri: self.config.redirect_uri.clone(),
            resource: d.resource.clone(),
            server_url: source.url.clone(),
            issuer: d.issuer.clone(),
            iss_required: d.iss_parameter,
        };
        let state_hash = hash(&state);
        let now = now_ms();
        let row = ConsentRow {
            sealed: sealer.seal(&serde_json::to_vec(&pending).map_err(|e| e.to_string())?, &consent_aad(&state_hash)),
            state_hash,
            user_id: user.to_string(),
            agent_id: agent_id.to_string(),
            source_id: source_id.to_string(),
            deferred_id: deferred_id.to_string(),
            create_time: now,
            expire_time: now + self.config.consent_ttl.as_millis() as i64,
        };
        self.store.insert_consent(tenant, &row).await.map_err(|e| e.to_string())?;
        Ok(url)
    }

    /// The callback's first step: takes the consent its `state` names (single use; expired
    /// or unknown is refused) and checks the response's `iss` (RFC 9207). Nothing is
    /// exchanged yet.
    pub async fn take(&self, state: &str, iss: Option<&str>) -> Result<Taken, CallbackError> {
        // Without a key no consent was ever started: whatever the state, it is unknown.
        let sealer = self.sealer.as_ref().ok_or(CallbackError::UnknownState)?;
        let state_hash = hash(state);
        let (tenant, row) =
            self.store.take_consent(&state_hash).await.map_err(|e| CallbackError::Internal(e.to_string()))?.ok_or(CallbackError::UnknownState)?;
        if row.expire_time <= now_ms() {
            return Err(CallbackError::Expired);
        }
        let pending: Pending = sealer
            .open(&row.sealed, &consent_aad(&state_hash))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| CallbackError::Internal("the consent cannot be opened".into()))?;
        check_iss(&pending, iss)?;
        Ok(Taken { tenant, user_id: row.user_id, agent_id: row.agent_id, source_id: row.source_id, deferred_id: row.deferred_id, pending })
    }

    /// The callback's second step: exchanges the code (with the consent's verifier, so a code
    /// issued for another consent fails) and stores the user's tokens.
    pub async fn finish(&self, taken: &Taken, code: &str) -> Result<(), CallbackError> {
        let sealer = self.sealer().map_err(CallbackError::Internal)?;
        let p = &taken.pending;
        let t = self.http.exchange(&p.token_endpoint, &p.client(), code, &p.verifier, &p.redirect_uri, &p.resource).await.map_err(|e| match e {
            OAuthError::InvalidGrant(m) => CallbackError::Exchange(format!("the code was refused ({m})")),
            other => CallbackError::Exchange(other.to_string()),
        })?;
        let held = Held {
            access_token: t.access_token,
            refresh_token: t.refresh_token,
            token_endpoint: p.token_endpoint.clone(),
            client_id: p.client_id.clone(),
            client_secret: p.client_secret.clone(),
            client_auth: p.client_auth,
            resource: p.resource.clone(),
        };
        let updated = now_ms();
        let aad = token_aad(&taken.tenant, &taken.user_id, &taken.source_id, &p.server_url);
        let row = TokenRow {
            user_id: taken.user_id.clone(),
            source_id: taken.source_id.clone(),
            server_url: p.server_url.clone(),
            sealed: sealer.seal(&serde_json::to_vec(&held).map_err(|e| CallbackError::Internal(e.to_string()))?, &aad),
            expires_at: t.expires_in.map(|s| updated + (s as i64).saturating_mul(1000)),
            updated,
        };
        self.store.put_token(&taken.tenant, &row).await.map_err(|e| CallbackError::Internal(e.to_string()))
    }

    /// Deletes expired consents and tokens unused past their TTL.
    pub async fn purge(&self, limit: u32) -> Result<(u64, u64), String> {
        let now = now_ms();
        let before = now - self.config.token_ttl.as_millis() as i64;
        self.store.purge_oauth(now, before, limit).await.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_stored_hashed_and_sealed_blobs_are_bound_to_their_row() {
        assert_eq!(hash("abc").len(), 64);
        assert_ne!(hash("abc"), hash("abd"));
        assert_ne!(token_aad("t", "ada", "cal", "https://a/mcp"), token_aad("t", "bob", "cal", "https://a/mcp"));
        assert_ne!(token_aad("t", "ada", "cal", "https://a/mcp"), token_aad("t", "ada", "cal", "https://b/mcp"));
    }

    fn pending(issuer: &str, iss_required: bool) -> Pending {
        Pending {
            verifier: "v".into(),
            client_id: "c".into(),
            client_secret: None,
            client_auth: ClientAuth::ClientSecretPost,
            token_endpoint: "https://as/token".into(),
            redirect_uri: "https://tr/oauth/callback".into(),
            resource: "https://h/mcp".into(),
            server_url: "https://h/mcp".into(),
            issuer: issuer.into(),
            iss_required,
        }
    }

    #[test]
    fn the_callbacks_iss_must_be_the_consents_issuer() {
        let as_ = "https://as.example.com";
        // Advertised (RFC 9207): required and equal, compared as strings.
        let p = pending(as_, true);
        assert_eq!(check_iss(&p, Some(as_)), Ok(()));
        assert_eq!(check_iss(&p, None), Err(CallbackError::WrongIssuer));
        assert_eq!(check_iss(&p, Some("https://evil.example.com")), Err(CallbackError::WrongIssuer));
        assert_eq!(check_iss(&p, Some("https://as.example.com/")), Err(CallbackError::WrongIssuer));
        assert_eq!(check_iss(&p, Some("")), Err(CallbackError::WrongIssuer));
        // Not advertised: absent is fine, present must still match.
        let p = pending(as_, false);
        assert_eq!(check_iss(&p, None), Ok(()));
        assert_eq!(check_iss(&p, Some(as_)), Ok(()));
        assert_eq!(check_iss(&p, Some("https://evil.example.com")), Err(CallbackError::WrongIssuer));
        // Sealed before the issuer was kept: nothing to compare with.
        assert_eq!(check_iss(&pending("", false), Some("https://any")), Ok(()));
    }

    #[test]
    fn consents_and_tokens_sealed_before_the_new_fields_still_open() {
        let old = r#"{"verifier":"v","client_id":"c","client_secret":"s","token_endpoint":"t","redirect_uri":"r","resource":"x","server_url":"u"}"#;
        let p: Pending = serde_json::from_str(old).unwrap();
        assert_eq!((p.client_auth, p.issuer.as_str(), p.iss_required), (ClientAuth::ClientSecretPost, "", false));
        let old = r#"{"access_token":"a","refresh_token":null,"token_endpoint":"t","client_id":"c","client_secret":"s","resource":"x"}"#;
        let h: Held = serde_json::from_str(old).unwrap();
        assert_eq!(h.client_auth, ClientAuth::ClientSecretPost);
        let p = Pending { client_auth: ClientAuth::ClientSecretBasic, client_secret: Some("s".into()), ..pending("i", true) };
        let back: Pending = serde_json::from_slice(&serde_json::to_vec(&p).unwrap()).unwrap();
        assert_eq!(back.client(), ClientCreds { client_id: "c".into(), client_secret: Some("s".into()), auth: ClientAuth::ClientSecretBasic });
        assert!((back.issuer.as_str(), back.iss_required) == ("i", true));
    }
}
