//! Shared pieces of the fuzz targets: the fixed catalogs the search target queries, and the
//! checks every target makes of a model-visible result.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Value, json};
use toolrouter::catalog::validate::validate;
use toolrouter::catalog::*;

/// A tool declaration with a schema given as JSON.
fn tool(name: &str, description: &str, schema: Value) -> ToolDeclaration {
    ToolDeclaration { name: name.into(), description: description.into(), input_schema: schema.to_string(), ..ToolDeclaration::default() }
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

fn client(id: &str, tools: Vec<ToolDeclaration>) -> ToolSource {
    ToolSource { id: id.into(), kind: SourceKind::Client(ClientSource { tools }), ..ToolSource::default() }
}

fn function(id: &str, tools: Vec<ToolDeclaration>) -> ToolSource {
    ToolSource {
        id: id.into(),
        instructions: "Use numeric customer IDs, not display names.".into(),
        kind: SourceKind::Function(FunctionSource { endpoint: "http://127.0.0.1:7000".into(), tools, timeout: None, max_concurrency: 0 }),
        ..ToolSource::default()
    }
}

/// A definition whose tools exercise the tokenizer and the ranking: camelCase and acronym
/// names, the same local name in several groups, names differing only in case, group names
/// whose canonical escaping collides naively (`a_` / `a_u`), non-ASCII text, a description
/// longer than a summary, and a schema larger than the smallest byte budget.
pub fn search_definition() -> AgentDefinition {
    let long =
        "Ölwechsel für das Fahrzeug planen — Straße, Hausnummer und Termin angeben. ".repeat(6) + "\n\nZweiter Absatz: nie in der Zusammenfassung.";
    let many: serde_json::Map<String, Value> =
        (0..40).map(|i| (format!("field_{i:02}"), json!({"type": "string", "description": format!("Free text number {i} of the form.")}))).collect();
    let mut crm = function(
        "crm-tools",
        vec![
            tool(
                "customer_name",
                "Look up the display name for a customer ID.",
                json!({"type": "object", "properties": {"customer_id": {"type": "integer", "description": "Numeric customer ID"}}, "required": ["customer_id"]}),
            ),
            tool(
                "customerLookup",
                "Find customers by HTTPServer log, oauth2 token or v2Api key.\n\nA second paragraph that summaries leave out.",
                object(json!({"email": {"type": "string"}, "fullName": {"type": "string"},
                    "address": {"type": "object", "properties": {"street": {}, "city": {"description": "City or town"}}}})),
            ),
            tool("lookup", "Straße Ölwechsel İstanbul ΣΊΣΥΦΟΣ 日本語 naïve \u{212A}elvin ﬁle", object(json!({"q": {}}))),
            tool("Pay", "Pay an invoice by card.", object(json!({"invoice_id": {"type": "string"}}))),
        ],
    );
    crm.tool_configs.insert("customer_name".into(), ToolConfig { pin: true, additional_search_text: "client person buyer".into() });
    crm.tool_configs.insert("*".into(), ToolConfig { pin: false, additional_search_text: "crm records".into() });
    let billing = client(
        "billing-tools",
        vec![
            tool("pay", "Pay a bill.", object(json!({"amount": {"type": "number", "description": "In cents."}}))),
            tool("refund_payment", "Refund a payment.", object(json!({"payment_id": {}, "reason": {"enum": ["zebra"]}}))),
            tool("payment_lookup", "Find a payment by id.", object(json!({"lines": {"items": {"properties": {"sku": {}}}}}))),
            tool("lookup", "Look up anything in billing.", json!({"$defs": {"Money": {"properties": {"amount": {}}}}})),
            tool("long_description", &long, object(json!({}))),
            tool("big_schema", "A form with many fields.", json!({"type": "object", "properties": many})),
        ],
    );
    let groups = [
        ("crm", "Customer records", vec!["crm-tools"]),
        ("billing", "Payments and invoices", vec!["billing-tools"]),
        ("my_tools", "Tools with an underscore group", vec!["my-tools"]),
        ("a_", "Group a_", vec!["a-src"]),
        ("a_u", "Group a_u", vec!["au-src"]),
        ("a", "Group a", vec!["a2-src"]),
        ("knowledge", "Documents", vec!["knowledge-src"]),
    ];
    AgentDefinition {
        sources: vec![
            crm,
            billing,
            client("my-tools", vec![tool("select", "Select rows.", object(json!({}))), tool("_b", "Underscore first.", object(json!({})))]),
            client("a-src", vec![tool("b", "b in a_", object(json!({})))]),
            client("au-src", vec![tool("b", "b in a_u", object(json!({})))]),
            client("a2-src", vec![tool("_b", "_b in a", object(json!({}))), tool("u__b", "looks canonical", object(json!({})))]),
            client(
                "knowledge-src",
                vec![
                    tool("search-docs", "Search the documents (PDF, HTML).", object(json!({"query": {"type": "string"}}))),
                    tool("x2", "Two factor: 2fa codes.", object(json!({}))),
                    tool("2fa", "", object(json!({}))),
                ],
            ),
            client("direct", vec![tool("get_time", "The current time.", object(json!({})))]),
        ],
        groups: groups
            .into_iter()
            .map(|(name, description, ids)| {
                (name.to_string(), ToolGroup { description: description.into(), source_ids: ids.into_iter().map(String::from).collect() })
            })
            .collect(),
        control: ControlConfig::default(),
        instructions: "Test catalog.".into(),
        deferred_ttl: None,
    }
}

/// Which fixed catalog a search input queries.
pub const CATALOG_VARIANTS: usize = 4;

/// The fixed catalogs, compiled once: keyword ranking with the smallest budget and a small
/// `max_results`, keyword ranking with the defaults, natural ranking, and the flat profile.
pub fn search_catalogs() -> &'static [Catalog; CATALOG_VARIANTS] {
    static CATALOGS: OnceLock<[Catalog; CATALOG_VARIANTS]> = OnceLock::new();
    CATALOGS.get_or_init(|| {
        let variant = |control: ControlConfig| {
            let def = AgentDefinition { control, ..search_definition() };
            if let Err(v) = validate(&def) {
                panic!("the fixed search catalog is invalid: {v:?}");
            }
            Catalog::compile(&def, &BTreeMap::new())
        };
        [
            variant(ControlConfig { max_search_bytes: 1_024, max_results: 7, ..ControlConfig::default() }),
            variant(ControlConfig::default()),
            variant(ControlConfig { ranking: Ranking::Natural, max_results: 100, ..ControlConfig::default() }),
            variant(ControlConfig { profile: Profile::Flat, max_search_bytes: 2_048, ..ControlConfig::default() }),
        ]
    })
}

/// Parses a model-visible result's content, which must be one JSON object.
pub fn content_object(content_json: &str) -> serde_json::Map<String, Value> {
    match serde_json::from_str::<Value>(content_json) {
        Ok(Value::Object(obj)) => obj,
        other => panic!("content_json is not a JSON object: {other:?} from {content_json:?}"),
    }
}

/// The `error` code of an error result, checking it also carries a non-empty message.
pub fn error_code(content_json: &str) -> String {
    let obj = content_object(content_json);
    let code = obj.get("error").and_then(Value::as_str).unwrap_or_else(|| panic!("no error code in {content_json}"));
    let message = obj.get("message").and_then(Value::as_str).unwrap_or_default();
    assert!(!message.is_empty(), "empty message in {content_json}");
    code.to_string()
}
