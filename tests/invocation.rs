//! Invocation (SPEC §4, §7, §8): routing, validation, executor faults, deadlines, retries,
//! concurrency limits, deferred records, exactly-once, version pinning, CodeAct and
//! auto-pinning, against real gRPC executors on 127.0.0.1:0.
//!
//! Discovery ranking is not exercised here: calls go through `call_tool`, direct tools and
//! pinned tools; listings use `list_tools` (ordered by canonical name, no ranking).

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use toolrouter::pb;
use toolrouter::pb::resolve_deferred_request::Resolution;

// ----- helpers -----

fn msg(v: &Value) -> &str {
    v["message"].as_str().unwrap_or_else(|| panic!("no message in {v}"))
}

fn schema_tool(name: &str, schema: Value) -> pb::ToolDeclaration {
    tool(name, &format!("The {name} tool."), schema)
}

fn any_object() -> Value {
    json!({"type": "object"})
}

fn grouped(group_name: &str, sources: Vec<pb::ToolSource>) -> pb::AgentDefinition {
    let ids: Vec<&str> = sources.iter().map(|s| s.id.as_str()).collect();
    pb::AgentDefinition { groups: [(group_name.to_string(), group("Tools of this test", &ids))].into(), sources, ..Default::default() }
}

fn with_function(mut source: pb::ToolSource, f: impl FnOnce(&mut pb::FunctionSource)) -> pb::ToolSource {
    f(function_of(&mut source));
    source
}

fn millis(ms: u64) -> prost_types::Duration {
    prost_types::Duration { seconds: (ms / 1000) as i64, nanos: ((ms % 1000) * 1_000_000) as i32 }
}

/// The CRM definition with `customer_name` changed by `f`.
fn crm_with(endpoint: &str, f: impl FnOnce(&mut pb::ToolDeclaration)) -> pb::AgentDefinition {
    let mut def = crm_definition(endpoint);
    f(&mut function_of(&mut def.sources[0]).tools[0]);
    def
}

fn call_crm(id: u64) -> Value {
    json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": id}})
}

fn approve(arguments: Option<Value>) -> Resolution {
    Resolution::Approve(pb::Approve { arguments_json: arguments.map(|a| a.to_string()) })
}

fn deny(message: &str) -> Resolution {
    Resolution::Deny(pb::Deny { message: message.into() })
}

fn parse(r: &pb::ToolResult) -> Value {
    serde_json::from_str(&r.content_json).expect("JSON result")
}

async fn list_deferred(s: &TestServer, agent: &str, run: &str, state: pb::DeferredState, page_size: u32, token: &str) -> pb::ListDeferredResponse {
    s.router()
        .list_deferred(pb::ListDeferredRequest {
            agent_id: agent.into(),
            run_id: run.into(),
            state: state as i32,
            page_size,
            page_token: token.into(),
            ..Default::default()
        })
        .await
        .expect("list deferred")
        .into_inner()
}

// ----- 1. routing -----

#[tokio::test]
async fn call_tool_routes_to_the_executor_and_returns_its_result() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    assert!(!is_error, "{content}");
    assert_eq!(content, json!("Ada"));
    assert_eq!(exec.calls(), 1);
    let last = exec.exec.last.lock().unwrap().clone().unwrap();
    assert_eq!(last.tool, "customer_name", "the executor gets the local name");
    assert_eq!(last.tool_call_id, "c1");
    assert_eq!(last.run.unwrap().run_id, "r1");
    assert_eq!(exec.last_arguments(), json!({"customer_id": 42}));
}

#[tokio::test]
async fn direct_tool_routes_by_its_own_name() {
    let crm = spawn_executor(Behaviour::Echo).await;
    let util = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&crm.endpoint());
    def.sources.push(function_source("util", &util.endpoint(), vec![schema_tool("ping", any_object())]));
    s.create("a", def).await;

    let tools = s.model_tools("a", run_ctx("r1")).await;
    let ping = tools.tools.iter().find(|t| t.name == "ping").expect("ping is exposed");
    assert_eq!(ping.kind, pb::ModelToolKind::Direct as i32);
    assert_eq!((ping.group.as_str(), ping.tool.as_str(), ping.source_id.as_str()), ("", "ping", "util"));

    let (content, is_error) = s.call_result("a", "r1", "c1", "ping", json!({"x": 1})).await;
    assert!(!is_error, "{content}");
    assert_eq!(content, json!({"echo": {"x": 1}, "tool": "ping"}));
    assert_eq!((util.calls(), crm.calls()), (1, 0));
}

#[tokio::test]
async fn pinned_tool_is_exposed_under_its_canonical_name_and_callable() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    for (agent, key) in [("by-name", "customer_name"), ("by-star", "*")] {
        let mut def = crm_definition(&exec.endpoint());
        def.sources[0].tool_configs = [(key.to_string(), pb::ToolConfig { pin: true, ..Default::default() })].into();
        s.create(agent, def).await;

        let tools = s.model_tools(agent, run_ctx("r1")).await;
        let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["discover_tools", "describe_tool", "call_tool", "list_tool_groups", "list_tools", "crm__customer_name"], "{agent}");
        let pinned = tools.tools.last().unwrap();
        assert_eq!(pinned.kind, pb::ModelToolKind::Pinned as i32, "{agent}");
        assert_eq!((pinned.group.as_str(), pinned.tool.as_str(), pinned.source_id.as_str()), ("crm", "customer_name", "crm-tools"));
        assert!(pinned.input_schema_json.contains("customer_id"));

        let (content, is_error) = s.call_result(agent, "r1", "c1", "crm__customer_name", json!({"customer_id": 42})).await;
        assert!(!is_error, "{agent}: {content}");
        assert_eq!(content, json!("Ada"));
    }
    assert_eq!(exec.calls(), 2);
}

// ----- 2. validation -----

#[tokio::test]
async fn argument_type_mismatch_names_the_pointer_and_the_expectation() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let args = json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": "42"}});
    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", args).await;
    assert!(is_error);
    assert_eq!(content["error"], "invalid_arguments");
    let m = msg(&content);
    assert!(m.contains("/customer_id") && m.contains("integer"), "{m}");
    assert_eq!(content["errors"][0]["pointer"], "/customer_id");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn missing_required_field_is_a_model_visible_error() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let args = json!({"group": "crm", "tool": "customer_name", "arguments": {}});
    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", args).await;
    assert!(is_error);
    assert_eq!(content["error"], "invalid_arguments");
    assert!(msg(&content).contains("customer_id") && msg(&content).contains("required"), "{content}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn non_object_arguments_are_model_visible_errors() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&exec.endpoint());
    def.sources.push(function_source("util", &exec.endpoint(), vec![schema_tool("ping", any_object())]));
    s.create("crm", def).await;

    for (i, arguments) in [json!("{\"customer_id\": 42}"), json!([42]), json!(42)].into_iter().enumerate() {
        let args = json!({"group": "crm", "tool": "customer_name", "arguments": arguments});
        let (content, is_error) = s.call_result("crm", "r1", &format!("c{i}"), "call_tool", args).await;
        assert!(is_error, "{arguments}");
        assert_eq!(content["error"], "invalid_arguments");
        assert!(msg(&content).contains("object"), "{content}");
    }
    // The whole call_tool argument text is not an object.
    let outcome = s.handle_raw("crm", run_ctx("r1"), "c8", "call_tool", "[1, 2]").await.unwrap();
    let (content, is_error) = result_of(&outcome);
    assert!(is_error && msg(&content).contains("object"), "{content}");
    // A direct tool called with an array.
    let outcome = s.handle_raw("crm", run_ctx("r1"), "c9", "ping", "[1]").await.unwrap();
    let (content, is_error) = result_of(&outcome);
    assert!(is_error && msg(&content).contains("object"), "{content}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn unknown_group_and_unknown_tool_say_what_to_do_next() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let args = json!({"group": "billing", "tool": "customer_name", "arguments": {}});
    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", args).await;
    assert!(is_error);
    assert_eq!(content["error"], "unknown_group");
    assert!(msg(&content).contains("list_tool_groups"), "{content}");

    let args = json!({"group": "crm", "tool": "customer_email", "arguments": {}});
    let (content, is_error) = s.call_result("crm", "r1", "c2", "call_tool", args).await;
    assert!(is_error);
    assert_eq!(content["error"], "unknown_tool");
    assert!(msg(&content).contains("discover_tools"), "{content}");

    // A tool name the model made up.
    let (content, is_error) = s.call_result("crm", "r1", "c3", "customer_email", json!({})).await;
    assert!(is_error);
    assert_eq!(content["error"], "unknown_tool");
    assert!(msg(&content).contains("discover_tools") && msg(&content).contains("call_tool"), "{content}");

    // Without grouped tools there are no control tools to point to, but still a next step.
    s.create(
        "direct-only",
        pb::AgentDefinition {
            sources: vec![function_source("util", &exec.endpoint(), vec![schema_tool("ping", any_object())])],
            ..Default::default()
        },
    )
    .await;
    let (content, is_error) = s.call_result("direct-only", "r1", "c4", "pong", json!({})).await;
    assert!(is_error);
    assert_eq!(content["error"], "unknown_tool");
    let m = msg(&content);
    assert!(m.contains("\"pong\"") && m.contains("tools you were given"), "no next step in {m:?}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn malformed_arguments_json_is_a_model_visible_error() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&exec.endpoint());
    def.sources.push(function_source("util", &exec.endpoint(), vec![schema_tool("ping", any_object())]));
    s.create("crm", def).await;

    for (id, tool) in [("c1", "call_tool"), ("c2", "ping"), ("c3", "discover_tools")] {
        let outcome = s.handle_raw("crm", run_ctx("r1"), id, tool, "{\"group\": \"crm\", ").await.expect("a result, not a status");
        let (content, is_error) = result_of(&outcome);
        assert!(is_error, "{tool}");
        assert_eq!(content["error"], "invalid_arguments", "{tool}");
        assert!(msg(&content).contains("JSON"), "{tool}: {content}");
    }
    assert_eq!(exec.calls(), 0);
}

// ----- 3. executor faults -----

#[tokio::test]
async fn executor_error_is_returned_as_an_error_result() {
    let exec = spawn_executor(Behaviour::Fail("customer database is read-only".into())).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    assert!(is_error);
    assert_eq!(content, json!("customer database is read-only"));
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn executor_grpc_status_is_an_error_result() {
    let exec = spawn_executor(Behaviour::Status(tonic::Code::NotFound)).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    assert!(is_error);
    assert_eq!(content["error"], "NotFound");
    assert_eq!(content["message"], "executor status");
    assert_eq!(exec.calls(), 1, "a status is an answer: no retry");
}

// ----- 4. deadlines -----

async fn deadline_case(idempotent: bool) -> (Value, ExecutorHandle, Duration) {
    let exec = spawn_executor(Behaviour::Sleep(Duration::from_secs(10))).await;
    let s = TestServer::start().await;
    s.create(
        "crm",
        crm_with(&exec.endpoint(), |t| {
            t.timeout = Some(millis(200));
            t.idempotent = idempotent;
        }),
    )
    .await;
    let started = Instant::now();
    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    let took = started.elapsed();
    assert!(is_error, "{content}");
    // Far below the executor's 10 s, with room for a loaded machine.
    assert!(took < Duration::from_secs(5), "the deadline was not enforced: {took:?}");
    (content, exec, took)
}

#[tokio::test]
async fn deadline_on_non_idempotent_tool_gives_outcome_unknown() {
    let (content, exec, _) = deadline_case(false).await;
    assert_eq!(content["error"], "outcome_unknown", "{content}");
    let m = msg(&content);
    assert!(m.contains("deadline") && m.contains("Inspect the state"), "{m}");
    assert_eq!(exec.calls(), 1);
    let deadline = exec.last_deadline().expect("the executor got a grpc-timeout");
    assert!(deadline <= Duration::from_millis(200) && deadline > Duration::from_millis(100), "{deadline:?}");
}

#[tokio::test]
async fn deadline_on_idempotent_tool_says_safe_to_retry() {
    let (content, exec, _) = deadline_case(true).await;
    assert_eq!(content["error"], "timeout", "{content}");
    assert!(msg(&content).contains("safe to retry"), "{content}");
    assert_eq!(exec.calls(), 1, "a call that may have run is not retried");
    assert!(exec.last_deadline().is_some_and(|d| d <= Duration::from_millis(200)));
}

#[tokio::test]
async fn default_deadline_reaches_the_executor() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.upstream.default_timeout = Duration::from_secs(7);
    let s = TestServer::start_with(cfg).await;
    let mut def = crm_definition(&exec.endpoint());
    def.sources.push(with_function(function_source("util", &exec.endpoint(), vec![schema_tool("ping", any_object())]), |f| {
        f.timeout = Some(millis(3000));
    }));
    s.create("crm", def).await;

    s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    let d = exec.last_deadline().unwrap();
    assert!(d <= Duration::from_secs(7) && d > Duration::from_secs(6), "server default: {d:?}");
    s.call_result("crm", "r1", "c2", "ping", json!({})).await;
    let d = exec.last_deadline().unwrap();
    assert!(d <= Duration::from_secs(3) && d > Duration::from_secs(2), "source timeout: {d:?}");
}

// ----- 5. lost connections and retries -----

fn dropping_def(endpoint: &str, idempotent: bool) -> pb::AgentDefinition {
    crm_with(endpoint, |t| t.idempotent = idempotent)
}

#[tokio::test]
async fn dropped_connection_on_non_idempotent_tool_is_outcome_unknown_without_retry() {
    let exec = spawn_dropping_executor().await;
    let s = TestServer::start().await;
    s.create("crm", dropping_def(&format!("http://{}", exec.addr), false)).await;

    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    assert!(is_error);
    assert_eq!(content["error"], "outcome_unknown", "{content}");
    assert!(msg(&content).contains("Inspect the state"), "{content}");
    assert_eq!(exec.seen.load(std::sync::atomic::Ordering::SeqCst), 1, "no blind retry");
}

const RETRY_EVENT: &str = "retrying idempotent call that was not sent";

#[tokio::test]
async fn refused_connection_retries_idempotent_tool_then_reports_not_run() {
    let (events, _guard) = EventLog::capture();
    let endpoint = refused_endpoint().await;
    let s = TestServer::start().await;
    s.create("crm", dropping_def(&endpoint, true)).await;

    let started = Instant::now();
    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    let took = started.elapsed();
    assert!(is_error);
    assert_eq!(content["error"], "tool_unavailable", "{content}");
    assert!(msg(&content).contains("not run"), "{content}");
    let retries = toolrouter::upstream::UpstreamConfig::default().max_retries as usize;
    assert_eq!(events.count(RETRY_EVENT, "tool", "crm__customer_name"), retries);
    // Backoffs are at least 40 ms then 80 ms.
    assert!(took >= Duration::from_millis(120), "retried without backing off: {took:?}");
}

#[tokio::test]
async fn refused_connection_does_not_retry_non_idempotent_tool() {
    let (events, _guard) = EventLog::capture();
    let endpoint = refused_endpoint().await;
    let s = TestServer::start().await;
    s.create("crm", dropping_def(&endpoint, false)).await;

    let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    assert!(is_error);
    assert_eq!(content["error"], "tool_unavailable", "{content}");
    assert!(msg(&content).contains("not run"), "refused means surely not run: {content}");
    assert_eq!(events.count(RETRY_EVENT, "tool", "crm__customer_name"), 0);
}

// ----- 6. concurrency limit -----

#[tokio::test]
async fn concurrency_limit_turns_excess_calls_into_busy_results() {
    let gate = Gate::new();
    let exec = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.upstream.queue_wait = Duration::from_millis(100);
    let s = TestServer::start_with(cfg).await;
    let mut def = crm_definition(&exec.endpoint());
    def.sources[0] = with_function(def.sources[0].clone(), |f| f.max_concurrency = 1);
    s.create("crm", def).await;

    // The first call holds the only slot until the second has had its answer.
    let ((ok, ok_err), (busy, busy_err)) = tokio::join!(s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)), async {
        exec.wait_inflight(1).await;
        let second = s.call_result("crm", "r1", "c2", "call_tool", call_crm(7)).await;
        gate.open();
        second
    });
    assert!(!ok_err, "{ok}");
    assert!(busy_err);
    assert_eq!(busy["error"], "busy", "{busy}");
    assert!(msg(&busy).contains("try again later") && msg(&busy).contains("not run"), "{busy}");
    assert_eq!(exec.calls(), 1);
    assert_eq!(exec.max_inflight(), 1);
}

// ----- 7. approvals -----

fn approval_def(endpoint: &str) -> pb::AgentDefinition {
    crm_with(endpoint, |t| t.requires_approval = true)
}

#[tokio::test]
async fn approval_defers_with_the_actual_target_and_the_original_call() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;

    let args = call_crm(42);
    let outcome = s.call("crm", "r1", "c1", "call_tool", args.clone()).await;
    let d = deferred_of(&outcome);
    assert!(!d.deferred_id.is_empty());
    assert_eq!(d.kind, pb::DeferredKind::Approval as i32);
    let t = d.target.unwrap();
    assert_eq!(
        (t.group.as_str(), t.tool.as_str(), t.name.as_str(), t.source_id.as_str()),
        ("crm", "customer_name", "crm__customer_name", "crm-tools")
    );
    assert_eq!(serde_json::from_str::<Value>(&t.arguments_json).unwrap(), json!({"customer_id": 42}));
    let def = t.definition.unwrap();
    assert_eq!(def.description, "Look up the display name for a customer ID.");
    assert_eq!(serde_json::from_str::<Value>(&def.parameters_json_schema).unwrap()["required"], json!(["customer_id"]));
    assert_eq!(def.instructions, "Use numeric customer IDs, not display names.");
    assert_eq!(def.kind, pb::ToolKind::Function as i32);
    assert!(def.requires_approval);
    let original = d.original_call.unwrap();
    assert_eq!(original.tool_name, "call_tool");
    assert_eq!(original.tool_call_id, "c1");
    assert_eq!(original.arguments_json, args.to_string());
    // Invalid arguments are refused before anything is deferred.
    let (content, is_error) =
        s.call_result("crm", "r1", "c2", "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": "x"}})).await;
    assert!(is_error && content["error"] == "invalid_arguments", "{content}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn approving_executes_once_and_returns_the_result() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);

    let r = s.resolve(&d.deferred_id, approve(None)).await.unwrap();
    assert!(!r.is_error);
    assert_eq!(parse(&r), json!("Ada"));
    assert_eq!(exec.calls(), 1);
    let last = exec.exec.last.lock().unwrap().clone().unwrap();
    assert_eq!(last.tool_call_id, "c1");
    assert_eq!(last.run.unwrap().run_id, "r1");
}

#[tokio::test]
async fn approving_with_replacement_arguments_validates_them() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(7)).await);

    let err = s.resolve(&d.deferred_id, approve(Some(json!({"customer_id": "42"})))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("/customer_id"), "{}", err.message());
    let err = s.resolve(&d.deferred_id, Resolution::Approve(pb::Approve { arguments_json: Some("{oops".into()) })).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    let pending = list_deferred(&s, "crm", "", pb::DeferredState::Pending, 0, "").await;
    assert_eq!(pending.records.len(), 1, "an invalid replacement leaves the record pending");
    assert_eq!(exec.calls(), 0);

    let r = s.resolve(&d.deferred_id, approve(Some(json!({"customer_id": 42})))).await.unwrap();
    assert_eq!(parse(&r), json!("Ada"), "the replacement arguments ran");
    assert_eq!(exec.last_arguments(), json!({"customer_id": 42}));
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn denying_returns_the_message_without_executing() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);

    let r = s.resolve(&d.deferred_id, deny("Customer records are frozen until Monday.")).await.unwrap();
    assert!(r.is_error);
    let content = parse(&r);
    assert_eq!(content["error"], "denied");
    assert!(msg(&content).contains("Customer records are frozen until Monday."), "{content}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn resolving_twice_is_idempotent_and_conflicts_are_refused() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;

    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    let first = s.resolve(&d.deferred_id, approve(None)).await.unwrap();
    let again = s.resolve(&d.deferred_id, approve(None)).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(exec.calls(), 1);
    let err = s.resolve(&d.deferred_id, deny("no")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    let err = s.resolve(&d.deferred_id, approve(Some(json!({"customer_id": 7})))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");

    let d = deferred_of(&s.call("crm", "r1", "c2", "call_tool", call_crm(42)).await);
    let first = s.resolve(&d.deferred_id, deny("not today")).await.unwrap();
    assert_eq!(s.resolve(&d.deferred_id, deny("not today")).await.unwrap(), first);
    let err = s.resolve(&d.deferred_id, approve(None)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn unknown_deferred_id_is_not_found() {
    let s = TestServer::start().await;
    let err = s.resolve("0123456789abcdef", approve(None)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
}

#[tokio::test]
async fn list_deferred_filters_by_run_and_state_with_paging() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let mut ids = Vec::new();
    for (run, call) in [("r1", "c1"), ("r1", "c2"), ("r1", "c3"), ("r2", "c1")] {
        ids.push(deferred_of(&s.call("crm", run, call, "call_tool", call_crm(42)).await).deferred_id);
    }

    // All of the agent's records, two per page, oldest first.
    let p1 = list_deferred(&s, "crm", "", pb::DeferredState::Unspecified, 2, "").await;
    assert_eq!(p1.records.len(), 2);
    assert!(!p1.next_page_token.is_empty());
    let p2 = list_deferred(&s, "crm", "", pb::DeferredState::Unspecified, 2, &p1.next_page_token).await;
    assert_eq!(p2.records.len(), 2);
    assert!(p2.next_page_token.is_empty());
    let mut listed: Vec<String> = p1.records.iter().chain(&p2.records).map(|r| r.call.as_ref().unwrap().deferred_id.clone()).collect();
    listed.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(listed, all, "every record once across pages");

    let r2 = list_deferred(&s, "crm", "r2", pb::DeferredState::Unspecified, 0, "").await;
    assert_eq!(r2.records.len(), 1);
    assert_eq!(r2.records[0].call.as_ref().unwrap().deferred_id, ids[3]);
    assert_eq!((r2.records[0].run_id.as_str(), r2.records[0].agent_id.as_str()), ("r2", "crm"));

    s.resolve(&ids[1], approve(None)).await.unwrap();
    let pending = list_deferred(&s, "crm", "r1", pb::DeferredState::Pending, 0, "").await;
    let pending_ids: Vec<&str> = pending.records.iter().map(|r| r.call.as_ref().unwrap().deferred_id.as_str()).collect();
    assert_eq!(pending_ids.len(), 2);
    assert!(!pending_ids.contains(&ids[1].as_str()));
    assert!(pending.records.iter().all(|r| r.state == pb::DeferredState::Pending as i32 && r.result.is_none()));
    let resolved = list_deferred(&s, "crm", "", pb::DeferredState::Resolved, 0, "").await;
    assert_eq!(resolved.records.len(), 1);
    let rec = &resolved.records[0];
    assert_eq!(rec.call.as_ref().unwrap().deferred_id, ids[1]);
    assert_eq!(rec.state, pb::DeferredState::Resolved as i32);
    assert_eq!(rec.resolution, "approved");
    assert_eq!(parse(rec.result.as_ref().unwrap()), json!("Ada"));
    assert!(rec.resolve_time.is_some());

    let err = s.router().list_deferred(pb::ListDeferredRequest { agent_id: "nobody".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
}

// ----- 8. client tools -----

#[tokio::test]
async fn client_tool_defers_without_validation_and_returns_the_client_result() {
    let s = TestServer::start().await;
    let confirm = schema_tool("confirm", json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}));
    s.create("ui", grouped("ui", vec![client_source("browser", vec![confirm])])).await;

    // Arguments that would fail the schema: the client validates, not toolrouter.
    let args = json!({"group": "ui", "tool": "confirm", "arguments": {"text": 5}});
    let d = deferred_of(&s.call("ui", "r1", "c1", "call_tool", args).await);
    assert_eq!(d.kind, pb::DeferredKind::ClientExecution as i32);
    let t = d.target.as_ref().unwrap();
    assert_eq!((t.name.as_str(), t.source_id.as_str()), ("ui__confirm", "browser"));
    assert_eq!(serde_json::from_str::<Value>(&t.arguments_json).unwrap(), json!({"text": 5}));
    assert_eq!(t.definition.as_ref().unwrap().kind, pb::ToolKind::Client as i32);

    let err = s.resolve(&d.deferred_id, approve(None)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    let r = s
        .resolve(&d.deferred_id, Resolution::ClientResult(pb::ClientResult { content_json: json!({"confirmed": true}).to_string(), is_error: false }))
        .await
        .unwrap();
    assert!(!r.is_error);
    assert_eq!(parse(&r), json!({"confirmed": true}));
}

// ----- 9. durability -----

#[tokio::test]
async fn pending_approval_survives_a_restart() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let dir = std::env::temp_dir().join(format!("toolrouter-invocation-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    let config = || {
        let mut cfg = toolrouter::config::ServerConfig::for_tests();
        cfg.store = format!("sqlite://{}", path.display());
        cfg
    };

    let s = TestServer::start_with(config()).await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    let TestServer { server, channel, .. } = s;
    drop(channel);
    tokio::time::timeout(Duration::from_secs(3), server.shutdown()).await.expect("shutdown finishes");

    let s = TestServer::start_with(config()).await;
    let pending = list_deferred(&s, "crm", "r1", pb::DeferredState::Pending, 0, "").await;
    assert_eq!(pending.records.len(), 1);
    assert_eq!(pending.records[0].call.as_ref().unwrap().deferred_id, d.deferred_id);
    let r = s.resolve(&d.deferred_id, approve(None)).await.unwrap();
    assert_eq!(parse(&r), json!("Ada"));
    assert_eq!(exec.calls(), 1);
    // The same call id after the restart is still the same call.
    let again = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    assert_eq!(again.deferred_id, d.deferred_id);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

// ----- 10. exactly once -----

#[tokio::test]
async fn same_tool_call_id_sequentially_executes_once() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&exec.endpoint());
    def.sources.push(function_source("util", &exec.endpoint(), vec![schema_tool("ping", any_object())]));
    s.create("crm", def).await;

    let first = s.call("crm", "r1", "c1", "ping", json!({"n": 1})).await;
    let second = s.call("crm", "r1", "c1", "ping", json!({"n": 1})).await;
    assert_eq!(first, second);
    assert_eq!(result_of(&first).0, json!({"echo": {"n": 1}, "tool": "ping"}));
    assert_eq!(exec.calls(), 1);
    // The id is scoped to the run: another run's c1 is another call.
    s.call("crm", "r2", "c1", "ping", json!({"n": 1})).await;
    assert_eq!(exec.calls(), 2);
}

#[tokio::test]
async fn same_tool_call_id_concurrently_executes_once() {
    let exec = spawn_executor(Behaviour::Sleep(Duration::from_millis(300))).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let calls = (0..5).map(|_| s.call("crm", "r1", "c1", "call_tool", call_crm(42)));
    let outcomes = futures::future::join_all(calls).await;
    assert_eq!(exec.calls(), 1);
    assert_eq!(result_of(&outcomes[0]), (json!("Ada"), false));
    assert!(outcomes.iter().all(|o| *o == outcomes[0]), "{outcomes:?}");
}

#[tokio::test]
async fn repeated_deferred_call_returns_the_same_deferred_id() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;

    let first = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    let second = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    assert_eq!(first.deferred_id, second.deferred_id);
    let all = list_deferred(&s, "crm", "", pb::DeferredState::Unspecified, 0, "").await;
    assert_eq!(all.records.len(), 1, "one record for one call");
}

// ----- 11. version pinning -----

#[tokio::test]
async fn run_keeps_its_version_until_it_ends() {
    let v1_exec = spawn_executor(Behaviour::Echo).await;
    let v2_exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&v1_exec.endpoint())).await;

    let tools = s.model_tools("crm", run_ctx("r1")).await;
    assert_eq!(tools.version, 1);
    s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    assert_eq!(v1_exec.calls(), 1);

    let mut v2 = crm_definition(&v2_exec.endpoint());
    v2.sources.push(function_source("util", &v2_exec.endpoint(), vec![schema_tool("ping", any_object())]));
    let created = s.create("crm", v2).await;
    assert_eq!((created.version, created.is_default), (2, true));

    let tools = s.model_tools("crm", run_ctx("r1")).await;
    assert_eq!(tools.version, 1, "r1 stays on the version its first call pinned");
    assert!(tools.tools.iter().all(|t| t.name != "ping"));
    s.call_result("crm", "r1", "c2", "call_tool", call_crm(42)).await;
    assert_eq!((v1_exec.calls(), v2_exec.calls()), (2, 0));
    let (content, is_error) = s.call_result("crm", "r1", "c3", "ping", json!({})).await;
    assert!(is_error && content["error"] == "unknown_tool", "{content}");

    let tools = s.model_tools("crm", run_ctx("r2")).await;
    assert_eq!(tools.version, 2);
    assert!(tools.tools.iter().any(|t| t.name == "ping"));
    s.call_result("crm", "r2", "c1", "call_tool", call_crm(42)).await;
    assert_eq!((v1_exec.calls(), v2_exec.calls()), (2, 1));

    s.router().end_run(pb::EndRunRequest { agent_id: "crm".into(), run_id: "r1".into() }).await.unwrap();
    let tools = s.model_tools("crm", run_ctx("r1")).await;
    assert_eq!(tools.version, 2, "an ended run pins the default again");
    s.call_result("crm", "r1", "c4", "call_tool", call_crm(42)).await;
    assert_eq!((v1_exec.calls(), v2_exec.calls()), (2, 2));
}

// ----- 12. HandleToolCalls -----

#[tokio::test]
async fn handle_tool_calls_runs_concurrently_in_request_order() {
    let gate = Gate::new();
    let exec = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&exec.endpoint());
    def.sources.push(function_source("util", &exec.endpoint(), vec![schema_tool("ping", any_object())]));
    s.create("crm", def).await;

    let mut calls: Vec<pb::ToolCall> = (0..4)
        .map(|i| pb::ToolCall { tool_call_id: format!("c{i}"), tool_name: "ping".into(), arguments_json: json!({"n": i}).to_string() })
        .collect();
    calls.push(pb::ToolCall { tool_call_id: "c9".into(), tool_name: "call_tool".into(), arguments_json: call_crm(42).to_string() });
    // The executor holds every call until all five are in it at once.
    let mut router = s.router();
    let (resp, ()) = tokio::join!(
        router.handle_tool_calls(pb::HandleToolCallsRequest { agent: Some(agent_ref("crm")), run: Some(run_ctx("r1")), calls, ..Default::default() }),
        async {
            exec.wait_inflight(5).await;
            gate.open();
        }
    );
    let resp = resp.unwrap().into_inner();
    let results: Vec<Value> = resp.outcomes.iter().map(|o| result_of(o.outcome.as_ref().unwrap()).0).collect();
    let expected: Vec<Value> = (0..4).map(|i| json!({"echo": {"n": i}, "tool": "ping"})).chain([json!("Ada")]).collect();
    assert_eq!(results, expected);
    assert_eq!(exec.calls(), 5);
    assert_eq!(exec.max_inflight(), 5, "all calls ran at once");

    let err = s
        .router()
        .handle_tool_calls(pb::HandleToolCallsRequest {
            agent: Some(agent_ref("crm")),
            run: Some(run_ctx("r1")),
            calls: vec![pb::ToolCall { tool_call_id: "x".repeat(300), tool_name: "ping".into(), arguments_json: "{}".into() }],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("calls[0].tool_call_id"), "{}", err.message());
}

// ----- 13. CodeAct -----

#[tokio::test]
async fn code_caller_is_refused_unless_codeact_callable() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = crm_definition(&exec.endpoint());
    let mut callable = schema_tool("callable", any_object());
    callable.codeact_callable = true;
    def.sources.push(function_source("util", &exec.endpoint(), vec![schema_tool("ping", any_object()), callable]));
    s.create("crm", def).await;
    let code = || run_as("r1", None, pb::Caller::Code);

    let (content, is_error) = result_of(&s.handle_raw("crm", code(), "c1", "call_tool", &call_crm(42).to_string()).await.unwrap());
    assert!(is_error);
    assert_eq!(content["error"], "not_callable_from_code", "{content}");
    assert!(msg(&content).contains("crm__customer_name"), "{content}");
    let (content, is_error) = result_of(&s.handle_raw("crm", code(), "c2", "ping", "{}").await.unwrap());
    assert!(is_error && content["error"] == "not_callable_from_code", "{content}");
    assert_eq!(exec.calls(), 0);

    let (content, is_error) = result_of(&s.handle_raw("crm", code(), "c3", "callable", "{\"a\": 1}").await.unwrap());
    assert!(!is_error, "{content}");
    assert_eq!(content, json!({"echo": {"a": 1}, "tool": "callable"}));
    assert_eq!(exec.calls(), 1);
    // The model itself may call anything.
    let (_, is_error) = result_of(&s.handle_raw("crm", run_ctx("r1"), "c4", "ping", "{}").await.unwrap());
    assert!(!is_error);
    assert_eq!(exec.calls(), 2);
}

// ----- 14. auto-pinning -----

const START_MS: i64 = 1_700_000_000_000;
const DAY: Duration = Duration::from_secs(24 * 3600);

fn auto_pin_def(endpoint: &str, auto_pin: pb::AutoPinConfig) -> pb::AgentDefinition {
    let mut def = crm_definition(endpoint);
    function_of(&mut def.sources[0]).tools.push(schema_tool("customer_email", any_object()));
    def.control = Some(pb::ControlConfig { auto_pin: Some(auto_pin), ..Default::default() });
    def
}

fn hot(tools: &pb::GetModelToolsResponse) -> Vec<&str> {
    tools.tools.iter().filter(|t| t.kind == pb::ModelToolKind::Hot as i32).map(|t| t.name.as_str()).collect()
}

/// Waits (bounded) until the user's decayed count of `tool` reaches `at_least`.
async fn wait_for_usage(s: &TestServer, agent: &str, user: &str, tool: &str, at_least: f64, clock: &toolrouter::clock::ManualClock) {
    use toolrouter::clock::Clock;
    let store = s.server.router.registry().store().clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let usage = store.usage("default", agent, user, clock.now_ms(), 7 * DAY.as_millis() as i64).await.unwrap();
        let score = usage.iter().find(|(n, _)| n == tool).map(|(_, s)| *s).unwrap_or(0.0);
        if score >= at_least - 0.01 {
            return;
        }
        assert!(Instant::now() < deadline, "usage of {tool} never reached {at_least} (is {score})");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn auto_pin_warms_up_per_user_and_decays() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let clock = toolrouter::clock::ManualClock::new(START_MS);
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.clock = clock.clone();
    let s = TestServer::start_with(cfg).await;
    s.create("crm", auto_pin_def(&exec.endpoint(), pb::AutoPinConfig { warmup_calls: 3, max_hot: 1, ..Default::default() })).await;
    let ada = |run: &str| run_as(run, Some("ada"), pb::Caller::Model);
    let server = &s;
    let call = |id: &str, tool: &str, args: Value| {
        let args = json!({"group": "crm", "tool": tool, "arguments": args}).to_string();
        let id = id.to_string();
        async move { result_of(&server.handle_raw("crm", ada("r1"), &id, "call_tool", &args).await.unwrap()) }
    };

    // Calls a minute apart, as a conversation makes them.
    for i in 0..2 {
        assert!(!call(&format!("a{i}"), "customer_name", json!({"customer_id": 42})).await.1);
        clock.advance(Duration::from_secs(60));
    }
    // A failed call does not count.
    assert!(call("bad", "customer_name", json!({"customer_id": "x"})).await.1);
    wait_for_usage(&s, "crm", "ada", "crm__customer_name", 2.0, &clock).await;
    assert!(hot(&s.model_tools("crm", ada("r1")).await).is_empty(), "2 calls are not enough");
    // Auto-pins change between runs, never within one: new runs from here on.

    assert!(!call("a2", "customer_name", json!({"customer_id": 42})).await.1);
    wait_for_usage(&s, "crm", "ada", "crm__customer_name", 3.0, &clock).await;
    let tools = s.model_tools("crm", ada("t1")).await;
    assert_eq!(hot(&tools), ["crm__customer_name"], "3 calls make it hot");
    assert!(hot(&s.model_tools("crm", ada("r1")).await).is_empty(), "run r1 keeps the list it was first given");
    let last = tools.tools.last().unwrap();
    assert_eq!(last.kind, pb::ModelToolKind::Hot as i32, "hot tools come last");
    assert_eq!((last.group.as_str(), last.tool.as_str(), last.source_id.as_str()), ("crm", "customer_name", "crm-tools"));
    // It is callable under its exposed name.
    let (content, is_error) = result_of(&s.handle_raw("crm", ada("r1"), "h1", "crm__customer_name", "{\"customer_id\": 42}").await.unwrap());
    assert!(!is_error && content == json!("Ada"), "{content}");

    // Another user has their own counts.
    assert!(hot(&s.model_tools("crm", run_as("r9", Some("bob"), pb::Caller::Model)).await).is_empty());
    // No user, no hot tools.
    assert!(hot(&s.model_tools("crm", run_ctx("r8")).await).is_empty());

    // An hour later it is still hot.
    clock.advance(Duration::from_secs(3600));
    assert_eq!(hot(&s.model_tools("crm", ada("t2")).await), ["crm__customer_name"]);

    // Usage shifts to customer_email: with max_hot 1 it takes the slot.
    for i in 0..6 {
        assert!(!call(&format!("e{i}"), "customer_email", json!({})).await.1);
    }
    wait_for_usage(&s, "crm", "ada", "crm__customer_email", 6.0, &clock).await;
    assert_eq!(hot(&s.model_tools("crm", ada("t3")).await), ["crm__customer_email"]);
    assert_eq!(hot(&s.model_tools("crm", ada("t2")).await), ["crm__customer_name"], "frozen in t2");

    // Several half-lives (7 days each) later, everything has aged out.
    clock.advance(4 * 7 * DAY);
    assert!(hot(&s.model_tools("crm", ada("r1")).await).is_empty());
}

#[tokio::test]
async fn auto_pin_disabled_never_adds_hot_tools() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let clock = toolrouter::clock::ManualClock::new(START_MS);
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.clock = clock.clone();
    let s = TestServer::start_with(cfg).await;
    s.create("off", auto_pin_def(&exec.endpoint(), pb::AutoPinConfig { disabled: true, warmup_calls: 1, ..Default::default() })).await;
    s.create("on", auto_pin_def(&exec.endpoint(), pb::AutoPinConfig { warmup_calls: 1, ..Default::default() })).await;
    let ada = run_as("r1", Some("ada"), pb::Caller::Model);

    for i in 0..3 {
        let outcome = s.handle_raw("off", ada.clone(), &format!("c{i}"), "call_tool", &call_crm(42).to_string()).await.unwrap();
        assert!(!result_of(&outcome).1);
    }
    // Counts are recorded off the call path: once the enabled agent's count (made later) is
    // in, the disabled agent's would be too.
    let outcome = s.handle_raw("on", ada.clone(), "c1", "call_tool", &call_crm(42).to_string()).await.unwrap();
    assert!(!result_of(&outcome).1);
    wait_for_usage(&s, "on", "ada", "crm__customer_name", 1.0, &clock).await;
    assert_eq!(hot(&s.model_tools("on", ada.clone()).await), ["crm__customer_name"]);

    assert!(hot(&s.model_tools("off", ada).await).is_empty());
    let usage = s.server.router.registry().store().usage("default", "off", "ada", START_MS, 1).await.unwrap();
    assert!(usage.is_empty(), "{usage:?}");
}

// ----- 15. listed tools and request faults -----

#[tokio::test]
async fn function_source_without_declared_tools_lists_them_from_the_executor() {
    let listed =
        vec![schema_tool("invoice_total", json!({"type": "object", "properties": {"invoice": {"type": "integer"}}, "required": ["invoice"]}))];
    let exec = spawn_executor_listing(Behaviour::Echo, listed).await;
    let s = TestServer::start().await;
    s.create("billing", grouped("billing", vec![function_source("billing-tools", &exec.endpoint(), vec![])])).await;

    let (content, is_error) = s.call_result("billing", "r1", "c1", "list_tools", json!({"group": "billing"})).await;
    assert!(!is_error, "{content}");
    assert_eq!(content["total"], 1);
    assert_eq!(content["tools"][0]["name"], "billing__invoice_total");

    let (content, is_error) =
        s.call_result("billing", "r1", "c2", "call_tool", json!({"group": "billing", "tool": "invoice_total", "arguments": {"invoice": 9}})).await;
    assert!(!is_error, "{content}");
    assert_eq!(content, json!({"echo": {"invoice": 9}, "tool": "invoice_total"}));
    // The listed schema is enforced too.
    let (content, is_error) =
        s.call_result("billing", "r1", "c3", "call_tool", json!({"group": "billing", "tool": "invoice_total", "arguments": {}})).await;
    assert!(is_error && content["error"] == "invalid_arguments", "{content}");
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn unknown_agent_is_not_found() {
    let s = TestServer::start().await;
    let err = s
        .router()
        .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("nobody")), run: Some(run_ctx("r1")), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let err = s.handle_raw("nobody", run_ctx("r1"), "c1", "call_tool", "{}").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn malformed_tool_call_requests_are_invalid_argument() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;

    let err = s
        .router()
        .handle_tool_call(pb::HandleToolCallRequest { agent: Some(agent_ref("crm")), run: Some(run_ctx("r1")), call: None, ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("call"), "{}", err.message());
    let err = s.handle_raw("crm", run_ctx("r1"), "c1", "", "{}").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("call.tool_name"), "{}", err.message());
    let err = s
        .router()
        .handle_tool_call(pb::HandleToolCallRequest {
            agent: None,
            run: None,
            call: Some(pb::ToolCall { tool_name: "x".into(), ..Default::default() }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn host_retry_after_giving_up_gets_the_first_outcome() {
    let exec = spawn_executor(Behaviour::Sleep(Duration::from_millis(500))).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let request = || pb::HandleToolCallRequest {
        agent: Some(agent_ref("crm")),
        run: Some(run_ctx("r1")),
        call: Some(pb::ToolCall { tool_call_id: "c1".into(), tool_name: "call_tool".into(), arguments_json: call_crm(42).to_string() }),
        ..Default::default()
    };

    // The host's own deadline passes while the executor is still working.
    let mut first = tonic::Request::new(request());
    first.set_timeout(Duration::from_millis(100));
    let err = s.router().handle_tool_call(first).await.unwrap_err();
    assert!(matches!(err.code(), tonic::Code::Cancelled | tonic::Code::DeadlineExceeded), "{err:?}");

    // Its retry with the same call id gets the outcome of the call already sent.
    let retry = tokio::time::timeout(Duration::from_secs(3), s.router().handle_tool_call(request()))
        .await
        .expect("the retry is answered within a bounded time")
        .unwrap()
        .into_inner();
    assert_eq!(result_of(retry.outcome.as_ref().unwrap()), (json!("Ada"), false));
    assert_eq!(exec.calls(), 1, "the retry did not execute again");
}

#[tokio::test]
async fn host_retry_of_an_approval_after_giving_up_gets_the_first_result() {
    let exec = spawn_executor(Behaviour::Sleep(Duration::from_millis(500))).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    let request = || pb::ResolveDeferredRequest { deferred_id: d.deferred_id.clone(), resolution: Some(approve(None)), ..Default::default() };

    let mut first = tonic::Request::new(request());
    first.set_timeout(Duration::from_millis(100));
    let err = s.router().resolve_deferred(first).await.unwrap_err();
    assert!(matches!(err.code(), tonic::Code::Cancelled | tonic::Code::DeadlineExceeded), "{err:?}");

    let retry = tokio::time::timeout(Duration::from_secs(3), s.router().resolve_deferred(request()))
        .await
        .expect("the retry is answered within a bounded time")
        .unwrap()
        .into_inner();
    assert_eq!((parse(&retry), retry.is_error), (json!("Ada"), false));
    assert_eq!(exec.calls(), 1);
}

// ----- 16. deferred records: client tools behind approval, executing state, lost executors -----

#[tokio::test]
async fn approving_an_approval_gated_client_tool_hands_it_to_the_client() {
    let s = TestServer::start().await;
    let mut confirm = schema_tool("wire_money", json!({"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}));
    confirm.requires_approval = true;
    s.create("ui", grouped("ui", vec![client_source("browser", vec![confirm])])).await;

    let d = deferred_of(&s.call("ui", "r1", "c1", "call_tool", json!({"group": "ui", "tool": "wire_money", "arguments": {"amount": 5}})).await);
    assert_eq!(d.kind, pb::DeferredKind::Approval as i32, "approval comes first, whatever the kind");
    let err = s.resolve(&d.deferred_id, Resolution::ClientResult(pb::ClientResult { content_json: "1".into(), is_error: false })).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "a client result before the approval: {err:?}");

    // Approved (with replacement arguments): now the client's turn, same id, still pending.
    let handed = s.resolve(&d.deferred_id, approve(Some(json!({"amount": 7})))).await.unwrap();
    assert!(!handed.is_error, "{handed:?}");
    let marker = parse(&handed);
    assert_eq!(marker["status"], "client_execution_pending", "{marker}");
    assert_eq!(marker["deferred_id"], d.deferred_id.as_str());
    assert_eq!(marker["arguments"], json!({"amount": 7}));
    let again = s.resolve(&d.deferred_id, approve(Some(json!({"amount": 7})))).await.unwrap();
    assert_eq!(again, handed, "the same approval again is the same answer");
    let err = s.resolve(&d.deferred_id, approve(None)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "a different approval: {err:?}");

    let pending = list_deferred(&s, "ui", "r1", pb::DeferredState::Pending, 0, "").await;
    assert_eq!(pending.records.len(), 1);
    let call = pending.records[0].call.as_ref().unwrap();
    assert_eq!(call.kind, pb::DeferredKind::ClientExecution as i32, "the record is a client execution now");
    assert_eq!(serde_json::from_str::<Value>(&call.target.as_ref().unwrap().arguments_json).unwrap(), json!({"amount": 7}));
    // A retry of the original tool call still finds its (original) deferred record.
    assert_eq!(
        deferred_of(&s.call("ui", "r1", "c1", "call_tool", json!({"group": "ui", "tool": "wire_money", "arguments": {"amount": 5}})).await)
            .deferred_id,
        d.deferred_id
    );

    let done = ClientResultOf(json!({"sent": 7}));
    let r = s.resolve(&d.deferred_id, done.resolution()).await.unwrap();
    assert_eq!(parse(&r), json!({"sent": 7}));
    assert_eq!(s.resolve(&d.deferred_id, done.resolution()).await.unwrap(), r, "idempotent");
    let resolved = list_deferred(&s, "ui", "r1", pb::DeferredState::Resolved, 0, "").await;
    assert_eq!(resolved.records.len(), 1);
    assert_eq!(resolved.records[0].resolution, "client_result");
}

struct ClientResultOf(Value);

impl ClientResultOf {
    fn resolution(&self) -> Resolution {
        Resolution::ClientResult(pb::ClientResult { content_json: self.0.to_string(), is_error: false })
    }
}

#[tokio::test]
async fn an_approved_call_is_listed_as_executing_until_its_result_is_in() {
    let gate = Gate::new();
    let exec = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let s = TestServer::start().await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);

    let resolving = tokio::spawn({
        let router = s.router();
        let id = d.deferred_id.clone();
        async move {
            let mut router = router;
            router.resolve_deferred(pb::ResolveDeferredRequest { deferred_id: id, resolution: Some(approve(None)), ..Default::default() }).await
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let executing = loop {
        let page = list_deferred(&s, "crm", "r1", pb::DeferredState::Executing, 0, "").await;
        if let Some(r) = page.records.first() {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "the approved call never showed as executing");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(executing.state, pb::DeferredState::Executing as i32);
    assert_eq!(executing.resolution, "approved");
    assert!(executing.result.is_none());
    assert!(list_deferred(&s, "crm", "r1", pb::DeferredState::Pending, 0, "").await.records.is_empty(), "no longer waiting for the host");
    assert!(list_deferred(&s, "crm", "r1", pb::DeferredState::Resolved, 0, "").await.records.is_empty(), "not resolved before its result");

    gate.open();
    let r = resolving.await.unwrap().unwrap().into_inner();
    assert_eq!(parse(&r), json!("Ada"));
    let resolved = list_deferred(&s, "crm", "r1", pb::DeferredState::Resolved, 0, "").await;
    assert_eq!(resolved.records.len(), 1);
    assert_eq!(parse(resolved.records[0].result.as_ref().unwrap()), json!("Ada"));
    assert!(list_deferred(&s, "crm", "r1", pb::DeferredState::Executing, 0, "").await.records.is_empty());
}

#[tokio::test]
async fn an_approval_whose_replica_was_lost_resolves_as_outcome_unknown_once_its_lease_ran_out() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let clock = toolrouter::clock::ManualClock::new(START_MS);
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.clock = clock.clone();
    let s = TestServer::start_with(cfg).await;
    s.create("crm", approval_def(&exec.endpoint())).await;
    let d = deferred_of(&s.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    // A replica accepted the approval and died before storing a result.
    let store = s.server.router.registry().store().clone();
    let approval = serde_json::to_string(&toolrouter::invoke::Resolution::Approve { arguments_json: None }).unwrap();
    let lease = toolrouter::store::Lease { owner: "a-replica-killed-with-9", until: START_MS + 15_000 };
    store.transition_deferred("default", &d.deferred_id, &approval, START_MS, lease).await.unwrap();

    clock.advance(Duration::from_secs(16));
    let r = s.resolve(&d.deferred_id, approve(None)).await.unwrap();
    assert!(r.is_error);
    assert_eq!(parse(&r)["error"], "outcome_unknown", "{r:?}");
    assert_eq!(exec.calls(), 0, "nothing is run again");
    assert_eq!(s.resolve(&d.deferred_id, approve(None)).await.unwrap(), r, "the unknown outcome is the stored result");
    let err = s.resolve(&d.deferred_id, deny("no")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
}

#[tokio::test]
async fn approving_a_tool_that_is_no_longer_offered_is_a_model_visible_result() {
    let mut refund = schema_tool("refund", json!({"type": "object", "properties": {"amount": {"type": "integer"}}}));
    refund.requires_approval = true;
    let exec = spawn_executor_listing(Behaviour::Echo, vec![refund]).await;
    let s = TestServer::start().await;
    s.create("billing", grouped("billing", vec![function_source("billing-tools", &exec.endpoint(), vec![])])).await;
    let d = deferred_of(&s.call("billing", "r1", "c1", "call_tool", json!({"group": "billing", "tool": "refund", "arguments": {"amount": 5}})).await);

    // The executor stops offering it; the next preparation lists tools again.
    exec.set_listed(Vec::new());
    s.server.router.registry().invalidate_listings("default", "billing");
    let r = s.resolve(&d.deferred_id, approve(None)).await.unwrap();
    assert!(r.is_error);
    let content = parse(&r);
    assert_eq!(content["error"], "tool_unavailable", "{content}");
    assert!(msg(&content).contains("Refresh discovery") && msg(&content).contains("not run"), "{content}");
    assert_eq!(exec.calls(), 0);
}

// ----- 17. runs expire, deadlines, server-wide switches, per-version limits, executor faults -----

#[tokio::test]
async fn an_idle_run_expires_and_its_next_call_pins_the_default_again() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let clock = toolrouter::clock::ManualClock::new(START_MS);
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.clock = clock.clone();
    cfg.router.run_idle = Duration::from_secs(600);
    let s = TestServer::start_with(cfg).await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    assert_eq!(s.model_tools("crm", run_ctx("r1")).await.version, 1);
    s.create("crm", approval_def(&exec.endpoint())).await;

    // Busy runs stay pinned: calls every few minutes keep r1 alive past the idle time.
    for _ in 0..4 {
        clock.advance(Duration::from_secs(240));
        assert_eq!(s.model_tools("crm", run_ctx("r1")).await.version, 1);
    }
    clock.advance(Duration::from_secs(601));
    assert_eq!(s.model_tools("crm", run_ctx("r1")).await.version, 2, "idle past run_idle: the run starts over on the default");
}

#[tokio::test]
async fn a_tool_timeout_wins_over_the_source_timeout() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = crm_with(&exec.endpoint(), |t| t.timeout = Some(millis(1500)));
    def.sources[0] = with_function(def.sources[0].clone(), |f| f.timeout = Some(millis(5000)));
    s.create("crm", def).await;
    s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
    let d = exec.last_deadline().unwrap();
    assert!(d <= Duration::from_millis(1500) && d > Duration::from_millis(1000), "tool timeout: {d:?}");
}

#[tokio::test]
async fn auto_pinning_switched_off_for_the_server_never_counts_or_adds_hot_tools() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.router.auto_pin = false;
    let s = TestServer::start_with(cfg).await;
    s.create("crm", auto_pin_def(&exec.endpoint(), pb::AutoPinConfig { warmup_calls: 1, ..Default::default() })).await;
    let ada = run_as("r1", Some("ada"), pb::Caller::Model);
    for i in 0..3 {
        let outcome = s.handle_raw("crm", ada.clone(), &format!("c{i}"), "call_tool", &call_crm(42).to_string()).await.unwrap();
        assert!(!result_of(&outcome).1);
    }
    // Counts would be written off the call path within milliseconds: give them time.
    let store = s.server.router.registry().store().clone();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(store.usage("default", "crm", "ada", START_MS, 1).await.unwrap().is_empty(), "a call was counted");
    }
    assert!(hot(&s.model_tools("crm", ada).await).is_empty());
}

#[tokio::test]
async fn a_new_version_with_another_concurrency_limit_gets_that_limit() {
    let gate = Gate::new();
    let exec = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.upstream.queue_wait = Duration::from_millis(50);
    let s = TestServer::start_with(cfg).await;
    let limited = |n: u32| {
        let mut def = crm_definition(&exec.endpoint());
        def.sources[0] = with_function(def.sources[0].clone(), |f| f.max_concurrency = n);
        def
    };
    s.create("crm", limited(1)).await;
    let (a, b) = tokio::join!(s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)), async {
        exec.wait_inflight(1).await;
        let second = s.call_result("crm", "r1", "c2", "call_tool", call_crm(42)).await;
        gate.open();
        second
    });
    assert!(!a.1 && b.1, "version 1 allows one at a time: {a:?} {b:?}");
    assert_eq!(b.0["error"], "busy", "{b:?}");

    gate.close();
    s.create("crm", limited(2)).await;
    let (a, b, ()) = tokio::join!(
        s.call_result("crm", "r2", "c1", "call_tool", call_crm(42)),
        s.call_result("crm", "r2", "c2", "call_tool", call_crm(42)),
        async {
            exec.wait_inflight(2).await;
            gate.open();
        }
    );
    assert!(!a.1 && !b.1, "version 2 allows two at a time: {a:?} {b:?}");
    assert_eq!(exec.max_inflight(), 2);
}

#[tokio::test]
async fn an_executor_failing_with_its_own_internal_status_is_an_error_result_with_its_message() {
    for code in [tonic::Code::Internal, tonic::Code::Unknown] {
        let exec = spawn_executor(Behaviour::Status(code)).await;
        let s = TestServer::start().await;
        s.create("crm", crm_definition(&exec.endpoint())).await;
        let (content, is_error) = s.call_result("crm", "r1", "c1", "call_tool", call_crm(42)).await;
        assert!(is_error);
        assert_eq!(content["error"], format!("{code:?}"), "{content}");
        assert_eq!(content["message"], "executor status", "the executor's own message: {content}");
        assert_eq!(exec.calls(), 1);
    }
}
