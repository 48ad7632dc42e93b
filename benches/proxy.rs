//! Proxy overhead: `Router.HandleToolCall` → `call_tool` → executor, against calling the same
//! `ToolExecutor.Execute` directly (SPEC §10: ≤ 150 µs added at p50 on loopback, ≥ 10,000
//! proxied calls/s per replica).
//!
//! `cargo bench --bench proxy [-- --threads N --postgres URL]`. Everything runs in this process
//! on 127.0.0.1 (toolrouter on a runtime of its own, so its CPU time is counted apart): the
//! echo executor, toolrouter and the clients. Paths, in one run: `direct` (the executor),
//! `passthrough` (a bare tonic pass-through proxy: the extra hop any gRPC proxy pays), `plain`
//! (toolrouter without run or tool_call_id), `exactly_once_sqlite` (run + tool_call_id on a
//! SQLite file) and `exactly_once_postgres` (the same on PostgreSQL, when a server is given by
//! `--postgres` or TOOLROUTER_TEST_POSTGRES_URL). Prints a table, the CPU ratios to the
//! pass-through, and every figure as one JSON line.
//! Knobs (environment): BENCH_LAT_CALLS (3000), BENCH_TP_CALLS (20000), BENCH_TASKS (64),
//! BENCH_CHANNELS (4), BENCH_CATALOGS (0: other agents whose catalogs are cached beside the
//! bench's, as on a replica serving many agents); BENCH_STORES (file[,postgres]; also memory) and BENCH_MODES
//! (direct,bare,once,anon; also `run`: a run id without tool_call_id, `store`: the store's
//! claim + finish alone).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::pb::agent_registry_client::AgentRegistryClient;
use toolrouter::pb::handle_tool_call_response::Outcome;
use toolrouter::pb::router_client::RouterClient;
use toolrouter::pb::tool_executor_client::ToolExecutorClient;
use toolrouter::pb::tool_executor_server::{ToolExecutor, ToolExecutorServer};

const FIXED: &str = r#"{"ok":true,"echo":"pong"}"#;
const ARGS: &str = r#"{"text":"hello","n":7}"#;
const AGENT: &str = "bench-agent";
const WARMUP: usize = 500;
/// Throughput rounds per path.
const ROUNDS: usize = 4;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// CPU time (user + system) used so far by the whole process and by toolrouter's own threads
/// (its runtime's workers and the SQLite workers), from /proc; None elsewhere. On a shared
/// machine CPU time is steadier than wall time: other load slows calls down but does not add
/// to their CPU cost.
#[derive(Clone, Copy)]
struct Cpu {
    all: Duration,
    service: Duration,
}

fn cpu_time() -> Option<Cpu> {
    // USER_HZ is 100 on Linux.
    let ticks = |stat: &str| -> Option<(String, Duration)> {
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_string();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let t = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some((comm, Duration::from_millis(t * 10)))
    };
    let all = ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?.1;
    let mut service = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if let Some((comm, t)) = std::fs::read_to_string(task.path().join("stat")).ok().as_deref().and_then(ticks)
            && (comm.starts_with(SERVICE_THREADS) || comm.starts_with("sqlx-sqlite"))
        {
            service += t;
        }
    }
    Some(Cpu { all, service })
}

/// Thread names of the runtime toolrouter runs on (the clients and the executor run on another).
const SERVICE_THREADS: &str = "toolrouter-rt";

fn list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name).unwrap_or_else(|_| default.into()).split(',').map(|s| s.trim().to_string()).collect()
}

// ----- the echo executor -----

#[derive(Clone, Default)]
struct Echo {
    calls: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl ToolExecutor for Echo {
    async fn execute(&self, _req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(pb::ExecuteResponse { content_json: FIXED.into(), is_error: false }))
    }

    async fn list_tools(&self, _req: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse { tools: Vec::new() }))
    }
}

async fn spawn_echo(stop: CancellationToken) -> (SocketAddr, Echo) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind executor");
    let addr = listener.local_addr().expect("executor address");
    let echo = Echo::default();
    let svc = ToolExecutorServer::new(echo.clone());
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)), stop.cancelled_owned())
            .await
            .expect("executor serves");
    });
    (addr, echo)
}

/// The bare pass-through: forwards each `Execute` to the echo executor over one channel.
#[derive(Clone)]
struct PassThrough(Channel);

#[tonic::async_trait]
impl ToolExecutor for PassThrough {
    async fn execute(&self, req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        ToolExecutorClient::new(self.0.clone()).execute(req.into_inner()).await
    }

    async fn list_tools(&self, _req: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse { tools: Vec::new() }))
    }
}

/// Starts the pass-through (on the current runtime) in front of the executor at `exec`.
async fn spawn_pass_through(exec: SocketAddr, stop: CancellationToken) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind pass-through");
    let addr = listener.local_addr().expect("pass-through address");
    let upstream = Channel::from_shared(format!("http://{exec}")).expect("uri").tcp_nodelay(true).connect_lazy();
    let svc = ToolExecutorServer::new(PassThrough(upstream));
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)), stop.cancelled_owned())
            .await
            .expect("pass-through serves");
    });
    addr
}

// ----- clients -----

async fn channels(addr: SocketAddr, n: usize) -> Vec<Channel> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        // One Channel = one HTTP/2 connection.
        let ch = Channel::from_shared(format!("http://{addr}")).expect("uri").tcp_nodelay(true).connect().await.expect("connect");
        out.push(ch);
    }
    out
}

/// How a proxied call names itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Direct,
    /// A run id and a unique tool_call_id: run pinning and exactly-once bookkeeping.
    ExactlyOnce,
    /// Neither run id nor tool_call_id: no pinning, no idempotency record.
    Anonymous,
    /// A run id without tool_call_id: run pinning, no idempotency record (`BENCH_MODES=run`).
    RunOnly,
    /// No gRPC at all: the store's claim + outcome writes of one call.
    StoreOnly,
    /// A minimal tonic pass-through (`Execute` in, `Execute` out, nothing else) on toolrouter's
    /// runtime: what the extra network hop alone costs, the floor for any gRPC proxy.
    Bare,
}

/// Run ids unique to this process: a PostgreSQL store outlives the bench, and a run id used
/// before stays pinned to that run's version (and its executor's old port).
static RUN_PREFIX: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("b{}-{nanos}", std::process::id())
});

fn call_tool_args() -> String {
    format!(r#"{{"group":"bench","tool":"echo","arguments":{ARGS}}}"#)
}

/// One call; panics on anything but the fixed result, so a broken path cannot look fast.
async fn one_call(ch: &Channel, mode: Mode, run: &str, id: &str, call_args: &str) {
    match mode {
        Mode::Direct | Mode::Bare => {
            let r = ToolExecutorClient::new(ch.clone())
                .execute(pb::ExecuteRequest {
                    tool: "echo".into(),
                    arguments_json: ARGS.into(),
                    tool_call_id: id.into(),
                    run: Some(pb::RunContext { run_id: run.into(), ..Default::default() }),
                })
                .await
                .expect("direct call")
                .into_inner();
            assert!(!r.is_error && r.content_json == FIXED, "unexpected direct result {r:?}");
        }
        Mode::StoreOnly => unreachable!("store-only calls make no gRPC call"),
        Mode::ExactlyOnce | Mode::Anonymous | Mode::RunOnly => {
            let (run, id) = match mode {
                Mode::ExactlyOnce => (run, id),
                Mode::RunOnly => (run, ""),
                _ => ("", ""),
            };
            let r = RouterClient::new(ch.clone())
                .handle_tool_call(pb::HandleToolCallRequest {
                    agent: Some(pb::AgentRef { agent_id: AGENT.into(), version: 0 }),
                    run: Some(pb::RunContext { run_id: run.into(), ..Default::default() }),
                    call: Some(pb::ToolCall { tool_call_id: id.into(), tool_name: "call_tool".into(), arguments_json: call_args.into() }),
                    ..Default::default()
                })
                .await
                .expect("proxied call")
                .into_inner();
            match r.outcome {
                Some(Outcome::Result(t)) if !t.is_error && t.content_json == FIXED => {}
                other => panic!("unexpected proxied outcome {other:?}"),
            }
        }
    }
}

struct Latency {
    p50: f64,
    p99: f64,
    mean: f64,
}

/// Sequential calls, one client per path, the paths taking turns call by call so that they
/// all see the same machine load.
async fn latencies(paths: &[(Mode, &Channel)], tag: &str, n: usize) -> Vec<Latency> {
    let args = call_tool_args();
    let run = format!("{}-lat-{tag}", *RUN_PREFIX);
    let mut samples = vec![Vec::with_capacity(n); paths.len()];
    for i in 0..WARMUP + n {
        for (p, (mode, ch)) in paths.iter().enumerate() {
            let id = if i < WARMUP { format!("warm-{i}") } else { format!("call-{}", i - WARMUP) };
            let t = Instant::now();
            one_call(ch, *mode, &run, &id, &args).await;
            if i >= WARMUP {
                samples[p].push(t.elapsed());
            }
        }
    }
    samples.into_iter().map(summarize).collect()
}

fn summarize(mut samples: Vec<Duration>) -> Latency {
    let n = samples.len();
    samples.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let pct = |p: f64| us(samples[((samples.len() as f64 * p).ceil() as usize).saturating_sub(1).min(samples.len() - 1)]);
    Latency { p50: pct(0.50), p99: pct(0.99), mean: samples.iter().map(|d| us(*d)).sum::<f64>() / n as f64 }
}

/// Throughput of each path: `total` calls per path from `tasks` concurrent client tasks over
/// the path's channels, in `ROUNDS` alternating rounds (so the paths share the machine's
/// load); calls per second and CPU µs per call (client + toolrouter + executor).
async fn throughputs(paths: &[(Mode, &[Channel])], tag: &str, total: usize, tasks: usize) -> Vec<Throughput> {
    let args = Arc::new(call_tool_args());
    let phase = |mode: Mode, chans: &[Channel], calls: usize, name: String| {
        let next = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let ch = chans[t % chans.len()].clone();
                let (next, args) = (next.clone(), args.clone());
                // Each task is one conversation: its own run, unique call ids.
                let run = format!("{}-tp-{tag}-{name}-{t}", *RUN_PREFIX);
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= calls {
                            break;
                        }
                        one_call(&ch, mode, &run, &format!("c{i}"), &args).await;
                    }
                })
            })
            .collect();
        async move {
            for h in handles {
                h.await.expect("client task");
            }
        }
    };
    for (mode, chans) in paths {
        phase(*mode, chans, total / 10, "warm".into()).await;
    }
    let mut wall = vec![Duration::ZERO; paths.len()];
    let mut cpu: Vec<Option<(Duration, Duration)>> = vec![Some((Duration::ZERO, Duration::ZERO)); paths.len()];
    for round in 0..ROUNDS {
        for (p, (mode, chans)) in paths.iter().enumerate() {
            let before = cpu_time();
            let t = Instant::now();
            phase(*mode, chans, total / ROUNDS, format!("r{round}")).await;
            wall[p] += t.elapsed();
            cpu[p] = cpu[p].zip(before.zip(cpu_time())).map(|((all, svc), (a, b))| (all + (b.all - a.all), svc + (b.service - a.service)));
        }
    }
    let done = (total / ROUNDS * ROUNDS) as f64;
    let per_call = |d: Duration| d.as_secs_f64() * 1e6 / done;
    wall.into_iter()
        .zip(cpu)
        .map(|(w, c)| Throughput { rate: done / w.as_secs_f64(), cpu_all: c.map(|c| per_call(c.0)), cpu_service: c.map(|c| per_call(c.1)) })
        .collect()
}

struct Throughput {
    rate: f64,
    /// CPU µs per call: the whole process (clients, toolrouter, executor), and toolrouter's
    /// threads alone.
    cpu_all: Option<f64>,
    cpu_service: Option<f64>,
}

/// The exactly-once bookkeeping alone (`Store::claim_call` + `finish_call`, no gRPC):
/// sequential pairs for latency, then `tasks` concurrent writers.
async fn store_only(url: &str, n: usize, total: usize, tasks: usize) -> (Latency, Throughput) {
    let store = toolrouter::store::Store::open(url).await.expect("store opens");
    let outcome = r#"{"result":{"content_json":"{\"ok\":true,\"echo\":\"pong\"}","is_error":false}}"#;
    let claim_req = toolrouter::store::ClaimRequest { fingerprint: "f".into(), owner: "bench".into(), now: 1, lease_until: 15_001 };
    let mut samples = Vec::with_capacity(n);
    for i in 0..WARMUP + n {
        let id = format!("s{i}");
        let t = Instant::now();
        let key = toolrouter::store::CallKey::new("default", AGENT, &format!("{}-store-run", *RUN_PREFIX), &id);
        let claim = store.claim_call(&key, &claim_req).await.expect("claim");
        assert_eq!(claim, toolrouter::store::Claim::New);
        store.finish_call(&key, outcome, 2).await.expect("finish");
        if i >= WARMUP {
            samples.push(t.elapsed());
        }
    }
    let lat = summarize(samples);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu = cpu_time();
    let t = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let (store, next, claim_req) = (store.clone(), next.clone(), claim_req.clone());
            tokio::spawn(async move {
                let run = format!("{}-store-tp-{task}", *RUN_PREFIX);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let id = format!("c{i}");
                    let key = toolrouter::store::CallKey::new("default", AGENT, &run, &id);
                    store.claim_call(&key, &claim_req).await.expect("claim");
                    store.finish_call(&key, outcome, 2).await.expect("finish");
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("store task");
    }
    let rate = total as f64 / t.elapsed().as_secs_f64();
    let per_call = |d: Duration| d.as_secs_f64() * 1e6 / total as f64;
    let (cpu_all, cpu_service) = match cpu.zip(cpu_time()) {
        Some((a, b)) => (Some(per_call(b.all - a.all)), Some(per_call(b.service - a.service))),
        None => (None, None),
    };
    (lat, Throughput { rate, cpu_all, cpu_service })
}

// ----- toolrouter under test -----

fn bench_definition(endpoint: &str) -> pb::AgentDefinition {
    let echo = pb::ToolDeclaration {
        name: "echo".into(),
        description: "Echo a short text back (benchmark tool).".into(),
        input_schema_json: r#"{"type":"object","properties":{"text":{"type":"string","maxLength":64},"n":{"type":"integer","minimum":0}},"required":["text"],"additionalProperties":false}"#.into(),
        ..Default::default()
    };
    let source = pb::ToolSource {
        id: "bench-src".into(),
        kind: Some(pb::tool_source::Kind::Function(pb::FunctionSource { endpoint: endpoint.into(), tools: vec![echo], ..Default::default() })),
        ..Default::default()
    };
    pb::AgentDefinition {
        sources: vec![source],
        groups: [("bench".to_string(), pb::ToolGroup { description: "Benchmark tools".into(), source_ids: vec!["bench-src".into()] })].into(),
        ..Default::default()
    }
}

struct Row {
    store: &'static str,
    mode: Mode,
    lat: Latency,
    tp: Throughput,
}

struct Sizes {
    lat_calls: usize,
    tp_calls: usize,
    tasks: usize,
    channels: usize,
    catalogs: usize,
    modes: Vec<Mode>,
    stores: Vec<String>,
}

/// Registers `n` other agents and has each one's catalog compiled into the cache.
async fn cache_other_catalogs(ch: &Channel, exec: &str, n: usize) {
    for i in 0..n {
        let agent_id = format!("other-{i}");
        AgentRegistryClient::new(ch.clone())
            .create_agent_version(pb::CreateAgentVersionRequest {
                agent_id: agent_id.clone(),
                definition: Some(bench_definition(exec)),
                make_default: true,
            })
            .await
            .expect("create another agent");
        RouterClient::new(ch.clone())
            .get_model_tools(pb::GetModelToolsRequest { agent: Some(pb::AgentRef { agent_id, version: 0 }), ..Default::default() })
            .await
            .expect("another agent's catalog");
    }
}

async fn bench_store(
    service: &tokio::runtime::Handle,
    store_label: &'static str,
    store_url: String,
    exec: SocketAddr,
    echo: &Echo,
    s: &Sizes,
    rows: &mut Vec<Row>,
) {
    let mut cfg = ServerConfig::for_tests();
    cfg.store = store_url;
    let cfg_store = cfg.store.clone();
    // On its own runtime: its tasks (and their CPU time) stay on its threads.
    let server = service.spawn(toolrouter::server::start(cfg)).await.expect("start task").expect("toolrouter starts");
    let chans = channels(server.grpc_addr, s.channels).await;
    AgentRegistryClient::new(chans[0].clone())
        .create_agent_version(pb::CreateAgentVersionRequest {
            agent_id: AGENT.into(),
            definition: Some(bench_definition(&format!("http://{exec}"))),
            make_default: true,
        })
        .await
        .expect("create the bench definition");
    cache_other_catalogs(&chans[0], &format!("http://{exec}"), s.catalogs).await;
    let direct = channels(exec, s.channels).await;
    let stop_bare = CancellationToken::new();
    let bare_addr = service.spawn(spawn_pass_through(exec, stop_bare.clone())).await.expect("pass-through starts");
    let bare = channels(bare_addr, s.channels).await;

    let store_url = cfg_store.clone();
    let modes: Vec<Mode> =
        [Mode::Direct, Mode::Bare, Mode::ExactlyOnce, Mode::RunOnly, Mode::Anonymous].into_iter().filter(|m| s.modes.contains(m)).collect();
    let chans_of = |m: Mode| match m {
        Mode::Direct => &direct,
        Mode::Bare => &bare,
        _ => &chans,
    };
    let before = echo.calls.load(Ordering::Relaxed);
    let lat = latencies(&modes.iter().map(|&m| (m, &chans_of(m)[0])).collect::<Vec<_>>(), store_label, s.lat_calls).await;
    let tp = throughputs(&modes.iter().map(|&m| (m, chans_of(m).as_slice())).collect::<Vec<_>>(), store_label, s.tp_calls, s.tasks).await;
    // Every call reached the executor exactly once.
    let expected = modes.len() * (WARMUP + s.lat_calls + s.tp_calls / 10 + s.tp_calls / ROUNDS * ROUNDS);
    let seen = echo.calls.load(Ordering::Relaxed) - before;
    assert_eq!(seen, expected, "the executor saw {seen} calls, expected {expected}");
    for ((mode, lat), tp) in modes.into_iter().zip(lat).zip(tp) {
        rows.push(Row { store: store_label, mode, lat, tp });
    }

    if s.modes.contains(&Mode::ExactlyOnce) {
        // A duplicate tool_call_id is answered from the store, without executing again.
        let before = echo.calls.load(Ordering::Relaxed);
        one_call(&chans[0], Mode::ExactlyOnce, &format!("{}-lat-{store_label}", *RUN_PREFIX), "call-0", &call_tool_args()).await;
        assert_eq!(echo.calls.load(Ordering::Relaxed), before, "a duplicate tool_call_id executed again");
    }
    server.shutdown().await;
    stop_bare.cancel();
    if s.modes.contains(&Mode::StoreOnly) {
        let store_url = store_url.clone();
        let (lat_calls, tp_calls, tasks) = (s.lat_calls, s.tp_calls, s.tasks);
        let (lat, tp) = service.spawn(async move { store_only(&store_url, lat_calls, tp_calls, tasks).await }).await.expect("store bench");
        rows.push(Row { store: store_label, mode: Mode::StoreOnly, lat, tp });
    }
}

/// The allocator of the `toolrouter` binary, so the figures are the service's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The path's name in the JSON lines and the ratios.
fn path_name(store: &str, mode: Mode) -> String {
    match (mode, store) {
        (Mode::Direct, _) => "direct".into(),
        (Mode::Bare, _) => "passthrough".into(),
        (Mode::Anonymous, _) => "plain".into(),
        (Mode::ExactlyOnce, "postgres") => "exactly_once_postgres".into(),
        (Mode::ExactlyOnce, "sqlite file") => "exactly_once_sqlite".into(),
        (Mode::ExactlyOnce, _) => "exactly_once_sqlite_memory".into(),
        (Mode::RunOnly, _) => "run_only".into(),
        (Mode::StoreOnly, s) => format!("store_only_{}", s.replace(' ', "_")),
    }
}

/// `--threads N` (worker threads of toolrouter's runtime and of the clients'; default: the
/// cores) and `--postgres URL` (else TOOLROUTER_TEST_POSTGRES_URL): the PostgreSQL leg.
fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix(name) {
        Some("") => args.get(i + 1).cloned(),
        Some(rest) => rest.strip_prefix('=').map(str::to_owned),
        None => None,
    })
}

fn main() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = arg("--threads").and_then(|n| n.parse().ok()).filter(|&n: &usize| n > 0).unwrap_or(cores);
    let postgres = arg("--postgres").or_else(|| std::env::var("TOOLROUTER_TEST_POSTGRES_URL").ok()).filter(|u| !u.is_empty());
    let default_stores = if postgres.is_some() { "file,postgres" } else { "file" };
    let sizes = Sizes {
        lat_calls: knob("BENCH_LAT_CALLS", 3000),
        tp_calls: knob("BENCH_TP_CALLS", 20_000),
        tasks: knob("BENCH_TASKS", 64),
        channels: knob("BENCH_CHANNELS", 4),
        catalogs: knob("BENCH_CATALOGS", 0),
        modes: list("BENCH_MODES", "direct,bare,once,anon")
            .iter()
            .filter_map(|m| match m.as_str() {
                "direct" => Some(Mode::Direct),
                "bare" => Some(Mode::Bare),
                "once" => Some(Mode::ExactlyOnce),
                "anon" => Some(Mode::Anonymous),
                "run" => Some(Mode::RunOnly),
                "store" => Some(Mode::StoreOnly),
                _ => None,
            })
            .collect(),
        stores: list("BENCH_STORES", default_stores),
    };
    // Clients and the executor on one runtime, toolrouter on another (as it would be in its
    // own process), each with `threads` workers.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).thread_name("bench-peers").enable_all().build().expect("runtime");
    let service =
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).thread_name(SERVICE_THREADS).enable_all().build().expect("runtime");
    let svc = service.handle().clone();
    let started = Instant::now();
    let load = || {
        std::fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split_whitespace().next().map(str::to_string)).unwrap_or_else(|| "n/a".into())
    };
    let load_before = load();
    let rows = rt.block_on(async {
        let stop = CancellationToken::new();
        let (exec, echo) = spawn_echo(stop.clone()).await;
        let mut rows = Vec::new();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("toolrouter-bench-{}-{nanos}.db", std::process::id()));
        // The first store measures every path; later ones only their exactly-once path.
        let mut first = true;
        for store in &sizes.stores {
            let (label, url) = match store.as_str() {
                "file" => ("sqlite file", format!("sqlite://{}", path.display())),
                "memory" => ("sqlite memory", "sqlite::memory:".to_string()),
                "postgres" => match &postgres {
                    Some(url) => ("postgres", url.clone()),
                    None => {
                        println!("postgres: no server given (--postgres URL or TOOLROUTER_TEST_POSTGRES_URL); skipped");
                        continue;
                    }
                },
                other => panic!("unknown store {other:?} in BENCH_STORES (file, memory, postgres)"),
            };
            let modes = if first { sizes.modes.clone() } else { sizes.modes.iter().copied().filter(|m| *m == Mode::ExactlyOnce).collect() };
            first = false;
            let s = Sizes { modes, stores: Vec::new(), ..sizes };
            bench_store(&svc, label, url, exec, &echo, &s, &mut rows).await;
        }
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        stop.cancel();
        rows
    });

    println!();
    println!(
        "toolrouter proxy benchmark: loopback 127.0.0.1, {threads} worker thread(s) per runtime; latency: {} sequential calls per path \
         (after {WARMUP} warm-up), the paths taking turns;",
        sizes.lat_calls
    );
    println!(
        "throughput: {} calls per path from {} concurrent tasks over {} HTTP/2 connections, in {ROUNDS} alternating rounds.",
        sizes.tp_calls, sizes.tasks, sizes.channels
    );
    println!("NOTE: clients, toolrouter and the echo executor share this machine's {cores} CPU core(s) in one process");
    println!("      (toolrouter on a runtime of its own); 1-min load average {load_before} before, {} after", load());
    println!("      (other work on the machine slows wall-clock figures, not CPU figures).");
    println!();
    let cpu = |c: Option<f64>| c.map(|c| format!("{c:.1}")).unwrap_or_else(|| "n/a".into());
    println!(
        "{:<28} {:<14} {:>9} {:>9} {:>9} {:>10} {:>13} {:>15}",
        "path", "store", "p50 µs", "p99 µs", "mean µs", "calls/s", "CPU µs/call", "hop CPU µs/call"
    );
    // The hop's own CPU per call: toolrouter's threads (or the pass-through's, on the same
    // runtime); for the direct path, the whole process (clients and executor).
    let hop_cpu = |r: &Row| if r.mode == Mode::Direct { r.tp.cpu_all } else { r.tp.cpu_service };
    for r in &rows {
        let name = path_name(r.store, r.mode);
        println!(
            "{name:<28} {:<14} {:>9.1} {:>9.1} {:>9.1} {:>10.0} {:>13} {:>15}",
            if matches!(r.mode, Mode::Direct | Mode::Bare) { "-" } else { r.store },
            r.lat.p50,
            r.lat.p99,
            r.lat.mean,
            r.tp.rate,
            cpu(r.tp.cpu_all),
            cpu(hop_cpu(r)),
        );
        let line = |figure: &str, value: f64| {
            println!(
                "{}",
                serde_json::json!({"bench": "proxy", "figure": figure, "path": name, "threads": threads, "value": (value * 10.0).round() / 10.0})
            )
        };
        if let Some(c) = hop_cpu(r) {
            line("cpu_per_call_us", c);
        }
        line("p50_us", r.lat.p50);
        line("p99_us", r.lat.p99);
        line("calls_per_s", r.tp.rate);
    }
    println!("(CPU µs/call: the whole process; hop CPU: toolrouter's or the pass-through's own threads per throughput call,");
    println!(" the direct path's is the whole process. PostgreSQL's own CPU is in its server, not counted here.)");
    println!();
    let find = |name: &str| rows.iter().find(|r| path_name(r.store, r.mode) == name);
    let ok = |b: bool| if b { "ok" } else { "OVER" };
    if let Some(bare) = find("passthrough").and_then(|b| b.tp.cpu_service) {
        for (name, target) in [("plain", 1.2), ("exactly_once_sqlite", 1.6), ("exactly_once_postgres", f64::NAN)] {
            let Some(c) = find(name).and_then(|r| r.tp.cpu_service) else { continue };
            let ratio = c / bare;
            let verdict = if target.is_nan() { String::new() } else { format!(" (target ≤ {target}×: {})", ok(ratio <= target)) };
            println!("hop CPU per call, {name} ÷ passthrough: {c:.1} ÷ {bare:.1} µs = {ratio:.2}×{verdict}");
            println!(
                "{}",
                serde_json::json!({"bench": "proxy", "figure": "cpu_ratio_to_passthrough", "path": name, "threads": threads, "value": (ratio * 100.0).round() / 100.0})
            );
        }
    }
    if let (Some(direct), Some(once)) = (find("direct"), find("exactly_once_sqlite")) {
        let added = once.lat.p50 - direct.lat.p50;
        println!("added p50 of exactly_once_sqlite over direct: {added:+.1} µs (SPEC §10: ≤ 150 µs: {})", ok(added <= 150.0));
        if let Some(c) = once.tp.cpu_service {
            println!(
                "a replica with the {cores} cores to itself (cores / toolrouter CPU per call): ~{:.0} calls/s (SPEC §10: ≥ 10,000)",
                cores as f64 * 1e6 / c.max(1.0)
            );
        }
    }
    println!("total bench time {:.1} s", started.elapsed().as_secs_f64());
}
