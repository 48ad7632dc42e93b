//! The gRPC server's one tower layer: in one future per request, the RPC's span and metrics
//! (`telemetry::rpc`), authentication and the tenant's rate (`auth::grpc`), and the wire's
//! own faults told in the error vocabulary ([`super::wire`]). One layer rather than one per
//! concern: a call pays for one boxed future and one response body wrapper.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::Body;

use super::wire;
use crate::auth::grpc::{Checked, GrpcAuth};
use crate::telemetry::rpc::{Finish, ObservedBody, observe};

#[derive(Clone)]
pub struct EdgeLayer {
    auth: GrpcAuth,
}

impl EdgeLayer {
    /// `paths` gives every `/pkg.Service/Method` the server answers: spans and metrics name
    /// those, and every other path `unknown`.
    pub fn new<E>(auth: GrpcAuth, paths: impl FnOnce() -> Result<Vec<String>, E>) -> Result<Self, E> {
        crate::telemetry::rpc::name_rpcs(paths)?;
        Ok(Self { auth })
    }
}

impl<S> tower::Layer<S> for EdgeLayer {
    type Service = EdgeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        EdgeService { inner, auth: self.auth.clone() }
    }
}

#[derive(Clone)]
pub struct EdgeService<S> {
    inner: S,
    auth: GrpcAuth,
}

/// Where a request stands once its `call` returns.
enum Step<F, B> {
    Called(F),
    Refused(tonic::Status),
    /// Signed with a key not known yet: the keys are fetched first (rare: boxed).
    FetchKeys(Box<http::Request<B>>, GrpcAuth),
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for EdgeService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    type Response = http::Response<ObservedBody>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqBody>) -> Self::Future {
        let finish = Finish::start(&req);
        let timeout = wire::grpc_timeout(req.headers());
        // Take the service that was driven to readiness, leave a clone in its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let step = || match self.auth.check(&mut req) {
            Checked::Admitted => Step::Called(inner.call(req)),
            Checked::Refused(status) => Step::Refused(status),
            Checked::UnknownKey => Step::FetchKeys(Box::new(req), self.auth.clone()),
        };
        let step = match finish.span().is_disabled() {
            true => step(),
            false => finish.span().in_scope(step),
        };
        Box::pin(async move {
            let work = async move {
                let called = match step {
                    Step::Called(called) => called,
                    Step::Refused(status) => return Ok(status.into_http()),
                    Step::FetchKeys(mut req, auth) => match auth.check_again(&mut req).await {
                        Ok(()) => inner.call(*req),
                        Err(status) => return Ok(status.into_http()),
                    },
                };
                Ok(called.await?.map(tonic::body::Body::new))
            };
            let work = crate::telemetry::in_span(work, finish.span());
            let response = match timeout {
                Some(t) => match tokio::time::timeout(t.saturating_sub(wire::AHEAD), work).await {
                    Ok(r) => r?,
                    Err(_) => wire::deadline_passed(),
                },
                None => work.await?,
            };
            let (mut parts, body) = response.into_parts();
            wire::tell_undecodable(&mut parts);
            Ok(observe(http::Response::from_parts(parts, body), finish))
        })
    }
}
