//! MCP sources (SPEC §7): toolrouter as an MCP client of a real rmcp server on loopback.

mod common;
#[path = "mcp/support.rs"]
mod support;

use std::time::Duration;

use common::*;
use serde_json::json;
use support::{McpServer, mcp_tool};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::upstream::SecretSource;

fn binding_from(from: &str, prefix: &str) -> pb::HeaderBinding {
    pb::HeaderBinding { value: Some(pb::header_binding::Value::From(from.into())), prefix: prefix.into() }
}

fn binding_secret(name: &str, prefix: &str) -> pb::HeaderBinding {
    pb::HeaderBinding { value: Some(pb::header_binding::Value::Secret(name.into())), prefix: prefix.into() }
}

fn mcp_source(id: &str, url: &str, headers: &[(&str, pb::HeaderBinding)]) -> pb::ToolSource {
    pb::ToolSource {
        id: id.into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource {
            url: url.into(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn mcp_of(source: &mut pb::ToolSource) -> &mut pb::McpSource {
    match source.kind.as_mut() {
        Some(pb::tool_source::Kind::Mcp(m)) => m,
        _ => unreachable!(),
    }
}

/// Group `crm` holding the given sources.
fn crm(sources: Vec<pb::ToolSource>) -> pb::AgentDefinition {
    let ids: Vec<String> = sources.iter().map(|s| s.id.clone()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    pb::AgentDefinition { groups: [("crm".to_string(), group("Customer records", &ids))].into(), sources, ..Default::default() }
}

fn call_crm(tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    json!({"group": "crm", "tool": tool, "arguments": arguments})
}

/// One process-wide subscriber for this binary (thread-local ones race with other tests over
/// tracing's cached callsite interest): every event at TRACE into a buffer, and spans to
/// OpenTelemetry so trace contexts exist.
fn logs() -> &'static Capture {
    static LOGS: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt;
        let capture = Capture::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(capture.clone()).with_ansi(false))
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
            .with(tracing_subscriber::filter::LevelFilter::TRACE);
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        capture
    })
}

fn config() -> ServerConfig {
    logs();
    let mut cfg = ServerConfig::for_tests();
    cfg.upstream.refresh_min_age = Duration::ZERO;
    cfg
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolrouter-mcp-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn mcp_tools_take_part_in_grouping_search_describe_pinning_and_validation() {
    let upstream = McpServer::start(vec![
        mcp_tool("customer_lookup", "Find a customer by email address.", &["email"]),
        mcp_tool("invoice_list", "List the invoices of a customer.", &["customer_id"]),
    ])
    .await;
    let s = TestServer::start_with(config()).await;
    let mut source = mcp_source("crm-mcp", &upstream.url(), &[]);
    source.tool_configs.insert("invoice_list".into(), pb::ToolConfig { pin: true, ..Default::default() });
    s.create("agent", crm(vec![source])).await;

    let tools = s.model_tools("agent", run_ctx("r1")).await;
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"discover_tools") && names.contains(&"call_tool"), "{names:?}");
    assert!(names.contains(&"crm__invoice_list"), "pinned MCP tool exposed: {names:?}");
    assert!(!names.contains(&"crm__customer_lookup"), "{names:?}");
    assert!(tools.diagnostics.is_empty(), "{:?}", tools.diagnostics);

    let (found, _) = s.call_result("agent", "r1", "d1", "discover_tools", json!({"query": "customer email"})).await;
    assert_eq!(found["tools"][0]["name"], "crm__customer_lookup", "{found}");
    let (described, _) = s.call_result("agent", "r1", "d2", "describe_tool", json!({"group": "crm", "tool": "customer_lookup"})).await;
    assert_eq!(described["tool"]["kind"], "mcp");
    assert_eq!(described["tool"]["parameters_json_schema"]["required"], json!(["email"]));

    // Validated against the upstream schema before anything is sent.
    let (bad, is_error) = s.call_result("agent", "r1", "c1", "call_tool", call_crm("customer_lookup", json!({}))).await;
    assert!(is_error, "{bad}");
    assert!(upstream.calls().is_empty());

    let (ok, is_error) = s.call_result("agent", "r1", "c2", "call_tool", call_crm("customer_lookup", json!({"email": "ada@example.com"}))).await;
    assert!(!is_error, "{ok}");
    assert_eq!(ok, json!({"tool": "customer_lookup", "arguments": {"email": "ada@example.com"}}));
    let (pinned, is_error) = s.call_result("agent", "r1", "c3", "crm__invoice_list", json!({"customer_id": "42"})).await;
    assert!(!is_error && pinned["tool"] == "invoice_list", "{pinned}");
}

#[tokio::test]
async fn a_run_reuses_one_session_with_headers_resolved_once_and_concurrent_runs_get_their_own() {
    let upstream = McpServer::start_sessions_only(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let token = temp_file("token-a", "first-token\n");
    let mut cfg = config();
    cfg.secrets.insert("crm_token", SecretSource::File(token.clone()));
    let s = TestServer::start_with(cfg).await;
    let source = mcp_source(
        "crm-mcp",
        &upstream.url(),
        &[
            ("Authorization", binding_secret("crm_token", "Bearer ")),
            ("X-Run", binding_from("context.run_id", "")),
            ("X-User", binding_from("identity.user_id", "user:")),
            ("X-Tenant", binding_from("identity.tenant_id", "")),
        ],
    );
    s.create("agent", crm(vec![source])).await;

    let call = |run: &'static str, user: &'static str, id: &'static str| {
        let s = &s;
        async move {
            let outcome = s
                .handle_raw("agent", run_as(run, Some(user), pb::Caller::Model), id, "call_tool", &call_crm("lookup", json!({})).to_string())
                .await
                .expect("handled");
            let (content, is_error) = result_of(&outcome);
            assert!(!is_error, "{content}");
        }
    };
    // Two runs at once, two calls each.
    tokio::join!(call("run-a", "ada", "a1"), call("run-b", "bob", "b1"));
    tokio::join!(call("run-a", "ada", "a2"), call("run-b", "bob", "b2"));
    // The secret rotates: run A keeps the headers it resolved; a new run gets the new value.
    std::fs::write(&token, "second-token\n").unwrap();
    call("run-a", "ada", "a3").await;
    call("run-c", "cy", "c1").await;

    let calls = upstream.calls();
    assert_eq!(calls.len(), 6);
    let of_run = |run: &str| calls.iter().filter(|c| c.headers.get("x-run").map(String::as_str) == Some(run)).cloned().collect::<Vec<_>>();
    let (a, b, c) = (of_run("run-a"), of_run("run-b"), of_run("run-c"));
    assert_eq!((a.len(), b.len(), c.len()), (3, 2, 1));
    assert!(a.iter().all(|x| x.session == a[0].session && !x.session.is_empty()), "run A keeps one session");
    assert!(b.iter().all(|x| x.session == b[0].session), "run B keeps one session");
    assert!(a[0].session != b[0].session && a[0].session != c[0].session && b[0].session != c[0].session);
    for x in &a {
        assert_eq!(x.headers["authorization"], "Bearer first-token", "resolved once for the run");
        assert_eq!(x.headers["x-user"], "user:ada");
        assert_eq!(x.headers["x-tenant"], "default");
    }
    assert_eq!(b[0].headers["x-user"], "user:bob");
    assert_eq!(c[0].headers["authorization"], "Bearer second-token");
    // Each session saw only its own run's headers.
    for seen in upstream.seen().iter().filter(|x| x.session == a[0].session) {
        assert_eq!(seen.headers.get("x-run").map(String::as_str), Some("run-a"));
    }
}

#[tokio::test]
async fn a_server_of_the_stateless_protocol_is_called_without_sessions_with_the_runs_headers_on_every_request() {
    let modern = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let legacy = McpServer::start_sessions_only(vec![mcp_tool("invoice_list", "List a customer's invoices.", &[])]).await;
    let s = TestServer::start_with(config()).await;
    let run_header = [("X-Run", binding_from("context.run_id", ""))];
    s.create("agent", crm(vec![mcp_source("crm-mcp", &modern.url(), &run_header), mcp_source("billing-mcp", &legacy.url(), &run_header)])).await;
    for (run, id) in [("run-a", "a1"), ("run-b", "b1"), ("run-a", "a2"), ("run-b", "b2")] {
        for tool in ["lookup", "invoice_list"] {
            let (r, is_error) = s.call_result("agent", run, &format!("{id}-{tool}"), "call_tool", call_crm(tool, json!({}))).await;
            assert!(!is_error, "{r}");
        }
    }
    // The 2026-07-28 server: no session, the version on every request, each run's header.
    let seen = modern.seen();
    assert!(seen.len() >= 4 && seen.iter().all(|x| x.session.is_empty() && x.protocol == "2026-07-28"), "{seen:#?}");
    let calls = modern.calls();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls.iter().map(|c| c.headers["x-run"].as_str()).collect::<Vec<_>>(), ["run-a", "run-b", "run-a", "run-b"]);
    // The older server: a session per run, as before.
    let calls = legacy.calls();
    assert!(calls.iter().all(|c| !c.session.is_empty() && c.protocol != "2026-07-28"), "{calls:#?}");
    let session_of = |run: &str| calls.iter().filter(|c| c.headers["x-run"] == run).map(|c| c.session.clone()).collect::<Vec<_>>();
    let (a, b) = (session_of("run-a"), session_of("run-b"));
    assert!(a.len() == 2 && a[0] == a[1] && b.len() == 2 && b[0] == b[1] && a[0] != b[0], "{a:?} {b:?}");
}

#[tokio::test]
async fn end_run_releases_the_runs_sessions_and_idle_sessions_expire() {
    let upstream = McpServer::start_sessions_only(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let mut cfg = config();
    cfg.upstream.session_idle = Duration::from_secs(1);
    let s = TestServer::start_with(cfg).await;
    s.create("agent", crm(vec![mcp_source("crm-mcp", &upstream.url(), &[])])).await;
    let call = |id: &'static str| s.call_result("agent", "run-1", id, "call_tool", call_crm("lookup", json!({})));

    call("1").await;
    call("2").await;
    s.router().end_run(pb::EndRunRequest { agent_id: "agent".into(), run_id: "run-1".into() }).await.expect("end run");
    call("3").await;
    let sessions: Vec<String> = upstream.calls().iter().map(|c| c.session.clone()).collect();
    assert_eq!(sessions[0], sessions[1]);
    assert_ne!(sessions[1], sessions[2], "EndRun closed the run's session");

    // Idle past the limit (the sweeper runs every 250 ms here): the next call opens a new one.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    call("4").await;
    let sessions: Vec<String> = upstream.calls().iter().map(|c| c.session.clone()).collect();
    assert_ne!(sessions[2], sessions[3], "the idle session expired");
}

#[tokio::test]
async fn a_session_in_use_longer_than_the_idle_time_is_kept_and_idle_counts_from_the_end_of_its_call() {
    let upstream = McpServer::start_sessions_only(vec![
        mcp_tool("pause_lookup", "Looks a record up, slowly.", &[]),
        mcp_tool("lookup", "Look a record up.", &[]),
    ])
    .await;
    let mut cfg = config();
    // The call takes 1.5 s: five times the idle time, with the sweeper running every 75 ms.
    cfg.upstream.session_idle = Duration::from_millis(300);
    let s = TestServer::start_with(cfg).await;
    s.create("agent", crm(vec![mcp_source("crm-mcp", &upstream.url(), &[])])).await;
    let (r, is_error) = s.call_result("agent", "run-1", "1", "call_tool", call_crm("pause_lookup", json!({}))).await;
    assert!(!is_error, "{r}");
    let (r, is_error) = s.call_result("agent", "run-1", "2", "call_tool", call_crm("lookup", json!({}))).await;
    assert!(!is_error, "{r}");
    let sessions: Vec<String> = upstream.calls().iter().map(|c| c.session.clone()).collect();
    assert_eq!(sessions[0], sessions[1], "the session was not closed while its call ran");
}

#[tokio::test]
async fn a_call_naming_a_tool_the_listing_lacks_lists_again_before_it_fails() {
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let s = TestServer::start_with(config()).await;
    s.create("agent", crm(vec![mcp_source("crm-mcp", &upstream.url(), &[])])).await;
    let (found, _) = s.call_result("agent", "r", "d1", "discover_tools", json!({"query": ""})).await;
    assert_eq!(found["total"], 1);
    let lists = upstream.lists();

    upstream.set_tools(vec![mcp_tool("lookup", "Look a record up.", &[]), mcp_tool("merge", "Merge two records.", &[])]);
    let (merged, is_error) = s.call_result("agent", "r", "c1", "call_tool", call_crm("merge", json!({}))).await;
    assert!(!is_error, "{merged}");
    assert_eq!(merged["tool"], "merge");
    assert!(upstream.lists() > lists, "the listing was refreshed");
    let (found, _) = s.call_result("agent", "r", "d2", "discover_tools", json!({"query": ""})).await;
    assert_eq!(found["total"], 2, "discovery sees the new tool: {found}");

    // A name the server does not have either stays a model-visible unknown tool.
    let (missing, is_error) = s.call_result("agent", "r", "c2", "call_tool", call_crm("nothing", json!({}))).await;
    assert!(is_error && missing["error"] == "unknown_tool", "{missing}");
}

#[tokio::test]
async fn a_tool_that_vanished_upstream_is_a_refresh_discovery_result() {
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[]), mcp_tool("merge", "Merge two records.", &[])]).await;
    let s = TestServer::start_with(config()).await;
    s.create("agent", crm(vec![mcp_source("crm-mcp", &upstream.url(), &[])])).await;
    let (found, _) = s.call_result("agent", "r", "d1", "discover_tools", json!({"query": ""})).await;
    assert_eq!(found["total"], 2);

    upstream.set_tools(vec![mcp_tool("lookup", "Look a record up.", &[])]);
    let (gone, is_error) = s.call_result("agent", "r", "c1", "call_tool", call_crm("merge", json!({}))).await;
    assert!(is_error, "{gone}");
    assert_eq!(gone["error"], "tool_unavailable");
    assert!(gone["message"].as_str().unwrap().contains("Refresh discovery"), "{gone}");
    let (found, _) = s.call_result("agent", "r", "d2", "discover_tools", json!({"query": ""})).await;
    assert_eq!(found["total"], 1, "discovery no longer offers it: {found}");

    // An ordinary tool error is not mistaken for a vanished tool.
    upstream.set_tools(vec![mcp_tool("fail_always", "Always fails.", &[])]);
    let (failed, is_error) = s.call_result("agent", "r2", "c2", "call_tool", call_crm("fail_always", json!({}))).await;
    assert!(is_error, "{failed}");
    assert_eq!(failed, json!("the upstream tool failed"));
}

#[tokio::test]
async fn local_names_colliding_in_a_group_are_reported_not_renamed() {
    let one = McpServer::start(vec![mcp_tool("lookup", "Look a customer up.", &[])]).await;
    let two = McpServer::start(vec![mcp_tool("lookup", "Look an order up.", &[]), mcp_tool("cancel", "Cancel an order.", &[])]).await;
    let s = TestServer::start_with(config()).await;
    s.create("agent", crm(vec![mcp_source("customers", &one.url(), &[]), mcp_source("orders", &two.url(), &[])])).await;
    let tools = s.model_tools("agent", run_ctx("r")).await;
    assert!(
        tools.diagnostics.iter().any(|d| d.contains("\"orders\"") && d.contains("\"lookup\"") && d.contains("already used in group \"crm\"")),
        "{:?}",
        tools.diagnostics
    );
    let (found, _) = s.call_result("agent", "r", "d", "discover_tools", json!({"query": ""})).await;
    let names: Vec<&str> = found["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["crm__cancel", "crm__lookup"], "no renamed copy");
    let (d, _) = s.call_result("agent", "r", "d2", "describe_tool", json!({"group": "crm", "tool": "lookup"})).await;
    assert_eq!(d["tool"]["description"], "Look a customer up.", "the first source keeps the name");
}

#[tokio::test]
async fn deadlines_approval_idempotency_and_code_eligibility_apply_to_mcp_tools() {
    let upstream = McpServer::start(vec![
        mcp_tool("slow_write", "Writes slowly.", &[]),
        mcp_tool("slow_read", "Reads slowly.", &[]),
        mcp_tool("refund", "Refund a payment.", &[]),
        mcp_tool("lookup", "Look a record up.", &[]),
    ])
    .await;
    let s = TestServer::start_with(config()).await;
    let mut source = mcp_source("crm-mcp", &upstream.url(), &[]);
    let m = mcp_of(&mut source);
    m.timeout = Some(prost_types::Duration { seconds: 0, nanos: 200_000_000 });
    m.idempotent_tools = vec!["slow_read".into()];
    m.approval_required = vec!["refund".into()];
    m.codeact_callable = vec!["lookup".into()];
    s.create("agent", crm(vec![source])).await;

    let (r, is_error) = s.call_result("agent", "r", "1", "call_tool", call_crm("slow_write", json!({}))).await;
    assert!(is_error && r["error"] == "outcome_unknown", "{r}");
    let (r, is_error) = s.call_result("agent", "r", "2", "call_tool", call_crm("slow_read", json!({}))).await;
    assert!(is_error && r["error"] == "timeout", "{r}");

    let outcome = s.call("agent", "r", "3", "call_tool", call_crm("refund", json!({}))).await;
    let deferred = deferred_of(&outcome);
    assert_eq!(deferred.kind, pb::DeferredKind::Approval as i32);
    assert!(upstream.calls().iter().all(|c| c.tool != "refund"), "not sent before approval");
    let approved = s
        .resolve(&deferred.deferred_id, pb::resolve_deferred_request::Resolution::Approve(pb::Approve { arguments_json: None }))
        .await
        .expect("approved");
    assert!(!approved.is_error, "{}", approved.content_json);
    assert!(upstream.calls().iter().any(|c| c.tool == "refund"));

    let as_code = |tool: &str| call_crm(tool, json!({})).to_string();
    let code = run_as("r", None, pb::Caller::Code);
    let (r, is_error) = result_of(&s.handle_raw("agent", code.clone(), "4", "call_tool", &as_code("refund")).await.unwrap());
    assert!(is_error && r["error"] == "not_callable_from_code", "{r}");
    let (r, is_error) = result_of(&s.handle_raw("agent", code, "5", "call_tool", &as_code("lookup")).await.unwrap());
    assert!(!is_error, "{r}");
}

#[tokio::test]
async fn an_unreachable_mcp_server_is_a_diagnostic_and_a_model_visible_unavailable_result() {
    let url = format!("{}/mcp", refused_endpoint().await);
    let s = TestServer::start_with(config()).await;
    let mut def = crm(vec![mcp_source("crm-mcp", &url, &[])]);
    def.sources.push(client_source("notes", vec![tool("note", "Take a note.", json!({"type": "object"}))]));
    s.create("agent", def).await;
    let tools = s.model_tools("agent", run_ctx("r")).await;
    assert!(tools.diagnostics.iter().any(|d| d.contains("\"crm-mcp\"") && d.contains("tools/list")), "{:?}", tools.diagnostics);
    assert!(tools.tools.iter().any(|t| t.name == "note"));

    // Reachable when its tools were listed, gone when one is called: the model is told the
    // tool is unavailable and was not run.
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    s.create("listed", crm(vec![mcp_source("crm-mcp", &upstream.url(), &[])])).await;
    let (found, _) = s.call_result("listed", "r1", "d1", "discover_tools", json!({"query": ""})).await;
    assert_eq!(found["total"], 1, "{found}");
    let addr = upstream.addr;
    drop(upstream);
    let mut stopped = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(stopped, "the MCP server stopped listening");
    let (gone, is_error) = s.call_result("listed", "r2", "c1", "call_tool", call_crm("lookup", json!({}))).await;
    assert!(is_error, "{gone}");
    assert_eq!(gone["error"], "tool_unavailable", "{gone}");
    assert!(gone["message"].as_str().unwrap().contains("It was not run"), "{gone}");
}

/// discover_tools in a run of `user`; the listing has one tool.
async fn discover(s: &TestServer, run: &str, user: &str) {
    let outcome = s.handle_raw("agent", run_as(run, Some(user), pb::Caller::Model), "d", "discover_tools", r#"{"query": ""}"#).await.unwrap();
    let (found, is_error) = result_of(&outcome);
    assert!(!is_error && found["total"] == 1, "{found}");
}

#[tokio::test]
async fn tool_listings_are_cached_per_resolved_header_set_for_a_bounded_time() {
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let lists_for =
        |user: &str| upstream.seen().iter().filter(|r| r.method == "tools/list" && r.headers.get("x-user").map(String::as_str) == Some(user)).count();
    let definition = || crm(vec![mcp_source("crm-mcp", &upstream.url(), &[("X-User", binding_from("identity.user_id", ""))])]);

    // Far longer than the test: runs with the same header values share one listing, another
    // value gets its own.
    let mut cfg = config();
    cfg.tool_list_ttl = Duration::from_secs(3600);
    let s = TestServer::start_with(cfg).await;
    s.create("agent", definition()).await;
    discover(&s, "r1", "ada").await;
    discover(&s, "r2", "ada").await;
    assert_eq!(lists_for("ada"), 1, "r2 used r1's listing");
    discover(&s, "r3", "bob").await;
    assert_eq!((lists_for("ada"), lists_for("bob")), (1, 1), "bob's headers got a listing of their own");
    drop(s);

    // Short: once a listing is older than it, the next use lists again.
    let mut cfg = config();
    cfg.tool_list_ttl = Duration::from_millis(200);
    let s = TestServer::start_with(cfg).await;
    s.create("agent", definition()).await;
    discover(&s, "r4", "cy").await;
    assert_eq!(lists_for("cy"), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    discover(&s, "r5", "cy").await;
    assert_eq!(lists_for("cy"), 2, "the expired listing was read again");
}

#[tokio::test]
async fn operator_secrets_never_appear_in_the_definition_errors_or_logs() {
    const SECRET: &str = "planted-mcp-secret-8d2f41";
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[]), mcp_tool("fail_now", "Fails.", &[])]).await;
    let token = temp_file("token-leak", SECRET);
    let buffer = logs();
    let mut cfg = config();
    cfg.secrets.insert("crm_token", SecretSource::File(token));
    cfg.secrets.insert("missing_env", SecretSource::Env("TOOLROUTER_TEST_UNSET_VARIABLE_9f3".into()));
    let missing_path = std::env::temp_dir().join("toolrouter-test-no-such-dir-7c1e/crm-token");
    cfg.secrets.insert("missing_file", SecretSource::File(missing_path.clone()));
    let s = TestServer::start_with(cfg).await;
    let def = crm(vec![mcp_source("crm-mcp", &upstream.url(), &[("Authorization", binding_secret("crm_token", "Bearer "))])]);
    s.create("agent", def).await;
    let mut broken = crm(vec![
        mcp_source("crm-mcp", &upstream.url(), &[("Authorization", binding_secret("missing_env", ""))]),
        mcp_source("crm-files", &upstream.url(), &[("Authorization", binding_secret("missing_file", ""))]),
    ]);
    broken.instructions = "broken".into();
    s.create("broken", broken).await;

    let (ok, is_error) = s.call_result("agent", "r", "1", "call_tool", call_crm("lookup", json!({}))).await;
    assert!(!is_error, "{ok}");
    let (failed, _) = s.call_result("agent", "r", "2", "call_tool", call_crm("fail_now", json!({}))).await;
    let tools = s.model_tools("broken", run_ctx("r")).await;
    let version = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "agent".into(), version: 0 }).await.unwrap().into_inner();

    assert!(upstream.calls().iter().any(|c| c.headers.get("authorization").map(String::as_str) == Some(&*format!("Bearer {SECRET}"))));
    let logs = buffer.text();
    assert!(logs.len() > 1000, "logs were captured ({} bytes)", logs.len());
    for (what, text) in [
        ("logs", logs),
        ("GetAgentVersion", format!("{version:?}")),
        ("results", format!("{ok} {failed}")),
        ("diagnostics", format!("{:?}", tools.diagnostics)),
    ] {
        assert!(!text.contains(SECRET), "the secret appeared in {what}");
    }
    // Tenants see which secret failed, never where the operator keeps it.
    for name in ["missing_env", "missing_file"] {
        assert!(tools.diagnostics.iter().any(|d| d.contains(&format!("secret {name:?} could not be read"))), "{:?}", tools.diagnostics);
    }
    let diagnostics = format!("{:?}", tools.diagnostics);
    for operator_detail in ["TOOLROUTER_TEST_UNSET_VARIABLE_9f3", "toolrouter-test-no-such-dir-7c1e", "environment variable", "file "] {
        assert!(!diagnostics.contains(operator_detail), "{operator_detail:?} in {diagnostics}");
    }
    // The operator's log says where it looked.
    assert!(buffer.text().contains("TOOLROUTER_TEST_UNSET_VARIABLE_9f3"), "the log names the variable for the operator");
}

#[tokio::test]
async fn the_trace_context_reaches_the_mcp_server() {
    let upstream = McpServer::start(vec![mcp_tool("lookup", "Look a record up.", &[])]).await;
    let s = TestServer::start_with(config()).await;
    s.create("agent", crm(vec![mcp_source("crm-mcp", &upstream.url(), &[])])).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let mut req = tonic::Request::new(pb::HandleToolCallRequest {
        agent: Some(agent_ref("agent")),
        run: Some(run_ctx("r")),
        call: Some(pb::ToolCall {
            tool_call_id: "1".into(),
            tool_name: "call_tool".into(),
            arguments_json: call_crm("lookup", json!({})).to_string(),
        }),
        ..Default::default()
    });
    req.metadata_mut().insert("traceparent", format!("00-{trace}-00f067aa0ba902b7-01").parse().unwrap());
    s.router().handle_tool_call(req).await.expect("handled");
    let call = upstream.calls().pop().expect("called");
    let seen = call.headers.get("traceparent").expect("a traceparent header");
    assert!(seen.starts_with(&format!("00-{trace}-")), "{seen}");
    assert!(!seen.contains("00f067aa0ba902b7"), "the parent is toolrouter's own span: {seen}");
}

/// A log sink for `tracing_subscriber::fmt`.
#[derive(Clone, Default)]
struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Capture {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn the_flat_profile_searches_and_calls_mcp_tools_by_canonical_name() {
    let upstream = McpServer::start(vec![
        mcp_tool("refund_payment", "Refund a payment to a customer.", &["payment_id"]),
        mcp_tool("customer_lookup", "Find a customer by email address.", &["email"]),
    ])
    .await;
    let s = TestServer::start_with(config()).await;
    let mut def = crm(vec![mcp_source("crm-mcp", &upstream.url(), &[])]);
    def.control = Some(pb::ControlConfig { profile: pb::Profile::Flat as i32, ..Default::default() });
    s.create("agent", def).await;
    let tools = s.model_tools("agent", run_ctx("r")).await;
    assert_eq!(tools.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["tool_search", "call_tool"]);

    let (found, is_error) = s.call_result("agent", "r", "s1", "tool_search", json!({"query": "I need to refund a payment", "limit": 1})).await;
    assert!(!is_error, "{found}");
    assert_eq!(found["tools"][0]["name"], "crm__refund_payment", "{found}");
    assert_eq!(found["tools"][0]["parameters_json_schema"]["required"], json!(["payment_id"]), "full definitions");

    let (done, is_error) =
        s.call_result("agent", "r", "c1", "call_tool", json!({"name": "crm__refund_payment", "arguments": {"payment_id": "p-1"}})).await;
    assert!(!is_error, "{done}");
    assert_eq!(done["arguments"], json!({"payment_id": "p-1"}));
    let (unknown, is_error) = s.call_result("agent", "r", "c2", "call_tool", json!({"name": "crm__nothing", "arguments": {}})).await;
    assert!(is_error && unknown["error"] == "unknown_tool", "{unknown}");
    assert!(unknown["message"].as_str().unwrap().contains("tool_search"), "{unknown}");
}

#[tokio::test]
async fn the_sources_concurrency_limit_makes_extra_calls_busy() {
    let upstream = McpServer::start(vec![mcp_tool("slow_write", "Writes slowly.", &[])]).await;
    let mut cfg = config();
    cfg.upstream.queue_wait = Duration::from_millis(50);
    let s = TestServer::start_with(cfg).await;
    let mut source = mcp_source("crm-mcp", &upstream.url(), &[]);
    mcp_of(&mut source).max_concurrency = 1;
    mcp_of(&mut source).timeout = Some(prost_types::Duration { seconds: 1, nanos: 500_000_000 });
    s.create("agent", crm(vec![source])).await;
    // The second call is made once the first is at the server, holding the only slot.
    let ((first, _), (second, _)) = tokio::join!(s.call_result("agent", "r1", "1", "call_tool", call_crm("slow_write", json!({}))), async {
        eventually("the first call reaches the server", || async { !upstream.calls().is_empty() }).await;
        s.call_result("agent", "r2", "2", "call_tool", call_crm("slow_write", json!({}))).await
    });
    let mut errors = [first["error"].as_str().unwrap().to_string(), second["error"].as_str().unwrap().to_string()];
    errors.sort();
    assert_eq!(errors, ["busy", "outcome_unknown"], "{first} {second}");
    assert_eq!(upstream.calls().len(), 1, "the busy call was not sent");
}

// ----- faults are typed: a tool's answer is never taken for toolrouter's own -----

#[tokio::test]
async fn tools_answering_with_toolrouters_unknown_tool_body_run_once_and_reach_the_model_unchanged() {
    let exec = spawn_executor(Behaviour::Reply(support::LOOKALIKE_FAULT.into(), true)).await;
    let upstream = McpServer::start(vec![mcp_tool("lookalike", "Answers like a router fault.", &[])]).await;
    let function = function_source("fn", &exec.endpoint(), vec![tool("lookalike_fn", "Answers like a router fault.", json!({"type": "object"}))]);
    let s = TestServer::start_with(config()).await;
    s.create("a", crm(vec![function, mcp_source("up", &upstream.url(), &[])])).await;
    let listing = || async {
        let list = pb::ListCatalogToolsRequest { agent: Some(agent_ref("a")), run: Some(run_ctx("r1")), ..Default::default() };
        let tools = s.discovery().list_tools(list).await.expect("list tools").into_inner().tools;
        tools.into_iter().map(|t| t.name).collect::<Vec<_>>()
    };
    let before = listing().await;
    assert_eq!(before, ["crm__lookalike", "crm__lookalike_fn"]);
    for (id, tool) in [("c1", "lookalike_fn"), ("c2", "lookalike")] {
        let outcome = s.call("a", "r1", id, "call_tool", call_crm(tool, json!({}))).await;
        let pb::handle_tool_call_response::Outcome::Result(r) = outcome else { panic!("expected a result, got {outcome:?}") };
        assert_eq!((r.content_json.as_str(), r.is_error), (support::LOOKALIKE_FAULT, true), "{tool}");
    }
    assert_eq!(exec.calls(), 1, "the executor's tool ran once");
    assert_eq!(upstream.calls().len(), 1, "the MCP tool ran once");
    assert_eq!(listing().await, before, "the tool list did not change");
}

#[tokio::test]
async fn an_mcp_result_over_the_limit_is_the_fault_result_too_large_and_is_not_run_again() {
    let upstream = McpServer::start(vec![mcp_tool("huge_report", "Returns a lot.", &[])]).await;
    let mut cfg = config();
    cfg.upstream.max_result_bytes = 1_024;
    let s = TestServer::start_with(cfg).await;
    s.create("a", crm(vec![mcp_source("up", &upstream.url(), &[])])).await;
    for _ in 0..2 {
        let (content, is_error) = s.call_result("a", "r1", "c1", "call_tool", call_crm("huge_report", json!({}))).await;
        assert!(is_error && content["error"] == "result_too_large", "{content}");
    }
    assert_eq!(upstream.calls().len(), 1);
}
