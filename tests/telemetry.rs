//! Operations (SPEC §10): OpenTelemetry traces exported over OTLP/gRPC to an in-process
//! collector, Prometheus metrics on `/metrics`, and graceful shutdown.
//!
//! Telemetry is process-wide (one tracing subscriber, one metrics recorder), so the tests of
//! this binary run one at a time and each looks only at its own trace ids.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::{Span, span::SpanKind};
use serde_json::json;
use tonic::{Request, Response, Status};
use toolrouter::pb;
use toolrouter::telemetry::{Telemetry, TelemetryConfig};

/// Tests here share the process's telemetry: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Planted in tool arguments; must never reach an exported span.
const SECRET: &str = "planted-argument-value-5f1c9e";

// ----- the OTLP receiver -----

#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(&self, req: Request<ExportTraceServiceRequest>) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.0.lock().unwrap().push(req.into_inner());
        Ok(Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

/// The collector and the process's telemetry, exporting to it. Both live on a runtime of
/// their own, which outlives every test's runtime.
struct Harness {
    _rt: tokio::runtime::Runtime,
    collector: Collector,
    telemetry: Telemetry,
    /// Panics on the harness's runtime (the collector's, the exporter's tasks), which no
    /// test's own watch sees; re-raised by `received`.
    panics: PanicWatch,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    // Built on a plain thread: a runtime cannot be started from inside a test's runtime.
    HARNESS.get_or_init(|| std::thread::spawn(build_harness).join().expect("harness starts"))
}

fn build_harness() -> Harness {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let collector = Collector::default();
    let (telemetry, panics) = rt.block_on(async {
        let panics = PanicWatch::start("the OTLP collector shared by the telemetry tests");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = TraceServiceServer::new(collector.clone());
        tokio::spawn(
            tonic::transport::Server::builder().add_service(svc).serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let cfg = TelemetryConfig {
            otlp_endpoint: Some(format!("http://{addr}")),
            service_name: "toolrouter-test".into(),
            resource_attributes: vec![("deployment.environment".into(), "test".into())],
            log_filter: "warn".into(),
            export_delay: Duration::from_millis(100),
            ..TelemetryConfig::default()
        };
        (toolrouter::telemetry::init(&cfg).expect("telemetry installs"), panics)
    });
    assert!(telemetry.exporting());
    Harness { _rt: rt, collector, telemetry, panics }
}

impl Harness {
    /// What the collector received, once no panic happened on the harness's runtime.
    fn received(&self) -> std::sync::MutexGuard<'_, Vec<ExportTraceServiceRequest>> {
        self.panics.check();
        self.collector.0.lock().unwrap()
    }

    fn spans(&self, trace_id: &[u8]) -> Vec<Span> {
        let requests = self.received();
        requests
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans)
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    }

    /// Everything exported so far, as text.
    fn exported_text(&self) -> String {
        format!("{:?}", self.received())
    }

    fn service_names(&self) -> Vec<String> {
        let requests = self.received();
        requests
            .iter()
            .flat_map(|r| &r.resource_spans)
            .filter_map(|r| r.resource.as_ref())
            .flat_map(|r| &r.attributes)
            .filter(|kv| kv.key == "service.name")
            .filter_map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    /// Flushes until the spans of `trace_id` satisfy `done` (bounded).
    async fn wait_for(&self, trace_id: &[u8], done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            tokio::task::spawn_blocking(|| harness().telemetry.force_flush()).await.unwrap().expect("flush");
            let spans = self.spans(trace_id);
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < deadline, "spans never arrived; got {:#?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a AnyValue> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn str_attr<'a>(span: &'a Span, key: &str) -> &'a str {
    match attr(span, key) {
        Some(AnyValue::StringValue(s)) => s,
        other => panic!("{key} of span {:?} is {other:?}", span.name),
    }
}

fn int_attr(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(AnyValue::IntValue(n)) => *n,
        other => panic!("{key} of span {:?} is {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no span {name:?} in {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh caller trace: (trace id, parent span id).
fn caller_trace() -> ([u8; 16], [u8; 8]) {
    let (mut t, mut p): ([u8; 16], [u8; 8]) = (rand::random(), rand::random());
    t[0] |= 1;
    p[0] |= 1;
    (t, p)
}

fn with_traceparent<T>(msg: T, trace: &[u8; 16], parent: &[u8; 8]) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut().insert("traceparent", format!("00-{}-{}-01", hex(trace), hex(parent)).parse().unwrap());
    req
}

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
        ..Default::default()
    }
}

// ----- traces -----

#[tokio::test]
async fn tool_call_spans_continue_the_callers_trace_and_reach_the_executor() {
    let _serial = SERIAL.lock().await;
    let h = harness();
    let fast = spawn_executor(Behaviour::Echo).await;
    let slow = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("ops", ops_definition(&fast.endpoint(), &slow.endpoint())).await;

    let (trace, parent) = caller_trace();
    let req = with_traceparent(handle_request("run-trace", "call-7", "lookup", json!({"key": SECRET})), &trace, &parent);
    let outcome = s.router().handle_tool_call(req).await.expect("handle tool call").into_inner().outcome.unwrap();
    let (content, is_error) = result_of(&outcome);
    assert!(!is_error, "{content}");

    let spans = h
        .wait_for(&trace, |spans| {
            spans.iter().any(|s| s.name == "toolrouter.v1.Router/HandleToolCall") && spans.iter().any(|s| s.name.starts_with("execute_tool "))
        })
        .await;

    // The RPC span: a server span whose parent is the caller's span.
    let rpc = named(&spans, "toolrouter.v1.Router/HandleToolCall");
    assert_eq!(rpc.parent_span_id, parent, "the incoming traceparent is the parent");
    assert_eq!(rpc.kind, SpanKind::Server as i32);
    assert_eq!(str_attr(rpc, "rpc.system"), "grpc");
    assert_eq!(str_attr(rpc, "rpc.service"), "toolrouter.v1.Router");
    assert_eq!(str_attr(rpc, "rpc.method"), "HandleToolCall");
    assert_eq!(int_attr(rpc, "rpc.grpc.status_code"), 0);

    // The execute_tool span (GenAI semantic conventions), a child of the RPC span.
    let exec_span = named(&spans, "execute_tool ops__lookup");
    assert_eq!(exec_span.parent_span_id, rpc.span_id, "execute_tool is a child of the RPC span");
    assert_eq!(exec_span.kind, SpanKind::Internal as i32);
    assert_eq!(str_attr(exec_span, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(str_attr(exec_span, "gen_ai.tool.name"), "ops__lookup");
    assert_eq!(str_attr(exec_span, "gen_ai.tool.call.id"), "call-7");
    assert_eq!(str_attr(exec_span, "gen_ai.tool.type"), "function");
    assert_eq!(str_attr(exec_span, "toolrouter.source.id"), "fast");
    assert!(attr(exec_span, "gen_ai.tool.call.arguments").is_none(), "arguments are opt-in");
    assert!(attr(exec_span, "error.type").is_none());

    // The executor got the trace context, with the execute_tool span as its parent.
    let seen = fast.last_traceparent().expect("the executor got a traceparent");
    assert_eq!(seen, format!("00-{}-{}-01", hex(&trace), hex(&exec_span.span_id)));

    // No argument value anywhere in what was exported.
    assert!(!h.exported_text().contains(SECRET), "an argument value was exported");
    let names = h.service_names();
    assert!(!names.is_empty() && names.iter().all(|n| n == "toolrouter-test"), "{names:?}");
}

#[tokio::test]
async fn failed_tool_execution_marks_its_span_with_the_error_type() {
    let _serial = SERIAL.lock().await;
    let h = harness();
    let fast = spawn_executor(Behaviour::Echo).await;
    let slow = spawn_executor(Behaviour::Sleep(Duration::from_millis(500))).await;
    let s = TestServer::start().await;
    s.create("ops", ops_definition(&fast.endpoint(), &slow.endpoint())).await;

    let (trace, parent) = caller_trace();
    let req = with_traceparent(handle_request("run-err", "call-8", "slow_write", json!({})), &trace, &parent);
    let outcome = s.router().handle_tool_call(req).await.unwrap().into_inner().outcome.unwrap();
    let (content, is_error) = result_of(&outcome);
    assert!(is_error && content["error"] == "outcome_unknown", "{content}");

    let spans = h.wait_for(&trace, |spans| spans.iter().any(|s| s.name == "execute_tool ops__slow_write")).await;
    let span = named(&spans, "execute_tool ops__slow_write");
    assert_eq!(str_attr(span, "error.type"), "outcome_unknown");
    assert_eq!(str_attr(span, "toolrouter.source.id"), "slow");
    assert_eq!(span.status.as_ref().map(|s| s.code), Some(opentelemetry_proto::tonic::trace::v1::status::StatusCode::Error as i32));
}

#[tokio::test]
async fn discovery_produces_a_search_span_with_result_counts() {
    let _serial = SERIAL.lock().await;
    let h = harness();
    let fast = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("ops", ops_definition(&fast.endpoint(), &fast.endpoint())).await;

    let (trace, parent) = caller_trace();
    let req = with_traceparent(
        pb::DiscoverToolsRequest { agent: Some(agent_ref("ops")), query: "look up record".into(), ..Default::default() },
        &trace,
        &parent,
    );
    let page = s.discovery().discover_tools(req).await.expect("discover").into_inner();
    assert!(page.total >= 1);

    let spans = h.wait_for(&trace, |spans| spans.iter().any(|s| s.name == "discover_tools")).await;
    let rpc = named(&spans, "toolrouter.v1.Discovery/DiscoverTools");
    assert_eq!(rpc.parent_span_id, parent);
    let search = named(&spans, "discover_tools");
    assert_eq!(search.parent_span_id, rpc.span_id);
    assert_eq!(int_attr(search, "toolrouter.search.query_keywords"), 3);
    assert_eq!(int_attr(search, "toolrouter.search.total"), page.total as i64);
    assert_eq!(int_attr(search, "toolrouter.search.returned"), page.tools.len() as i64);
    assert!(!h.exported_text().contains("look up record"), "the query text is not exported");

    // The model's discover_tools control tool goes through the same search.
    let (trace, parent) = caller_trace();
    let req = with_traceparent(
        pb::HandleToolCallRequest {
            agent: Some(agent_ref("ops")),
            run: Some(run_ctx("run-search")),
            call: Some(pb::ToolCall {
                tool_call_id: "d1".into(),
                tool_name: "discover_tools".into(),
                arguments_json: json!({"query": "zzzqqq"}).to_string(),
            }),
            ..Default::default()
        },
        &trace,
        &parent,
    );
    s.router().handle_tool_call(req).await.expect("discover via the control tool");
    let spans = h.wait_for(&trace, |spans| spans.iter().any(|s| s.name == "discover_tools")).await;
    let search = named(&spans, "discover_tools");
    assert_eq!(int_attr(search, "toolrouter.search.total"), 0);
    assert_eq!(int_attr(search, "toolrouter.search.returned"), 0);
    assert_eq!(search.parent_span_id, named(&spans, "toolrouter.v1.Router/HandleToolCall").span_id);
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
    samples.iter().find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))).map(|(_, _, v)| *v)
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
    at_least("toolrouter_executor_duration_seconds_count", &[("kind", "function")], 2.0);
    let tenant_defined = ["fast", "slow", "ops"];
    assert!(!m.iter().any(|(_, labels, _)| labels.values().any(|v| tenant_defined.contains(&v.as_str()))), "no tenant-defined label values: {m:?}");
    at_least("toolrouter_search_duration_seconds_count", &[], 1.0);
    at_least("toolrouter_search_zero_results_total", &[], 1.0);
    for op in
        ["create_version", "pin_run", "claim_call", "finish_call", "insert_deferred", "transition_deferred", "complete_deferred", "count_pending"]
    {
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
    let gate = Gate::new();
    let slow = spawn_executor(Behaviour::Gate(gate.clone())).await;
    let mut def = ops_definition(&fast.endpoint(), &slow.endpoint());
    // Long enough to finish: the 100 ms deadline would turn it into an uncertain outcome.
    function_of(&mut def.sources[1]).tools[0].timeout = Some(millis(5_000));
    let s = TestServer::start().await;
    s.create("ops", def).await;
    let http = s.server.http_addr;
    assert_eq!(http_get(http, "/readyz").await.0, 200);

    let mut in_flight_client = s.router();
    let in_flight =
        tokio::spawn(async move { in_flight_client.handle_tool_call(handle_request("sd", "slow-1", "slow_write", json!({"n": 1}))).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    while slow.calls() == 0 {
        assert!(Instant::now() < deadline, "the slow call never reached its executor");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let TestServer { server, channel, .. } = s;
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

    // The call in flight is let go only now, after the drain has been watched.
    gate.open();
    let finished = tokio::time::timeout(Duration::from_secs(5), in_flight).await.expect("in-flight call finished").unwrap();
    let outcome = finished.expect("the call in flight succeeds").into_inner().outcome.unwrap();
    let (content, is_error) = result_of(&outcome);
    assert!(!is_error, "{content}");
    assert_eq!(content["tool"], "slow_write");
    tokio::time::timeout(Duration::from_secs(5), shutdown).await.expect("shutdown completes").unwrap();
    assert!(tokio::net::TcpStream::connect(http).await.is_err(), "the HTTP listener is closed");
}
