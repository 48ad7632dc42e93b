//! Provider-native host surface (issue 16): tools, calls and results in OpenAI Chat, OpenAI
//! Responses, Anthropic, Gemini and MCP shapes, through the real server and a real executor.
//! `tests/provider_sdks.rs` checks the same outputs with the providers' own SDK types.

mod common;

use common::*;
use serde_json::{Value, json};
use toolrouter::pb;

pub const FORMATS: [(pb::ToolFormat, &str); 5] = [
    (pb::ToolFormat::OpenaiChat, "openai_chat"),
    (pb::ToolFormat::OpenaiResponses, "openai_responses"),
    (pb::ToolFormat::Anthropic, "anthropic"),
    (pb::ToolFormat::Gemini, "gemini"),
    (pb::ToolFormat::Mcp, "mcp"),
];

/// Direct tools with nested objects, enums, optional fields, `$ref`s, arrays of objects, a
/// free-form object and a name Gemini must escape; the CRM group; an approval-gated tool and
/// a client tool.
fn definition(endpoint: &str) -> pb::AgentDefinition {
    let contact = tool(
        "1st_contact",
        "Record the first contact with a person.",
        json!({"type": "object", "properties": {
            "person": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}}, "required": ["name"]},
            "channel": {"type": "string", "enum": ["email", "phone"]},
            "note": {"type": "string", "maxLength": 200}
        }, "required": ["person"]}),
    );
    let trip = tool(
        "book_trip",
        "Book a trip for travellers between two places.",
        json!({"type": "object", "properties": {
            "from": {"$ref": "#/$defs/place"},
            "to": {"$ref": "#/$defs/place"},
            "travellers": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}, "required": ["name"]}},
            "class": {"enum": ["economy", "business"]},
            "budget": {"type": ["number", "null"]}
        }, "required": ["from", "to", "travellers"],
        "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}}, "required": ["city"]}}}),
    );
    let free = tool("tag_item", "Attach free-form metadata to an item.", json!({"type": "object", "properties": {"meta": {"type": "object"}}}));
    let mut refund =
        tool("refund", "Refund an order.", json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}));
    refund.requires_approval = true;
    let confirm = tool(
        "confirm",
        "Ask the user to confirm.",
        json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
    );
    let mut crm = function_source("crm-tools", endpoint, vec![customer_name_tool()]);
    crm.instructions = "Use numeric customer IDs, not display names.".into();
    pb::AgentDefinition {
        sources: vec![
            function_source("direct", endpoint, vec![contact, trip, free]),
            crm,
            function_source("ops-tools", endpoint, vec![refund]),
            client_source("ui", vec![confirm]),
        ],
        groups: [
            ("crm".to_string(), group("Customer records", &["crm-tools"])),
            ("ops".to_string(), group("Operations", &["ops-tools"])),
            ("ui".to_string(), group("The user's screen", &["ui"])),
        ]
        .into(),
        ..Default::default()
    }
}

async fn tools_as(s: &TestServer, run: &str, format: pb::ToolFormat, defer_loading: bool) -> pb::GetModelToolsResponse {
    s.provider_tools("a", run, format, defer_loading).await.unwrap()
}

async fn provider_calls(s: &TestServer, run: &str, format: pb::ToolFormat, parts: &Value) -> Result<pb::HandleToolCallsResponse, tonic::Status> {
    s.provider_calls("a", run, format, parts).await
}

fn by_name<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array().unwrap().iter().find(|t| t["name"] == name || t["function"]["name"] == name).unwrap_or_else(|| panic!("{name} not in {list}"))
}

#[tokio::test]
async fn tools_json_is_each_providers_tools_parameter_with_adapted_schemas_and_the_same_bytes_every_time() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("a", definition(&exec.endpoint())).await;

    let chat = tools_as(&s, "r1", pb::ToolFormat::OpenaiChat, false).await;
    let list: Value = serde_json::from_str(&chat.tools_json).unwrap();
    assert_eq!(list.as_array().unwrap().len(), chat.tools.len(), "the same tools as the typed list");
    let trip = by_name(&list, "book_trip");
    assert_eq!(trip["type"], "function");
    assert_eq!(trip["function"]["strict"], true);
    let params = &trip["function"]["parameters"];
    assert_eq!(params["additionalProperties"], false);
    assert_eq!(params["required"], json!(["from", "to", "travellers", "class", "budget"]), "every property required in strict mode");
    assert_eq!(params["properties"]["class"]["enum"], json!(["economy", "business", null]), "an optional property is made nullable");
    assert_eq!(params["properties"]["travellers"]["items"]["required"], json!(["name", "age"]));
    assert_eq!(params["$defs"]["place"]["additionalProperties"], false);
    let contact = &by_name(&list, "1st_contact")["function"]["parameters"];
    assert_eq!(
        contact["properties"]["note"],
        json!({"type": ["string", "null"], "description": "(maxLength: 200)"}),
        "unsupported keywords move into descriptions"
    );
    assert_eq!(by_name(&list, "tag_item")["function"]["strict"], false, "a free-form object cannot be strict");
    assert_eq!(by_name(&list, "call_tool")["function"]["strict"], false);
    assert!(chat.diagnostics.iter().any(|d| d.contains("\"tag_item\" is offered non-strict")), "{:?}", chat.diagnostics);

    let responses: Value = serde_json::from_str(&tools_as(&s, "r1", pb::ToolFormat::OpenaiResponses, false).await.tools_json).unwrap();
    let trip = by_name(&responses, "book_trip");
    assert_eq!((trip["type"].as_str(), trip["strict"].as_bool()), (Some("function"), Some(true)));
    assert!(trip.get("function").is_none(), "Responses tools are flat");

    let anthropic: Value = serde_json::from_str(&tools_as(&s, "r1", pb::ToolFormat::Anthropic, false).await.tools_json).unwrap();
    let trip = by_name(&anthropic, "book_trip");
    assert_eq!(trip["input_schema"]["$defs"]["place"]["required"], json!(["city"]), "Anthropic takes the schema as it is");
    assert_eq!(trip.as_object().unwrap().keys().collect::<Vec<_>>(), ["name", "description", "input_schema"]);

    let gemini_resp = tools_as(&s, "r1", pb::ToolFormat::Gemini, false).await;
    let gemini: Value = serde_json::from_str(&gemini_resp.tools_json).unwrap();
    let declarations = &gemini[0]["functionDeclarations"];
    let names: Vec<&str> = declarations.as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"_1st_contact") && !names.contains(&"1st_contact"), "{names:?}");
    let trip = by_name(declarations, "book_trip");
    let text = trip["parameters"].to_string();
    assert!(!text.contains("$ref") && !text.contains("$defs") && !text.contains("additionalProperties"), "{text}");
    assert_eq!(trip["parameters"]["properties"]["from"]["properties"]["city"]["type"], "STRING", "references inlined");
    assert_eq!(trip["parameters"]["properties"]["budget"], json!({"nullable": true, "type": "NUMBER"}), "no type arrays");
    assert!(by_name(declarations, "list_tool_groups").get("parameters").is_some());

    let mcp: Value = serde_json::from_str(&tools_as(&s, "r1", pb::ToolFormat::Mcp, false).await.tools_json).unwrap();
    assert_eq!(by_name(&mcp, "book_trip")["inputSchema"]["type"], "object");

    for (format, label) in FORMATS {
        let (a, b) = (tools_as(&s, "r2", format, false).await, tools_as(&s, "r3", format, false).await);
        assert_eq!(a.tools_json, b.tools_json, "{label}: the same version gives the same bytes");
    }
    let plain = tools_as(&s, "r1", pb::ToolFormat::Unspecified, false).await;
    assert!(plain.tools_json.is_empty() && plain.diagnostics.is_empty());
}

#[tokio::test]
async fn provider_tool_calls_run_and_their_results_come_back_in_the_providers_shape() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("a", definition(&exec.endpoint())).await;
    let crm = json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}});

    let chat = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "call_tool", "arguments": crm.to_string()}}]});
    let r = provider_calls(&s, "chat", pb::ToolFormat::OpenaiChat, &chat).await.unwrap();
    let appended: Value = serde_json::from_str(&r.provider_results_json).unwrap();
    assert_eq!(appended, json!([{"role": "tool", "tool_call_id": "call_1", "content": "Ada"}]), "a plain-text result is its text");
    let pb::handle_tool_call_response::Outcome::Result(result) = r.outcomes[0].outcome.clone().unwrap() else { panic!() };
    assert_eq!((result.content_json.as_str(), serde_json::from_str::<Value>(&result.provider_json).unwrap()), ("\"Ada\"", appended[0].clone()));

    let responses = json!([{"type": "reasoning", "id": "rs_1", "summary": []}, {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "call_tool", "arguments": crm.to_string(), "status": "completed"}]);
    let r = provider_calls(&s, "responses", pb::ToolFormat::OpenaiResponses, &responses).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&r.provider_results_json).unwrap(),
        json!([{"type": "function_call_output", "call_id": "call_9", "output": "Ada"}])
    );

    let anthropic = json!({"role": "assistant", "content": [{"type": "text", "text": "Looking."}, {"type": "tool_use", "id": "toolu_1", "name": "call_tool", "input": crm}, {"type": "tool_use", "id": "toolu_2", "name": "nope", "input": {}}]});
    let r = provider_calls(&s, "anthropic", pb::ToolFormat::Anthropic, &anthropic).await.unwrap();
    let message: Value = serde_json::from_str(&r.provider_results_json).unwrap();
    assert_eq!(message["role"], "user");
    assert_eq!(message["content"][0], json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "Ada"}));
    assert_eq!(
        (message["content"][1]["tool_use_id"].as_str(), message["content"][1]["is_error"].as_bool()),
        (Some("toolu_2"), Some(true)),
        "{message}"
    );

    let gemini = json!({"role": "model", "parts": [{"text": "Looking."}, {"functionCall": {"id": "g1", "name": "call_tool", "args": crm}}, {"functionCall": {"name": "_1st_contact", "args": {"person": {"name": "Ada"}}}}]});
    let r = provider_calls(&s, "gemini", pb::ToolFormat::Gemini, &gemini).await.unwrap();
    let parts: Value = serde_json::from_str(&r.provider_results_json).unwrap();
    assert_eq!(parts[0], json!({"functionResponse": {"id": "g1", "name": "call_tool", "response": {"output": "Ada"}}}));
    let second = &parts[1]["functionResponse"];
    assert_eq!((second["name"].as_str(), second.get("id")), (Some("_1st_contact"), None), "a call without an id is answered by name: {second}");
    assert_eq!(second["response"]["output"]["tool"], "1st_contact", "the escaped name reached the right tool");

    let mcp = json!([{"name": "call_tool", "arguments": crm, "_meta": {"io.toolrouter/tool_call_id": "m1"}}]);
    let r = provider_calls(&s, "mcp", pb::ToolFormat::Mcp, &mcp).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&r.provider_results_json).unwrap(),
        json!([{"content": [{"type": "text", "text": "Ada"}], "isError": false}])
    );

    // HandleToolCall (one typed call) with a format fills the result's provider_json.
    let one = s
        .router()
        .handle_tool_call(pb::HandleToolCallRequest {
            agent: Some(agent_ref("a")),
            run: Some(run_ctx("one")),
            call: Some(pb::ToolCall { tool_call_id: "c7".into(), tool_name: "call_tool".into(), arguments_json: crm.to_string() }),
            format: pb::ToolFormat::OpenaiResponses as i32,
        })
        .await
        .unwrap()
        .into_inner();
    let Some(pb::handle_tool_call_response::Outcome::Result(result)) = one.outcome else { panic!("{one:?}") };
    assert_eq!(
        serde_json::from_str::<Value>(&result.provider_json).unwrap(),
        json!({"type": "function_call_output", "call_id": "c7", "output": "Ada"})
    );
}

#[tokio::test]
async fn nulls_a_strict_schema_made_the_model_send_are_removed_before_validation_and_execution() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("a", definition(&exec.endpoint())).await;
    let args = json!({"from": {"city": "Paris", "country": null}, "to": {"city": "Rome", "country": null}, "travellers": [{"name": "Ada", "age": null}], "class": null, "budget": null});
    let chat = json!([{"id": "call_1", "type": "function", "function": {"name": "book_trip", "arguments": args.to_string()}}]);
    let r = provider_calls(&s, "r1", pb::ToolFormat::OpenaiChat, &chat).await.unwrap();
    let pb::handle_tool_call_response::Outcome::Result(result) = r.outcomes[0].outcome.clone().unwrap() else { panic!() };
    assert!(!result.is_error, "{}", result.content_json);
    assert_eq!(
        exec.last_arguments(),
        json!({"from": {"city": "Paris"}, "to": {"city": "Rome"}, "travellers": [{"name": "Ada"}], "budget": null}),
        "nulls for optional properties that do not take null are dropped; `budget` takes null and keeps it"
    );
}

#[tokio::test]
async fn a_gemini_call_without_an_id_sent_again_is_not_run_again() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("a", definition(&exec.endpoint())).await;
    let parts = json!([{"functionCall": {"name": "_1st_contact", "args": {"person": {"name": "Ada"}}}}]);
    let first = provider_calls(&s, "r1", pb::ToolFormat::Gemini, &parts).await.unwrap();
    let again = provider_calls(&s, "r1", pb::ToolFormat::Gemini, &parts).await.unwrap();
    assert_eq!(exec.calls(), 1, "the derived id made the second send a retry");
    assert_eq!(first.provider_results_json, again.provider_results_json);
}

#[tokio::test]
async fn deferred_calls_are_left_out_until_resolved_and_their_resolution_renders_in_the_format() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("a", definition(&exec.endpoint())).await;
    let blocks = json!([
        {"type": "tool_use", "id": "toolu_r", "name": "call_tool", "input": {"group": "ops", "tool": "refund", "arguments": {"order": "o-1"}}},
        {"type": "tool_use", "id": "toolu_c", "name": "call_tool", "input": {"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}}
    ]);
    let r = provider_calls(&s, "r1", pb::ToolFormat::Anthropic, &blocks).await.unwrap();
    let pb::handle_tool_call_response::Outcome::Deferred(d) = r.outcomes[0].outcome.clone().unwrap() else { panic!("{:?}", r.outcomes[0]) };
    let message: Value = serde_json::from_str(&r.provider_results_json).unwrap();
    assert_eq!(message["content"].as_array().unwrap().len(), 1, "only the finished call: {message}");
    assert_eq!(message["content"][0]["tool_use_id"], "toolu_c");

    let resolved = s
        .router()
        .resolve_deferred(pb::ResolveDeferredRequest {
            deferred_id: d.deferred_id.clone(),
            resolution: Some(pb::resolve_deferred_request::Resolution::Approve(pb::Approve { arguments_json: None })),
            format: pb::ToolFormat::Anthropic as i32,
        })
        .await
        .unwrap()
        .into_inner();
    let block: Value = serde_json::from_str(&resolved.provider_json).unwrap();
    assert_eq!((block["type"].as_str(), block["tool_use_id"].as_str()), (Some("tool_result"), Some("toolu_r")), "{block}");
    assert!(resolved.follow_up.is_none());

    let listed = s
        .router()
        .list_deferred(pb::ListDeferredRequest {
            agent_id: "a".into(),
            run_id: "r1".into(),
            format: pb::ToolFormat::OpenaiChat as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let chat: Value = serde_json::from_str(&listed.records[0].result.as_ref().unwrap().provider_json).unwrap();
    assert_eq!((chat["role"].as_str(), chat["tool_call_id"].as_str()), (Some("tool"), Some("toolu_r")));
}

#[tokio::test]
async fn approving_an_approval_gated_client_tool_returns_the_client_execution_as_a_typed_follow_up() {
    let s = TestServer::start().await;
    let mut confirm = tool("confirm", "Ask the user to confirm.", json!({"type": "object", "properties": {"question": {"type": "string"}}}));
    confirm.requires_approval = true;
    let def = pb::AgentDefinition { sources: vec![client_source("ui", vec![confirm])], ..Default::default() };
    s.create("a", def).await;
    let outcome = s.call("a", "r1", "c1", "confirm", json!({"question": "Ship it?"})).await;
    let d = deferred_of(&outcome);
    assert_eq!(d.kind, pb::DeferredKind::Approval as i32);
    let approve = || pb::resolve_deferred_request::Resolution::Approve(pb::Approve { arguments_json: None });
    for _ in 0..2 {
        let r = s.resolve(&d.deferred_id, approve()).await.unwrap();
        let next = r.follow_up.expect("the host learns it must now run the client tool");
        assert_eq!((next.deferred_id.as_str(), next.kind), (d.deferred_id.as_str(), pb::DeferredKind::ClientExecution as i32));
        assert_eq!(next.target.unwrap().arguments_json, r#"{"question":"Ship it?"}"#);
    }
}

#[tokio::test]
async fn defer_loading_lists_the_catalog_deferred_and_the_search_tool_answers_with_references() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = definition(&exec.endpoint());
    // A canonical name over the providers' 64 characters cannot be listed.
    let long = tool(&"x".repeat(60), "A tool with a long name.", json!({"type": "object"}));
    def.sources.push(function_source("archive-tools", &exec.endpoint(), vec![long]));
    def.groups.insert("archive".into(), group("Old records", &["archive-tools"]));
    s.create("a", def).await;

    let listed = tools_as(&s, "r1", pb::ToolFormat::Anthropic, true).await;
    assert!(listed.diagnostics.iter().any(|d| d.starts_with("1 grouped tools are not offered with defer_loading")), "{:?}", listed.diagnostics);
    let tools: Value = serde_json::from_str(&listed.tools_json).unwrap();
    let tools = tools.as_array().unwrap();
    assert_eq!(tools[0]["name"], "tool_search");
    assert!(tools[0].get("defer_loading").is_none(), "the search tool is loaded");
    let deferred: Vec<&str> = tools.iter().filter(|t| t["defer_loading"] == true).map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(deferred, ["crm__customer_name", "ops__refund", "ui__confirm"], "every grouped tool, by canonical name");
    assert!(tools.iter().any(|t| t["name"] == "book_trip" && t.get("defer_loading").is_none()), "direct tools stay loaded");
    assert!(!tools.iter().any(|t| t["name"] == "discover_tools"), "no control tools");
    assert_eq!(tools_as(&s, "r1", pb::ToolFormat::Anthropic, true).await.tools_json, listed.tools_json, "the list never changes in a run");

    let search = json!([{"type": "tool_use", "id": "toolu_s", "name": "tool_search", "input": {"query": "customer display name", "limit": 1}}]);
    let r = provider_calls(&s, "r1", pb::ToolFormat::Anthropic, &search).await.unwrap();
    let message: Value = serde_json::from_str(&r.provider_results_json).unwrap();
    assert_eq!(message["content"][0]["content"], json!([{"type": "tool_reference", "tool_name": "crm__customer_name"}]), "{message}");
    let called = json!([{"type": "tool_use", "id": "toolu_x", "name": "crm__customer_name", "input": {"customer_id": 42}}]);
    let r = provider_calls(&s, "r1", pb::ToolFormat::Anthropic, &called).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&r.provider_results_json).unwrap()["content"][0]["content"],
        "Ada",
        "the model calls the real tool by name"
    );

    let responses: Value = serde_json::from_str(&tools_as(&s, "r2", pb::ToolFormat::OpenaiResponses, true).await.tools_json).unwrap();
    assert_eq!(responses[0]["type"], "tool_search");
    assert_eq!(responses[0]["execution"], "client");
    let search = json!([{"type": "tool_search_call", "id": "ts", "call_id": "ts_1", "execution": "client", "arguments": {"query": "refund an order"}, "status": "completed"}]);
    let r = provider_calls(&s, "r2", pb::ToolFormat::OpenaiResponses, &search).await.unwrap();
    let items: Value = serde_json::from_str(&r.provider_results_json).unwrap();
    assert_eq!((items[0]["type"].as_str(), items[0]["call_id"].as_str()), (Some("tool_search_output"), Some("ts_1")));
    assert_eq!(items[0]["tools"][0]["name"], "ops__refund", "{items}");
    assert_eq!(items[0]["tools"][0]["defer_loading"], true);
}

#[tokio::test]
async fn provider_calls_that_are_not_the_formats_shape_are_invalid_argument_with_the_path_of_the_part() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("a", definition(&exec.endpoint())).await;
    for (format, parts, field) in [
        (
            pb::ToolFormat::OpenaiChat,
            json!([{"id": "c", "type": "function", "function": {"name": "x", "arguments": {"a": 1}}}]),
            "provider_calls_json[0].function.arguments",
        ),
        (
            pb::ToolFormat::Anthropic,
            json!({"content": [{"type": "text", "text": "x"}, {"type": "tool_use", "name": "x", "input": {}}]}),
            "provider_calls_json.content[1].id",
        ),
        (pb::ToolFormat::Gemini, json!([{"functionCall": {"name": "x", "args": [1]}}]), "provider_calls_json[0].functionCall.args"),
        (pb::ToolFormat::OpenaiResponses, json!("function_call"), "provider_calls_json"),
        (pb::ToolFormat::Unspecified, json!([]), "format"),
    ] {
        let e = provider_calls(&s, "r1", format, &parts).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{format:?}: {e:?}");
        let violations = tonic_types::StatusExt::get_details_bad_request(&e).expect("BadRequest details").field_violations;
        assert_eq!(violations[0].field, field, "{format:?}: {e:?}");
    }
    assert_eq!(exec.calls(), 0, "nothing ran");
    let e = s.provider_tools("a", "", pb::ToolFormat::Gemini, true).await.unwrap_err();
    assert_eq!((e.code(), e.message().contains("defer_loading")), (tonic::Code::InvalidArgument, true), "{e:?}");
    let e = s
        .router()
        .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("a")), run: None, format: 99, defer_loading: false })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // Parts that are not tool calls are skipped: nothing to run, nothing to append.
    let r = provider_calls(&s, "r1", pb::ToolFormat::Anthropic, &json!([{"type": "text", "text": "hi"}])).await.unwrap();
    assert_eq!((r.outcomes.len(), r.provider_results_json.as_str()), (0, "null"));
}

#[tokio::test]
async fn a_tool_named_like_the_search_tool_keeps_its_name_and_its_calls() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    let mut def = definition(&exec.endpoint());
    def.sources.push(function_source(
        "own-search",
        &exec.endpoint(),
        vec![tool("tool_search", "Search the web.", json!({"type": "object", "properties": {"q": {"type": "string"}}}))],
    ));
    s.create("a", def).await;
    let listed = tools_as(&s, "r1", pb::ToolFormat::Anthropic, true).await;
    let tools: Value = serde_json::from_str(&listed.tools_json).unwrap();
    let named: Vec<&Value> = tools.as_array().unwrap().iter().filter(|t| t["name"] == "tool_search").collect();
    assert_eq!(named.len(), 1);
    assert_eq!(named[0]["description"], "Search the web.", "the agent's own tool, not the search tool");
    assert!(listed.diagnostics.iter().any(|d| d.contains("no search tool")), "{:?}", listed.diagnostics);
    let call = json!([{"type": "tool_use", "id": "toolu_1", "name": "tool_search", "input": {"q": "rust"}}]);
    let r = provider_calls(&s, "r1", pb::ToolFormat::Anthropic, &call).await.unwrap();
    let message: Value = serde_json::from_str(&r.provider_results_json).unwrap();
    assert!(message["content"][0]["content"].as_str().unwrap().contains("\"tool\":\"tool_search\""), "the tool ran: {message}");
    let responses: Value = serde_json::from_str(&tools_as(&s, "r2", pb::ToolFormat::OpenaiResponses, true).await.tools_json).unwrap();
    assert_eq!(responses[0]["type"], "tool_search", "Responses' search tool has no name to collide with");
}
