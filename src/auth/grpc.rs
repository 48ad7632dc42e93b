//! Authentication on the gRPC server (the edge's layer, `crate::api::edge`, asks first):
//! every call except health checks and reflection, then the tenant's rate limit; the
//! [`Principal`] goes to the services in the request's extensions.

use std::sync::Arc;

use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

use super::limits::RateLimiter;
use super::{AuthError, Authenticator, Principal, UNAUTHENTICATED_MESSAGE};
use crate::error::ErrorCode;

/// Services anyone may call: probes and schema discovery carry no tenant data.
const OPEN: [&str; 3] = ["/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"];

/// The authenticator and the rate limiter of the gRPC listener.
#[derive(Clone)]
pub struct GrpcAuth {
    auth: Authenticator,
    rate: Arc<RateLimiter>,
}

/// What [`GrpcAuth::check`] decided about a request.
pub enum Checked {
    /// Let through (with its principal in the request's extensions, unless open to anyone).
    Admitted,
    Refused(tonic::Status),
    /// A JWT signed with a key the JWKS URL may have just added: [`GrpcAuth::check_again`]
    /// after fetching the keys.
    UnknownKey,
}

impl GrpcAuth {
    /// Draws on a rate limiter shared with another listener (the MCP endpoint), so a
    /// tenant's rate is one budget per replica.
    pub fn sharing(auth: Authenticator, rate: Arc<RateLimiter>) -> Self {
        Self { auth, rate }
    }

    pub fn check<B>(&self, req: &mut http::Request<B>) -> Checked {
        if OPEN.iter().any(|p| req.uri().path().starts_with(p)) {
            return Checked::Admitted;
        }
        match self.auth.authenticate(req.headers()) {
            Err(AuthError::UnknownKey) => Checked::UnknownKey,
            principal => match admit(principal, &self.rate, req) {
                Ok(()) => Checked::Admitted,
                Err(status) => Checked::Refused(status),
            },
        }
    }

    /// Fetches the JWKS URL's keys, then decides.
    pub async fn check_again<B>(&self, req: &mut http::Request<B>) -> Result<(), tonic::Status> {
        self.auth.refresh_keys().await;
        admit(self.auth.authenticate(req.headers()), &self.rate, req)
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
