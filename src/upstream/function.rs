//! Function sources: the `ToolExecutor` gRPC client. One pooled channel per endpoint,
//! connections made through the outbound policy, and a classification of failures into
//! "surely not sent" and "outcome unknown".

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tonic::transport::{Channel, ClientTlsConfig, Endpoint, Identity};

use super::{Execution, Request, UpstreamConfig};
use crate::catalog::ToolDeclaration;
use crate::pb;
use crate::pb::tool_executor_client::ToolExecutorClient;

/// Past this many endpoints, cached channels are dropped (they reconnect on next use).
const MAX_CHANNELS: usize = 10_000;

pub struct Executors {
    connect_timeout: Duration,
    /// Largest `ExecuteResponse` decoded: the result limit and room for its envelope.
    max_response: usize,
    list_timeout: Duration,
    outbound: crate::outbound::Outbound,
    channels: Mutex<HashMap<String, Channel>>,
}

impl Executors {
    pub fn new(config: &UpstreamConfig, outbound: crate::outbound::Outbound) -> Self {
        Self {
            connect_timeout: config.connect_timeout,
            max_response: config.max_result_bytes.saturating_add(64 * 1024),
            list_timeout: config.default_timeout.min(Duration::from_secs(10)),
            outbound,
            channels: Mutex::new(HashMap::new()),
        }
    }

    fn channel(&self, endpoint: &str) -> Result<Channel, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = channels.get(endpoint) {
            return Ok(c.clone());
        }
        if channels.len() >= MAX_CHANNELS {
            channels.clear();
        }
        let ep = Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| format!("bad executor endpoint: {e}"))?
            .connect_timeout(self.connect_timeout)
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

    /// Calls `Execute` once, under `deadline`.
    pub async fn execute(&self, endpoint: &str, req: &Request<'_>, deadline: Duration) -> Execution {
        let channel = match self.channel(endpoint) {
            Ok(c) => c,
            Err(e) => return Execution::NotSent(e),
        };
        let mut call = tonic::Request::new(pb::ExecuteRequest {
            tool: req.tool.to_string(),
            arguments_json: req.arguments_json.to_string(),
            tool_call_id: req.tool_call_id.to_string(),
            run: Some(pb::convert::pb_run_context(req.run)),
        });
        call.set_timeout(deadline);
        crate::telemetry::inject_context(call.metadata_mut());
        let mut client = ToolExecutorClient::new(channel).max_decoding_message_size(self.max_response);
        // The client-side timer backs up the grpc-timeout header the executor sees.
        match tokio::time::timeout(deadline + Duration::from_millis(50), client.execute(call)).await {
            Err(_) => Execution::TimedOut,
            Ok(Ok(resp)) => {
                let r = resp.into_inner();
                Execution::Done { content_json: r.content_json, is_error: r.is_error }
            }
            Ok(Err(status)) => {
                warn_if_refused(&req.key.source_id, &status);
                classify(&status)
            }
        }
    }

    /// Asks a source's executor for its tools.
    pub async fn list_tools(&self, source_id: &str, endpoint: &str) -> Result<Vec<ToolDeclaration>, String> {
        let channel = self.channel(endpoint)?;
        let mut req = tonic::Request::new(pb::ListToolsRequest {});
        req.set_timeout(self.list_timeout);
        let resp = ToolExecutorClient::new(channel).list_tools(req).await.map_err(|s| {
            warn_if_refused(source_id, &s);
            s.message().to_string()
        })?;
        let mut v = Vec::new();
        let tools = pb::convert::tool_decls(resp.into_inner().tools, "tools", &mut v);
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
    if let Some(size) = too_large(status) {
        return Execution::TooLarge { size: Some(size) };
    }
    // A status with a transport error behind it was made on our side of a broken
    // connection; one without came from the executor (a failing handler is UNKNOWN or
    // INTERNAL in most gRPC stacks), which ran the call and reports its failure.
    let from_transport = std::error::Error::source(status).is_some();
    match status.code() {
        Code::Unknown | Code::Internal if !from_transport => answered(status),
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled => Execution::Lost(status.message().to_string()),
        // The executor answered with a status: it ran (or refused) and said so.
        _ => answered(status),
    }
}

/// The size of a response refused for its length: tonic's decoder reports it as OUT_OF_RANGE
/// "decoded message length too large: found N bytes, the limit is: M bytes".
fn too_large(status: &tonic::Status) -> Option<usize> {
    let m = status.message();
    if status.code() != tonic::Code::OutOfRange || !m.contains("message length too large") {
        return None;
    }
    let found = m.split("found ").nth(1)?;
    found.split(' ').next()?.parse().ok()
}

/// A status the executor answered with: its code's name (`NotFound`) and message.
fn answered(status: &tonic::Status) -> Execution {
    Execution::Status { code: format!("{:?}", status.code()), message: status.message().to_string() }
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
            && matches!(io.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable | std::io::ErrorKind::NotFound)
        {
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
