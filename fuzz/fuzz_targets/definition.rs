//! Definition validation (SPEC §3) and compilation.
//!
//! Input: one format byte, then the body. Even: protobuf, a length-delimited
//! `AgentDefinition` followed by a `ListToolsResponse` whose tools every MCP source and every
//! function source without declared tools lists at preparation. Odd: JSON,
//! `{"definition": <the stored form>, "listed": {"<source id>": [<tool>, …]}}`.
//!
//! The definition goes the way `CreateAgentVersion` takes it (conversion, schema limits,
//! validation); a valid one must survive the store's JSON and the API's protobuf round trips
//! unchanged, compile, and give a catalog whose every tool can be found, described and
//! validated against, with distinct model tool names.
#![no_main]

use std::collections::{BTreeMap, HashSet};

use libfuzzer_sys::fuzz_target;
use prost::Message;
use serde_json::{Value, json};
use toolrouter::api::convert;
use toolrouter::catalog::validate::{MAX_EXPOSED_NAME, check_schema_limits, validate};
use toolrouter::catalog::{AgentDefinition, Catalog, SourceKind, ToolDeclaration};
use toolrouter::control::discovery::{self, DiscoveryError, ListToolsRequest};
use toolrouter::control::model_tools;
use toolrouter::error::Error;
use toolrouter::invoke::validate::check_arguments;
use toolrouter::pb;

/// The server's default limits (`--max-schema-bytes`, `--max-schema-depth`).
const MAX_SCHEMA_BYTES: usize = 256 * 1024;
const MAX_SCHEMA_DEPTH: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Some((&format, body)) = data.split_first() else { return };
    if format % 2 == 0 {
        from_protobuf(body);
    } else {
        from_json(body);
    }
});

fn from_protobuf(mut body: &[u8]) {
    let Ok(message) = pb::AgentDefinition::decode_length_delimited(&mut body) else { return };
    let listing = pb::ListToolsResponse::decode(body).unwrap_or_default();
    let def = match convert::definition(message) {
        Ok(def) => def,
        Err(Error::InvalidArgument(violations)) => {
            assert!(!violations.is_empty());
            for v in &violations {
                assert!(v.field.starts_with("definition."), "field path {:?}", v.field);
                assert!(!v.description.is_empty());
            }
            return;
        }
        Err(other) => panic!("conversion failed with {other:?}"),
    };
    let mut problems = Vec::new();
    let tools = toolrouter::pb::convert::tool_decls(listing.tools, "tools", &mut problems);
    let listed = def.sources.iter().filter(|s| lists_later(&s.kind)).map(|s| (s.id.clone(), tools.clone())).collect();
    check_definition(&def, &listed, true);
}

/// Whether preparation lists the source's tools (an MCP server, an executor with no declared
/// tools): only such sources are in the listing `Catalog::compile` gets.
fn lists_later(kind: &SourceKind) -> bool {
    match kind {
        SourceKind::Mcp(_) => true,
        SourceKind::Function(f) => f.tools.is_empty(),
        SourceKind::Client(_) => false,
    }
}

fn from_json(body: &[u8]) {
    let Ok(Value::Object(mut input)) = serde_json::from_slice::<Value>(body) else { return };
    let Some(Ok(def)) = input.remove("definition").map(serde_json::from_value::<AgentDefinition>) else { return };
    let listed = input.remove("listed").map(serde_json::from_value).unwrap_or(Ok(BTreeMap::new()));
    let Ok(mut listed): Result<BTreeMap<String, Vec<ToolDeclaration>>, _> = listed else { return };
    listed.retain(|id, _| def.sources.iter().any(|s| &s.id == id && lists_later(&s.kind)));
    check_definition(&def, &listed, false);
}

fn check_definition(def: &AgentDefinition, listed: &BTreeMap<String, Vec<ToolDeclaration>>, from_protobuf: bool) {
    if !check_schema_limits(def, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH).is_empty() {
        return;
    }
    if let Err(violations) = validate(def) {
        assert!(!violations.is_empty());
        for v in &violations {
            assert!(v.field.starts_with("definition."), "field path {:?}", v.field);
            assert!(!v.description.is_empty());
        }
        return;
    }
    // The store keeps the JSON form and the API answers with the protobuf form.
    let stored = serde_json::to_string(def).expect("a definition serializes");
    let restored: AgentDefinition = serde_json::from_str(&stored).expect("the stored form reads back");
    assert_eq!(&restored, def, "store round trip");
    if from_protobuf {
        let again = convert::definition(convert::pb_definition(def)).expect("the API's form converts back");
        assert_eq!(&again, def, "protobuf round trip");
    }

    let declared = Catalog::compile(def, &BTreeMap::new());
    assert!(declared.diagnostics.is_empty(), "diagnostics for declared tools: {:?}", declared.diagnostics);
    let expected: usize = def.sources.iter().map(|s| s.kind.declared_tools().len()).sum();
    assert_eq!(declared.tools.len(), expected);
    for t in &declared.tools {
        assert!(t.validator().is_ok(), "declared tool {} has a schema that does not compile", t.name);
    }
    check_catalog(&declared);
    if !listed.is_empty() {
        check_catalog(&Catalog::compile(def, listed));
    }
}

fn check_catalog(catalog: &Catalog) {
    let (tools, _instructions) = model_tools(catalog, &[]);
    let mut names = HashSet::new();
    for t in &tools {
        assert!(names.insert(t.name.as_str()), "model tool name {:?} twice", t.name);
        assert!(t.name.len() <= MAX_EXPOSED_NAME, "model tool name {:?} is too long", t.name);
    }
    assert_eq!(catalog.search_docs().len(), catalog.grouped.len());
    for &i in &catalog.grouped {
        let t = catalog.tool(i);
        let group = t.group.as_deref().expect("a grouped tool has a group");
        assert_eq!(catalog.grouped_tool(group, &t.local), Some(i), "{} by group and name", t.name);
        assert_eq!(catalog.by_canonical(&t.name), Some(i));
        let doc = catalog.grouped.iter().position(|&g| g == i).expect("a search document") as u32;
        assert!(catalog.exact_matches(&t.local, Some(group)).contains(&doc), "{} by exact name", t.name);
        match discovery::describe(catalog, group, &t.local) {
            Ok(d) => assert_eq!(d.tool, i),
            Err(DiscoveryError::TooLarge { .. }) => {}
            Err(e) => panic!("describe {}: {e}", t.name),
        }
    }
    for &i in &catalog.direct {
        assert_eq!(catalog.direct_tool(&catalog.tool(i).name), Some(i));
    }
    for t in &catalog.tools {
        // Whatever the schema, checking arguments answers (an error result at worst).
        let _ = check_arguments(t, &json!({}));
    }
    if catalog.has_grouped() {
        for result in
            [discovery::list_groups(catalog, None, 0).map(|p| p.json), discovery::list_tools(catalog, &ListToolsRequest::default()).map(|p| p.json)]
        {
            match result {
                Ok(json) => assert!(json.len() <= catalog.control.max_search_bytes as usize),
                Err(DiscoveryError::TooLarge { .. }) => {}
                Err(e) => panic!("listing: {e}"),
            }
        }
    }
}
