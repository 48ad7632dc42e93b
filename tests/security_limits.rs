//! Limits (SPEC §9): each is tested at the limit (passes) and one over (refused).

mod common;

use common::*;
use prost::Message;
use serde_json::json;
use tonic::Code;
use tonic_types::StatusExt;
use toolrouter::auth::limits::RateLimit;
use toolrouter::config::ServerConfig;
use toolrouter::control::discovery::MAX_QUERY_BYTES;
use toolrouter::pb;

fn bad_request_fields(st: &tonic::Status) -> Vec<String> {
    st.get_details_bad_request().map(|b| b.field_violations.into_iter().map(|v| v.field).collect()).unwrap_or_default()
}

/// `make(n)` for the `n` that encodes to exactly `target` bytes.
fn exactly<M: Message>(target: usize, make: impl Fn(usize) -> M) -> M {
    (0..=target).map(&make).find(|m| m.encoded_len() == target).expect("a padding that hits the target size")
}

#[tokio::test]
async fn a_request_message_over_the_size_limit_is_refused_before_it_is_read() {
    let mut cfg = ServerConfig::for_tests();
    cfg.limits.max_message_bytes = 4096;
    let s = TestServer::start_with(cfg).await;
    let request = |target: usize| {
        exactly(target, |n| pb::GetModelToolsRequest {
            agent: Some(agent_ref("nobody")),
            run: Some(pb::RunContext { attributes: [("pad".to_string(), "x".repeat(n))].into(), ..Default::default() }),
            ..Default::default()
        })
    };
    let at = s.router().get_model_tools(request(4096)).await.unwrap_err();
    assert_eq!(at.code(), Code::NotFound, "at the limit the request is read (and the agent is looked up): {at:?}");
    let over = s.router().get_model_tools(request(4097)).await.unwrap_err();
    assert_eq!(over.code(), Code::OutOfRange, "{over:?}");
    assert!(over.message().contains("4096"), "{}", over.message());
}

#[tokio::test]
async fn a_query_over_the_limit_is_refused_by_the_typed_rpc_and_the_control_tool() {
    let s = TestServer::start().await;
    s.create("crm", crm_definition("http://127.0.0.1:1")).await;
    let query = |n: usize| "customer ".repeat(n / 9 + 1)[..n].to_string();
    let typed = |q: String| {
        let mut d = s.discovery();
        async move { d.discover_tools(pb::DiscoverToolsRequest { agent: Some(agent_ref("crm")), query: q, ..Default::default() }).await }
    };
    let ok = typed(query(MAX_QUERY_BYTES)).await.expect("a query at the limit is answered").into_inner();
    assert_eq!(ok.total, 1);
    let over = typed(query(MAX_QUERY_BYTES + 1)).await.unwrap_err();
    assert_eq!(over.code(), Code::InvalidArgument);
    assert!(over.message().contains(&MAX_QUERY_BYTES.to_string()), "{}", over.message());

    let (content, is_error) = s.call_result("crm", "r1", "q1", "discover_tools", json!({"query": query(MAX_QUERY_BYTES)})).await;
    assert!(!is_error, "{content}");
    let (content, is_error) = s.call_result("crm", "r1", "q2", "discover_tools", json!({"query": query(MAX_QUERY_BYTES + 1)})).await;
    assert!(is_error, "the model is told its query is too long: {content}");
}

/// `{"type":"object","not":{"not":…{}}}` nested `depth` levels deep.
fn schema_of_depth(depth: usize) -> String {
    let mut s = "{}".to_string();
    for _ in 1..depth - 1 {
        s = format!(r#"{{"not":{s}}}"#);
    }
    format!(r#"{{"type":"object","not":{s}}}"#)
}

fn client_def_with_schema(schema: String) -> pb::AgentDefinition {
    let t = pb::ToolDeclaration { name: "lookup".into(), description: "Look something up.".into(), input_schema_json: schema, ..Default::default() };
    pb::AgentDefinition { sources: vec![client_source("app", vec![t])], ..Default::default() }
}

async fn create(s: &TestServer, agent: &str, def: pb::AgentDefinition) -> Result<pb::AgentVersion, tonic::Status> {
    s.registry()
        .create_agent_version(pb::CreateAgentVersionRequest { agent_id: agent.into(), definition: Some(def), make_default: true })
        .await
        .map(|r| r.into_inner())
}

#[tokio::test]
async fn a_schema_nested_deeper_than_the_limit_is_invalid_with_its_field_path() {
    let mut cfg = ServerConfig::for_tests();
    cfg.limits.max_schema_depth = 8;
    let s = TestServer::start_with(cfg).await;
    assert_eq!(toolrouter::catalog::validate::json_depth(&schema_of_depth(8)), 8);
    create(&s, "deep", client_def_with_schema(schema_of_depth(8))).await.expect("depth 8 is accepted");
    let st = create(&s, "deeper", client_def_with_schema(schema_of_depth(9))).await.unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert_eq!(bad_request_fields(&st), ["definition.sources[0].client.tools[0].input_schema_json"]);
    assert!(st.message().contains("deeper than 8"), "{}", st.message());
}

#[tokio::test]
async fn a_schema_larger_than_the_limit_is_invalid_with_its_field_path() {
    let mut cfg = ServerConfig::for_tests();
    cfg.limits.max_schema_bytes = 2048;
    let s = TestServer::start_with(cfg).await;
    let schema = |n: usize| {
        let head = r#"{"type":"object","description":""#;
        format!(r#"{head}{}"}}"#, "x".repeat(n - head.len() - 2))
    };
    assert_eq!(schema(2048).len(), 2048);
    create(&s, "at", client_def_with_schema(schema(2048))).await.expect("2048 bytes are accepted");
    let mut out_schema = client_def_with_schema(String::new());
    out_schema.sources[0].kind = Some(pb::tool_source::Kind::Client(pb::ClientSource {
        tools: vec![pb::ToolDeclaration { name: "lookup".into(), description: "d".into(), output_schema_json: schema(2049), ..Default::default() }],
    }));
    for (def, field) in [(client_def_with_schema(schema(2049)), "input_schema_json"), (out_schema, "output_schema_json")] {
        let st = create(&s, "over", def).await.unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument);
        assert_eq!(bad_request_fields(&st), [format!("definition.sources[0].client.tools[0].{field}")]);
        assert!(st.message().contains("2049 bytes"), "{}", st.message());
    }
}

#[tokio::test]
async fn a_definition_larger_than_the_limit_is_invalid() {
    let mut cfg = ServerConfig::for_tests();
    cfg.max_definition_bytes = 8192;
    let s = TestServer::start_with(cfg).await;
    let def = |target: usize| {
        exactly(target, |n| {
            let mut d = crm_definition("http://127.0.0.1:1");
            d.instructions = "i".repeat(n);
            d
        })
    };
    create(&s, "at", def(8192)).await.expect("a definition at the limit is accepted");
    let st = create(&s, "over", def(8193)).await.unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert_eq!(bad_request_fields(&st), ["definition"]);
    assert!(st.message().contains("8193 bytes"), "{}", st.message());
}

/// `{"customer_id":42,"pad":"…"}` of exactly `n` bytes.
fn arguments_of(n: usize) -> String {
    let head = r#"{"customer_id":42,"pad":""#;
    let a = format!(r#"{head}{}"}}"#, "x".repeat(n - head.len() - 2));
    assert_eq!(a.len(), n);
    a
}

#[tokio::test]
async fn tool_call_arguments_over_the_limit_are_invalid_in_every_rpc_that_takes_them() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let mut cfg = ServerConfig::for_tests();
    cfg.limits.max_arguments_bytes = 512;
    let s = TestServer::start_with(cfg).await;
    let mut def = crm_definition(&exec.endpoint());
    def.groups.clear();
    function_of(&mut def.sources[0]).tools[0].requires_approval = true;
    s.create("crm", def).await;

    let at = s.handle_raw("crm", run_ctx("r1"), "a1", "customer_name", &arguments_of(512)).await.expect("512 bytes are accepted");
    let deferred = deferred_of(&at);
    let st = s.handle_raw("crm", run_ctx("r1"), "a2", "customer_name", &arguments_of(513)).await.unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert_eq!(bad_request_fields(&st), ["call.arguments_json"]);

    let many = |second: String| pb::HandleToolCallsRequest {
        agent: Some(agent_ref("crm")),
        run: Some(run_ctx("r1")),
        calls: vec![
            pb::ToolCall { tool_call_id: "m1".into(), tool_name: "customer_name".into(), arguments_json: "{\"customer_id\":1}".into() },
            pb::ToolCall { tool_call_id: "m2".into(), tool_name: "customer_name".into(), arguments_json: second },
        ],
        ..Default::default()
    };
    s.router().handle_tool_calls(many(arguments_of(512))).await.expect("512 bytes are accepted");
    let st = s.router().handle_tool_calls(many(arguments_of(513))).await.unwrap_err();
    assert_eq!(bad_request_fields(&st), ["calls[1].arguments_json"]);

    let approve = |a: String| pb::resolve_deferred_request::Resolution::Approve(pb::Approve { arguments_json: Some(a) });
    let st = s.resolve(&deferred.deferred_id, approve(arguments_of(513))).await.unwrap_err();
    assert_eq!(bad_request_fields(&st), ["approve.arguments_json"]);
    let r = s.resolve(&deferred.deferred_id, approve(arguments_of(512))).await.expect("512 bytes are accepted");
    assert!(!r.is_error, "{r:?}");
}

#[tokio::test]
async fn a_tenant_over_its_request_rate_gets_resource_exhausted_with_retry_info_and_others_do_not() {
    let keys = KeyFile::with_keys(&[("rate-key-a", "acme"), ("rate-key-b", "globex")]);
    let mut cfg = config_with_keys(&keys);
    // A refill this slow adds nothing during the test: exactly the burst passes.
    cfg.limits.rate = RateLimit { per_second: 0.001, burst: 3 };
    let s = TestServer::start_with(cfg).await;
    for i in 0..3 {
        s.registry_as("rate-key-a")
            .list_agents(pb::ListAgentsRequest::default())
            .await
            .unwrap_or_else(|e| panic!("call {i} is within the burst: {e:?}"));
    }
    let st = s.registry_as("rate-key-a").list_agents(pb::ListAgentsRequest::default()).await.unwrap_err();
    assert_eq!(st.code(), Code::ResourceExhausted);
    let retry = st.get_details_retry_info().expect("RetryInfo detail").retry_delay.expect("a delay");
    assert!(retry.as_secs() > 0, "{retry:?}");
    // Another tenant has its own bucket; health checks are not limited.
    s.registry_as("rate-key-b").list_agents(pb::ListAgentsRequest::default()).await.expect("globex is not limited by acme");
    let mut health = tonic_health::pb::health_client::HealthClient::new(s.channel.clone());
    health.check(tonic_health::pb::HealthCheckRequest::default()).await.expect("health is not rate limited");
}

#[tokio::test]
async fn a_tenant_at_its_live_run_limit_cannot_start_another_run_until_one_ends() {
    let keys = KeyFile::with_keys(&[("runs-key-a", "acme"), ("runs-key-b", "globex")]);
    let mut cfg = config_with_keys(&keys);
    cfg.limits.max_runs_per_tenant = 2;
    let s = TestServer::start_with(cfg).await;
    s.create_as("runs-key-a", "crm", crm_definition("http://127.0.0.1:1")).await;
    s.create_as("runs-key-b", "crm", crm_definition("http://127.0.0.1:1")).await;
    let tools = |key: &'static str, run: &str| {
        let mut r = s.router_as(key);
        let req = pb::GetModelToolsRequest { agent: Some(agent_ref("crm")), run: Some(run_ctx(run)), ..Default::default() };
        async move { r.get_model_tools(req).await }
    };
    tools("runs-key-a", "r1").await.expect("run 1");
    tools("runs-key-a", "r2").await.expect("run 2: at the limit");
    let st = tools("runs-key-a", "r3").await.unwrap_err();
    assert_eq!(st.code(), Code::ResourceExhausted, "{st:?}");
    assert!(st.message().contains("EndRun"), "{}", st.message());
    tools("runs-key-a", "r1").await.expect("a live run goes on");
    tools("runs-key-a", "").await.expect("calls outside any run are not limited");
    tools("runs-key-b", "r3").await.expect("another tenant has its own limit");
    s.router_as("runs-key-a").end_run(pb::EndRunRequest { agent_id: "crm".into(), run_id: "r1".into() }).await.unwrap();
    tools("runs-key-a", "r3").await.expect("a run ended frees a place");
}
