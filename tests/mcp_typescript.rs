//! MCP against the official TypeScript SDK (npm `@modelcontextprotocol/client` and
//! `@modelcontextprotocol/server` 2.x, pinned in tests/mcp/ts/package.json and installed by
//! `.ci/run` with `npm ci --prefix tests/mcp/ts`): its client drives the endpoint in both
//! protocol eras (2026-07-28 stateless, 2025-11-25 with a session), approves a gated call by
//! a multi round-trip request, and its server is a tool source. Without the packages (or
//! node) these tests print a skip line and pass.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::{Value, json};
use toolrouter::pb;

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";

fn ts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/ts")
}

/// Whether the SDK is installed and node imports it; else prints why these tests skip.
fn ts_sdk() -> bool {
    if !ts_dir().join("node_modules").is_dir() {
        println!("SKIP: tests/mcp/ts/node_modules is missing; run `npm ci --prefix tests/mcp/ts`");
        return false;
    }
    let imports = "await import('@modelcontextprotocol/client'); await import('@modelcontextprotocol/server');";
    let ok = Command::new("node")
        .args(["--input-type=module", "-e", imports])
        .current_dir(ts_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("SKIP: node cannot import the MCP TypeScript SDK; run `npm ci --prefix tests/mcp/ts` (node >= 20)");
    }
    ok
}

/// Runs `node` in tests/mcp/ts off the test's runtime, so the in-process servers keep serving it.
async fn node(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || Command::new("node").args(&args).current_dir(ts_dir()).stdin(Stdio::null()).output())
        .await
        .expect("the node task")
        .expect("node runs")
}

fn endpoint(s: &TestServer, agent: &str) -> String {
    format!("http://{}/mcp/agents/{agent}", s.server.http_addr)
}

/// Runs tests/mcp/ts/client.mjs against the endpoint of `agent` in `mode` (`modern`: pinned
/// to 2026-07-28; `legacy`: 2025-11-25; `auto`), answering questions with `answer` if given;
/// the report it prints.
async fn ts_client(s: &TestServer, agent: &str, mode: &str, calls: Value, answer: Option<Value>) -> Value {
    let mut args = vec!["client.mjs".to_string(), endpoint(s, agent), mode.to_string(), calls.to_string()];
    args.extend(answer.map(|a| a.to_string()));
    let out = node(args).await;
    assert!(out.status.success(), "client.mjs {mode} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("client.mjs prints JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The client's HTTP exchanges: none carried a session, none was given one, none refused.
fn assert_stateless(report: &Value) {
    for r in report["wire"].as_array().unwrap() {
        assert!(r["session"].is_null() && r["session_returned"].is_null(), "a session in a 2026-07-28 exchange: {r}\n{report}");
        assert_eq!(r["protocol_version"], MODERN, "{r}");
        assert_eq!(r["status"], 200, "{r}\n{report}");
    }
}

/// `(name, input schema)` of the listed tools.
fn listed(report: &Value) -> Vec<(String, Value)> {
    report["tools"].as_array().unwrap().iter().map(|t| (t["name"].as_str().unwrap().to_string(), t["input_schema"].clone())).collect()
}

async fn model_tools(s: &TestServer, agent: &str) -> Vec<(String, Value)> {
    let tools = s.model_tools(agent, run_ctx("")).await.tools;
    tools.into_iter().map(|t| (t.name, serde_json::from_str(&t.input_schema_json).unwrap())).collect()
}

fn call_tool(group: &str, tool: &str, arguments: Value) -> Value {
    json!({"name": "call_tool", "arguments": {"group": group, "tool": tool, "arguments": arguments}})
}

/// The same call, named: `_meta` carries the run (if any) and the tool call id.
fn named(mut call: Value, run: Option<&str>, id: &str) -> Value {
    let mut meta = json!({"io.toolrouter/tool_call_id": id});
    if let Some(run) = run {
        meta["io.toolrouter/run_id"] = json!(run);
    }
    call["_meta"] = meta;
    call
}

#[tokio::test]
async fn the_typescript_client_lists_and_calls_through_the_endpoint_in_both_protocol_versions() {
    if !ts_sdk() {
        return;
    }
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_definition(&exec.endpoint())).await;
    let expected = model_tools(&s, "crm").await;
    let ada = call_tool("crm", "customer_name", json!({"customer_id": 42}));

    // 2026-07-28: server/discover, then each request stands alone; `_meta` names the run and
    // the call, so the repeated call is answered from the run's record without running again.
    let calls = json!([
        {"name": "discover_tools", "arguments": {"query": "customer name", "group": "crm"}},
        named(ada.clone(), Some("ts-run"), "ts-call-1"),
        named(call_tool("crm", "customer_name", json!({"customer_id": "x"})), Some("ts-run"), "ts-call-2"),
        named(ada.clone(), Some("ts-run"), "ts-call-1"),
    ]);
    let report = ts_client(&s, "crm", "modern", calls, None).await;
    assert_eq!((report["protocol_version"].as_str(), report["era"].as_str()), (Some(MODERN), Some("modern")), "{report}");
    assert!(report["session"].is_null(), "{report}");
    assert_eq!(report["wire"][0]["method"], "server/discover", "{report}");
    assert_stateless(&report);
    assert_eq!(report["server"]["name"], "toolrouter", "{report}");
    let versions = report["discover"]["supportedVersions"].as_array().unwrap_or_else(|| panic!("a discover result: {report}"));
    assert!(versions.contains(&json!(MODERN)), "{report}");
    // The stateless handshake carries the definition's instructions, as `initialize` does.
    assert_eq!(report["discover"]["instructions"].as_str().map(|i| i.contains("discover_tools")), Some(true), "{report}");
    assert_eq!(listed(&report), expected, "tools/list is GetModelTools");
    let results = report["results"].as_array().unwrap();
    let found: Value = serde_json::from_str(results[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(found["tools"][0]["name"], "crm__customer_name", "{found}");
    assert_eq!((results[1]["is_error"].as_bool(), results[1]["text"].as_str()), (Some(false), Some("Ada")), "{report}");
    assert_eq!(results[2]["is_error"], true, "{report}");
    assert_eq!(results[3], results[1], "the same call id in the same run: the same answer");
    assert_eq!(exec.calls(), 1, "the invalid call was not sent, the repeated one not run again");
    // The run `_meta` named is a run of the store: the gRPC retry of that call is the same call.
    let (again, is_error) = s.call_result("crm", "ts-run", "ts-call-1", "call_tool", ada["arguments"].clone()).await;
    assert_eq!((again, is_error), (json!("Ada"), false));
    assert_eq!(exec.calls(), 1, "a call is executed once per run, whichever way it comes");

    // 2025-11-25: initialize opens a session (a run); the client ends it with DELETE.
    let calls = json!([
        {"name": "discover_tools", "arguments": {"query": "customer name", "group": "crm"}},
        named(ada.clone(), None, "ts-call-1"),
        named(ada.clone(), None, "ts-call-1"),
    ]);
    let report = ts_client(&s, "crm", "legacy", calls, None).await;
    assert_eq!((report["protocol_version"].as_str(), report["era"].as_str()), (Some(LEGACY), Some("legacy")), "{report}");
    let session = report["session"].as_str().unwrap_or_else(|| panic!("a session: {report}"));
    let wire = report["wire"].as_array().unwrap();
    assert_eq!((wire[0]["method"].as_str(), wire[0]["session_returned"].as_str()), (Some("initialize"), Some(session)), "{report}");
    for r in wire.iter().filter(|r| r["method"] == "tools/call" || r["method"] == "tools/list") {
        assert_eq!((r["session"].as_str(), r["protocol_version"].as_str(), r["status"].as_u64()), (Some(session), Some(LEGACY), Some(200)), "{r}");
    }
    let deleted = wire.iter().find(|r| r["http"] == "DELETE").unwrap_or_else(|| panic!("the session was ended: {report}"));
    assert_eq!(deleted["status"], 204, "{report}");
    assert_eq!(report["instructions"].as_str().map(|i| i.contains("discover_tools")), Some(true), "{report}");
    assert_eq!(listed(&report), expected, "tools/list is GetModelTools");
    let results = report["results"].as_array().unwrap();
    assert_eq!((results[1]["is_error"].as_bool(), results[1]["text"].as_str()), (Some(false), Some("Ada")), "{report}");
    assert_eq!(results[2], results[1]);
    assert_eq!(exec.calls(), 2, "a session is another run: its call ran once");

    // Negotiating (server/discover first, initialize on refusal), the client settles on 2026-07-28.
    let report = ts_client(&s, "crm", "auto", json!([ada]), None).await;
    assert_eq!((report["protocol_version"].as_str(), report["era"].as_str()), (Some(MODERN), Some("modern")), "{report}");
    assert_stateless(&report);
    assert_eq!(report["results"][0]["text"], "Ada", "{report}");
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

fn assert_asked_once(report: &Value) {
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(message.contains("ops__refund") && message.contains("o-7"), "{report}");
    assert_eq!(asked[0]["schema"]["properties"]["approve"]["type"], "boolean", "{report}");
    assert_eq!(asked[0]["schema"]["required"], json!(["approve"]), "{report}");
}

#[tokio::test]
async fn the_typescript_client_approves_a_gated_call_by_a_multi_round_trip_request() {
    if !ts_sdk() {
        return;
    }
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", crm_with_refund(&exec.endpoint())).await;
    let refund = call_tool("ops", "refund", json!({"order": "o-7"}));
    let approve = json!({"action": "accept", "content": {"approve": true}});

    // 2026-07-28 with form elicitation: the call answers `input_required` (the question), the
    // SDK asks its handler and retries with the answer, the retry runs the call.
    let report = ts_client(&s, "crm", "modern", json!([named(refund.clone(), Some("ts-approvals"), "refund-1")]), Some(approve.clone())).await;
    assert_eq!(report["protocol_version"], MODERN, "{report}");
    assert_stateless(&report);
    assert_asked_once(&report);
    let rounds = report["wire"].as_array().unwrap().iter().filter(|r| r["method"] == "tools/call").count();
    assert_eq!(rounds, 2, "the call, then its retry with the answer: {report}");
    let result = &report["results"][0];
    assert_eq!(result["is_error"], false, "{report}");
    assert_eq!(result["structured"]["tool"], "refund", "the approved call ran and its result came back: {report}");
    assert_eq!(result["structured"]["echo"], json!({"order": "o-7"}), "{report}");
    assert_eq!(exec.calls(), 1);

    // The same call again (same run, same call id): its result, no second question, no second run.
    let again = ts_client(&s, "crm", "modern", json!([named(refund.clone(), Some("ts-approvals"), "refund-1")]), Some(approve.clone())).await;
    assert_eq!(again["asked"], json!([]), "{again}");
    assert_eq!(again["results"][0]["structured"], result["structured"], "{again}");
    assert_eq!(exec.calls(), 1, "an approved call runs once");

    // Declined: denied, not run.
    let declined =
        ts_client(&s, "crm", "modern", json!([named(refund.clone(), Some("ts-approvals"), "refund-2")]), Some(json!({"action": "decline"}))).await;
    assert_eq!(declined["asked"].as_array().map(Vec::len), Some(1), "{declined}");
    assert_eq!(
        (declined["results"][0]["is_error"].as_bool(), declined["results"][0]["structured"]["error"].as_str()),
        (Some(true), Some("denied")),
        "{declined}"
    );
    assert_eq!(exec.calls(), 1, "a declined call does not run");

    // Without form elicitation: the pending answer, saying how the host resolves it.
    let pending = ts_client(&s, "crm", "modern", json!([named(refund.clone(), Some("ts-approvals"), "refund-3")]), None).await;
    let r = &pending["results"][0];
    assert_eq!((r["is_error"].as_bool(), r["structured"]["status"].as_str()), (Some(false), Some("approval_pending")), "{pending}");
    assert!(r["structured"]["message"].as_str().unwrap().contains("ResolveDeferred"), "{pending}");
    assert_eq!(pending["wire"].as_array().unwrap().iter().filter(|r| r["method"] == "tools/call").count(), 1, "{pending}");
    assert_eq!(exec.calls(), 1);

    // 2025-11-25 in a session: the question comes as an elicitation/create request in the call's
    // event stream, the same handler answers it.
    let report = ts_client(&s, "crm", "legacy", json!([refund]), Some(approve)).await;
    assert_eq!(report["protocol_version"], LEGACY, "{report}");
    assert_asked_once(&report);
    assert_eq!(report["results"][0]["structured"]["tool"], "refund", "{report}");
    assert_eq!(exec.calls(), 2, "approved in the session: run once");
}

/// tests/mcp/ts/server.mjs, stopped when dropped; what it logged (one line per request).
struct TsServer {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl TsServer {
    /// `era`: `both`, `modern` (2025-era requests refused) or `legacy` (2026-07-28 refused).
    fn start(era: &str) -> Self {
        let mut child = Command::new("node")
            .args(["server.mjs", "--era", era, "--log"])
            .current_dir(ts_dir())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the server prints its port");
        let port = line.trim().strip_prefix("PORT ").and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stderr, lines) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        Self { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for TsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn from(binding: &str) -> pb::HeaderBinding {
    pb::HeaderBinding { value: Some(pb::header_binding::Value::From(binding.into())), prefix: String::new() }
}

/// An agent whose group `calc` is the TypeScript server (`era`), with the run's id and user as
/// headers; calls `add` once and `whoami` twice in run-a (ada) and once in run-b (bob), through
/// `call_tool`. The `whoami` reports: a1, a2, b1.
async fn whoami_through_a_ts_source(era: &str) -> (TsServer, [Value; 3]) {
    let ts = TsServer::start(era);
    let s = TestServer::start().await;
    let source = pb::ToolSource {
        id: "ts".into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource {
            url: ts.url(),
            headers: [("X-Run".to_string(), from("context.run_id")), ("X-User".to_string(), from("identity.user_id"))].into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    let def = pb::AgentDefinition {
        groups: [("calc".to_string(), group("Arithmetic and identity", &["ts"]))].into(),
        sources: vec![source],
        ..Default::default()
    };
    s.create("ts-agent", def).await;

    let ada = || run_as("run-a", Some("ada"), pb::Caller::Model);
    let tools = s.model_tools("ts-agent", ada()).await;
    assert!(tools.diagnostics.is_empty(), "{:?}\nserver.mjs --era {era}:\n{}", tools.diagnostics, ts.log());
    let outcome = s.handle_raw("ts-agent", ada(), "d1", "discover_tools", &json!({"query": "add integers"}).to_string()).await.unwrap();
    let (found, _) = result_of(&outcome);
    assert_eq!(found["tools"][0]["name"], "calc__add", "{found}");

    let call = |run: &'static str, user: &'static str, id: &'static str, tool: &'static str, args: Value| {
        let (s, ts) = (&s, &ts);
        async move {
            let arguments = json!({"group": "calc", "tool": tool, "arguments": args}).to_string();
            let outcome = s.handle_raw("ts-agent", run_as(run, Some(user), pb::Caller::Model), id, "call_tool", &arguments).await.expect("handled");
            let (content, is_error) = result_of(&outcome);
            assert!(!is_error, "{content}\nserver.mjs --era {era}:\n{}", ts.log());
            content
        }
    };
    assert_eq!(call("run-a", "ada", "c1", "add", json!({"a": 2, "b": 3})).await, json!({"result": 5}));
    let a1 = call("run-a", "ada", "c2", "whoami", json!({"note": "first"})).await;
    let a2 = call("run-a", "ada", "c3", "whoami", json!({"note": "second"})).await;
    let b1 = call("run-b", "bob", "c4", "whoami", json!({"note": "other run"})).await;
    for (w, run, user) in [(&a1, "run-a", "ada"), (&a2, "run-a", "ada"), (&b1, "run-b", "bob")] {
        assert_eq!((w["run"].as_str(), w["user"].as_str()), (Some(run), Some(user)), "the run's headers on every call: {w}");
    }

    // Validation happens before the TypeScript server sees anything.
    let bad = json!({"group": "calc", "tool": "add", "arguments": {"a": "two"}}).to_string();
    let (r, is_error) = result_of(&s.handle_raw("ts-agent", ada(), "c5", "call_tool", &bad).await.unwrap());
    assert!(is_error && r["error"] == "invalid_arguments", "{r}");
    (ts, [a1, a2, b1])
}

/// Against a server of 2026-07-28: no session, the run's headers on every request.
fn assert_called_statelessly(ts: &TsServer, reports: &[Value]) {
    for w in reports {
        assert_eq!(
            (w["session"].as_str(), w["protocol_version"].as_str(), w["era"].as_str()),
            (None, Some(MODERN), Some("modern")),
            "a 2026-07-28 server is called without a session: {w}\nserver.mjs:\n{}",
            ts.log()
        );
    }
}

#[tokio::test]
async fn a_typescript_mcp_server_of_2026_07_28_is_a_source_called_without_sessions() {
    if !ts_sdk() {
        return;
    }
    let (ts, reports) = whoami_through_a_ts_source("modern").await;
    assert_called_statelessly(&ts, &reports);
    assert!(!ts.log().contains("initialize"), "no handshake with a 2026-07-28 server:\n{}", ts.log());
}

#[tokio::test]
async fn a_typescript_mcp_server_of_both_eras_is_called_in_2026_07_28() {
    if !ts_sdk() {
        return;
    }
    let (ts, reports) = whoami_through_a_ts_source("both").await;
    assert_called_statelessly(&ts, &reports);
}

#[tokio::test]
async fn a_typescript_mcp_server_of_2025_11_25_only_is_a_source_with_a_session_per_run() {
    if !ts_sdk() {
        return;
    }
    let (ts, [a1, a2, b1]) = whoami_through_a_ts_source("legacy").await;
    let log = ts.log();
    for w in [&a1, &a2, &b1] {
        assert_eq!((w["protocol_version"].as_str(), w["era"].as_str()), (Some(LEGACY), Some("legacy")), "{w}\nserver.mjs:\n{log}");
    }
    assert!(a1["session"].is_string(), "{a1}\nserver.mjs:\n{log}");
    assert_eq!(a1["session"], a2["session"], "one session for the run");
    assert_ne!(a1["session"], b1["session"], "another run, another session");
}
