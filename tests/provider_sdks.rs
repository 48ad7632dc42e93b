//! The provider formats checked against the providers' own SDK types (issue 16 item 6):
//! `tests/providers/sdk_check.py` validates every format's tools, per-call results and what
//! to append with pydantic on the official Python SDKs' types (`openai`, `anthropic`,
//! `google-genai`, `mcp`), and builds sample model responses with their response types that
//! go through `HandleToolCalls` here. Without the SDKs this prints a skip line and passes
//! (`.ci/run` installs them).

mod common;

use std::process::{Command, Stdio};

use common::*;
use serde_json::{Map, Value, json};
use toolrouter::pb;

const SDKS: &str = "import openai, anthropic, google.genai, mcp, pydantic";

fn python_sdks() -> bool {
    let ok = Command::new("python3").args(["-c", SDKS]).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !ok {
        println!(
            "SKIP: the provider SDKs are not importable; run `python3 -m pip install 'openai>=3,<4' 'anthropic>=2,<3' 'google-genai>=3,<4' 'mcp>=2,<3'`"
        );
    }
    ok
}

/// Runs the checker with `input` on stdin; its stdout, or the test fails with its output.
async fn sdk_check(command: &str, input: Value) -> String {
    let script = format!("{}/tests/providers/sdk_check.py", env!("CARGO_MANIFEST_DIR"));
    let out = python(vec![script, command.to_string()], Some(input.to_string())).await;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "sdk_check failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Nested objects, enums, optional fields, `$ref`s, arrays of objects, a free-form object,
/// a name Gemini must escape, the CRM group, an approval-gated tool.
fn definition(endpoint: &str) -> pb::AgentDefinition {
    let contact = tool(
        "1st_contact",
        "Record the first contact with a person.",
        json!({"type": "object", "properties": {
            "person": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}}, "required": ["name"]},
            "channel": {"type": "string", "enum": ["email", "phone"]},
            "note": {"type": "string", "maxLength": 200},
            "first-seen": {"type": "string", "format": "date"}
        }, "required": ["person"]}),
    );
    let trip = tool(
        "book_trip",
        "Book a trip for travellers between two places.",
        json!({"type": "object", "properties": {
            "from": {"$ref": "#/$defs/place"},
            "to": {"$ref": "#/$defs/place"},
            "travellers": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "exclusiveMaximum": 150}}, "required": ["name"]}},
            "class": {"enum": ["economy", "business"]},
            "budget": {"type": ["number", "null"], "default": null},
            "stops": {"oneOf": [{"type": "integer"}, {"type": "string", "const": "any"}]}
        }, "required": ["from", "to", "travellers"],
        "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string", "minLength": 2}}, "required": ["city"]}}}),
    );
    let tree = tool(
        "walk_tree",
        "Walk a tree of nodes.",
        json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/node"}}, "$defs": {"node": {"type": "object", "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}}),
    );
    let free = tool("tag_item", "Attach free-form metadata to an item.", json!({"type": "object", "properties": {"meta": {"type": "object"}}}));
    let mut refund =
        tool("refund", "Refund an order.", json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}));
    refund.requires_approval = true;
    pb::AgentDefinition {
        sources: vec![
            function_source("direct", endpoint, vec![contact, trip, tree, free]),
            function_source("crm-tools", endpoint, vec![customer_name_tool()]),
            function_source("ops-tools", endpoint, vec![refund]),
        ],
        groups: [("crm".to_string(), group("Customer records", &["crm-tools"])), ("ops".to_string(), group("Operations", &["ops-tools"]))].into(),
        ..Default::default()
    }
}

const FORMATS: [(pb::ToolFormat, &str); 5] = [
    (pb::ToolFormat::OpenaiChat, "openai_chat"),
    (pb::ToolFormat::OpenaiResponses, "openai_responses"),
    (pb::ToolFormat::Anthropic, "anthropic"),
    (pb::ToolFormat::Gemini, "gemini"),
    (pb::ToolFormat::Mcp, "mcp"),
];

async fn tools_json(s: &TestServer, format: pb::ToolFormat, defer_loading: bool) -> Value {
    serde_json::from_str(&s.provider_tools("a", "r", format, defer_loading).await.unwrap().tools_json).unwrap()
}

async fn handle(s: &TestServer, run: &str, format: pb::ToolFormat, parts: &Value) -> pb::HandleToolCallsResponse {
    s.provider_calls("a", run, format, parts).await.unwrap_or_else(|e| panic!("{format:?}: {e:?}"))
}

fn provider_parts(r: &pb::HandleToolCallsResponse) -> Vec<Value> {
    r.outcomes
        .iter()
        .filter_map(|o| match &o.outcome {
            Some(pb::handle_tool_call_response::Outcome::Result(r)) => Some(serde_json::from_str(&r.provider_json).unwrap()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_formats_tools_results_and_sample_responses_pass_the_providers_own_sdk_types() {
    if !python_sdks() {
        return;
    }
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("a", definition(&exec.endpoint())).await;

    let mut tools = Map::new();
    for (format, label) in FORMATS {
        tools.insert(label.into(), tools_json(&s, format, false).await);
    }
    tools.insert("anthropic_deferred".into(), tools_json(&s, pb::ToolFormat::Anthropic, true).await);
    tools.insert("openai_responses_deferred".into(), tools_json(&s, pb::ToolFormat::OpenaiResponses, true).await);

    // The model's calls: a grouped tool through call_tool, a direct tool with nulls for
    // optionals (strict mode's habit), the escaped name, an approval-gated call (deferred:
    // left out of what to append) and an unknown tool (a fault, rendered as an error).
    let calls = json!({"calls": [
        {"id": "call_1", "name": "call_tool", "arguments": {"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}},
        {"id": "call_2", "name": "book_trip", "arguments": {"from": {"city": "Paris", "country": null}, "to": {"city": "Rome", "country": null}, "travellers": [{"name": "Ada", "age": null}], "class": null, "budget": null, "stops": null}},
        {"id": "call_3", "name": "1st_contact", "arguments": {"person": {"name": "Ada", "email": null}, "channel": "email", "note": null, "first-seen": null}},
        {"id": "call_4", "name": "call_tool", "arguments": {"group": "ops", "tool": "refund", "arguments": {"order": "o-1"}}},
        {"id": "call_5", "name": "no_such_tool", "arguments": {}}
    ]});
    let samples: Value = serde_json::from_str(&sdk_check("samples", calls).await).expect("samples are JSON");

    let (mut results, mut parts) = (Map::new(), Map::new());
    for (format, label) in FORMATS {
        let r = handle(&s, &format!("run-{label}"), format, &samples[label]).await;
        assert_eq!(r.outcomes.len(), 5, "{label}: every tool call of the sample was read: {}", samples[label]);
        for (i, o) in r.outcomes.iter().enumerate().take(3) {
            let Some(pb::handle_tool_call_response::Outcome::Result(res)) = &o.outcome else { panic!("{label}: call {i}: {o:?}") };
            assert!(!res.is_error, "{label}: call {i} ran: {}", res.content_json);
        }
        assert!(matches!(r.outcomes[3].outcome, Some(pb::handle_tool_call_response::Outcome::Deferred(_))), "{label}");
        results.insert(label.into(), serde_json::from_str(&r.provider_results_json).unwrap());
        parts.insert(label.into(), Value::Array(provider_parts(&r)));
    }
    let listed = s.provider_tools("a", "run-search-a", pb::ToolFormat::Anthropic, true).await.unwrap();
    assert!(!listed.tools_json.is_empty());
    let search = json!([{"type": "tool_use", "id": "toolu_s", "name": "tool_search", "input": {"query": "customer name"}}]);
    parts.insert("anthropic_search".into(), Value::Array(provider_parts(&handle(&s, "run-search-a", pb::ToolFormat::Anthropic, &search).await)));
    let r = handle(&s, "run-search-r", pb::ToolFormat::OpenaiResponses, &samples["openai_responses_search"]).await;
    parts.insert("openai_responses_search".into(), Value::Array(provider_parts(&r)));

    let report = sdk_check("check", json!({"tools": tools, "results": results, "parts": parts})).await;
    println!("{report}");
    assert!(report.lines().filter(|l| l.starts_with("ok ")).count() >= 20, "the checker checked too little:\n{report}");
    assert_eq!(exec.calls(), 15, "three calls ran per format");
}

#[tokio::test]
async fn the_readme_host_loops_run_as_written_against_the_server() {
    let grpc_tools = Command::new("python3").args(["-c", "import grpc_tools.protoc, grpc"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !python_sdks() || !grpc_tools.is_ok_and(|s| s.success()) {
        println!("SKIP: the provider SDKs or grpcio-tools are not importable; run `python3 -m pip install grpcio grpcio-tools`");
        return;
    }
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm-agent", crm_definition(&exec.endpoint())).await;
    let script = format!("{}/tests/providers/readme_loops.py", env!("CARGO_MANIFEST_DIR"));
    let addr = s.server.grpc_addr.to_string();
    let out = python(vec![script, addr], None).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "README loops failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().filter(|l| l.contains("printed 'Customer 42 is Ada.'")).count(), 4, "{stdout}");
    assert!(exec.calls() >= 4, "every loop reached the executor");
}
