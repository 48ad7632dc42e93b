//! Operations (SPEC §10): Prometheus metrics on `/metrics` and graceful shutdown.
//!
//! Metrics are process-wide (one recorder), so the tests of this binary run one at a time.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use toolrouter::pb;

/// Tests here share the process's metrics: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn any_object() -> serde_json::Value {
    json!({"type": "object"})
}

fn millis(ms: u64) -> prost_types::Duration {
    prost_types::Duration { seconds: (ms / 1000) as i64, nanos: ((ms % 1000) * 1_000_000) as i32 }
}

/// Group `ops`: `lookup` and `approve_me` (needs approval) on `fast`, and `slow_write` (100 ms
/// deadline, not idempotent) on `slow`.
fn ops_definition(fast: &str, slow: &str) -> pb::AgentDefinition {
    let mut approve = tool("approve_me", "Does something that needs a person's approval.", any_object());
    approve.requires_approval = true;
    let mut slow_write = tool("slow_write", "Writes slowly.", any_object());
    slow_write.timeout = Some(millis(100));
    pb::AgentDefinition {
        sources: vec![
            function_source("fast", fast, vec![tool("lookup", "Looks up a record by key.", any_object()), approve]),
            function_source("slow", slow, vec![slow_write]),
        ],
        groups: [("ops".to_string(), group("Operations", &["fast", "slow"]))].into(),
        ..Default::default()
    }
}

fn call_ops(tool: &str, arguments: serde_json::Value) -> String {
    json!({"group": "ops", "tool": tool, "arguments": arguments}).to_string()
}

fn handle_request(run: &str, id: &str, tool: &str, arguments: serde_json::Value) -> pb::HandleToolCallRequest {
    pb::HandleToolCallRequest {
        agent: Some(agent_ref("ops")),
        run: Some(run_ctx(run)),
        call: Some(pb::ToolCall { tool_call_id: id.into(), tool_name: "call_tool".into(), arguments_json: call_ops(tool, arguments) }),
    }
}

// ----- metrics -----

/// One Prometheus sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn parse_metrics(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line {l:?}"));
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {l:?}"));
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => {
                    let labels = rest
                        .trim_end_matches('}')
                        .split("\",")
                        .filter(|p| !p.is_empty())
                        .map(|p| {
                            let (k, v) = p.split_once('=').unwrap();
                            (k.to_string(), v.trim_matches('"').to_string())
                        })
                        .collect();
                    (n.to_string(), labels)
                }
                None => (series.to_string(), BTreeMap::new()),
            };
            (name, labels, value)
        })
        .collect()
}

/// The value of the sample `name` whose labels include `labels`.
fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, _, v)| *v)
}

async fn scrape(addr: SocketAddr) -> Vec<Sample> {
    let (status, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    parse_metrics(&body)
}

async fn wait_for_gauge(addr: SocketAddr, name: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = sample(&scrape(addr).await, name, &[]);
        if got == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{name} is {got:?}, expected {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn metrics_count_rpcs_tool_calls_searches_deferrals_and_store_operations() {
    let _serial = SERIAL.lock().await;
    let fast = spawn_executor(Behaviour::Echo).await;
    let slow = spawn_executor(Behaviour::Sleep(Duration::from_millis(400))).await;
    let s = TestServer::start().await;
    s.create("ops", ops_definition(&fast.endpoint(), &slow.endpoint())).await;
    let http = s.server.http_addr;

    let router = s.router();
    let handle = |run: &str, id: &str, tool: &str| {
        let mut router = router.clone();
        let req = handle_request(run, id, tool, json!({}));
        async move { router.handle_tool_call(req).await.expect("handle").into_inner().outcome.unwrap() }
    };
    let (c, e) = result_of(&handle("m", "1", "lookup").await);
    assert!(!e, "{c}");
    let (c, e) = result_of(&handle("m", "2", "no_such_tool").await);
    assert!(e, "{c}");
    let (c, e) = result_of(&handle("m", "3", "slow_write").await);
    assert!(e && c["error"] == "outcome_unknown", "{c}");
    let deferred = deferred_of(&handle("m", "4", "approve_me").await);
    let zero = pb::DiscoverToolsRequest { agent: Some(agent_ref("ops")), query: "zzzqqq".into(), ..Default::default() };
    assert_eq!(s.discovery().discover_tools(zero).await.unwrap().into_inner().total, 0);
    let bad = s.router().handle_tool_call(pb::HandleToolCallRequest::default()).await.expect_err("no agent");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);

    wait_for_gauge(http, "toolrouter_deferred_pending", 1.0).await;
    s.resolve(&deferred.deferred_id, pb::resolve_deferred_request::Resolution::Deny(pb::Deny { message: "no".into() })).await.unwrap();
    wait_for_gauge(http, "toolrouter_deferred_pending", 0.0).await;

    let m = scrape(http).await;
    let at_least = |name: &str, labels: &[(&str, &str)], min: f64| {
        let v = sample(&m, name, labels).unwrap_or_else(|| panic!("no sample {name}{labels:?}"));
        assert!(v >= min, "{name}{labels:?} = {v}, expected at least {min}");
    };
    let handle_tool_call = ("method", "toolrouter.v1.Router/HandleToolCall");
    at_least("toolrouter_grpc_requests_total", &[handle_tool_call, ("code", "OK")], 4.0);
    at_least("toolrouter_grpc_requests_total", &[handle_tool_call, ("code", "INVALID_ARGUMENT")], 1.0);
    at_least("toolrouter_grpc_requests_total", &[("method", "toolrouter.v1.AgentRegistry/CreateAgentVersion"), ("code", "OK")], 1.0);
    at_least("toolrouter_grpc_request_duration_seconds_count", &[handle_tool_call], 5.0);
    at_least("toolrouter_grpc_request_duration_seconds_bucket", &[handle_tool_call, ("le", "+Inf")], 5.0);
    assert!(sample(&m, "toolrouter_grpc_request_duration_seconds_sum", &[handle_tool_call]).unwrap() > 0.0);
    for outcome in ["result", "error", "uncertain", "deferred"] {
        at_least("toolrouter_tool_calls_total", &[("outcome", outcome)], 1.0);
        at_least("toolrouter_tool_call_duration_seconds_count", &[("outcome", outcome)], 1.0);
    }
    // The uncertain call waited for its 100 ms deadline.
    let uncertain_sum = sample(&m, "toolrouter_tool_call_duration_seconds_sum", &[("outcome", "uncertain")]).unwrap();
    assert!(uncertain_sum >= 0.1, "{uncertain_sum}");
    at_least("toolrouter_executor_duration_seconds_count", &[("source", "fast")], 1.0);
    at_least("toolrouter_executor_duration_seconds_count", &[("source", "slow")], 1.0);
    at_least("toolrouter_search_duration_seconds_count", &[], 1.0);
    at_least("toolrouter_search_zero_results_total", &[], 1.0);
    for op in ["create_version", "pin_run", "claim_call", "finish_call", "insert_deferred", "transition_deferred", "complete_deferred", "count_pending"] {
        at_least("toolrouter_store_duration_seconds_count", &[("op", op)], 1.0);
    }
    let (status, body) = http_get(http, "/metrics").await;
    assert_eq!(status, 200);
    assert!(body.contains("# TYPE toolrouter_grpc_request_duration_seconds histogram"), "histograms, not summaries");
    assert!(body.contains("# TYPE toolrouter_deferred_pending gauge"));
}

// ----- graceful shutdown -----

#[tokio::test]
async fn shutdown_refuses_new_calls_and_lets_calls_in_flight_finish() {
    let _serial = SERIAL.lock().await;
    let fast = spawn_executor(Behaviour::Echo).await;
    let slow = spawn_executor(Behaviour::Sleep(Duration::from_millis(500))).await;
    let mut def = ops_definition(&fast.endpoint(), &slow.endpoint());
    // Long enough to finish: the 100 ms deadline would turn it into an uncertain outcome.
    if let Some(pb::tool_source::Kind::Function(f)) = &mut def.sources[1].kind {
        f.tools[0].timeout = Some(millis(5_000));
    }
    let s = TestServer::start().await;
    s.create("ops", def).await;
    let http = s.server.http_addr;
    assert_eq!(http_get(http, "/readyz").await.0, 200);

    let mut in_flight_client = s.router();
    let in_flight = tokio::spawn(async move { in_flight_client.handle_tool_call(handle_request("sd", "slow-1", "slow_write", json!({"n": 1}))).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    while slow.calls() == 0 {
        assert!(Instant::now() < deadline, "the slow call never reached its executor");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let TestServer { server, channel } = s;
    let shutdown = tokio::spawn(server.shutdown());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, body) = http_get(http, "/readyz").await;
        if status == 503 {
            assert_eq!(body, "shutting down");
            break;
        }
        assert!(Instant::now() < deadline, "readiness never went false");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Probes see NOT_SERVING; new calls are refused while the slow call runs.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let status = health
        .check(tonic_health::pb::HealthCheckRequest { service: "toolrouter.v1.Router".into() })
        .await
        .expect("health check during the drain")
        .into_inner()
        .status;
    assert_eq!(status, tonic_health::pb::health_check_response::ServingStatus::NotServing as i32);
    let refused = pb::router_client::RouterClient::new(channel.clone())
        .handle_tool_call(handle_request("sd", "new-1", "lookup", json!({})))
        .await
        .expect_err("a call after shutdown began");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(fast.calls(), 0, "the refused call did not run");

    let finished = tokio::time::timeout(Duration::from_secs(5), in_flight).await.expect("in-flight call finished").unwrap();
    let outcome = finished.expect("the call in flight succeeds").into_inner().outcome.unwrap();
    let (content, is_error) = result_of(&outcome);
    assert!(!is_error, "{content}");
    assert_eq!(content["tool"], "slow_write");
    tokio::time::timeout(Duration::from_secs(5), shutdown).await.expect("shutdown completes").unwrap();
    assert!(tokio::net::TcpStream::connect(http).await.is_err(), "the HTTP listener is closed");
}
