//! Inputs the fuzz targets (fuzz/, `scripts/fuzz.sh`) or their invariants turned up, replayed
//! through the real server.
mod common;
use common::*;
use serde_json::json;
use tonic::Code;
use tonic_types::StatusExt;
use toolrouter::pb;

fn pin(all: bool) -> pb::ToolConfig {
    pb::ToolConfig { pin: all, additional_search_text: String::new() }
}

/// The field paths of an INVALID_ARGUMENT status's BadRequest details.
fn violations(status: &tonic::Status) -> Vec<String> {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    status.get_details_bad_request().expect("BadRequest details").field_violations.iter().map(|v| v.field.clone()).collect()
}

async fn rejected(def: pb::AgentDefinition) -> Vec<String> {
    let s = TestServer::start().await;
    let req = pb::CreateAgentVersionRequest { agent_id: "a".into(), definition: Some(def), make_default: true };
    violations(&s.registry().create_agent_version(req).await.expect_err("rejected"))
}

/// search target, `{"offset": 4294967295}`: ranking reserved room for offset + limit
/// candidates, a 68 GB allocation that aborted the process.
#[tokio::test]
async fn discovery_at_the_largest_offset_answers_an_empty_page() {
    let s = TestServer::start().await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;

    let (page, is_error) = s.call_result("crm", "r1", "c1", "discover_tools", json!({"query": "customer", "offset": u64::from(u32::MAX)})).await;
    assert!(!is_error, "{page}");
    assert_eq!(page, json!({"detail": "summary", "tools": [], "total": 1, "next_offset": null}));

    let typed = s
        .discovery()
        .discover_tools(pb::DiscoverToolsRequest {
            agent: Some(agent_ref("crm")),
            query: "customer name".into(),
            offset: u32::MAX,
            limit: Some(u32::MAX),
            ..Default::default()
        })
        .await
        .expect("a page")
        .into_inner();
    assert!(typed.tools.is_empty());
    assert_eq!((typed.total, typed.next_offset), (1, None));
}

/// definition target: a tool an executor lists is not validated against the exposed names,
/// and a direct one named like a control tool or a pinned tool gave the model two tools of
/// one name (SPEC §3). The listed one is skipped, and says so.
#[tokio::test]
async fn a_listed_direct_tool_never_takes_a_name_already_exposed() {
    let listed = vec![
        tool("discover_tools", "Named like a control tool.", json!({"type": "object"})),
        tool("crm__customer_name", "Named like the pinned tool.", json!({"type": "object"})),
        tool("invoice_total", "A fine name.", json!({"type": "object"})),
    ];
    let exec = spawn_executor_listing(Behaviour::Echo, listed).await;
    let mut def = crm_definition("http://127.0.0.1:1");
    def.sources[0].tool_configs.insert("customer_name".into(), pin(true));
    def.sources.push(function_source("loose", &exec.endpoint(), vec![]));
    let s = TestServer::start().await;
    s.create("crm", def).await;

    let tools = s.model_tools("crm", run_ctx("r1")).await;
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["discover_tools", "describe_tool", "call_tool", "list_tool_groups", "list_tools", "invoice_total", "crm__customer_name"]);
    for name in ["discover_tools", "crm__customer_name"] {
        assert!(
            tools.diagnostics.iter().any(|d| d.contains(&format!("\"{name}\" skipped: its name is already exposed"))),
            "{name}: {:?}",
            tools.diagnostics
        );
    }
    let (content, is_error) = s.call_result("crm", "r1", "c1", "invoice_total", json!({"n": 1})).await;
    assert!(!is_error, "{content}");
    assert_eq!(content["tool"], "invoice_total");
    let (content, is_error) = s.call_result("crm", "r1", "c2", "discover_tools", json!({"query": "customer"})).await;
    assert!(!is_error && content["total"] == 1, "{content}");
}

/// definition target: a listed tool pinned by `"*"` whose canonical name a declared direct
/// tool already has stays grouped and discoverable, but is not pinned.
#[tokio::test]
async fn a_listed_tool_whose_canonical_name_is_taken_is_not_pinned() {
    let exec = spawn_executor_listing(Behaviour::Echo, vec![tool("restart", "Restart a service.", json!({"type": "object"}))]).await;
    let mut ops = function_source("ops-tools", &exec.endpoint(), vec![]);
    ops.tool_configs.insert("*".into(), pin(true));
    let def = pb::AgentDefinition {
        sources: vec![ops, client_source("direct", vec![tool("ops__restart", "A direct tool.", json!({"type": "object"}))])],
        groups: [("ops".to_string(), group("Operations", &["ops-tools"]))].into(),
        ..Default::default()
    };
    let s = TestServer::start().await;
    s.create("ops", def).await;

    let tools = s.model_tools("ops", run_ctx("r1")).await;
    let exposed: Vec<(&str, i32)> = tools.tools.iter().map(|t| (t.name.as_str(), t.kind)).filter(|(n, _)| *n == "ops__restart").collect();
    assert_eq!(exposed, [("ops__restart", pb::ModelToolKind::Direct as i32)]);
    assert!(tools.diagnostics.iter().any(|d| d.contains("\"restart\" not pinned")), "{:?}", tools.diagnostics);
    let (content, is_error) = s.call_result("ops", "r1", "c1", "list_tools", json!({"group": "ops"})).await;
    assert!(!is_error, "{content}");
    assert_eq!(content["tools"][0]["name"], "ops__restart");
}

/// definition target: validation took a tool's own `pin: false` over `"*": pin: true`, while
/// compilation pins it, so its canonical name escaped the exposed-name checks.
#[tokio::test]
async fn a_tool_pinned_by_star_is_checked_like_any_pinned_tool() {
    let mut def = crm_definition("http://127.0.0.1:1");
    def.sources[0].tool_configs.insert("*".into(), pin(true));
    def.sources[0].tool_configs.insert("customer_name".into(), pb::ToolConfig { pin: false, additional_search_text: "client".into() });
    def.sources.push(client_source("direct", vec![tool("crm__customer_name", "A direct tool.", json!({"type": "object"}))]));
    assert_eq!(rejected(def).await, ["definition.sources[1].client.tools[0].name"]);
}

/// definition target, protobuf round trip: a timeout with a second or more of nanos carried
/// into seconds past i64::MAX, and GetAgentVersion answered a negative timeout.
#[tokio::test]
async fn a_duration_with_a_second_or_more_of_nanos_is_refused() {
    let mut def = crm_definition("http://127.0.0.1:1");
    let Some(pb::tool_source::Kind::Function(f)) = def.sources[0].kind.as_mut() else { panic!("a function source") };
    f.tools[0].timeout = Some(prost_types::Duration { seconds: i64::MAX, nanos: 1_500_000_000 });
    assert_eq!(rejected(def).await, ["definition.sources[0].function.tools[0].timeout"]);
}
