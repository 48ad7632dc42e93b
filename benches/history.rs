//! Cost independent of history (SPEC §8, §10): toolrouter's CPU per call on a fresh store
//! against the same after 100,000 finished runs and 1,000,000 call records (the endurance
//! issue's item 4: the ratio must stay ≤ 1.2).
//!
//! `cargo bench --bench history`. The embedded store (an SQLite file); every call starts a
//! new run (so run admission and pinning are on the path) and carries a tool call id (so the
//! exactly-once claim is). toolrouter runs on a runtime of its own, whose threads' CPU time
//! is what is counted. History is written straight into the store's tables, as finished runs
//! leave it: call records with outcomes (runs that ended are gone from the runs table).
//! Knobs (environment): BENCH_CALLS (4000), BENCH_HISTORY_RUNS (100000), BENCH_HISTORY_CALLS
//! (1000000). Prints one line per phase and one JSON line.

use std::time::{Duration, Instant};

use tonic::{Request, Response, Status};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::pb::tool_executor_server::{ToolExecutor, ToolExecutorServer};

const SERVICE_THREADS: &str = "toolrouter-svc";
const AGENT: &str = "bench";
const TASKS: usize = 8;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// CPU time (user + system) of toolrouter's own threads so far (Linux, 10 ms ticks).
fn service_cpu() -> Duration {
    let ticks = |stat: &str| -> Option<(String, Duration)> {
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_string();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let t = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some((comm, Duration::from_millis(t * 10)))
    };
    let mut total = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        if let Some((comm, t)) = std::fs::read_to_string(task.path().join("stat")).ok().as_deref().and_then(ticks)
            && comm.starts_with(SERVICE_THREADS)
        {
            total += t;
        }
    }
    total
}

struct Echo;

#[tonic::async_trait]
impl ToolExecutor for Echo {
    async fn execute(&self, _req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        Ok(Response::new(pb::ExecuteResponse { content_json: r#"{"ok":true}"#.into(), is_error: false }))
    }

    async fn list_tools(&self, _req: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse { tools: vec![] }))
    }
}

/// `calls` calls, each in a new run named `{phase}-{i}`, over `TASKS` concurrent clients:
/// toolrouter's CPU per call and the wall time.
async fn measure(channel: &tonic::transport::Channel, phase: &str, calls: usize) -> (Duration, Duration) {
    let cpu = service_cpu();
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let mut client = pb::router_client::RouterClient::new(channel.clone());
            let phase = phase.to_string();
            tokio::spawn(async move {
                for i in (t..calls).step_by(TASKS) {
                    let req = pb::HandleToolCallRequest {
                        agent: Some(pb::AgentRef { agent_id: AGENT.into(), version: 0 }),
                        run: Some(pb::RunContext { run_id: format!("{phase}-{i}"), ..Default::default() }),
                        call: Some(pb::ToolCall {
                            tool_call_id: "c1".into(),
                            tool_name: "call_tool".into(),
                            arguments_json: r#"{"group":"ops","tool":"ping","arguments":{}}"#.into(),
                        }),
                        ..Default::default()
                    };
                    let r = client.handle_tool_call(req).await.expect("call").into_inner();
                    assert!(matches!(r.outcome, Some(pb::handle_tool_call_response::Outcome::Result(ref r)) if !r.is_error), "{r:?}");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
    ((service_cpu() - cpu) / calls as u32, started.elapsed())
}

/// Writes the history of `runs` finished runs with `calls` call records into the store file.
fn write_history(file: &std::path::Path, runs: usize, calls: usize) {
    let mut c = rusqlite::Connection::open(file).expect("store file");
    c.busy_timeout(Duration::from_secs(30)).expect("busy timeout");
    let tx = c.transaction().expect("transaction");
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO tool_calls (tenant, agent_id, run_id, tool_call_id, outcome, update_time, owner, lease_until, fingerprint) \
                 VALUES ('default', ?1, ?2, ?3, ?4, ?5, 'old-replica', ?5, 'f')",
            )
            .expect("statement");
        let outcome = r#"{"result":{"content_json":"{\"ok\":true}","is_error":false}}"#;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        for i in 0..calls {
            let run = format!("old-{}", i % runs);
            insert.execute(rusqlite::params![AGENT, run, format!("c{i}"), outcome, now - 3_600_000]).expect("call record");
        }
    }
    tx.commit().expect("commit");
}

fn main() {
    let calls = knob("BENCH_CALLS", 4000);
    let history_runs = knob("BENCH_HISTORY_RUNS", 100_000);
    let history_calls = knob("BENCH_HISTORY_CALLS", 1_000_000);
    let peers = tokio::runtime::Builder::new_multi_thread().thread_name("bench-peers").enable_all().build().expect("runtime");
    let service = tokio::runtime::Builder::new_multi_thread().thread_name(SERVICE_THREADS).enable_all().build().expect("runtime");
    let dir = std::env::temp_dir().join(format!("toolrouter-bench-history-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("store.db");

    let mut cfg = ServerConfig::for_tests();
    cfg.store = format!("sqlite://{}", file.display());
    cfg.limits.max_runs_per_tenant = 1_000_000;
    let server = service.block_on(toolrouter::server::start(cfg)).expect("server starts");
    let grpc = server.grpc_addr;
    peers.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let executor = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ToolExecutorServer::new(Echo))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let channel = tonic::transport::Channel::from_shared(format!("http://{grpc}")).unwrap().connect().await.expect("connect");
        let ping = pb::ToolDeclaration {
            name: "ping".into(),
            description: "Ping.".into(),
            input_schema_json: r#"{"type":"object"}"#.into(),
            ..Default::default()
        };
        let source = pb::ToolSource {
            id: "ops".into(),
            kind: Some(pb::tool_source::Kind::Function(pb::FunctionSource {
                endpoint: format!("http://{executor}"),
                tools: vec![ping],
                ..Default::default()
            })),
            ..Default::default()
        };
        let def = pb::AgentDefinition {
            sources: vec![source],
            groups: [("ops".to_string(), pb::ToolGroup { description: "Operations".into(), source_ids: vec!["ops".into()] })].into(),
            ..Default::default()
        };
        pb::agent_registry_client::AgentRegistryClient::new(channel.clone())
            .create_agent_version(pb::CreateAgentVersionRequest { agent_id: AGENT.into(), definition: Some(def), make_default: true })
            .await
            .expect("definition");

        measure(&channel, "warmup", 500).await;
        let (fresh, fresh_wall) = measure(&channel, "fresh", calls).await;
        println!("fresh store: {:.1} µs CPU per call ({calls} calls, {:.2} s)", fresh.as_secs_f64() * 1e6, fresh_wall.as_secs_f64());

        let started = Instant::now();
        let path = file.clone();
        tokio::task::spawn_blocking(move || write_history(&path, history_runs, history_calls)).await.expect("history");
        println!("history: {history_calls} call records of {history_runs} finished runs written in {:.1} s", started.elapsed().as_secs_f64());

        measure(&channel, "warmup-2", 500).await;
        let (old, old_wall) = measure(&channel, "after", calls).await;
        let ratio = old.as_secs_f64() / fresh.as_secs_f64();
        println!("with history: {:.1} µs CPU per call ({calls} calls, {:.2} s)", old.as_secs_f64() * 1e6, old_wall.as_secs_f64());
        println!("ratio {ratio:.2} (target ≤ 1.20) {}", if ratio <= 1.2 { "PASS" } else { "MISS" });
        println!(
            "{}",
            serde_json::json!({"bench": "history", "store": "sqlite", "calls": calls, "history_runs": history_runs, "history_calls": history_calls,
                "fresh_cpu_us_per_call": fresh.as_secs_f64() * 1e6, "history_cpu_us_per_call": old.as_secs_f64() * 1e6, "ratio": ratio})
        );
    });
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
