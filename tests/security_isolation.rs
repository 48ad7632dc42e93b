//! Tenant isolation (SPEC §2, §9): every resource is scoped to the caller's tenant; another
//! tenant's agent is NOT_FOUND on every RPC, with the same message as an agent that never
//! existed, so nothing about it leaks.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use tonic::{Code, Status};
use toolrouter::pb;

const KEY_A: &str = "tr-iso-key-acme-2b7c";
const KEY_B: &str = "tr-iso-key-globex-8e41";
const ACME: &str = "acme";
const GLOBEX: &str = "globex";

/// The CRM definition plus an approval-gated `refund`, so there are deferred records.
fn crm_with_refund(endpoint: &str) -> pb::AgentDefinition {
    let mut def = crm_definition(endpoint);
    let mut refund = tool("refund", "Refund a payment.", json!({"type": "object", "properties": {"amount": {"type": "integer"}}}));
    refund.requires_approval = true;
    function_of(&mut def.sources[0]).tools.push(refund);
    def
}

fn call_tool(tool: &str, args: serde_json::Value) -> serde_json::Value {
    json!({"group": "crm", "tool": tool, "arguments": args})
}

/// Tenant acme's state: agent `crm` with two versions (default 1), run `run-1` pinned, a
/// pending approval. Returns the server, its key file and the deferred id.
async fn acme_world() -> (TestServer, KeyFile, ExecutorHandle, String) {
    let exec = spawn_executor(Behaviour::Echo).await;
    let (s, keys) = TestServer::start_with_keys(&[(KEY_A, ACME), (KEY_B, GLOBEX)]).await;
    s.create_as(KEY_A, "crm", crm_with_refund(&exec.endpoint())).await;
    let mut v2 = crm_with_refund(&exec.endpoint());
    v2.instructions = "version two".into();
    s.registry_as(KEY_A)
        .create_agent_version(pb::CreateAgentVersionRequest { agent_id: "crm".into(), definition: Some(v2), make_default: false })
        .await
        .unwrap();
    let out = s.call_as(KEY_A, "crm", run_ctx("run-1"), "c1", "call_tool", call_tool("refund", json!({"amount": 5}))).await.unwrap();
    let deferred = deferred_of(&out).deferred_id;
    (s, keys, exec, deferred)
}

/// What tenant globex gets from every RPC naming `agent` (and `deferred_id`).
async fn every_rpc(s: &TestServer, agent: &str, deferred_id: &str) -> Vec<(&'static str, Status)> {
    let a = || Some(agent_ref(agent));
    let run = || Some(run_ctx("run-1"));
    let call = || {
        Some(pb::ToolCall {
            tool_call_id: "g1".into(),
            tool_name: "call_tool".into(),
            arguments_json: call_tool("customer_name", json!({"customer_id": 42})).to_string(),
        })
    };
    let mut reg = s.registry_as(KEY_B);
    let mut disc = s.discovery_as(KEY_B);
    let mut rt = s.router_as(KEY_B);
    let mut out: Vec<(&'static str, Status)> = Vec::new();
    let mut push = |name: &'static str, r: Result<(), Status>| out.push((name, r.expect_err(name)));
    push("GetAgentVersion(default)", reg.get_agent_version(pb::GetAgentVersionRequest { agent_id: agent.into(), version: 0 }).await.map(drop));
    push("GetAgentVersion(2)", reg.get_agent_version(pb::GetAgentVersionRequest { agent_id: agent.into(), version: 2 }).await.map(drop));
    push("ListAgentVersions", reg.list_agent_versions(pb::ListAgentVersionsRequest { agent_id: agent.into(), ..Default::default() }).await.map(drop));
    push("SetDefaultVersion", reg.set_default_version(pb::SetDefaultVersionRequest { agent_id: agent.into(), version: 2 }).await.map(drop));
    push("DeleteAgent", reg.delete_agent(pb::DeleteAgentRequest { agent_id: agent.into() }).await.map(drop));
    push(
        "DiscoverTools",
        disc.discover_tools(pb::DiscoverToolsRequest { agent: a(), run: run(), query: "customer".into(), ..Default::default() }).await.map(drop),
    );
    push(
        "DescribeTool",
        disc.describe_tool(pb::DescribeToolRequest { agent: a(), run: run(), group: "crm".into(), tool: "customer_name".into() }).await.map(drop),
    );
    push("ListToolGroups", disc.list_tool_groups(pb::ListToolGroupsRequest { agent: a(), run: run(), ..Default::default() }).await.map(drop));
    push("ListTools", disc.list_tools(pb::ListCatalogToolsRequest { agent: a(), run: run(), ..Default::default() }).await.map(drop));
    push("GetModelTools", rt.get_model_tools(pb::GetModelToolsRequest { agent: a(), run: run(), ..Default::default() }).await.map(drop));
    push(
        "HandleToolCall",
        rt.handle_tool_call(pb::HandleToolCallRequest { agent: a(), run: run(), call: call(), ..Default::default() }).await.map(drop),
    );
    push(
        "HandleToolCalls",
        rt.handle_tool_calls(pb::HandleToolCallsRequest { agent: a(), run: run(), calls: vec![call().unwrap()], ..Default::default() })
            .await
            .map(drop),
    );
    let approve = Some(pb::resolve_deferred_request::Resolution::Approve(pb::Approve::default()));
    push(
        "ResolveDeferred",
        rt.resolve_deferred(pb::ResolveDeferredRequest { deferred_id: deferred_id.into(), resolution: approve, ..Default::default() })
            .await
            .map(drop),
    );
    push("ListDeferred", rt.list_deferred(pb::ListDeferredRequest { agent_id: agent.into(), ..Default::default() }).await.map(drop));
    push("EndRun", rt.end_run(pb::EndRunRequest { agent_id: agent.into(), run_id: "run-1".into() }).await.map(drop));
    out
}

#[tokio::test]
async fn another_tenants_agent_is_not_found_on_every_rpc_exactly_like_an_agent_that_never_existed() {
    let (s, _keys, exec, deferred) = acme_world().await;
    let calls_before = exec.calls();
    // Same length as the real ones, so messages can be compared after substitution.
    let absent_deferred = "0".repeat(deferred.len());
    let theirs = every_rpc(&s, "crm", &deferred).await;
    let never = every_rpc(&s, "crx", &absent_deferred).await;
    assert_eq!(theirs.len(), 15, "every RPC that names an agent or a deferred record");
    for ((rpc, got), (_, baseline)) in theirs.iter().zip(&never) {
        assert_eq!(got.code(), Code::NotFound, "{rpc}: {got:?}");
        let expected = baseline.message().replace("crx", "crm").replace(&absent_deferred, &deferred);
        assert_eq!(got.message(), expected, "{rpc}: the message says no more than for an absent agent");
        assert_eq!(got.details(), baseline.details(), "{rpc}: no more details than for an absent agent");
        for leak in ["customer_name", "refund", "Customer records", "version two", ACME] {
            assert!(!got.message().contains(leak), "{rpc} leaks {leak:?}: {}", got.message());
        }
    }
    assert_eq!(exec.calls(), calls_before, "nothing ran for the other tenant");

    // ListAgents shows the other tenant nothing.
    let listed = s.registry_as(KEY_B).list_agents(pb::ListAgentsRequest::default()).await.unwrap().into_inner();
    assert!(listed.agents.is_empty());

    // And acme's state is untouched: both versions, default 1, the run pinned, the approval pending.
    let mut reg = s.registry_as(KEY_A);
    let versions = reg.list_agent_versions(pb::ListAgentVersionsRequest { agent_id: "crm".into(), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!(versions.versions.len(), 2);
    assert_eq!(reg.get_agent_version(pb::GetAgentVersionRequest { agent_id: "crm".into(), version: 0 }).await.unwrap().into_inner().version, 1);
    let pending = s
        .router_as(KEY_A)
        .list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), state: pb::DeferredState::Pending as i32, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(pending.records.len(), 1);
    assert_eq!(pending.records[0].call.as_ref().unwrap().deferred_id, deferred);
    let store = s.server.router.registry().store().clone();
    assert_eq!(store.run_version(ACME, "crm", "run-1", 0).await.unwrap(), Some(1), "acme's run is still pinned");
}

#[tokio::test]
async fn the_same_agent_id_in_two_tenants_is_two_agents_with_their_own_versions_runs_and_outcomes() {
    let (s, _keys, exec_a, deferred) = acme_world().await;
    let exec_b = spawn_executor(Behaviour::Echo).await;
    // Globex creates its own `crm`: version 1 of its own agent, acme's is unchanged.
    let v = s.create_as(KEY_B, "crm", crm_with_refund(&exec_b.endpoint())).await;
    assert_eq!((v.version, v.is_default), (1, true));
    let acme_versions =
        s.registry_as(KEY_A).list_agent_versions(pb::ListAgentVersionsRequest { agent_id: "crm".into(), ..Default::default() }).await.unwrap();
    assert_eq!(acme_versions.into_inner().versions.len(), 2);

    // Same run id and tool call id in both tenants: each gets its own execution and outcome.
    let args = call_tool("customer_name", json!({"customer_id": 42}));
    let a = s.call_as(KEY_A, "crm", run_ctx("run-1"), "same-id", "call_tool", args.clone()).await.unwrap();
    let b = s.call_as(KEY_B, "crm", run_ctx("run-1"), "same-id", "call_tool", args).await.unwrap();
    assert_eq!(result_of(&a), (json!("Ada"), false));
    assert_eq!(result_of(&b), (json!("Ada"), false));
    assert_eq!((exec_a.calls(), exec_b.calls()), (1, 1), "globex's call was executed, not answered from acme's outcome");

    // Globex's deferred records are its own; acme's id is still not found for globex.
    let mine = s.router_as(KEY_B).list_deferred(pb::ListDeferredRequest { agent_id: "crm".into(), ..Default::default() }).await.unwrap().into_inner();
    assert!(mine.records.is_empty());
    let deny = Some(pb::resolve_deferred_request::Resolution::Deny(pb::Deny { message: "no".into() }));
    let st = s
        .router_as(KEY_B)
        .resolve_deferred(pb::ResolveDeferredRequest { deferred_id: deferred.clone(), resolution: deny, ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::NotFound);

    // Ending globex's run-1 leaves acme's pinned.
    s.router_as(KEY_B).end_run(pb::EndRunRequest { agent_id: "crm".into(), run_id: "run-1".into() }).await.unwrap();
    let store = s.server.router.registry().store().clone();
    assert_eq!(store.run_version(ACME, "crm", "run-1", 0).await.unwrap(), Some(1));
    assert_eq!(store.run_version(GLOBEX, "crm", "run-1", 0).await.unwrap(), None);

    // Deleting globex's agent leaves acme's.
    s.registry_as(KEY_B).delete_agent(pb::DeleteAgentRequest { agent_id: "crm".into() }).await.unwrap();
    assert!(s.registry_as(KEY_A).get_agent_version(pb::GetAgentVersionRequest { agent_id: "crm".into(), version: 0 }).await.is_ok());
}

fn hot(tools: &pb::GetModelToolsResponse) -> Vec<&str> {
    tools.tools.iter().filter(|t| t.kind == pb::ModelToolKind::Hot as i32).map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn usage_counts_and_hot_tools_are_per_tenant() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let (s, _keys) = TestServer::start_with_keys(&[(KEY_A, ACME), (KEY_B, GLOBEX)]).await;
    let mut def = crm_definition(&exec.endpoint());
    def.control =
        Some(pb::ControlConfig { auto_pin: Some(pb::AutoPinConfig { warmup_calls: 2, max_hot: 1, ..Default::default() }), ..Default::default() });
    s.create_as(KEY_A, "crm", def.clone()).await;
    s.create_as(KEY_B, "crm", def).await;
    let ada = || run_as("r1", Some("ada"), pb::Caller::Model);
    for i in 0..2 {
        let out =
            s.call_as(KEY_A, "crm", ada(), &format!("u{i}"), "call_tool", call_tool("customer_name", json!({"customer_id": 42}))).await.unwrap();
        assert!(!result_of(&out).1);
    }
    let store = s.server.router.registry().store().clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let usage = store.usage(ACME, "crm", "ada", now, 7 * 24 * 3600 * 1000).await.unwrap();
        if usage.iter().any(|(n, score)| n == "crm__customer_name" && *score >= 1.99) {
            break;
        }
        assert!(Instant::now() < deadline, "acme's usage was never recorded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let model_tools = |key: &'static str| {
        let s = &s;
        async move {
            s.router_as(key)
                .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("crm")), run: Some(ada()), ..Default::default() })
                .await
                .unwrap()
                .into_inner()
        }
    };
    assert_eq!(hot(&model_tools(KEY_A).await), ["crm__customer_name"]);
    assert!(hot(&model_tools(KEY_B).await).is_empty(), "globex's ada has no usage");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(store.usage(GLOBEX, "crm", "ada", now, 7 * 24 * 3600 * 1000).await.unwrap().is_empty());
}
