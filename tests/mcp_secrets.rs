//! Operator secrets in MCP header bindings (SPEC §7, §9): a secret reaches only the tenants
//! and upstream hosts the operator names, at registration and again whenever its value is
//! read; tenants cannot tell another tenant's secret from one that does not exist.

mod common;
#[path = "mcp/support.rs"]
mod support;

use common::*;
use serde_json::json;
use support::{McpServer, mcp_tool};
use tonic::Code;
use tonic_types::StatusExt;
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::upstream::Secrets;

const KEY_ACME: &str = "tr_acme_key_5b0e71";
const KEY_GLOBEX: &str = "tr_globex_key_c4d2a9";
const TOKEN: &str = "planted-operator-token-93ad1f";

fn binding_secret(name: &str) -> pb::HeaderBinding {
    pb::HeaderBinding { value: Some(pb::header_binding::Value::Secret(name.into())), prefix: "Bearer ".into() }
}

/// Group `crm` with one MCP source whose `Authorization` header is the named secret.
fn crm_with_secret(url: &str, secret: &str) -> pb::AgentDefinition {
    let source = pb::ToolSource {
        id: "crm-mcp".into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource {
            url: url.into(),
            headers: [("Authorization".to_string(), binding_secret(secret))].into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    pb::AgentDefinition { groups: [("crm".to_string(), group("Customer records", &["crm-mcp"]))].into(), sources: vec![source], ..Default::default() }
}

fn lookup() -> serde_json::Value {
    json!({"group": "crm", "tool": "lookup", "arguments": {}})
}

/// A file holding the token, in a directory removed with the returned guard.
fn token_file() -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new("mcp-secret");
    let path = dir.0.join("crm-token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    (dir, path)
}

fn with_secrets(mut cfg: ServerConfig, specs: &[String]) -> ServerConfig {
    cfg.secrets = Secrets::parse(specs.iter().map(String::as_str)).expect("specs parse");
    cfg
}

async fn create_as(s: &TestServer, key: &str, def: pb::AgentDefinition) -> Result<pb::AgentVersion, tonic::Status> {
    s.registry_as(key)
        .create_agent_version(pb::CreateAgentVersionRequest { agent_id: "crm".into(), definition: Some(def), make_default: true })
        .await
        .map(|r| r.into_inner())
}

fn violations(st: &tonic::Status) -> Vec<(String, String)> {
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    st.get_details_bad_request().expect("BadRequest details").field_violations.into_iter().map(|v| (v.field, v.description)).collect()
}

/// Requests the upstream saw carrying the token.
fn token_requests(upstream: &McpServer) -> usize {
    upstream.seen().iter().filter(|r| r.headers.get("authorization").is_some_and(|v| v.contains(TOKEN))).count()
}

#[tokio::test]
async fn a_secret_scoped_to_a_tenant_is_an_unknown_secret_to_every_other_tenant() {
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let (_dir, token) = token_file();
    let keys = KeyFile::with_keys(&[(KEY_ACME, "acme"), (KEY_GLOBEX, "globex")]);
    let cfg = with_secrets(config_with_keys(&keys), &[format!("crm_token=file:{};tenant=acme", token.display())]);
    let s = TestServer::start_with(cfg).await;

    // Another tenant binding the operator's secret on a URL it controls is refused, with the
    // same answer as a secret that does not exist at all.
    let stolen = violations(&create_as(&s, KEY_GLOBEX, crm_with_secret(&upstream.url(), "crm_token")).await.unwrap_err());
    let absent = violations(&create_as(&s, KEY_GLOBEX, crm_with_secret(&upstream.url(), "no_such_secret")).await.unwrap_err());
    assert_eq!(stolen.len(), 1, "{stolen:?}");
    assert_eq!(stolen[0].0, "definition.sources[0].mcp.headers[\"Authorization\"].secret");
    assert!(stolen[0].1.contains("unknown secret \"crm_token\""), "{}", stolen[0].1);
    assert_eq!(stolen[0].1.replace("crm_token", "X"), absent[0].1.replace("no_such_secret", "X"), "indistinguishable from an absent secret");
    assert!(!stolen[0].1.contains(TOKEN) && !stolen[0].1.contains(&token.display().to_string()), "{}", stolen[0].1);

    // The tenant it is meant for registers and uses it.
    create_as(&s, KEY_ACME, crm_with_secret(&upstream.url(), "crm_token")).await.expect("acme may use its secret");
    let (result, is_error) = result_of(&s.call_as(KEY_ACME, "crm", run_ctx("r1"), "c1", "call_tool", lookup()).await.unwrap());
    assert!(!is_error, "{result}");
    let calls = upstream.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].headers["authorization"], format!("Bearer {TOKEN}"));
}

#[tokio::test]
async fn a_secret_is_sent_only_to_the_hosts_the_operator_names() {
    let crm = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let other = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let (_dir, token) = token_file();
    let keys = KeyFile::with_keys(&[(KEY_ACME, "acme")]);
    let spec = format!("crm_token=file:{};tenant=acme;host=http://127.0.0.1:{}", token.display(), crm.addr.port());
    let s = TestServer::start_with(with_secrets(config_with_keys(&keys), &[spec])).await;

    let refused = violations(&create_as(&s, KEY_ACME, crm_with_secret(&other.url(), "crm_token")).await.unwrap_err());
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, "definition.sources[0].mcp.headers[\"Authorization\"].secret");
    assert!(refused[0].1.contains(&format!("secret \"crm_token\" may not be sent to 127.0.0.1:{}", other.addr.port())), "{}", refused[0].1);

    create_as(&s, KEY_ACME, crm_with_secret(&crm.url(), "crm_token")).await.expect("the named host");
    let (result, is_error) = result_of(&s.call_as(KEY_ACME, "crm", run_ctx("r1"), "c1", "call_tool", lookup()).await.unwrap());
    assert!(!is_error, "{result}");
    assert!(token_requests(&crm) > 0);
    assert_eq!(token_requests(&crm), crm.seen().len(), "every request to the named host carried it");
    assert!(other.seen().is_empty());
}

#[tokio::test]
async fn a_definition_stored_before_the_operator_narrowed_a_secret_does_not_get_it() {
    let crm = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let (_dir, token) = token_file();
    let store = TempDir::new("mcp-secret-store");
    let keys = KeyFile::with_keys(&[(KEY_ACME, "acme")]);
    let config = |spec: String| {
        let mut cfg = with_secrets(config_with_keys(&keys), &[spec]);
        cfg.store = format!("sqlite://{}", store.0.join("toolrouter.db").display());
        cfg
    };
    let file = token.display().to_string();
    let other_port = refused_endpoint().await.rsplit(':').next().unwrap().to_string();

    let s = TestServer::start_with(config(format!("crm_token=file:{file};tenant=acme"))).await;
    create_as(&s, KEY_ACME, crm_with_secret(&crm.url(), "crm_token")).await.expect("registered while allowed");
    let (result, is_error) = result_of(&s.call_as(KEY_ACME, "crm", run_ctx("before"), "c1", "call_tool", lookup()).await.unwrap());
    assert!(!is_error, "{result}");
    drop(s);
    let sent = token_requests(&crm);
    assert!(sent > 0);

    // The operator narrows the secret to another tenant, then to another host: the stored
    // definition is not refused, but the secret is no longer read for it.
    for (i, (narrowed, expect)) in [
        (format!("crm_token=file:{file};tenant=globex"), "unknown secret \"crm_token\""),
        (format!("crm_token=file:{file};tenant=acme;host=127.0.0.1:{other_port}"), "may not be sent to"),
    ]
    .into_iter()
    .enumerate()
    {
        let s = TestServer::start_with(config(narrowed)).await;
        let run = format!("after-{i}");
        let (result, is_error) = result_of(&s.call_as(KEY_ACME, "crm", run_ctx(&run), "c2", "call_tool", lookup()).await.unwrap());
        assert!(is_error, "{result}");
        let tools = s
            .router_as(KEY_ACME)
            .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("crm")), run: Some(run_ctx(&run)), ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        assert!(tools.diagnostics.iter().any(|d| d.contains("\"crm-mcp\"") && d.contains(expect)), "{:?}", tools.diagnostics);
        assert_eq!(token_requests(&crm), sent, "no request carried the secret after it was narrowed");
    }
}

#[tokio::test]
async fn with_authentication_on_an_unscoped_secret_is_usable_by_no_tenant_and_start_up_warns() {
    let crm = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let (_dir, token) = token_file();
    let keys = KeyFile::with_keys(&[(KEY_ACME, "acme")]);
    let (log, _guard) = EventLog::capture();
    let s = TestServer::start_with(with_secrets(config_with_keys(&keys), &[format!("crm_token=file:{}", token.display())])).await;
    let warned = log
        .events()
        .iter()
        .any(|e| e.get("secret").map(String::as_str) == Some("crm_token") && e.get("message").is_some_and(|m| m.contains("names no tenant")));
    assert!(warned, "{:?}", log.events());
    let refused = violations(&create_as(&s, KEY_ACME, crm_with_secret(&crm.url(), "crm_token")).await.unwrap_err());
    assert!(refused[0].1.contains("unknown secret \"crm_token\""), "{refused:?}");

    // `tenant=*` is the operator's explicit choice of every tenant.
    let s = TestServer::start_with(with_secrets(config_with_keys(&keys), &[format!("crm_token=file:{};tenant=*", token.display())])).await;
    create_as(&s, KEY_ACME, crm_with_secret(&crm.url(), "crm_token")).await.expect("every tenant");
}

#[tokio::test]
async fn a_secret_configured_twice_stops_start_up() {
    let mut cfg = ServerConfig::for_tests();
    cfg.secrets.insert("crm_token", toolrouter::upstream::SecretSource::Env("A".into()));
    cfg.secrets.insert("crm_token", toolrouter::upstream::SecretSource::Env("B".into()));
    let e = match toolrouter::server::start(cfg).await {
        Ok(_) => panic!("the server started"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("secret \"crm_token\" is configured more than once"), "{e}");
}
