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
async fn a_python_mcp_server_is_a_source_with_a_session_per_run() {
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
    assert!(a1["session"].is_string());
    assert_eq!(a1["session"], a2["session"], "one session for the run");
    assert_ne!(a1["session"], b1["session"], "another run, another session");

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
