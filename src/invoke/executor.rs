//! The `ToolExecutor` client for function sources: one pooled channel per endpoint, a
//! deadline per call, a concurrency limit per source, and a classification of failures into
//! "surely not sent" and "outcome unknown".

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint, Identity};

use crate::catalog::{AgentDefinition, SourceKind, ToolDeclaration};
use crate::pb;
use crate::pb::tool_executor_client::ToolExecutorClient;

use super::RunContext;

#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Deadline when neither the tool nor the source sets one.
    pub default_timeout: Duration,
    /// Concurrency limit when the source sets none.
    pub default_max_concurrency: u32,
    /// How long a call waits for a free slot before it is "busy".
    pub queue_wait: Duration,
    pub connect_timeout: Duration,
    /// Retries of idempotent calls that surely did not run.
    pub max_retries: u32,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(30),
            default_max_concurrency: 64,
            queue_wait: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(3),
            max_retries: 2,
        }
    }
}

/// How one execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Execution {
    Done { content_json: String, is_error: bool },
    /// The concurrency limit stayed full for the whole wait.
    Busy,
    /// The request surely did not reach the executor.
    NotSent(String),
    /// Sent, but no answer within the deadline.
    TimedOut,
    /// Sent, then the connection was lost or the executor failed without an answer.
    Lost(String),
    /// The tool is no longer offered upstream (an MCP server dropped it).
    Vanished,
}

pub struct Executors {
    config: ExecutorConfig,
    outbound: crate::outbound::Outbound,
    channels: Mutex<HashMap<String, Channel>>,
    limits: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Executors {
    pub fn new(config: ExecutorConfig, outbound: crate::outbound::Outbound) -> Self {
        Self { config, outbound, channels: Mutex::new(HashMap::new()), limits: Mutex::new(HashMap::new()) }
    }

    pub fn config(&self) -> &ExecutorConfig {
        &self.config
    }

    fn channel(&self, endpoint: &str) -> Result<Channel, String> {
        let mut channels = self.channels.lock().expect("channels lock");
        if let Some(c) = channels.get(endpoint) {
            return Ok(c.clone());
        }
        let ep = Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| format!("bad executor endpoint: {e}"))?
            .connect_timeout(self.config.connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
        let ep = if ep.uri().scheme_str() == Some("https") {
            let mut tls = ClientTlsConfig::new();
            if let Some((cert, key)) = self.outbound.tls.client_identity_pem() {
                tls = tls.identity(Identity::from_pem(cert, key));
            }
            ep.tls_config_with_verifier(tls, self.outbound.tls.verifier()).map_err(|e| format!("bad executor endpoint: {e}"))?
        } else {
            ep
        };
        // Every (re)connection checks the outbound policy and dials only an address that passed.
        let channel = ep.connect_with_connector_lazy(crate::outbound::Connector::new(self.outbound.policy.clone()));
        channels.insert(endpoint.to_string(), channel.clone());
        Ok(channel)
    }

    /// The semaphore of a source's limit. The key holds the limit itself, so a version that
    /// changes it gets its own semaphore instead of the first version's.
    fn limit(&self, key: &str, max: u32) -> Arc<Semaphore> {
        let max = if max == 0 { self.config.default_max_concurrency } else { max };
        self.limits
            .lock()
            .expect("limits lock")
            .entry(format!("{key}\u{0}{max}"))
            .or_insert_with(|| Arc::new(Semaphore::new(max as usize)))
            .clone()
    }

    /// Calls `Execute` once, within the source's concurrency limit. `limit_key` names the
    /// source (tenant, agent, source id).
    #[allow(clippy::too_many_arguments)]
    pub async fn execute(
        &self,
        endpoint: &str,
        limit_key: &str,
        max_concurrency: u32,
        tool: &str,
        arguments_json: &str,
        tool_call_id: &str,
        run: &RunContext,
        timeout: Option<Duration>,
    ) -> Execution {
        let sem = self.limit(limit_key, max_concurrency);
        let _permit = match tokio::time::timeout(self.config.queue_wait, sem.acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => return Execution::Busy,
        };
        let channel = match self.channel(endpoint) {
            Ok(c) => c,
            Err(e) => return Execution::NotSent(e),
        };
        let deadline = timeout.unwrap_or(self.config.default_timeout);
        let mut req = tonic::Request::new(pb::ExecuteRequest {
            tool: tool.to_string(),
            arguments_json: arguments_json.to_string(),
            tool_call_id: tool_call_id.to_string(),
            run: Some(crate::api::convert::pb_run_context(run)),
        });
        req.set_timeout(deadline);
        crate::telemetry::inject_context(req.metadata_mut());
        let mut client = ToolExecutorClient::new(channel);
        let call = client.execute(req);
        // The client-side timer backs up the grpc-timeout header the executor sees.
        match tokio::time::timeout(deadline + Duration::from_millis(50), call).await {
            Err(_) => Execution::TimedOut,
            Ok(Ok(resp)) => {
                let r = resp.into_inner();
                Execution::Done { content_json: r.content_json, is_error: r.is_error }
            }
            Ok(Err(status)) => {
                // limit_key is "tenant\0agent\0source id".
                warn_if_refused(limit_key.rsplit('\u{0}').next().unwrap_or_default(), &status);
                classify(&status)
            }
        }
    }

    /// Asks a source's executor for its tools.
    pub async fn list_tools(&self, source_id: &str, endpoint: &str) -> Result<Vec<ToolDeclaration>, String> {
        let channel = self.channel(endpoint)?;
        let mut req = tonic::Request::new(pb::ListToolsRequest {});
        req.set_timeout(self.config.default_timeout.min(Duration::from_secs(10)));
        let resp = ToolExecutorClient::new(channel).list_tools(req).await.map_err(|s| {
            warn_if_refused(source_id, &s);
            s.message().to_string()
        })?;
        let mut v = Vec::new();
        let tools = crate::api::convert::tool_decls(resp.into_inner().tools, "tools", &mut v);
        if !v.is_empty() {
            return Err(v.into_iter().map(|f| format!("{}: {}", f.field, f.description)).collect::<Vec<_>>().join("; "));
        }
        Ok(tools)
    }
}

/// Logs a connection the outbound policy refused (SPEC §9), naming the source and the rule.
fn warn_if_refused(source: &str, status: &tonic::Status) {
    if let Some(refusal) = std::error::Error::source(status).and_then(crate::outbound::connect::find_refusal) {
        tracing::warn!(source, rule = refusal.rule.code(), refusal = %refusal, "outbound connection refused");
    }
}

/// Sorts a failed call: connection never made (not sent), deadline (timed out), executor
/// status (done with an error), or anything else after sending (lost).
fn classify(status: &tonic::Status) -> Execution {
    use tonic::Code;
    if connect_failure(status) {
        return Execution::NotSent(status.message().to_string());
    }
    if deadline_passed(status) {
        return Execution::TimedOut;
    }
    // A status with a transport error behind it was made on our side of a broken
    // connection; one without came from the executor (a failing handler is UNKNOWN or
    // INTERNAL in most gRPC stacks), which ran the call and reports its failure.
    let from_transport = std::error::Error::source(status).is_some();
    match status.code() {
        Code::Unknown | Code::Internal if !from_transport => Execution::Done {
            content_json: serde_json::json!({"error": format!("{:?}", status.code()), "message": status.message()}).to_string(),
            is_error: true,
        },
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled => {
            Execution::Lost(status.message().to_string())
        }
        // The executor answered with a status: it ran (or refused) and said so.
        _ => Execution::Done {
            content_json: serde_json::json!({"error": format!("{:?}", status.code()), "message": status.message()}).to_string(),
            is_error: true,
        },
    }
}

/// Did the call's deadline pass? tonic enforces `grpc-timeout` on both ends and reports it as
/// CANCELLED "Timeout expired" (with `TimeoutExpired` in the source chain on the client side);
/// other gRPC stacks send DEADLINE_EXCEEDED.
fn deadline_passed(status: &tonic::Status) -> bool {
    if status.code() == tonic::Code::DeadlineExceeded {
        return true;
    }
    let mut err: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = err {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        err = e.source();
    }
    status.code() == tonic::Code::Cancelled && status.message() == tonic::TimeoutExpired(()).to_string()
}

/// Did the call fail while connecting (so nothing was sent)?
fn connect_failure(status: &tonic::Status) -> bool {
    let mut err: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = err {
        // The channel failed to connect (refused by policy, DNS, TCP or the TLS handshake).
        if e.is::<tonic::ConnectError>() || e.is::<crate::outbound::ConnectError>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable | std::io::ErrorKind::NotFound
            ) {
                return true;
            }
        let text = e.to_string();
        if text.contains("tcp connect error") || text.contains("dns error") || text.contains("error trying to connect") {
            return true;
        }
        err = e.source();
    }
    let m = status.message();
    m.contains("tcp connect error") || m.contains("error trying to connect")
}

#[async_trait::async_trait]
impl crate::registry::ToolLister for Executors {
    async fn list(&self, def: &AgentDefinition, _tenant: &str) -> (BTreeMap<String, Vec<ToolDeclaration>>, Vec<String>) {
        let mut listed = BTreeMap::new();
        let mut diagnostics = Vec::new();
        for s in &def.sources {
            match &s.kind {
                SourceKind::Function(f) if f.tools.is_empty() => match self.list_tools(&s.id, &f.endpoint).await {
                    Ok(tools) => {
                        listed.insert(s.id.clone(), tools);
                    }
                    Err(e) => diagnostics.push(format!("source {:?}: ListTools failed: {e}", s.id)),
                },
                // MCP sources are listed by `crate::mcp::Lister`.
                _ => {}
            }
        }
        (listed, diagnostics)
    }
}
