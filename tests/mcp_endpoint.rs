//! The MCP endpoint (SPEC §6): every agent definition served over streamable HTTP, driven by
//! a real rmcp client.

mod common;

use common::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use toolrouter::config::ServerConfig;
use toolrouter::pb;

type Client = RunningService<RoleClient, ClientConfig>;

async fn connect(url: String) -> Result<Client, String> {
    let transport = StreamableHttpClientTransport::from_uri(url);
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("test-client", "1"));
    info.serve(transport).await.map_err(|e| e.to_string())
}

fn endpoint(s: &TestServer, path: &str) -> String {
    format!("http://{}{path}", s.server.http_addr)
}

async fn call(client: &Client, tool: &str, arguments: Value) -> (Value, bool) {
    let Value::Object(args) = arguments else { panic!("arguments are an object") };
    let r = client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args)).await.expect("tools/call");
    let text = r.content[0].as_text().expect("text content").text.clone();
    // A plain-text result comes as its text; anything else as its JSON.
    (serde_json::from_str(&text).unwrap_or(Value::String(text)), r.is_error.unwrap_or(false))
}

/// The CRM definition plus a direct client tool, a pinned tool and an approval-gated tool.
fn definition(endpoint: &str) -> pb::AgentDefinition {
    let mut def = crm_definition(endpoint);
    let mut refund =
        tool("refund", "Refund a payment.", json!({"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}));
    refund.requires_approval = true;
    let pinned = tool("customer_email", "The email address of a customer.", json!({"type": "object"}));
    let mut billing = function_source("billing-tools", endpoint, vec![refund, pinned]);
    billing.tool_configs.insert("customer_email".into(), pb::ToolConfig { pin: true, ..Default::default() });
    def.sources.push(billing);
    def.groups.insert("billing".into(), group("Payments and refunds", &["billing-tools"]));
    def.sources.push(client_source("ui", vec![tool("show_banner", "Show a banner to the user.", json!({"type": "object"}))]));
    def
}

#[tokio::test]
async fn tools_list_shows_exactly_what_get_model_tools_shows() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let client = connect(endpoint(&s, "/mcp/agents/crm")).await.expect("initialize");
    let listed = client.list_all_tools().await.expect("tools/list");
    let expected = s.model_tools("crm", run_ctx("")).await;
    let listed: Vec<(String, Value)> = listed.iter().map(|t| (t.name.to_string(), Value::Object((*t.input_schema).clone()))).collect();
    let expected: Vec<(String, Value)> =
        expected.tools.iter().map(|t| (t.name.clone(), serde_json::from_str(&t.input_schema_json).unwrap())).collect();
    assert_eq!(listed, expected);
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["discover_tools", "describe_tool", "call_tool", "list_tool_groups", "list_tools", "show_banner", "billing__customer_email"]);
    // The definition's guidance comes with the handshake.
    let instructions = client.peer_info().and_then(|i| i.instructions.clone()).unwrap_or_default();
    assert!(instructions.contains("discover_tools"), "{instructions}");
}

#[tokio::test]
async fn tools_call_routes_like_handle_tool_call_and_the_session_is_the_run() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let client = connect(endpoint(&s, "/mcp/agents/crm")).await.expect("initialize");

    let (found, is_error) = call(&client, "discover_tools", json!({"query": "customer name", "group": "crm"})).await;
    assert!(!is_error);
    let (direct, _) = s.call_result("crm", "", "", "discover_tools", json!({"query": "customer name", "group": "crm"})).await;
    assert_eq!(found, direct, "the same answer as HandleToolCall");

    let (result, is_error) = call(&client, "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})).await;
    assert!(!is_error, "{result}");
    assert_eq!(exec.last_arguments(), json!({"customer_id": 42}));
    let (bad, is_error) = call(&client, "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": "x"}})).await;
    assert!(is_error && bad["error"] == "invalid_arguments", "{bad}");

    // Approval-gated: a clear pending result carrying the deferred id, in the session's run.
    let (pending, is_error) = call(&client, "call_tool", json!({"group": "billing", "tool": "refund", "arguments": {"amount": 5}})).await;
    assert!(!is_error, "{pending}");
    assert_eq!(pending["status"], "approval_pending");
    assert_eq!(pending["target"]["name"], "billing__refund");
    let id = pending["deferred_id"].as_str().expect("a deferred id").to_string();
    let listed =
        s.router().list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), ..Default::default() }).await.expect("list deferred").into_inner();
    let record = listed.records.iter().find(|r| r.call.as_ref().unwrap().deferred_id == id).expect("the record is stored");
    let run_id = record.run_id.clone();
    assert!(!run_id.is_empty(), "the MCP session id is the run id");

    // A client tool is deferred the same way.
    let (client_tool, _) = call(&client, "show_banner", json!({})).await;
    assert_eq!(client_tool["status"], "client_execution_pending", "{client_tool}");

    // The run pinned its version: promoting another does not change what this session sees.
    let mut v2 = definition(&exec.endpoint());
    v2.sources.retain(|s| s.id != "ui");
    s.create("crm", v2).await;
    let names: Vec<String> = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"show_banner".to_string()), "the session's run stays on version 1: {names:?}");
    let fresh = connect(endpoint(&s, "/mcp/agents/crm")).await.unwrap();
    let names: Vec<String> = fresh.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert!(!names.contains(&"show_banner".to_string()), "a new session gets the new default: {names:?}");
}

#[tokio::test]
async fn a_version_path_serves_that_version() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let names = |c: Client| async move { c.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect::<Vec<_>>() };
    let v1 = names(connect(endpoint(&s, "/mcp/agents/crm/versions/1")).await.unwrap()).await;
    let v2 = names(connect(endpoint(&s, "/mcp/agents/crm/versions/2")).await.unwrap()).await;
    let default = names(connect(endpoint(&s, "/mcp/agents/crm")).await.unwrap()).await;
    assert!(v1.contains(&"show_banner".to_string()));
    assert!(!v2.contains(&"show_banner".to_string()));
    assert_eq!(default, v2);
}

#[tokio::test]
async fn an_unknown_agent_or_version_is_a_clear_error() {
    let s = TestServer::start().await;
    let e = connect(endpoint(&s, "/mcp/agents/nobody")).await.expect_err("refused");
    assert!(e.contains("agent \"nobody\" not found"), "{e}");
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let e = connect(endpoint(&s, "/mcp/agents/crm/versions/7")).await.expect_err("refused");
    assert!(e.contains("no version 7"), "{e}");
}

/// A raw initialize POST with the given Host header; returns the HTTP status.
async fn initialize_with_host(addr: std::net::SocketAddr, host: &str) -> u16 {
    let host = host.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).to_string();
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        write!(
            s,
            "POST /mcp/agents/crm HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status line")
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn only_configured_hosts_reach_the_endpoint() {
    let mut cfg = ServerConfig::for_tests();
    cfg.mcp_endpoint.allowed_hosts = vec!["toolrouter.agents.svc".into()];
    let s = TestServer::start_with(cfg).await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let addr = s.server.http_addr;
    assert_eq!(initialize_with_host(addr, &format!("127.0.0.1:{}", addr.port())).await, 200);
    assert_eq!(initialize_with_host(addr, "toolrouter.agents.svc:8080").await, 200);
    assert_eq!(initialize_with_host(addr, "evil.example.com").await, 403);
}

async fn connect_as(url: String, key: &str) -> Result<Client, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url).auth_header(key));
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("test-client", "1"));
    info.serve(transport).await.map_err(|e| e.to_string())
}

/// Status and `www-authenticate` of a bare initialize POST with the given authorization.
async fn initialize_status(addr: std::net::SocketAddr, authorization: Option<&str>) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let mut req = reqwest::Client::new()
        .post(format!("http://{addr}/mcp/agents/crm"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.expect("HTTP answer");
    let challenge = resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (resp.status().as_u16(), challenge)
}

#[tokio::test]
async fn with_api_keys_the_endpoint_needs_a_key_and_serves_only_the_keys_tenant() {
    const KEY_A: &str = "tr_acme_0123456789abcdef";
    const KEY_B: &str = "tr_globex_fedcba9876543210";
    let exec = spawn_executor(Behaviour::Echo).await;
    let (s, _keys) = TestServer::start_with_keys(&[(KEY_A, "acme"), (KEY_B, "globex")]).await;
    s.create_as(KEY_A, "crm", definition(&exec.endpoint())).await;
    let addr = s.server.http_addr;

    // No key, a wrong key, a malformed header: 401 with a Bearer challenge, nothing else.
    for auth in [None, Some("Bearer tr_wrong_key"), Some("Basic YWxhZGRpbjpvcGVuc2VzYW1l")] {
        assert_eq!(initialize_status(addr, auth).await, (401, "Bearer".to_string()), "{auth:?}");
    }
    assert!(connect(endpoint(&s, "/mcp/agents/crm")).await.is_err(), "a client without a key cannot initialize");

    // The owner's key works end to end.
    let client = connect_as(endpoint(&s, "/mcp/agents/crm"), KEY_A).await.expect("initialize with the owner's key");
    let (result, is_error) = call(&client, "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})).await;
    assert!(!is_error, "{result}");

    // Another tenant's key: the agent does not exist for it, like an agent that never existed.
    let other = connect_as(endpoint(&s, "/mcp/agents/crm"), KEY_B).await.map(|_| ()).expect_err("globex cannot see acme's agent");
    let absent = connect_as(endpoint(&s, "/mcp/agents/nosuchagent"), KEY_A).await.map(|_| ()).expect_err("unknown agent");
    assert_eq!(other.replace("crm", "X"), absent.replace("nosuchagent", "X"), "the same error as an absent agent");
    assert!(!other.contains(KEY_A) && !other.contains(KEY_B));
}

#[path = "mcp/support.rs"]
mod support;

#[tokio::test]
async fn closing_the_mcp_session_ends_its_run_and_releases_its_upstream_sessions() {
    let upstream = support::McpServer::start(vec![support::mcp_tool("lookup", "Look a record up.", &[])]).await;
    let s = TestServer::start().await;
    let source = pb::ToolSource {
        id: "up".into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource { url: upstream.url(), ..Default::default() })),
        ..Default::default()
    };
    s.create("relay", pb::AgentDefinition { sources: vec![source], ..Default::default() }).await;
    let mcp = s.server.router.upstream().clone();
    let client = connect(endpoint(&s, "/mcp/agents/relay")).await.expect("initialize");
    let (r, is_error) = call(&client, "lookup", json!({})).await;
    assert!(!is_error, "{r}");
    assert_eq!(mcp.open_sessions(), 1, "the endpoint session's run holds one upstream session");
    client.cancel().await.expect("session closed");
    for _ in 0..100 {
        if mcp.open_sessions() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(mcp.open_sessions(), 0, "DELETE of the MCP session ended the run");
}

// ----- JWT with keys from a JWKS URL -----

/// A P-256 key made for the test, published under `kid`.
struct SigningKey {
    kid: String,
    pem: String,
}

impl SigningKey {
    fn new(kid: &str) -> Self {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("P-256 key");
        Self { kid: kid.into(), pem: pair.serialize_pem() }
    }

    fn encoding(&self) -> jsonwebtoken::EncodingKey {
        jsonwebtoken::EncodingKey::from_ec_pem(self.pem.as_bytes()).expect("PEM key")
    }

    fn jwk(&self) -> Value {
        let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&self.encoding(), jsonwebtoken::Algorithm::ES256).expect("public JWK");
        jwk.common.key_id = Some(self.kid.clone());
        serde_json::to_value(jwk).unwrap()
    }

    fn token(&self, tenant: &str) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now + 600, "iat": now, "sub": "user-1", "tenant_id": tenant});
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, &claims, &self.encoding()).expect("signed")
    }
}

const ISSUER: &str = "https://idp.example.test";
const AUDIENCE: &str = "toolrouter";

fn jwks(keys: &[&SigningKey]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}

/// The issuer's JWKS endpoint on loopback: its document can change; fetches are counted.
struct Issuer {
    document: std::sync::Arc<std::sync::Mutex<String>>,
    fetches: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    addr: std::net::SocketAddr,
    _stop: tokio_util::sync::DropGuard,
    /// Dropped after the server stops: re-raises the test's panics.
    _panics: PanicWatch,
}

impl Issuer {
    async fn start(document: String) -> Self {
        let document = std::sync::Arc::new(std::sync::Mutex::new(document));
        let fetches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (d, f) = (document.clone(), fetches.clone());
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let (d, f) = (d.clone(), f.clone());
                async move {
                    f.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    d.lock().unwrap().clone()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let panics = PanicWatch::start(format!("the JWKS issuer on {addr}"));
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(async move { stopped.cancelled().await }).await });
        Issuer { document, fetches, addr, _stop: stop.drop_guard(), _panics: panics }
    }

    fn publish(&self, document: String) {
        *self.document.lock().unwrap() = document;
    }

    fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_token_signed_with_a_key_the_issuer_just_added_is_accepted_on_its_first_mcp_request() {
    use toolrouter::auth::jwt::{JwksSource, JwtConfig};
    let exec = spawn_executor(Behaviour::Echo).await;
    let (first, added, never) = (SigningKey::new("k1"), SigningKey::new("k2"), SigningKey::new("k3"));
    let issuer = Issuer::start(jwks(&[&first])).await;
    let hour = std::time::Duration::from_secs(3600);
    let mut cfg = ServerConfig::for_tests();
    cfg.auth.jwt = Some(JwtConfig {
        jwks_refresh: hour,
        jwks_unknown_kid_gap: hour,
        ..JwtConfig::new(ISSUER, AUDIENCE, JwksSource::Url(format!("http://{}/jwks", issuer.addr)))
    });
    let s = TestServer::start_with(cfg).await;
    s.create_as(&first.token("acme"), "crm", definition(&exec.endpoint())).await;
    assert_eq!(issuer.fetches(), 1, "fetched at start-up");

    // The issuer adds a key; its first token on the MCP endpoint waits for the keys to be
    // fetched again, as on gRPC, instead of a 401.
    issuer.publish(jwks(&[&first, &added]));
    let client = connect_as(endpoint(&s, "/mcp/agents/crm"), &added.token("acme")).await.expect("initialize with the new key");
    assert_eq!(issuer.fetches(), 2, "the unknown kid caused one fetch");
    let (result, is_error) = call(&client, "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})).await;
    assert!(!is_error, "{result}");

    // A key the issuer never published is still refused, after the fetch it may cause.
    let (status, challenge) = initialize_status(s.server.http_addr, Some(&format!("Bearer {}", never.token("acme")))).await;
    assert_eq!((status, challenge.as_str()), (401, "Bearer"));
}

// ----- graceful shutdown: MCP calls are drained like gRPC calls -----

#[tokio::test]
async fn an_mcp_call_in_flight_at_shutdown_returns_its_result() {
    let exec = spawn_executor(Behaviour::Sleep(std::time::Duration::from_secs(3))).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let client = connect(endpoint(&s, "/mcp/agents/crm")).await.expect("initialize");
    let in_flight = tokio::spawn(async move {
        let r = call(&client, "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})).await;
        drop(client);
        r
    });
    exec.wait_inflight(1).await;
    let TestServer { server, .. } = s;
    let shutdown = tokio::spawn(server.shutdown());
    let (content, is_error) = tokio::time::timeout(std::time::Duration::from_secs(10), in_flight)
        .await
        .expect("the MCP call finished")
        .expect("the call's task did not panic");
    assert!(!is_error, "{content}");
    assert_eq!(content, json!("Ada"));
    tokio::time::timeout(std::time::Duration::from_secs(10), shutdown).await.expect("shutdown completes").expect("shutdown");
    assert_eq!(exec.calls(), 1);
}

/// POSTs a JSON-RPC message to the endpoint in a session; the raw response.
async fn post_raw(client: &reqwest::Client, url: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut req =
        client.post(url).header("content-type", "application/json").header("accept", "application/json, text/event-stream").body(body.to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s).header("mcp-protocol-version", "2025-11-25");
    }
    req.send().await.expect("POST")
}

async fn open_session(client: &reqwest::Client, url: &str, capabilities: Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post_raw(client, url, None, &init).await;
    assert_eq!(r.status(), 200);
    r.headers().get("mcp-session-id").expect("a session").to_str().unwrap().to_string()
}

/// The next SSE `data:` payload of a streamed response.
async fn next_event(r: &mut reqwest::Response, buffer: &mut String) -> Value {
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                return serde_json::from_str(data).expect("JSON data");
            }
            continue;
        }
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), r.chunk()).await.expect("an event in time").expect("read");
        buffer.push_str(&String::from_utf8_lossy(&chunk.expect("the stream goes on")));
    }
}

#[tokio::test]
async fn only_the_asked_session_can_answer_an_approval_question_and_its_answer_runs_the_call() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let client = reqwest::Client::new();
    let asked = open_session(&client, &url, json!({"elicitation": {"form": {}}})).await;
    let other = open_session(&client, &url, json!({"elicitation": {}})).await;
    assert!(asked.ends_with("-e") && other.ends_with("-e"), "{asked} {other}");

    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "call_tool", "arguments": {"group": "billing", "tool": "refund", "arguments": {"amount": 5}}}});
    let mut stream = post_raw(&client, &url, Some(&asked), &call).await;
    assert_eq!(stream.headers().get("content-type").unwrap(), "text/event-stream");
    let mut buffer = String::new();
    let question = next_event(&mut stream, &mut buffer).await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["mode"], "form");
    let id = question["id"].as_str().unwrap().to_string();
    let deferred_id = id.strip_prefix("toolrouter-approval-").unwrap().to_string();

    let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {"approve": true}}});
    assert_eq!(post_raw(&client, &url, Some(&other), &answer).await.status(), 404, "another session cannot answer");
    assert_eq!(post_raw(&client, &url, None, &answer).await.status(), 404, "nor a request outside any session");
    let pending = s
        .router()
        .list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), state: pb::DeferredState::Pending as i32, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(pending.records.iter().any(|r| r.call.as_ref().unwrap().deferred_id == deferred_id), "still pending");
    assert_eq!(exec.calls(), 0);

    // Dismissing the question leaves the record pending (the host can still resolve it).
    let dismissed = json!({"jsonrpc": "2.0", "id": id, "result": {"action": "cancel"}});
    assert_eq!(post_raw(&client, &url, Some(&asked), &dismissed).await.status(), 202);
    let record = s
        .router()
        .list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .records
        .into_iter()
        .find(|r| r.call.as_ref().unwrap().deferred_id == deferred_id)
        .unwrap();
    assert_eq!(record.state, pb::DeferredState::Pending as i32);

    assert_eq!(post_raw(&client, &url, Some(&asked), &answer).await.status(), 202);
    let last = next_event(&mut stream, &mut buffer).await;
    assert_eq!(last["id"], 7, "{last}");
    assert_eq!(last["result"]["isError"], false, "{last}");
    assert_eq!(last["result"]["structuredContent"]["tool"], "refund", "the approved call ran: {last}");
    assert_eq!(exec.calls(), 1);
}
