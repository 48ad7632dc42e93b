//! Test harness: the real server in-process on 127.0.0.1:0, generated gRPC clients, and
//! fake executors that are real gRPC servers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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

pub struct TestServer {
    pub server: RunningServer,
    pub channel: Channel,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(ServerConfig::for_tests()).await
    }

    pub async fn start_with(cfg: ServerConfig) -> Self {
        let server = toolrouter::server::start(cfg).await.expect("server starts");
        let channel = Channel::from_shared(format!("http://{}", server.grpc_addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect");
        Self { server, channel }
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
    pb::ToolDeclaration {
        name: name.into(),
        description: description.into(),
        input_schema_json: schema.to_string(),
        ..Default::default()
    }
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
}

#[derive(Clone)]
pub struct FakeExecutor {
    pub behaviour: Behaviour,
    pub calls: Arc<AtomicUsize>,
    pub last: Arc<std::sync::Mutex<Option<pb::ExecuteRequest>>>,
    pub listed: Vec<pb::ToolDeclaration>,
}

#[tonic::async_trait]
impl ToolExecutor for FakeExecutor {
    async fn execute(&self, req: Request<pb::ExecuteRequest>) -> Result<Response<pb::ExecuteResponse>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let r = req.into_inner();
        *self.last.lock().unwrap() = Some(r.clone());
        match &self.behaviour {
            Behaviour::Echo => {}
            Behaviour::Sleep(d) => tokio::time::sleep(*d).await,
            Behaviour::Fail(m) => {
                return Ok(Response::new(pb::ExecuteResponse { content_json: serde_json::json!(m).to_string(), is_error: true }));
            }
            Behaviour::Status(code) => return Err(Status::new(*code, "executor status")),
        }
        let args: serde_json::Value = serde_json::from_str(&r.arguments_json).unwrap_or_default();
        let content = if r.tool == "customer_name" {
            serde_json::json!(if args["customer_id"] == 42 { "Ada" } else { "Unknown" })
        } else {
            serde_json::json!({"echo": args, "tool": r.tool})
        };
        Ok(Response::new(pb::ExecuteResponse { content_json: content.to_string(), is_error: false }))
    }

    async fn list_tools(&self, _req: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse { tools: self.listed.clone() }))
    }
}

/// A fake executor on 127.0.0.1:0; stops when dropped.
pub struct ExecutorHandle {
    pub addr: SocketAddr,
    pub exec: FakeExecutor,
    cancel: CancellationToken,
}

impl ExecutorHandle {
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn calls(&self) -> usize {
        self.exec.calls.load(Ordering::SeqCst)
    }
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let exec = FakeExecutor { behaviour, calls: Arc::new(AtomicUsize::new(0)), last: Default::default(), listed };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let svc = ToolExecutorServer::new(exec.clone());
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), stop.cancelled_owned())
            .await
            .expect("executor serves");
    });
    ExecutorHandle { addr, exec, cancel }
}

/// An HTTP/2 server that accepts a call and drops the connection without answering.
pub async fn spawn_dropping_executor() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else { break };
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(sock).await else { return };
                // The first request arrives: count it, then drop everything unanswered.
                if let Some(Ok((_req, _respond))) = conn.accept().await {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (addr, seen)
}

pub fn content(outcome: &pb::handle_tool_call_response::Outcome) -> serde_json::Value {
    match outcome {
        pb::handle_tool_call_response::Outcome::Result(r) => serde_json::from_str(&r.content_json).expect("JSON"),
        other => panic!("expected a result, got {other:?}"),
    }
}
