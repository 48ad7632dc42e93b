//! Authentication (SPEC §9): bearer API keys stored as hashes, mapped to tenants and claims,
//! re-read on change; open health, reflection and HTTP endpoints; the loopback rule.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use tonic::Code;
use toolrouter::config::ServerConfig;
use toolrouter::pb;

const KEY_A: &str = "tr-test-key-acme-6f0d2c";
const KEY_B: &str = "tr-test-key-globex-91ab7e";

fn list_agents() -> pb::ListAgentsRequest {
    pb::ListAgentsRequest::default()
}

async fn key_works(s: &TestServer, key: &str) -> bool {
    s.registry_as(key).list_agents(list_agents()).await.is_ok()
}

#[tokio::test]
async fn every_service_refuses_calls_without_credentials_as_unauthenticated() {
    let (s, _keys) = TestServer::start_with_keys(&[(KEY_A, "acme")]).await;
    let agent = Some(agent_ref("crm"));
    let statuses = vec![
        s.registry().list_agents(list_agents()).await.unwrap_err(),
        s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "crm".into(), version: 0 }).await.unwrap_err(),
        s.discovery().discover_tools(pb::DiscoverToolsRequest { agent: agent.clone(), query: "x".into(), ..Default::default() }).await.unwrap_err(),
        s.router().get_model_tools(pb::GetModelToolsRequest { agent: agent.clone(), run: None, ..Default::default() }).await.unwrap_err(),
        s.router().list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), ..Default::default() }).await.unwrap_err(),
    ];
    for st in statuses {
        assert_eq!(st.code(), Code::Unauthenticated, "{st:?}");
        assert_eq!(st.message(), "missing or invalid credentials");
    }
}

#[tokio::test]
async fn a_wrong_key_and_another_scheme_get_the_same_answer_as_no_key() {
    let (s, _keys) = TestServer::start_with_keys(&[(KEY_A, "acme")]).await;
    let wrong = s.registry_as("tr-not-a-key").list_agents(list_agents()).await.unwrap_err();
    let mut basic = tonic::Request::new(list_agents());
    basic.metadata_mut().insert("authorization", format!("Basic {KEY_A}").parse().unwrap());
    let basic = s.registry().list_agents(basic).await.unwrap_err();
    for st in [wrong, basic] {
        assert_eq!(st.code(), Code::Unauthenticated);
        assert_eq!(st.message(), "missing or invalid credentials");
        assert!(st.details().is_empty(), "no detail on why a key failed");
    }
    assert!(key_works(&s, KEY_A).await);
}

#[tokio::test]
async fn health_reflection_and_http_endpoints_stay_open_when_auth_is_on() {
    let (s, _keys) = TestServer::start_with_keys(&[(KEY_A, "acme")]).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(s.channel.clone());
    let h = health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.expect("health answers").into_inner();
    assert_eq!(h.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
    };
    let mut reflection = ServerReflectionClient::new(s.channel.clone());
    let req = ServerReflectionRequest { host: String::new(), message_request: Some(MessageRequest::ListServices(String::new())) };
    let mut answers = reflection.server_reflection_info(tokio_stream::iter(vec![req])).await.expect("reflection answers").into_inner();
    let first = answers.message().await.expect("a reflection answer").expect("one message");
    assert!(format!("{first:?}").contains("toolrouter.v1.Router"));

    for path in ["/healthz", "/readyz", "/metrics"] {
        let (status, _) = http_get(s.server.http_addr, path).await;
        assert_eq!(status, 200, "{path}");
    }
}

#[tokio::test]
async fn each_key_acts_for_its_own_tenant() {
    let (s, _keys) = TestServer::start_with_keys(&[(KEY_A, "acme"), (KEY_B, "globex")]).await;
    s.create_as(KEY_A, "crm", crm_definition("http://127.0.0.1:1")).await;
    let acme = s.registry_as(KEY_A).list_agents(list_agents()).await.unwrap().into_inner();
    let globex = s.registry_as(KEY_B).list_agents(list_agents()).await.unwrap().into_inner();
    assert_eq!(acme.agents.iter().map(|a| a.agent_id.as_str()).collect::<Vec<_>>(), ["crm"]);
    assert!(globex.agents.is_empty());
}

#[tokio::test]
async fn a_changed_key_file_is_applied_without_restart() {
    let (s, keys) = TestServer::start_with_keys(&[(KEY_A, "acme")]).await;
    assert!(key_works(&s, KEY_A).await);
    assert!(!key_works(&s, KEY_B).await);
    keys.replace(&key_file_json(&[(KEY_B, "acme", json!({}))]));
    eventually("the new key is accepted", || key_works(&s, KEY_B)).await;
    assert!(!key_works(&s, KEY_A).await, "a key removed from the file is refused");
}

#[cfg(unix)]
#[tokio::test]
async fn a_kubernetes_secret_volume_update_swapping_the_data_symlink_is_applied() {
    use std::os::unix::fs::symlink;
    // The layout kubelet writes: a timestamped dir, `..data` → it, the file → `..data/file`.
    let dir = TempDir::new("secret-volume");
    let d = &dir.0;
    std::fs::create_dir(d.join("..2026_12_02_01")).unwrap();
    std::fs::write(d.join("..2026_12_02_01/api-keys.json"), key_file_json(&[(KEY_A, "acme", json!({}))])).unwrap();
    symlink("..2026_12_02_01", d.join("..data")).unwrap();
    symlink("..data/api-keys.json", d.join("api-keys.json")).unwrap();
    let mut cfg = ServerConfig::for_tests();
    cfg.auth.api_keys = Some(d.join("api-keys.json"));
    cfg.auth.reload_interval = Duration::from_millis(20);
    let s = TestServer::start_with(cfg).await;
    assert!(key_works(&s, KEY_A).await);

    std::fs::create_dir(d.join("..2026_12_02_02")).unwrap();
    std::fs::write(d.join("..2026_12_02_02/api-keys.json"), key_file_json(&[(KEY_B, "acme", json!({}))])).unwrap();
    symlink("..2026_12_02_02", d.join("..data_tmp")).unwrap();
    std::fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
    std::fs::remove_dir_all(d.join("..2026_12_02_01")).unwrap();

    eventually("the swapped secret is applied", || key_works(&s, KEY_B)).await;
    assert!(!key_works(&s, KEY_A).await);
}

#[tokio::test]
async fn a_broken_key_file_keeps_the_last_good_keys_and_logs_an_error() {
    let (log, _guard) = EventLog::capture();
    let (s, keys) = TestServer::start_with_keys(&[(KEY_A, "acme")]).await;
    keys.replace(r#"[{"tenant": "acme", "sha256": "#);
    eventually("the broken file is reported", || {
        let n = log.count("API key file rejected; keeping the version in force", "file", "API key");
        async move { n >= 1 }
    })
    .await;
    assert!(key_works(&s, KEY_A).await, "the last good key set stays in force");
    // Fixed again: applied.
    keys.replace(&key_file_json(&[(KEY_B, "acme", json!({}))]));
    eventually("the fixed file is applied", || key_works(&s, KEY_B)).await;
}

#[tokio::test]
async fn a_key_file_that_is_broken_at_start_up_stops_the_server_without_quoting_it() {
    let planted = "sk-planted-in-the-wrong-field-3c1d";
    let file = KeyFile::new(&format!(r#"[{{"tenant": "acme", "sha256": "{planted}"}}]"#));
    let err = toolrouter::server::start(config_with_keys(&file)).await.err().expect("start-up fails");
    let text = format!("{err:#}");
    assert!(text.contains("sha256"), "{text}");
    assert!(!text.contains(planted), "{text}");
}

#[tokio::test]
async fn without_keys_the_server_refuses_a_non_loopback_address_unless_told_it_is_insecure() {
    let mut cfg = ServerConfig::for_tests();
    cfg.grpc_addr = "0.0.0.0:0".parse().unwrap();
    let err = toolrouter::server::start(cfg).await.err().expect("refuses to start");
    let text = format!("{err:#}");
    assert!(text.contains("--insecure-no-auth") && text.contains("--api-keys"), "{text}");
}

#[tokio::test]
async fn without_keys_on_loopback_every_caller_is_the_default_tenant_with_a_loud_warning() {
    let (log, _guard) = EventLog::capture();
    let s = TestServer::start().await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    // A bearer token changes nothing when auth is off.
    let seen = s.registry_as("anything").list_agents(list_agents()).await.unwrap().into_inner();
    assert_eq!(seen.agents.len(), 1);
    let warned = log.events().iter().any(|e| e.get("message").is_some_and(|m| m.starts_with("AUTHENTICATION IS OFF")));
    assert!(warned, "a start-up warning says authentication is off");
}

#[tokio::test]
async fn claims_of_the_credential_win_over_claims_sent_in_the_run_context() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let file = KeyFile::new(&key_file_json(&[(KEY_A, "acme", json!({"user_id": "svc-acme"}))]));
    let s = TestServer::start_with(config_with_keys(&file)).await;
    s.create_as(KEY_A, "crm", crm_definition(&exec.endpoint())).await;
    let mut run = run_ctx("run-1");
    run.identity = [("user_id", "eve"), ("tenant_id", "globex"), ("team", "blue")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let out = s
        .call_as(KEY_A, "crm", run, "c1", "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}))
        .await
        .expect("call");
    assert_eq!(result_of(&out), (json!("Ada"), false));
    let sent = exec.exec.last.lock().unwrap().clone().expect("executed").run.expect("run context");
    assert_eq!(sent.identity["tenant_id"], "acme", "the authenticated tenant");
    assert_eq!(sent.identity["user_id"], "svc-acme", "the credential's claim");
    assert_eq!(sent.identity["team"], "blue", "claims the credential lacks pass through");
    let metadata = exec.exec.last_metadata.lock().unwrap().clone();
    assert!(!metadata.is_empty(), "the executor's metadata was recorded");
    assert!(metadata.iter().all(|(k, v)| k != "authorization" && !v.contains(KEY_A)), "the caller's key is not forwarded: {metadata:?}");
}

#[tokio::test]
async fn without_authentication_the_hosts_claims_pass_through_as_sent() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let mut run = run_ctx("run-1");
    run.identity = [("user_id".to_string(), "ada".to_string()), ("tenant_id".to_string(), "local".to_string())].into();
    let out = s
        .handle_raw("crm", run, "c1", "call_tool", &json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}).to_string())
        .await
        .unwrap();
    assert_eq!(result_of(&out), (json!("Ada"), false));
    let identity = exec.exec.last.lock().unwrap().clone().unwrap().run.unwrap().identity;
    assert_eq!((identity["user_id"].as_str(), identity["tenant_id"].as_str()), ("ada", "local"), "no credential, no claims to win");
}
