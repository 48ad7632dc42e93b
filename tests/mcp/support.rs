//! A real MCP server (rmcp, streamable HTTP on 127.0.0.1:0) whose tools can change while it
//! runs and which records every request it sees: method, MCP session id, headers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::PanicWatch;

/// What tools named `lookalike…` answer, with `is_error`: the body of toolrouter's own
/// unknown-tool fault.
pub const LOOKALIKE_FAULT: &str = r#"{"error":"unknown_tool","message":"x"}"#;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: &'static str,
    pub session: String,
    /// The protocol version the request was served in.
    pub protocol: String,
    pub headers: BTreeMap<String, String>,
    pub tool: String,
}

#[derive(Default)]
struct State {
    tools: Vec<Tool>,
    seen: Vec<Seen>,
    /// Speaks only the protocol versions with sessions (before 2026-07-28).
    sessions_only: bool,
}

#[derive(Clone)]
struct Recording(Arc<Mutex<State>>);

/// Stops when dropped, then re-raises the test's panics (tests/common/panics.rs).
pub struct McpServer {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    cancel: CancellationToken,
    panics: PanicWatch,
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A tool with an object schema of the given properties (all strings, `required` as given).
pub fn mcp_tool(name: &str, description: &str, required: &[&str]) -> Tool {
    let props: serde_json::Map<String, Value> =
        required.iter().map(|p| (p.to_string(), json!({"type": "string", "description": format!("The {p}")}))).collect();
    let schema = json!({"type": "object", "properties": props, "required": required});
    let Value::Object(schema) = schema else { unreachable!() };
    Tool::new(name.to_string(), description.to_string(), schema)
}

impl McpServer {
    /// A server of every protocol version rmcp knows (2026-07-28: stateless).
    pub async fn start(tools: Vec<Tool>) -> Self {
        Self::serve(tools, None, false).await
    }

    /// A server of the versions before 2026-07-28 only: every client gets a session.
    pub async fn start_sessions_only(tools: Vec<Tool>) -> Self {
        Self::serve(tools, None, true).await
    }

    /// The same server over HTTPS with the given certificate (reach it as `localhost`).
    pub async fn start_tls(tools: Vec<Tool>, tls: Arc<rustls::ServerConfig>) -> Self {
        Self::serve(tools, Some(tls), false).await
    }

    async fn serve(tools: Vec<Tool>, tls: Option<Arc<rustls::ServerConfig>>, sessions_only: bool) -> Self {
        let state = Arc::new(Mutex::new(State { tools, seen: Vec::new(), sessions_only }));
        let cancel = CancellationToken::new();
        let handler = Recording(state.clone());
        let service: StreamableHttpService<Recording, LocalSessionManager> = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Default::default(),
            StreamableHttpServerConfig::default().with_sse_keep_alive(None).with_cancellation_token(cancel.child_token()),
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let panics = PanicWatch::start(format!("the fake MCP server on {addr}"));
        let stop = cancel.clone();
        match tls {
            None => {
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app).with_graceful_shutdown(async move { stop.cancelled_owned().await }).await;
                });
            }
            Some(tls) => {
                tokio::spawn(serve_tls(listener, app, tokio_rustls::TlsAcceptor::from(tls), stop));
            }
        }
        Self { addr, state, cancel, panics }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The URL by name, for a certificate issued to `localhost`.
    pub fn https_url(&self) -> String {
        format!("https://localhost:{}/mcp", self.addr.port())
    }

    pub fn set_tools(&self, tools: Vec<Tool>) {
        self.state.lock().unwrap().tools = tools;
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// The tools/call requests seen, in order.
    pub fn calls(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.method == "tools/call").collect()
    }

    pub fn lists(&self) -> usize {
        self.seen().iter().filter(|s| s.method == "tools/list").count()
    }
}

/// Accepts TLS connections and serves each with HTTP/1.1 until cancelled. A failed
/// handshake (an untrusted client) ends only that connection.
async fn serve_tls(listener: tokio::net::TcpListener, app: axum::Router, acceptor: tokio_rustls::TlsAcceptor, stop: CancellationToken) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    loop {
        let sock = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r { Ok((sock, _)) => sock, Err(_) => return },
        };
        let (acceptor, app, stop) = (acceptor.clone(), app.clone(), stop.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(sock).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = builder.serve_connection(TokioIo::new(tls), service) => {}
            }
        });
    }
}

fn record(state: &Arc<Mutex<State>>, method: &'static str, cx: &RequestContext<RoleServer>, tool: &str) {
    let parts = cx.extensions.get::<http::request::Parts>().expect("served over HTTP");
    let headers = parts.headers.iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or_default().to_string())).collect::<BTreeMap<_, _>>();
    let session = headers.get("mcp-session-id").cloned().unwrap_or_default();
    let protocol = cx.protocol_version().map(|v| v.as_str().to_string()).or_else(|| headers.get("mcp-protocol-version").cloned()).unwrap_or_default();
    state.lock().unwrap().seen.push(Seen { method, session, protocol, headers, tool: tool.to_string() });
}

impl ServerHandler for Recording {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.0.lock().unwrap().sessions_only {
            std::borrow::Cow::Owned(ProtocolVersion::KNOWN_VERSIONS.iter().filter(|v| v.has_initialize()).cloned().collect())
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    async fn list_tools(&self, _r: Option<PaginatedRequestParams>, cx: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        record(&self.0, "tools/list", &cx, "");
        Ok(ListToolsResult::with_all_items(self.0.lock().unwrap().tools.clone()))
    }

    async fn call_tool(&self, r: CallToolRequestParams, cx: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        record(&self.0, "tools/call", &cx, &r.name);
        let known = self.0.lock().unwrap().tools.iter().any(|t| t.name == r.name);
        if !known {
            return Err(ErrorData::invalid_params(format!("unknown tool {}", r.name), None));
        }
        let args = Value::Object(r.arguments.unwrap_or_default());
        if r.name.starts_with("slow") {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        if r.name.starts_with("pause") {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        if r.name.starts_with("huge") {
            return Ok(CallToolResult::success(vec![ContentBlock::text("x".repeat(5_000))]).into());
        }
        if r.name.starts_with("lookalike") {
            // A tool's own error that looks like one of toolrouter's faults.
            return Ok(CallToolResult::error(vec![ContentBlock::text(LOOKALIKE_FAULT)]).into());
        }
        if r.name.starts_with("fail") {
            return Ok(CallToolResult::error(vec![ContentBlock::text("the upstream tool failed")]).into());
        }
        let mut result = CallToolResult::success(vec![ContentBlock::text(json!({"tool": r.name, "arguments": args}).to_string())]);
        result.structured_content = Some(json!({"tool": r.name, "arguments": args}));
        Ok(result.into())
    }
}
