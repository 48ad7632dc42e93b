//! SPEC §5 through the model's control tools and the typed Discovery RPCs.
mod common;
use common::*;
use serde_json::{Value, json};
use tonic::Code;
use toolrouter::pb;

fn schema() -> Value {
    json!({"type": "object"})
}

fn def_with(groups: Vec<(&str, Vec<pb::ToolDeclaration>)>) -> pb::AgentDefinition {
    let mut d = pb::AgentDefinition::default();
    for (g, tools) in groups {
        let id = format!("{g}-src");
        d.sources.push(client_source(&id, tools));
        d.groups.insert(g.to_string(), group(&format!("{g} tools"), &[&id]));
    }
    d
}

async fn with(def: pb::AgentDefinition) -> TestServer {
    let s = TestServer::start().await;
    s.create("a", def).await;
    s
}

async fn ask(s: &TestServer, tool: &str, args: Value) -> Value {
    let (v, err) = s.call_result("a", "", "", tool, args).await;
    assert!(!err, "unexpected error: {v}");
    v
}

async fn ask_err(s: &TestServer, tool: &str, args: Value) -> Value {
    let (v, err) = s.call_result("a", "", "", tool, args).await;
    assert!(err, "expected an error, got {v}");
    v
}

fn names(v: &Value) -> Vec<String> {
    v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

fn billing() -> pb::AgentDefinition {
    def_with(vec![(
        "billing",
        vec![
            tool("refund_payment", "Refund a payment to the card it came from.", schema()),
            tool("payment_lookup", "Find a payment by its id.", schema()),
            tool("payment", "Create a payment.", schema()),
            tool("invoice", "Send an invoice.", schema()),
        ],
    )])
}

#[tokio::test]
async fn payment_search_finds_payment_payment_lookup_and_refund_payment_with_the_exact_name_first() {
    let s = with(billing()).await;
    let v = ask(&s, "discover_tools", json!({"query": "payment"})).await;
    assert_eq!(names(&v)[0], "billing__payment");
    let mut rest = names(&v)[1..].to_vec();
    rest.sort();
    assert_eq!(rest, ["billing__payment_lookup", "billing__refund_payment"]);
    assert_eq!(v["total"], 3);
    assert_eq!(v["detail"], "summary");
    assert_eq!(v["next_offset"], Value::Null);
}

#[tokio::test]
async fn customer_name_query_returns_a_summary_of_customer_name() {
    let s = with(crm_definition("http://127.0.0.1:1")).await;
    let v = ask(&s, "discover_tools", json!({"query": "customer name", "group": "crm"})).await;
    assert_eq!(v["detail"], "summary");
    assert_eq!(
        v["tools"][0],
        json!({"group": "crm", "tool": "customer_name", "name": "crm__customer_name", "description": "Look up the display name for a customer ID."})
    );
}

#[tokio::test]
async fn exact_canonical_name_is_case_and_whitespace_insensitive_and_expands_auto() {
    let s = with(crm_definition("http://127.0.0.1:1")).await;
    let v = ask(&s, "discover_tools", json!({"query": "  CRM__Customer_Name  "})).await;
    assert_eq!(v["detail"], "full");
    assert_eq!(names(&v), ["crm__customer_name"]);
    assert!(v["tools"][0]["parameters_json_schema"]["properties"]["customer_id"].is_object());
}

#[tokio::test]
async fn exact_match_preserves_separators() {
    let s = with(crm_definition("http://127.0.0.1:1")).await;
    // "customer name" is not the name customer_name: a single fuzzy match stays a summary.
    let v = ask(&s, "discover_tools", json!({"query": "customer name"})).await;
    assert_eq!(v["detail"], "summary");
    let v = ask(&s, "discover_tools", json!({"query": "customer_name"})).await;
    assert_eq!(v["detail"], "full");
}

#[tokio::test]
async fn escaped_canonical_names_match_exactly() {
    let d = def_with(vec![("a_", vec![tool("b", "first", schema())]), ("a_u", vec![tool("b", "second", schema())])]);
    let s = with(d).await;
    let v = ask(&s, "discover_tools", json!({"query": "a_u__b"})).await;
    assert_eq!(names(&v)[0], "a_u__b");
    assert_eq!(v["tools"][0]["group"], "a_");
    let v = ask(&s, "discover_tools", json!({"query": "a_uu__b"})).await;
    assert_eq!(names(&v)[0], "a_uu__b");
    assert_eq!(v["tools"][0]["group"], "a_u");
    // Keywords (a, uu, b) still match the other tool, so auto stays a summary.
    assert_eq!(v["detail"], "summary");
}

#[tokio::test]
async fn a_canonical_name_query_does_not_filter_by_group() {
    let d =
        def_with(vec![("crm", vec![tool("lookup", "Find a customer.", schema())]), ("billing", vec![tool("lookup", "Find a payment.", schema())])]);
    let s = with(d).await;
    let v = ask(&s, "discover_tools", json!({"query": "crm__lookup"})).await;
    assert_eq!(names(&v)[0], "crm__lookup");
    // The local name matches both groups exactly: two candidates, so auto stays summary.
    let v = ask(&s, "discover_tools", json!({"query": "lookup"})).await;
    assert_eq!(names(&v), ["billing__lookup", "crm__lookup"]);
    assert_eq!(v["detail"], "summary");
    let v = ask(&s, "discover_tools", json!({"query": "lookup", "group": "crm"})).await;
    assert_eq!((names(&v), v["detail"].as_str()), (vec!["crm__lookup".to_string()], Some("full")));
}

#[tokio::test]
async fn limit_one_or_a_single_fuzzy_match_never_expands_auto() {
    let s = with(billing()).await;
    let v = ask(&s, "discover_tools", json!({"query": "payment", "limit": 1})).await;
    assert_eq!((v["detail"].as_str(), v["next_offset"].as_u64()), (Some("summary"), Some(1)));
    let v = ask(&s, "discover_tools", json!({"query": "invoi"})).await;
    assert_eq!((v["total"].as_u64(), v["detail"].as_str()), (Some(1), Some("summary")));
}

#[tokio::test]
async fn unknown_group_is_a_model_visible_error_pointing_to_list_tool_groups() {
    let s = with(billing()).await;
    let v = ask_err(&s, "discover_tools", json!({"query": "payment", "group": "nope"})).await;
    assert_eq!(v["error"], "unknown_group");
    assert!(v["message"].as_str().unwrap().contains("list_tool_groups"));
}

#[tokio::test]
async fn punctuation_only_query_matches_exact_names_only() {
    let s = with(def_with(vec![("g", vec![tool("--", "dashes", schema()), tool("other", "x", schema())])])).await;
    let v = ask(&s, "discover_tools", json!({"query": "--"})).await;
    assert_eq!(names(&v), ["g__--"]);
    let v = ask(&s, "discover_tools", json!({"query": "?!"})).await;
    assert_eq!(v["total"], 0);
}

#[tokio::test]
async fn empty_query_browses_by_canonical_name_within_the_group() {
    let d = def_with(vec![("zeta", vec![tool("b", "x", schema()), tool("a", "x", schema())]), ("alpha", vec![tool("c", "x", schema())])]);
    let s = with(d).await;
    let v = ask(&s, "discover_tools", json!({"query": "   "})).await;
    assert_eq!(names(&v), ["alpha__c", "zeta__a", "zeta__b"]);
    let v = ask(&s, "discover_tools", json!({"query": "", "group": "zeta"})).await;
    assert_eq!(names(&v), ["zeta__a", "zeta__b"]);
}

#[tokio::test]
async fn all_six_fields_are_searchable_and_the_rest_is_not() {
    let nested = json!({
        "type": "object",
        "properties": {
            "filter": {"type": "object", "properties": {"postcode": {"type": "string", "description": "Delivery zipcode"}}},
            "items": {"type": "array", "items": {"anyOf": [{"type": "object", "properties": {"sku": {"type": "string"}}}]}},
            "mode": {"type": "string", "enum": ["turbo"], "default": "sleepy", "examples": ["zebra"]},
            "ref": {"$ref": "#/$defs/addr"}
        },
        "$defs": {"addr": {"type": "object", "properties": {"streetname": {"type": "string"}}}}
    });
    let mut d = def_with(vec![("shipping", vec![tool("quote", "Price a parcel.", nested)])]);
    d.sources[0].tool_configs.insert("quote".into(), pb::ToolConfig { pin: false, additional_search_text: "courier logistics".into() });
    d.sources[0].instructions = "secretinstruction".into();
    d.groups.get_mut("shipping").unwrap().description = "grouptext".into();
    let s = with(d).await;
    for q in ["quote", "parcel", "shipping", "postcode", "sku", "streetname", "zipcode", "courier"] {
        let v = ask(&s, "discover_tools", json!({"query": q})).await;
        assert_eq!(v["total"], 1, "{q} should match");
    }
    for q in ["turbo", "sleepy", "zebra", "addr", "secretinstruction", "grouptext"] {
        let v = ask(&s, "discover_tools", json!({"query": q})).await;
        assert_eq!(v["total"], 0, "{q} must not match");
    }
    let v = ask(&s, "describe_tool", json!({"group": "shipping", "tool": "quote"})).await;
    assert!(!v.to_string().contains("courier"), "additional_search_text is never shown");
}

#[tokio::test]
async fn whole_word_matches_outrank_substring_matches_and_field_priority_breaks_ties() {
    let d = def_with(vec![(
        "g",
        vec![
            tool("a_tool", "Handles the refund flow.", schema()),
            tool("b_tool", "Handles refunds.", schema()),
            tool("refund", "Unrelated text.", schema()),
        ],
    )]);
    let s = with(d).await;
    let v = ask(&s, "discover_tools", json!({"query": "refund flow"})).await;
    // a_tool: two keywords; then whole-word in name (refund) beats substring in description (b_tool).
    assert_eq!(names(&v), ["g__a_tool", "g__refund", "g__b_tool"]);
}

#[tokio::test]
async fn default_limits_are_10_summaries_and_5_full_and_limits_clamp_to_max_results() {
    let tools: Vec<_> = (0..30).map(|i| tool(&format!("t{i:02}"), "common word", schema())).collect();
    let mut d = def_with(vec![("g", tools)]);
    d.control = Some(pb::ControlConfig { max_results: 12, ..Default::default() });
    let s = with(d).await;
    let v = ask(&s, "discover_tools", json!({"query": "common"})).await;
    assert_eq!((names(&v).len(), v["next_offset"].as_u64(), v["total"].as_u64()), (10, Some(10), Some(30)));
    let v = ask(&s, "discover_tools", json!({"query": "common", "detail": "full"})).await;
    assert_eq!(names(&v).len(), 5);
    let v = ask(&s, "discover_tools", json!({"query": "common", "limit": 99})).await;
    assert_eq!(names(&v).len(), 12);
    let v = ask_err(&s, "discover_tools", json!({"query": "common", "limit": 0})).await;
    assert_eq!(v["error"], "invalid_arguments");
}

#[tokio::test]
async fn next_offset_pages_through_every_candidate_once() {
    let tools: Vec<_> = (0..23).map(|i| tool(&format!("t{i:02}"), "common", schema())).collect();
    let s = with(def_with(vec![("g", tools)])).await;
    let mut all = Vec::new();
    let mut offset = json!(0);
    while !offset.is_null() {
        let v = ask(&s, "discover_tools", json!({"query": "common", "offset": offset})).await;
        all.extend(names(&v));
        offset = v["next_offset"].clone();
    }
    assert_eq!(all.len(), 23);
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 23);
}

#[tokio::test]
async fn offsets_apply_to_the_current_directory() {
    let tools: Vec<_> = (0..15).map(|i| tool(&format!("t{i:02}"), "x", schema())).collect();
    let s = with(def_with(vec![("g", tools.clone())])).await;
    let first = ask(&s, "list_tools", json!({})).await;
    assert_eq!(names(&first)[0], "g__t00");
    // The directory changes between pages: five tools that sort first are added.
    let mut more = tools;
    more.extend((0..5).map(|i| tool(&format!("a{i}"), "x", schema())));
    s.create("a", def_with(vec![("g", more)])).await;
    let second = ask(&s, "list_tools", json!({"offset": first["next_offset"]})).await;
    assert_eq!(names(&second)[0], "g__t05", "page 2 is cut from the new directory, not a snapshot");
    assert_eq!(second["total"], 20);
}

/// A full entry's JSON length for a tool whose description is `n` bytes.
fn describe_len(s_desc: usize) -> usize {
    let entry = json!({"group":"g","tool":"t","name":"g__t","description":"d".repeat(s_desc),"parameters_json_schema":{"type":"object"},"kind":"client","requires_approval":false});
    format!("{{\"tool\":{entry}}}").len()
}

#[tokio::test]
async fn byte_budget_boundary_exact_fit_and_one_byte_over() {
    let base = describe_len(0);
    let fits = 1024 - base;
    for (extra, ok) in [(fits, true), (fits + 1, false)] {
        let mut d = def_with(vec![("g", vec![tool("t", &"d".repeat(extra), schema())])]);
        d.control = Some(pb::ControlConfig { max_search_bytes: 1024, ..Default::default() });
        let s = with(d).await;
        let (v, err) = s.call_result("a", "", "", "describe_tool", json!({"group": "g", "tool": "t"})).await;
        if ok {
            assert!(!err);
            assert_eq!(v.to_string().len(), 1024);
        } else {
            assert!(err);
            assert_eq!(v["error"], "too_large");
            let m = v["message"].as_str().unwrap();
            assert!(m.contains("g__t") && m.contains("1024") && m.contains("summary"), "{m}");
        }
    }
}

#[tokio::test]
async fn entries_that_do_not_fit_move_to_the_next_page_and_responses_stay_within_budget() {
    let tools: Vec<_> = (0..20).map(|i| tool(&format!("t{i:02}"), &format!("common {}", "x".repeat(200)), schema())).collect();
    let mut d = def_with(vec![("g", tools)]);
    d.control = Some(pb::ControlConfig { max_search_bytes: 1024, ..Default::default() });
    let s = with(d).await;
    let mut offset = json!(0);
    let mut seen = 0;
    while !offset.is_null() {
        let v = ask(&s, "discover_tools", json!({"query": "common", "offset": offset})).await;
        assert!(v.to_string().len() <= 1024);
        let n = names(&v).len();
        assert!((1..10).contains(&n), "byte limit shortens the page: {n}");
        seen += n;
        offset = v["next_offset"].clone();
    }
    assert_eq!(seen, 20);
}

#[tokio::test]
async fn a_full_page_whose_first_entry_cannot_fit_fails_explicitly() {
    let mut d = def_with(vec![("g", vec![tool("big", &"word ".repeat(400), schema())])]);
    d.control = Some(pb::ControlConfig { max_search_bytes: 1024, ..Default::default() });
    let s = with(d).await;
    let v = ask_err(&s, "discover_tools", json!({"query": "word", "detail": "full"})).await;
    assert_eq!(v["error"], "too_large");
    // The same tool is still listed as a summary.
    let v = ask(&s, "discover_tools", json!({"query": "word"})).await;
    assert_eq!(names(&v), ["g__big"]);
}

#[tokio::test]
async fn summary_description_is_the_first_paragraph_at_most_280_chars() {
    let d = def_with(vec![("g", vec![tool("p", "First paragraph.\n\nSecond one.", schema()), tool("l", &"y".repeat(400), schema())])]);
    let s = with(d).await;
    let v = ask(&s, "list_tools", json!({})).await;
    let descs: Vec<_> = v["tools"].as_array().unwrap().iter().map(|t| t["description"].as_str().unwrap().to_string()).collect();
    assert_eq!(descs[1], "First paragraph.");
    assert_eq!(descs[0].chars().count(), 280);
}

#[tokio::test]
async fn describe_tool_returns_the_full_entry_and_unknown_tools_suggest_discovery() {
    let s = with(crm_definition("http://127.0.0.1:1")).await;
    let v = ask(&s, "describe_tool", json!({"group": "crm", "tool": "customer_name"})).await;
    let t = &v["tool"];
    assert_eq!(
        (t["kind"].as_str(), t["requires_approval"].as_bool(), t["name"].as_str()),
        (Some("function"), Some(false), Some("crm__customer_name"))
    );
    let v = ask_err(&s, "describe_tool", json!({"group": "crm", "tool": "nope"})).await;
    assert!(v["message"].as_str().unwrap().contains("discover_tools"));
    let v = ask_err(&s, "describe_tool", json!({"group": "nope", "tool": "x"})).await;
    assert_eq!(v["error"], "unknown_group");
}

#[tokio::test]
async fn list_tool_groups_orders_by_name_with_counts_and_pages() {
    let d = def_with(vec![("zeta", vec![tool("a", "x", schema())]), ("alpha", vec![tool("a", "x", schema()), tool("b", "x", schema())])]);
    let s = with(d).await;
    let v = ask(&s, "list_tool_groups", json!({})).await;
    assert_eq!(
        v,
        json!({"groups": [{"group": "alpha", "description": "alpha tools", "tool_count": 2}, {"group": "zeta", "description": "zeta tools", "tool_count": 1}], "total": 2, "next_offset": null})
    );
    let v = ask(&s, "list_tool_groups", json!({"limit": 1})).await;
    assert_eq!((v["groups"].as_array().unwrap().len(), v["next_offset"].as_u64()), (1, Some(1)));
}

#[tokio::test]
async fn list_tools_lists_by_canonical_name_as_summaries_or_full() {
    let d = def_with(vec![("g", vec![tool("b", "x", schema()), tool("a", "x", schema())]), ("f", vec![tool("z", "x", schema())])]);
    let s = with(d).await;
    let v = ask(&s, "list_tools", json!({})).await;
    assert_eq!((names(&v), v["detail"].as_str()), (vec!["f__z".to_string(), "g__a".into(), "g__b".into()], Some("summary")));
    let v = ask(&s, "list_tools", json!({"group": "g", "detail": "full"})).await;
    assert_eq!(names(&v), ["g__a", "g__b"]);
    assert!(v["tools"][0]["parameters_json_schema"].is_object());
    let v = ask_err(&s, "list_tools", json!({"detail": "auto"})).await;
    assert_eq!(v["error"], "invalid_arguments");
}

#[tokio::test]
async fn control_tool_arguments_are_checked() {
    let s = with(billing()).await;
    for args in [
        json!({}),
        json!({"query": 5}),
        json!({"query": "x", "limit": -1}),
        json!({"query": "x", "bogus": 1}),
        json!({"query": "x", "detail": "huge"}),
    ] {
        let v = ask_err(&s, "discover_tools", args.clone()).await;
        assert_eq!(v["error"], "invalid_arguments", "{args}");
    }
    let r = s.call("a", "", "", "discover_tools", json!([1, 2])).await;
    assert!(matches!(r, pb::handle_tool_call_response::Outcome::Result(ref r) if r.is_error));
}

#[tokio::test]
async fn typed_discovery_rpcs_return_the_same_json_as_the_control_tools() {
    let s = with(billing()).await;
    let json_tool = ask(&s, "discover_tools", json!({"query": "payment", "limit": 2})).await;
    let typed = s
        .discovery()
        .discover_tools(pb::DiscoverToolsRequest { agent: Some(agent_ref("a")), query: "payment".into(), limit: Some(2), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(serde_json::from_str::<Value>(&typed.content_json).unwrap(), json_tool);
    assert_eq!(typed.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(), names(&json_tool));
    assert_eq!((typed.total, typed.next_offset, typed.detail), (3, Some(2), pb::Detail::Summary as i32));

    let d = s
        .discovery()
        .describe_tool(pb::DescribeToolRequest { agent: Some(agent_ref("a")), group: "billing".into(), tool: "payment".into(), run: None })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        serde_json::from_str::<Value>(&d.content_json).unwrap(),
        ask(&s, "describe_tool", json!({"group": "billing", "tool": "payment"})).await
    );
    let e = s
        .discovery()
        .describe_tool(pb::DescribeToolRequest { agent: Some(agent_ref("a")), group: "billing".into(), tool: "nope".into(), run: None })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let g =
        s.discovery().list_tool_groups(pb::ListToolGroupsRequest { agent: Some(agent_ref("a")), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!(g.groups[0].tool_count, 4);
    let l = s.discovery().list_tools(pb::ListCatalogToolsRequest { agent: Some(agent_ref("a")), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!(l.total, 4);
    let e = s.discovery().discover_tools(pb::DiscoverToolsRequest { agent: Some(agent_ref("ghost")), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = s.discovery().discover_tools(pb::DiscoverToolsRequest { agent: None, ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

async fn model_tools(s: &TestServer) -> pb::GetModelToolsResponse {
    s.router().get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref("a")), run: None, ..Default::default() }).await.unwrap().into_inner()
}

#[tokio::test]
async fn model_tools_are_control_then_direct_then_pinned() {
    let mut d = billing();
    d.sources[0].tool_configs.insert("invoice".into(), pb::ToolConfig { pin: true, additional_search_text: String::new() });
    d.sources.insert(0, client_source("direct-src", vec![tool("zz_direct", "A direct tool.", schema()), tool("aa_direct", "Another.", schema())]));
    d.instructions = "Be nice.".into();
    let s = with(d).await;
    let m = model_tools(&s).await;
    let got: Vec<_> = m.tools.iter().map(|t| (t.name.as_str(), t.kind)).collect();
    use pb::ModelToolKind as K;
    assert_eq!(
        got,
        [
            ("discover_tools", K::Control as i32),
            ("describe_tool", K::Control as i32),
            ("call_tool", K::Control as i32),
            ("list_tool_groups", K::Control as i32),
            ("list_tools", K::Control as i32),
            ("zz_direct", K::Direct as i32),
            ("aa_direct", K::Direct as i32),
            ("billing__invoice", K::Pinned as i32),
        ]
    );
    let pinned = &m.tools[7];
    assert_eq!((pinned.group.as_str(), pinned.tool.as_str(), pinned.source_id.as_str()), ("billing", "invoice", "billing-src"));
    assert!(m.instructions.starts_with("Be nice.\n\n"));
    assert!(m.instructions.contains("discover_tools"));
    // Pinned tools stay discoverable.
    let v = ask(&s, "discover_tools", json!({"query": "invoice"})).await;
    assert_eq!(names(&v), ["billing__invoice"]);
}

#[tokio::test]
async fn star_pins_every_tool_of_a_source() {
    let mut d = billing();
    d.sources[0].tool_configs.insert("*".into(), pb::ToolConfig { pin: true, additional_search_text: String::new() });
    let s = with(d).await;
    let pinned = model_tools(&s).await.tools.iter().filter(|t| t.kind == pb::ModelToolKind::Pinned as i32).count();
    assert_eq!(pinned, 4);
}

#[tokio::test]
async fn without_grouped_tools_there_are_no_control_tools_or_guidance() {
    let d = pb::AgentDefinition {
        sources: vec![client_source("s", vec![tool("only", "x", schema())])],
        instructions: "Hi.".into(),
        ..Default::default()
    };
    let s = with(d).await;
    let m = model_tools(&s).await;
    assert_eq!(m.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["only"]);
    assert_eq!(m.instructions, "Hi.");
}

#[tokio::test]
async fn control_schemas_and_guidance_are_byte_identical_across_inventories() {
    let a = with(billing()).await;
    let b = with(crm_definition("http://127.0.0.1:1")).await;
    let (ma, mb) = (model_tools(&a).await, model_tools(&b).await);
    let controls =
        |m: &pb::GetModelToolsResponse| m.tools.iter().filter(|t| t.kind == pb::ModelToolKind::Control as i32).cloned().collect::<Vec<_>>();
    assert!(!controls(&ma).is_empty(), "{:?}", ma.tools);
    assert_eq!(controls(&ma), controls(&mb));
    assert_eq!(ma.instructions, mb.instructions);
    for t in controls(&ma) {
        assert!(!t.input_schema_json.contains("billing") && !t.description.contains("billing"));
    }
}

#[tokio::test]
async fn control_names_are_configurable() {
    let mut d = billing();
    d.control = Some(pb::ControlConfig {
        names: Some(pb::ControlNames {
            discover: "find_operations".into(),
            describe: "describe_operation".into(),
            call: "invoke_operation".into(),
            list_tools: "list_operations".into(),
            list_groups: "list_domains".into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    let s = with(d).await;
    let m = model_tools(&s).await;
    let controls: Vec<_> = m.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(controls, ["find_operations", "describe_operation", "invoke_operation", "list_domains", "list_operations"]);
    assert!(m.instructions.contains("find_operations") && !m.instructions.contains("discover_tools"));
    let v = ask(&s, "find_operations", json!({"query": "payment"})).await;
    assert_eq!(v["total"], 3);
    let (_, err) = s.call_result("a", "", "", "discover_tools", json!({"query": "payment"})).await;
    assert!(err, "the default name is not an alias");
}

#[tokio::test]
async fn disable_instructions_drops_guidance_and_source_instructions() {
    let mut d = crm_definition("http://127.0.0.1:1");
    d.instructions = "Definition text.".into();
    d.control = Some(pb::ControlConfig { disable_instructions: true, ..Default::default() });
    let s = with(d).await;
    let m = model_tools(&s).await;
    assert_eq!(m.instructions, "Definition text.");
    let v = ask(&s, "describe_tool", json!({"group": "crm", "tool": "customer_name"})).await;
    assert!(v["tool"].get("instructions").is_none());
}

#[tokio::test]
async fn flat_profile_exposes_tool_search_and_call_tool_by_name() {
    let mut d = billing();
    d.control = Some(pb::ControlConfig { profile: pb::Profile::Flat as i32, ..Default::default() });
    let s = with(d).await;
    let m = model_tools(&s).await;
    assert_eq!(m.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["tool_search", "call_tool"]);
    let v = ask(&s, "tool_search", json!({"query": "I need to refund a payment to a customer", "limit": 3})).await;
    assert!(names(&v).contains(&"billing__refund_payment".to_string()), "{v}");
    let out = s.call("a", "", "", "call_tool", json!({"name": "billing__refund_payment", "arguments": {}})).await;
    assert!(matches!(out, pb::handle_tool_call_response::Outcome::Deferred(_)), "client tools defer");
}

#[tokio::test]
async fn natural_ranking_for_discover_tools_keeps_exact_names_first_and_the_same_envelope() {
    let mut d = billing();
    d.control = Some(pb::ControlConfig { ranking: pb::Ranking::Natural as i32, ..Default::default() });
    let s = with(d).await;
    let v = ask(&s, "discover_tools", json!({"query": "I need to give a customer their money back for a payment"})).await;
    assert_eq!(v["detail"], "summary");
    assert!(names(&v).contains(&"billing__refund_payment".to_string()), "{v}");
    let v = ask(&s, "discover_tools", json!({"query": "payment"})).await;
    assert_eq!(names(&v)[0], "billing__payment", "exact names rank first under both rankings");
    let v = ask_err(&s, "discover_tools", json!({"query": "payment", "group": "nope"})).await;
    assert_eq!(v["error"], "unknown_group");
}
