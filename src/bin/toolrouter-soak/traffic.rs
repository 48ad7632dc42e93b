//! Traffic: the agent definition, gRPC clients (single calls, batches, resends of the same
//! tool_call_id to another replica or raced on A and B), MCP sessions, resolvers of deferred
//! records and a ListDeferred checker; and the retry rule: a failed attempt is retried with
//! the same id on another live replica of the same store (or on the restarted node), time
//! waiting for a replica to come back not counted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::{Code, Request, Status};
use toolrouter::pb;
use toolrouter::pb::router_client::RouterClient;

use crate::Soak;
use crate::checks::{Answer, CallRec, Listed, resolved_ids, watched_at_sigterm};
use crate::nodes::{Node, Store};

const RPC_TIMEOUT: Duration = Duration::from_secs(40);

fn decl(name: &str, description: &str, schema: Value, idempotent: bool, requires_approval: bool) -> pb::ToolDeclaration {
    pb::ToolDeclaration {
        name: name.into(),
        description: description.into(),
        input_schema_json: schema.to_string(),
        idempotent,
        requires_approval,
        ..Default::default()
    }
}

fn source(id: &str, kind: pb::tool_source::Kind) -> pb::ToolSource {
    pb::ToolSource {
        id: id.into(),
        tool_configs: [("*".to_string(), pb::ToolConfig { pin: true, ..Default::default() })].into(),
        kind: Some(kind),
        ..Default::default()
    }
}

/// The soak agent: `records` (lookup, slow_read) on executor 1, `ops` (slow_write, refund
/// with approval) on executor 2, `client` (confirm, a client tool). Every tool is pinned, so
/// it is called by its canonical name (`records__lookup`).
pub fn definition(endpoints: &[String]) -> pb::AgentDefinition {
    let keyed = json!({"type": "object", "properties": {"key": {"type": "integer"}, "ms": {"type": "integer", "minimum": 0}}, "required": ["key"]});
    let function = |endpoint: &str, tools| {
        pb::tool_source::Kind::Function(pb::FunctionSource { endpoint: endpoint.into(), tools, max_concurrency: 512, ..Default::default() })
    };
    let records = vec![
        decl("lookup", "Look a record up by key (fast).", keyed.clone(), true, false),
        decl("slow_read", "Read a record slowly.", keyed.clone(), true, false),
    ];
    let ops = vec![
        decl("slow_write", "Write a record (slow, not idempotent).", keyed, false, false),
        decl(
            "refund",
            "Refund an amount (needs approval).",
            json!({"type": "object", "properties": {"amount": {"type": "number"}, "ms": {"type": "integer"}}, "required": ["amount"]}),
            false,
            true,
        ),
    ];
    let confirm =
        vec![decl("confirm", "Ask the user to confirm.", json!({"type": "object", "properties": {"question": {"type": "string"}}}), false, false)];
    let group = |d: &str, s: &str| pb::ToolGroup { description: d.into(), source_ids: vec![s.into()] };
    pb::AgentDefinition {
        sources: vec![
            source("records-src", function(&endpoints[0], records)),
            source("ops-src", function(&endpoints[1], ops)),
            source("client-src", pb::tool_source::Kind::Client(pb::ClientSource { tools: confirm })),
        ],
        groups: [
            ("records".to_string(), group("Records", "records-src")),
            ("ops".to_string(), group("Operations", "ops-src")),
            ("client".to_string(), group("Client", "client-src")),
        ]
        .into(),
        ..Default::default()
    }
}

/// Registers the agent through the real API: on A (PostgreSQL, B sees it) and on C.
pub async fn register(soak: &Soak) -> Result<()> {
    let def = definition(&soak.executors.endpoints());
    for name in ["A", "C"] {
        let mut reg = pb::agent_registry_client::AgentRegistryClient::new(soak.node(name).channel.clone());
        let v = reg
            .create_agent_version(pb::CreateAgentVersionRequest { agent_id: soak.agent.clone(), definition: Some(def.clone()), make_default: true })
            .await
            .map_err(|e| anyhow!("registering the agent on {name}: {e}"))?
            .into_inner();
        let tools = RouterClient::new(soak.node(name).channel.clone())
            .get_model_tools(pb::GetModelToolsRequest {
                agent: Some(pb::AgentRef { agent_id: soak.agent.clone(), version: 0 }),
                run: Some(pb::RunContext::default()),
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow!("model tools on {name}: {e}"))?
            .into_inner();
        let names: Vec<String> = tools.tools.iter().map(|t| t.name.clone()).collect();
        for t in TOOLS {
            if !names.iter().any(|n| n == t.name) {
                return Err(anyhow!("{} is not among the model tools on {name}: {names:?} {:?}", t.name, tools.diagnostics));
            }
        }
        soak.log(format!("agent {} version {} registered on {name} ({})", soak.agent, v.version, if name == "A" { "PostgreSQL" } else { "SQLite" }));
    }
    Ok(())
}

/// A tool the clients call: canonical name, weight, slow.
pub struct Tool {
    pub name: &'static str,
    weight: u32,
    pub slow: bool,
}

pub const TOOLS: [Tool; 5] = [
    Tool { name: "records__lookup", weight: 50, slow: false },
    Tool { name: "records__slow_read", weight: 12, slow: true },
    Tool { name: "ops__slow_write", weight: 15, slow: true },
    Tool { name: "ops__refund", weight: 12, slow: false },
    Tool { name: "client__confirm", weight: 11, slow: false },
];

fn pick_tool(rng: &mut StdRng) -> &'static Tool {
    let total: u32 = TOOLS.iter().map(|t| t.weight).sum();
    let mut x = rng.random_range(0..total);
    for t in &TOOLS {
        if x < t.weight {
            return t;
        }
        x -= t.weight;
    }
    &TOOLS[0]
}

fn arguments(rng: &mut StdRng, tool: &Tool) -> String {
    let key = rng.random_range(1..100_000);
    match tool.name {
        "records__lookup" => json!({"key": key}),
        "records__slow_read" => json!({"key": key, "ms": rng.random_range(300..1500)}),
        "ops__slow_write" => json!({"key": key, "ms": rng.random_range(800..2500)}),
        "ops__refund" => json!({"amount": key as f64 / 100.0, "ms": rng.random_range(100..600)}),
        _ => json!({"question": format!("confirm {key}?")}),
    }
    .to_string()
}

/// What a retried operation came to: an answer, a refusal (status code name), or nothing
/// (gave up), with how long it took on live replicas.
pub struct Tried<T> {
    pub value: Option<Result<T, String>>,
    pub attempts: u32,
    pub live: Duration,
}

/// Codes that are an answer, not a failure to retry.
fn definitive(code: Code) -> bool {
    matches!(
        code,
        Code::InvalidArgument
            | Code::FailedPrecondition
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::OutOfRange
            | Code::Unimplemented
    )
}

/// Runs `op` on a live replica of `store` (`prefer` first) until it is answered; a failed
/// attempt is retried with the same request on another live replica.
pub async fn with_retries<T, F, Fut>(soak: &Soak, store: Store, prefer: Option<&str>, slow: bool, mut op: F) -> Tried<T>
where
    F: FnMut(Arc<Node>) -> Fut,
    Fut: Future<Output = Result<T, Status>>,
{
    let give_up = soak.stuck_after() + Duration::from_secs(25);
    let (mut live, mut attempts, mut last): (Duration, u32, Option<&str>) = (Duration::ZERO, 0, prefer);
    loop {
        if live > give_up {
            return Tried { value: None, attempts, live };
        }
        let up: Vec<&Arc<Node>> = soak.of_store(store).filter(|n| n.is_up()).collect();
        let node = if attempts == 0 {
            up.iter().find(|n| Some(n.name) == prefer).or(up.first())
        } else {
            up.iter().find(|n| Some(n.name) != last).or(up.first())
        };
        let Some(node) = node.map(|n| (*n).clone()) else {
            tokio::time::sleep(Duration::from_millis(100)).await; // waiting for a replica: not counted
            continue;
        };
        let started = Instant::now();
        let guard = node.begin(slow);
        let r = op(node.clone()).await;
        let watched = watched_at_sigterm(soak, guard.id);
        drop(guard);
        live += started.elapsed();
        attempts += 1;
        match r {
            Ok(v) => return Tried { value: Some(Ok(v)), attempts, live },
            Err(s) if definitive(s.code()) => return Tried { value: Some(Err(format!("{:?}", s.code()))), attempts, live },
            Err(s) => {
                if let Some(what) = watched {
                    soak.ledger.findings.lock().unwrap().unanswered_at_sigterm.push(format!("{what}: {:?} {}", s.code(), s.message()));
                }
                soak.count(format!("attempt {:?}", s.code()), 1);
                last = Some(node.name);
                let pause = Instant::now();
                tokio::time::sleep(Duration::from_millis(100 + (attempts as u64 % 4) * 50)).await;
                live += pause.elapsed();
            }
        }
    }
}

fn agent_ref(soak: &Soak) -> Option<pb::AgentRef> {
    Some(pb::AgentRef { agent_id: soak.agent.clone(), version: 0 })
}

fn run_ctx(run: &str) -> Option<pb::RunContext> {
    Some(pb::RunContext { run_id: run.into(), ..Default::default() })
}

async fn handle(soak: &Soak, node: Arc<Node>, run: &str, call: pb::ToolCall) -> Result<Answer, Status> {
    let mut req = Request::new(pb::HandleToolCallRequest { agent: agent_ref(soak), run: run_ctx(run), call: Some(call), ..Default::default() });
    req.set_timeout(RPC_TIMEOUT);
    soak.count("grpc requests", 1);
    Ok(Answer::from_outcome(RouterClient::new(node.channel.clone()).handle_tool_call(req).await?.into_inner().outcome))
}

/// A deferred record for the resolvers.
pub struct Job {
    store: Store,
    id: String,
    kind: i32,
}

/// One call (new or resent) with retries; the answer goes to the ledger.
#[allow(clippy::too_many_arguments)]
async fn call(
    soak: &Soak,
    store: Store,
    prefer: Option<&str>,
    run: &str,
    id: &str,
    tool: &str,
    args: &str,
    jobs: Option<&mpsc::UnboundedSender<Job>>,
) -> Option<Answer> {
    let slow = TOOLS.iter().any(|t| t.name == tool && t.slow);
    let pc = pb::ToolCall { tool_call_id: id.into(), tool_name: tool.into(), arguments_json: args.into() };
    let t = with_retries(soak, store, prefer, slow, |node| handle(soak, node, run, pc.clone())).await;
    record(soak, store, run, &pc, t.value.map(|v| v.unwrap_or_else(Answer::Refused)), t.attempts, t.live, jobs)
}

#[allow(clippy::too_many_arguments)]
fn record(
    soak: &Soak,
    store: Store,
    run: &str,
    c: &pb::ToolCall,
    answer: Option<Answer>,
    attempts: u32,
    live: Duration,
    jobs: Option<&mpsc::UnboundedSender<Job>>,
) -> Option<Answer> {
    let Some(a) = answer else {
        soak.ledger.unanswered(store, run, &c.tool_call_id, &c.tool_name, &c.arguments_json, live);
        return None;
    };
    soak.ledger.answered(store, run, &c.tool_call_id, &c.tool_name, &c.arguments_json, &a, attempts > 1, live);
    if let (Answer::Deferred { id, kind }, Some(jobs)) = (&a, jobs) {
        let _ = jobs.send(Job { store, id: id.clone(), kind: *kind });
    }
    Some(a)
}

/// Resends a call of the ledger (end check); false if it went unanswered.
pub async fn resend(soak: &Soak, c: &CallRec) -> bool {
    call(soak, c.store, None, &c.run, &c.id, &c.tool, &c.args, None).await.is_some()
}

/// The other replica of the store (A ↔ B), or C itself.
fn other(name: &str) -> &'static str {
    match name {
        "A" => "B",
        "B" => "A",
        _ => "C",
    }
}

/// One gRPC client: single calls, batches, resends, races, until the traffic stops.
async fn client(soak: Arc<Soak>, n: usize, jobs: mpsc::UnboundedSender<Job>) {
    let mut rng = StdRng::seed_from_u64(soak.args.seed.wrapping_mul(1000) + n as u64);
    let mut seq = 0u64;
    let mut recent: Vec<(Store, String, String, String, String)> = Vec::new();
    while !soak.stop.is_cancelled() {
        seq += 1;
        let store = if rng.random_bool(0.65) { Store::Pg } else { Store::Lite };
        let prefer = match store {
            Store::Pg if rng.random_bool(0.5) => "A",
            Store::Pg => "B",
            Store::Lite => "C",
        };
        let run = format!("{}-c{n}-r{}", store.label(), seq / 15);
        let id = format!("c{n}-{seq}");
        let roll = rng.random_range(0..100);
        if roll < 12 && !recent.is_empty() {
            // Resend an id already answered, to the other replica of its store.
            let (store, run, id, tool, args) = recent[rng.random_range(0..recent.len())].clone();
            soak.count("duplicate sends", 1);
            let to = if store == Store::Pg { if rng.random_bool(0.5) { "A" } else { "B" } } else { "C" };
            call(&soak, store, Some(to), &run, &id, &tool, &args, None).await;
        } else if roll < 18 {
            // The same new id at once on two replicas (on C: twice on C).
            let tool = pick_tool(&mut rng);
            let args = arguments(&mut rng, tool);
            soak.count("raced", 1);
            let (first, second) = if store == Store::Pg { ("A", "B") } else { ("C", "C") };
            let (a, b) = tokio::join!(
                call(&soak, store, Some(first), &run, &id, tool.name, &args, Some(&jobs)),
                call(&soak, store, Some(second), &run, &id, tool.name, &args, None)
            );
            soak.count("calls", 1);
            if let Some(a) = a.or(b) {
                soak.outcome(a.kind());
            }
        } else if roll < 38 {
            batch(&soak, &mut rng, store, prefer, &run, &id, &jobs).await;
        } else {
            let tool = pick_tool(&mut rng);
            let args = arguments(&mut rng, tool);
            let pc = pb::ToolCall { tool_call_id: id.clone(), tool_name: tool.name.into(), arguments_json: args.clone() };
            soak.count("single calls", 1);
            soak.count("calls", 1);
            let t = with_retries(&soak, store, Some(prefer), tool.slow, |node| handle(&soak, node, &run, pc.clone())).await;
            let first_time = t.attempts == 1 && matches!(t.value, Some(Ok(_)));
            if let Some(a) = record(&soak, store, &run, &pc, t.value.map(|v| v.unwrap_or_else(Answer::Refused)), t.attempts, t.live, Some(&jobs)) {
                if tool.name == "records__lookup" && first_time && a.kind() == "result" {
                    soak.ledger.stats.lock().unwrap().latency.record(t.live);
                }
                soak.outcome(a.kind());
                recent.push((store, run.clone(), id.clone(), tool.name.into(), args));
                if recent.len() > 30 {
                    recent.remove(0);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(5..60))).await;
    }
}

/// A `HandleToolCalls` batch of 2–4 calls (at most one slow), retried as a whole.
async fn batch(soak: &Soak, rng: &mut StdRng, store: Store, prefer: &str, run: &str, id: &str, jobs: &mpsc::UnboundedSender<Job>) {
    let size = rng.random_range(2..=4);
    let mut calls = Vec::new();
    let mut slow = false;
    for i in 0..size {
        let mut tool = pick_tool(rng);
        if tool.slow && slow {
            tool = &TOOLS[0];
        }
        slow |= tool.slow;
        calls.push(pb::ToolCall { tool_call_id: format!("{id}-{i}"), tool_name: tool.name.into(), arguments_json: arguments(rng, tool) });
    }
    soak.count("batches", 1);
    soak.count("calls", size as u64);
    let t = with_retries(soak, store, Some(prefer), slow, |node| {
        let req = pb::HandleToolCallsRequest { agent: agent_ref(soak), run: run_ctx(run), calls: calls.clone(), ..Default::default() };
        let expected = calls.len();
        async move {
            let mut req = Request::new(req);
            req.set_timeout(RPC_TIMEOUT);
            soak.count("grpc requests", 1);
            let out = RouterClient::new(node.channel.clone()).handle_tool_calls(req).await?.into_inner().outcomes;
            if out.len() != expected {
                return Err(Status::internal(format!("{} outcomes for {expected} calls", out.len())));
            }
            Ok(out.into_iter().map(|o| Answer::from_outcome(o.outcome)).collect::<Vec<_>>())
        }
    })
    .await;
    for (i, c) in calls.iter().enumerate() {
        let answer = match &t.value {
            Some(Ok(v)) => Some(v[i].clone()),
            Some(Err(code)) => Some(Answer::Refused(code.clone())),
            None => None,
        };
        if let Some(a) = record(soak, store, run, c, answer, t.attempts, t.live, Some(jobs)) {
            soak.outcome(a.kind());
        }
    }
}

/// Resolves deferred records: approve or deny approvals, answer client executions; about a
/// third twice, the second time on the other replica.
async fn resolver(soak: Arc<Soak>, n: u64, jobs: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>>) {
    let mut rng = StdRng::seed_from_u64(soak.args.seed.wrapping_mul(7919) + n);
    loop {
        let job = tokio::select! {
            j = async { jobs.lock().await.recv().await } => j,
            _ = soak.stop.cancelled() => None,
        };
        let Some(job) = job else { return };
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..1500))).await;
        use pb::resolve_deferred_request::Resolution;
        let (name, resolution) = if job.kind == pb::DeferredKind::ClientExecution as i32 {
            ("client_result", Resolution::ClientResult(pb::ClientResult { content_json: json!({"confirmed": job.id}).to_string(), is_error: false }))
        } else if rng.random_bool(0.75) {
            ("approved", Resolution::Approve(pb::Approve { arguments_json: None }))
        } else {
            ("denied", Resolution::Deny(pb::Deny { message: "not now".into() }))
        };
        let first = if job.store == Store::Pg { if rng.random_bool(0.5) { "A" } else { "B" } } else { "C" };
        let twice = rng.random_bool(0.33);
        for to in if twice { vec![first, other(first)] } else { vec![first] } {
            soak.count("resolutions", 1);
            let req = pb::ResolveDeferredRequest { deferred_id: job.id.clone(), resolution: Some(resolution.clone()), ..Default::default() };
            let t = with_retries(&soak, job.store, Some(to), name == "approved", |node| {
                let req = req.clone();
                async move {
                    let mut req = Request::new(req);
                    req.set_timeout(RPC_TIMEOUT);
                    Ok(RouterClient::new(node.channel.clone()).resolve_deferred(req).await?.into_inner())
                }
            })
            .await;
            match t.value {
                Some(Ok(r)) => soak.ledger.resolved(&job.id, name, Some((r.content_json, r.is_error)), t.live),
                Some(Err(code)) => soak.ledger.findings.lock().unwrap().lost.push(format!("resolving deferred {} ({name}) on {to}: {code}", job.id)),
                None => soak.ledger.resolved(&job.id, name, None, t.live),
            }
        }
        if twice {
            soak.count("resolved twice", 1);
        }
    }
}

/// Every deferred record of the agent in `store` (all pages, all states).
pub async fn list_all_deferred(soak: &Soak, store: Store) -> Result<HashMap<String, Listed>> {
    list_deferred(soak, store, pb::DeferredState::Unspecified).await
}

async fn list_deferred(soak: &Soak, store: Store, state: pb::DeferredState) -> Result<HashMap<String, Listed>> {
    let mut all = HashMap::new();
    let mut token = String::new();
    loop {
        let req = pb::ListDeferredRequest {
            agent_id: soak.agent.clone(),
            run_id: String::new(),
            state: state as i32,
            page_size: 500,
            page_token: token.clone(),
            ..Default::default()
        };
        let t = with_retries(soak, store, None, false, |node| {
            let req = req.clone();
            async move { Ok(RouterClient::new(node.channel.clone()).list_deferred(Request::new(req)).await?.into_inner()) }
        })
        .await;
        let page = match t.value {
            Some(Ok(p)) => p,
            Some(Err(code)) => return Err(anyhow!("ListDeferred refused: {code}")),
            None => return Err(anyhow!("ListDeferred unanswered")),
        };
        for r in page.records {
            let id = r.call.as_ref().map(|c| c.deferred_id.clone()).unwrap_or_default();
            all.insert(id, Listed { state: r.state, result: r.result.map(|x| (x.content_json, x.is_error)) });
        }
        if page.next_page_token.is_empty() {
            return Ok(all);
        }
        token = page.next_page_token;
    }
}

/// Every 3 s: no record the harness saw resolved may be listed as pending.
async fn list_checker(soak: Arc<Soak>) {
    while !soak.stop.is_cancelled() {
        tokio::time::sleep(Duration::from_secs(3)).await;
        for store in [Store::Pg, Store::Lite] {
            let resolved = resolved_ids(&soak);
            if let Ok(pending) = list_deferred(&soak, store, pb::DeferredState::Pending).await {
                soak.count("ListDeferred checks", 1);
                for id in pending.keys().filter(|id| resolved.contains(*id)) {
                    soak.ledger.findings.lock().unwrap().lost.push(format!("{} deferred {id} resolved but listed as pending", store.label()));
                }
            }
        }
    }
}

/// One MCP client: sessions (initialize, tools/call ×2–6, DELETE) on any replica; a session
/// opened on A or B continues on the other when its replica goes away.
async fn mcp_client(soak: Arc<Soak>, n: usize) {
    let mut rng = StdRng::seed_from_u64(soak.args.seed.wrapping_mul(31337) + n as u64);
    let http = reqwest::Client::builder().timeout(RPC_TIMEOUT).build().expect("HTTP client");
    let path = format!("/mcp/agents/{}", soak.agent);
    while !soak.stop.is_cancelled() {
        let store = if rng.random_bool(0.65) { Store::Pg } else { Store::Lite };
        let Some(mut node) = soak.of_store(store).find(|n| n.is_up()).cloned() else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}});
        let session = match post(&http, &node, &path, None, &init).await {
            Ok((200, headers, _)) => headers,
            Ok((status, _, body)) => {
                soak.count(format!("mcp initialize {status}"), 1);
                soak.ledger.findings.lock().unwrap().notes.push(format!("MCP initialize on {}: {status} {body}", node.name));
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(_) => {
                soak.count("mcp initialize failed (replica down)", 1);
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        soak.count("mcp sessions", 1);
        let _ = post(&http, &node, &path, Some(&session), &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        for i in 0..rng.random_range(2..=6) {
            let tool = if rng.random_bool(0.8) { &TOOLS[0] } else { &TOOLS[1] };
            let args: Value = serde_json::from_str(&arguments(&mut rng, tool)).expect("JSON");
            let body = json!({"jsonrpc": "2.0", "id": 2 + i, "method": "tools/call", "params": {"name": tool.name, "arguments": args}});
            soak.count("mcp tools/call", 1);
            let guard = node.begin(tool.slow);
            let r = post(&http, &node, &path, Some(&session), &body).await;
            let watched = watched_at_sigterm(&soak, guard.id);
            drop(guard);
            let kind = match r {
                Ok((200, _, b)) if b["result"]["isError"] == json!(true) => {
                    let text = b["result"]["content"][0]["text"].as_str().unwrap_or_default();
                    let code = serde_json::from_str::<Value>(text).ok().and_then(|v| v["error"].as_str().map(str::to_string));
                    format!("error {}", code.unwrap_or_else(|| "tool".into()))
                }
                Ok((200, _, b)) if b.get("result").is_some() => "result".into(),
                Ok((status, _, b)) => format!("HTTP {status} {}", b["error"]["code"]),
                Err(e) => {
                    if let Some(what) = watched {
                        soak.ledger.findings.lock().unwrap().unanswered_at_sigterm.push(format!("{what} (MCP tools/call): {e}"));
                    }
                    // Not retried (a new request is a new call); the session moves on.
                    if let Some(n) = soak.of_store(store).find(|n| n.is_up() && n.name != node.name) {
                        node = n.clone();
                    }
                    "failed (replica down)".into()
                }
            };
            soak.count(format!("mcp call {kind}"), 1);
            tokio::time::sleep(Duration::from_millis(rng.random_range(5..80))).await;
        }
        let _ = node;
        let node = soak.of_store(store).find(|n| n.is_up()).cloned();
        if let Some(node) = node {
            let r = http.delete(format!("http://{}{path}", node.http)).header("mcp-session-id", &session).send().await;
            soak.count(format!("mcp DELETE {}", r.map(|r| r.status().as_u16().to_string()).unwrap_or_else(|_| "failed".into())), 1);
        }
    }
}

/// POSTs a JSON-RPC message: (status, session id, parsed body).
async fn post(http: &reqwest::Client, node: &Node, path: &str, session: Option<&str>, body: &Value) -> Result<(u16, String, Value)> {
    let mut req = http
        .post(format!("http://{}{path}", node.http))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s).header("mcp-protocol-version", "2025-06-18");
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let sid = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let bytes = resp.bytes().await?;
    Ok((status, sid, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

/// Starts the clients (about one in six speaks MCP), the resolvers and the list checker.
pub fn spawn(soak: Arc<Soak>) -> (Vec<JoinHandle<()>>, Vec<JoinHandle<()>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let mcp = (soak.args.concurrency / 6).max(1);
    let mut clients = Vec::new();
    for n in 0..soak.args.concurrency {
        clients.push(if n < mcp { tokio::spawn(mcp_client(soak.clone(), n)) } else { tokio::spawn(client(soak.clone(), n, tx.clone())) });
    }
    let mut others: Vec<JoinHandle<()>> = (0..3).map(|n| tokio::spawn(resolver(soak.clone(), n, rx.clone()))).collect();
    others.push(tokio::spawn(list_checker(soak)));
    (clients, others)
}
