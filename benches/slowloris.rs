//! Hostile clients (the endurance issue's item 7): with 500 slow-loris connections held open
//! against both listeners, a normal client's calls still complete with p99 ≤ 100 ms.
//!
//! `cargo bench --bench slowloris`. toolrouter runs in-process on a runtime of its own with the
//! production listener limits (`--max-connections` 4096, `--http-header-timeout-secs` 10); the
//! slow clients run on another, and keep BENCH_SLOW (500) connections open all along by opening
//! a new one for each the server closes. Four kinds, in turn: an HTTP request head sent a byte
//! a second, an MCP POST whose body trickles a byte a second, a partial HTTP/2 preface on the
//! gRPC listener, and a connection that sends nothing. The normal client makes gRPC
//! `HandleToolCall`s and MCP `tools/call`s at once (four of each in flight), BENCH_SECS (10)
//! with no slow clients (the baseline, same run), then 2.5 × as long with them (so the server
//! cuts slow clients off and new ones take their places during it). Prints p50/p99/max per
//! phase, the ratio of p99s, and one JSON line.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::{Request, Response, Status};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::pb::tool_executor_server::{ToolExecutor, ToolExecutorServer};

const AGENT: &str = "bench";
const CLIENTS: usize = 4;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
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

/// Latencies of one phase, sorted.
struct Figures(Vec<Duration>);

impl Figures {
    fn new(mut v: Vec<Duration>) -> Self {
        v.sort();
        Figures(v)
    }

    fn ms(&self, q: f64) -> f64 {
        let i = ((self.0.len() as f64 * q).ceil() as usize).clamp(1, self.0.len()) - 1;
        self.0[i].as_secs_f64() * 1e3
    }

    fn line(&self, what: &str) -> String {
        format!("{what}: n={} p50={:.2} ms p99={:.2} ms max={:.2} ms", self.0.len(), self.ms(0.5), self.ms(0.99), self.ms(1.0))
    }
}

/// gRPC calls over `CLIENTS` tasks until `until`, each task in run `{phase}-{task}`.
async fn grpc_calls(channel: &tonic::transport::Channel, phase: &str, until: Instant) -> Figures {
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let mut client = pb::router_client::RouterClient::new(channel.clone());
            let run = format!("{phase}-{t}");
            tokio::spawn(async move {
                let mut took = Vec::new();
                for i in 0.. {
                    if Instant::now() >= until {
                        break;
                    }
                    let req = pb::HandleToolCallRequest {
                        agent: Some(pb::AgentRef { agent_id: AGENT.into(), version: 0 }),
                        run: Some(pb::RunContext { run_id: run.clone(), ..Default::default() }),
                        call: Some(pb::ToolCall {
                            tool_call_id: format!("c{i}"),
                            tool_name: "call_tool".into(),
                            arguments_json: r#"{"group":"ops","tool":"ping","arguments":{}}"#.into(),
                        }),
                        ..Default::default()
                    };
                    let started = Instant::now();
                    let r = client.handle_tool_call(req).await.expect("call").into_inner();
                    took.push(started.elapsed());
                    assert!(matches!(r.outcome, Some(pb::handle_tool_call_response::Outcome::Result(ref r)) if !r.is_error), "{r:?}");
                }
                took
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    Figures::new(all)
}

/// An MCP session on the endpoint: its id.
async fn mcp_session(http: &reqwest::Client, url: &str) -> String {
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
    let r = http.post(url).header("accept", "application/json, text/event-stream").json(&init).send().await.expect("initialize");
    assert!(r.status().is_success(), "initialize: {}", r.status());
    let session = r.headers().get("mcp-session-id").expect("a session id").to_str().unwrap().to_string();
    let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    http.post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&note)
        .send()
        .await
        .expect("initialized");
    session
}

/// MCP `tools/call`s over `CLIENTS` sessions until `until`.
async fn mcp_calls(url: &str, until: Instant) -> Figures {
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let url = url.to_string();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let session = mcp_session(&http, &url).await;
                let mut took = Vec::new();
                for i in 0.. {
                    if Instant::now() >= until {
                        break;
                    }
                    let body = serde_json::json!({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                        "params": {"name": "call_tool", "arguments": {"group": "ops", "tool": "ping", "arguments": {}}}});
                    let started = Instant::now();
                    let r = http
                        .post(&url)
                        .header("accept", "application/json, text/event-stream")
                        .header("mcp-session-id", &session)
                        .header("mcp-protocol-version", "2025-06-18")
                        .json(&body)
                        .send()
                        .await
                        .expect("tools/call");
                    let text = r.text().await.expect("body");
                    took.push(started.elapsed());
                    assert!(text.contains(r#"\"ok\":true"#) && !text.contains(r#""isError":true"#), "{text}");
                }
                took
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    Figures::new(all)
}

/// One slow client of kind `kind`: connects and then dribbles until the server closes the
/// connection or `stop` is set.
async fn slow_client(kind: usize, http: SocketAddr, grpc: SocketAddr, stop: Arc<AtomicBool>) -> bool {
    let addr = if kind == 2 || (kind == 3 && rand_bit()) { grpc } else { http };
    let Ok(mut c) = TcpStream::connect(addr).await else { return false };
    let (opening, dribble): (&[u8], &[u8]) = match kind {
        0 => (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"a"),
        1 => (b"POST /mcp/agents/bench HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{", b" "),
        2 => (b"PRI * HTTP/2.0\r\n", b""),
        _ => (b"", b""),
    };
    if !opening.is_empty() && c.write_all(opening).await.is_err() {
        return true;
    }
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_secs(1), c.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => {
                if !dribble.is_empty() && c.write_all(dribble).await.is_err() {
                    return true;
                }
            }
        }
    }
    false
}

fn rand_bit() -> bool {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed).is_multiple_of(2)
}

/// Keeps `n` slow clients open until `stop`; counts how many the server cut off.
fn slow_clients(
    rt: &tokio::runtime::Runtime,
    n: usize,
    http: SocketAddr,
    grpc: SocketAddr,
    stop: Arc<AtomicBool>,
    open: Arc<AtomicUsize>,
    cut: Arc<[AtomicUsize; 4]>,
) {
    for i in 0..n {
        let (stop, open, cut) = (stop.clone(), open.clone(), cut.clone());
        rt.spawn(async move {
            let mut kind = i % 4;
            while !stop.load(Ordering::Relaxed) {
                open.fetch_add(1, Ordering::Relaxed);
                let was_cut = slow_client(kind, http, grpc, stop.clone()).await;
                open.fetch_sub(1, Ordering::Relaxed);
                if was_cut {
                    cut[kind].fetch_add(1, Ordering::Relaxed);
                } else if !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                kind = (kind + 1) % 4;
            }
        });
    }
}

fn main() {
    let secs = knob("BENCH_SECS", 10) as f64;
    let slow = knob("BENCH_SLOW", 500);
    let service = tokio::runtime::Builder::new_multi_thread().thread_name("toolrouter-svc").enable_all().build().expect("runtime");
    let peers = tokio::runtime::Builder::new_multi_thread().thread_name("bench-peers").enable_all().build().expect("runtime");
    let loris = tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("slow-clients").enable_all().build().expect("runtime");

    let mut cfg = ServerConfig::for_tests();
    cfg.listen = toolrouter::listen::ListenLimits::default();
    let server = service.block_on(toolrouter::server::start(cfg)).expect("server starts");
    let (grpc, http) = (server.grpc_addr, server.http_addr);
    println!(
        "listener limits: {} connections, request head within {:?}",
        toolrouter::listen::ListenLimits::default().max_connections,
        toolrouter::listen::ListenLimits::default().header_timeout
    );

    let stop = Arc::new(AtomicBool::new(false));
    let (open, cut) = (Arc::new(AtomicUsize::new(0)), Arc::new([const { AtomicUsize::new(0) }; 4]));
    peers.block_on(async {
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
        let url = format!("http://{http}/mcp/agents/{AGENT}");

        let phase = |name: &'static str, secs: f64| {
            let until = Instant::now() + Duration::from_secs_f64(secs);
            let (channel, url) = (channel.clone(), url.clone());
            async move { tokio::join!(grpc_calls(&channel, name, until), mcp_calls(&url, until)) }
        };
        phase("warmup", 1.0).await;
        let (base_grpc, base_mcp) = phase("base", secs).await;
        println!("{}", base_grpc.line("no slow clients, gRPC HandleToolCall"));
        println!("{}", base_mcp.line("no slow clients, MCP tools/call     "));

        slow_clients(&loris, slow, http, grpc, stop.clone(), open.clone(), cut.clone());
        let deadline = Instant::now() + Duration::from_secs(30);
        while open.load(Ordering::Relaxed) < slow && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let open_at_start = open.load(Ordering::Relaxed);
        let started = Instant::now();
        let (slow_grpc, slow_mcp) = phase("slow", secs * 2.5).await;
        let took = started.elapsed();
        let open_at_end = open.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        let cuts: Vec<usize> = cut.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        println!(
            "slow clients: {open_at_start} open at the start, {open_at_end} at the end; cut off by the server and replaced during {:.1} s: \
             {} dribbled HTTP heads, {} dribbled MCP bodies, {} partial HTTP/2 prefaces, {} silent",
            took.as_secs_f64(),
            cuts[0],
            cuts[1],
            cuts[2],
            cuts[3],
        );
        println!("{}", slow_grpc.line("with slow clients, gRPC HandleToolCall"));
        println!("{}", slow_mcp.line("with slow clients, MCP tools/call     "));
        let worst = slow_grpc.ms(0.99).max(slow_mcp.ms(0.99));
        println!(
            "p99 ratio with / without: gRPC {:.2}, MCP {:.2}; worst p99 {worst:.2} ms (target ≤ 100 ms) {}",
            slow_grpc.ms(0.99) / base_grpc.ms(0.99),
            slow_mcp.ms(0.99) / base_mcp.ms(0.99),
            if worst <= 100.0 { "PASS" } else { "MISS" }
        );
        println!(
            "{}",
            serde_json::json!({"bench": "slowloris", "slow_clients": slow, "open_at_start": open_at_start, "open_at_end": open_at_end,
                "cut_off": {"http_head": cuts[0], "mcp_body": cuts[1], "http2_preface": cuts[2], "silent": cuts[3]}, "seconds": secs * 2.5,
                "base_grpc_calls": base_grpc.0.len(), "slow_grpc_calls": slow_grpc.0.len(),
                "base_grpc_p99_ms": base_grpc.ms(0.99), "base_mcp_p99_ms": base_mcp.ms(0.99),
                "slow_grpc_p50_ms": slow_grpc.ms(0.5), "slow_grpc_p99_ms": slow_grpc.ms(0.99),
                "slow_mcp_p50_ms": slow_mcp.ms(0.5), "slow_mcp_p99_ms": slow_mcp.ms(0.99), "target_p99_ms": 100.0})
        );
    });
    loris.shutdown_timeout(Duration::from_secs(1));
    drop(server);
}
