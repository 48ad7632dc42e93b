//! Several replicas on one PostgreSQL database (SPEC §10): two servers in this process
//! (`toolrouter::server::start` twice: separate registries, catalog caches and in-flight
//! maps) and the real binary in a child process, all on the same store URL (a fresh schema
//! per test). Runs when `TOOLROUTER_TEST_POSTGRES_URL` names a server; otherwise each test
//! prints "PostgreSQL leg skipped: TOOLROUTER_TEST_POSTGRES_URL not set" and passes.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::pg::TestDb;
use common::*;
use serde_json::{Value, json};
use tonic::transport::Channel;
use toolrouter::pb;
use toolrouter::pb::agent_registry_client::AgentRegistryClient;
use toolrouter::pb::discovery_client::DiscoveryClient;
use toolrouter::pb::resolve_deferred_request::Resolution;
use toolrouter::pb::router_client::RouterClient;
use toolrouter::server::RunningServer;

/// One replica, reached over gRPC like any host would.
struct Replica {
    name: &'static str,
    channel: Channel,
    /// An in-process replica, watched for panics (tests/common/panics.rs).
    _server: Option<Watched<RunningServer>>,
    _process: Option<Process>,
}

/// The binary in a child process; killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn connect(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.expect("connect to replica")
}

async fn in_process(name: &'static str, store: &str) -> Replica {
    let mut cfg = toolrouter::config::ServerConfig::for_tests();
    cfg.store = store.into();
    let server = start_server(cfg).await;
    Replica { name, channel: connect(server.grpc_addr).await, _server: Some(server), _process: None }
}

/// Starts `toolrouter serve` on ephemeral ports and reads its addresses from the ready line
/// (`toolrouter listening: grpc=… http=… store=…`).
async fn binary(name: &'static str, store: &str) -> Replica {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolrouter"))
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store", store])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the toolrouter binary");
    let stdout = child.stdout.take().unwrap();
    let process = Process(child);
    let (tx, rx) = std::sync::mpsc::channel();
    // Keeps reading after the ready line, so the child never blocks on a full pipe. Other
    // lines are skipped; no ready line at all fails at `recv_timeout` below.
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("toolrouter listening: ")
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(rest.to_string());
            }
        }
    });
    let ready =
        tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(30))).await.unwrap().expect("the binary prints its ready line");
    assert!(!ready.contains("toolrouter-test"), "the ready line shows no password: {ready}");
    let grpc: SocketAddr = ready
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("grpc="))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no grpc address in {ready:?}"));
    Replica { name, channel: connect(grpc).await, _server: None, _process: Some(process) }
}

/// A and B in this process, C the binary.
async fn three_replicas(store: &str) -> [Replica; 3] {
    let (a, b, c) = tokio::join!(in_process("A", store), in_process("B", store), binary("C", store));
    [a, b, c]
}

impl Replica {
    fn registry(&self) -> AgentRegistryClient<Channel> {
        AgentRegistryClient::new(self.channel.clone())
    }

    fn router(&self) -> RouterClient<Channel> {
        RouterClient::new(self.channel.clone())
    }

    fn discovery(&self) -> DiscoveryClient<Channel> {
        DiscoveryClient::new(self.channel.clone())
    }

    async fn create(&self, agent: &str, def: pb::AgentDefinition, make_default: bool) -> pb::AgentVersion {
        self.registry()
            .create_agent_version(pb::CreateAgentVersionRequest { agent_id: agent.into(), definition: Some(def), make_default })
            .await
            .unwrap_or_else(|e| panic!("{}: create version: {e}", self.name))
            .into_inner()
    }

    async fn model_tools(&self, agent: &str, run: &str) -> pb::GetModelToolsResponse {
        self.router()
            .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref(agent)), run: Some(run_ctx(run)), ..Default::default() })
            .await
            .unwrap_or_else(|e| panic!("{}: get model tools: {e}", self.name))
            .into_inner()
    }

    async fn call(&self, agent: &str, run: &str, id: &str, tool: &str, args: Value) -> pb::handle_tool_call_response::Outcome {
        self.router()
            .handle_tool_call(pb::HandleToolCallRequest {
                agent: Some(agent_ref(agent)),
                run: Some(run_ctx(run)),
                call: Some(pb::ToolCall { tool_call_id: id.into(), tool_name: tool.into(), arguments_json: args.to_string() }),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{}: handle tool call: {e}", self.name))
            .into_inner()
            .outcome
            .expect("an outcome")
    }

    async fn pending(&self, agent: &str) -> Vec<String> {
        self.list_deferred(agent, pb::DeferredState::Pending).await.iter().map(|r| r.call.as_ref().unwrap().deferred_id.clone()).collect()
    }

    async fn list_deferred(&self, agent: &str, state: pb::DeferredState) -> Vec<pb::DeferredRecord> {
        self.router()
            .list_deferred(pb::ListDeferredRequest { agent_id: agent.into(), state: state as i32, ..Default::default() })
            .await
            .unwrap_or_else(|e| panic!("{}: list deferred: {e}", self.name))
            .into_inner()
            .records
    }

    async fn approve(&self, id: &str) -> pb::ToolResult {
        self.router()
            .resolve_deferred(pb::ResolveDeferredRequest {
                deferred_id: id.into(),
                resolution: Some(Resolution::Approve(pb::Approve { arguments_json: None })),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{}: approve: {e}", self.name))
            .into_inner()
    }
}

fn call_crm(id: u64) -> Value {
    json!({"group": "crm", "tool": "customer_name", "arguments": {"customer_id": id}})
}

/// The CRM definition with `customer_name` described as `description`.
fn crm_described(endpoint: &str, description: &str) -> pb::AgentDefinition {
    let mut def = crm_definition(endpoint);
    function_of(&mut def.sources[0]).tools[0].description = description.into();
    def
}

// ----- the cases -----

#[tokio::test]
async fn a_version_created_on_one_replica_is_discoverable_on_the_others() {
    let Some(db) = TestDb::create().await else { return };
    let exec = spawn_executor(Behaviour::Echo).await;
    let replicas = three_replicas(&db.url).await;
    let [a, ..] = &replicas;
    let created = a.create("crm", crm_definition(&exec.endpoint()), true).await;
    assert_eq!((created.version, created.is_default), (1, true));

    for r in &replicas[1..] {
        let v = r.registry().get_agent_version(pb::GetAgentVersionRequest { agent_id: "crm".into(), version: 0 }).await.unwrap().into_inner();
        assert_eq!((v.version, v.is_default), (1, true), "{}", r.name);
        let found = r
            .discovery()
            .discover_tools(pb::DiscoverToolsRequest { agent: Some(agent_ref("crm")), query: "customer name".into(), ..Default::default() })
            .await
            .unwrap_or_else(|e| panic!("{}: discover: {e}", r.name))
            .into_inner();
        assert_eq!(found.tools.first().map(|t| t.name.as_str()), Some("crm__customer_name"), "{}", r.name);
        let tools = r.model_tools("crm", "").await;
        assert_eq!(tools.version, 1, "{}", r.name);
        assert!(tools.tools.iter().any(|t| t.name == "call_tool"), "{}", r.name);
        let (content, is_error) = result_of(&r.call("crm", &format!("run-{}", r.name), "c1", "call_tool", call_crm(42)).await);
        assert_eq!((content, is_error), (json!("Ada"), false), "{}", r.name);
    }
    assert_eq!(exec.calls(), 2);
}

#[tokio::test]
async fn a_default_promoted_on_one_replica_is_seen_by_the_others_within_two_seconds() {
    let Some(db) = TestDb::create().await else { return };
    let exec = spawn_executor(Behaviour::Echo).await;
    let replicas = three_replicas(&db.url).await;
    let [a, b, c] = &replicas;
    a.create("crm", crm_described(&exec.endpoint(), "Version one."), true).await;
    // Every replica has used (and cached) version 1; run r-old is pinned to it.
    for r in &replicas {
        assert_eq!(r.model_tools("crm", "").await.version, 1, "{}", r.name);
    }
    assert_eq!(b.model_tools("crm", "r-old").await.version, 1);

    let v2 = a.create("crm", crm_described(&exec.endpoint(), "Version two."), false).await;
    assert_eq!((v2.version, v2.is_default), (2, false));
    assert_eq!(c.model_tools("crm", "").await.version, 1, "not promoted yet");
    a.registry().set_default_version(pb::SetDefaultVersionRequest { agent_id: "crm".into(), version: 2 }).await.unwrap();
    let promoted = Instant::now();

    for r in &replicas[1..] {
        loop {
            let seen = r.model_tools("crm", "").await.version;
            if seen == 2 {
                break;
            }
            assert!(promoted.elapsed() < Duration::from_secs(2), "{} still serves version {seen} after {:?}", r.name, promoted.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    println!("replicas B and C served the new default {:?} after it was promoted on A", promoted.elapsed());
    // A run keeps the version it pinned on another replica; a new run gets the new default.
    assert_eq!(c.model_tools("crm", "r-old").await.version, 1);
    assert_eq!(b.model_tools("crm", "r-new").await.version, 2);
    let found = c
        .discovery()
        .discover_tools(pb::DiscoverToolsRequest { agent: Some(agent_ref("crm")), query: "customer".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.tools[0].description, "Version two.");
}

#[tokio::test]
async fn a_call_deferred_on_one_replica_is_listed_and_approved_on_another_and_runs_once() {
    let Some(db) = TestDb::create().await else { return };
    // Slow enough that the concurrent approvals overlap the execution.
    let exec = spawn_executor(Behaviour::Sleep(Duration::from_millis(300))).await;
    let replicas = three_replicas(&db.url).await;
    let [a, b, c] = &replicas;
    let mut def = crm_definition(&exec.endpoint());
    function_of(&mut def.sources[0]).tools[0].requires_approval = true;
    a.create("crm", def, true).await;

    let d = deferred_of(&a.call("crm", "r1", "c1", "call_tool", call_crm(42)).await);
    assert_eq!(b.pending("crm").await, [d.deferred_id.as_str()]);
    assert_eq!(c.pending("crm").await, [d.deferred_id.as_str()]);
    // The same call id on another replica is the same deferred call.
    assert_eq!(deferred_of(&c.call("crm", "r1", "c1", "call_tool", call_crm(42)).await).deferred_id, d.deferred_id);

    // Approved on B and C at the same moment: one execution, one result for both.
    let (on_b, on_c) = tokio::join!(b.approve(&d.deferred_id), c.approve(&d.deferred_id));
    assert_eq!(on_b, on_c);
    assert!(!on_b.is_error);
    assert_eq!(serde_json::from_str::<Value>(&on_b.content_json).unwrap(), json!("Ada"));
    assert_eq!(exec.calls(), 1);
    let last = exec.exec.last.lock().unwrap().clone().unwrap();
    assert_eq!((last.tool_call_id.as_str(), last.run.unwrap().run_id.as_str()), ("c1", "r1"));
    // Approving again on A returns the stored result without running it again.
    assert_eq!(a.approve(&d.deferred_id).await, on_b);
    assert_eq!(exec.calls(), 1);
    assert!(a.pending("crm").await.is_empty());
    let resolved = a.list_deferred("crm", pb::DeferredState::Resolved).await;
    assert_eq!(resolved.len(), 1);
    assert_eq!((resolved[0].resolution.as_str(), resolved[0].result.as_ref()), ("approved", Some(&on_b)));
}

#[tokio::test]
async fn the_same_tool_call_sent_to_every_replica_at_once_executes_once() {
    let Some(db) = TestDb::create().await else { return };
    let exec = spawn_executor(Behaviour::Sleep(Duration::from_millis(300))).await;
    let replicas = three_replicas(&db.url).await;
    let [a, b, c] = &replicas;
    a.create("crm", crm_definition(&exec.endpoint()), true).await;
    // Every replica has the catalog ready, so the calls really race for the claim.
    for r in &replicas {
        r.model_tools("crm", "").await;
    }

    for round in 1..=3 {
        let id = format!("c{round}");
        let started = Instant::now();
        let (on_a, on_b, on_c) = tokio::join!(
            a.call("crm", "r1", &id, "call_tool", call_crm(42)),
            b.call("crm", "r1", &id, "call_tool", call_crm(42)),
            c.call("crm", "r1", &id, "call_tool", call_crm(42)),
        );
        assert_eq!(exec.calls(), round, "round {round}: one execution for three replicas");
        assert_eq!(result_of(&on_a), (json!("Ada"), false));
        assert_eq!(on_a, on_b);
        assert_eq!(on_a, on_c);
        println!("round {round}: three replicas answered in {:?}", started.elapsed());
    }
    // And afterwards, from any replica, the stored outcome.
    assert_eq!(result_of(&c.call("crm", "r1", "c1", "call_tool", call_crm(42)).await), (json!("Ada"), false));
    assert_eq!(exec.calls(), 3);
}
