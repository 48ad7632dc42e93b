//! Endurance (SPEC §8): claims held under leases, retries that learn a holder is gone within
//! seconds, calls cut off by shutdown, tool call ids reused for another call, pending records
//! that expire. Two in-process replicas share one SQLite file where replicas matter.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::pb::resolve_deferred_request::Resolution;

/// A SQLite file two servers can share, removed when dropped.
struct SharedFile(std::path::PathBuf);

impl SharedFile {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("toolrouter-endurance-{}-{}", std::process::id(), rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.0.join("store.db").display())
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn replica(store: &SharedFile, lease: Duration) -> ServerConfig {
    let mut cfg = ServerConfig::for_tests();
    cfg.store = store.url();
    cfg.router.claim_lease = lease;
    cfg
}

fn call_crm(id: u64) -> Value {
    json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": id}})
}

fn result(outcome: &pb::handle_tool_call_response::Outcome) -> (Value, bool) {
    match outcome {
        pb::handle_tool_call_response::Outcome::Result(r) => (serde_json::from_str(&r.content_json).expect("JSON"), r.is_error),
        other => panic!("expected a result, got {other:?}"),
    }
}

/// Starts `call_tool` c1 of run r1 on a task of its own.
fn start_call(s: &TestServer) -> tokio::task::JoinHandle<Result<tonic::Response<pb::HandleToolCallResponse>, tonic::Status>> {
    let mut client = s.router();
    tokio::spawn(async move {
        let call = pb::ToolCall { tool_call_id: "c1".into(), tool_name: "call_tool".into(), arguments_json: call_crm(42).to_string() };
        client
            .handle_tool_call(pb::HandleToolCallRequest {
                agent: Some(agent_ref("crm")),
                run: Some(run_ctx("r1")),
                call: Some(call),
                ..Default::default()
            })
            .await
    })
}

#[tokio::test]
async fn a_retry_of_a_call_whose_replica_is_gone_gets_the_uncertain_outcome_within_the_lease_and_never_runs_it() {
    let gate = Gate::new();
    let exec = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let file = SharedFile::new();
    let lease = Duration::from_secs(1);
    let a = TestServer::start_with(replica(&file, lease)).await;
    let b = TestServer::start_with(replica(&file, lease)).await;
    a.create("crm", crm_definition(&exec.endpoint())).await;
    let _lost = start_call(&a);
    exec.wait_inflight(1).await;
    // Replica a dies at once (as with kill -9): nothing renews its lease any more.
    drop(a);

    let started = Instant::now();
    let (content, is_error) = result(&b.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    let waited = started.elapsed();
    assert!(is_error && content["error"] == "outcome_unknown", "{content}");
    assert!(waited < lease + Duration::from_secs(5), "answered after {waited:?}");
    gate.open();
    assert_eq!(result(&b.call("crm", "r1", "c1", "call_tool", call_crm(42)).await).0, content, "the uncertain outcome is the stored one");
    assert_eq!(exec.calls(), 1, "never run again");
}

#[tokio::test]
async fn a_call_running_longer_than_its_lease_keeps_it_and_a_retry_on_another_replica_gets_its_result() {
    let gate = Gate::new();
    let exec = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let file = SharedFile::new();
    let lease = Duration::from_millis(600);
    let a = TestServer::start_with(replica(&file, lease)).await;
    let b = TestServer::start_with(replica(&file, lease)).await;
    a.create("crm", crm_definition(&exec.endpoint())).await;
    let running = start_call(&a);
    exec.wait_inflight(1).await;
    let retried = start_call(&b);
    // Several leases long: replica a renews its lease, so the retry keeps waiting.
    tokio::time::sleep(lease * 4).await;
    assert!(!retried.is_finished(), "the retry waits for the running call");
    gate.open();
    let first = running.await.unwrap().expect("first").into_inner().outcome.expect("outcome");
    let second = retried.await.unwrap().expect("retry").into_inner().outcome.expect("outcome");
    assert_eq!(result(&first), (json!("Ada"), false));
    assert_eq!(result(&second), (json!("Ada"), false), "the retry gets the first call's result");
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn calls_still_running_at_the_end_of_the_shutdown_grace_get_the_uncertain_outcome_at_once() {
    let gate = Gate::new();
    let exec = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let file = SharedFile::new();
    let mut cfg = replica(&file, Duration::from_secs(60));
    cfg.grace = Duration::from_millis(300);
    let a = TestServer::start_with(cfg).await;
    a.create("crm", crm_definition(&exec.endpoint())).await;
    let _cut_off = start_call(&a);
    exec.wait_inflight(1).await;
    let TestServer { server, .. } = a;
    server.shutdown().await;

    // Another replica answers the retry at once, though the lease (60 s) has not run out.
    let b = TestServer::start_with(replica(&file, Duration::from_secs(60))).await;
    let started = Instant::now();
    let (content, is_error) = result(&b.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    assert!(is_error && content["error"] == "outcome_unknown", "{content}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    gate.open();
    assert_eq!(exec.calls(), 1, "never run again");
}

#[tokio::test]
async fn a_tool_call_id_reused_for_another_call_is_refused_and_a_true_retry_is_answered() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let (first, _) = result(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    assert_eq!(first, json!("Ada"));
    // The same call again, its arguments' keys in another order: a retry.
    let reordered = json!({"arguments": {"customer_id": 42}, "tool": "customer_name", "group": "crm"});
    assert_eq!(result(&s.call("crm", "r1", "c1", "call_tool", reordered).await).0, first);
    // Other arguments under the same id: refused, never answered with the first result.
    let call = pb::ToolCall { tool_call_id: "c1".into(), tool_name: "call_tool".into(), arguments_json: call_crm(7).to_string() };
    let err = s
        .router()
        .handle_tool_call(pb::HandleToolCallRequest {
            agent: Some(agent_ref("crm")),
            run: Some(run_ctx("r1")),
            call: Some(call),
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("call.tool_call_id"), "{}", err.message());
    assert_eq!(exec.calls(), 1);
    // In a batch, the offending call is named.
    let calls = vec![
        pb::ToolCall { tool_call_id: "c2".into(), tool_name: "call_tool".into(), arguments_json: call_crm(42).to_string() },
        pb::ToolCall { tool_call_id: "c1".into(), tool_name: "call_tool".into(), arguments_json: call_crm(8).to_string() },
    ];
    let err = s
        .router()
        .handle_tool_calls(pb::HandleToolCallsRequest { agent: Some(agent_ref("crm")), run: Some(run_ctx("r1")), calls, ..Default::default() })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("calls[1].tool_call_id"), "{}", err.message());
}

#[tokio::test]
async fn a_pending_record_past_its_definitions_expiry_is_listed_expired_and_cannot_be_resolved() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&exec.endpoint());
    function_of(&mut def.sources[0]).tools[0].requires_approval = true;
    def.deferred_ttl = Some(prost_types::Duration { seconds: 0, nanos: 300_000_000 });
    s.create("crm", def).await;
    let outcome = s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    let pb::handle_tool_call_response::Outcome::Deferred(d) = outcome else { panic!("expected a deferred record, got {outcome:?}") };
    let listed =
        s.router().list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), ..Default::default() }).await.expect("list").into_inner().records;
    let expire_time = listed[0].expire_time.expect("an expiry");
    let created = listed[0].create_time.expect("created");
    let ttl_ms = (expire_time.seconds - created.seconds) * 1000 + i64::from(expire_time.nanos - created.nanos) / 1_000_000;
    assert_eq!(ttl_ms, 300);

    tokio::time::sleep(Duration::from_millis(400)).await;
    let err = s
        .router()
        .resolve_deferred(pb::ResolveDeferredRequest {
            deferred_id: d.deferred_id.clone(),
            resolution: Some(Resolution::Approve(pb::Approve::default())),
            ..Default::default()
        })
        .await
        .expect_err("expired");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("expired"), "{}", err.message());
    let listed = s
        .router()
        .list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), state: pb::DeferredState::Expired as i32, ..Default::default() })
        .await
        .expect("list")
        .into_inner()
        .records;
    assert_eq!(listed.len(), 1, "listed as expired before any sweep");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn a_result_over_the_limit_is_the_fault_result_too_large_and_its_retry_never_runs_it_again() {
    // Just over the limit (checked on the result) and far over it (refused by the decoder).
    for size in [2_000, 200_000] {
        let exec = spawn_executor(Behaviour::Reply(json!("x".repeat(size)).to_string(), false)).await;
        let mut cfg = ServerConfig::for_tests();
        cfg.upstream.max_result_bytes = 1_024;
        let s = TestServer::start_with(cfg).await;
        s.create("crm", crm_definition(&exec.endpoint())).await;
        let (content, is_error) = result(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
        assert!(is_error && content["error"] == "result_too_large", "{size}: {content}");
        let message = content["message"].as_str().expect("a message");
        assert!(message.contains("ran") && message.contains("1024"), "{message}");
        let (again, _) = result(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
        assert_eq!(again, content);
        assert_eq!(exec.calls(), 1, "{size}: the tool ran once");
    }
}

#[tokio::test]
async fn an_unreachable_source_keeps_the_control_tools_and_the_other_tools_and_is_tried_again_soon() {
    let lookup = tool("lookup", "Look a customer up.", json!({"type": "object"}));
    let exec = spawn_executor_listing(Behaviour::Echo, vec![lookup]).await;
    exec.fail_listing(true);
    let mut cfg = ServerConfig::for_tests();
    cfg.tool_list_failure_ttl = Duration::from_millis(300);
    let s = TestServer::start_with(cfg).await;
    let def = pb::AgentDefinition {
        sources: vec![
            function_source("crm-tools", &exec.endpoint(), vec![]),
            client_source("ui", vec![tool("confirm", "Ask the user.", json!({"type": "object"}))]),
        ],
        groups: [("crm".to_string(), group("Customer records", &["crm-tools"]))].into(),
        ..Default::default()
    };
    s.create("crm", def).await;
    let down = s.model_tools("crm", run_ctx("r1")).await;
    let names: Vec<&str> = down.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"discover_tools") && names.contains(&"call_tool") && names.contains(&"confirm"), "{names:?}");
    assert!(down.diagnostics.iter().any(|d| d.contains("\"crm-tools\"")), "{:?}", down.diagnostics);

    exec.fail_listing(false);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let up = s.model_tools("crm", run_ctx("r2")).await;
    assert!(up.diagnostics.is_empty(), "{:?}", up.diagnostics);
    let listed = s
        .discovery()
        .list_tools(pb::ListCatalogToolsRequest { agent: Some(agent_ref("crm")), run: Some(run_ctx("r2")), ..Default::default() })
        .await
        .expect("list")
        .into_inner()
        .tools;
    assert_eq!(listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["crm__lookup"]);
}

#[tokio::test]
async fn a_version_whose_catalog_is_larger_than_the_whole_cache_is_refused_and_smaller_ones_are_served() {
    let mut cfg = ServerConfig::for_tests();
    cfg.catalog_cache_bytes = 1 << 20;
    let s = TestServer::start_with(cfg).await;
    let tools: Vec<pb::ToolDeclaration> =
        (0..2_000).map(|i| tool(&format!("t{i}"), &"A tool that does one thing. ".repeat(8), json!({"type": "object"}))).collect();
    let big = pb::AgentDefinition { sources: vec![client_source("ui", tools)], ..Default::default() };
    s.create("big", big).await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let err = s
        .router()
        .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("big")), run: Some(run_ctx("r1")), ..Default::default() })
        .await
        .expect_err("too large for the cache");
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("--catalog-cache-bytes"), "{}", err.message());
    assert!(s.model_tools("crm", run_ctx("r1")).await.tools.iter().any(|t| t.name == "discover_tools"));
    let (bytes, kept) = s.server.router.registry().catalog_usage();
    assert!(bytes <= 1 << 20 && kept >= 1, "{bytes} bytes in {kept} catalogs");
}
