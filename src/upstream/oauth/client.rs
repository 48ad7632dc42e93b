//! This file is long because discovery, registration and the token requests share one HTTP
//! path (policy check, bounded body, redaction) and the checks the specifications require.
//!
//! The OAuth client of MCP authorization (OAuth 2.1 authorization code with PKCE S256,
//! RFC 9728 protected-resource metadata, RFC 8414 authorization-server metadata, RFC 7591
//! dynamic client registration, RFC 8707 resource indicators), on toolrouter's own HTTP client.
//!
//! Every URL is checked with the outbound policy before it is requested, and the client's
//! resolver filters the addresses (the same client as the MCP client's: no redirects are
//! followed, no proxy). Requests time out after [`TIMEOUT`] and bodies are read up to
//! [`MAX_BODY`]. Errors and `Debug` output never carry tokens, codes, verifiers or secrets,
//! nor whole URLs (a URL may carry credentials): they name hosts.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, WWW_AUTHENTICATE};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

use crate::outbound::{Outbound, Policy};

/// The deadline of each OAuth request, body included.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest response body read from an OAuth endpoint.
pub const MAX_BODY: usize = 64 * 1024;

/// The unauthenticated request that asks an MCP server for its challenge. Any method does:
/// the server's authentication answers before the method is looked at.
const PROBE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;

/// Why an OAuth step failed. Messages name hosts and the server's error codes, never tokens,
/// codes, verifiers or secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// The outbound policy refused a URL.
    #[error("{0}")]
    Refused(String),
    /// The server's metadata or answers break the protocol (or toolrouter's requirements).
    #[error("{0}")]
    Protocol(String),
    /// The authorization server refused the code or refresh token (`invalid_grant`): the user
    /// consents again.
    #[error("{0}")]
    InvalidGrant(String),
    /// The request failed (network, timeout, an unexpected HTTP status).
    #[error("{0}")]
    Http(String),
}

/// HTTP for OAuth: the MCP servers' client and the outbound policy every URL is checked with.
#[derive(Debug, Clone)]
pub struct OAuthHttp {
    pub http: reqwest::Client,
    pub policy: Arc<Policy>,
}

/// What discovery found for an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovered {
    /// The RFC 8707 resource (the protected-resource metadata's `resource`), sent in the
    /// authorization request and every token request.
    pub resource: String,
    /// The authorization server's issuer, as its metadata states it.
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub revocation_endpoint: Option<String>,
    /// The scope of the server's 401 challenge, else the resource metadata's `scopes_supported`
    /// (empty: no `scope` is sent).
    pub scopes: Vec<String>,
    /// How a confidential client authenticates, from `token_endpoint_auth_methods_supported`.
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// RFC 9207: the server sends `iss` in its authorization responses.
    #[serde(default)]
    pub iss_parameter: bool,
}

/// How a client with a secret authenticates at the token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// `client_secret` in the form.
    #[default]
    ClientSecretPost,
    /// HTTP Basic with the form-urlencoded id and secret.
    ClientSecretBasic,
}

impl ClientAuth {
    /// The method for the metadata's `token_endpoint_auth_methods_supported`: post when it is
    /// listed or the list is absent, basic when only it (of the two) is listed.
    pub fn from_supported(methods: Option<&[&str]>) -> Self {
        match methods {
            Some(m) if !m.contains(&"client_secret_post") && m.contains(&"client_secret_basic") => ClientAuth::ClientSecretBasic,
            _ => ClientAuth::ClientSecretPost,
        }
    }

    /// The method a registration response's `token_endpoint_auth_method` names, if one of the two.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "client_secret_post" => Some(ClientAuth::ClientSecretPost),
            "client_secret_basic" => Some(ClientAuth::ClientSecretBasic),
            _ => None,
        }
    }
}

/// The `Authorization` value of client_secret_basic: RFC 6749 §2.3.1 form-urlencodes the id
/// and the secret before base64.
pub fn basic_authorization(client_id: &str, secret: &str) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!("Basic {}", STANDARD.encode(format!("{}:{}", enc(client_id), enc(secret))))
}

/// A client registered with an authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCreds {
    pub client_id: String,
    /// Sent as `auth` says when set; a public client sends its `client_id` only.
    pub client_secret: Option<String>,
    #[serde(default)]
    pub auth: ClientAuth,
}

impl fmt::Debug for ClientCreds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCreds")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "[redacted]"))
            .field("auth", &self.auth)
            .finish()
    }
}

/// Tokens from a token endpoint.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Seconds from the answer, if the server said.
    pub expires_in: Option<u64>,
    pub scope: Option<String>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("access_token", &"[redacted]")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "[redacted]"))
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish()
    }
}

/// The `Bearer` challenge of a `WWW-Authenticate` header (RFC 6750, RFC 9728 §5.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

/// The `Bearer` challenge among a `WWW-Authenticate` value's challenges (scheme names are
/// case-insensitive, values token or quoted-string); `None` when there is none.
pub fn parse_bearer_challenge(header: &str) -> Option<BearerChallenge> {
    let (_, params) = parse_challenges(header).into_iter().find(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))?;
    let mut c = BearerChallenge::default();
    for (name, value) in params {
        let slot = match name.as_str() {
            "resource_metadata" => &mut c.resource_metadata,
            "scope" => &mut c.scope,
            "error" => &mut c.error,
            _ => continue,
        };
        slot.get_or_insert(value);
    }
    Some(c)
}

/// The challenges of a `WWW-Authenticate` value: (scheme, [(lower-cased name, value)]).
fn parse_challenges(header: &str) -> Vec<(String, Vec<(String, String)>)> {
    let s: Vec<char> = header.chars().collect();
    let ws = |c: char| c == ' ' || c == '\t';
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut i = 0;
    while i < s.len() {
        while i < s.len() && (ws(s[i]) || s[i] == ',') {
            i += 1;
        }
        let start = i;
        while i < s.len() && !ws(s[i]) && s[i] != ',' && s[i] != '=' {
            i += 1;
        }
        let token: String = s[start..i].iter().collect();
        let mut j = i;
        while j < s.len() && ws(s[j]) {
            j += 1;
        }
        if j < s.len() && s[j] == '=' {
            i = j + 1;
            while i < s.len() && ws(s[i]) {
                i += 1;
            }
            let mut value = String::new();
            if i < s.len() && s[i] == '"' {
                i += 1;
                while i < s.len() && s[i] != '"' {
                    if s[i] == '\\' && i + 1 < s.len() {
                        i += 1;
                    }
                    value.push(s[i]);
                    i += 1;
                }
                i += 1;
            } else {
                while i < s.len() && !ws(s[i]) && s[i] != ',' {
                    value.push(s[i]);
                    i += 1;
                }
            }
            if let (false, Some((_, params))) = (token.is_empty(), out.last_mut()) {
                params.push((token.to_ascii_lowercase(), value));
            }
        } else if !token.is_empty() {
            out.push((token, Vec::new()));
        } else if i < s.len() {
            i += 1;
        }
    }
    out
}

/// A fresh PKCE pair: (verifier, its S256 challenge). The verifier is 32 random bytes,
/// base64url (43 characters).
pub fn pkce() -> (String, String) {
    let verifier = random_token();
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// 32 random bytes, base64url without padding: for `state`.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system random number generator");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The authorization request URL the user's browser opens: the endpoint (its own query kept)
/// with response_type=code, client_id, redirect_uri, scope (space-joined; omitted when there
/// is none), state, code_challenge, code_challenge_method=S256 and resource.
pub fn authorize_url(d: &Discovered, client_id: &str, redirect_uri: &str, scopes: &[String], state: &str, challenge: &str) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("response_type", "code").append_pair("client_id", client_id).append_pair("redirect_uri", redirect_uri);
    let scope = scopes.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
    if !scope.is_empty() {
        q.append_pair("scope", &scope);
    }
    q.append_pair("state", state)
        .append_pair("code_challenge", challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", &d.resource);
    let endpoint = &d.authorization_endpoint;
    let sep = match endpoint.find('?') {
        None => "?",
        Some(i) if i + 1 == endpoint.len() || endpoint.ends_with('&') => "",
        Some(_) => "&",
    };
    format!("{endpoint}{sep}{}", q.finish())
}

/// A response: status, headers and (when read) body.
struct Fetched {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl OAuthHttp {
    /// The MCP servers' own client (no redirects, no proxy, the policy's resolver, the
    /// outbound TLS settings), for the given outbound settings.
    pub fn new(outbound: &Outbound) -> Self {
        Self { http: crate::upstream::mcp::http_client(outbound), policy: outbound.policy.clone() }
    }

    /// Sends a request to `url` once the policy allows it; `what` names the endpoint (and its
    /// host) in errors. Reads the body (bounded) when `read_body`.
    async fn send(
        &self,
        what: &str,
        url: &str,
        read_body: bool,
        build: impl FnOnce(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Fetched, OAuthError> {
        self.policy.check_url(url).map_err(|r| OAuthError::Refused(format!("{what} is refused by the outbound policy: {r}")))?;
        let mut resp = build(&self.http).timeout(TIMEOUT).send().await.map_err(|e| request_error(what, &e))?;
        let status = resp.status();
        let headers = std::mem::take(resp.headers_mut());
        let mut body = Vec::new();
        if read_body {
            if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
                return Err(OAuthError::Http(format!("{what} answered with more than {} KiB", MAX_BODY / 1024)));
            }
            while let Some(chunk) = resp.chunk().await.map_err(|e| request_error(what, &e))? {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(OAuthError::Http(format!("{what} answered with more than {} KiB", MAX_BODY / 1024)));
                }
                body.extend_from_slice(&chunk);
            }
        }
        Ok(Fetched { status, headers, body })
    }

    async fn get_json(&self, what: &str, url: &str) -> Result<Fetched, OAuthError> {
        self.send(what, url, true, |c| c.get(url).header(ACCEPT, "application/json")).await
    }

    /// Finds the authorization server of an MCP server: its 401 challenge (an unauthenticated
    /// JSON-RPC POST) names the protected-resource metadata, else the well-known URLs
    /// (path-inserted, then the root); then the authorization server's metadata (RFC 8414
    /// path insertion, then OpenID Connect discovery), whose issuer must be exactly the one
    /// named, and which must advertise PKCE S256. The metadata's `resource` must be the
    /// server's URL or a parent of it (same origin, path prefix).
    pub async fn discover(&self, server_url: &str) -> Result<Discovered, OAuthError> {
        let server = Url::parse(server_url.trim()).map_err(|_| OAuthError::Protocol("the MCP server URL does not parse".into()))?;
        let host = host_of(&server);
        let challenge = self.probe(&server, &host).await?;

        let mut prm_urls = Vec::new();
        if let Some(named) = challenge.as_ref().and_then(|c| c.resource_metadata.as_deref()) {
            match server.join(named) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => prm_urls.push(u.to_string()),
                _ => {
                    return Err(OAuthError::Protocol(format!(
                        "the MCP server at {host} names protected-resource metadata that is not an http(s) URL"
                    )));
                }
            }
        }
        for u in resource_metadata_urls(&server) {
            if !prm_urls.contains(&u) {
                prm_urls.push(u);
            }
        }
        let mut prm = None;
        let mut last_error = None;
        for u in &prm_urls {
            let what = format!("the protected-resource metadata ({})", host_of_str(u));
            match self.get_json(&what, u).await {
                Ok(f) if f.status == StatusCode::OK => {
                    prm = Some(accept_resource_meta(&server, &f.body)?);
                    break;
                }
                Ok(_) => {}
                Err(e @ OAuthError::Refused(_)) => return Err(e),
                Err(e) => last_error = Some(e),
            }
        }
        let Some(prm) = prm else {
            return Err(last_error.unwrap_or_else(|| {
                OAuthError::Protocol(format!(
                    "the MCP server at {host} publishes no OAuth protected-resource metadata (RFC 9728): it may not use OAuth"
                ))
            }));
        };

        let mut errors = Vec::new();
        for issuer in &prm.authorization_servers {
            match self.authorization_server(issuer).await {
                Ok(meta) => {
                    let scopes = match challenge.as_ref().and_then(|c| c.scope.as_deref()) {
                        Some(s) if !s.trim().is_empty() => s.split_whitespace().map(str::to_string).collect(),
                        _ => prm.scopes_supported.clone(),
                    };
                    return Ok(Discovered {
                        resource: prm.resource,
                        issuer: meta.issuer,
                        authorization_endpoint: meta.authorization_endpoint,
                        token_endpoint: meta.token_endpoint,
                        registration_endpoint: meta.registration_endpoint,
                        revocation_endpoint: meta.revocation_endpoint,
                        scopes,
                        client_auth: meta.client_auth,
                        iss_parameter: meta.iss_parameter,
                    });
                }
                Err(e @ OAuthError::Refused(_)) if prm.authorization_servers.len() == 1 => return Err(e),
                Err(e) => errors.push(e),
            }
        }
        // One server: its error as is; several: the first's (each was tried in order).
        Err(errors.into_iter().next().expect("at least one authorization server"))
    }

    /// The 401 challenge of an unauthenticated request, if the server answers with one.
    async fn probe(&self, server: &Url, host: &str) -> Result<Option<BearerChallenge>, OAuthError> {
        let what = format!("the MCP server ({host})");
        let f = self
            .send(&what, server.as_str(), false, |c| {
                c.post(server.as_str()).header(CONTENT_TYPE, "application/json").header(ACCEPT, "application/json, text/event-stream").body(PROBE)
            })
            .await?;
        if f.status != StatusCode::UNAUTHORIZED {
            return Ok(None);
        }
        Ok(f.headers.get_all(WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()).find_map(parse_bearer_challenge))
    }

    /// The metadata of the authorization server `issuer`, checked.
    async fn authorization_server(&self, issuer: &str) -> Result<ServerMeta, OAuthError> {
        let issuer_url =
            Url::parse(issuer).map_err(|_| OAuthError::Protocol("an authorization server of the resource metadata is not a URL".into()))?;
        let host = host_of(&issuer_url);
        if !secure_endpoint(&issuer_url) || issuer_url.query().is_some() {
            return Err(OAuthError::Protocol(format!(
                "the authorization server {host} is not an https URL without query or fragment (plain http only on loopback)"
            )));
        }
        let mut last_error = None;
        for u in authorization_server_metadata_urls(&issuer_url) {
            let what = format!("the authorization server metadata ({host})");
            match self.get_json(&what, &u).await {
                Ok(f) if f.status == StatusCode::OK => return accept_server_meta(issuer, &f.body),
                Ok(_) => {}
                Err(e @ OAuthError::Refused(_)) => return Err(e),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            OAuthError::Protocol(format!("the authorization server {host} publishes no metadata (RFC 8414 or OpenID Connect discovery)"))
        }))
    }

    /// Registers toolrouter with the authorization server (RFC 7591) as a public web client
    /// of `redirect_uri`: its id, the secret if the server issued one anyway, and the method
    /// the response names (else the metadata's).
    pub async fn register(&self, d: &Discovered, redirect_uri: &str) -> Result<ClientCreds, OAuthError> {
        let endpoint = d.registration_endpoint.as_deref().ok_or_else(|| {
            OAuthError::Protocol(format!(
                "the authorization server {} does not offer dynamic client registration; a client must be registered there by hand",
                host_of_str(&d.issuer)
            ))
        })?;
        let what = format!("the authorization server's registration endpoint ({})", host_of_str(endpoint));
        let body = json!({
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "client_name": "toolrouter",
            "application_type": "web",
        })
        .to_string();
        let f = self
            .send(&what, endpoint, true, |c| c.post(endpoint).header(CONTENT_TYPE, "application/json").header(ACCEPT, "application/json").body(body))
            .await?;
        let v: Option<Value> = serde_json::from_slice(&f.body).ok();
        if !f.status.is_success() {
            return Err(match v.as_ref().and_then(oauth_error_of) {
                Some((code, desc)) => OAuthError::Protocol(format!("{what} refused the registration: {code}{}", describe(&desc, &[]))),
                None => OAuthError::Http(format!("{what} answered HTTP {}", f.status.as_u16())),
            });
        }
        let v = v.ok_or_else(|| OAuthError::Protocol(format!("{what} answered with something other than JSON")))?;
        let client_id = v
            .get("client_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| OAuthError::Protocol(format!("{what} answered without a client_id")))?;
        let secret = v.get("client_secret").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        let auth = v.get("token_endpoint_auth_method").and_then(Value::as_str).and_then(ClientAuth::from_name).unwrap_or(d.client_auth);
        Ok(ClientCreds { client_id: client_id.to_string(), client_secret: secret, auth })
    }

    /// Exchanges an authorization code (grant_type=authorization_code, with the PKCE verifier,
    /// the redirect URI and the RFC 8707 resource).
    pub async fn exchange(
        &self,
        d_token_endpoint: &str,
        client: &ClientCreds,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
        resource: &str,
    ) -> Result<Tokens, OAuthError> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", resource),
        ];
        self.token_request(d_token_endpoint, client, &form, &[code, verifier]).await
    }

    /// Refreshes (grant_type=refresh_token with the RFC 8707 resource, no scope). A server that
    /// returns no new refresh token leaves the old one in the result.
    pub async fn refresh(&self, token_endpoint: &str, client: &ClientCreds, refresh_token: &str, resource: &str) -> Result<Tokens, OAuthError> {
        let form = [("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("resource", resource)];
        let mut tokens = self.token_request(token_endpoint, client, &form, &[refresh_token]).await?;
        if tokens.refresh_token.is_none() {
            tokens.refresh_token = Some(refresh_token.to_string());
        }
        Ok(tokens)
    }

    /// A token request: the form plus the client's authentication (with a secret, post or
    /// basic as `client.auth` says; else client_id alone). `secrets` are kept out of error
    /// messages.
    async fn token_request(&self, endpoint: &str, client: &ClientCreds, form: &[(&str, &str)], secrets: &[&str]) -> Result<Tokens, OAuthError> {
        let what = format!("the token endpoint ({})", host_of_str(endpoint));
        let secret = client.client_secret.as_deref().filter(|s| !s.is_empty());
        let basic = secret.filter(|_| client.auth == ClientAuth::ClientSecretBasic).map(|s| basic_authorization(&client.client_id, s));
        let body = token_form(form, client, secret.filter(|_| basic.is_none()));
        let f = self
            .send(&what, endpoint, true, |c| {
                let rq = c.post(endpoint).header(CONTENT_TYPE, "application/x-www-form-urlencoded").header(ACCEPT, "application/json");
                match basic {
                    Some(b) => rq.header(AUTHORIZATION, b),
                    None => rq,
                }
                .body(body)
            })
            .await?;
        let mut hidden: Vec<&str> = secrets.to_vec();
        hidden.extend(secret);
        parse_token_response(&what, f.status, &f.body, &hidden)
    }
}

/// A token request's body: the form and `client_id` (kept with basic too: servers look the
/// client up by it), plus `client_secret` when posted.
fn token_form(form: &[(&str, &str)], client: &ClientCreds, posted_secret: Option<&str>) -> String {
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    body.extend_pairs(form).append_pair("client_id", &client.client_id);
    if let Some(secret) = posted_secret {
        body.append_pair("client_secret", secret);
    }
    body.finish()
}

/// A token endpoint's answer as [`Tokens`], or the error it states.
fn parse_token_response(what: &str, status: StatusCode, body: &[u8], secrets: &[&str]) -> Result<Tokens, OAuthError> {
    let v: Option<Value> = serde_json::from_slice(body).ok();
    if !status.is_success() {
        return Err(match v.as_ref().and_then(oauth_error_of) {
            Some((code, desc)) if code == "invalid_grant" => {
                OAuthError::InvalidGrant(format!("{what} refused the grant (invalid_grant){}", describe(&desc, secrets)))
            }
            Some((code, desc)) => OAuthError::Protocol(format!("{what} refused the request: {}{}", describe_code(&code), describe(&desc, secrets))),
            None if status.is_redirection() => OAuthError::Http(format!("{what} answered with a redirect, which is not followed")),
            None => OAuthError::Http(format!("{what} answered HTTP {}", status.as_u16())),
        });
    }
    let Some(Value::Object(v)) = v else {
        return Err(OAuthError::Protocol(format!("{what} answered with something other than a JSON object")));
    };
    let access_token = match v.get("access_token") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(OAuthError::Protocol(format!("{what} answered without an access_token"))),
    };
    match v.get("token_type") {
        Some(Value::String(t)) if t.eq_ignore_ascii_case("bearer") => {}
        None => {}
        Some(_) => return Err(OAuthError::Protocol(format!("{what} issued a token whose token_type is not Bearer"))),
    }
    let refresh_token = match v.get("refresh_token") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        None | Some(Value::Null) => None,
        Some(Value::String(_)) => None,
        Some(_) => return Err(OAuthError::Protocol(format!("{what} answered with a refresh_token that is not a string"))),
    };
    // Some servers send expires_in as a string.
    let expires_in = match v.get("expires_in") {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    let scope = v.get("scope").and_then(Value::as_str).map(str::to_string);
    Ok(Tokens { access_token, refresh_token, expires_in, scope })
}

/// An OAuth error answer's (error, error_description).
fn oauth_error_of(v: &Value) -> Option<(String, String)> {
    let code = v.get("error")?.as_str()?.to_string();
    Some((code, v.get("error_description").and_then(Value::as_str).unwrap_or_default().to_string()))
}

/// An error code fit for a message: printable ASCII, short.
fn describe_code(code: &str) -> String {
    code.chars().filter(|c| c.is_ascii_graphic()).take(64).collect()
}

/// ": <description>" fit for a message: control characters dropped, `secrets` redacted, at
/// most 200 characters; "" when empty.
fn describe(desc: &str, secrets: &[&str]) -> String {
    let mut d: String = desc.chars().filter(|c| !c.is_control()).collect();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        d = d.replace(s, "[redacted]");
    }
    let d = d.trim();
    if d.is_empty() {
        return String::new();
    }
    let mut short: String = d.chars().take(200).collect();
    if short.len() < d.len() {
        short.push('…');
    }
    format!(": {short}")
}

/// The checked protected-resource metadata.
#[derive(Debug)]
struct ResourceMeta {
    resource: String,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
}

/// Parses and checks protected-resource metadata for the MCP server `server`: `resource`
/// must be the server's URL or a parent (same origin, path prefix), and at least one
/// authorization server is named.
fn accept_resource_meta(server: &Url, body: &[u8]) -> Result<ResourceMeta, OAuthError> {
    let host = host_of(server);
    let bad = |why: &str| OAuthError::Protocol(format!("the protected-resource metadata of the MCP server at {host} {why}"));
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("is not JSON"))?;
    let resource = v.get("resource").and_then(Value::as_str).ok_or_else(|| bad("has no resource"))?;
    let resource_url = Url::parse(resource).map_err(|_| bad("has a resource that is not a URL"))?;
    if resource_url.fragment().is_some() || !resource_covers(&resource_url, server) {
        return Err(bad("is for another resource (its resource is not the server's URL or a parent of it)"));
    }
    let strings = |name: &str| -> Result<Vec<String>, OAuthError> {
        match v.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => {
                a.iter().map(|s| s.as_str().map(str::to_string).ok_or_else(|| bad(&format!("has a {name} that is not a list of strings")))).collect()
            }
            Some(_) => Err(bad(&format!("has a {name} that is not a list of strings"))),
        }
    };
    let authorization_servers = strings("authorization_servers")?;
    if authorization_servers.is_empty() {
        return Err(bad("names no authorization server"));
    }
    Ok(ResourceMeta { resource: resource.to_string(), authorization_servers, scopes_supported: strings("scopes_supported")? })
}

/// Is `resource` the server's URL or a parent of it: same origin, and its path a prefix of
/// the server's, on a segment boundary (trailing slashes aside)?
fn resource_covers(resource: &Url, server: &Url) -> bool {
    if resource.origin() != server.origin() {
        return false;
    }
    let rp = resource.path().trim_end_matches('/');
    let sp = server.path().trim_end_matches('/');
    rp.is_empty() || sp == rp || sp.strip_prefix(rp).is_some_and(|rest| rest.starts_with('/'))
}

/// The checked authorization server metadata.
#[derive(Debug)]
struct ServerMeta {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
    client_auth: ClientAuth,
    iss_parameter: bool,
}

/// Parses and checks the metadata of the authorization server `issuer`: the same issuer
/// (RFC 8414 §3.3), PKCE S256, the `code` response type, and https endpoints.
fn accept_server_meta(issuer: &str, body: &[u8]) -> Result<ServerMeta, OAuthError> {
    let host = host_of_str(issuer);
    let bad = |why: &str| OAuthError::Protocol(format!("the metadata of the authorization server {host} {why}"));
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("is not JSON"))?;
    let stated = v.get("issuer").and_then(Value::as_str).ok_or_else(|| bad("has no issuer"))?;
    if !same_issuer(stated, issuer) {
        return Err(bad("states another issuer than the one named by the resource (RFC 8414 §3.3): refused"));
    }
    let list = |name: &str| v.get(name).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>());
    if !list("code_challenge_methods_supported").is_some_and(|m| m.contains(&"S256")) {
        return Err(bad("does not advertise PKCE S256 (code_challenge_methods_supported), which toolrouter requires"));
    }
    if list("response_types_supported").is_some_and(|t| !t.contains(&"code")) {
        return Err(bad("does not support the authorization code flow (response_types_supported lacks code)"));
    }
    let endpoint = |name: &str, required: bool| -> Result<Option<String>, OAuthError> {
        match v.get(name).and_then(Value::as_str) {
            None if required => Err(bad(&format!("has no {name}"))),
            None => Ok(None),
            Some(u) => match Url::parse(u) {
                Ok(parsed) if secure_endpoint(&parsed) => Ok(Some(u.to_string())),
                _ => Err(bad(&format!("has a {name} that is not an https URL without fragment (plain http only on loopback)"))),
            },
        }
    };
    Ok(ServerMeta {
        issuer: stated.to_string(),
        authorization_endpoint: endpoint("authorization_endpoint", true)?.expect("required"),
        token_endpoint: endpoint("token_endpoint", true)?.expect("required"),
        registration_endpoint: endpoint("registration_endpoint", false)?,
        revocation_endpoint: endpoint("revocation_endpoint", false)?,
        client_auth: ClientAuth::from_supported(list("token_endpoint_auth_methods_supported").as_deref()),
        iss_parameter: v.get("authorization_response_iss_parameter_supported") == Some(&Value::Bool(true)),
    })
}

/// RFC 8414 §3.3: the issuer stated must be identical to the one named. A path-less issuer
/// with and without its "/" is the same URL, and is accepted either way.
fn same_issuer(stated: &str, named: &str) -> bool {
    if stated == named {
        return true;
    }
    let root = |s: &str| Url::parse(s).is_ok_and(|u| u.path() == "/" && u.query().is_none() && u.fragment().is_none());
    (stated.strip_suffix('/') == Some(named) || named.strip_suffix('/') == Some(stated)) && root(stated) && root(named)
}

/// https, or plain http to a loopback host (local development and tests); no fragment.
fn secure_endpoint(u: &Url) -> bool {
    if u.fragment().is_some() || u.host().is_none() {
        return false;
    }
    match u.scheme() {
        "https" => true,
        "http" => match u.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => false,
        },
        _ => false,
    }
}

/// `scheme://host[:port]` followed by `path`.
fn at_path(base: &Url, path: &str) -> String {
    format!("{}{path}", base.origin().ascii_serialization())
}

/// The protected-resource metadata URLs of an MCP server (RFC 9728 §3.1): the well-known
/// path inserted before the server's path, then at the root. Query and fragment are dropped.
fn resource_metadata_urls(server: &Url) -> Vec<String> {
    let path = server.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(at_path(server, &format!("/.well-known/oauth-protected-resource{path}")));
    }
    urls.push(at_path(server, "/.well-known/oauth-protected-resource"));
    urls
}

/// The metadata URLs of an issuer: RFC 8414 path insertion, then OpenID Connect discovery
/// (inserted, then appended); a path-less issuer has one of each.
fn authorization_server_metadata_urls(issuer: &Url) -> Vec<String> {
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        return vec![at_path(issuer, "/.well-known/oauth-authorization-server"), at_path(issuer, "/.well-known/openid-configuration")];
    }
    vec![
        at_path(issuer, &format!("/.well-known/oauth-authorization-server{path}")),
        at_path(issuer, &format!("/.well-known/openid-configuration{path}")),
        at_path(issuer, &format!("{path}/.well-known/openid-configuration")),
    ]
}

/// `host[:port]` of a URL, for messages.
fn host_of(u: &Url) -> String {
    match (u.host_str(), u.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        (None, _) => "a URL without host".into(),
    }
}

fn host_of_str(u: &str) -> String {
    Url::parse(u).map(|u| host_of(&u)).unwrap_or_else(|_| "an unparsable URL".into())
}

/// A failed request as an error: a policy refusal (the resolver's), a timeout, or the
/// network error's causes (never the URL).
fn request_error(what: &str, e: &reqwest::Error) -> OAuthError {
    if let Some(r) = crate::outbound::connect::find_refusal(e) {
        return OAuthError::Refused(format!("{what} is refused by the outbound policy: {r}"));
    }
    if e.is_timeout() {
        return OAuthError::Http(format!("{what} did not answer within {} s", TIMEOUT.as_secs()));
    }
    let mut causes = Vec::new();
    let mut next = std::error::Error::source(e);
    while let Some(c) = next {
        causes.push(c.to_string());
        next = c.source();
    }
    let detail = if causes.is_empty() { "the request failed".to_string() } else { causes.join(": ") };
    OAuthError::Http(format!("{what}: {detail}"))
}

#[cfg(test)]
mod tests;
