//! The gRPC wire's own faults, told in the error vocabulary: a request whose deadline passes
//! is DEADLINE_EXCEEDED (tonic's own timer would answer CANCELLED), and a request message
//! that does not decode is INVALID_ARGUMENT (tonic answers INTERNAL).

use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::Body;

use crate::error::ErrorCode;

/// tonic's decoder's message for a request that is not the protobuf it expects, as sent in
/// `grpc-message` (percent-encoded).
const DECODE_FAILURE: &str = "failed%20to%20decode%20Protobuf%20message";

/// Our deadline fires this much before tonic's (which starts a moment earlier and is polled
/// after ours): the caller hears DEADLINE_EXCEEDED.
const AHEAD: Duration = Duration::from_millis(2);

#[derive(Clone, Default)]
pub struct WireLayer;

impl<S> tower::Layer<S> for WireLayer {
    type Service = WireService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WireService { inner }
    }
}

#[derive(Clone)]
pub struct WireService<S> {
    inner: S,
}

/// The `grpc-timeout` a client sent.
pub fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    parse_timeout(headers.get("grpc-timeout")?.to_str().ok()?)
}

/// A `grpc-timeout` value: digits and a unit, as gRPC over HTTP/2 defines it.
pub fn parse_timeout(v: &str) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn status_response(code: ErrorCode, message: &str) -> http::Response<tonic::body::Body> {
    tonic::Status::new(tonic::Code::from_i32(code.grpc()), message).into_http()
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for WireService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let timeout = grpc_timeout(req.headers());
        // Take the service that was driven to readiness, leave a clone in its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let fut = inner.call(req);
        Box::pin(async move {
            let response = match timeout {
                Some(t) => match tokio::time::timeout(t.saturating_sub(AHEAD), fut).await {
                    Ok(r) => r?,
                    Err(_) => return Ok(status_response(ErrorCode::DeadlineExceeded, "the request's deadline passed before it was answered")),
                },
                None => fut.await?,
            };
            let (mut parts, body) = response.into_parts();
            let internal = tonic::Code::Internal as i32;
            let undecodable = parts.headers.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i32>().ok()) == Some(internal)
                && parts.headers.get("grpc-message").and_then(|v| v.to_str().ok()).is_some_and(|m| m.starts_with(DECODE_FAILURE));
            if undecodable {
                let code = ErrorCode::InvalidArgument.grpc().to_string();
                parts.headers.insert("grpc-status", http::HeaderValue::from_str(&code).expect("digits"));
            }
            Ok(http::Response::from_parts(parts, tonic::body::Body::new(body)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit_and_bad_ones_are_ignored() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&m)
        };
        assert_eq!(h("2S"), Some(Duration::from_secs(2)));
        assert_eq!(h("1500m"), Some(Duration::from_millis(1500)));
        assert_eq!(h("3M"), Some(Duration::from_secs(180)));
        assert_eq!(h("7u"), Some(Duration::from_micros(7)));
        assert_eq!(h("S"), None);
        assert_eq!(h("12x"), None);
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }
}
