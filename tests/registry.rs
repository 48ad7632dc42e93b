mod common;
use common::*;
use serde_json::json;
use tonic::Code;
use tonic_types::StatusExt;
use toolrouter::pb;

fn create_req(agent: &str, def: pb::AgentDefinition, make_default: bool) -> pb::CreateAgentVersionRequest {
    pb::CreateAgentVersionRequest { agent_id: agent.into(), definition: Some(def), make_default }
}

/// The field paths of an INVALID_ARGUMENT status's BadRequest details.
fn violations(status: &tonic::Status) -> Vec<String> {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    status.get_details_bad_request().expect("BadRequest details").field_violations.iter().map(|v| v.field.clone()).collect()
}

async fn rejected(def: pb::AgentDefinition) -> Vec<String> {
    let s = TestServer::start().await;
    let err = s.registry().create_agent_version(create_req("a", def, true)).await.expect_err("rejected");
    violations(&err)
}

fn crm() -> pb::AgentDefinition {
    crm_definition("http://127.0.0.1:1")
}

#[tokio::test]
async fn versions_are_numbered_and_the_first_is_default() {
    let s = TestServer::start().await;
    let v1 = s.registry().create_agent_version(create_req("a", crm(), false)).await.unwrap().into_inner();
    assert_eq!((v1.version, v1.is_default), (1, true));
    let mut d2 = crm();
    d2.instructions = "v2".into();
    let v2 = s.registry().create_agent_version(create_req("a", d2, false)).await.unwrap().into_inner();
    assert_eq!((v2.version, v2.is_default), (2, false));
    let got = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "a".into(), version: 0 }).await.unwrap().into_inner();
    assert_eq!(got.version, 1);
    let set = s.registry().set_default_version(pb::SetDefaultVersionRequest { agent_id: "a".into(), version: 2 }).await.unwrap().into_inner();
    assert!(set.is_default);
    let got = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "a".into(), version: 0 }).await.unwrap().into_inner();
    assert_eq!((got.version, got.definition.unwrap().instructions.as_str()), (2, "v2"));
}

#[tokio::test]
async fn identical_create_returns_the_latest_version() {
    let s = TestServer::start().await;
    let v1 = s.registry().create_agent_version(create_req("a", crm(), true)).await.unwrap().into_inner();
    let again = s.registry().create_agent_version(create_req("a", crm(), true)).await.unwrap().into_inner();
    assert_eq!(again.version, v1.version);
    assert_eq!(again.create_time, v1.create_time);
}

#[tokio::test]
async fn make_default_moves_the_default_and_versions_stay_immutable() {
    let s = TestServer::start().await;
    s.registry().create_agent_version(create_req("a", crm(), true)).await.unwrap();
    let mut d2 = crm();
    d2.instructions = "second".into();
    let v2 = s.registry().create_agent_version(create_req("a", d2, true)).await.unwrap().into_inner();
    assert!(v2.is_default);
    let v1 = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "a".into(), version: 1 }).await.unwrap().into_inner();
    assert_eq!(v1.definition.unwrap().instructions, "");
    assert!(!v1.is_default);
}

#[tokio::test]
async fn unknown_agent_or_version_is_not_found() {
    let s = TestServer::start().await;
    let e = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "nope".into(), version: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    s.create("a", crm()).await;
    let e = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "a".into(), version: 9 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = s.registry().set_default_version(pb::SetDefaultVersionRequest { agent_id: "a".into(), version: 9 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = s.registry().delete_agent(pb::DeleteAgentRequest { agent_id: "nope".into() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[tokio::test]
async fn list_agents_and_versions_paginate() {
    let s = TestServer::start().await;
    for i in 0..5 {
        s.create(&format!("agent-{i}"), crm()).await;
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = s.registry().list_agents(pb::ListAgentsRequest { page_size: 2, page_token: token.clone() }).await.unwrap().into_inner();
        assert!(page.agents.len() <= 2);
        seen.extend(page.agents.into_iter().map(|a| a.agent_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, ["agent-0", "agent-1", "agent-2", "agent-3", "agent-4"]);

    for i in 0..3 {
        let mut d = crm();
        d.instructions = format!("v{i}");
        s.registry().create_agent_version(create_req("agent-0", d, false)).await.unwrap();
    }
    let p1 = s
        .registry()
        .list_agent_versions(pb::ListAgentVersionsRequest { agent_id: "agent-0".into(), page_size: 3, page_token: String::new() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p1.versions.iter().map(|v| v.version).collect::<Vec<_>>(), [1, 2, 3]);
    let p2 = s
        .registry()
        .list_agent_versions(pb::ListAgentVersionsRequest { agent_id: "agent-0".into(), page_size: 3, page_token: p1.next_page_token })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p2.versions.iter().map(|v| v.version).collect::<Vec<_>>(), [4]);
    assert!(p2.next_page_token.is_empty());
    let bad = s.registry().list_agents(pb::ListAgentsRequest { page_size: 2, page_token: "zz!".into() }).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn delete_agent_removes_it() {
    let s = TestServer::start().await;
    s.create("a", crm()).await;
    s.registry().delete_agent(pb::DeleteAgentRequest { agent_id: "a".into() }).await.unwrap();
    let e = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "a".into(), version: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = s.router().get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("a")), run: None, ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[tokio::test]
async fn definitions_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("toolrouter-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("store.db");
    let _ = std::fs::remove_file(&file);
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.store = format!("sqlite://{}", file.display());
    {
        let s = TestServer::start_with(cfg.clone()).await;
        s.create("a", crm()).await;
        s.server.shutdown().await;
    }
    let s = TestServer::start_with(cfg).await;
    let v = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "a".into(), version: 0 }).await.unwrap().into_inner();
    assert_eq!(v.version, 1);
    assert_eq!(v.definition.unwrap().groups["crm"].description, "Customer records");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn agent_id_must_be_valid() {
    let s = TestServer::start().await;
    for bad in ["", "has space", "-lead", &"a".repeat(129)] {
        let e = s.registry().create_agent_version(create_req(bad, crm(), true)).await.unwrap_err();
        assert_eq!(violations(&e), ["agent_id"], "{bad:?}");
    }
}

#[tokio::test]
async fn missing_definition_or_source_kind_is_invalid() {
    let s = TestServer::start().await;
    let e = s
        .registry()
        .create_agent_version(pb::CreateAgentVersionRequest { agent_id: "a".into(), definition: None, make_default: true })
        .await
        .unwrap_err();
    assert_eq!(violations(&e), ["definition"]);
    let def = pb::AgentDefinition { sources: vec![pb::ToolSource { id: "s".into(), ..Default::default() }], ..Default::default() };
    assert_eq!(rejected(def).await, ["definition.sources[0].kind"]);
}

#[tokio::test]
async fn group_name_rules_are_enforced() {
    for bad in ["1crm", "a__b", "crm tools", &"g".repeat(33), "_x"] {
        let mut d = crm();
        let g = d.groups.remove("crm").unwrap();
        d.groups.insert(bad.to_string(), g);
        assert_eq!(rejected(d).await, [format!("definition.groups[{bad:?}]")], "{bad}");
    }
}

#[tokio::test]
async fn group_description_must_be_non_blank_and_at_most_512_chars() {
    for bad in ["   ".to_string(), "x".repeat(513)] {
        let mut d = crm();
        d.groups.get_mut("crm").unwrap().description = bad;
        assert_eq!(rejected(d).await, ["definition.groups[\"crm\"].description"]);
    }
    let mut d = crm();
    d.groups.get_mut("crm").unwrap().description = "é".repeat(512);
    let s = TestServer::start().await;
    s.create("a", d).await;
}

#[tokio::test]
async fn tool_names_are_validated() {
    for bad in ["", "has space", "dot.ted", &"t".repeat(65)] {
        let mut d = crm();
        function_of(&mut d.sources[0]).tools[0].name = bad.to_string();
        assert_eq!(rejected(d).await, ["definition.sources[0].function.tools[0].name"], "{bad:?}");
    }
}

#[tokio::test]
async fn tool_description_at_most_8192_chars() {
    let mut d = crm();
    function_of(&mut d.sources[0]).tools[0].description = "d".repeat(8193);
    assert_eq!(rejected(d).await, ["definition.sources[0].function.tools[0].description"]);
}

#[tokio::test]
async fn duplicate_local_names_within_a_group_across_sources_are_rejected() {
    let mut d = crm();
    d.sources.push(client_source("more-crm", vec![customer_name_tool()]));
    d.groups.get_mut("crm").unwrap().source_ids.push("more-crm".into());
    assert_eq!(rejected(d).await, ["definition.sources[1].client.tools[0].name"]);
}

#[tokio::test]
async fn different_groups_may_reuse_a_local_name() {
    let mut d = crm();
    d.sources.push(client_source("billing-tools", vec![customer_name_tool()]));
    d.groups.insert("billing".into(), group("Billing", &["billing-tools"]));
    TestServer::start().await.create("a", d).await;
}

#[tokio::test]
async fn duplicate_source_ids_are_rejected() {
    let mut d = crm();
    d.sources.push(client_source("crm-tools", vec![tool("other", "x", json!({"type": "object"}))]));
    assert!(rejected(d).await.contains(&"definition.sources[1].id".to_string()));
}

#[tokio::test]
async fn a_source_in_two_groups_is_rejected() {
    let mut d = crm();
    d.groups.insert("other".into(), group("Other", &["crm-tools"]));
    assert_eq!(rejected(d).await, ["definition.groups[\"other\"].source_ids[0]"]);
}

#[tokio::test]
async fn unknown_source_ids_in_a_group_are_rejected() {
    let mut d = crm();
    d.groups.get_mut("crm").unwrap().source_ids.push("ghost".into());
    assert_eq!(rejected(d).await, ["definition.groups[\"crm\"].source_ids[1]"]);
}

#[tokio::test]
async fn control_names_must_differ_from_each_other() {
    let mut d = crm();
    d.control =
        Some(pb::ControlConfig { names: Some(pb::ControlNames { describe: "discover_tools".into(), ..Default::default() }), ..Default::default() });
    assert_eq!(rejected(d).await, ["definition.control.names.describe"]);
}

#[tokio::test]
async fn control_names_must_not_collide_with_direct_tools() {
    let mut d = crm();
    d.sources.push(client_source("direct", vec![tool("call_tool", "x", json!({"type": "object"}))]));
    assert_eq!(rejected(d).await, ["definition.sources[1].client.tools[0].name"]);
}

#[tokio::test]
async fn control_names_must_not_collide_with_pinned_canonical_names() {
    let mut d = crm();
    d.sources[0].tool_configs.insert("customer_name".into(), pb::ToolConfig { pin: true, additional_search_text: String::new() });
    d.control = Some(pb::ControlConfig {
        names: Some(pb::ControlNames { list_tools: "crm__customer_name".into(), ..Default::default() }),
        ..Default::default()
    });
    assert_eq!(rejected(d).await, ["definition.sources[0].function.tools[0].name"]);
}

#[tokio::test]
async fn max_results_must_be_1_to_100() {
    for (n, ok) in [(1, true), (100, true), (101, false)] {
        let mut d = crm();
        d.control = Some(pb::ControlConfig { max_results: n, ..Default::default() });
        let s = TestServer::start().await;
        let r = s.registry().create_agent_version(create_req("a", d, true)).await;
        if ok {
            r.unwrap();
        } else {
            assert_eq!(violations(&r.unwrap_err()), ["definition.control.max_results"]);
        }
    }
}

#[tokio::test]
async fn max_search_bytes_must_be_1024_to_32768() {
    for (n, ok) in [(1023, false), (1024, true), (32768, true), (32769, false)] {
        let mut d = crm();
        d.control = Some(pb::ControlConfig { max_search_bytes: n, ..Default::default() });
        let s = TestServer::start().await;
        let r = s.registry().create_agent_version(create_req("a", d, true)).await;
        if ok {
            r.unwrap();
        } else {
            assert_eq!(violations(&r.unwrap_err()), ["definition.control.max_search_bytes"]);
        }
    }
}

#[tokio::test]
async fn schemas_that_are_not_valid_json_schema_are_rejected() {
    let bads = [
        "{not json".to_string(),
        json!({"type": "objekt"}).to_string(),
        json!({"type": "object", "properties": {"x": {"type": 5}}}).to_string(),
        json!({"type": "string"}).to_string(),
        json!({"$schema": "https://example.com/custom", "type": "object"}).to_string(),
        json!({"type": "object", "properties": {"x": {"$ref": "https://example.com/remote.json"}}}).to_string(),
    ];
    for bad in bads {
        let mut d = crm();
        function_of(&mut d.sources[0]).tools[0].input_schema_json = bad.clone();
        assert_eq!(rejected(d).await, ["definition.sources[0].function.tools[0].input_schema_json"], "{bad}");
    }
}

#[tokio::test]
async fn draft_7_and_2019_09_schemas_are_accepted_when_declared() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let call = |id: serde_json::Value| json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": id}});
    for draft in ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema"] {
        let mut d = crm_definition(&exec.endpoint());
        let schema = json!({"$schema": draft, "type": "object", "definitions": {"id": {"type": "integer"}}, "properties": {"customer_id": {"$ref": "#/definitions/id"}}});
        function_of(&mut d.sources[0]).tools[0].input_schema_json = schema.to_string();
        let s = TestServer::start().await;
        assert_eq!(s.create("a", d).await.version, 1, "{draft}");
        // The schema is in force as declared: its `$ref` into `definitions` checks the arguments.
        let (bad, is_error) = s.call_result("a", "r1", "c1", "call_tool", call(json!("forty-two"))).await;
        assert!(is_error && bad["error"] == "invalid_arguments", "{draft}: {bad}");
        assert_eq!(s.call_result("a", "r1", "c2", "call_tool", call(json!(42))).await, (json!("Ada"), false), "{draft}");
    }
    assert_eq!(exec.calls(), 2, "only the valid calls ran");
}

#[tokio::test]
async fn oversized_definitions_are_rejected() {
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.max_definition_bytes = 2_000;
    let s = TestServer::start_with(cfg).await;
    let mut d = crm();
    d.instructions = "x".repeat(3_000);
    let e = s.registry().create_agent_version(create_req("a", d, true)).await.unwrap_err();
    assert_eq!(violations(&e), ["definition"]);
}

#[tokio::test]
async fn every_violation_is_reported_at_once() {
    let mut d = crm();
    d.groups.get_mut("crm").unwrap().description = String::new();
    d.control = Some(pb::ControlConfig { max_results: 500, ..Default::default() });
    let v = rejected(d).await;
    assert!(v.contains(&"definition.groups[\"crm\"].description".to_string()) && v.contains(&"definition.control.max_results".to_string()), "{v:?}");
}

#[tokio::test]
async fn exposed_names_longer_than_64_characters_are_rejected() {
    let mut d = crm();
    let long = "t".repeat(60);
    function_of(&mut d.sources[0]).tools[0].name = long.clone();
    d.sources[0].tool_configs.insert("*".into(), pb::ToolConfig { pin: true, additional_search_text: String::new() });
    assert_eq!(rejected(d).await, ["definition.sources[0].function.tools[0].name"]);
}

#[tokio::test]
async fn health_service_reports_serving() {
    let s = TestServer::start().await;
    let mut h = tonic_health::pb::health_client::HealthClient::new(s.channel.clone());
    let r = h.check(tonic_health::pb::HealthCheckRequest { service: "toolrouter.v1.Router".into() }).await.unwrap().into_inner();
    assert_eq!(r.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
}

/// Asks server reflection (v1) one question and returns the encoded file descriptors it answers.
async fn reflect(
    s: &TestServer,
    request: tonic_reflection::pb::v1::server_reflection_request::MessageRequest,
) -> Vec<prost_types::FileDescriptorProto> {
    use prost::Message;
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient, server_reflection_response::MessageResponse,
    };
    let mut client = ServerReflectionClient::new(s.channel.clone());
    let req = ServerReflectionRequest { host: String::new(), message_request: Some(request) };
    let mut answers = client.server_reflection_info(tokio_stream::iter(vec![req])).await.expect("reflection answers").into_inner();
    match answers.message().await.expect("a reflection answer").expect("one message").message_response {
        Some(MessageResponse::FileDescriptorResponse(files)) => files
            .file_descriptor_proto
            .iter()
            .map(|raw| prost_types::FileDescriptorProto::decode(raw.as_slice()).expect("a file descriptor"))
            .collect(),
        other => panic!("expected file descriptors, got {other:?}"),
    }
}

#[tokio::test]
async fn reflection_serves_the_error_details_that_a_refusal_carries() {
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    let s = TestServer::start().await;
    let mut def = crm();
    def.groups.get_mut("crm").expect("the crm group").description.clear();
    let refusal = s.registry().create_agent_version(create_req("a", def, true)).await.expect_err("rejected");
    assert!(!violations(&refusal).is_empty());

    // What grpcurl asks to describe google.rpc.BadRequest (and to print a refusal's details).
    let files = reflect(&s, MessageRequest::FileContainingSymbol("google.rpc.BadRequest".into())).await;
    let details = files.iter().find(|f| f.name() == "google/rpc/error_details.proto").expect("google/rpc/error_details.proto is served");
    assert_eq!(details.package(), "google.rpc");
    let bad_request = details.message_type.iter().find(|m| m.name() == "BadRequest").expect("BadRequest is in the file");
    assert!(bad_request.nested_type.iter().any(|m| m.name() == "FieldViolation"));
    assert!(details.message_type.iter().any(|m| m.name() == "RetryInfo"), "the rate limit's RetryInfo is described too");

    // Every import it names is served under that name, and so is google.rpc.Status.
    for dependency in &details.dependency {
        let by_name = reflect(&s, MessageRequest::FileByFilename(dependency.clone())).await;
        assert!(by_name.iter().any(|f| f.name() == dependency), "{dependency} is served");
    }
    let status = reflect(&s, MessageRequest::FileContainingSymbol("google.rpc.Status".into())).await;
    assert!(status.iter().any(|f| f.name() == "google/rpc/status.proto"));
}
