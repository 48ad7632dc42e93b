mod common;
use common::*;
use serde_json::json;
use toolrouter::pb;

#[tokio::test]
async fn crm_scenario_discovers_describes_and_calls_customer_name_returning_ada() {
    let exec = spawn_executor(Behaviour::Echo).await;
    let s = TestServer::start().await;
    s.create("crm-agent", crm_definition(&exec.endpoint())).await;

    let tools = s
        .router()
        .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("crm-agent")), run: Some(run_ctx("r1")), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["discover_tools", "describe_tool", "call_tool", "list_tool_groups", "list_tools"]);
    assert!(!names.contains(&"customer_name") && !names.contains(&"crm__customer_name"));

    let (found, err) = s.call_result("crm-agent", "r1", "c1", "discover_tools", json!({"query": "customer name", "group": "crm"})).await;
    assert!(!err);
    assert_eq!(found["detail"], "summary");
    let m = &found["tools"][0];
    assert_eq!((m["group"].as_str(), m["tool"].as_str(), m["name"].as_str()), (Some("crm"), Some("customer_name"), Some("crm__customer_name")));

    let (described, _) = s.call_result("crm-agent", "r1", "c2", "describe_tool", json!({"group": "crm", "tool": "customer_name"})).await;
    assert!(described["tool"]["parameters_json_schema"]["properties"]["customer_id"].is_object());
    assert_eq!(described["tool"]["instructions"], "Use numeric customer IDs, not display names.");

    let (name, err) =
        s.call_result("crm-agent", "r1", "c3", "call_tool", json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})).await;
    assert!(!err);
    assert_eq!(name, json!("Ada"));
    assert_eq!(exec.calls(), 1);
}
