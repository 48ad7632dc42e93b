//! Outbound targets and upstream TLS (SPEC §9): executor endpoints and MCP URLs must match the
//! operator's allowlist at registration and again at connect time (the addresses a name
//! resolves to included); link-local, metadata and unspecified addresses are always refused;
//! redirects are not followed; https:// upstreams are verified against the system roots plus
//! the operator's CA.

mod common;
#[path = "mcp/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use common::*;
use serde_json::{Value, json};
use support::{McpServer, mcp_tool};
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic_types::StatusExt;
use toolrouter::config::{Cli, Command, ServerConfig};
use toolrouter::pb;

const REFUSED: &str = "outbound connection refused";

/// One process-wide capture of warnings (thread-local subscribers race with other tests over
/// tracing's cached callsite interest); tests tell their events apart by source id.
fn logs() -> &'static EventLog {
    static LOGS: std::sync::OnceLock<EventLog> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let log = EventLog::default();
        let subscriber = tracing_subscriber::registry().with(log.clone()).with(tracing_subscriber::filter::LevelFilter::WARN);
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        log
    })
}

/// The refusal warnings logged for a source.
fn refusals(source: &str) -> Vec<BTreeMap<String, String>> {
    logs()
        .events()
        .into_iter()
        .filter(|e| e.get("message").map(String::as_str) == Some(REFUSED) && e.get("source").map(String::as_str) == Some(source))
        .collect()
}

fn config(allow: &[&str]) -> ServerConfig {
    logs();
    let mut cfg = ServerConfig::for_tests();
    cfg.outbound.allow = allow.iter().map(|s| s.to_string()).collect();
    cfg
}

fn mcp_source(id: &str, url: &str) -> pb::ToolSource {
    pb::ToolSource {
        id: id.into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource { url: url.into(), ..Default::default() })),
        ..Default::default()
    }
}

/// Group `crm` holding the given sources.
fn crm(sources: Vec<pb::ToolSource>) -> pb::AgentDefinition {
    let ids: Vec<String> = sources.iter().map(|s| s.id.clone()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    pb::AgentDefinition { groups: [("crm".to_string(), group("Customer records", &ids))].into(), sources, ..Default::default() }
}

/// The CRM lookup served by `endpoint`, under a source id of the test's own.
fn crm_at(source_id: &str, endpoint: &str) -> pb::AgentDefinition {
    crm(vec![function_source(source_id, endpoint, vec![customer_name_tool()])])
}

async fn lookup_ada(s: &TestServer) -> (Value, bool) {
    lookup_ada_as(s, "r", "c1").await
}

/// A run and tool call id of their own: outcomes are kept per tool call id (exactly once).
async fn lookup_ada_as(s: &TestServer, run: &str, call_id: &str) -> (Value, bool) {
    s.call_result("agent", run, call_id, "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})).await
}

fn assert_unavailable_not_run(content: &Value, is_error: bool) {
    assert!(is_error, "{content}");
    assert_eq!(content["error"], "tool_unavailable", "{content}");
    assert!(content.to_string().contains("not run"), "{content}");
}

/// The (field, description) pairs of a refused CreateAgentVersion.
async fn refused_fields(s: &TestServer, def: pb::AgentDefinition) -> Vec<(String, String)> {
    let err = s
        .registry()
        .create_agent_version(pb::CreateAgentVersionRequest { agent_id: "agent".into(), definition: Some(def), make_default: true })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    err.get_details_bad_request().expect("BadRequest details").field_violations.into_iter().map(|v| (v.field, v.description)).collect()
}

// ----- registration -----

#[tokio::test]
async fn registration_refuses_targets_outside_the_allowlist_with_their_field_paths() {
    let s = TestServer::start_with(config(&[])).await;
    let def = crm(vec![
        function_source("crm-tools", "http://crm-executor:7000", vec![customer_name_tool()]),
        mcp_source("docs", "https://user:hunter2-secret@mcp.example.com/mcp?key=hunter2-secret"),
    ]);
    let v = refused_fields(&s, def).await;
    let fields: Vec<&str> = v.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(fields, ["definition.sources[0].function.endpoint", "definition.sources[1].mcp.url"]);
    assert!(v[0].1.starts_with("crm-executor:7000 is refused: it is not in the outbound allowlist"), "{}", v[0].1);
    assert!(v[0].1.contains("--outbound-allow"), "the message says how to allow more: {}", v[0].1);
    assert!(v[1].1.starts_with("mcp.example.com:443 is refused"), "{}", v[1].1);
    assert!(!v[1].1.contains("hunter2"), "credentials in the URL are not repeated: {}", v[1].1);
    let agents = s.registry().list_agents(pb::ListAgentsRequest::default()).await.unwrap().into_inner();
    assert!(agents.agents.is_empty(), "nothing was stored");
}

#[tokio::test]
async fn link_local_metadata_and_unspecified_targets_are_refused_even_when_every_host_is_allowed() {
    let s = TestServer::start_with(config(&["*"])).await;
    let always_refused = [
        ("http://169.254.169.254/latest/meta-data", "cloud metadata"),
        ("http://metadata.google.internal/computeMetadata/v1", "cloud metadata"),
        ("http://100.100.100.200", "cloud metadata"),
        ("http://[fd00:ec2::254]", "cloud metadata"),
        ("http://169.254.10.20:7000", "link-local"),
        ("http://[fe80::1]:7000", "link-local"),
        ("http://0.0.0.0:7000", "unspecified"),
        ("http://[::]:7000", "unspecified"),
        // IPv4-mapped IPv6 forms, dotted and hexadecimal.
        ("http://[::ffff:169.254.169.254]", "cloud metadata"),
        ("http://[::ffff:a9fe:a9fe]", "cloud metadata"),
        ("http://[::ffff:169.254.1.1]:7000", "link-local"),
        ("http://[::ffff:0.0.0.0]:7000", "unspecified"),
        // A resolver's shorthand for 169.254.169.254 is not a host name.
        ("http://2852039166", "neither a DNS name nor an IP address"),
    ];
    let mut sources: Vec<pb::ToolSource> = always_refused
        .iter()
        .enumerate()
        .map(|(i, (url, _))| function_source(&format!("s{i}"), url, vec![tool(&format!("t{i}"), "A tool.", json!({"type": "object"}))]))
        .collect();
    sources.push(mcp_source("metadata-mcp", "http://metadata.goog/mcp"));
    // Allowed by `*`: no violation.
    sources.push(function_source("fine", "http://10.0.0.7:7000", vec![tool("fine", "A tool.", json!({"type": "object"}))]));
    let def = pb::AgentDefinition { sources, ..Default::default() };
    let v = refused_fields(&s, def).await;
    assert_eq!(v.len(), always_refused.len() + 1, "{v:#?}");
    for (i, (url, rule)) in always_refused.iter().enumerate() {
        assert_eq!(v[i].0, format!("definition.sources[{i}].function.endpoint"));
        assert!(v[i].1.contains(rule), "{url}: {}", v[i].1);
    }
    let last = &v[always_refused.len()];
    assert_eq!(last.0, format!("definition.sources[{}].mcp.url", always_refused.len()));
    assert!(last.1.contains("cloud metadata service (always refused)"), "{}", last.1);
}

#[tokio::test]
async fn registration_accepts_targets_that_match_the_patterns() {
    let s = TestServer::start_with(config(&[
        "https://*.svc.cluster.local",
        "http://crm-executor:7000",
        "*.internal:443",
        "10.0.0.0/8",
        "[fd00::/8]:7000",
    ]))
    .await;
    let allowed = [
        "https://billing.tools.svc.cluster.local",
        "https://orders.svc.cluster.local:9443",
        "http://crm-executor:7000",
        "https://search.internal",
        "http://10.1.2.3:7000",
        "http://[fd00::5]:7000",
        "http://[::ffff:10.9.9.9]:7000",
    ];
    let sources: Vec<pb::ToolSource> = allowed
        .iter()
        .enumerate()
        .map(|(i, url)| function_source(&format!("s{i}"), url, vec![tool(&format!("t{i}"), "A tool.", json!({"type": "object"}))]))
        .collect();
    let mut def = pb::AgentDefinition { sources, ..Default::default() };
    def.sources.push(mcp_source("docs", "https://docs.tools.svc.cluster.local/mcp"));
    s.create("agent", def).await;

    for (url, why) in [
        ("http://billing.tools.svc.cluster.local", "scheme"),
        ("http://crm-executor:7001", "port"),
        ("http://search.internal", "port 80"),
        ("http://11.0.0.1:7000", "address"),
        ("http://[fd00::5]:7001", "port"),
        ("http://svc.cluster.local", "*. needs a label below"),
    ] {
        let v = refused_fields(&s, crm_at("other", url)).await;
        assert_eq!(v.len(), 1, "{url} ({why}): {v:?}");
        assert!(v[0].1.contains("not in the outbound allowlist"), "{url} ({why}): {}", v[0].1);
    }
}

#[tokio::test]
async fn invalid_patterns_and_unusable_tls_files_stop_start_up() {
    let bad_pattern = toolrouter::server::start(config(&["https://*.svc.cluster.local", "a*.example.com"])).await;
    let text = format!("{:#}", bad_pattern.err().expect("start-up refused"));
    assert!(text.contains("\"a*.example.com\"") && text.contains("--outbound-allow"), "{text}");

    let dir = TempDir::new("outbound-bad-tls");
    let missing = dir.0.join("missing.pem");
    let mut cfg = config(&[]);
    cfg.outbound.tls.ca_file = Some(missing.clone());
    let text = format!("{:#}", toolrouter::server::start(cfg).await.err().expect("start-up refused"));
    assert!(text.contains(&missing.display().to_string()), "{text}");

    let not_pem = dir.0.join("not.pem");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    let mut cfg = config(&[]);
    cfg.outbound.tls.ca_file = Some(not_pem.clone());
    let text = format!("{:#}", toolrouter::server::start(cfg).await.err().expect("start-up refused"));
    assert!(text.contains("no PEM CERTIFICATE") && text.contains(&not_pem.display().to_string()), "{text}");

    let pki = Pki::new();
    let mut cfg = config(&[]);
    cfg.outbound.tls.client_cert = Some(pki.client_cert.clone());
    cfg.outbound.tls.client_key = Some(pki.ca_file.clone());
    let text = format!("{:#}", toolrouter::server::start(cfg).await.err().expect("start-up refused"));
    assert!(text.contains("client key") && text.contains("PRIVATE KEY"), "{text}");
}

#[test]
fn outbound_flags_are_repeatable_and_comma_separated() {
    let cli = Cli::try_parse_from([
        "toolrouter",
        "serve",
        "--outbound-allow",
        "*.internal:443,10.0.0.0/8",
        "--outbound-allow",
        "http://crm-executor:7000",
        "--upstream-ca",
        "/etc/toolrouter/ca.pem",
    ])
    .expect("parses");
    let Command::Serve(args) = cli.command else { panic!("serve") };
    let cfg = ServerConfig::from(args);
    assert_eq!(cfg.outbound.allow, ["*.internal:443", "10.0.0.0/8", "http://crm-executor:7000"]);
    assert_eq!(cfg.outbound.tls.ca_file, Some(PathBuf::from("/etc/toolrouter/ca.pem")));
    let half = Cli::try_parse_from(["toolrouter", "serve", "--upstream-client-cert", "/c.pem"]);
    assert!(half.is_err(), "a client certificate needs its key");
}

// ----- connect time -----

#[tokio::test]
async fn a_name_allowed_by_pattern_that_resolves_to_loopback_is_refused_at_call_time() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start_with(config(&["localhost"])).await;
    // Registration checks the name, which the pattern allows.
    s.create("agent", crm_at("loopback-name", &format!("http://localhost:{}", exec.addr.port()))).await;
    let (content, is_error) = lookup_ada(&s).await;
    assert_unavailable_not_run(&content, is_error);
    assert_eq!(exec.calls(), 0, "nothing reached the executor");
    let warned = refusals("loopback-name");
    assert!(!warned.is_empty(), "a warning names the source");
    assert_eq!(warned[0]["rule"], "loopback_address", "{warned:?}");
    assert!(warned[0]["refusal"].contains("localhost:"), "{warned:?}");
}

#[tokio::test]
async fn asking_an_executor_for_its_tools_is_refused_like_a_call() {
    let exec = spawn_executor_listing(Behaviour::Echo, vec![customer_name_tool()]).await;
    let s = TestServer::start_with(config(&["localhost"])).await;
    s.create("agent", crm(vec![function_source("listing-exec", &format!("http://localhost:{}", exec.addr.port()), Vec::new())])).await;
    let tools = s.model_tools("agent", run_ctx("r")).await;
    assert!(
        tools.diagnostics.iter().any(|d| d.contains("\"listing-exec\"") && d.contains("ListTools") && d.contains("loopback address")),
        "{:?}",
        tools.diagnostics
    );
    assert_eq!(refusals("listing-exec")[0]["rule"], "loopback_address");
}

#[tokio::test]
async fn a_name_resolving_to_an_allowed_loopback_address_is_called() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start_with(config(&["localhost", "127.0.0.0/8", "::1"])).await;
    s.create("agent", crm_at("loopback-allowed", &format!("http://localhost:{}", exec.addr.port()))).await;
    let (content, is_error) = lookup_ada(&s).await;
    assert!(!is_error, "{content}");
    assert_eq!(content, json!("Ada"));
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn a_definition_stored_under_a_wide_policy_is_refused_at_call_time_under_a_narrow_one() {
    let dir = TempDir::new("outbound-narrowed");
    let store = format!("sqlite://{}", dir.0.join("store.db").display());
    let exec = spawn_executor(Behaviour::Echo).await;
    let upstream = McpServer::start(vec![mcp_tool("search_docs", "Search the documentation.", &[])]).await;
    let def = crm(vec![function_source("narrowed-exec", &exec.endpoint(), vec![customer_name_tool()]), mcp_source("narrowed-mcp", &upstream.url())]);
    {
        let mut cfg = config(&[]);
        cfg.store = store.clone();
        let s = TestServer::start_with(cfg).await;
        s.create("agent", def).await;
        let (content, is_error) = lookup_ada(&s).await;
        assert!(!is_error && content == json!("Ada"), "{content}");
        s.server.shutdown().await;
    }
    let calls_before = exec.calls();
    let seen_before = upstream.seen().len();
    assert!(seen_before > 0, "the MCP server was listed under the wide policy");

    let mut cfg = config(&["http://127.0.0.1:1"]);
    cfg.store = store;
    let s = TestServer::start_with(cfg).await;
    let (content, is_error) = lookup_ada_as(&s, "r2", "c2").await;
    assert_unavailable_not_run(&content, is_error);
    assert_eq!(exec.calls(), calls_before, "the executor saw no call");
    let tools = s.model_tools("agent", run_ctx("r2")).await;
    assert!(
        tools.diagnostics.iter().any(|d| d.contains("\"narrowed-mcp\"") && d.contains("refused by the outbound policy")),
        "{:?}",
        tools.diagnostics
    );
    assert_eq!(upstream.seen().len(), seen_before, "the MCP server saw no request");
    assert_eq!(refusals("narrowed-exec")[0]["rule"], "not_allowed");
    assert_eq!(refusals("narrowed-mcp")[0]["rule"], "not_allowed");
}

#[tokio::test]
async fn an_mcp_url_whose_name_resolves_to_loopback_is_refused_before_any_request() {
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let s = TestServer::start_with(config(&["localhost"])).await;
    s.create("agent", crm(vec![mcp_source("loopback-mcp", &format!("http://localhost:{}/mcp", upstream.addr.port()))])).await;
    let tools = s.model_tools("agent", run_ctx("r")).await;
    assert!(tools.diagnostics.iter().any(|d| d.contains("\"loopback-mcp\"") && d.contains("loopback address")), "{:?}", tools.diagnostics);
    assert!(upstream.seen().is_empty(), "the MCP server saw no request");
    assert_eq!(refusals("loopback-mcp")[0]["rule"], "loopback_address");
}

/// Answers every request with a 307 to `location`, counting them.
struct Redirector {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    cancel: CancellationToken,
    /// Dropped after `drop` cancels: re-raises the test's panics.
    _panics: PanicWatch,
}

impl Drop for Redirector {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Redirector {
    async fn start(location: String) -> Self {
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = axum::Router::new().fallback(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let location = location.clone();
            async move { (http::StatusCode::TEMPORARY_REDIRECT, [(http::header::LOCATION, location)]) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let panics = PanicWatch::start(format!("the redirecting server on {addr}"));
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await;
        });
        Self { addr, hits, cancel, _panics: panics }
    }
}

#[tokio::test]
async fn mcp_redirects_to_another_host_are_not_followed() {
    // The redirect's target is a working MCP server, reachable and allowed (loopback).
    let target = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let redirector = Redirector::start(format!("http://localhost:{}/mcp", target.addr.port())).await;
    let s = TestServer::start_with(config(&[])).await;
    s.create("agent", crm(vec![mcp_source("redirected-mcp", &format!("http://{}/mcp", redirector.addr))])).await;
    let tools = s.model_tools("agent", run_ctx("r")).await;
    assert!(tools.diagnostics.iter().any(|d| d.contains("\"redirected-mcp\"")), "{:?}", tools.diagnostics);
    assert!(redirector.hits.load(Ordering::SeqCst) > 0, "toolrouter asked the redirecting server");
    assert!(target.seen().is_empty(), "the redirect was not followed: {:?}", target.seen());
}

// ----- TLS to upstreams -----

/// A test CA with a server certificate for `localhost` and a client certificate, written to
/// a temporary directory.
struct Pki {
    _dir: TempDir,
    ca_pem: String,
    ca_file: PathBuf,
    server_cert: String,
    server_key: String,
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl Pki {
    fn new() -> Self {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "toolrouter test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let leaf = |name: &str, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            params.extended_key_usages = vec![usage];
            (params.signed_by(&key, &ca).unwrap().pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf("localhost", ExtendedKeyUsagePurpose::ServerAuth);
        let (client_pem, client_key_pem) = leaf("toolrouter", ExtendedKeyUsagePurpose::ClientAuth);
        let dir = TempDir::new("outbound-pki");
        let write = |name: &str, text: &str| {
            let path = dir.0.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let ca_pem = ca.pem();
        let ca_file = write("ca.pem", &ca_pem);
        let client_cert = write("client.pem", &client_pem);
        let client_key = write("client-key.pem", &client_key_pem);
        Pki { _dir: dir, ca_pem, ca_file, server_cert, server_key, client_cert, client_key }
    }

    fn executor_tls(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(Identity::from_pem(&self.server_cert, &self.server_key))
    }

    fn mcp_tls(&self) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        let chain = rustls::pki_types::CertificateDer::pem_slice_iter(self.server_cert.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(self.server_key.as_bytes()).unwrap();
        let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(cfg)
    }
}

fn config_trusting(pki: &Pki) -> ServerConfig {
    let mut cfg = config(&[]);
    cfg.outbound.tls.ca_file = Some(pki.ca_file.clone());
    cfg
}

#[tokio::test]
async fn an_executor_over_tls_is_called_when_the_upstream_ca_is_trusted() {
    let pki = Pki::new();
    let exec = spawn_executor_tls(Behaviour::Echo, pki.executor_tls()).await;
    let s = TestServer::start_with(config_trusting(&pki)).await;
    s.create("agent", crm_at("tls-exec", &format!("https://localhost:{}", exec.addr.port()))).await;
    let (content, is_error) = lookup_ada(&s).await;
    assert!(!is_error, "{content}");
    assert_eq!(content, json!("Ada"));
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn an_executor_over_tls_with_an_untrusted_certificate_is_unavailable_and_not_sent() {
    let pki = Pki::new();
    let exec = spawn_executor_tls(Behaviour::Echo, pki.executor_tls()).await;
    let s = TestServer::start_with(config(&[])).await;
    s.create("agent", crm_at("untrusted-exec", &format!("https://localhost:{}", exec.addr.port()))).await;
    let (content, is_error) = lookup_ada(&s).await;
    assert_unavailable_not_run(&content, is_error);
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn an_executor_requiring_a_client_certificate_accepts_the_configured_one() {
    let pki = Pki::new();
    let mtls = || pki.executor_tls().client_ca_root(Certificate::from_pem(&pki.ca_pem));
    let exec = spawn_executor_tls(Behaviour::Echo, mtls()).await;
    let mut cfg = config_trusting(&pki);
    cfg.outbound.tls.client_cert = Some(pki.client_cert.clone());
    cfg.outbound.tls.client_key = Some(pki.client_key.clone());
    let s = TestServer::start_with(cfg).await;
    s.create("agent", crm_at("mtls-exec", &format!("https://localhost:{}", exec.addr.port()))).await;
    let (content, is_error) = lookup_ada(&s).await;
    assert!(!is_error && content == json!("Ada"), "{content}");

    // Under TLS 1.3 the server refuses a missing client certificate after the client's side
    // of the handshake is done, so the call may count as sent: an idempotent tool reports
    // "unavailable" either way.
    let other = spawn_executor_tls(Behaviour::Echo, mtls()).await;
    let without = TestServer::start_with(config_trusting(&pki)).await;
    let mut def = crm_at("mtls-exec-anonymous", &format!("https://localhost:{}", other.addr.port()));
    function_of(&mut def.sources[0]).tools[0].idempotent = true;
    without.create("agent", def).await;
    let (content, is_error) = lookup_ada(&without).await;
    assert!(is_error && content["error"] == "tool_unavailable", "{content}");
    assert_eq!(other.calls(), 0, "the executor never saw the call");
}

#[tokio::test]
async fn an_mcp_server_over_https_is_used_only_when_its_ca_is_trusted() {
    let pki = Pki::new();
    let upstream = McpServer::start_tls(vec![mcp_tool("lookup", "Look a record up.", &[])], pki.mcp_tls()).await;
    let def = || crm(vec![mcp_source("tls-mcp", &upstream.https_url())]);

    let untrusting = TestServer::start_with(config(&[])).await;
    untrusting.create("agent", def()).await;
    let tools = untrusting.model_tools("agent", run_ctx("r")).await;
    assert!(tools.diagnostics.iter().any(|d| d.contains("\"tls-mcp\"")), "{:?}", tools.diagnostics);
    assert!(upstream.seen().is_empty(), "no request passed the failed handshake");

    let s = TestServer::start_with(config_trusting(&pki)).await;
    s.create("agent", def()).await;
    let tools = s.model_tools("agent", run_ctx("r")).await;
    assert!(tools.diagnostics.is_empty(), "{:?}", tools.diagnostics);
    let (content, is_error) = s.call_result("agent", "r", "c1", "call_tool", json!({"group": "crm", "tool": "lookup", "arguments": {}})).await;
    assert!(!is_error, "{content}");
    assert_eq!(content["tool"], "lookup");
    assert_eq!(upstream.calls().len(), 1);
}
