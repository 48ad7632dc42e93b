//! MCP sources: toolrouter as an MCP client over streamable HTTP (SPEC §7).
//!
//! Header bindings are resolved once per run, when the run's connection to a source is
//! opened; it is reused for every call of the run and released by `EndRun` or after it has
//! been idle for a while. Concurrent runs never share one. A server that speaks the
//! 2026-07-28 protocol is called statelessly (no session on the server; the run's headers on
//! every request); an older one gets an MCP session per run. Which one a server is, is
//! learnt on first contact (`server/discover`, falling back to `initialize`) and remembered
//! per URL ([`Eras`]), so later runs skip the probe.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig as ClientInfo, ClientJsonRpcMessage, Implementation, MetaObject, ProtocolVersion,
    RequestMetaObject,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde_json::Value;
use tokio::sync::OnceCell;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::secrets::Secrets;
use super::{Execution, Request, SourceKey, UpstreamConfig};
use crate::call::RunContext;
use crate::catalog::PreparedSource;
use crate::catalog::{HeaderValue as Binding, McpSource, SourceKind, ToolDeclaration};

type Session = RunningService<RoleClient, ClientInfo>;

/// A run's session with a source: (source, run id).
type SessionKey = (SourceKey, String);

struct Slot {
    session: OnceCell<Arc<Session>>,
    /// When its last use ended (or the first began), and how many uses are in progress: a
    /// session in use is never idle, however long its call takes.
    uses: Mutex<(Instant, usize)>,
}

/// One use of a slot's session; dropping it ends the use.
struct InUse(Arc<Slot>);

impl InUse {
    fn begin(slot: Arc<Slot>) -> Self {
        slot.uses.lock().expect("slot lock").1 += 1;
        Self(slot)
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut uses = self.0.uses.lock().expect("slot lock");
        *uses = (Instant::now(), uses.1 - 1);
    }
}

/// The MCP client side: one session per (run, source).
pub struct McpClients {
    handshake_timeout: Duration,
    /// Largest response body or event read from a server: well above the result limit (a
    /// result over that limit is still reported as too large), but bounded.
    max_response: usize,
    session_idle: Duration,
    secrets: Arc<Secrets>,
    policy: Arc<crate::outbound::Policy>,
    http: TracingHttp,
    sessions: Mutex<HashMap<SessionKey, Arc<Slot>>>,
    eras: Eras,
}

/// The protocol era of a server: stateless 2026-07-28, or sessions (`initialize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Stateless,
    Sessions,
}

/// What each server URL turned out to speak: at most [`Eras::MAX`] URLs, each learnt again
/// after [`Eras::TTL`] (a server may be upgraded) or after a failed connection.
#[derive(Default)]
struct Eras(Mutex<HashMap<String, (Era, Instant)>>);

impl Eras {
    const MAX: usize = 10_000;
    const TTL: Duration = Duration::from_secs(3600);

    fn get(&self, url: &str) -> Option<Era> {
        let m = self.0.lock().expect("eras lock");
        m.get(url).filter(|(_, at)| at.elapsed() < Self::TTL).map(|(e, _)| *e)
    }

    fn learnt(&self, url: &str, era: Era) {
        let mut m = self.0.lock().expect("eras lock");
        if m.len() >= Self::MAX && !m.contains_key(url) {
            m.retain(|_, (_, at)| at.elapsed() < Self::TTL);
            if m.len() >= Self::MAX {
                m.clear();
            }
        }
        m.insert(url.to_string(), (era, Instant::now()));
    }

    fn forget(&self, url: &str) {
        self.0.lock().expect("eras lock").remove(url);
    }
}

/// Why a connection attempt failed.
struct Refused {
    message: String,
    timed_out: bool,
}

/// Headers as sent upstream; values are marked sensitive so they never print.
pub type Headers = HashMap<HeaderName, HeaderValue>;

impl McpClients {
    pub fn new(config: &UpstreamConfig, secrets: Arc<Secrets>, outbound: &crate::outbound::Outbound) -> Self {
        Self {
            handshake_timeout: config.mcp_handshake_timeout,
            max_response: config.max_result_bytes.saturating_mul(2).saturating_add(1 << 20),
            session_idle: config.session_idle,
            secrets,
            policy: outbound.policy.clone(),
            http: TracingHttp(http_client(outbound)),
            sessions: Mutex::new(HashMap::new()),
            eras: Eras::default(),
        }
    }

    /// What the server at `url` was found to speak, if it was contacted lately.
    pub fn era(&self, url: &str) -> Option<Era> {
        self.eras.get(url)
    }

    /// Resolves a source's header bindings for a run (`None`: no run, such as discovery
    /// without a run; run-bound headers are then left out). A secret is read only if the
    /// tenant may use it with this source's URL (checked again here: the operator may have
    /// narrowed it since the definition was stored).
    pub fn resolve_headers(&self, source: &McpSource, tenant: &str, run: Option<&RunContext>) -> Result<Headers, String> {
        let mut out = Headers::new();
        for (name, binding) in &source.headers {
            let value = match &binding.value {
                Binding::From(from) => match run.and_then(|r| run_value(from, tenant, r)) {
                    Some(v) => v,
                    None => continue,
                },
                Binding::Secret(secret) => self.secrets.read(secret, tenant, &source.url).map_err(|e| e.to_string())?,
            };
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("header name {name:?} is not valid"))?;
            let mut value = HeaderValue::from_str(&format!("{}{value}", binding.prefix))
                .map_err(|_| format!("the value bound to header {name} is not a valid header value"))?;
            value.set_sensitive(true);
            out.insert(name, value);
        }
        Ok(out)
    }

    /// Opens a session with the given headers (the one place where outbound MCP
    /// connections are made: URL checks belong here).
    async fn open(&self, source_id: &str, url: &str, headers: Headers) -> Result<Session, String> {
        self.check_outbound(source_id, url).await?;
        let stateless = || ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        let known = self.eras.get(url);
        let first = match known {
            Some(Era::Sessions) => ClientLifecycleMode::Initialize,
            _ => stateless(),
        };
        let opened = match self.handshake(url, &headers, first).await {
            // Unknown, and it refused the stateless protocol: a server with sessions only.
            Err(e) if known.is_none() && !e.timed_out => self.handshake(url, &headers, ClientLifecycleMode::Initialize).await,
            other => other,
        };
        match opened {
            Ok(s) => {
                let modern = s.peer_info().is_some_and(|p| !p.protocol_version.has_initialize());
                self.eras.learnt(url, if modern { Era::Stateless } else { Era::Sessions });
                Ok(s)
            }
            Err(e) => {
                self.eras.forget(url);
                Err(e.message)
            }
        }
    }

    /// One attempt to connect in the given lifecycle (`server/discover`, or `initialize`).
    async fn handshake(&self, url: &str, headers: &Headers, lifecycle: ClientLifecycleMode) -> Result<Session, Refused> {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .custom_headers(headers.clone())
            .max_json_response_size(self.max_response)
            .max_sse_event_size(self.max_response);
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        let info = ClientInfo::new(ClientCapabilities::default(), Implementation::new("toolrouter", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        match tokio::time::timeout(self.handshake_timeout, info.serve_with_lifecycle(transport, lifecycle)).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => {
                Err(Refused { message: format!("the MCP server did not complete initialization: {}", short(&e.to_string())), timed_out: false })
            }
            Err(_) => Err(Refused { message: "the MCP server did not complete initialization in time".into(), timed_out: true }),
        }
    }

    /// The outbound policy (SPEC §9): the URL as written, then the addresses its name
    /// resolves to now, so a refusal names the source. The HTTP client's resolver filters
    /// every later lookup too (DNS rebinding) and redirects are never followed.
    async fn check_outbound(&self, source_id: &str, url: &str) -> Result<(), String> {
        let refused = |r: &crate::outbound::Refusal| {
            tracing::warn!(source = source_id, rule = r.rule.code(), refusal = %r, "outbound connection refused");
            format!("the MCP server is refused by the outbound policy: {r}")
        };
        let target = self.policy.check_url(url).map_err(|r| refused(&r))?;
        match crate::outbound::connect::resolve(&self.policy, &target.host, target.port).await {
            Err(e) if e.refusal().is_some() => Err(refused(e.refusal().expect("checked"))),
            // Lookup failures are left to the connection attempt, which reports them.
            _ => Ok(()),
        }
    }

    /// The run's session with a source, opened (and its headers resolved) on first use; in
    /// use until the returned guard is dropped.
    async fn session(&self, key: &SessionKey, source: &McpSource, run: &RunContext, bearer: Option<&str>) -> Result<(Arc<Session>, InUse), String> {
        let in_use = {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            let slot = sessions
                .entry(key.clone())
                .or_insert_with(|| Arc::new(Slot { session: OnceCell::new(), uses: Mutex::new((Instant::now(), 0)) }))
                .clone();
            InUse::begin(slot)
        };
        let session = in_use
            .0
            .session
            .get_or_try_init(|| async {
                let mut headers = self.resolve_headers(source, &key.0.tenant, Some(run))?;
                with_bearer(&mut headers, bearer)?;
                self.open(&key.0.source_id, &source.url, headers).await.map(Arc::new)
            })
            .await?
            .clone();
        Ok((session, in_use))
    }

    /// Lists a source's tools. With a run, through the run's session (headers of the run);
    /// without one, through a short session of its own.
    pub async fn list_tools(
        &self,
        key: &SourceKey,
        source: &McpSource,
        run: Option<&RunContext>,
        bearer: Option<&str>,
    ) -> Result<Vec<ToolDeclaration>, String> {
        let tools = match run.filter(|r| !r.run_id.is_empty()) {
            Some(run) => {
                let key = (key.clone(), session_name(&run.run_id, bearer));
                let (session, _in_use) = self.session(&key, source, run, bearer).await?;
                self.list_on(&session).await
            }
            None => {
                let mut headers = self.resolve_headers(source, &key.tenant, run)?;
                with_bearer(&mut headers, bearer)?;
                let session = self.open(&key.source_id, &source.url, headers).await?;
                let tools = self.list_on(&session).await;
                let _ = session.cancel().await;
                tools
            }
        }?;
        Ok(tools.into_iter().map(declaration).collect())
    }

    async fn list_on(&self, session: &Session) -> Result<Vec<rmcp::model::Tool>, String> {
        match tokio::time::timeout(self.handshake_timeout, session.list_all_tools()).await {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(format!("tools/list failed: {}", short(&e.to_string()))),
            Err(_) => Err("tools/list did not answer in time".into()),
        }
    }

    /// Calls one tool in the run's session under `deadline`. A tool the server no longer
    /// lists is `Vanished`.
    pub async fn execute(&self, source: &McpSource, req: &Request<'_>, deadline: Duration, bearer: Option<&str>) -> Execution {
        let (run, tool) = (req.run, req.tool);
        // A call outside any run still gets a session of its own, closed afterwards.
        let own_run = run.run_id.is_empty();
        let run_id = if own_run { format!("\u{0}call-{}", rand::random::<u64>()) } else { run.run_id.clone() };
        let key = (req.key.clone(), session_name(&run_id, bearer));
        let (session, in_use) = match self.session(&key, source, run, bearer).await {
            Ok(s) => s,
            Err(e) => {
                self.sessions.lock().expect("sessions lock").remove(&key);
                if unauthorized(&e) {
                    return Execution::Unauthorized;
                }
                return Execution::NotSent(e);
            }
        };
        let arguments = match serde_json::from_str::<Value>(req.arguments_json) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let trace = trace_headers();
        if !trace.is_empty() {
            let meta: serde_json::Map<String, Value> = trace.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            params.meta = Some(RequestMetaObject(MetaObject(meta)));
        }
        let outcome = tokio::time::timeout(deadline, session.call_tool(params)).await;
        let execution = match outcome {
            Err(_) => Execution::TimedOut,
            Ok(Ok(result)) => {
                let is_error = result.is_error.unwrap_or(false);
                if is_error && !self.still_listed(&session, tool).await {
                    Execution::Vanished
                } else {
                    Execution::Done { content_json: result_json(&result), is_error }
                }
            }
            Ok(Err(ServiceError::McpError(e))) => {
                if !self.still_listed(&session, tool).await {
                    Execution::Vanished
                } else {
                    Execution::ProtocolError(short(&e.message))
                }
            }
            Ok(Err(ServiceError::Timeout { .. })) => Execution::TimedOut,
            Ok(Err(e)) => {
                // The session is broken: the run's next call opens a new one.
                self.sessions.lock().expect("sessions lock").remove(&key);
                let e = e.to_string();
                // Refused before the server handled it: the token is no good.
                if unauthorized(&e) { Execution::Unauthorized } else { Execution::Lost(short(&e)) }
            }
        };
        drop(in_use);
        if own_run {
            self.sessions.lock().expect("sessions lock").remove(&key);
            if let Some(s) = Arc::into_inner(session) {
                tokio::spawn(async move {
                    let _ = s.cancel().await;
                });
            }
        }
        execution
    }

    /// After an error: is the tool still on the server's list? (Unknown = yes.)
    async fn still_listed(&self, session: &Session, tool: &str) -> bool {
        match self.list_on(session).await {
            Ok(tools) => tools.iter().any(|t| t.name == tool),
            Err(_) => true,
        }
    }

    /// `EndRun`: closes the run's sessions.
    pub fn end_run(&self, tenant: &str, agent_id: &str, run_id: &str) -> usize {
        let ended: Vec<Arc<Slot>> = {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            let keys: Vec<SessionKey> = sessions
                .keys()
                .filter(|(s, run)| s.tenant == tenant && s.agent_id == agent_id && run.split('\u{1}').next() == Some(run_id))
                .cloned()
                .collect();
            keys.iter().filter_map(|k| sessions.remove(k)).collect()
        };
        let n = ended.len();
        close(ended);
        n
    }

    /// Closes sessions idle longer than the configured time; returns how many.
    pub fn expire_idle(&self) -> usize {
        let idle = self.session_idle;
        let expired: Vec<Arc<Slot>> = {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            let keys: Vec<SessionKey> = sessions
                .iter()
                .filter(|(_, s)| {
                    let (since, in_use) = *s.uses.lock().expect("slot lock");
                    in_use == 0 && since.elapsed() >= idle
                })
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| sessions.remove(k)).collect()
        };
        let n = expired.len();
        close(expired);
        n
    }

    /// Open sessions (for tests and metrics).
    pub fn open_sessions(&self) -> usize {
        self.sessions.lock().expect("sessions lock").len()
    }

    /// A digest of the header values a run contributes (bindings from the run context),
    /// or `None` when no MCP source depends on the run: then every run shares one listing.
    /// Secrets do not vary by run (listings are per tenant already), so they are not read here.
    pub fn run_key(sources: &[PreparedSource], tenant: &str, run: &RunContext) -> Option<u64> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut any = false;
        for s in sources {
            let SourceKind::Mcp(m) = &s.kind else { continue };
            // Listed with each user's own token: a user sees what the server lists for them.
            if m.oauth.is_some() {
                any = true;
                (&s.id, "\u{0}oauth", run.user()).hash(&mut h);
            }
            for (name, b) in &m.headers {
                if let Binding::From(from) = &b.value {
                    any = true;
                    (&s.id, name, run_value(from, tenant, run)).hash(&mut h);
                }
            }
        }
        any.then(|| h.finish().max(1))
    }
}

fn close(slots: Vec<Arc<Slot>>) {
    for slot in slots {
        if let Some(session) = slot.session.get().cloned() {
            drop(slot);
            if let Some(s) = Arc::into_inner(session) {
                tokio::spawn(async move {
                    let _ = s.cancel().await;
                });
            }
        }
    }
}

/// A run's connection name: the run, and which token it carries (a refreshed token opens a
/// new connection; the old one idles out).
fn session_name(run_id: &str, bearer: Option<&str>) -> String {
    match bearer {
        None => run_id.to_string(),
        Some(b) => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(b.as_bytes());
            format!(
                "{run_id}\u{1}{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7]
            )
        }
    }
}

/// Adds a user's token as `Authorization: Bearer`, marked sensitive so it never prints.
fn with_bearer(headers: &mut Headers, bearer: Option<&str>) -> Result<(), String> {
    if let Some(b) = bearer {
        let mut v = HeaderValue::from_str(&format!("Bearer {b}")).map_err(|_| "the access token is not a valid header value".to_string())?;
        v.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, v);
    }
    Ok(())
}

/// Did the server refuse the request's credentials (HTTP 401, or 403 for scope)?
pub fn unauthorized(error: &str) -> bool {
    error.contains("Auth required") || error.contains("Insufficient scope")
}

/// The W3C trace context of the current span (`traceparent`, `tracestate`), empty when
/// there is no sampled span.
fn trace_headers() -> HashMap<String, String> {
    let cx = tracing::Span::current().context();
    let mut out = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut out);
    out
}

/// A value of the run context named by a header binding.
fn run_value(from: &str, tenant: &str, run: &RunContext) -> Option<String> {
    if from == "context.run_id" {
        return (!run.run_id.is_empty()).then(|| run.run_id.clone());
    }
    let claim = from.strip_prefix("identity.")?;
    match run.identity.get(claim) {
        Some(v) => Some(v.clone()),
        None if claim == "tenant_id" => Some(tenant.to_string()),
        None => None,
    }
}

/// The HTTP client used for every MCP server (and their authorization servers).
pub(crate) fn http_client(outbound: &crate::outbound::Outbound) -> reqwest::Client {
    reqwest::Client::builder()
        // rmcp's own default: pooled idle connections stall on delayed ACKs.
        .pool_max_idle_per_host(0)
        // No redirect is followed, to any host: a server cannot send toolrouter elsewhere.
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would resolve and connect past the policy.
        .no_proxy()
        .dns_resolver(crate::outbound::Resolver::new(outbound.policy.clone()))
        // This client speaks HTTP/1.1 only (reqwest without http2).
        .tls_backend_preconfigured(outbound.tls.client_config(&[b"http/1.1"]))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client")
}

/// An MCP tool as a declaration (flags come from the source's lists, not from hints).
fn declaration(t: rmcp::model::Tool) -> ToolDeclaration {
    ToolDeclaration {
        name: t.name.to_string(),
        description: t.description.map(|d| d.to_string()).unwrap_or_default(),
        input_schema: Value::Object((*t.input_schema).clone()).to_string(),
        output_schema: t.output_schema.map(|o| Value::Object((*o).clone()).to_string()).unwrap_or_default(),
        ..Default::default()
    }
}

/// What the model sees of an MCP result: its structured content when there is one, else
/// the text of its content blocks (a JSON text stays JSON), else the blocks themselves.
fn result_json(r: &rmcp::model::CallToolResult) -> String {
    if let Some(s) = &r.structured_content {
        return s.to_string();
    }
    let texts: Vec<&str> = r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect();
    if texts.len() == r.content.len() && texts.len() == 1 {
        let t = texts[0];
        return match serde_json::from_str::<serde::de::IgnoredAny>(t) {
            Ok(_) => t.to_string(),
            Err(_) => Value::String(t.to_string()).to_string(),
        };
    }
    if texts.len() == r.content.len() {
        return Value::String(texts.join("\n")).to_string();
    }
    serde_json::to_string(&r.content).unwrap_or_else(|_| "null".into())
}

/// Bounds upstream text kept in messages.
fn short(s: &str) -> String {
    s.chars().take(300).collect()
}

/// The reqwest client, with the W3C trace context of each call (carried in the request's
/// `_meta`) copied to HTTP headers, so MCP servers can join the trace.
#[derive(Clone)]
struct TracingHttp(reqwest::Client);

fn with_trace(message: &ClientJsonRpcMessage, mut headers: Headers) -> Headers {
    if let ClientJsonRpcMessage::Request(r) = message
        && let Ok(v) = serde_json::to_value(&r.request)
        && let Some(meta) = v.pointer("/params/_meta").and_then(Value::as_object)
    {
        for key in ["traceparent", "tracestate"] {
            if let Some(val) = meta.get(key).and_then(Value::as_str)
                && let Ok(val) = HeaderValue::from_str(val)
            {
                headers.insert(HeaderName::from_static(key), val);
            }
        }
    }
    headers
}

impl StreamableHttpClient for TracingHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.0.post_message(uri, message, session_id, auth_header, headers).await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.0.post_message_with_response_limits(uri, message, session_id, auth_header, headers, limits).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, StreamableHttpError<Self::Error>> {
        self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, StreamableHttpError<Self::Error>> {
        self.0.get_stream_with_max_sse_event_size(uri, session_id, last_event_id, auth_header, custom_headers, max_sse_event_size).await
    }
}
