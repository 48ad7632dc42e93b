//! JWT bearer tokens (SPEC §9): issuer, audience and signature checked against a JWKS file,
//! the tenant from a claim, the other claims mapped to identity; the JWKS re-read on change.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tonic::Code;
use toolrouter::auth::jwt::JwtConfig;
use toolrouter::pb;

// Two P-256 test key pairs (made with `openssl ecparam -name prime256v1 -genkey`), used only here.
const KEY1_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgEwouXRuOy8xJc95a
3BMzCe2c6Ur4Ebblbw/UhnIp+iqhRANCAAS4mObg7QyXxLFNZYqanBqPcJD4vPvx
5QltA0B+eTZvZsNmJNKLTAjbWWoghdeO2jUhuSNO/D3yWqtf93foUwK6
-----END PRIVATE KEY-----
";
const KEY1_X: &str = "uJjm4O0Ml8SxTWWKmpwaj3CQ-Lz78eUJbQNAfnk2b2Y";
const KEY1_Y: &str = "w2Yk0otMCNtZaiCF147aNSG5I078PfJaq1_3d-hTAro";
const KEY2_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg/+tvxQ9uZLv25n0b
gym3qzjQDOBBDu7RVPODwjOMaiqhRANCAASIjGUfaSJ2+JUQukYcxjEyj2tnDvED
pyJEXU+WJPblGYaVpW/EHZ7iBUVSMsUf8E26RjF+KHolW5mXFzV9Nz5e
-----END PRIVATE KEY-----
";
const KEY2_X: &str = "iIxlH2kidviVELpGHMYxMo9rZw7xA6ciRF1PliT25Rk";
const KEY2_Y: &str = "hpWlb8QdnuIFRVIyxR_wTbpGMX4oeiVbmZcXNX03Pl4";

const ISSUER: &str = "https://idp.example.test";
const AUDIENCE: &str = "toolrouter";

fn jwks(keys: &[(&str, &str, &str)]) -> String {
    let keys: Vec<_> = keys.iter().map(|(kid, x, y)| json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig", "x": x, "y": y})).collect();
    json!({ "keys": keys }).to_string()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn claims(tenant: &str) -> serde_json::Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600, "iat": now(), "sub": "user-42", "tenant_id": tenant, "team": "blue"})
}

fn sign(pem: &str, kid: &str, claims: &serde_json::Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_pem(pem.as_bytes()).unwrap()).unwrap()
}

struct Jwt {
    s: TestServer,
    jwks: KeyFile,
    _keys: KeyFile,
}

async fn start() -> Jwt {
    let jwks_file = KeyFile::new(&jwks(&[("k1", KEY1_X, KEY1_Y)]));
    let keys = KeyFile::with_keys(&[("plain-api-key-7a1", "acme")]);
    let mut cfg = config_with_keys(&keys);
    cfg.auth.jwt = Some(JwtConfig { issuer: ISSUER.into(), audience: AUDIENCE.into(), jwks: jwks_file.path.clone(), tenant_claim: "tenant_id".into() });
    Jwt { s: TestServer::start_with(cfg).await, jwks: jwks_file, _keys: keys }
}

async fn list(s: &TestServer, token: &str) -> Result<Vec<String>, tonic::Status> {
    let r = s.registry_as(token).list_agents(pb::ListAgentsRequest::default()).await?;
    Ok(r.into_inner().agents.into_iter().map(|a| a.agent_id).collect())
}

#[tokio::test]
async fn a_valid_token_acts_for_the_tenant_of_its_claim_with_its_claims_as_identity() {
    let j = start().await;
    let exec = spawn_executor(Behaviour::Echo).await;
    let acme = sign(KEY1_PEM, "k1", &claims("acme"));
    j.s.create_as(&acme, "crm", crm_definition(&exec.endpoint())).await;
    assert_eq!(list(&j.s, "plain-api-key-7a1").await.unwrap(), ["crm"], "the API key of the same tenant sees it");
    assert!(list(&j.s, &sign(KEY1_PEM, "k1", &claims("globex"))).await.unwrap().is_empty(), "another tenant's token does not");

    let mut run = run_ctx("r1");
    run.identity = [("user_id".to_string(), "eve".to_string()), ("tenant_id".to_string(), "globex".to_string())].into();
    let out = j.s.call_as(&acme, "crm", run, "c1", "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})).await.unwrap();
    assert_eq!(result_of(&out), (json!("Ada"), false));
    let identity = exec.exec.last.lock().unwrap().clone().unwrap().run.unwrap().identity;
    assert_eq!(identity["tenant_id"], "acme");
    assert_eq!(identity["user_id"], "user-42", "sub is the user, and the token's claims win");
    assert_eq!(identity["team"], "blue");
    assert!(!identity.contains_key("exp") && !identity.contains_key("iss"), "registered claims are checked, not passed on");
}

#[tokio::test]
async fn tokens_with_a_wrong_issuer_audience_key_or_expiry_and_unsigned_tokens_are_unauthenticated() {
    let j = start().await;
    let mut wrong_iss = claims("acme");
    wrong_iss["iss"] = json!("https://evil.example.test");
    let mut wrong_aud = claims("acme");
    wrong_aud["aud"] = json!("someone-else");
    let mut expired = claims("acme");
    expired["exp"] = json!(now() - 3600);
    let mut no_tenant = claims("acme");
    no_tenant.as_object_mut().unwrap().remove("tenant_id");
    let mut not_yet = claims("acme");
    not_yet["nbf"] = json!(now() + 3600);
    let b64 = |v: &serde_json::Value| base64_url_safe(&v.to_string());
    let unsigned = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(&claims("acme")));
    let cases = [
        ("wrong issuer", sign(KEY1_PEM, "k1", &wrong_iss)),
        ("wrong audience", sign(KEY1_PEM, "k1", &wrong_aud)),
        ("expired", sign(KEY1_PEM, "k1", &expired)),
        ("not yet valid", sign(KEY1_PEM, "k1", &not_yet)),
        ("no tenant claim", sign(KEY1_PEM, "k1", &no_tenant)),
        ("signed by a key not in the JWKS", sign(KEY2_PEM, "k1", &claims("acme"))),
        ("unknown kid", sign(KEY2_PEM, "k2", &claims("acme"))),
        ("alg none", unsigned),
    ];
    for (what, token) in cases {
        let st = list(&j.s, &token).await.unwrap_err();
        assert_eq!(st.code(), Code::Unauthenticated, "{what}");
        assert_eq!(st.message(), "missing or invalid credentials", "{what}");
    }
    assert!(list(&j.s, &sign(KEY1_PEM, "k1", &claims("acme"))).await.is_ok());
}

/// Unpadded base64url, for hand-made tokens.
fn base64_url_safe(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let b = s.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &c)| n | (c as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test]
async fn a_rotated_jwks_file_is_applied_without_restart() {
    let j = start().await;
    let old = sign(KEY1_PEM, "k1", &claims("acme"));
    let new = sign(KEY2_PEM, "k2", &claims("acme"));
    assert!(list(&j.s, &old).await.is_ok());
    assert!(list(&j.s, &new).await.is_err());
    j.jwks.replace(&jwks(&[("k2", KEY2_X, KEY2_Y)]));
    let mut applied = false;
    for _ in 0..250 {
        if list(&j.s, &new).await.is_ok() {
            applied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(applied, "the new key is used");
    assert_eq!(list(&j.s, &old).await.unwrap_err().code(), Code::Unauthenticated, "the retired key is not");
}
