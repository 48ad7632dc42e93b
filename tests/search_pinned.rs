//! Both rankers' top 10 on a fixed catalog, pinned: a change to how a version is compiled or
//! indexed (faster, smaller) must not move a single result. The catalog is generated from a
//! fixed seed (nested schemas, shared and distinct ones, configured search text, names that
//! collide across groups); the expected lists are in `tests/fixtures/search_top10.json`.
//! `TOOLROUTER_BLESS=1 cargo test --test search_pinned` rewrites them after a change that is
//! meant to move results.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toolrouter::catalog::{AgentDefinition, Catalog, ClientSource, SourceKind, ToolConfig, ToolDeclaration, ToolGroup, ToolSource};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/search_top10.json");

const WORDS: &[&str] = &[
    "customer",
    "invoice",
    "refund",
    "payment",
    "order",
    "shipment",
    "address",
    "ticket",
    "account",
    "subscription",
    "calendar",
    "meeting",
    "document",
    "contract",
    "employee",
    "inventory",
    "warehouse",
    "lead",
    "campaign",
    "quote",
    "project",
    "task",
    "incident",
    "alert",
    "weather",
    "forecast",
    "city",
    "email",
    "message",
    "channel",
    "repository",
    "commit",
    "branch",
    "issue",
    "review",
    "deploy",
    "cluster",
    "node",
    "price",
    "stock",
    "portfolio",
    "news",
    "article",
    "search",
    "paper",
    "recent",
    "status",
    "report",
    "balance",
    "transfer",
];
const VERBS: &[&str] = &["get", "list", "create", "update", "delete", "find", "send", "cancel", "search", "fetch", "schedule", "approve"];

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len())]
    }

    fn verb(&mut self) -> &'static str {
        VERBS[self.below(VERBS.len())]
    }
}

fn schema(rng: &mut Rng) -> Value {
    let mut props = serde_json::Map::new();
    for _ in 0..1 + rng.below(4) {
        let name = match rng.below(3) {
            0 => format!("{}_id", rng.word()),
            1 => format!("{}{}", rng.word(), capitalize(rng.word())),
            _ => rng.word().to_string(),
        };
        let value = match rng.below(3) {
            0 => json!({"type": "object", "description": format!("The {} of the {}.", rng.word(), rng.word()),
                        "properties": {rng.word(): {"type": "string", "description": format!("Its {}.", rng.word())}}}),
            _ => json!({"type": "string", "description": format!("Which {} to {}.", rng.word(), rng.verb()), "enum": [rng.word()]}),
        };
        props.insert(name, value);
    }
    json!({"type": "object", "properties": props})
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// 1,200 tools in 24 groups; one schema in five is shared by several tools.
fn definition() -> AgentDefinition {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let shared: Vec<String> = (0..10).map(|_| schema(&mut rng).to_string()).collect();
    let mut def = AgentDefinition::default();
    for g in 0..24 {
        let group = format!("{}_{g}", rng.word());
        let id = format!("src{g}");
        let mut tools = Vec::new();
        let mut configs = BTreeMap::new();
        for i in 0..50 {
            let name = match rng.below(3) {
                0 => format!("{}_{}", rng.verb(), rng.word()),
                1 => format!("{}{}", rng.verb(), capitalize(rng.word())),
                _ => format!("{}_{}_{}", rng.verb(), rng.word(), rng.word()),
            } + &format!("_{i}");
            let description = (0..1 + rng.below(3))
                .map(|_| {
                    format!("{} the {} {} for a {} when the {} changes.", capitalize(rng.verb()), rng.word(), rng.word(), rng.word(), rng.word())
                })
                .collect::<Vec<_>>()
                .join(" ");
            let input_schema = if rng.below(5) == 0 { shared[rng.below(shared.len())].clone() } else { schema(&mut rng).to_string() };
            if rng.below(6) == 0 {
                configs.insert(name.clone(), ToolConfig { pin: false, additional_search_text: format!("{} {}", rng.word(), rng.word()) });
            }
            tools.push(ToolDeclaration { name, description, input_schema, ..Default::default() });
        }
        def.groups.insert(group.clone(), ToolGroup { description: format!("Tools for {}.", rng.word()), source_ids: vec![id.clone()] });
        def.sources.push(ToolSource { id, kind: SourceKind::Client(ClientSource { tools }), tool_configs: configs, ..Default::default() });
    }
    def
}

/// Queries of every kind: words, requests, identifiers, substrings, exact names, group
/// filters, browsing, misses.
fn queries(catalog: &Catalog) -> Vec<(String, Option<String>)> {
    let mut rng = Rng(0x0fed_cba9_8765_4321);
    let names: Vec<(String, String, String)> = catalog
        .grouped
        .iter()
        .map(|&t| {
            let tool = catalog.tool(t);
            (tool.local.clone(), tool.name.clone(), tool.group.clone().unwrap_or_default())
        })
        .collect();
    (0..160)
        .map(|i| {
            let (local, canonical, group) = &names[rng.below(names.len())];
            match i % 8 {
                0 => (format!("{} {}", rng.word(), rng.word()), None),
                1 => (format!("Can you {} the {} of my {} please?", rng.verb(), rng.word(), rng.word()), None),
                2 => (format!("{}{}", rng.verb(), capitalize(rng.word())), None),
                3 => (rng.word()[..3].to_string(), None),
                4 => (if i % 16 == 4 { local.to_uppercase() } else { canonical.clone() }, None),
                5 => (format!("{} {}", rng.verb(), rng.word()), Some(group.clone())),
                6 => (String::new(), Some(group.clone())),
                _ => (format!("zz{} {}", rng.below(100), rng.word()), None),
            }
        })
        .collect()
}

fn results(catalog: &Catalog) -> Value {
    let name = |d: u32| catalog.tool(catalog.grouped[d as usize]).name.clone();
    let rows: Vec<Value> = queries(catalog)
        .into_iter()
        .map(|(query, group)| {
            let (keyword, keyword_total) = catalog.index.search_top(&query, group.as_deref(), 10);
            let (natural, natural_total) = catalog.natural().search(&query, group.as_deref(), 10);
            json!({
                "query": query,
                "group": group,
                "keyword": keyword.iter().map(|h| json!([name(h.doc), h.exact, h.matched, h.score])).collect::<Vec<_>>(),
                "keyword_total": keyword_total,
                "natural": natural.iter().map(|&(d, s)| json!([name(d), format!("{s:.4}")])).collect::<Vec<_>>(),
                "natural_total": natural_total,
            })
        })
        .collect();
    Value::from(rows)
}

#[test]
fn both_rankers_top_10_on_the_fixture_catalog_are_unchanged() {
    let catalog = Catalog::compile(&definition(), &BTreeMap::new());
    assert_eq!(catalog.grouped.len(), 1_200, "{:?}", catalog.diagnostics);
    let got = results(&catalog);
    if std::env::var_os("TOOLROUTER_BLESS").is_some() {
        std::fs::write(FIXTURE, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return;
    }
    let want: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).expect("the pinned results")).unwrap();
    let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w, "query {} moved", w["query"]);
    }
}

#[test]
fn a_version_compiled_from_its_predecessor_ranks_like_one_compiled_alone() {
    let first = Catalog::compile(&definition(), &BTreeMap::new());
    let mut def = definition();
    if let SourceKind::Client(c) = &mut def.sources[3].kind {
        c.tools[7].description = "Reconcile the ledger balance after a transfer.".into();
        c.tools.remove(9);
    }
    let alone = Catalog::compile(&def, &BTreeMap::new());
    let reused = Catalog::compile_from(&def, &BTreeMap::new(), Some(&first));
    // The predecessor's keyword segment is kept (minus the changed and removed tools), the
    // changed tool indexed in a segment of its own.
    assert_eq!((alone.index.parts(), reused.index.parts()), (1, 2));
    assert_eq!(results(&alone), results(&reused));
    let names =
        |c: &Catalog| c.tools.iter().map(|t| (t.name.clone(), t.description.clone(), t.input_schema_json().get().to_string())).collect::<Vec<_>>();
    assert_eq!(names(&alone), names(&reused));
    // The schemas were prepared once: shared with the predecessor, and within a version by
    // every tool declaring the same text.
    let schema = |c: &Catalog, name: &str| c.tools.iter().find(|t| t.name == name).map(|t| t.input_schema_json() as *const _).unwrap();
    let unchanged = &first.tools[0].name;
    assert!(std::ptr::eq(schema(&first, unchanged), schema(&reused, unchanged)), "reused from the predecessor");
    assert!(!std::ptr::eq(schema(&first, unchanged), schema(&alone, unchanged)), "compiled alone, prepared anew");
    let texts: Vec<&str> = first.tools.iter().map(|t| t.input_schema_json().get()).collect();
    let (a, b) = (0..texts.len())
        .flat_map(|a| (a + 1..texts.len()).map(move |b| (a, b)))
        .find(|&(a, b)| texts[a] == texts[b])
        .expect("the fixture declares shared schemas");
    assert!(std::ptr::eq(first.tools[a].input_schema_json(), first.tools[b].input_schema_json()), "one copy per distinct schema");
}

#[test]
fn versions_that_change_descriptions_or_rename_a_tool_rank_like_ones_compiled_alone() {
    let first = Catalog::compile(&definition(), &BTreeMap::new());
    // Descriptions only: every name stays in place (the name tables can be shared).
    let mut described = definition();
    // A rename keeps the tool count and positions, but not the names.
    let mut renamed = definition();
    if let (SourceKind::Client(d), SourceKind::Client(r)) = (&mut described.sources[3].kind, &mut renamed.sources[3].kind) {
        d.tools[7].description = "Reconcile the ledger balance after a transfer.".into();
        d.tools[30].description = "Archive the quarterly statements.".into();
        r.tools[7].name = "reconcile_ledger_balance".into();
    }
    for def in [described, renamed] {
        let alone = Catalog::compile(&def, &BTreeMap::new());
        let reused = Catalog::compile_from(&def, &BTreeMap::new(), Some(&first));
        assert_eq!(reused.index.parts(), 2, "the predecessor's segment kept, the changed tools in another");
        assert_eq!(results(&alone), results(&reused));
        // Names in order, and each group's tools: shared with the predecessor when no name
        // changed, sorted again when one did; either way as compiled alone.
        assert_eq!(reused.grouped_by_name, alone.grouped_by_name);
        let members = |c: &Catalog| c.groups.iter().map(|g| (g.name.clone(), g.tools.clone())).collect::<Vec<_>>();
        assert_eq!(members(&reused), members(&alone));
        for tool in &alone.tools {
            assert_eq!(reused.by_canonical(&tool.name), alone.by_canonical(&tool.name), "{}", tool.name);
        }
        // The renamed tool by its local and canonical names, as one compiled alone finds it
        // (names not in this version find nothing in either).
        let canonical = alone.tools.iter().find(|t| t.local == "reconcile_ledger_balance").map_or("none".into(), |t| t.name.clone());
        for name in ["reconcile_ledger_balance", canonical.as_str()] {
            assert_eq!(reused.index.search_top(name, None, 3), alone.index.search_top(name, None, 3), "{name}");
            assert_eq!(reused.exact_matches(name, None), alone.exact_matches(name, None), "{name}");
        }
    }
}

#[test]
fn listed_tools_with_unparsable_schemas_are_skipped_and_the_others_keep_their_own() {
    // Over 256 distinct schemas: prepared on several threads.
    let schema_of = |i: usize| match i {
        100 => "{not json".to_string(),
        250 => "[1,".to_string(),
        _ => json!({"type": "object", "properties": {format!("p{i}"): {"type": "string", "description": format!("field {i}")}}}).to_string(),
    };
    let tools: Vec<ToolDeclaration> = (0..300)
        .map(|i| ToolDeclaration { name: format!("t{i}"), description: format!("Tool {i}."), input_schema: schema_of(i), ..Default::default() })
        .collect();
    let mut def = AgentDefinition::default();
    def.groups.insert("big".into(), ToolGroup { description: "Many tools.".into(), source_ids: vec!["src".into()] });
    def.sources.push(ToolSource { id: "src".into(), kind: SourceKind::Client(ClientSource::default()), ..Default::default() });
    let catalog = Catalog::compile(&def, &BTreeMap::from([("src".to_string(), tools)]));
    assert_eq!(catalog.diagnostics.len(), 2, "{:?}", catalog.diagnostics);
    for (d, name) in catalog.diagnostics.iter().zip(["t100", "t250"]) {
        assert!(d.contains(&format!("tool \"{name}\" skipped: input schema not valid JSON")), "{d}");
    }
    assert_eq!(catalog.tools.len(), 298);
    for tool in &catalog.tools {
        let i: usize = tool.local[1..].parse().unwrap();
        assert_eq!(tool.input_schema_json().get(), schema_of(i), "{}", tool.local);
    }
}

#[test]
fn a_version_with_a_tool_removed_shares_every_unchanged_schema_by_name() {
    let first = Catalog::compile(&definition(), &BTreeMap::new());
    let mut next = definition();
    // One tool fewer early on: every later tool is one place off its predecessor.
    let (head, tail) = next.sources.split_at_mut(5);
    let (removed, changed) = match (&mut head[0].kind, &mut tail[0].kind) {
        (SourceKind::Client(a), SourceKind::Client(b)) => {
            let removed = a.tools.remove(3).name;
            b.tools[2].input_schema = json!({"type": "object", "properties": {"changed": {"type": "string"}}}).to_string();
            (removed, b.tools[2].name.clone())
        }
        _ => unreachable!("the fixture's sources are client sources"),
    };
    let reused = Catalog::compile_from(&next, &BTreeMap::new(), Some(&first));
    let alone = Catalog::compile(&next, &BTreeMap::new());
    let texts = |c: &Catalog| c.tools.iter().map(|t| (t.name.clone(), t.input_schema_json().get().to_string())).collect::<Vec<_>>();
    assert_eq!(texts(&reused), texts(&alone));
    assert!(reused.tools.iter().all(|t| t.local != removed));
    for tool in &reused.tools {
        let before = first.tools.iter().find(|t| t.name == tool.name).expect("every tool was in the first version");
        let shared = std::ptr::eq(before.input_schema_json(), tool.input_schema_json());
        assert_eq!(shared, tool.local != changed, "{}: shared only when unchanged", tool.name);
    }
}
