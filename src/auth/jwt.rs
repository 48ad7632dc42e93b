//! JWT bearer tokens (SPEC §9): signature checked against the issuer's JWKS — a file re-read
//! on change, or a URL fetched at start-up, periodically and when a token names an unknown
//! key — issuer and audience required, the tenant taken from a claim and the other string
//! claims mapped to identity claims.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::jwks_url::JwksUrl;
use super::{Principal, TENANT_CLAIM};

/// Where the issuer's public keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A JWKS document (`{"keys": [...]}`) on disk, re-read when it changes.
    File(PathBuf),
    /// The issuer's JWKS endpoint (https; http only to a loopback address).
    Url(String),
}

/// How tokens are checked.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// Required `iss`.
    pub issuer: String,
    /// Required among `aud`.
    pub audience: String,
    /// The issuer's public keys.
    pub jwks: JwksSource,
    /// The claim that names the tenant (default `tenant_id`).
    pub tenant_claim: String,
    /// A JWKS URL is fetched again this often (default 5 minutes).
    pub jwks_refresh: Duration,
    /// Least time between two fetches caused by tokens naming a `kid` the keys lack
    /// (default 30 s): random `kid`s cannot turn callers into a flood on the issuer.
    pub jwks_unknown_kid_gap: Duration,
}

impl JwtConfig {
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, jwks: JwksSource) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks,
            tenant_claim: TENANT_CLAIM.to_string(),
            jwks_refresh: Duration::from_secs(300),
            jwks_unknown_kid_gap: Duration::from_secs(30),
        }
    }
}

/// Why a token was refused. Callers answer both alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Bad signature, wrong issuer or audience, expired, no tenant claim, malformed.
    Invalid,
    /// The token names a `kid` the keys from the JWKS URL lack: it may be a key the issuer
    /// has just added. A fetch has been requested; see [`JwtVerifier::refresh_for_unknown_key`].
    UnknownKey,
}

/// Registered claims that are checked, not passed on as identity.
const REGISTERED: [&str; 5] = ["iss", "aud", "exp", "nbf", "iat"];

struct Key {
    kid: Option<String>,
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

pub struct JwtVerifier {
    cfg: JwtConfig,
    keys: RwLock<Arc<Vec<Key>>>,
    remote: Option<Remote>,
}

/// A JWKS URL and its fetches.
struct Remote {
    url: JwksUrl,
    /// Held during every fetch, so one result never overwrites a newer one; holds when the
    /// last fetch for an unknown `kid` started.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    /// Wakes the refresh task for an unknown `kid` seen by a caller that cannot wait.
    wake: Notify,
}

/// The algorithms a JWK may verify: its `alg` if it names one, else those of its key type.
/// Symmetric (`oct`) keys are refused: a JWKS holds public keys.
fn algorithms(jwk: &jsonwebtoken::jwk::Jwk) -> Result<Vec<Algorithm>, String> {
    let by_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => {
            vec![Algorithm::RS256, Algorithm::RS384, Algorithm::RS512, Algorithm::PS256, Algorithm::PS384, Algorithm::PS512]
        }
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return Err("unsupported elliptic curve".into()),
        },
        AlgorithmParameters::OctetKeyPair(_) => vec![Algorithm::EdDSA],
        AlgorithmParameters::OctetKey(_) => return Err("symmetric (oct) keys are not accepted".into()),
        _ => return Err("unsupported key type".into()),
    };
    match jwk.common.key_algorithm {
        None => Ok(by_type),
        Some(a) => {
            let a = Algorithm::try_from(a).map_err(|_| "unsupported \"alg\"".to_string())?;
            if by_type.contains(&a) { Ok(vec![a]) } else { Err("\"alg\" does not fit the key type".into()) }
        }
    }
}

/// Parses a JWKS document; errors name the key by position only. Encryption keys (`"use":
/// "enc"`, which issuers such as Keycloak publish beside their signing keys) are skipped.
fn parse_jwks(text: &[u8]) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_slice(text).map_err(|e| format!("not a JWKS document (line {}, column {})", e.line(), e.column()))?;
    let mut keys = Vec::with_capacity(set.keys.len());
    for (i, jwk) in set.keys.iter().enumerate() {
        if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
            continue;
        }
        let algorithms = algorithms(jwk).map_err(|e| format!("key {i}: {e}"))?;
        let key = DecodingKey::from_jwk(jwk).map_err(|_| format!("key {i}: not a usable public key"))?;
        keys.push(Key { kid: jwk.common.key_id.clone(), key, algorithms });
    }
    Ok(keys)
}

fn claim_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl JwtVerifier {
    /// Loads the JWKS (it must be valid at start-up) and keeps it current until `stop`: a file
    /// is re-read every `reload` when it changes, a URL fetched every `jwks_refresh`.
    pub async fn load(cfg: JwtConfig, reload: Duration, stop: CancellationToken) -> anyhow::Result<Arc<Self>> {
        anyhow::ensure!(!cfg.issuer.is_empty() && !cfg.audience.is_empty(), "JWT needs both an issuer and an audience");
        match cfg.jwks.clone() {
            JwksSource::File(path) => {
                let text = tokio::fs::read(&path).await.map_err(|e| anyhow::anyhow!("cannot read the JWKS file: {}", e.kind()))?;
                let keys = parse_jwks(&text).map_err(|e| anyhow::anyhow!("the JWKS file: {e}"))?;
                tracing::info!(path = %path.display(), keys = keys.len(), issuer = %cfg.issuer, "JWT keys loaded");
                let v = Arc::new(Self { cfg, keys: RwLock::new(Arc::new(keys)), remote: None });
                let this = v.clone();
                super::reload::watch_file("JWKS", path, text, reload, stop, move |text| {
                    let keys = parse_jwks(text)?;
                    let n = keys.len();
                    this.install(keys);
                    Ok(n)
                });
                Ok(v)
            }
            JwksSource::Url(url) => {
                let url = JwksUrl::new(&url)?;
                let text = url.fetch().await?;
                let keys = parse_jwks(&text).map_err(|e| anyhow::anyhow!("the JWKS at {}: {e}", url.shown()))?;
                tracing::info!(url = %url.shown(), keys = keys.len(), issuer = %cfg.issuer, "JWT keys fetched");
                let remote = Remote { url, fetching: tokio::sync::Mutex::new(None), wake: Notify::new() };
                let v = Arc::new(Self { cfg, keys: RwLock::new(Arc::new(keys)), remote: Some(remote) });
                v.clone().keep_fetching(stop);
                Ok(v)
            }
        }
    }

    fn install(&self, keys: Vec<Key>) {
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
    }

    /// Fetches the JWKS URL every `jwks_refresh`, and when a caller saw an unknown `kid`.
    fn keep_fetching(self: Arc<Self>, stop: CancellationToken) {
        tokio::spawn(async move {
            let Some(remote) = &self.remote else { return };
            let every = self.cfg.jwks_refresh.max(Duration::from_millis(10));
            let mut tick = tokio::time::interval_at(Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {
                        let _fetching = remote.fetching.lock().await;
                        self.fetch(remote).await;
                    }
                    _ = remote.wake.notified() => self.refresh_for_unknown_key().await,
                }
            }
        });
    }

    /// One fetch; a failure or a document that does not parse keeps the keys in force.
    async fn fetch(&self, remote: &Remote) {
        let fetched = match remote.url.fetch().await {
            Ok(text) => parse_jwks(&text),
            Err(e) => Err(e.to_string()),
        };
        match fetched {
            Ok(keys) => {
                let kids = |keys: &[Key]| keys.iter().map(|k| k.kid.clone()).collect::<Vec<_>>();
                let before = kids(&self.keys.read().unwrap_or_else(|e| e.into_inner()));
                if kids(&keys) != before {
                    tracing::info!(url = %remote.url.shown(), keys = keys.len(), "JWT keys changed");
                }
                self.install(keys);
            }
            Err(e) => tracing::warn!(url = %remote.url.shown(), error = %e, "JWKS refresh failed; keeping the keys in force"),
        }
    }

    /// After [`Rejection::UnknownKey`]: fetches the JWKS again, unless a fetch for an unknown
    /// `kid` started less than `jwks_unknown_kid_gap` ago; concurrent callers share one fetch.
    /// Returns once the keys are as current as they will get; then verify again.
    pub async fn refresh_for_unknown_key(&self) {
        let Some(remote) = &self.remote else { return };
        let mut last = remote.fetching.lock().await;
        if last.is_some_and(|t| t.elapsed() < self.cfg.jwks_unknown_kid_gap) {
            return;
        }
        *last = Some(Instant::now());
        self.fetch(remote).await;
    }

    /// The principal of a valid token. Why a token fails is not told to the caller.
    pub fn verify(&self, token: &str) -> Result<Principal, Rejection> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Rejection::Invalid)?;
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(remote) = &self.remote
            && header.kid.is_some()
            && !keys.iter().any(|k| k.kid == header.kid)
        {
            remote.wake.notify_one();
            return Err(Rejection::UnknownKey);
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.cfg.issuer]);
        validation.set_audience(&[&self.cfg.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        // The key named by `kid`, or (without one) each key that fits the algorithm.
        let claims = keys
            .iter()
            .filter(|k| k.algorithms.contains(&header.alg))
            .filter(|k| header.kid.is_none() || k.kid == header.kid)
            .find_map(|k| jsonwebtoken::decode::<Map<String, Value>>(token, &k.key, &validation).ok())
            .ok_or(Rejection::Invalid)?
            .claims;
        let tenant = claims
            .get(&self.cfg.tenant_claim)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty() && t.len() <= 128)
            .ok_or(Rejection::Invalid)?
            .to_string();
        let mut identity: BTreeMap<String, String> =
            claims.iter().filter(|(k, _)| !REGISTERED.contains(&k.as_str())).filter_map(|(k, v)| Some((k.clone(), claim_text(v)?))).collect();
        if let Some(sub) = identity.get("sub").cloned() {
            identity.entry("user_id".to_string()).or_insert(sub);
        }
        identity.insert(TENANT_CLAIM.to_string(), tenant.clone());
        Ok(Principal { tenant, identity })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_keys_and_unknown_documents_are_refused() {
        assert!(parse_jwks(br#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).err().unwrap().contains("symmetric"));
        assert!(parse_jwks(b"[]").is_err());
        assert!(parse_jwks(br#"{"keys":[]}"#).unwrap().is_empty());
    }

    #[test]
    fn encryption_keys_beside_the_signing_keys_are_skipped() {
        let doc = br#"{"keys":[
            {"kty":"RSA","use":"enc","alg":"RSA-OAEP","kid":"enc-1","n":"AQAB","e":"AQAB"},
            {"kty":"EC","crv":"P-256","kid":"sig-1","alg":"ES256","use":"sig",
             "x":"uJjm4O0Ml8SxTWWKmpwaj3CQ-Lz78eUJbQNAfnk2b2Y","y":"w2Yk0otMCNtZaiCF147aNSG5I078PfJaq1_3d-hTAro"}]}"#;
        let keys = parse_jwks(doc).unwrap();
        assert_eq!(keys.iter().map(|k| k.kid.as_deref()).collect::<Vec<_>>(), [Some("sig-1")]);
    }
}
