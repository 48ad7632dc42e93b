//! JWT bearer tokens (SPEC §9): issuer, audience and signature checked against a JWKS file,
//! the tenant from a claim, the other claims mapped to identity; the JWKS re-read on change.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tonic::Code;
use toolrouter::auth::jwt::{JwksSource, JwtConfig};
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
    let keys: Vec<_> =
        keys.iter().map(|(kid, x, y)| json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig", "x": x, "y": y})).collect();
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
    cfg.auth.jwt = Some(JwtConfig::new(ISSUER, AUDIENCE, JwksSource::File(jwks_file.path.clone())));
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
    let out =
        j.s.call_as(&acme, "crm", run, "c1", "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}))
            .await
            .unwrap();
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

// ----- JWKS from a URL -----

/// An issuer's JWKS endpoint: a real HTTP server on loopback whose answer the test changes,
/// counting the fetches of the document.
#[derive(Clone)]
struct Issuer {
    answer: Arc<Mutex<(u16, String)>>,
    fetches: Arc<AtomicUsize>,
    addr: SocketAddr,
    _stop: Arc<tokio_util::sync::DropGuard>,
    /// Dropped with the last clone: re-raises the test's panics.
    _panics: Arc<PanicWatch>,
}

impl Issuer {
    async fn start(jwks: &str) -> Self {
        use axum::response::IntoResponse;
        let answer = Arc::new(Mutex::new((200, jwks.to_string())));
        let fetches = Arc::new(AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let panics = PanicWatch::start(format!("the JWKS issuer on {addr}"));
        let (a, f) = (answer.clone(), fetches.clone());
        let app = axum::Router::new()
            .route(
                "/jwks",
                axum::routing::get(move || {
                    let (a, f) = (a.clone(), f.clone());
                    async move {
                        f.fetch_add(1, Ordering::SeqCst);
                        let (status, body) = a.lock().unwrap().clone();
                        (http::StatusCode::from_u16(status).unwrap(), body).into_response()
                    }
                }),
            )
            .route("/moved", axum::routing::get(|| async { (http::StatusCode::FOUND, [(http::header::LOCATION, "/jwks")]) }))
            .route(
                "/elsewhere",
                axum::routing::get(move || async move {
                    (http::StatusCode::FOUND, [(http::header::LOCATION, format!("http://localhost:{}/jwks", addr.port()))])
                }),
            )
            .route("/big", axum::routing::get(|| async { " ".repeat(2 * 1024 * 1024) }));
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(async move { stopped.cancelled().await }).await });
        Issuer { answer, fetches, addr, _stop: Arc::new(stop.drop_guard()), _panics: Arc::new(panics) }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn answer(&self, status: u16, body: &str) {
        *self.answer.lock().unwrap() = (status, body.to_string());
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn url_config(url: String, refresh: Duration, gap: Duration) -> toolrouter::config::ServerConfig {
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.auth.jwt = Some(JwtConfig { jwks_refresh: refresh, jwks_unknown_kid_gap: gap, ..JwtConfig::new(ISSUER, AUDIENCE, JwksSource::Url(url)) });
    cfg
}

const HOUR: Duration = Duration::from_secs(3600);

/// Waits (bounded) until the issuer has served `n` fetches.
async fn until_fetches(issuer: &Issuer, n: usize) {
    for _ in 0..500 {
        if issuer.fetches() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the JWKS was fetched {} times, expected {n}", issuer.fetches());
}

#[tokio::test]
async fn keys_from_a_jwks_url_are_fetched_at_start_up_and_verify_tokens() {
    let issuer = Issuer::start(&jwks(&[("k1", KEY1_X, KEY1_Y)])).await;
    let s = TestServer::start_with(url_config(issuer.url("/jwks"), HOUR, HOUR)).await;
    assert_eq!(issuer.fetches(), 1, "fetched once at start-up");
    assert!(list(&s, &sign(KEY1_PEM, "k1", &claims("acme"))).await.is_ok());
    let st = list(&s, &sign(KEY2_PEM, "k1", &claims("acme"))).await.unwrap_err();
    assert_eq!((st.code(), st.message()), (Code::Unauthenticated, "missing or invalid credentials"));
}

#[tokio::test]
async fn a_token_signed_with_a_key_the_issuer_just_added_is_accepted_on_first_use() {
    let issuer = Issuer::start(&jwks(&[("k1", KEY1_X, KEY1_Y)])).await;
    let s = TestServer::start_with(url_config(issuer.url("/jwks"), HOUR, HOUR)).await;
    issuer.answer(200, &jwks(&[("k1", KEY1_X, KEY1_Y), ("k2", KEY2_X, KEY2_Y)]));
    let before = issuer.fetches();
    assert!(list(&s, &sign(KEY2_PEM, "k2", &claims("acme"))).await.is_ok(), "no restart, no retry");
    assert_eq!(issuer.fetches(), before + 1, "the unknown kid caused one fetch");
    assert!(list(&s, &sign(KEY2_PEM, "k2", &claims("acme"))).await.is_ok());
    assert!(list(&s, &sign(KEY1_PEM, "k1", &claims("acme"))).await.is_ok());
    assert_eq!(issuer.fetches(), before + 1, "known kids cause no fetch");
}

#[tokio::test]
async fn tokens_with_unknown_kids_cause_at_most_one_fetch_per_interval() {
    let issuer = Issuer::start(&jwks(&[("k1", KEY1_X, KEY1_Y)])).await;
    let s = TestServer::start_with(url_config(issuer.url("/jwks"), HOUR, HOUR)).await;
    for i in 0..20 {
        let st = list(&s, &sign(KEY2_PEM, &format!("random-{i}"), &claims("acme"))).await.unwrap_err();
        assert_eq!(st.code(), Code::Unauthenticated);
    }
    assert_eq!(issuer.fetches(), 2, "start-up and the first unknown kid only");
    // Within the interval a newly added key waits for the periodic refresh.
    issuer.answer(200, &jwks(&[("k1", KEY1_X, KEY1_Y), ("k2", KEY2_X, KEY2_Y)]));
    assert_eq!(list(&s, &sign(KEY2_PEM, "k2", &claims("acme"))).await.unwrap_err().code(), Code::Unauthenticated);
    assert_eq!(issuer.fetches(), 2);
}

#[tokio::test]
async fn a_failing_jwks_url_keeps_the_last_good_keys_and_a_good_answer_replaces_them() {
    let issuer = Issuer::start(&jwks(&[("k1", KEY1_X, KEY1_Y)])).await;
    let s = TestServer::start_with(url_config(issuer.url("/jwks"), Duration::from_millis(30), HOUR)).await;
    let old = sign(KEY1_PEM, "k1", &claims("acme"));
    issuer.answer(503, "unavailable");
    until_fetches(&issuer, issuer.fetches() + 2).await;
    assert!(list(&s, &old).await.is_ok(), "an error status keeps the keys");
    issuer.answer(200, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#);
    until_fetches(&issuer, issuer.fetches() + 2).await;
    assert!(list(&s, &old).await.is_ok(), "a document with a symmetric key keeps the keys");
    issuer.answer(200, "<html>not json</html>");
    until_fetches(&issuer, issuer.fetches() + 2).await;
    assert!(list(&s, &old).await.is_ok(), "a document that is not a JWKS keeps the keys");

    // The periodic refresh applies a good document: k1 retired, k2 in force.
    issuer.answer(200, &jwks(&[("k2", KEY2_X, KEY2_Y)]));
    until_fetches(&issuer, issuer.fetches() + 2).await;
    assert_eq!(list(&s, &old).await.unwrap_err().code(), Code::Unauthenticated, "the retired key is refused");
    assert!(list(&s, &sign(KEY2_PEM, "k2", &claims("acme"))).await.is_ok());
}

async fn start_error(cfg: toolrouter::config::ServerConfig) -> String {
    match toolrouter::server::start(cfg).await {
        Ok(_) => panic!("the server started"),
        Err(e) => format!("{e:#}"),
    }
}

#[tokio::test]
async fn the_server_refuses_to_start_when_the_jwks_url_cannot_give_keys() {
    let issuer = Issuer::start(&jwks(&[("k1", KEY1_X, KEY1_Y)])).await;
    let unreachable = format!("http://{}/jwks", refused_endpoint().await.trim_start_matches("http://"));
    let e = start_error(url_config(unreachable, HOUR, HOUR)).await;
    assert!(e.contains("fetching the JWKS from http://127.0.0.1:"), "{e}");

    issuer.answer(500, "oops");
    let e = start_error(url_config(issuer.url("/jwks"), HOUR, HOUR)).await;
    assert!(e.contains("HTTP status 500"), "{e}");

    issuer.answer(200, r#"{"keys": "none"}"#);
    let e = start_error(url_config(issuer.url("/jwks"), HOUR, HOUR)).await;
    assert!(e.contains("not a JWKS document"), "{e}");

    let e = start_error(url_config(issuer.url("/big"), HOUR, HOUR)).await;
    assert!(e.contains("larger than"), "{e}");

    let e = start_error(url_config("http://idp.example.test/jwks".into(), HOUR, HOUR)).await;
    assert!(e.contains("must use https"), "{e}");
}

#[tokio::test]
async fn jwks_redirects_are_followed_only_within_the_same_origin() {
    let issuer = Issuer::start(&jwks(&[("k1", KEY1_X, KEY1_Y)])).await;
    let s = TestServer::start_with(url_config(issuer.url("/moved"), HOUR, HOUR)).await;
    assert!(list(&s, &sign(KEY1_PEM, "k1", &claims("acme"))).await.is_ok());
    let fetched = issuer.fetches();
    let e = start_error(url_config(issuer.url("/elsewhere"), HOUR, HOUR)).await;
    assert!(e.contains("redirect to another host, port or scheme refused"), "{e}");
    assert_eq!(issuer.fetches(), fetched, "the other host was not asked");
}
