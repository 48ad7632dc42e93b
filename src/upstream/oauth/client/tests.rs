use super::*;

fn discovered(endpoint: &str) -> Discovered {
    Discovered {
        resource: "https://mcp.example.com/mcp".into(),
        issuer: "https://as.example.com".into(),
        authorization_endpoint: endpoint.into(),
        token_endpoint: "https://as.example.com/token".into(),
        registration_endpoint: None,
        revocation_endpoint: None,
        scopes: vec![],
        client_auth: ClientAuth::ClientSecretPost,
        iss_parameter: false,
    }
}

fn query(url: &str) -> Vec<(String, String)> {
    Url::parse(url).unwrap().query_pairs().into_owned().collect()
}

#[test]
fn resource_metadata_urls_insert_the_path_then_try_the_root() {
    let u = |s: &str| resource_metadata_urls(&Url::parse(s).unwrap());
    assert_eq!(
        u("https://example.com/public/mcp"),
        ["https://example.com/.well-known/oauth-protected-resource/public/mcp", "https://example.com/.well-known/oauth-protected-resource"]
    );
    assert_eq!(
        u("http://127.0.0.1:8080/mcp/?key=secret#x"),
        ["http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp", "http://127.0.0.1:8080/.well-known/oauth-protected-resource"]
    );
    assert_eq!(u("https://example.com"), ["https://example.com/.well-known/oauth-protected-resource"]);
    assert_eq!(u("https://example.com:443/"), ["https://example.com/.well-known/oauth-protected-resource"]);
}

#[test]
fn authorization_server_metadata_urls_follow_rfc_8414_then_oidc() {
    let u = |s: &str| authorization_server_metadata_urls(&Url::parse(s).unwrap());
    assert_eq!(
        u("https://as.example.com"),
        ["https://as.example.com/.well-known/oauth-authorization-server", "https://as.example.com/.well-known/openid-configuration"]
    );
    assert_eq!(
        u("https://login.example.com/tenant1/v2.0/"),
        [
            "https://login.example.com/.well-known/oauth-authorization-server/tenant1/v2.0",
            "https://login.example.com/.well-known/openid-configuration/tenant1/v2.0",
            "https://login.example.com/tenant1/v2.0/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn the_authorize_url_carries_every_parameter() {
    let d = discovered("https://as.example.com/authorize");
    let url = authorize_url(&d, "client 1", "https://tr.example.com/oauth/callback", &["mcp".into(), "read:all".into()], "st&ate", "chal");
    assert!(url.starts_with("https://as.example.com/authorize?response_type=code&"), "{url}");
    let q = query(&url);
    let get = |k: &str| q.iter().filter(|(n, _)| n == k).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    assert_eq!(get("response_type"), ["code"]);
    assert_eq!(get("client_id"), ["client 1"]);
    assert_eq!(get("redirect_uri"), ["https://tr.example.com/oauth/callback"]);
    assert_eq!(get("scope"), ["mcp read:all"]);
    assert_eq!(get("state"), ["st&ate"]);
    assert_eq!(get("code_challenge"), ["chal"]);
    assert_eq!(get("code_challenge_method"), ["S256"]);
    assert_eq!(get("resource"), ["https://mcp.example.com/mcp"]);
    assert_eq!(q.len(), 8);

    // No scope: omitted. An endpoint's own query is kept.
    let d = discovered("https://as.example.com/oauth2/authorize?tenant=a");
    let url = authorize_url(&d, "c", "https://tr/cb", &[], "s", "c");
    assert!(url.starts_with("https://as.example.com/oauth2/authorize?tenant=a&response_type=code&"), "{url}");
    let q = query(&url);
    assert!(!q.iter().any(|(n, _)| n == "scope"), "{url}");
    assert_eq!(q.len(), 8);
    let url = authorize_url(&d, "c", "https://tr/cb", &[" ".into()], "s", "c");
    assert!(!query(&url).iter().any(|(n, _)| n == "scope"), "{url}");
}

#[test]
fn pkce_is_s256_of_a_43_character_verifier() {
    let (verifier, challenge) = pkce();
    assert_eq!(verifier.len(), 43);
    assert!(verifier.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    assert_eq!(challenge, URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())));
    assert_ne!(pkce().0, verifier);
    // RFC 7636 appendix B.
    assert_eq!(URL_SAFE_NO_PAD.encode(Sha256::digest(b"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
}

#[test]
fn www_authenticate_bearer_parameters_are_parsed() {
    let c = parse_bearer_challenge(
        r#"Bearer error="invalid_token", error_description="Authentication required", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp""#,
    )
    .unwrap();
    assert_eq!(c.resource_metadata.as_deref(), Some("http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp"));
    assert_eq!(c.error.as_deref(), Some("invalid_token"));
    assert_eq!(c.scope, None);

    // Quoted values with commas, escapes and spaces; unquoted values; the scheme and the
    // parameter names in any case; another scheme first.
    let c = parse_bearer_challenge(
        r#"Basic realm="a, \"b\"", bearer Scope="mcp files:read" ,RESOURCE_METADATA=https://x.example/prm, error=insufficient_scope"#,
    )
    .unwrap();
    assert_eq!(c.scope.as_deref(), Some("mcp files:read"));
    assert_eq!(c.resource_metadata.as_deref(), Some("https://x.example/prm"));
    assert_eq!(c.error.as_deref(), Some("insufficient_scope"));

    // A Bearer challenge's parameters are its own: Basic's realm is not taken.
    let c = parse_bearer_challenge(r#"Bearer, Basic scope="x""#).unwrap();
    assert_eq!(c, BearerChallenge::default());
    let c = parse_bearer_challenge(r#"Bearer realm="x \\ y", scope="a\"b""#).unwrap();
    assert_eq!(c.scope.as_deref(), Some("a\"b"));

    assert_eq!(parse_bearer_challenge(r#"Basic realm="x""#), None);
    assert_eq!(parse_bearer_challenge(""), None);
    // Unterminated quotes and stray '=' do not panic.
    assert!(parse_bearer_challenge(r#"Bearer scope="mcp"#).is_some());
    for garbage in ["= = Bearer ==", "Bearer =", "=", ",,,", "Bearer scope=\"\\"] {
        let _ = parse_bearer_challenge(garbage);
    }
}

#[test]
fn the_resource_must_be_the_server_or_a_parent() {
    let covers = |r: &str, s: &str| resource_covers(&Url::parse(r).unwrap(), &Url::parse(s).unwrap());
    assert!(covers("https://h/mcp", "https://h/mcp"));
    assert!(covers("https://h/mcp", "https://h/mcp/"));
    assert!(covers("https://h/", "https://h/mcp"));
    assert!(covers("https://h", "https://h/a/b"));
    assert!(covers("https://h/a", "https://h/a/b"));
    assert!(!covers("https://h/a", "https://h/ab"));
    assert!(!covers("https://h/mcp/x", "https://h/mcp"));
    assert!(!covers("https://other/mcp", "https://h/mcp"));
    assert!(!covers("http://h/mcp", "https://h/mcp"));
    assert!(!covers("https://h:8443/mcp", "https://h/mcp"));

    let server = Url::parse("https://h/mcp").unwrap();
    let meta = accept_resource_meta(&server, br#"{"resource":"https://h/mcp","authorization_servers":["https://as"],"scopes_supported":["a","b"]}"#)
        .unwrap();
    assert_eq!(meta.authorization_servers, ["https://as"]);
    assert_eq!(meta.scopes_supported, ["a", "b"]);
    for bad in [
        &br#"{"resource":"https://evil/mcp","authorization_servers":["https://as"]}"#[..],
        br#"{"resource":"https://h/mcp","authorization_servers":[]}"#,
        br#"{"authorization_servers":["https://as"]}"#,
        br#"{"resource":"https://h/mcp","authorization_servers":[1]}"#,
        b"<html>",
    ] {
        assert!(matches!(accept_resource_meta(&server, bad), Err(OAuthError::Protocol(_))), "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn server_metadata_needs_the_same_issuer_s256_and_safe_endpoints() {
    let meta = |issuer: &str, extra: &str| {
        format!(
            r#"{{"issuer":"{issuer}","authorization_endpoint":"https://as.example.com/authorize","token_endpoint":"https://as.example.com/token",
                "response_types_supported":["code"],"code_challenge_methods_supported":["plain","S256"]{extra}}}"#
        )
    };
    let ok = accept_server_meta(
        "https://as.example.com",
        meta("https://as.example.com", r#","registration_endpoint":"https://as.example.com/register""#).as_bytes(),
    )
    .unwrap();
    assert_eq!(ok.issuer, "https://as.example.com");
    assert_eq!(ok.token_endpoint, "https://as.example.com/token");
    assert_eq!(ok.registration_endpoint.as_deref(), Some("https://as.example.com/register"));
    assert_eq!(ok.revocation_endpoint, None);
    // A path-less issuer with or without its "/".
    assert!(accept_server_meta("https://as.example.com", meta("https://as.example.com/", "").as_bytes()).is_ok());
    assert!(accept_server_meta("https://as.example.com/", meta("https://as.example.com", "").as_bytes()).is_ok());

    let err = |named: &str, body: String| match accept_server_meta(named, body.as_bytes()) {
        Err(OAuthError::Protocol(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(err("https://as.example.com", meta("https://evil.example.com", "")).contains("another issuer"));
    assert!(err("https://as.example.com/t1", meta("https://as.example.com/t1/", "")).contains("another issuer"));
    assert!(err("https://as.example.com/t1", meta("https://as.example.com", "")).contains("another issuer"));
    let no_s256 = meta("https://as.example.com", "").replace(r#"["plain","S256"]"#, r#"["plain"]"#);
    assert!(err("https://as.example.com", no_s256).contains("S256"));
    let absent = meta("https://as.example.com", "").replace(r#","code_challenge_methods_supported":["plain","S256"]"#, "");
    assert!(err("https://as.example.com", absent).contains("S256"));
    let http = meta("https://as.example.com", "").replace("https://as.example.com/token", "http://as.example.com/token");
    assert!(err("https://as.example.com", http).contains("token_endpoint"));
    let implicit = meta("https://as.example.com", "").replace(r#"["code"]"#, r#"["token"]"#);
    assert!(err("https://as.example.com", implicit).contains("code"));
    // Loopback may be plain http (tests, local development).
    let local = meta("http://127.0.0.1:9", "").replace("https://as.example.com", "http://127.0.0.1:9");
    assert!(accept_server_meta("http://127.0.0.1:9", local.as_bytes()).is_ok());
}

#[test]
fn the_client_auth_method_follows_the_metadata() {
    let pick = |m: Option<&[&str]>| ClientAuth::from_supported(m);
    assert_eq!(pick(None), ClientAuth::ClientSecretPost);
    assert_eq!(pick(Some(&["client_secret_basic", "client_secret_post"])), ClientAuth::ClientSecretPost);
    assert_eq!(pick(Some(&["private_key_jwt", "client_secret_basic"])), ClientAuth::ClientSecretBasic);
    assert_eq!(pick(Some(&["client_secret_basic"])), ClientAuth::ClientSecretBasic);
    // Neither: post is as good a guess as any.
    assert_eq!(pick(Some(&["private_key_jwt"])), ClientAuth::ClientSecretPost);
    assert_eq!(pick(Some(&[])), ClientAuth::ClientSecretPost);
    assert_eq!(ClientAuth::from_name("client_secret_basic"), Some(ClientAuth::ClientSecretBasic));
    assert_eq!(ClientAuth::from_name("client_secret_post"), Some(ClientAuth::ClientSecretPost));
    assert_eq!(ClientAuth::from_name("none"), None);

    let meta = |extra: &str| {
        format!(
            r#"{{"issuer":"https://as.example.com","authorization_endpoint":"https://as.example.com/authorize","token_endpoint":"https://as.example.com/token",
                "code_challenge_methods_supported":["S256"]{extra}}}"#
        )
    };
    let m = accept_server_meta("https://as.example.com", meta("").as_bytes()).unwrap();
    assert_eq!((m.client_auth, m.iss_parameter), (ClientAuth::ClientSecretPost, false));
    let m = accept_server_meta(
        "https://as.example.com",
        meta(r#","token_endpoint_auth_methods_supported":["client_secret_basic"],"authorization_response_iss_parameter_supported":true"#).as_bytes(),
    )
    .unwrap();
    assert_eq!((m.client_auth, m.iss_parameter), (ClientAuth::ClientSecretBasic, true));
    let m = accept_server_meta("https://as.example.com", meta(r#","authorization_response_iss_parameter_supported":"true""#).as_bytes()).unwrap();
    assert!(!m.iss_parameter, "only the JSON true");
}

#[test]
fn client_creds_sealed_before_the_method_was_kept_read_as_post() {
    let c: ClientCreds = serde_json::from_str(r#"{"client_id":"c","client_secret":"s"}"#).unwrap();
    assert_eq!(c.auth, ClientAuth::ClientSecretPost);
    let c = ClientCreds { client_id: "c".into(), client_secret: Some("s".into()), auth: ClientAuth::ClientSecretBasic };
    let json = serde_json::to_string(&c).unwrap();
    assert!(json.contains(r#""auth":"client_secret_basic""#), "{json}");
    assert_eq!(serde_json::from_str::<ClientCreds>(&json).unwrap(), c);
}

#[test]
fn basic_authorization_form_urlencodes_then_base64s() {
    let decode = |h: String| String::from_utf8(STANDARD.decode(h.strip_prefix("Basic ").unwrap()).unwrap()).unwrap();
    assert_eq!(basic_authorization("client", "secret"), format!("Basic {}", STANDARD.encode("client:secret")));
    // RFC 6749 §2.3.1: application/x-www-form-urlencoded first (so ':' in the id cannot split it).
    assert_eq!(decode(basic_authorization("a:b c", "p@ss/w%rd+=")), "a%3Ab+c:p%40ss%2Fw%25rd%2B%3D");
    assert_eq!(decode(basic_authorization("é", "")), "%C3%A9:");

    let post = ClientCreds { client_id: "c 1".into(), client_secret: Some("s&1".into()), auth: ClientAuth::ClientSecretPost };
    assert_eq!(token_form(&[("grant_type", "refresh_token")], &post, Some("s&1")), "grant_type=refresh_token&client_id=c+1&client_secret=s%261");
    assert_eq!(token_form(&[("grant_type", "refresh_token")], &post, None), "grant_type=refresh_token&client_id=c+1");
}

/// A one-request token endpoint on loopback: answers a token and hands back the request
/// (head and body) it got.
async fn token_endpoint_once() -> (String, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let served = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = sock.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text[..end]
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
                    .unwrap_or(0);
                if got.len() >= end + 4 + len || n == 0 {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let body = r#"{"access_token":"AT","token_type":"Bearer","expires_in":60}"#;
        let answer =
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        sock.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&got).to_string()
    });
    (url, served)
}

#[tokio::test]
async fn token_requests_authenticate_as_the_client_auth_method_says() {
    let outbound = crate::outbound::Outbound::from_config(&crate::outbound::OutboundConfig::default()).unwrap();
    let http = OAuthHttp::new(&outbound);

    let basic = ClientCreds { client_id: "tr:1".into(), client_secret: Some("s3 cr3t".into()), auth: ClientAuth::ClientSecretBasic };
    let (url, served) = token_endpoint_once().await;
    http.exchange(&url, &basic, "code-1", "verifier-1", "https://tr/cb", "https://h/mcp").await.expect("exchange");
    let got = served.await.unwrap();
    let expected = format!("authorization: basic {}", STANDARD.encode("tr%3A1:s3+cr3t")).to_ascii_lowercase();
    assert!(got.to_ascii_lowercase().contains(&expected), "{got}");
    assert!(!got.contains("client_secret="), "one method per request: {got}");
    assert!(got.contains("client_id=tr%3A1"), "{got}");

    let (url, served) = token_endpoint_once().await;
    http.refresh(&url, &basic, "rt-1", "https://h/mcp").await.expect("refresh");
    let got = served.await.unwrap();
    assert!(got.to_ascii_lowercase().contains(&expected) && got.contains("grant_type=refresh_token"), "{got}");

    let post = ClientCreds { auth: ClientAuth::ClientSecretPost, ..basic.clone() };
    let (url, served) = token_endpoint_once().await;
    http.refresh(&url, &post, "rt-1", "https://h/mcp").await.expect("refresh");
    let got = served.await.unwrap();
    assert!(!got.to_ascii_lowercase().contains("authorization:") && got.contains("client_secret=s3+cr3t"), "{got}");

    // A public client sends neither, whatever the method.
    let public = ClientCreds { client_secret: None, ..basic };
    let (url, served) = token_endpoint_once().await;
    http.refresh(&url, &public, "rt-1", "https://h/mcp").await.expect("refresh");
    let got = served.await.unwrap();
    assert!(!got.to_ascii_lowercase().contains("authorization:") && !got.contains("client_secret="), "{got}");
}

#[test]
fn token_answers_and_errors() {
    let what = "the token endpoint (as)";
    let t = parse_token_response(
        what,
        StatusCode::OK,
        br#"{"access_token":"AT","token_type":"bearer","expires_in":"3600","refresh_token":"RT","scope":"mcp"}"#,
        &[],
    )
    .unwrap();
    assert_eq!((t.access_token.as_str(), t.refresh_token.as_deref(), t.expires_in, t.scope.as_deref()), ("AT", Some("RT"), Some(3600), Some("mcp")));
    let debug = format!("{t:?}");
    assert!(!debug.contains("AT\"") && !debug.contains("RT\""), "{debug}");
    let t = parse_token_response(what, StatusCode::OK, br#"{"access_token":"AT","expires_in":60}"#, &[]).unwrap();
    assert_eq!((t.refresh_token, t.expires_in), (None, Some(60)));

    assert!(matches!(parse_token_response(what, StatusCode::OK, br#"{"access_token":"AT","token_type":"mac"}"#, &[]), Err(OAuthError::Protocol(_))));
    assert!(matches!(parse_token_response(what, StatusCode::OK, br#"{"token_type":"Bearer"}"#, &[]), Err(OAuthError::Protocol(_))));

    let secret = "refresh-token-value-123";
    let e = parse_token_response(
        what,
        StatusCode::BAD_REQUEST,
        format!(r#"{{"error":"invalid_grant","error_description":"token {secret} was rotated"}}"#).as_bytes(),
        &[secret],
    )
    .unwrap_err();
    assert!(matches!(&e, OAuthError::InvalidGrant(m) if m.contains("invalid_grant") && m.contains("[redacted]") && !m.contains(secret)), "{e:?}");
    let e = parse_token_response(what, StatusCode::UNAUTHORIZED, br#"{"error":"invalid_client"}"#, &[]).unwrap_err();
    assert!(matches!(&e, OAuthError::Protocol(m) if m.contains("invalid_client")), "{e:?}");
    let e = parse_token_response(what, StatusCode::BAD_GATEWAY, b"<html>", &[]).unwrap_err();
    assert!(matches!(&e, OAuthError::Http(m) if m.contains("502")), "{e:?}");
    // Redacted before it is shortened; control characters dropped.
    let long = format!("{}\n{secret}{}", "x".repeat(185), "y".repeat(100));
    assert_eq!(describe(&long, &[secret]), format!(": {}[redacted]{}…", "x".repeat(185), "y".repeat(5)));
    assert_eq!(describe("  ", &[]), "");
}

#[test]
fn creds_debug_hides_the_secret() {
    let c = ClientCreds { client_id: "cid".into(), client_secret: Some("s3cr3t".into()), auth: ClientAuth::ClientSecretBasic };
    let d = format!("{c:?}");
    assert!(d.contains("cid") && !d.contains("s3cr3t"), "{d}");
}

#[tokio::test]
async fn a_url_the_policy_refuses_is_never_requested() {
    let outbound =
        crate::outbound::Outbound::from_config(&crate::outbound::OutboundConfig { allow: vec!["*.example.com".into()], ..Default::default() })
            .unwrap();
    let http = OAuthHttp::new(&outbound);
    let e = http.discover("http://127.0.0.1:9/mcp?key=hunter2").await.unwrap_err();
    assert!(matches!(&e, OAuthError::Refused(m) if m.contains("127.0.0.1:9") && !m.contains("hunter2")), "{e:?}");
    let creds = ClientCreds { client_id: "c".into(), client_secret: Some("s3cr3t".into()), auth: ClientAuth::ClientSecretPost };
    let e = http.refresh("https://10.0.0.1/token", &creds, "rt-value", "https://h/mcp").await.unwrap_err();
    assert!(matches!(&e, OAuthError::Refused(m) if m.contains("10.0.0.1") && !m.contains("rt-value") && !m.contains("s3cr3t")), "{e:?}");
}

/// The OAuth fixture server (tests/mcp/oauth_server.py), killed when dropped.
struct Fixture {
    child: std::process::Child,
    mcp: String,
    issuer: String,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_fixture() -> Option<Fixture> {
    use std::io::BufRead;
    let root = env!("CARGO_MANIFEST_DIR");
    let has_sdk = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.auth"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_sdk {
        return None;
    }
    let mut child = std::process::Command::new("python3")
        .arg(format!("{root}/tests/mcp/oauth_server.py"))
        .current_dir(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("python3 tests/mcp/oauth_server.py");
    let stdout = child.stdout.take().expect("stdout");
    // Owned from here: killed on any panic below.
    let mut fixture = Fixture { child, mcp: String::new(), issuer: String::new() };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).expect("the fixture's READY line");
    let ready: Value = serde_json::from_str(line.trim().strip_prefix("READY ").unwrap_or_else(|| panic!("not READY: {line:?}"))).expect("READY JSON");
    fixture.mcp = ready["mcp"].as_str().expect("mcp").to_string();
    fixture.issuer = ready["issuer"].as_str().expect("issuer").to_string();
    Some(fixture)
}

#[tokio::test]
async fn discover_register_authorize_exchange_refresh_against_the_python_sdk() {
    let Some(fx) = start_fixture() else {
        println!("SKIP: python3 cannot import mcp.server.auth");
        return;
    };
    // Loopback only (the default policy).
    let outbound = crate::outbound::Outbound::from_config(&crate::outbound::OutboundConfig::default()).unwrap();
    let oauth = OAuthHttp::new(&outbound);

    let d = oauth.discover(&fx.mcp).await.expect("discover");
    assert_eq!(d.resource, fx.mcp);
    assert_eq!(d.issuer, fx.issuer);
    assert_eq!(d.token_endpoint, format!("{}/token", fx.issuer));
    assert_eq!(d.authorization_endpoint, format!("{}/authorize", fx.issuer));
    assert_eq!(d.registration_endpoint, Some(format!("{}/register", fx.issuer)));
    assert_eq!(d.revocation_endpoint, Some(format!("{}/revoke", fx.issuer)));
    assert_eq!(d.scopes, ["mcp"]);
    // The SDK lists client_secret_post and client_secret_basic: post is preferred.
    assert_eq!(d.client_auth, ClientAuth::ClientSecretPost);

    let redirect_uri = "http://127.0.0.1:1/oauth/callback";
    let creds = oauth.register(&d, redirect_uri).await.expect("register");
    let client_id = creds.client_id.clone();
    assert!(!client_id.is_empty());
    assert_eq!(creds.client_secret, None, "a public client");

    // The browser step: the fixture logs `login_hint` in and redirects at once.
    let (verifier, challenge) = pkce();
    let state = random_token();
    let url = format!("{}&login_hint=ada", authorize_url(&d, &client_id, redirect_uri, &d.scopes, &state, &challenge));
    let resp = oauth.http.get(&url).send().await.expect("authorize");
    assert_eq!(resp.status(), StatusCode::FOUND);
    let location = Url::parse(resp.headers()[reqwest::header::LOCATION].to_str().unwrap()).unwrap();
    assert_eq!(format!("{}{}", location.origin().ascii_serialization(), location.path()), redirect_uri);
    let param = |k: &str| location.query_pairs().find(|(n, _)| n == k).map(|(_, v)| v.into_owned());
    assert_eq!(param("state").as_deref(), Some(state.as_str()));
    let code = param("code").expect("a code");

    let tokens = oauth.exchange(&d.token_endpoint, &creds, &code, &verifier, redirect_uri, &d.resource).await.expect("exchange");
    assert_eq!(tokens.expires_in, Some(3600));
    assert_eq!(tokens.scope.as_deref(), Some("mcp"));
    let first_refresh = tokens.refresh_token.clone().expect("a refresh token");
    assert!(!format!("{tokens:?}").contains(&tokens.access_token));

    // The token opens the MCP server.
    let mcp_status = |token: String| {
        let http = oauth.http.clone();
        let mcp = fx.mcp.clone();
        async move {
            http.post(&mcp)
                .bearer_auth(token)
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json, text/event-stream")
                .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
                .send()
                .await
                .expect("MCP request")
                .status()
        }
    };
    assert_ne!(mcp_status(tokens.access_token.clone()).await, StatusCode::UNAUTHORIZED);
    assert_eq!(mcp_status("not-a-token".into()).await, StatusCode::UNAUTHORIZED);

    let refreshed = oauth.refresh(&d.token_endpoint, &creds, &first_refresh, &d.resource).await.expect("refresh");
    let second_refresh = refreshed.refresh_token.clone().expect("a rotated refresh token");
    assert_ne!(second_refresh, first_refresh);
    assert_ne!(refreshed.access_token, tokens.access_token);
    assert_ne!(mcp_status(refreshed.access_token.clone()).await, StatusCode::UNAUTHORIZED);

    // The rotated-away refresh token is refused: re-consent.
    let e = oauth.refresh(&d.token_endpoint, &creds, &first_refresh, &d.resource).await.unwrap_err();
    assert!(matches!(&e, OAuthError::InvalidGrant(m) if !m.contains(&first_refresh)), "{e:?}");
    // So is the code, a second time.
    let e = oauth.exchange(&d.token_endpoint, &creds, &code, &verifier, redirect_uri, &d.resource).await.unwrap_err();
    assert!(matches!(&e, OAuthError::InvalidGrant(m) if !m.contains(&code) && !m.contains(&verifier)), "{e:?}");
    drop(fx);
}
