//! Test harness: the real server in-process on 127.0.0.1:0, generated gRPC clients, and
//! fake executors that are real gRPC servers.
#![allow(dead_code)]

pub mod pg;

/// Panics of in-process servers fail the test that owns them. Such a panic happens in a task
/// that tokio or hyper catches, so on its own the test would still pass, or hang. Instead the
/// first `PanicWatch` installs a process-wide panic hook that records every panic (thread,
/// tokio runtime, location, message), then runs the hook that was there (which prints it as
/// usual). `TestServer`, `ExecutorHandle`, `McpServer` and the other test doubles hold a watch
/// started with them; dropped, it panics with the panics recorded since on the test's own
/// runtime (each `#[tokio::test]` has one: its thread, and any worker or blocking threads) or,
/// outside any runtime, on the test's thread. Tests run in parallel in one process; this
/// keeps one test's panic from failing another. If the test is already panicking the watch
/// prints those before the panic it unwinds from instead. The fake executor also catches its
/// handler's panic and answers `Internal` with its message, so the call fails at once.
pub mod panics;

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::pb::agent_registry_client::AgentRegistryClient;
use toolrouter::pb::discovery_client::DiscoveryClient;
use toolrouter::pb::router_client::RouterClient;
use toolrouter::pb::tool_executor_server::{ToolExecutor, ToolExecutorServer};
use toolrouter::server::RunningServer;

pub use panics::{PanicWatch, Watched};

pub struct TestServer {
    pub server: RunningServer,
    pub channel: Channel,
    /// Dropped after the server: re-raises the test's panics (see `panics`).
    panics: PanicWatch,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(ServerConfig::for_tests()).await
    }

    pub async fn start_with(cfg: ServerConfig) -> Self {
        let panics = PanicWatch::start("the toolrouter server (TestServer)");
        let server = toolrouter::server::start(cfg).await.expect("server starts");
        let channel = Channel::from_shared(format!("http://{}", server.grpc_addr)).expect("uri").connect().await.expect("connect");
        Self { server, channel, panics }
    }

    pub fn registry(&self) -> AgentRegistryClient<Channel> {
        AgentRegistryClient::new(self.channel.clone())
    }

    pub fn discovery(&self) -> DiscoveryClient<Channel> {
        DiscoveryClient::new(self.channel.clone())
    }

    pub fn router(&self) -> RouterClient<Channel> {
        RouterClient::new(self.channel.clone())
    }

    pub async fn create(&self, agent: &str, def: pb::AgentDefinition) -> pb::AgentVersion {
        self.registry()
            .create_agent_version(pb::CreateAgentVersionRequest { agent_id: agent.into(), definition: Some(def), make_default: true })
            .await
            .expect("create version")
            .into_inner()
    }

    /// Calls a tool as the model would and returns the outcome.
    pub async fn call(&self, agent: &str, run: &str, id: &str, tool: &str, args: serde_json::Value) -> pb::handle_tool_call_response::Outcome {
        self.router()
            .handle_tool_call(pb::HandleToolCallRequest {
                agent: Some(agent_ref(agent)),
                run: Some(run_ctx(run)),
                call: Some(pb::ToolCall { tool_call_id: id.into(), tool_name: tool.into(), arguments_json: args.to_string() }),
                ..Default::default()
            })
            .await
            .expect("handle tool call")
            .into_inner()
            .outcome
            .expect("an outcome")
    }

    /// Calls a tool and expects a result; returns (parsed content, is_error).
    pub async fn call_result(&self, agent: &str, run: &str, id: &str, tool: &str, args: serde_json::Value) -> (serde_json::Value, bool) {
        match self.call(agent, run, id, tool, args).await {
            pb::handle_tool_call_response::Outcome::Result(r) => (serde_json::from_str(&r.content_json).expect("JSON content"), r.is_error),
            other => panic!("expected a result, got {other:?}"),
        }
    }
}

pub fn agent_ref(agent: &str) -> pb::AgentRef {
    pb::AgentRef { agent_id: agent.into(), version: 0 }
}

pub fn run_ctx(run: &str) -> pb::RunContext {
    pb::RunContext { run_id: run.into(), ..Default::default() }
}

pub fn tool(name: &str, description: &str, schema: serde_json::Value) -> pb::ToolDeclaration {
    pb::ToolDeclaration { name: name.into(), description: description.into(), input_schema_json: schema.to_string(), ..Default::default() }
}

pub fn client_source(id: &str, tools: Vec<pb::ToolDeclaration>) -> pb::ToolSource {
    pb::ToolSource { id: id.into(), kind: Some(pb::tool_source::Kind::Client(pb::ClientSource { tools })), ..Default::default() }
}

pub fn function_source(id: &str, endpoint: &str, tools: Vec<pb::ToolDeclaration>) -> pb::ToolSource {
    pb::ToolSource {
        id: id.into(),
        kind: Some(pb::tool_source::Kind::Function(pb::FunctionSource { endpoint: endpoint.into(), tools, ..Default::default() })),
        ..Default::default()
    }
}

/// The function source `source` is; fails the test if it is of another kind.
pub fn function_of(source: &mut pb::ToolSource) -> &mut pb::FunctionSource {
    match &mut source.kind {
        Some(pb::tool_source::Kind::Function(f)) => f,
        other => panic!("expected a function source, got {other:?}"),
    }
}

pub fn group(description: &str, sources: &[&str]) -> pb::ToolGroup {
    pb::ToolGroup { description: description.into(), source_ids: sources.iter().map(|s| s.to_string()).collect() }
}

pub fn customer_name_tool() -> pb::ToolDeclaration {
    tool(
        "customer_name",
        "Look up the display name for a customer ID.",
        serde_json::json!({"type":"object","properties":{"customer_id":{"type":"integer","description":"Numeric customer ID"}},"required":["customer_id"]}),
    )
}

/// The seed's CRM definition: one group `crm` with `customer_name`, served by `endpoint`.
pub fn crm_definition(endpoint: &str) -> pb::AgentDefinition {
    let mut source = function_source("crm-tools", endpoint, vec![customer_name_tool()]);
    source.instructions = "Use numeric customer IDs, not display names.".into();
    pb::AgentDefinition {
        sources: vec![source],
        groups: [("crm".to_string(), group("Customer records", &["crm-tools"]))].into(),
        ..Default::default()
    }
}

/// How a fake executor behaves.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// Answers `{"echo": arguments, "tool": name}`; `customer_name` 42 → "Ada".
    Echo,
    /// Sleeps this long before answering.
    Sleep(Duration),
    /// Answers is_error=true with this message.
    Fail(String),
    /// Answers a gRPC status.
    Status(tonic::Code),
    /// Answers exactly this content, with this `is_error`.
    Reply(String, bool),
    /// Waits (at most 30 s) until the test opens the gate, then answers like `Echo`.
    Gate(Gate),
    /// Panics with this message (the harness re-raises it: tests/harness.rs).
    Panic(String),
}

/// Holds calls of a `Behaviour::Gate` executor until opened: a test makes calls overlap, or
/// looks at a call in flight, without betting on how long a sleep lasts.
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    pub fn new() -> Self {
        Self(Arc::new(tokio::sync::watch::channel(false).0))
    }

    pub fn open(&self) {
        self.0.send_replace(true);
    }

    pub fn close(&self) {
        self.0.send_replace(false);
    }

    async fn pass(&self) {
        let mut rx = self.0.subscribe();
        let opened = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|open| *open)).await;
        assert!(opened.is_ok(), "the test never opened the gate");
    }
}

#[derive(Clone)]
pub struct FakeExecutor {
    pub behaviour: Behaviour,
    pub calls: Arc<AtomicUsize>,
    pub last: Arc<std::sync::Mutex<Option<pb::ExecuteRequest>>>,
    /// What `ListTools` answers (changeable while it runs).
    pub listed: Arc<std::sync::Mutex<Vec<pb::ToolDeclaration>>>,
    /// While set, `ListTools` fails with UNAVAILABLE.
    pub listing_fails: Arc<std::sync::atomic::AtomicBool>,
    /// The `grpc-timeout` header of the last call, as received.
    pub last_timeout: Arc<std::sync::Mutex<Option<String>>>,
    /// The W3C `traceparent` metadata of the last call, as received.
    pub last_traceparent: Arc<std::sync::Mutex<Option<String>>>,
    /// Every metadata entry of the last call, as received.
    pub last_metadata: Arc<std::sync::Mutex<Vec<(String, String)>>>,
    /// Calls executing right now, and the most seen at once.
    pub inflight: Arc<AtomicUsize>,
    pub max_inflight: Arc<AtomicUsize>,
}

/// Counts a call as in flight until dropped (also when the call is cancelled).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A handler's panic as an `Internal` status (the panic hook has recorded it already).
async fn caught<T>(handler: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
    match AssertUnwindSafe(handler).catch_unwind().await {
        Ok(answer) => answer,
        Err(panic) => Err(Status::internal(format!("the fake executor panicked: {}", panics::payload_text(&*panic)))),
    }
}

#[tonic::async_trait]
impl ToolExecutor for FakeExecutor {
    async fn execute(&self, req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        caught(self.answer(req)).await
    }

    async fn list_tools(&self, _req: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        if self.listing_fails.load(Ordering::SeqCst) {
            return Err(Status::unavailable("the executor is down"));
        }
        caught(async { Ok(Response::new(pb::ListToolsResponse { tools: self.listed.lock().unwrap().clone() })) }).await
    }
}

impl FakeExecutor {
    async fn answer(&self, req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.inflight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_inflight.fetch_max(now, Ordering::SeqCst);
        let _inflight = InFlight(self.inflight.clone());
        *self.last_timeout.lock().unwrap() = req.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()).map(str::to_string);
        *self.last_traceparent.lock().unwrap() = req.metadata().get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_string);
        *self.last_metadata.lock().unwrap() =
            req.metadata().clone().into_headers().iter().map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect();
        let r = req.into_inner();
        *self.last.lock().unwrap() = Some(r.clone());
        match &self.behaviour {
            Behaviour::Echo => {}
            Behaviour::Sleep(d) => tokio::time::sleep(*d).await,
            Behaviour::Gate(g) => g.pass().await,
            Behaviour::Fail(m) => {
                return Ok(Response::new(pb::ExecuteResponse { content_json: serde_json::json!(m).to_string(), is_error: true }));
            }
            Behaviour::Status(code) => return Err(Status::new(*code, "executor status")),
            Behaviour::Reply(content_json, is_error) => {
                return Ok(Response::new(pb::ExecuteResponse { content_json: content_json.clone(), is_error: *is_error }));
            }
            Behaviour::Panic(m) => panic!("{m}"),
        }
        let args: serde_json::Value = serde_json::from_str(&r.arguments_json).unwrap_or_default();
        let content = if r.tool == "customer_name" {
            serde_json::json!(if args["customer_id"] == 42 { "Ada" } else { "Unknown" })
        } else {
            serde_json::json!({"echo": args, "tool": r.tool})
        };
        Ok(Response::new(pb::ExecuteResponse { content_json: content.to_string(), is_error: false }))
    }
}

/// A fake executor on 127.0.0.1:0; stops when dropped, then re-raises the test's panics.
pub struct ExecutorHandle {
    pub addr: SocketAddr,
    pub exec: FakeExecutor,
    cancel: CancellationToken,
    panics: PanicWatch,
}

impl ExecutorHandle {
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn calls(&self) -> usize {
        self.exec.calls.load(Ordering::SeqCst)
    }

    /// The arguments of the last call the executor received.
    pub fn last_arguments(&self) -> serde_json::Value {
        let last = self.exec.last.lock().unwrap();
        serde_json::from_str(&last.as_ref().expect("the executor was called").arguments_json).expect("JSON arguments")
    }

    /// The deadline the last call carried (`grpc-timeout`), if any.
    pub fn last_deadline(&self) -> Option<Duration> {
        self.exec.last_timeout.lock().unwrap().as_deref().map(parse_grpc_timeout)
    }

    /// The `traceparent` the last call carried, if any.
    pub fn last_traceparent(&self) -> Option<String> {
        self.exec.last_traceparent.lock().unwrap().clone()
    }

    /// Waits until `n` calls are executing at once.
    pub async fn wait_inflight(&self, n: usize) {
        let inflight = &self.exec.inflight;
        eventually(&format!("{n} calls in flight at once"), || async move { inflight.load(Ordering::SeqCst) >= n }).await;
    }

    pub fn max_inflight(&self) -> usize {
        self.exec.max_inflight.load(Ordering::SeqCst)
    }

    /// Makes `ListTools` fail (UNAVAILABLE) from now on, or answer again.
    pub fn fail_listing(&self, fails: bool) {
        self.exec.listing_fails.store(fails, Ordering::SeqCst);
    }

    /// Changes what `ListTools` answers from now on.
    pub fn set_listed(&self, tools: Vec<pb::ToolDeclaration>) {
        *self.exec.listed.lock().unwrap() = tools;
    }
}

/// Parses a `grpc-timeout` header value (`<digits><unit>`, unit one of H M S m u n).
/// Retries `probe` every 20 ms until it is true; fails after 10 s (room for a loaded machine).
pub async fn eventually<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..500 {
        if probe().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

pub fn parse_grpc_timeout(v: &str) -> Duration {
    let (digits, unit) = v.split_at(v.len() - 1);
    let n: u64 = digits.parse().expect("grpc-timeout digits");
    match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        other => panic!("unknown grpc-timeout unit {other:?}"),
    }
}

/// An endpoint on which nothing listens: connecting to it is refused.
pub async fn refused_endpoint() -> String {
    // Bound but not listening, and kept so for the whole test binary: connecting is refused,
    // and no other test's listener can be given the port meanwhile.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let addr = socket.local_addr().unwrap();
    std::mem::forget(socket);
    format!("http://{addr}")
}

impl Drop for ExecutorHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

pub async fn spawn_executor(behaviour: Behaviour) -> ExecutorHandle {
    spawn_executor_listing(behaviour, Vec::new()).await
}

pub async fn spawn_executor_listing(behaviour: Behaviour, listed: Vec<pb::ToolDeclaration>) -> ExecutorHandle {
    spawn_executor_with(behaviour, listed, None).await
}

/// A fake executor serving gRPC over TLS (`https://localhost:PORT`).
pub async fn spawn_executor_tls(behaviour: Behaviour, tls: tonic::transport::ServerTlsConfig) -> ExecutorHandle {
    spawn_executor_with(behaviour, Vec::new(), Some(tls)).await
}

async fn spawn_executor_with(
    behaviour: Behaviour,
    listed: Vec<pb::ToolDeclaration>,
    tls: Option<tonic::transport::ServerTlsConfig>,
) -> ExecutorHandle {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let panics = PanicWatch::start(format!("the fake executor on {addr}"));
    let exec = FakeExecutor {
        behaviour,
        calls: Arc::new(AtomicUsize::new(0)),
        last: Default::default(),
        listed: Arc::new(std::sync::Mutex::new(listed)),
        listing_fails: Default::default(),
        last_timeout: Default::default(),
        last_traceparent: Default::default(),
        last_metadata: Default::default(),
        inflight: Default::default(),
        max_inflight: Default::default(),
    };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let svc = ToolExecutorServer::new(exec.clone());
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).expect("executor TLS configuration");
    }
    tokio::spawn(async move {
        builder
            .add_service(svc)
            .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), stop.cancelled_owned())
            .await
            .expect("executor serves");
    });
    ExecutorHandle { addr, exec, cancel, panics }
}

/// An HTTP/2 server that accepts a call and drops the connection without answering.
pub struct DroppingExecutor {
    pub addr: SocketAddr,
    /// The calls it received (and dropped).
    pub seen: Arc<AtomicUsize>,
    panics: PanicWatch,
}

pub async fn spawn_dropping_executor() -> DroppingExecutor {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let panics = PanicWatch::start(format!("the dropping executor on {addr}"));
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else { break };
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(sock).await else { return };
                // The first request arrives: count it, then drop everything unanswered. (Not
                // an expectation: a connection closed before any request counts nothing.)
                if let Some(Ok((_req, _respond))) = conn.accept().await {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    DroppingExecutor { addr, seen, panics }
}

/// The real server in-process without `TestServer`'s plaintext channel (TLS listeners,
/// replicas), watched for panics like `TestServer`.
pub async fn start_server(cfg: ServerConfig) -> Watched<RunningServer> {
    let panics = PanicWatch::start("an in-process toolrouter server");
    Watched::new(panics, toolrouter::server::start(cfg).await.expect("server starts"))
}

/// Collects the tracing events emitted on this thread (use with the default current-thread
/// test runtime, where the server's tasks run on the test's thread).
#[derive(Clone, Default)]
pub struct EventLog(Arc<std::sync::Mutex<Vec<std::collections::BTreeMap<String, String>>>>);

impl EventLog {
    pub fn capture() -> (EventLog, tracing::subscriber::DefaultGuard) {
        use tracing_subscriber::layer::SubscriberExt;
        // With this thread's subscriber the only one in the process, tracing asks whichever
        // thread first reaches an event whether it is wanted; a test thread without a
        // subscriber answers "never" for good, and this capture misses the event. A second,
        // process-wide subscriber makes tracing ask all of them.
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
        });
        let log = EventLog::default();
        let subscriber = tracing_subscriber::registry().with(log.clone());
        (log, tracing::subscriber::set_default(subscriber))
    }

    /// Every event's fields, as captured so far.
    pub fn events(&self) -> Vec<std::collections::BTreeMap<String, String>> {
        self.0.lock().unwrap().clone()
    }

    /// Events whose message is `message` and whose `field` is `value`.
    pub fn count(&self, message: &str, field: &str, value: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.get("message").map(String::as_str) == Some(message) && e.get(field).map(String::as_str) == Some(value))
            .count()
    }
}

struct FieldsVisitor<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for FieldsVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for EventLog {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: tracing_subscriber::layer::Context<'_, S>) {
        let mut fields = std::collections::BTreeMap::new();
        event.record(&mut FieldsVisitor(&mut fields));
        self.0.lock().unwrap().push(fields);
    }
}

/// A run context with identity claims and a caller.
pub fn run_as(run: &str, user: Option<&str>, caller: pb::Caller) -> pb::RunContext {
    pb::RunContext {
        run_id: run.into(),
        identity: user.map(|u| [("user_id".to_string(), u.to_string())].into()).unwrap_or_default(),
        caller: caller as i32,
        ..Default::default()
    }
}

impl TestServer {
    /// HandleToolCall with the model's argument text as is; the gRPC status on failure.
    pub async fn handle_raw(
        &self,
        agent: &str,
        run: pb::RunContext,
        id: &str,
        tool: &str,
        arguments_json: &str,
    ) -> Result<pb::handle_tool_call_response::Outcome, Status> {
        let resp = self
            .router()
            .handle_tool_call(pb::HandleToolCallRequest {
                agent: Some(agent_ref(agent)),
                run: Some(run),
                call: Some(pb::ToolCall { tool_call_id: id.into(), tool_name: tool.into(), arguments_json: arguments_json.into() }),
                ..Default::default()
            })
            .await?;
        Ok(resp.into_inner().outcome.expect("an outcome"))
    }

    pub async fn model_tools(&self, agent: &str, run: pb::RunContext) -> pb::GetModelToolsResponse {
        self.router()
            .get_model_tools(pb::GetModelToolsRequest { agent: Some(agent_ref(agent)), run: Some(run), ..Default::default() })
            .await
            .expect("get model tools")
            .into_inner()
    }

    pub async fn resolve(&self, id: &str, resolution: pb::resolve_deferred_request::Resolution) -> Result<pb::ToolResult, Status> {
        self.router()
            .resolve_deferred(pb::ResolveDeferredRequest { deferred_id: id.into(), resolution: Some(resolution), ..Default::default() })
            .await
            .map(|r| r.into_inner())
    }

    /// `GetModelTools` in a provider's format (issue 16).
    pub async fn provider_tools(
        &self,
        agent: &str,
        run: &str,
        format: pb::ToolFormat,
        defer_loading: bool,
    ) -> Result<pb::GetModelToolsResponse, Status> {
        let req = pb::GetModelToolsRequest { agent: Some(agent_ref(agent)), run: Some(run_ctx(run)), format: format as i32, defer_loading };
        self.router().get_model_tools(req).await.map(|r| r.into_inner())
    }

    /// `HandleToolCalls` with the provider's tool-call parts as they came.
    pub async fn provider_calls(
        &self,
        agent: &str,
        run: &str,
        format: pb::ToolFormat,
        parts: &serde_json::Value,
    ) -> Result<pb::HandleToolCallsResponse, Status> {
        let req = pb::HandleToolCallsRequest {
            agent: Some(agent_ref(agent)),
            run: Some(run_ctx(run)),
            format: format as i32,
            provider_calls_json: parts.to_string(),
            ..Default::default()
        };
        self.router().handle_tool_calls(req).await.map(|r| r.into_inner())
    }
}

/// Runs `python3` with these arguments (and `stdin`, if any) off the test's runtime, so the
/// in-process servers keep serving it.
pub async fn python(args: Vec<String>, stdin: Option<String>) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new("python3").args(&args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.unwrap_or_default().as_bytes())?;
        drop(input);
        child.wait_with_output()
    })
    .await
    .expect("the python task")
    .expect("python3 runs")
}

/// The result of an outcome: (parsed content, is_error).
pub fn result_of(outcome: &pb::handle_tool_call_response::Outcome) -> (serde_json::Value, bool) {
    match outcome {
        pb::handle_tool_call_response::Outcome::Result(r) => (serde_json::from_str(&r.content_json).expect("JSON content"), r.is_error),
        other => panic!("expected a result, got {other:?}"),
    }
}

pub fn deferred_of(outcome: &pb::handle_tool_call_response::Outcome) -> pb::DeferredCall {
    match outcome {
        pb::handle_tool_call_response::Outcome::Deferred(d) => d.clone(),
        other => panic!("expected a deferred call, got {other:?}"),
    }
}

pub fn content(outcome: &pb::handle_tool_call_response::Outcome) -> serde_json::Value {
    match outcome {
        pb::handle_tool_call_response::Outcome::Result(r) => serde_json::from_str(&r.content_json).expect("JSON"),
        other => panic!("expected a result, got {other:?}"),
    }
}

/// A plain HTTP/1.1 GET on the server's HTTP listener: (status, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).expect("connect to the HTTP listener");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).expect("read the HTTP response");
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("an HTTP status line");
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        (status, body)
    })
    .await
    .expect("HTTP GET task")
}

// ----- authentication helpers (issue 6) -----

/// A fresh directory under the system temp dir, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        let n: u64 = rand_u64();
        let dir = std::env::temp_dir().join(format!("toolrouter-{label}-{}-{n:016x}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    h.finish()
}

/// SHA-256 hex of a key, as the key file stores it.
pub fn key_hash(key: &str) -> String {
    toolrouter::auth::keys::hash_hex(key)
}

/// Key file text for (key, tenant, identity claims).
pub fn key_file_json(entries: &[(&str, &str, serde_json::Value)]) -> String {
    let v: Vec<serde_json::Value> =
        entries.iter().map(|(key, tenant, identity)| serde_json::json!({"tenant": tenant, "sha256": key_hash(key), "identity": identity})).collect();
    serde_json::Value::Array(v).to_string()
}

/// An API key file in a temp dir; `replace` swaps its contents atomically (write + rename).
pub struct KeyFile {
    pub dir: TempDir,
    pub path: std::path::PathBuf,
}

impl KeyFile {
    pub fn new(text: &str) -> Self {
        let dir = TempDir::new("keys");
        let path = dir.0.join("api-keys.json");
        std::fs::write(&path, text).expect("write key file");
        KeyFile { dir, path }
    }

    pub fn with_keys(keys: &[(&str, &str)]) -> Self {
        Self::new(&key_file_json(&keys.iter().map(|(k, t)| (*k, *t, serde_json::json!({}))).collect::<Vec<_>>()))
    }

    pub fn replace(&self, text: &str) {
        let tmp = self.dir.0.join("api-keys.json.tmp");
        std::fs::write(&tmp, text).expect("write key file");
        std::fs::rename(&tmp, &self.path).expect("replace key file");
    }
}

/// Server config with API keys from `file`, re-read every 20 ms.
pub fn config_with_keys(file: &KeyFile) -> ServerConfig {
    let mut cfg = ServerConfig::for_tests();
    cfg.auth.api_keys = Some(file.path.clone());
    cfg.auth.reload_interval = Duration::from_millis(20);
    cfg
}

/// Adds `authorization: Bearer <key>` to every call (or nothing, for `Bearer(None)`).
#[derive(Clone)]
pub struct Bearer(pub Option<String>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(k) = &self.0 {
            req.metadata_mut().insert("authorization", format!("Bearer {k}").parse().expect("ASCII key"));
        }
        Ok(req)
    }
}

pub type Authed = tonic::service::interceptor::InterceptedService<Channel, Bearer>;

impl TestServer {
    /// Starts with API keys for (key, tenant) pairs; the key file lives as long as the server.
    pub async fn start_with_keys(keys: &[(&str, &str)]) -> (Self, KeyFile) {
        let file = KeyFile::with_keys(keys);
        let s = Self::start_with(config_with_keys(&file)).await;
        (s, file)
    }

    pub fn registry_as(&self, key: &str) -> AgentRegistryClient<Authed> {
        AgentRegistryClient::with_interceptor(self.channel.clone(), Bearer(Some(key.into())))
    }

    pub fn discovery_as(&self, key: &str) -> DiscoveryClient<Authed> {
        DiscoveryClient::with_interceptor(self.channel.clone(), Bearer(Some(key.into())))
    }

    pub fn router_as(&self, key: &str) -> RouterClient<Authed> {
        RouterClient::with_interceptor(self.channel.clone(), Bearer(Some(key.into())))
    }

    /// Creates (and makes default) a version as the holder of `key`.
    pub async fn create_as(&self, key: &str, agent: &str, def: pb::AgentDefinition) -> pb::AgentVersion {
        self.registry_as(key)
            .create_agent_version(pb::CreateAgentVersionRequest { agent_id: agent.into(), definition: Some(def), make_default: true })
            .await
            .expect("create version")
            .into_inner()
    }

    /// HandleToolCall as the holder of `key`.
    pub async fn call_as(
        &self,
        key: &str,
        agent: &str,
        run: pb::RunContext,
        id: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<pb::handle_tool_call_response::Outcome, Status> {
        let resp = self
            .router_as(key)
            .handle_tool_call(pb::HandleToolCallRequest {
                agent: Some(agent_ref(agent)),
                run: Some(run),
                call: Some(pb::ToolCall { tool_call_id: id.into(), tool_name: tool.into(), arguments_json: args.to_string() }),
                ..Default::default()
            })
            .await?;
        Ok(resp.into_inner().outcome.expect("an outcome"))
    }
}
