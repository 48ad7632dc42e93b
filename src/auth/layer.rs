//! The tower layer on the gRPC server: authenticates every call except health checks and
//! reflection, applies the tenant's rate limit, and hands the [`Principal`] to the services
//! in the request's extensions.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::{BoxFuture, Either, Ready};
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

use super::limits::{RateLimit, RateLimiter};
use super::{AuthError, Authenticator, Principal, UNAUTHENTICATED_MESSAGE};
use crate::error::ErrorCode;

/// Services anyone may call: probes and schema discovery carry no tenant data.
const OPEN: [&str; 3] = ["/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"];

#[derive(Clone)]
pub struct AuthLayer {
    auth: Authenticator,
    rate: Arc<RateLimiter>,
}

impl AuthLayer {
    pub fn new(auth: Authenticator, rate: RateLimit) -> Self {
        Self::sharing(auth, Arc::new(RateLimiter::new(rate)))
    }

    /// A layer that draws on a rate limiter shared with another listener (the MCP endpoint),
    /// so a tenant's rate is one budget per replica.
    pub fn sharing(auth: Authenticator, rate: Arc<RateLimiter>) -> Self {
        Self { auth, rate }
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService { inner, auth: self.auth.clone(), rate: self.rate.clone() }
    }
}

#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    auth: Authenticator,
    rate: Arc<RateLimiter>,
}

type Refusal<E> = Ready<Result<http::Response<tonic::body::Body>, E>>;

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for AuthService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    ReqBody: Send + 'static,
    S::Future: Send + 'static,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Either<Refusal<S::Error>, BoxFuture<'static, Result<Self::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqBody>) -> Self::Future {
        let path = req.uri().path();
        let mut unknown_key = false;
        if !OPEN.iter().any(|p| path.starts_with(p)) {
            match self.auth.authenticate(req.headers()) {
                // A JWT with a key the JWKS URL may have just added: fetch the keys, then decide.
                Err(AuthError::UnknownKey) => unknown_key = true,
                principal => {
                    if let Err(status) = admit(principal, &self.rate, &mut req) {
                        return Either::Left(futures::future::ready(Ok(status.into_http())));
                    }
                }
            }
        }
        // Take the service that was driven to readiness, leave a clone in its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if unknown_key {
            let (auth, rate) = (self.auth.clone(), self.rate.clone());
            return Either::Right(Box::pin(async move {
                auth.refresh_keys().await;
                if let Err(status) = admit(auth.authenticate(req.headers()), &rate, &mut req) {
                    return Ok(status.into_http());
                }
                Ok(inner.call(req).await?.map(tonic::body::Body::new))
            }));
        }
        let fut = inner.call(req);
        Either::Right(Box::pin(async move { Ok(fut.await?.map(tonic::body::Body::new)) }))
    }
}

/// Lets an authenticated caller within its tenant's rate through, with its principal in the
/// request's extensions.
fn admit<B>(principal: Result<Principal, AuthError>, rate: &RateLimiter, req: &mut http::Request<B>) -> Result<(), tonic::Status> {
    let principal = principal.map_err(|_| tonic::Status::new(Code::from_i32(ErrorCode::Unauthenticated.grpc()), UNAUTHENTICATED_MESSAGE))?;
    if let Err(wait) = rate.check(&principal.tenant) {
        return Err(tonic::Status::with_error_details(
            Code::from_i32(ErrorCode::ResourceExhausted.grpc()),
            format!("request rate limit of this tenant reached; retry in {} ms", wait.as_millis().max(1)),
            ErrorDetails::with_retry_info(Some(wait)),
        ));
    }
    req.extensions_mut().insert(principal);
    Ok(())
}
