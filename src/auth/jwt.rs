//! JWT bearer tokens (SPEC §9): signature checked against a JWKS file (re-read on change),
//! issuer and audience required, the tenant taken from a claim and the other string claims
//! mapped to identity claims.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{Principal, TENANT_CLAIM};

/// How tokens are checked.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// Required `iss`.
    pub issuer: String,
    /// Required among `aud`.
    pub audience: String,
    /// A JWKS document (`{"keys": [...]}`) on disk.
    pub jwks: PathBuf,
    /// The claim that names the tenant (default `tenant_id`).
    pub tenant_claim: String,
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
}

/// The algorithms a JWK may verify: its `alg` if it names one, else those of its key type.
/// Symmetric (`oct`) keys are refused: a JWKS holds public keys.
fn algorithms(jwk: &jsonwebtoken::jwk::Jwk) -> Result<Vec<Algorithm>, String> {
    let by_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![Algorithm::RS256, Algorithm::RS384, Algorithm::RS512, Algorithm::PS256, Algorithm::PS384, Algorithm::PS512],
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

/// Parses a JWKS document; errors name the key by position only.
fn parse_jwks(text: &[u8]) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_slice(text).map_err(|e| format!("not a JWKS document (line {}, column {})", e.line(), e.column()))?;
    let mut keys = Vec::with_capacity(set.keys.len());
    for (i, jwk) in set.keys.iter().enumerate() {
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
    /// Loads the JWKS (it must be valid at start-up) and keeps re-reading it until `stop`.
    pub async fn load(cfg: JwtConfig, reload: Duration, stop: CancellationToken) -> anyhow::Result<Arc<Self>> {
        anyhow::ensure!(!cfg.issuer.is_empty() && !cfg.audience.is_empty(), "JWT needs both an issuer and an audience");
        let text = tokio::fs::read(&cfg.jwks).await.map_err(|e| anyhow::anyhow!("cannot read the JWKS file: {}", e.kind()))?;
        let keys = parse_jwks(&text).map_err(|e| anyhow::anyhow!("the JWKS file: {e}"))?;
        tracing::info!(path = %cfg.jwks.display(), keys = keys.len(), issuer = %cfg.issuer, "JWT keys loaded");
        let v = Arc::new(Self { cfg, keys: RwLock::new(Arc::new(keys)) });
        let this = v.clone();
        super::reload::watch_file("JWKS", v.cfg.jwks.clone(), reload, stop, move |text| {
            let keys = parse_jwks(text)?;
            let n = keys.len();
            *this.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
            Ok(n)
        });
        Ok(v)
    }

    /// The principal of a valid token, or `None` (bad signature, unknown key, wrong issuer or
    /// audience, expired, no tenant claim: the caller is not told which).
    pub fn verify(&self, token: &str) -> Option<Principal> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
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
            .find_map(|k| jsonwebtoken::decode::<Map<String, Value>>(token, &k.key, &validation).ok())?
            .claims;
        let tenant = claims.get(&self.cfg.tenant_claim).and_then(Value::as_str).filter(|t| !t.is_empty() && t.len() <= 128)?.to_string();
        let mut identity: BTreeMap<String, String> = claims
            .iter()
            .filter(|(k, _)| !REGISTERED.contains(&k.as_str()))
            .filter_map(|(k, v)| Some((k.clone(), claim_text(v)?)))
            .collect();
        if let Some(sub) = identity.get("sub").cloned() {
            identity.entry("user_id".to_string()).or_insert(sub);
        }
        identity.insert(TENANT_CLAIM.to_string(), tenant.clone());
        Some(Principal { tenant, identity })
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
}
