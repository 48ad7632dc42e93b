//! Each RPC's span and metrics on the gRPC server, with the caller's W3C trace context as the
//! span's parent: [`Finish::start`] when a request comes in, [`observe`] on its response
//! (the edge's layer, `crate::api::edge`, calls both). Admission, the drain included, is the
//! services' first step: `crate::admission`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tonic::Code;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const HEALTH: &str = "grpc.health.v1.Health";

/// Names every `/pkg.Service/Method` that `paths` gives: the RPCs the server answers. They
/// are the compiled protos', the same for every server of the process: asked for by the
/// first server only.
pub fn name_rpcs<E>(paths: impl FnOnce() -> Result<Vec<String>, E>) -> Result<(), E> {
    if RPCS.get().is_none() {
        let table = paths()?
            .into_iter()
            .filter_map(|path| {
                let (service, method) = path.strip_prefix('/')?.split_once('/')?;
                // Named once per process (a few dozen RPCs): spans and metric labels then
                // borrow the names instead of allocating them per request.
                let rpc = Rpc { service: leak(service), method: leak(method), name: leak(&format!("{service}/{method}")) };
                Some((leak(&path), rpc))
            })
            .collect();
        // Servers starting at once may both get here; the first table is kept.
        let _ = RPCS.set(table);
    }
    Ok(())
}

/// An RPC as spans and metrics name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rpc {
    service: &'static str,
    method: &'static str,
    /// `Service/Method`.
    name: &'static str,
}

/// Every path the server does not answer is this one label, so requests cannot grow the
/// metric series.
const UNKNOWN: Rpc = Rpc { service: "unknown", method: "unknown", name: "unknown/unknown" };

/// The RPCs of [`name_rpcs`], by path.
static RPCS: OnceLock<HashMap<&'static str, Rpc>> = OnceLock::new();

fn leak(s: &str) -> &'static str {
    Box::leak(s.into())
}

/// `/pkg.Service/Method` → its names; [`UNKNOWN`] for a path the server does not answer.
fn rpc_of(path: &str) -> Rpc {
    RPCS.get().and_then(|m| m.get(path)).copied().unwrap_or(UNKNOWN)
}

/// The response of the RPC `finish` started, watched for its status.
pub fn observe<B>(resp: http::Response<B>, finish: Finish) -> http::Response<ObservedBody>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    let header_code = grpc_status(resp.headers());
    resp.map(|b| ObservedBody { inner: tonic::body::Body::new(b), header_code, finish: Some(finish) })
}

fn grpc_status(headers: &http::HeaderMap) -> Option<Code> {
    headers.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i32>().ok()).map(Code::from_i32)
}

/// An RPC in progress: its span, and what is recorded once its status is known.
pub struct Finish {
    span: tracing::Span,
    method: &'static str,
    started: Instant,
}

impl Finish {
    /// Names the request's RPC and opens its span (none for health checks: probes are
    /// neither traced nor held up by the drain).
    pub fn start<B>(req: &http::Request<B>) -> Self {
        let started = Instant::now();
        let rpc = rpc_of(req.uri().path());
        let span = if rpc.service == HEALTH {
            tracing::Span::none()
        } else {
            let span = tracing::info_span!(
                "grpc",
                otel.name = rpc.name,
                otel.kind = "server",
                otel.status_code = Empty,
                rpc.system = "grpc",
                rpc.service = rpc.service,
                rpc.method = rpc.method,
                rpc.grpc.status_code = Empty,
            );
            let _ = span.set_parent(super::extract_context(req.headers()));
            span
        };
        Self { span, method: rpc.name, started }
    }

    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    fn done(self, code: Code) {
        super::metrics::grpc_request(self.method, code_name(code), self.started.elapsed());
        if !self.span.is_disabled() {
            self.span.record("rpc.grpc.status_code", code as i64);
            if server_error(code) {
                self.span.record("otel.status_code", "error");
            }
        }
    }
}

/// The status codes the semantic conventions count as server errors.
fn server_error(code: Code) -> bool {
    matches!(code, Code::Unknown | Code::DeadlineExceeded | Code::Unimplemented | Code::Internal | Code::Unavailable | Code::DataLoss)
}

/// The canonical upper-case name (`OK`, `INVALID_ARGUMENT`, ...).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The response body, watched for the `grpc-status` trailer; the RPC is recorded when the
/// body ends (or is dropped: a call the client abandoned is CANCELLED).
pub struct ObservedBody {
    inner: tonic::body::Body,
    header_code: Option<Code>,
    finish: Option<Finish>,
}

impl ObservedBody {
    fn finish(&mut self, code: Code) {
        if let Some(f) = self.finish.take() {
            f.done(code);
        }
    }
}

impl Body for ObservedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(grpc_status) {
                    self.finish(code);
                }
            }
            Poll::Ready(Some(Err(status))) => {
                let code = status.code();
                self.finish(code);
            }
            Poll::Ready(None) => {
                let code = self.header_code.unwrap_or(Code::Unknown);
                self.finish(code);
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ObservedBody {
    fn drop(&mut self) {
        // Trailers-only responses may be dropped unpolled: the header status is the answer.
        let code = self.header_code.unwrap_or(Code::Cancelled);
        self.finish(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpcs_the_server_answers_are_named_and_other_paths_collapse() {
        // The process's table: the first server's (the full list) or this one.
        let paths = || Ok::<_, ()>(vec!["/toolrouter.v1.Router/HandleToolCall".to_string(), "/grpc.health.v1.Health/Check".to_string()]);
        name_rpcs(paths).expect("named");
        let router = Rpc { service: "toolrouter.v1.Router", method: "HandleToolCall", name: "toolrouter.v1.Router/HandleToolCall" };
        assert_eq!(rpc_of("/toolrouter.v1.Router/HandleToolCall"), router);
        assert_eq!(rpc_of("/grpc.health.v1.Health/Check").service, HEALTH);
        for unknown in ["/evil.Service/x", "/toolrouter.v1.Router/a/b", "/toolrouter.v1.Router/NoSuchMethod", "/toolrouter.v1.Router", ""] {
            assert_eq!(rpc_of(unknown), UNKNOWN, "{unknown:?}");
        }
    }
}
