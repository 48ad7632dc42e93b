//! The MCP endpoint for stateless clients of protocol 2026-07-28 ("MCP on any replica"):
//! no `initialize`, no session; every request carries its envelope in `_meta` and names its
//! run (`io.toolrouter/run_id` or `Toolrouter-Run-Id`) and call (`io.toolrouter/tool_call_id`)
//! itself. Runs pin versions and calls run once as on gRPC; approvals come as multi
//! round-trip requests, deferred calls as tasks (SEP-2663); `tools/list` carries true cache
//! hints. Spoken on the raw wire with reqwest, against the real server in-process.

mod common;

#[path = "mcp/support.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use serde_json::{Value, json};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::pb::resolve_deferred_request::Resolution;

const VERSION: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";
const DAY_MS: u64 = 86_400_000;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A client that declared nothing.
fn plain() -> Value {
    json!({})
}

/// A client that declared form elicitation.
fn form() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// A client that declared the tasks extension (and form elicitation if `elicits`).
fn tasks(elicits: bool) -> Value {
    let mut caps = json!({"extensions": {TASKS: {}}});
    if elicits {
        caps["elicitation"] = json!({});
    }
    caps
}

/// A 2026-07-28 request: `params` with the envelope (and `meta`'s entries) in `_meta`.
fn rpc(method: &str, mut params: Value, caps: &Value, meta: Value) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-test", "version": "1"},
    });
    if let Value::Object(extra) = meta {
        m.as_object_mut().unwrap().extend(extra);
    }
    params["_meta"] = m;
    json!({"jsonrpc": "2.0", "id": NEXT_ID.fetch_add(1, Ordering::Relaxed), "method": method, "params": params})
}

/// POSTs a request with the headers its body implies (SEP-2243) plus `extra`: (status, body).
async fn send(url: &str, body: &Value, extra: &[(&str, &str)]) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-method", body["method"].as_str().unwrap());
    if let Some(v) = body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str() {
        req = req.header("mcp-protocol-version", v);
    }
    if let Some(name) = body["params"]["name"].as_str().or(body["params"]["taskId"].as_str()) {
        req = req.header("mcp-name", name);
    }
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let r = req.body(body.to_string()).send().await.expect("POST");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A `tools/call` request.
fn call_request(tool: &str, args: Value, caps: &Value, meta: Value) -> Value {
    rpc("tools/call", json!({"name": tool, "arguments": args}), caps, meta)
}

/// `tools/call`; the JSON-RPC answer.
async fn call(url: &str, tool: &str, args: Value, caps: &Value, meta: Value) -> Value {
    send(url, &call_request(tool, args, caps, meta), &[]).await.1
}

/// The result of an answer, failing the test on an error.
fn result(answer: &Value) -> &Value {
    assert!(answer.get("error").is_none() && answer["result"].is_object(), "expected a result: {answer}");
    &answer["result"]
}

/// A `CallToolResult`'s text as JSON (or the text itself), and `isError`.
fn tool_result(result: &Value) -> (Value, bool) {
    assert_eq!(result["resultType"], "complete", "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("text content: {result}")).to_string();
    (serde_json::from_str(&text).unwrap_or(Value::String(text)), result["isError"] == true)
}

/// The answer is the JSON-RPC error -32602 (invalid params) whose message names `field`.
fn assert_invalid(answer: &Value, field: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(field), "the error names {field:?}: {answer}");
}

fn meta_run(run: &str) -> Value {
    json!({"io.toolrouter/run_id": run})
}

fn meta_call(run: &str, call_id: &str) -> Value {
    json!({"io.toolrouter/run_id": run, "io.toolrouter/tool_call_id": call_id})
}

fn endpoint(s: &TestServer, path: &str) -> String {
    format!("http://{}{path}", s.server.http_addr)
}

/// The CRM definition plus an approval-gated `refund` (group billing) and a direct client
/// tool `show_banner`.
fn definition(endpoint: &str) -> pb::AgentDefinition {
    let mut def = crm_definition(endpoint);
    let mut refund =
        tool("refund", "Refund a payment.", json!({"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}));
    refund.requires_approval = true;
    def.sources.push(function_source("billing-tools", endpoint, vec![refund]));
    def.groups.insert("billing".into(), group("Payments and refunds", &["billing-tools"]));
    def.sources.push(client_source("ui", vec![tool("show_banner", "Show a banner to the user.", json!({"type": "object"}))]));
    def
}

fn customer_42() -> Value {
    json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})
}

fn refund(amount: i64) -> Value {
    json!({"group": "billing", "tool": "refund", "arguments": {"amount": amount}})
}

/// The answer to an approval question, as `inputResponses`.
fn answer(action: &str, approve: Option<bool>) -> Value {
    match approve {
        Some(a) => json!({"approval": {"action": action, "content": {"approve": a}}}),
        None => json!({"approval": {"action": action}}),
    }
}

/// The retry of an approval-gated `tools/call` with the answer and the echoed state.
fn retry_request(tool: &str, args: Value, caps: &Value, responses: Value, state: &str) -> Value {
    rpc("tools/call", json!({"name": tool, "arguments": args, "inputResponses": responses, "requestState": state}), caps, json!({}))
}

/// Asks for an approval-gated refund and returns the `requestState` of its question.
async fn ask(url: &str, amount: i64) -> String {
    let asked = call(url, "call_tool", refund(amount), &form(), json!({})).await;
    let r = result(&asked);
    assert_eq!(r["resultType"], "input_required", "{asked}");
    r["requestState"].as_str().expect("a request state").to_string()
}

/// The deferred id a `requestState` names.
fn deferred_id(state: &str) -> &str {
    state.strip_prefix("toolrouter-approval-").expect("the state names the record")
}

async fn deferred_records(s: &TestServer, agent: &str) -> Vec<pb::DeferredRecord> {
    let req = pb::ListDeferredRequest { agent_id: agent.into(), ..Default::default() };
    s.router().list_deferred(req).await.expect("ListDeferred").into_inner().records
}

async fn deferred_record(s: &TestServer, agent: &str, id: &str) -> pb::DeferredRecord {
    deferred_records(s, agent).await.into_iter().find(|r| r.call.as_ref().unwrap().deferred_id == id).expect("the record is listed")
}

/// Two replicas on one SQLite store; the directory lives as long as the returned guard.
async fn replicas() -> (TestServer, TestServer, TempDir) {
    let dir = TempDir::new("mcp-stateless");
    let store = format!("sqlite://{}", dir.0.join("store.db").display());
    let config = || {
        let mut cfg = ServerConfig::for_tests();
        cfg.store = store.clone();
        cfg
    };
    let a = TestServer::start_with(config()).await;
    let b = TestServer::start_with(config()).await;
    (a, b, dir)
}

// ----- runs and versions -----

#[tokio::test]
async fn a_stateless_run_id_pins_the_runs_version_across_a_promotion_in_meta_or_header() {
    let (old, new) = (spawn_executor(Behaviour::Echo).await, spawn_executor(Behaviour::Echo).await);
    let s = TestServer::start().await;
    s.create("crm", definition(&old.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    // Two runs start on version 1: one named in `_meta`, one by the header.
    let (_, by_header) = send(&url, &call_request("call_tool", customer_42(), &plain(), json!({})), &[("toolrouter-run-id", "r-header")]).await;
    assert_eq!(tool_result(result(&by_header)).0, "Ada");
    let by_meta = call(&url, "call_tool", customer_42(), &plain(), meta_run("r-meta")).await;
    assert_eq!(tool_result(result(&by_meta)).0, "Ada");
    assert_eq!(old.calls(), 2);

    // Version 2 (another executor, no client tool) becomes the default.
    s.create("crm", crm_definition(&new.endpoint())).await;

    // Both runs stay on version 1: its executor, its tools.
    let again = call(&url, "call_tool", customer_42(), &plain(), meta_run("r-meta")).await;
    assert_eq!(tool_result(result(&again)).0, "Ada");
    let (_, again) = send(&url, &call_request("call_tool", customer_42(), &plain(), json!({})), &[("toolrouter-run-id", "r-header")]).await;
    assert_eq!(tool_result(result(&again)).0, "Ada");
    assert_eq!((old.calls(), new.calls()), (4, 0), "the pinned runs keep version 1's executor");
    let banner = call(&url, "show_banner", json!({}), &plain(), meta_run("r-meta")).await;
    assert_eq!(tool_result(result(&banner)).0["status"], "client_execution_pending", "version 1's client tool: {banner}");
    let (_, listed) = send(&url, &rpc("tools/list", json!({}), &plain(), json!({})), &[("toolrouter-run-id", "r-header")]).await;
    let names: Vec<&str> = result(&listed)["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"show_banner"), "the header's run lists version 1: {names:?}");

    // A request without a run id is its own run, on the new default.
    let fresh = call(&url, "call_tool", customer_42(), &plain(), json!({})).await;
    assert_eq!(tool_result(result(&fresh)).0, "Ada");
    assert_eq!((old.calls(), new.calls()), (4, 1), "a request without a run id sees version 2");
    let listed = send(&url, &rpc("tools/list", json!({}), &plain(), json!({})), &[]).await.1;
    let names: Vec<&str> = result(&listed)["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(!names.contains(&"show_banner"), "version 2 has no client tool: {names:?}");
    // A new run named now starts on version 2.
    let later = call(&url, "call_tool", customer_42(), &plain(), meta_run("r-later")).await;
    assert_eq!(tool_result(result(&later)).0, "Ada");
    assert_eq!(new.calls(), 2);
}

#[tokio::test]
async fn the_same_tool_call_id_in_the_same_run_executes_once_on_any_replica_and_answers_the_same() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let (a, b, _dir) = replicas().await;
    a.create("crm", definition(&exec.endpoint())).await;
    let (url_a, url_b) = (endpoint(&a, "/mcp/agents/crm"), endpoint(&b, "/mcp/agents/crm"));
    let args = json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 7}});

    let first = call(&url_a, "call_tool", args.clone(), &plain(), meta_call("run-1", "call-1")).await;
    let again = call(&url_a, "call_tool", args.clone(), &plain(), meta_call("run-1", "call-1")).await;
    let elsewhere = call(&url_b, "call_tool", args.clone(), &plain(), meta_call("run-1", "call-1")).await;
    assert_eq!(exec.calls(), 1, "one execution for one call id in one run");
    assert_eq!(tool_result(result(&first)), (json!("Unknown"), false));
    assert_eq!(result(&again), result(&first), "the retry gets the same result");
    assert_eq!(result(&elsewhere), result(&first), "the other replica answers the same result");
    // The run id may come by header as well: the same run, the same call.
    let (_, by_header) = send(
        &url_b,
        &call_request("call_tool", args.clone(), &plain(), json!({"io.toolrouter/tool_call_id": "call-1"})),
        &[("toolrouter-run-id", "run-1")],
    )
    .await;
    assert_eq!(result(&by_header), result(&first));
    assert_eq!(exec.calls(), 1);

    // The same call id in another run is another call.
    call(&url_b, "call_tool", args.clone(), &plain(), meta_call("run-2", "call-1")).await;
    assert_eq!(exec.calls(), 2);

    // Without a call id there is no retry protection: twice is twice.
    for url in [&url_a, &url_b] {
        let r = call(url, "call_tool", args.clone(), &plain(), meta_run("run-1")).await;
        assert_eq!(tool_result(result(&r)).0, "Unknown");
    }
    assert_eq!(exec.calls(), 4);
}

#[tokio::test]
async fn malformed_run_and_call_ids_are_clear_invalid_params_errors_and_nothing_runs() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let long = "r".repeat(257);

    let too_long = call(&url, "call_tool", customer_42(), &plain(), meta_run(&long)).await;
    assert_invalid(&too_long, "_meta.io.toolrouter/run_id");
    assert!(too_long["error"]["message"].as_str().unwrap().contains("256 bytes"), "{too_long}");
    let not_a_string = call(&url, "call_tool", customer_42(), &plain(), json!({"io.toolrouter/run_id": 17})).await;
    assert_invalid(&not_a_string, "_meta.io.toolrouter/run_id");
    let call_id_not_a_string = call(&url, "call_tool", customer_42(), &plain(), json!({"io.toolrouter/tool_call_id": ["c"]})).await;
    assert_invalid(&call_id_not_a_string, "_meta.io.toolrouter/tool_call_id");
    let call_id_too_long = call(&url, "call_tool", customer_42(), &plain(), json!({"io.toolrouter/tool_call_id": long})).await;
    assert_invalid(&call_id_too_long, "_meta.io.toolrouter/tool_call_id");
    let (_, header_too_long) = send(&url, &call_request("call_tool", customer_42(), &plain(), json!({})), &[("toolrouter-run-id", &long)]).await;
    assert_invalid(&header_too_long, "Toolrouter-Run-Id");
    let (_, mismatch) = send(&url, &call_request("call_tool", customer_42(), &plain(), meta_run("r1")), &[("toolrouter-run-id", "r2")]).await;
    assert_invalid(&mismatch, "_meta.io.toolrouter/run_id");
    assert!(mismatch["error"]["message"].as_str().unwrap().contains("Toolrouter-Run-Id"), "{mismatch}");
    // A listing is refused alike.
    let listing = send(&url, &rpc("tools/list", json!({}), &plain(), meta_run(&long)), &[]).await.1;
    assert_invalid(&listing, "_meta.io.toolrouter/run_id");

    // A session is its run: a request of the session naming another run is refused.
    let client = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let opened = client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    let session = opened.headers().get("mcp-session-id").expect("a session").to_str().unwrap().to_string();
    let in_session = |meta: Value| {
        let body =
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "call_tool", "arguments": customer_42(), "_meta": meta}});
        let (client, url, session) = (client.clone(), url.clone(), session.clone());
        async move {
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap()
        }
    };
    let other_run = in_session(meta_run("another-run")).await;
    assert_invalid(&other_run, "_meta.io.toolrouter/run_id");
    assert!(other_run["error"]["message"].as_str().unwrap().contains("session"), "{other_run}");
    assert_eq!(exec.calls(), 0, "nothing ran");
    // Naming the session's own run is fine.
    let own_run = in_session(meta_run(&session)).await;
    assert_eq!(own_run["result"]["content"][0]["text"], "Ada", "{own_run}");
    assert_eq!(exec.calls(), 1);
}

// ----- approvals as multi round-trip requests -----

#[tokio::test]
async fn an_approval_is_asked_as_input_required_and_approving_runs_the_call_exactly_once() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");

    let asked = call(&url, "call_tool", refund(5), &form(), meta_call("mrtr-run", "refund-1")).await;
    let r = result(&asked);
    assert_eq!(r["resultType"], "input_required", "{asked}");
    let question = &r["inputRequests"]["approval"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["mode"], "form");
    assert!(question["params"]["message"].as_str().unwrap().contains("billing__refund"), "{asked}");
    assert_eq!(question["params"]["requestedSchema"]["properties"]["approve"]["type"], "boolean", "{asked}");
    let state = r["requestState"].as_str().expect("a request state").to_string();
    let deferred_id = deferred_id(&state).to_string();
    assert!(r.get("ttlMs").is_none(), "no cache hints on input_required: {asked}");
    let record = deferred_record(&s, "crm", &deferred_id).await;
    assert_eq!((record.state, record.run_id.as_str()), (pb::DeferredState::Pending as i32, "mrtr-run"));
    assert_eq!(exec.calls(), 0);
    // The call sent again under its id: the same question, no second record.
    let again = call(&url, "call_tool", refund(5), &form(), meta_call("mrtr-run", "refund-1")).await;
    assert_eq!(result(&again), r, "{again}");

    // The retry with the answer runs the call and answers its result.
    let retry = retry_request("call_tool", refund(5), &form(), answer("accept", Some(true)), &state);
    let (status, done) = send(&url, &retry, &[]).await;
    assert_eq!(status, 200);
    let (content, is_error) = tool_result(result(&done));
    assert!(!is_error, "{done}");
    assert_eq!(content["tool"], "refund", "the approved call ran: {done}");
    assert_eq!(content["echo"], json!({"amount": 5}));
    assert_eq!(exec.calls(), 1);

    // The same retry again (a lost answer, say): the same result, not a second run.
    let replay = send(&url, &retry_request("call_tool", refund(5), &form(), answer("accept", Some(true)), &state), &[]).await.1;
    assert_eq!(result(&replay), result(&done));
    assert_eq!(exec.calls(), 1, "replaying the approved retry does not run it again");
    // The original call sent again under its id: its result.
    let resent = call(&url, "call_tool", refund(5), &form(), meta_call("mrtr-run", "refund-1")).await;
    assert_eq!(result(&resent), result(&done), "{resent}");

    // ListDeferred over gRPC shows it resolved, with that result.
    let record = deferred_record(&s, "crm", &deferred_id).await;
    assert_eq!(record.state, pb::DeferredState::Resolved as i32);
    assert_eq!(record.resolution, "approved");
    let stored: Value = serde_json::from_str(&record.result.expect("a result").content_json).unwrap();
    assert_eq!(stored, content);

    // A denial after the approval changes nothing: the approved call's result stands.
    let late = send(&url, &retry_request("call_tool", refund(5), &form(), answer("decline", None), &state), &[]).await.1;
    assert_eq!(result(&late), result(&done));
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn declining_denies_the_call_and_dismissing_leaves_it_pending() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");

    // Declined, and accepted with approve = false: both deny.
    for (action, approve, message) in [("decline", None, "declined"), ("accept", Some(false), "")] {
        let state = ask(&url, 6).await;
        let denied = send(&url, &retry_request("call_tool", refund(6), &form(), answer(action, approve), &state), &[]).await.1;
        let (content, is_error) = tool_result(result(&denied));
        assert!(is_error && content["error"] == "denied", "{action}: {denied}");
        assert!(content["message"].as_str().unwrap_or_default().contains(message), "{denied}");
        let record = deferred_record(&s, "crm", deferred_id(&state)).await;
        assert_eq!((record.state, record.resolution.as_str()), (pb::DeferredState::Resolved as i32, "denied"));
    }
    assert_eq!(exec.calls(), 0, "denied calls do not run");

    // Dismissed: the pending answer, and the record stays pending for the host.
    let state = ask(&url, 7).await;
    let deferred_id = deferred_id(&state).to_string();
    let dismissed = send(&url, &retry_request("call_tool", refund(7), &form(), answer("cancel", None), &state), &[]).await.1;
    let (pending, is_error) = tool_result(result(&dismissed));
    assert!(!is_error);
    assert_eq!(pending["status"], "approval_pending", "{dismissed}");
    assert_eq!(pending["deferred_id"], deferred_id.as_str());
    assert_eq!(deferred_record(&s, "crm", &deferred_id).await.state, pb::DeferredState::Pending as i32);
    // No answer at all is a dismissal too.
    let empty = send(&url, &retry_request("call_tool", refund(7), &form(), json!({}), &state), &[]).await.1;
    assert_eq!(tool_result(result(&empty)).0["status"], "approval_pending", "{empty}");
    // The host can still approve it.
    s.resolve(&deferred_id, Resolution::Approve(pb::Approve::default())).await.expect("the host approves");
    assert_eq!(exec.calls(), 1);
    // The client's late retry then gets the host's result.
    let late = send(&url, &retry_request("call_tool", refund(7), &form(), answer("accept", Some(true)), &state), &[]).await.1;
    assert_eq!(tool_result(result(&late)).0["tool"], "refund", "{late}");
    assert_eq!(exec.calls(), 1);
}

#[tokio::test]
async fn a_forged_or_foreign_request_state_or_a_retry_naming_another_tool_is_refused() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    s.create("other", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let approve = || answer("accept", Some(true));

    for forged in ["toolrouter-approval-0123456789abcdef0123456789abcdef", "toolrouter-approval-", "v1.c2VhbGVk", ""] {
        let refused = send(&url, &retry_request("call_tool", refund(5), &form(), approve(), forged), &[]).await.1;
        assert_invalid(&refused, "requestState");
    }
    // Another agent's question.
    let foreign = ask(&endpoint(&s, "/mcp/agents/other"), 5).await;
    let refused = send(&url, &retry_request("call_tool", refund(5), &form(), approve(), &foreign), &[]).await.1;
    assert_invalid(&refused, "requestState");
    // A client-execution record is no question either.
    let banner = call(&url, "show_banner", json!({}), &form(), json!({})).await;
    let client_id = tool_result(result(&banner)).0["deferred_id"].as_str().unwrap().to_string();
    let refused = send(&url, &retry_request("show_banner", json!({}), &form(), approve(), &format!("toolrouter-approval-{client_id}")), &[]).await.1;
    assert_invalid(&refused, "requestState");
    // The retry of a question naming another tool.
    let state = ask(&url, 5).await;
    let refused = send(&url, &retry_request("discover_tools", json!({"query": "refund"}), &form(), approve(), &state), &[]).await.1;
    assert_invalid(&refused, "name");
    // Through `call_tool`: the same tool name, but another target, or other arguments.
    let refused = send(&url, &retry_request("call_tool", customer_42(), &form(), approve(), &state), &[]).await.1;
    assert_invalid(&refused, "arguments");
    let refused = send(&url, &retry_request("call_tool", refund(500), &form(), approve(), &state), &[]).await.1;
    assert_invalid(&refused, "arguments");
    assert_eq!(exec.calls(), 0, "nothing ran");
    for (agent, state) in [("other", &foreign), ("crm", &state)] {
        let record = deferred_record(&s, agent, deferred_id(state)).await;
        assert_eq!(record.state, pb::DeferredState::Pending as i32, "still pending");
    }
}

#[tokio::test]
async fn the_approved_retry_may_land_on_another_replica() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let (a, b, _dir) = replicas().await;
    a.create("crm", definition(&exec.endpoint())).await;
    let (url_a, url_b) = (endpoint(&a, "/mcp/agents/crm"), endpoint(&b, "/mcp/agents/crm"));

    let state = ask(&url_a, 9).await;
    let done = send(&url_b, &retry_request("call_tool", refund(9), &form(), answer("accept", Some(true)), &state), &[]).await.1;
    let (content, is_error) = tool_result(result(&done));
    assert!(!is_error && content["tool"] == "refund", "{done}");
    // And the replay back on the first replica.
    let replay = send(&url_a, &retry_request("call_tool", refund(9), &form(), answer("accept", Some(true)), &state), &[]).await.1;
    assert_eq!(result(&replay), result(&done));
    assert_eq!(exec.calls(), 1);
    let record = deferred_record(&a, "crm", deferred_id(&state)).await;
    assert_eq!((record.state, record.resolution.as_str()), (pb::DeferredState::Resolved as i32, "approved"));
}

#[tokio::test]
async fn clients_without_form_elicitation_get_the_pending_answer() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    for caps in [plain(), json!({"elicitation": {"url": {}}}), json!({"sampling": {}})] {
        let answered = call(&url, "call_tool", refund(3), &caps, json!({})).await;
        let (pending, is_error) = tool_result(result(&answered));
        assert!(!is_error);
        assert_eq!(pending["status"], "approval_pending", "{caps}: {answered}");
        assert!(pending["deferred_id"].is_string());
    }
    // An empty elicitation capability means form.
    let asked = call(&url, "call_tool", refund(3), &json!({"elicitation": {}}), json!({})).await;
    assert_eq!(result(&asked)["resultType"], "input_required", "{asked}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn an_approved_client_tool_is_handed_to_the_client_and_a_replayed_answer_changes_nothing() {
    let s = TestServer::start().await;
    let mut def = definition("http://127.0.0.1:1");
    let mut confirm = tool("confirm", "Ask the user to confirm an order.", json!({"type": "object"}));
    confirm.requires_approval = true;
    def.sources.push(client_source("dialogs", vec![confirm]));
    s.create("crm", def).await;
    let url = endpoint(&s, "/mcp/agents/crm");

    // Through the question.
    let asked = call(&url, "confirm", json!({"order": 1}), &form(), json!({})).await;
    let state = result(&asked)["requestState"].as_str().expect("a question").to_string();
    let deferred_id = deferred_id(&state).to_string();
    let retry = || retry_request("confirm", json!({"order": 1}), &form(), answer("accept", Some(true)), &state);
    let handed = send(&url, &retry(), &[]).await.1;
    assert_eq!(tool_result(result(&handed)).0["status"], "client_execution_pending", "{handed}");
    let replay = send(&url, &retry(), &[]).await.1;
    assert_eq!(result(&replay), result(&handed), "the replay answers the same");
    let declined = send(&url, &retry_request("confirm", json!({"order": 1}), &form(), answer("decline", None), &state), &[]).await.1;
    assert_eq!(result(&declined), result(&handed), "a later answer does not undo the first");
    assert_eq!(deferred_record(&s, "crm", &deferred_id).await.state, pb::DeferredState::Pending as i32, "the client's result is awaited");
    let client_result = pb::ClientResult { content_json: json!({"confirmed": true}).to_string(), is_error: false };
    s.resolve(&deferred_id, Resolution::ClientResult(client_result.clone())).await.expect("the host posts the client's result");
    let replay = send(&url, &retry(), &[]).await.1;
    assert_eq!(tool_result(result(&replay)), (json!({"confirmed": true}), false), "then the replay answers the result");

    // Through a task.
    let created = call(&url, "confirm", json!({"order": 2}), &tasks(true), json!({})).await;
    let task_id = result(&created)["taskId"].as_str().unwrap().to_string();
    let update = rpc("tasks/update", json!({"taskId": task_id, "inputResponses": answer("accept", Some(true))}), &tasks(true), json!({}));
    for _ in 0..2 {
        let acked = send(&url, &update, &[]).await.1;
        assert_eq!(result(&acked)["resultType"], "complete", "answering again is acknowledged: {acked}");
    }
    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await.1;
    assert_eq!(result(&got)["status"], "working", "the client runs it now: {got}");
    s.resolve(&task_id, Resolution::ClientResult(client_result)).await.expect("the host posts the client's result");
    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await.1;
    assert_eq!(result(&got)["status"], "completed", "{got}");
    assert_eq!(tool_result(&result(&got)["result"]).0, json!({"confirmed": true}));
}

// ----- tasks (SEP-2663) -----

#[tokio::test]
async fn discover_advertises_tasks_carries_the_instructions_and_refuses_an_unknown_agent() {
    let s = TestServer::start().await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let discovered = send(&endpoint(&s, "/mcp/agents/crm"), &rpc("server/discover", json!({}), &plain(), json!({})), &[]).await.1;
    let r = result(&discovered);
    assert!(r["supportedVersions"].as_array().unwrap().iter().any(|v| v == VERSION), "{discovered}");
    assert!(r["capabilities"]["extensions"][TASKS].is_object(), "{discovered}");
    assert!(r["capabilities"]["tools"].is_object(), "{discovered}");
    assert!(r["instructions"].as_str().is_some_and(|i| i.contains("discover_tools")), "{discovered}");
    assert_eq!((r["ttlMs"].as_u64(), r["cacheScope"].as_str()), (Some(0), Some("private")), "the default version changes on promotion");
    let pinned = send(&endpoint(&s, "/mcp/agents/crm/versions/1"), &rpc("server/discover", json!({}), &plain(), json!({})), &[]).await.1;
    assert_eq!(result(&pinned)["ttlMs"].as_u64(), Some(DAY_MS), "{pinned}");
    // Like `initialize`, the handshake fails for an agent the tenant does not have.
    let (_, unknown) = send(&endpoint(&s, "/mcp/agents/nope"), &rpc("server/discover", json!({}), &plain(), json!({})), &[]).await;
    assert!(unknown["error"]["message"].as_str().is_some_and(|m| m.contains("nope")), "{unknown}");
}

#[tokio::test]
async fn an_approval_task_is_answered_with_tasks_update_and_completes_with_the_result() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");

    let created = call(&url, "call_tool", refund(11), &tasks(true), meta_call("task-run", "refund-11")).await;
    let r = result(&created);
    assert_eq!(r["resultType"], "task", "{created}");
    assert_eq!(r["status"], "input_required", "{created}");
    assert!(r["createdAt"].as_str().unwrap().ends_with('Z') && r.get("ttlMs").is_some(), "{created}");
    let task_id = r["taskId"].as_str().unwrap().to_string();
    let again = call(&url, "call_tool", refund(11), &tasks(true), meta_call("task-run", "refund-11")).await;
    assert_eq!(result(&again)["taskId"], task_id.as_str(), "the call sent again under its id is the same task");
    assert_eq!(deferred_records(&s, "crm").await.len(), 1);
    // The task is the deferred record.
    let record = deferred_record(&s, "crm", &task_id).await;
    assert_eq!((record.state, record.run_id.as_str()), (pb::DeferredState::Pending as i32, "task-run"));

    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await.1;
    let g = result(&got);
    assert_eq!((g["status"].as_str(), g["taskId"].as_str()), (Some("input_required"), Some(task_id.as_str())), "{got}");
    assert_eq!(g["inputRequests"]["approval"]["method"], "elicitation/create", "{got}");
    assert_eq!(g["inputRequests"]["approval"]["params"]["requestedSchema"]["properties"]["approve"]["type"], "boolean");
    // A client that does not elicit polls a task that works (the host approves it).
    let polled = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(false), json!({})), &[]).await.1;
    assert_eq!(result(&polled)["status"], "working", "{polled}");
    assert!(result(&polled).get("inputRequests").is_none());
    assert_eq!(exec.calls(), 0);

    let update = rpc("tasks/update", json!({"taskId": task_id, "inputResponses": answer("accept", Some(true))}), &tasks(true), json!({}));
    let acked = send(&url, &update, &[]).await.1;
    assert_eq!(result(&acked)["resultType"], "complete", "{acked}");
    assert_eq!(exec.calls(), 1);

    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await.1;
    let g = result(&got);
    assert_eq!(g["status"], "completed", "{got}");
    let (content, is_error) = tool_result(&g["result"]);
    assert!(!is_error && content["tool"] == "refund" && content["echo"] == json!({"amount": 11}), "{got}");
    // Answering again, or polling again, runs nothing more.
    send(&url, &update, &[]).await;
    send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await;
    assert_eq!(exec.calls(), 1);
    let record = deferred_record(&s, "crm", &task_id).await;
    assert_eq!((record.state, record.resolution.as_str()), (pb::DeferredState::Resolved as i32, "approved"));
}

#[tokio::test]
async fn a_client_executed_task_works_until_the_host_posts_the_clients_result() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");

    let created = call(&url, "show_banner", json!({"text": "hi"}), &tasks(true), json!({})).await;
    let r = result(&created);
    assert_eq!((r["resultType"].as_str(), r["status"].as_str()), (Some("task"), Some("working")), "{created}");
    let task_id = r["taskId"].as_str().unwrap().to_string();
    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await.1;
    assert_eq!(result(&got)["status"], "working", "{got}");
    assert!(result(&got).get("inputRequests").is_none(), "a client execution asks nothing: {got}");
    // Nothing for the client to answer through tasks/update.
    let update = rpc("tasks/update", json!({"taskId": task_id, "inputResponses": answer("accept", Some(true))}), &tasks(true), json!({}));
    assert_invalid(&send(&url, &update, &[]).await.1, "taskId");

    let client_result = pb::ClientResult { content_json: json!({"shown": true}).to_string(), is_error: false };
    s.resolve(&task_id, Resolution::ClientResult(client_result)).await.expect("the host posts the client's result");
    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await.1;
    let g = result(&got);
    assert_eq!(g["status"], "completed", "{got}");
    assert_eq!(tool_result(&g["result"]), (json!({"shown": true}), false));
    assert_eq!(g["result"]["structuredContent"], json!({"shown": true}));
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn tasks_update_declined_denies_and_dismissed_leaves_the_task_asking() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let created = call(&url, "call_tool", refund(13), &tasks(true), json!({})).await;
    let task_id = result(&created)["taskId"].as_str().unwrap().to_string();
    let get = || rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({}));
    let update = |responses: Value| rpc("tasks/update", json!({"taskId": task_id, "inputResponses": responses}), &tasks(true), json!({}));

    // Dismissed: still asking.
    assert_eq!(result(&send(&url, &update(answer("cancel", None)), &[]).await.1)["resultType"], "complete");
    let got = send(&url, &get(), &[]).await.1;
    assert_eq!(result(&got)["status"], "input_required", "{got}");
    // An answer to no question of this task is refused.
    let wrong = send(&url, &update(json!({"other": {"action": "accept", "content": {"approve": true}}})), &[]).await.1;
    assert_invalid(&wrong, "inputResponses");
    // Declined: completed, denied, never run.
    assert_eq!(result(&send(&url, &update(answer("decline", None)), &[]).await.1)["resultType"], "complete");
    let got = send(&url, &get(), &[]).await.1;
    assert_eq!(result(&got)["status"], "completed", "{got}");
    let (content, is_error) = tool_result(&result(&got)["result"]);
    assert!(is_error && content["error"] == "denied", "{got}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn an_expired_record_is_a_cancelled_task_and_its_question_can_no_longer_be_answered() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = definition(&exec.endpoint());
    def.deferred_ttl = Some(prost_types::Duration { seconds: 0, nanos: 300_000_000 });
    s.create("crm", def).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let created = call(&url, "call_tool", refund(14), &tasks(true), json!({})).await;
    let r = result(&created);
    assert_eq!(r["ttlMs"], 300, "the record's lifetime: {created}");
    let task_id = r["taskId"].as_str().unwrap().to_string();
    let state = ask(&url, 15).await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;

    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &[]).await.1;
    assert_eq!(result(&got)["status"], "cancelled", "{got}");
    let late = send(&url, &retry_request("call_tool", refund(15), &form(), answer("accept", Some(true)), &state), &[]).await.1;
    assert!(late["error"]["message"].as_str().unwrap_or_default().contains("expired"), "{late}");
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn tasks_cancel_denies_the_call() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let created = call(&url, "call_tool", refund(12), &tasks(false), json!({})).await;
    assert_eq!(result(&created)["status"], "working", "no question for a client that does not elicit: {created}");
    let task_id = result(&created)["taskId"].as_str().unwrap().to_string();

    let acked = send(&url, &rpc("tasks/cancel", json!({"taskId": task_id}), &tasks(false), json!({})), &[]).await.1;
    assert_eq!(result(&acked)["resultType"], "complete", "{acked}");
    let got = send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(false), json!({})), &[]).await.1;
    let g = result(&got);
    assert_eq!(g["status"], "completed", "{got}");
    let (content, is_error) = tool_result(&g["result"]);
    assert!(is_error && content["error"] == "denied", "{got}");
    let record = deferred_record(&s, "crm", &task_id).await;
    assert_eq!((record.state, record.resolution.as_str()), (pb::DeferredState::Resolved as i32, "denied"));
    // Cancelling again is harmless; approving after is refused by the host's API.
    let again = send(&url, &rpc("tasks/cancel", json!({"taskId": task_id}), &tasks(false), json!({})), &[]).await.1;
    assert_eq!(result(&again)["resultType"], "complete", "{again}");
    assert!(s.resolve(&task_id, Resolution::Approve(pb::Approve::default())).await.is_err());
    assert_eq!(exec.calls(), 0);
}

#[tokio::test]
async fn an_unknown_or_foreign_task_is_an_error_and_tasks_need_the_capability() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    s.create("other", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let foreign = call(&endpoint(&s, "/mcp/agents/other"), "show_banner", json!({}), &tasks(true), json!({})).await;
    let foreign = result(&foreign)["taskId"].as_str().unwrap().to_string();

    for id in ["0123456789abcdef0123456789abcdef", foreign.as_str()] {
        let got = send(&url, &rpc("tasks/get", json!({"taskId": id}), &tasks(true), json!({})), &[]).await.1;
        assert_invalid(&got, "taskId");
        let update = rpc("tasks/update", json!({"taskId": id, "inputResponses": answer("accept", Some(true))}), &tasks(true), json!({}));
        assert_invalid(&send(&url, &update, &[]).await.1, "taskId");
        let cancelled = send(&url, &rpc("tasks/cancel", json!({"taskId": id}), &tasks(true), json!({})), &[]).await.1;
        assert_invalid(&cancelled, "taskId");
    }
    assert_eq!(deferred_record(&s, "other", &foreign).await.state, pb::DeferredState::Pending as i32, "the foreign task is untouched");

    // Without the tasks capability: no task, and tasks/* are refused (-32021).
    let no_task = call(&url, "show_banner", json!({}), &form(), json!({})).await;
    let (pending, _) = tool_result(result(&no_task));
    assert_eq!(pending["status"], "client_execution_pending", "{no_task}");
    let asked = call(&url, "call_tool", refund(1), &form(), json!({})).await;
    assert_eq!(result(&asked)["resultType"], "input_required", "{asked}");
    let (status, refused) = send(&url, &rpc("tasks/get", json!({"taskId": foreign}), &form(), json!({})), &[]).await;
    assert_eq!((status, refused["error"]["code"].as_i64()), (400, Some(-32021)), "{refused}");
}

// ----- cache hints -----

/// `tools/list` at `path`: its `ttlMs` (its `cacheScope` is always private: listings are
/// per tenant).
async fn hints(s: &TestServer, path: &str, meta: Value, headers: Vec<(&str, &str)>) -> u64 {
    let listed = send(&endpoint(s, path), &rpc("tools/list", json!({}), &plain(), meta), &headers).await.1;
    let r = result(&listed);
    assert!(!r["tools"].as_array().unwrap().is_empty(), "{listed}");
    assert_eq!(r["cacheScope"], "private", "{path}: {listed}");
    r["ttlMs"].as_u64().unwrap_or_else(|| panic!("a ttlMs: {listed}"))
}

#[tokio::test]
async fn tools_list_cache_hints_say_how_long_the_listing_holds() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let upstream = support::McpServer::start(vec![support::mcp_tool("lookup", "Look a record up.", &[])]).await;
    let s = TestServer::start().await;
    s.create("crm", definition(&exec.endpoint())).await;
    let mut relay = crm_definition(&exec.endpoint());
    relay.sources.push(pb::ToolSource {
        id: "up".into(),
        kind: Some(pb::tool_source::Kind::Mcp(pb::McpSource { url: upstream.url(), ..Default::default() })),
        ..Default::default()
    });
    s.create("relay", relay).await;
    assert_eq!(hints(&s, "/mcp/agents/crm/versions/1", json!({}), vec![]).await, DAY_MS, "a version's listing never changes");
    assert_eq!(hints(&s, "/mcp/agents/crm", json!({}), vec![]).await, 0, "the default version's changes with a promotion");
    assert_eq!(hints(&s, "/mcp/agents/crm", meta_run("cached-run"), vec![]).await, DAY_MS, "a run's listing is pinned");
    assert_eq!(hints(&s, "/mcp/agents/crm", json!({}), vec![("toolrouter-run-id", "cached-run-2")]).await, DAY_MS);
    assert_eq!(hints(&s, "/mcp/agents/crm/versions/1", meta_run("cached-run-3"), vec![]).await, DAY_MS);
    // An MCP source's listing may change any time.
    assert_eq!(hints(&s, "/mcp/agents/relay/versions/1", json!({}), vec![]).await, 0);
    assert_eq!(hints(&s, "/mcp/agents/relay", meta_run("relay-run"), vec![]).await, 0);
    assert_eq!(hints(&s, "/mcp/agents/relay", json!({}), vec![]).await, 0);
}

#[tokio::test]
async fn another_tenants_question_or_task_is_unknown() {
    const KEY_A: &str = "tr_acme_0123456789abcdef";
    const KEY_B: &str = "tr_globex_fedcba9876543210";
    let exec = spawn_executor(Behaviour::Echo).await;
    let (s, _keys) = TestServer::start_with_keys(&[(KEY_A, "acme"), (KEY_B, "globex")]).await;
    s.create_as(KEY_A, "crm", definition(&exec.endpoint())).await;
    s.create_as(KEY_B, "crm", definition(&exec.endpoint())).await;
    let url = endpoint(&s, "/mcp/agents/crm");
    let (auth_a, auth_b) = (format!("Bearer {KEY_A}"), format!("Bearer {KEY_B}"));
    let (as_a, as_b) = ([("authorization", auth_a.as_str())], [("authorization", auth_b.as_str())]);

    let asked = send(&url, &call_request("call_tool", refund(5), &form(), json!({})), &as_a).await.1;
    let state = result(&asked)["requestState"].as_str().unwrap().to_string();
    let task = send(&url, &call_request("call_tool", refund(6), &tasks(true), json!({})), &as_a).await.1;
    let task_id = result(&task)["taskId"].as_str().unwrap().to_string();

    let retry = retry_request("call_tool", refund(5), &form(), answer("accept", Some(true)), &state);
    assert_invalid(&send(&url, &retry, &as_b).await.1, "requestState");
    assert_invalid(&send(&url, &rpc("tasks/get", json!({"taskId": task_id}), &tasks(true), json!({})), &as_b).await.1, "taskId");
    let update = rpc("tasks/update", json!({"taskId": task_id, "inputResponses": answer("accept", Some(true))}), &tasks(true), json!({}));
    assert_invalid(&send(&url, &update, &as_b).await.1, "taskId");
    assert_invalid(&send(&url, &rpc("tasks/cancel", json!({"taskId": task_id}), &tasks(true), json!({})), &as_b).await.1, "taskId");
    assert_eq!(exec.calls(), 0);
    // The owner still can.
    let done = send(&url, &retry, &as_a).await.1;
    assert_eq!(tool_result(result(&done)).0["tool"], "refund", "{done}");
    assert_eq!(exec.calls(), 1);
}
