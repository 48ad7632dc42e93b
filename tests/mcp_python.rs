//! MCP against peers that are not our own code: a server and a client written with the
//! official Python SDK (PyPI `mcp` 2.x, installed by `.ci/run`). Without it these tests print
//! a skip line and pass.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::*;
use serde_json::{Value, json};
use toolrouter::pb;

fn python_mcp() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver, mcp.client.streamable_http, uvicorn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("SKIP: Python package `mcp` (2.x) is not importable; run `python3 -m pip install 'mcp>=2,<3'`");
    }
    ok
}

fn script(name: &str) -> String {
    format!("{}/tests/mcp/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The Python MCP server, stopped when dropped.
struct PythonServer {
    child: Child,
    port: u16,
}

impl PythonServer {
    fn start() -> Self {
        let mut child =
            Command::new("python3").arg(script("python_server.py")).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("python3 starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the server prints its port");
        let port = line.trim().strip_prefix("PORT ").and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Self { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn from(binding: &str) -> pb::HeaderBinding {
    pb::HeaderBinding { value: Some(pb::header_binding::Value::From(binding.into())), prefix: String::new() }
}

#[tokio::test]
async fn a_python_mcp_server_is_a_source_called_in_2026_07_28_with_the_runs_headers_on_every_call() {
    if !python_mcp() {
        return;
    }
    let py = PythonServer::start();
    let s = TestServer::start().await;
    let source = pb::ToolSource {
        id: "py".into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource {
            url: py.url(),
            headers: [("X-Run".to_string(), from("context.run_id")), ("X-User".to_string(), from("identity.user_id"))].into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    let def = pb::AgentDefinition {
        groups: [("calc".to_string(), group("Arithmetic and identity", &["py"]))].into(),
        sources: vec![source],
        ..Default::default()
    };
    s.create("py-agent", def).await;

    // Headers are resolved at the run's first use, so the run carries its identity from the start.
    let ada = || run_as("run-a", Some("ada"), pb::Caller::Model);
    let tools = s.model_tools("py-agent", ada()).await;
    assert!(tools.diagnostics.is_empty(), "{:?}", tools.diagnostics);
    let outcome = s.handle_raw("py-agent", ada(), "d1", "discover_tools", &json!({"query": "add integers"}).to_string()).await.unwrap();
    let (found, _) = result_of(&outcome);
    assert_eq!(found["tools"][0]["name"], "calc__add", "{found}");

    let call = |run: &'static str, user: &'static str, id: &'static str, tool: &'static str, args: Value| {
        let s = &s;
        async move {
            let arguments = json!({"group": "calc", "tool": tool, "arguments": args}).to_string();
            let outcome = s.handle_raw("py-agent", run_as(run, Some(user), pb::Caller::Model), id, "call_tool", &arguments).await.expect("handled");
            let (content, is_error) = result_of(&outcome);
            assert!(!is_error, "{content}");
            content
        }
    };
    let sum = call("run-a", "ada", "c1", "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(sum, json!({"result": 5}));
    let a1 = call("run-a", "ada", "c2", "whoami", json!({"note": "first"})).await;
    let a2 = call("run-a", "ada", "c3", "whoami", json!({"note": "second"})).await;
    let b1 = call("run-b", "bob", "c4", "whoami", json!({"note": "other run"})).await;
    assert_eq!((a1["run"].as_str(), a1["user"].as_str()), (Some("run-a"), Some("ada")));
    assert_eq!(b1["run"], "run-b");
    assert_eq!((a2["run"].as_str(), a2["user"].as_str()), (Some("run-a"), Some("ada")), "the run's headers on every request");
    // The SDK's server speaks 2026-07-28: no session, every request self-contained.
    for seen in [&a1, &a2, &b1] {
        assert!(seen["session"].is_null() && seen["protocol"] == "2026-07-28", "{seen}");
    }

    // Validation happens before the Python server sees anything.
    let bad = json!({"group": "calc", "tool": "add", "arguments": {"a": "two"}}).to_string();
    let (r, is_error) = result_of(&s.handle_raw("py-agent", ada(), "c5", "call_tool", &bad).await.unwrap());
    assert!(is_error && r["error"] == "invalid_arguments", "{r}");
}

/// Runs tests/mcp/python_client.py against the endpoint of `agent` (answering elicitations
/// with `answer`, if given); the report it prints.
async fn python_client(s: &TestServer, agent: &str, calls: Value, answer: Option<Value>) -> Value {
    let url = format!("http://{}/mcp/agents/{agent}", s.server.http_addr);
    let mut args = vec![script("python_client.py"), url, calls.to_string()];
    args.extend(answer.map(|a| a.to_string()));
    let out = python(args, None).await;
    assert!(out.status.success(), "client failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the client prints JSON")
}

#[tokio::test]
async fn the_python_mcp_client_lists_and_calls_through_the_endpoint() {
    if !python_mcp() {
        return;
    }
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let calls = json!([
        {"name": "discover_tools", "arguments": {"query": "customer name", "group": "crm"}},
        {"name": "call_tool", "arguments": {"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}},
        {"name": "call_tool", "arguments": {"group": "crm", "tool": "customer_name", "arguments": {"customer_id": "x"}}},
    ]);
    let report = python_client(&s, "crm", calls, None).await;

    let expected = s.model_tools("crm", run_ctx("")).await;
    let listed: Vec<(&str, &Value)> = report["tools"].as_array().unwrap().iter().map(|t| (t["name"].as_str().unwrap(), &t["input_schema"])).collect();
    let schemas: Vec<Value> = expected.tools.iter().map(|t| serde_json::from_str(&t.input_schema_json).unwrap()).collect();
    let expected: Vec<(&str, &Value)> = expected.tools.iter().zip(&schemas).map(|(t, s)| (t.name.as_str(), s)).collect();
    assert_eq!(listed, expected, "tools/list is GetModelTools");
    assert!(report["instructions"].as_str().unwrap_or_default().contains("discover_tools"));

    let results = report["results"].as_array().unwrap();
    let found: Value = serde_json::from_str(results[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(found["tools"][0]["name"], "crm__customer_name", "{found}");
    assert_eq!(results[1]["is_error"], false, "{}", results[1]);
    assert_eq!(exec.last_arguments(), json!({"customer_id": 42}));
    assert_eq!(results[2]["is_error"], true, "{}", results[2]);
    assert_eq!(exec.calls(), 1, "the invalid call was not sent");
}

/// The CRM agent plus an approval-gated `refund`.
fn crm_with_refund(endpoint: &str) -> pb::AgentDefinition {
    let mut def = crm_definition(endpoint);
    let mut refund =
        tool("refund", "Refund an order.", json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}));
    refund.requires_approval = true;
    def.sources.push(function_source("ops-tools", endpoint, vec![refund]));
    def.groups.insert("ops".into(), group("Operations", &["ops-tools"]));
    def
}

#[tokio::test]
async fn a_python_client_that_elicits_is_asked_to_approve_and_gets_the_calls_result() {
    if !python_mcp() {
        return;
    }
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_with_refund(&exec.endpoint())).await;
    let refund = json!([{"name": "call_tool", "arguments": {"group": "ops", "tool": "refund", "arguments": {"order": "o-7"}}}]);

    let report = python_client(&s, "crm", refund.clone(), Some(json!({"action": "accept", "content": {"approve": true}}))).await;
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report}");
    assert!(asked[0]["message"].as_str().unwrap().contains("ops__refund") && asked[0]["message"].as_str().unwrap().contains("o-7"), "{report}");
    assert_eq!(asked[0]["schema"]["properties"]["approve"]["type"], "boolean");
    let result = &report["results"][0];
    assert_eq!(result["is_error"], false, "{report}");
    assert_eq!(result["structured"]["tool"], "refund", "the approved call ran and its result came back: {report}");
    assert_eq!(exec.calls(), 1);

    let report = python_client(&s, "crm", refund.clone(), Some(json!({"action": "decline"}))).await;
    assert_eq!(report["results"][0]["is_error"], true, "{report}");
    assert_eq!(report["results"][0]["structured"]["error"], "denied", "{report}");
    assert_eq!(exec.calls(), 1, "a declined call does not run");

    // A client without elicitation learns the call is pending and how it gets resolved.
    let report = python_client(&s, "crm", refund, None).await;
    let pending = &report["results"][0];
    assert_eq!((pending["is_error"].as_bool(), pending["structured"]["status"].as_str()), (Some(false), Some("approval_pending")), "{report}");
    assert!(pending["structured"]["message"].as_str().unwrap().contains("ResolveDeferred"), "{report}");
    assert_eq!(exec.calls(), 1);
}

// ----- two replicas sharing one store, every HTTP request alternating between them -----

/// Runs tests/mcp/python_replicas.py with this configuration; the report it prints.
async fn python_replicas(config: Value) -> Value {
    let out = python(vec![script("python_replicas.py"), config.to_string()], None).await;
    assert!(out.status.success(), "client failed: {}", String::from_utf8_lossy(&out.stderr));
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("the client prints JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    eprintln!("python_replicas.py: {report}");
    report
}

/// tests/mcp/python_replicas.py with a pause (`stop_after` or `pause_in_question`): the test
/// reads its `PAUSED` line, then tells it which replicas are left. Killed if dropped unresumed.
struct PausingClient {
    child: Option<Child>,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl PausingClient {
    fn start(config: &Value) -> Self {
        let mut child = Command::new("python3")
            .args([script("python_replicas.py"), config.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child: Some(child), lines }
    }

    async fn line(&mut self) -> String {
        tokio::time::timeout(std::time::Duration::from_secs(120), self.lines.recv())
            .await
            .expect("the client answers within 2 minutes")
            .expect("the client printed a line before exiting")
    }

    async fn paused(&mut self) {
        assert_eq!(self.line().await, "PAUSED");
    }

    /// Continues on these replicas only; the report.
    async fn resume(mut self, urls: &[String]) -> Value {
        use std::io::Write;
        let mut child = self.child.take().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{}", json!({"urls": urls})).expect("the client reads the surviving replicas");
        drop(stdin);
        let report = self.line().await;
        let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
        assert!(status.success(), "the client failed ({status}) after printing {report}");
        eprintln!("python_replicas.py: {report}");
        serde_json::from_str(&report).unwrap_or_else(|e| panic!("the client prints JSON ({e}): {report}"))
    }
}

impl Drop for PausingClient {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn endpoint(s: &TestServer, agent: &str) -> String {
    format!("http://{}/mcp/agents/{agent}", s.server.http_addr)
}

/// Two replicas in this process on one store (a SQLite file or a PostgreSQL schema).
async fn two_replicas(store: &str) -> (TestServer, TestServer) {
    let replica = || {
        let mut cfg = toolrouter::config::ServerConfig::for_tests();
        cfg.store = store.to_string();
        cfg
    };
    let a = TestServer::start_with(replica()).await;
    let b = TestServer::start_with(replica()).await;
    (a, b)
}

fn sqlite_store(dir: &TempDir) -> String {
    format!("sqlite://{}", dir.0.join("store.db").display())
}

/// The answers a client got that were not 2xx, but for the `GET` event stream a session
/// client opens (405: the endpoint answers every request on its POST).
fn unexpected_statuses(report: &Value) -> Vec<&Value> {
    report["non_2xx"].as_array().unwrap().iter().filter(|r| !(r["http"] == "GET" && r["status"] == 405)).collect()
}

/// Every request of the client alternated between the two replicas, none refused.
fn assert_alternated(report: &Value, a: &str, b: &str) {
    let (to_a, to_b) = (report["requests"][a].as_u64().unwrap(), report["requests"][b].as_u64().unwrap());
    assert!(to_a >= 3 && to_b >= 3 && to_a.abs_diff(to_b) <= 1, "requests: {}", report["requests"]);
    assert!(unexpected_statuses(report).is_empty(), "{report}");
}

fn customer(id: &str) -> Value {
    json!({"name": "call_tool", "arguments": {"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}, "tool_call_id": id})
}

async fn clients_alternating_between_replicas(store: &str) {
    let exec = spawn_executor(Behaviour::Echo).await;
    let (a, b) = two_replicas(store).await;
    a.create("crm", crm_definition(&exec.endpoint())).await;
    let (url_a, url_b) = (endpoint(&a, "crm"), endpoint(&b, "crm"));
    let expected: Vec<String> = b.model_tools("crm", run_ctx("")).await.tools.into_iter().map(|t| t.name).collect();
    let discover = json!({"name": "discover_tools", "arguments": {"query": "customer name", "group": "crm"}, "tool_call_id": "d1"});

    // 2026-07-28: every request self-contained, the run and the calls named in `_meta`.
    let calls = json!([discover, customer("c1"), customer("c2"), customer("c3"), customer("c1"), customer("c4")]);
    let report = python_replicas(json!({"urls": [url_a, url_b], "mode": "2026-07-28", "run_id": "py-stateless-1", "calls": calls})).await;
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert_eq!(report["tools"], json!(expected), "{report}");
    assert_eq!(report["cache_scope"], "private", "{report}");
    assert_eq!(report["wire_list"]["cacheScope"], "private", "the hints are on the wire: {report}");
    assert!(report["ttl_ms"].is_u64(), "{report}");
    let results = report["results"].as_array().unwrap();
    let found: Value = serde_json::from_str(results[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(found["tools"][0]["name"], "crm__customer_name", "{report}");
    for r in &results[1..] {
        assert_eq!((r["is_error"].as_bool(), r["text"].as_str()), (Some(false), Some("Ada")), "{report}");
    }
    assert_alternated(&report, &url_a, &url_b);
    assert!(report["wire"].as_array().unwrap().iter().all(|w| w["session"].is_null()), "no session: {report}");
    assert_eq!(exec.calls(), 4, "c1 sent again ran once: {report}");

    // 2025-11-25: one session, its requests alternating between the replicas.
    let calls = json!([discover, customer("s1"), customer("s2"), customer("s1"), customer("s3")]);
    let report = python_replicas(json!({"urls": [url_a, url_b], "mode": "legacy", "calls": calls})).await;
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    assert_eq!(report["tools"], json!(expected), "{report}");
    assert!(report["instructions"].as_str().unwrap_or_default().contains("discover_tools"), "{report}");
    assert!(report["wire_list"]["ttlMs"].is_null() && report["wire_list"]["cacheScope"].is_null(), "no 2026 fields in 2025: {report}");
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    for r in &results[1..] {
        assert_eq!((r["is_error"].as_bool(), r["text"].as_str()), (Some(false), Some("Ada")), "{report}");
    }
    assert_alternated(&report, &url_a, &url_b);
    let wire = report["wire"].as_array().unwrap();
    let session = wire[1]["session"].as_str().expect("the second request carries the session");
    for (url, name) in [(&url_a, "A"), (&url_b, "B")] {
        let served = wire.iter().filter(|w| w["url"] == url.as_str() && w["session"] == session && w["rpc"] == "tools/call").count();
        assert!(served >= 2, "replica {name} served {served} calls of the session: {report}");
    }
    assert!(wire[1..].iter().all(|w| w["session"] == session), "one session throughout: {report}");
    assert_eq!(exec.calls(), 4 + 3, "s1 sent again in its session ran once: {report}");
}

#[tokio::test]
async fn stateless_and_session_clients_alternate_every_request_between_two_replicas_on_sqlite() {
    if !python_mcp() {
        return;
    }
    let dir = TempDir::new("mcp-py-replicas");
    clients_alternating_between_replicas(&sqlite_store(&dir)).await;
}

#[tokio::test]
async fn stateless_and_session_clients_alternate_every_request_between_two_replicas_on_postgres() {
    if !python_mcp() {
        return;
    }
    let Some(db) = common::pg::TestDb::create().await else { return };
    clients_alternating_between_replicas(&db.url).await;
}

async fn clients_continuing_after_a_replica_stops(store: &str) {
    let exec = spawn_executor(Behaviour::Echo).await;
    let (a, b) = two_replicas(store).await;
    a.create("crm", crm_definition(&exec.endpoint())).await;
    let (url_a, url_b) = (endpoint(&a, "crm"), endpoint(&b, "crm"));

    // Both clients start on A (their first request), alternate, and pause after two calls.
    let calls = json!([customer("p1"), customer("p2"), customer("p3"), customer("p1"), customer("p4")]);
    let mut session = PausingClient::start(&json!({"urls": [url_a, url_b], "mode": "legacy", "calls": calls, "stop_after": 2}));
    let mut stateless =
        PausingClient::start(&json!({"urls": [url_a, url_b], "mode": "2026-07-28", "run_id": "py-stop-1", "calls": calls, "stop_after": 2}));
    session.paused().await;
    stateless.paused().await;
    assert_eq!(exec.calls(), 4);
    let TestServer { server, .. } = a;
    server.shutdown().await;

    let survivors = [url_b.clone()];
    for (report, mode) in [(session.resume(&survivors).await, "legacy"), (stateless.resume(&survivors).await, "2026-07-28")] {
        assert_eq!(report["wire"][0]["url"], url_a.as_str(), "{mode}: the first request went to the replica stopped since: {report}");
        let results = report["results"].as_array().unwrap();
        assert_eq!(results.len(), 5, "{report}");
        for r in results {
            assert_eq!((r["is_error"].as_bool(), r["text"].as_str()), (Some(false), Some("Ada")), "{mode}: {report}");
        }
        assert!(unexpected_statuses(&report).is_empty(), "{mode}: {report}");
        let resumed = report["resumed_at"].as_u64().unwrap() as usize;
        let after = &report["wire"].as_array().unwrap()[resumed..];
        assert!(!after.is_empty() && after.iter().all(|w| w["url"] == url_b.as_str()), "{mode}: {report}");
        assert!(report["requests"][&url_a].as_u64().unwrap() >= 2, "{mode}: {report}");
    }
    // p1 was made on a replica now stopped; sent again to the other it does not run again.
    assert_eq!(exec.calls(), 4 + 4, "p3 and p4 of each client ran, p1 again did not");
}

#[tokio::test]
async fn a_session_and_a_stateless_run_continue_when_the_replica_that_served_them_first_stops_on_sqlite() {
    if !python_mcp() {
        return;
    }
    let dir = TempDir::new("mcp-py-replicas");
    clients_continuing_after_a_replica_stops(&sqlite_store(&dir)).await;
}

#[tokio::test]
async fn a_session_and_a_stateless_run_continue_when_the_replica_that_served_them_first_stops_on_postgres() {
    if !python_mcp() {
        return;
    }
    let Some(db) = common::pg::TestDb::create().await else { return };
    clients_continuing_after_a_replica_stops(&db.url).await;
}

async fn approvals_through_mrtr_across_replicas(store: &str) {
    let exec = spawn_executor(Behaviour::Echo).await;
    let (a, b) = two_replicas(store).await;
    a.create("crm", crm_with_refund(&exec.endpoint())).await;
    let urls = [endpoint(&a, "crm"), endpoint(&b, "crm")];
    let refund = |order: &str, id: &str| json!({"name": "call_tool", "arguments": {"group": "ops", "tool": "refund", "arguments": {"order": order}}, "tool_call_id": id});
    let call_rounds =
        |report: &Value| -> Vec<Value> { report["wire"].as_array().unwrap().iter().filter(|w| w["rpc"] == "tools/call").cloned().collect() };

    // Approved: the question comes from one replica (B: the listing went to A), the answer
    // goes to the other. The same call sent again in its run is not asked or run again.
    let calls = json!([refund("o-7", "r1"), refund("o-7", "r1")]);
    let report = python_replicas(json!({"urls": urls, "mode": "2026-07-28", "run_id": "py-approve-1", "calls": calls, "approve": true})).await;
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(message.contains("ops__refund") && message.contains("o-7"), "{report}");
    assert_eq!(asked[0]["schema"]["properties"]["approve"]["type"], "boolean", "{report}");
    for result in report["results"].as_array().unwrap() {
        assert_eq!(result["is_error"], false, "{report}");
        assert_eq!(result["structured"]["tool"], "refund", "the approved call ran and its result came back: {report}");
    }
    let rounds = call_rounds(&report);
    assert_eq!(rounds.len(), 3, "{report}");
    assert_eq!((rounds[0]["resultType"].as_str(), rounds[1]["resultType"].as_str()), (Some("input_required"), Some("complete")), "{report}");
    assert_eq!((rounds[0]["url"].as_str(), rounds[1]["url"].as_str()), (Some(urls[1].as_str()), Some(urls[0].as_str())), "{report}");
    assert!(unexpected_statuses(&report).is_empty(), "{report}");
    assert_eq!(exec.calls(), 1, "{report}");

    // Declined: the call is denied and does not run.
    let report =
        python_replicas(json!({"urls": urls, "mode": "2026-07-28", "run_id": "py-approve-2", "calls": [refund("o-8", "r2")], "approve": false}))
            .await;
    assert_eq!(report["asked"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["results"][0]["is_error"], true, "{report}");
    assert_eq!(report["results"][0]["structured"]["error"], "denied", "{report}");
    assert!(unexpected_statuses(&report).is_empty(), "{report}");
    assert_eq!(exec.calls(), 1, "a declined call does not run");

    // The replica that asked (B) stops while the person decides; the answer goes to A.
    let config = json!({"urls": urls, "mode": "2026-07-28", "run_id": "py-approve-3", "calls": [refund("o-9", "r3")], "approve": true, "pause_in_question": true});
    let mut client = PausingClient::start(&config);
    client.paused().await;
    let TestServer { server, .. } = b;
    server.shutdown().await;
    let report = client.resume(std::slice::from_ref(&urls[0])).await;
    let rounds = call_rounds(&report);
    assert_eq!((rounds[0]["url"].as_str(), rounds[1]["url"].as_str()), (Some(urls[1].as_str()), Some(urls[0].as_str())), "{report}");
    assert_eq!(report["results"][0]["structured"]["echo"]["order"], "o-9", "{report}");
    assert!(unexpected_statuses(&report).is_empty(), "{report}");
    assert_eq!(exec.calls(), 2, "{report}");
}

#[tokio::test]
async fn a_2026_client_approves_and_declines_gated_calls_through_mrtr_across_two_replicas_on_sqlite() {
    if !python_mcp() {
        return;
    }
    let dir = TempDir::new("mcp-py-replicas");
    approvals_through_mrtr_across_replicas(&sqlite_store(&dir)).await;
}

#[tokio::test]
async fn a_2026_client_approves_and_declines_gated_calls_through_mrtr_across_two_replicas_on_postgres() {
    if !python_mcp() {
        return;
    }
    let Some(db) = common::pg::TestDb::create().await else { return };
    approvals_through_mrtr_across_replicas(&db.url).await;
}
